// This process's rank and the number of ranks in MPI_COMM_WORLD, for the
// multi-rank tests.
#pragma once

#include <mpi.h>

namespace test_tools {

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace test_tools

// World = nodes x ranks-per-node, rank = node * L + local. The launcher side
// reads the node-local rank from MPI (shared-memory split), so it works the
// same under mpiexec and Slurm's srun; BURST_GPUS_PER_NODE=G overrides the
// node size, so one host can emulate N nodes of G ranks.
#pragma once

#include <mpi.h>

#include <string>

namespace burst {

struct Topology {
  int world_size = 1;
  int rank = 0;
  int nodes = 1;           // N
  int ranks_per_node = 1;  // L
  int node = 0;            // rank / L
  int local = 0;           // rank % L
  bool emulated = false;   // from BURST_GPUS_PER_NODE rather than the hardware
  std::string source;      // how the node size was found

  int rank_of(int n, int l) const { return n * ranks_per_node + l; }

  // Pure arithmetic, for tests and simulators. Throws Error(Config) when
  // per_node does not divide world.
  static Topology from_sizes(int world, int rank, int per_node, bool emulated, const std::string& source);
  // Detect on `comm` (collective). `per_node_env` is the value of
  // BURST_GPUS_PER_NODE (nullptr when unset). The ranks of one hardware node
  // must be contiguous, which block placement (the default of mpiexec and srun)
  // gives; Runtime reorders the world so that it holds.
  static Topology detect(MPI_Comm comm, const char* per_node_env);
  std::string describe() const;  // "2 nodes x 2 ranks (BURST_GPUS_PER_NODE)"
};

// Node-local rank and size from MPI's shared-memory split (collective).
void node_local_rank(MPI_Comm comm, int* local_rank, int* local_size, int* node_index, int* node_count);

}  // namespace burst

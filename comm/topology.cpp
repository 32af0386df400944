#include "comm/topology.hpp"

#include "core/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace burst {

Topology Topology::from_sizes(int world, int rank, int per_node, bool emulated, const std::string& source) {
  BURST_CHECK_CONFIG(world >= 1, "world size ", world, " must be at least 1");
  BURST_CHECK_CONFIG(rank >= 0 && rank < world, "rank ", rank, " must be in [0, ", world, ")");
  BURST_CHECK_CONFIG(per_node >= 1, "ranks per node = ", per_node, " (", source, ") must be at least 1");
  BURST_CHECK_CONFIG(world % per_node == 0, "ranks per node = ", per_node, " (", source, ") does not divide the ", world,
                     " ranks: every node must hold the same number of ranks");
  Topology t;
  t.world_size = world;
  t.rank = rank;
  t.ranks_per_node = per_node;
  t.nodes = world / per_node;
  t.node = rank / per_node;
  t.local = rank % per_node;
  t.emulated = emulated;
  t.source = source;
  return t;
}

void node_local_rank(MPI_Comm comm, int* local_rank, int* local_size, int* node_index, int* node_count) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm shm;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
  MPI_Comm_rank(shm, local_rank);
  MPI_Comm_size(shm, local_size);
  MPI_Comm_free(&shm);
  // Node index: rank among the node leaders (local rank 0), broadcast in the node.
  MPI_Comm leaders;
  MPI_Comm_split(comm, *local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
  int idx = 0, count = 0;
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &idx);
    MPI_Comm_size(leaders, &count);
    MPI_Comm_free(&leaders);
  }
  MPI_Comm shm2;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm2);
  int both[2] = {idx, count};
  MPI_Bcast(both, 2, MPI_INT, 0, shm2);
  MPI_Comm_free(&shm2);
  *node_index = both[0];
  *node_count = both[1];
}

Topology Topology::detect(MPI_Comm comm, const char* per_node_env) {
  int world = 1, rank = 0;
  MPI_Comm_size(comm, &world);
  MPI_Comm_rank(comm, &rank);
  if (per_node_env != nullptr && *per_node_env != '\0') {
    errno = 0;
    char* end = nullptr;
    long g = std::strtol(per_node_env, &end, 10);
    BURST_CHECK_CONFIG(errno == 0 && end && *end == '\0' && g >= 1 && g <= 1 << 20, "BURST_GPUS_PER_NODE = '",
                       per_node_env, "' must be a positive integer");
    return from_sizes(world, rank, static_cast<int>(g), true, "BURST_GPUS_PER_NODE");
  }
  int lr = 0, ls = 1, ni = 0, nc = 1;
  node_local_rank(comm, &lr, &ls, &ni, &nc);
  // Every node must hold the same number of ranks.
  int mn = 0, mx = 0;
  MPI_Allreduce(&ls, &mn, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(&ls, &mx, 1, MPI_INT, MPI_MAX, comm);
  BURST_CHECK_CONFIG(mn == mx, "nodes hold different numbers of ranks (", mn, " to ", mx,
                     "): launch the same number of ranks on every node");
  Topology t = from_sizes(world, rank, ls, false, "MPI shared-memory split");
  BURST_CHECK_CONFIG(t.node == ni && t.local == lr, "rank ", rank, " is local rank ", lr, " of node ", ni,
                     " but block placement needs node ", t.node, " local ", t.local,
                     "; the runtime reorders ranks, so this is an internal error");
  return t;
}

std::string Topology::describe() const {
  return std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " x " + std::to_string(ranks_per_node) +
         (ranks_per_node == 1 ? " rank" : " ranks") + " (" + source + ")";
}

}  // namespace burst

// `burst info`: backend and devices, ranks, node topology, the GPU each rank
// binds to, the launcher environment, and the version of every dependency.
#include "cli/commands.hpp"
#include "cli/environment.hpp"
#include "cli/versions.hpp"
#include "comm/collectives.hpp"
#include "core/blas_core.hpp"
#include "core/kokkos_compat.hpp"

#ifdef BURST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace burst::cli {

static std::string device_line(const Runtime& rt) {
#ifdef BURST_HAVE_CUDA
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, rt.device_id()) == cudaSuccess) {
    std::ostringstream os;
    os << "GPU " << rt.device_id() << " of " << rt.device_count() << " (" << p.name << ", sm_" << p.major << p.minor
       << ", " << (p.totalGlobalMem >> 20) << " MiB)";
    return os.str();
  }
  return "GPU " + std::to_string(rt.device_id()) + " (properties unavailable)";
#else
  (void)rt;
  return "no GPU (host backend, " + std::to_string(Kokkos::DefaultExecutionSpace::concurrency()) + " threads)";
#endif
}

int cmd_info(Runtime& rt) {
  const Topology& t = rt.topology();
  char line[512];
  std::snprintf(line, sizeof line, "rank %d: node %d local %d | host %s (hardware local rank %d of %d) | %s", t.rank,
                t.node, t.local, rt.hostname().c_str(), rt.hw_local_rank(), rt.hw_local_size(), device_line(rt).c_str());
  std::vector<char> all(rt.rank() == 0 ? sizeof line * rt.size() : 1);
  MPI_Gather(line, sizeof line, MPI_CHAR, all.data(), sizeof line, MPI_CHAR, 0, rt.world());
  if (rt.rank() != 0) return 0;

  std::printf("BurstEngine %s\n", BURST_VERSION);
  std::printf("backend: Kokkos %s, default execution space %s, host space %s\n", kx::version_string().c_str(),
              Kokkos::DefaultExecutionSpace::name(), Kokkos::DefaultHostExecutionSpace::name());
  std::printf("ranks: %d\n", t.world_size);
  std::printf("topology: %s\n", t.describe().c_str());
  std::printf("  intra-node ring: %d ranks per node; inter-node ring: %d ranks with the same local index\n",
              t.ranks_per_node, t.nodes);
  for (int r = 0; r < rt.size(); ++r) std::printf("  %s\n", &all[sizeof line * r]);
  std::printf("waits: %s (%d ranks on this node, %d CPUs in their affinities; BURST_WAIT overrides)\n",
              wait_mode_name(wait_mode()), rt.hw_local_size(), rt.node_cores());
  std::printf("environment:\n");
  // cli/environment.hpp: every variable the engine reads, then the launcher's and libraries' that change
  // what a run does, so a run's log records the settings it ran under.
  std::printf("  %s\n", run_environment("\n  ").c_str());
  std::printf("dependencies:\n");
  for (auto& [name, ver] : dependency_versions()) std::printf("  %-14s %s\n", name.c_str(), ver.c_str());
  const std::string blas = blas_core_name();
  if (!blas.empty()) std::printf("host BLAS kernels: %s\n", blas.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace burst::cli

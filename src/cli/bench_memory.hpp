// Bench sizes against the memory there is: a case whose views cannot be
// allocated is refused up front (bad input, status 2, naming the case and
// the bytes) instead of ending in the allocator's error.
#pragma once

#include "core/error.hpp"
#include "core/memory.hpp"
#include "io/h5.hpp"

#include <mpi.h>

#ifdef BURST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace burst::cli {

// What this process may use of the host's memory (inf when unknown): the
// least of the physical memory, a cgroup's memory limit and the
// address-space limit (io::process_memory_limit). The limit of host-side
// work (a check's reference, host mirrors) on any build.
inline double host_memory_available() {
  const std::uint64_t limit = io::process_memory_limit();
  return limit > 0 ? double(limit) : INFINITY;
}

// The memory a bench's device views can take: the device's free memory on
// CUDA builds, on host builds host_memory_available().
inline double bench_memory_available(const char** what) {
#ifdef BURST_HAVE_CUDA
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    *what = "free device memory";
    return double(free_b);
  }
#endif
  *what = "memory this process may use";
  return host_memory_available();
}

inline std::int64_t whole_bytes(double b) { return std::int64_t(std::min(b, 9e18)); }

// The views one call of the portable float attention kernel takes with its
// gradients (bench attention's single-rank cases, the tile costs): q, O,
// dO, dQ [S, n, d]; k, v, dK, dV [S, n_kv, d]; the LSE and D [S, n].
inline double float_attention_views_bytes(long S, long n, long nkv, long d) {
  return 4.0 * double(S) * (4.0 * double(n) * double(d) + 4.0 * double(nkv) * double(d) + 2.0 * double(n));
}

// `bytes`: what the case allocates at once (its large views: a lower bound).
inline void check_bench_fits(const std::string& what, double bytes) {
  const char* where = "";
  const double avail = bench_memory_available(&where);
  BURST_CHECK_CONFIG(bytes <= avail, what, " needs ", format_bytes(whole_bytes(bytes)), " (", whole_bytes(bytes),
                     " bytes) of memory, more than the ", where, " (", format_bytes(whole_bytes(avail)), ")");
}

// The same for a bench of several ranks, `bytes` per rank: on host builds
// the ranks of a host share its memory (physical, a cgroup's limit: their
// sum is checked; a machine that overcommits would otherwise kill the run
// part way, with no message), while an address-space limit binds each
// process alone; on CUDA builds each rank has its device. The answer is
// agreed (the most crowded host decides for every rank) before any rank
// allocates.
inline void check_bench_fits_ranks(MPI_Comm world, const std::string& what, double bytes) {
  int here = 1;
  const char* where = "";
  double shared = bench_memory_available(&where), own = INFINITY;
#ifndef BURST_HAVE_CUDA
  MPI_Comm host;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  MPI_Comm_size(host, &here);
  MPI_Comm_free(&host);
  const std::uint64_t h = io::host_memory_limit();
  shared = h > 0 ? double(h) : INFINITY;
  own = host_memory_available();  // with RLIMIT_AS
  where = "memory the ranks of a host may use";
#endif
  // the host's ranks together against what they share; one rank against its own limit; the ranks per host
  double over[3] = {bytes * here / shared, bytes / own, double(here)};
  MPI_Allreduce(MPI_IN_PLACE, over, 3, MPI_DOUBLE, MPI_MAX, world);
  const int most = int(over[2]);
  // (the shared limit first: the process's own is at most the host's, so
  // when both are exceeded the host's is the one to name)
  BURST_CHECK_CONFIG(over[0] > 1 || over[1] <= 1, what, " needs ", format_bytes(whole_bytes(bytes)), " (", whole_bytes(bytes),
                     " bytes) per rank, more than the memory one process may use (",
                     format_bytes(whole_bytes(bytes / over[1])), ", its address-space limit)");
  BURST_CHECK_CONFIG(over[0] <= 1, what, " needs ", format_bytes(whole_bytes(bytes)), " (", whole_bytes(bytes), " bytes) per rank",
                     most > 1 ? " x " + std::to_string(most) + " ranks on a host" : std::string(), ", more than the ", where,
                     " (", format_bytes(whole_bytes(bytes * most / over[0])), ")");
}

}  // namespace burst::cli

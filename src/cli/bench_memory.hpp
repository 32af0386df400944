// Bench sizes against the memory there is: a case whose views cannot be
// allocated is refused up front (bad input, status 2, naming the case and
// the bytes) instead of ending in the allocator's error.
#pragma once

#include "core/error.hpp"
#include "core/memory.hpp"
#include "io/h5.hpp"

#ifdef BURST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace burst::cli {

// The memory a bench's device views can take: the device's free memory on
// CUDA builds, on host builds what this process may use: the least of the
// physical memory, a cgroup's memory limit and the address-space limit
// (io::process_memory_limit; inf when none is known).
inline double bench_memory_available(const char** what) {
#ifdef BURST_HAVE_CUDA
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    *what = "free device memory";
    return double(free_b);
  }
#endif
  *what = "memory this process may use";
  const std::uint64_t limit = io::process_memory_limit();
  return limit > 0 ? double(limit) : INFINITY;
}

// `bytes`: what the case allocates at once (its large views: a lower bound).
inline void check_bench_fits(const std::string& what, double bytes) {
  const char* where = "";
  const double avail = bench_memory_available(&where);
  const auto whole = [](double b) { return std::int64_t(std::min(b, 9e18)); };
  BURST_CHECK_CONFIG(bytes <= avail, what, " needs ", format_bytes(whole(bytes)), " (", whole(bytes),
                     " bytes) of memory, more than the ", where, " (", format_bytes(whole(avail)), ")");
}

}  // namespace burst::cli

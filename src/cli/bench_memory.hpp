// Bench sizes against the memory there is: a case whose views cannot be
// allocated is refused up front (bad input, status 2, naming the case and
// the bytes) instead of ending in the allocator's error.
#pragma once

#include "core/error.hpp"
#include "core/memory.hpp"

#ifdef BURST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace burst::cli {

// The memory a bench's device views can take: the device's free memory on
// CUDA builds, the host's physical memory on host builds (inf when unknown).
inline double bench_memory_available(const char** what) {
#ifdef BURST_HAVE_CUDA
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    *what = "free device memory";
    return double(free_b);
  }
#endif
  *what = "physical host memory";
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : INFINITY;
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

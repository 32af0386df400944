// Switches read from the environment, checked where they are read: a value
// outside the switch's list is a configuration error (status 2) naming the
// variable, the value and what the values mean, never taken as either side.
#pragma once

#include "core/error.hpp"

#include <cstdlib>
#include <string>

namespace burst {

// A 0 / 1 switch: unset or empty gives dflt. meaning: e.g. "1 (poison) or 0".
inline bool env_switch(const char* var, bool dflt, const char* meaning) {
  const char* e = std::getenv(var);
  const std::string v = e ? e : "";
  BURST_CHECK_CONFIG(v.empty() || v == "0" || v == "1", var, "='", v, "': expected ", meaning);
  return v.empty() ? dflt : v == "1";
}

// BURST_ROPE_CUDA (kernels/cuda/rope_cuda.hpp): the CUDA RoPE (1, the default) or the portable kernel (0).
// One reading, so that `burst` checks it at start on every build (cli/environment.hpp) and the CUDA RoPE
// takes the same value.
inline bool rope_cuda_switch() {
  return env_switch("BURST_ROPE_CUDA", true, "1 (the CUDA RoPE, the default) or 0 (the portable kernel)");
}

// BURST_FA_MERGE (kernels/attention.hpp, flash_attention_forward_merge): the ring forward's visiting
// blocks merged into the running (O, lse) inside the CUDA forward's epilogue (1, the default) or written
// as a partial (O_b, lse_b) and merged by a second kernel (0). Read once, checked at start like the others.
inline bool fa_merge_switch() {
  return env_switch("BURST_FA_MERGE", true,
                    "1 (the CUDA forward merges into the running O, the default) or 0 (a partial O_b, then the merge kernel)");
}

// BURST_GEMM_TUNE (kernels/cuda/gemm_lt.h): 1 times the cuBLASLt heuristic's first candidates at each GEMM
// shape's first call and keeps the fastest; 0 (the default) takes the heuristic's first, the same algorithm
// (and bits) on every run. Read when a CUDA GEMM shape's plan is made, checked at start.
inline bool gemm_tune_switch() {
  return env_switch("BURST_GEMM_TUNE", false,
                    "0 (the cuBLASLt heuristic's first algorithm, the default) or 1 (the fastest of its first 8, timed)");
}

// KOKKOS_CUDA_MALLOC_ASYNC (cmake/patches/kokkos-05): Kokkos' CUDA allocations from the device's
// stream-ordered pool (1, the default) or plain cudaMalloc (0). The patched Kokkos reads only its first
// character ('0' is off), so "off" or "false" would mean on there: checked at start on every build
// (cli/environment.hpp) so that only 0, 1 or unset reach it; core/memory.cpp reads it here.
inline bool cuda_malloc_async_switch() {
  return env_switch("KOKKOS_CUDA_MALLOC_ASYNC", true,
                    "1 (Kokkos' CUDA allocations from the stream-ordered pool, the default) or 0 (plain cudaMalloc)");
}

}  // namespace burst

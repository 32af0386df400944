// The CUDA backend of kernels/rope.hpp (the tpl layer): contiguous bf16 and
// float views in CUDA memory whose head dim is a multiple of 16 go to
// kernels/cuda/rope_cuda.h (a block per token: the angles once in shared
// memory, 16-byte vectors); other views run the portable kernel.
// Included by kernels/rope.hpp only, on CUDA builds.
#pragma once

#ifndef BURST_ROPE_HPP_INCLUDES_CUDA
#error "include kernels/rope.hpp, not kernels/cuda/rope_cuda.hpp"
#endif

#include "kernels/cuda/rope_cuda.h"

#include <cstdlib>
#include <type_traits>

namespace burst::kernels::cuda {

// Defined in kernels/cuda/attention_cuda.cpp (declared there too).
void check(cudaError_t e, const char* what);

template <class T> constexpr bool rope_type() {
  using U = std::remove_const_t<T>;
  return std::is_same<U, bf16>::value || std::is_same<U, float>::value;
}
template <class TI, class TO, class Mem> constexpr bool rope_dispatches() {
  return rope_type<TI>() && rope_type<TO>() && std::is_same<Mem, Kokkos::CudaSpace>::value;
}
// The CUDA RoPE runs only with BURST_ROPE_CUDA=1 until its first GPU run has
// passed RopeCuda.MatchesDoubleReference (written 2026-12-05, when the
// session's device time had run out): until then the portable kernel, run
// on the H200 since 2026-12-02, stays the default.
inline bool rope_cuda_enabled() {
  const char* v = std::getenv("BURST_ROPE_CUDA");
  return v != nullptr && v[0] == '1' && v[1] == '\0';
}

template <class T> constexpr int rope_dtype() { return std::is_same<std::remove_const_t<T>, bf16>::value ? 1 : 0; }

}  // namespace burst::kernels::cuda

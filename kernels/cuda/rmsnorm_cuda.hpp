// The CUDA backend of kernels/rmsnorm.hpp (the tpl layer): bf16 and float
// views in CUDA memory, contiguous, go to kernels/cuda/rmsnorm_cuda.h (a
// block per row instead of the portable thread per row, whose loads stride
// by a whole row across a warp; and a chunked, deterministic dw instead of
// one thread per column over all rows). Other views run the portable kernels.
// Included by kernels/rmsnorm.hpp only, on CUDA builds.
#pragma once

#ifndef BURST_RMSNORM_HPP_INCLUDES_CUDA
#error "include kernels/rmsnorm.hpp, not kernels/cuda/rmsnorm_cuda.hpp"
#endif

#include "kernels/cuda/rmsnorm_cuda.h"

#include <type_traits>

namespace burst::kernels::cuda {

// Defined in kernels/cuda/attention_cuda.cpp (declared there too).
void check(cudaError_t e, const char* what);
void* workspace(size_t bytes);

template <class T, class Mem> constexpr bool rmsnorm_dispatches() {
  using U = std::remove_const_t<T>;
  return (std::is_same<U, bf16>::value || std::is_same<U, float>::value) && std::is_same<Mem, Kokkos::CudaSpace>::value;
}

template <class... V> bool all_contiguous(const V&... v) { return (v.span_is_contiguous() && ...); }

template <class T> constexpr int rn_dtype() { return std::is_same<std::remove_const_t<T>, bf16>::value ? 1 : 0; }

}  // namespace burst::kernels::cuda

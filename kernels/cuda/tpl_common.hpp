// What the CUDA tpl headers (attention_cuda.hpp, elementwise_cuda.hpp,
// rmsnorm_cuda.hpp, rope_cuda.hpp) share: the error check and the workspace
// (defined in kernels/cuda/attention_cuda.cpp), the view tests that decide
// whether a call goes to the CUDA kernels, and the kernels' dtype code.
// Included by those headers only, on CUDA builds.
#pragma once

#include "core/views.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

namespace burst::kernels::cuda {

// Throws burst::Error (Internal) naming `what` and the CUDA error.
void check(cudaError_t e, const char* what);

// A device buffer of at least `bytes` bytes for the kernels' workspace, kept
// between calls (stream order on the one default stream makes reuse safe);
// released at Kokkos::finalize. nullptr for 0 bytes.
void* workspace(size_t bytes);

template <class Mem> constexpr bool in_cuda_mem() { return std::is_same<Mem, Kokkos::CudaSpace>::value; }
template <class T> constexpr bool is_bf16() { return std::is_same<std::remove_const_t<T>, bf16>::value; }
template <class T> constexpr bool bf16_or_float() { return is_bf16<T>() || std::is_same<std::remove_const_t<T>, float>::value; }
// The kernels' element type code: 1 = bf16, 0 = fp32.
template <class T> constexpr int dtype_code() { return is_bf16<T>() ? 1 : 0; }

template <class... V> bool all_contiguous(const V&... v) { return (v.span_is_contiguous() && ...); }

}  // namespace burst::kernels::cuda

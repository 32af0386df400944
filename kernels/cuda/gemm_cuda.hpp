// The CUDA backend of kernels/gemm.hpp (the tpl layer): row-major views in
// CUDA memory go to cuBLASLt (kernels/cuda/gemm_lt.h) when
//   - A and B hold the same type: bf16 (C bf16 or fp32; fp32 accumulation),
//     float (C float; plain fp32, no TF32) or double (C double);
//   - every view has unit column stride (LayoutRight, contiguous rows);
//   - m, n, k > 0 (k = 0 is C = beta C: the portable kernel does it).
// Everything else runs the portable kernel. The call is asynchronous on the
// default Kokkos::Cuda instance's stream, like every Kokkos kernel here.
// Included by kernels/gemm.hpp only, on CUDA builds.
#pragma once

#ifndef BURST_GEMM_HPP_INCLUDES_CUDA
#error "include kernels/gemm.hpp, not kernels/cuda/gemm_cuda.hpp"
#endif

#include "core/env.hpp"
#include "kernels/cuda/gemm_lt.h"

#include <type_traits>

namespace burst::kernels::cuda {

template <class T> constexpr int lt_type() {
  using U = std::remove_const_t<T>;
  return std::is_same<U, bf16>::value ? lt::kBF16 : std::is_same<U, float>::value ? lt::kF32 : std::is_same<U, double>::value ? lt::kF64 : -1;
}

template <class AV, class BV, class CV> constexpr bool gemm_dispatches() {
  constexpr bool dev = std::is_same<typename AV::memory_space, Kokkos::CudaSpace>::value &&
                       std::is_same<typename BV::memory_space, Kokkos::CudaSpace>::value &&
                       std::is_same<typename CV::memory_space, Kokkos::CudaSpace>::value;
  constexpr int a = lt_type<typename AV::value_type>(), b = lt_type<typename BV::value_type>(),
                c = lt_type<typename CV::value_type>();
  return dev && a >= 0 && a == b && (c == a || (a == lt::kBF16 && c == lt::kF32));
}

// Registers (once) a Kokkos finalize hook that frees cuBLASLt's handle and
// workspace before the CUDA context goes (kernels/cuda/gemm_cuda.cpp).
void gemm_lt_finalize_hook();
// Throws burst::Error (Internal) with the message of a failed lt::gemm.
[[noreturn]] void gemm_lt_fail(const char* msg, const lt::Gemm& g);

template <class V> bool unit_column_stride(const V& v) { return v.extent(0) <= 1 || v.extent(1) <= 1 || v.stride(1) == 1; }
template <class V> long row_stride(const V& v) {
  const long s = long(v.stride(0));
  return s > 0 ? s : long(v.extent(1));
}

template <class AV, class BV, class CV>
bool gemm_usable(const GemmShape& s, const AV& A, const BV& B, const CV& C) {
  return s.m > 0 && s.n > 0 && s.k > 0 && unit_column_stride(A) && unit_column_stride(B) && unit_column_stride(C);
}

// D = alpha op(A) op(B) + beta C into D (D may be C; a separate D has C's type and row stride).
template <class AV, class BV, class CV, class DV>
void gemm_lt(char ta, char tb, const GemmShape& s, double alpha, const AV& A, const BV& B, double beta, const CV& C,
             const DV& D) {
  gemm_lt_finalize_hook();
  lt::Gemm g;
  g.ta = ta, g.tb = tb, g.m = s.m, g.n = s.n, g.k = s.k;
  // A one-row (or one-column) view's stride(0) may not be its leading dimension.
  g.lda = A.extent(0) <= 1 ? long(A.extent(1)) : row_stride(A);
  g.ldb = B.extent(0) <= 1 ? long(B.extent(1)) : row_stride(B);
  g.ldc = C.extent(0) <= 1 ? long(C.extent(1)) : row_stride(C);
  g.a_type = lt::DType(lt_type<typename AV::value_type>());
  g.b_type = lt::DType(lt_type<typename BV::value_type>());
  g.c_type = lt::DType(lt_type<typename CV::value_type>());
  g.tune = &gemm_tune_switch;  // asked (BURST_GEMM_TUNE read) only when a shape's plan is made
  const char* err = lt::gemm(g, alpha, A.data(), B.data(), beta, C.data(), D.data(), Kokkos::Cuda().cuda_stream());
  if (err) gemm_lt_fail(err, g);
}
template <class AV, class BV, class CV>
void gemm_lt(char ta, char tb, const GemmShape& s, double alpha, const AV& A, const BV& B, double beta, const CV& C) {
  gemm_lt(ta, tb, s, alpha, A, B, beta, C, C);
}

}  // namespace burst::kernels::cuda

// C = alpha * op(A) * op(B) + beta * C on row-major 2-D views.
// op is 'N' (as stored) or 'T' (transposed), as in BLAS.
//
// Dispatch (the kokkos-kernels spec / impl / tpl split):
//  - host memory, float or double, Kokkos Kernels present: KokkosBlas::gemm,
//    which hands the call to the BLAS TPL (OpenBLAS);
//  - CUDA builds, device views of bf16 (C bf16 or float, fp32 accumulation),
//    float (plain fp32, no TF32) or double: cuBLASLt (kernels/cuda/gemm_cuda.hpp);
//  - everything else: gemm_portable, a plain Kokkos kernel accumulating in
//    accum_t<T> (bf16 -> float).
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#ifdef BURST_HAVE_KOKKOSKERNELS
#include <KokkosBlas3_gemm.hpp>
#endif

#include <type_traits>

namespace burst::kernels {

struct GemmShape {
  long m, n, k;
};

}  // namespace burst::kernels

#ifdef BURST_HAVE_CUDA
#define BURST_GEMM_HPP_INCLUDES_CUDA
#include "kernels/cuda/gemm_cuda.hpp"  // cuBLASLt for device views (the tpl layer)
#undef BURST_GEMM_HPP_INCLUDES_CUDA
#endif

namespace burst::kernels {

template <class AV, class BV, class CV>
GemmShape gemm_shape(char ta, char tb, const AV& A, const BV& B, const CV& C) {
  BURST_CHECK_INPUT(ta == 'N' || ta == 'T', "gemm: transA = '", ta, "' must be 'N' or 'T'");
  BURST_CHECK_INPUT(tb == 'N' || tb == 'T', "gemm: transB = '", tb, "' must be 'N' or 'T'");
  const long m = ta == 'N' ? long(A.extent(0)) : long(A.extent(1));
  const long ka = ta == 'N' ? long(A.extent(1)) : long(A.extent(0));
  const long kb = tb == 'N' ? long(B.extent(0)) : long(B.extent(1));
  const long n = tb == 'N' ? long(B.extent(1)) : long(B.extent(0));
  BURST_CHECK_INPUT(ka == kb, "gemm: inner dimensions differ: op(A) is ", m, " x ", ka, ", op(B) is ", kb, " x ", n);
  BURST_CHECK_INPUT(long(C.extent(0)) == m && long(C.extent(1)) == n, "gemm: C is ", C.extent(0), " x ", C.extent(1),
                    ", expected ", m, " x ", n);
  return {m, n, ka};
}

// The portable kernel: one thread per C element, k loop in accum_t.
template <class AV, class BV, class CV>
void gemm_portable(char ta, char tb, accum_t<typename CV::non_const_value_type> alpha, const AV& A, const BV& B,
                   accum_t<typename CV::non_const_value_type> beta, const CV& C) {
  using T = typename CV::non_const_value_type;
  using Acc = accum_t<T>;
  using Exec = typename CV::execution_space;
  const GemmShape s = gemm_shape(ta, tb, A, B, C);
  const bool at = ta == 'T', bt = tb == 'T';
  Kokkos::parallel_for(
      "burst::gemm_portable", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {s.m, s.n}),
      KOKKOS_LAMBDA(const long i, const long j) {
        Acc acc = 0;
        for (long p = 0; p < s.k; ++p) {
          const Acc a = at ? Acc(A(p, i)) : Acc(A(i, p));
          const Acc b = bt ? Acc(B(j, p)) : Acc(B(p, j));
          acc += a * b;
        }
        const Acc c0 = beta == Acc(0) ? Acc(0) : beta * Acc(C(i, j));  // beta = 0 ignores NaN in C, as BLAS
        C(i, j) = T(alpha * acc + c0);
      });
}

template <class AV, class BV, class CV>
void gemm(char ta, char tb, accum_t<typename CV::non_const_value_type> alpha, const AV& A, const BV& B,
          accum_t<typename CV::non_const_value_type> beta, const CV& C) {
  using T = typename CV::non_const_value_type;
  const GemmShape shape = gemm_shape(ta, tb, A, B, C);
  (void)shape;
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::gemm_dispatches<AV, BV, CV>()) {
    if (cuda::gemm_usable(shape, A, B, C)) {
      cuda::gemm_lt(ta, tb, shape, double(alpha), A, B, double(beta), C);
      return;
    }
  }
#endif
#ifdef BURST_HAVE_KOKKOSKERNELS
  constexpr bool host = std::is_same<typename CV::memory_space, Kokkos::HostSpace>::value;
  constexpr bool blas_type = (std::is_same<T, float>::value || std::is_same<T, double>::value) &&
                             std::is_same<typename AV::non_const_value_type, T>::value &&
                             std::is_same<typename BV::non_const_value_type, T>::value;  // not bf16 x bf16 -> float
  if constexpr (host && blas_type) {
    if (A.extent(0) > 0 && A.extent(1) > 0 && B.extent(0) > 0 && B.extent(1) > 0) {
      const char tas[2] = {ta, 0}, tbs[2] = {tb, 0};
      KokkosBlas::gemm(tas, tbs, T(alpha), A, B, T(beta), C);
      return;
    }
  }
#endif
  gemm_portable(ta, tb, alpha, A, B, beta, C);
}

// D = alpha * op(A) * op(B) + beta * C into a separate D of C's shape and
// type; C is only read. The model's residual x2 = x + o_proj(o) without
// copying x into x2 first: cuBLASLt reads C and writes D in the one pass
// (same row stride); everywhere else D = C is copied, then the GEMM runs in D.
template <class AV, class BV, class CV, class DV>
void gemm(char ta, char tb, accum_t<typename DV::non_const_value_type> alpha, const AV& A, const BV& B,
          accum_t<typename DV::non_const_value_type> beta, const CV& C, const DV& D) {
  static_assert(std::is_same<typename CV::non_const_value_type, typename DV::non_const_value_type>::value,
                "gemm: C and D hold the same type");
  BURST_CHECK_INPUT(C.extent(0) == D.extent(0) && C.extent(1) == D.extent(1), "gemm: D is ", D.extent(0), " x ",
                    D.extent(1), ", C is ", C.extent(0), " x ", C.extent(1));
  if (C.data() == D.data()) return gemm(ta, tb, alpha, A, B, beta, D);
  const GemmShape shape = gemm_shape(ta, tb, A, B, D);
  (void)shape;
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::gemm_dispatches<AV, BV, DV>() && std::is_same<typename CV::memory_space, Kokkos::CudaSpace>::value) {
    if (cuda::gemm_usable(shape, A, B, D) && cuda::unit_column_stride(C) &&
        (C.extent(0) <= 1 || cuda::row_stride(C) == cuda::row_stride(D))) {
      cuda::gemm_lt(ta, tb, shape, double(alpha), A, B, double(beta), C, D);
      return;
    }
  }
#endif
  Kokkos::deep_copy(D, C);
  gemm(ta, tb, alpha, A, B, beta, D);
}

}  // namespace burst::kernels

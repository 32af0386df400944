// RMSNorm over the last dimension: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#ifdef BURST_HAVE_CUDA
#define BURST_RMSNORM_HPP_INCLUDES_CUDA
#include "kernels/cuda/rmsnorm_cuda.hpp"  // block-per-row kernels for bf16 / float device views
#undef BURST_RMSNORM_HPP_INCLUDES_CUDA
#endif

namespace burst::kernels {

// x, y [N, H]; w [H]; rstd [N] (saved for backward).
template <class T, class Mem>
void rmsnorm_forward(Kokkos::View<const T**, Layout, Mem> x, Kokkos::View<const T*, Layout, Mem> w, double eps,
                     Kokkos::View<T**, Layout, Mem> y, Kokkos::View<accum_t<T>*, Layout, Mem> rstd) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  const long N = x.extent(0), H = x.extent(1);
  BURST_CHECK_INPUT(long(w.extent(0)) == H && y.extent(0) == x.extent(0) && long(y.extent(1)) == H &&
                        long(rstd.extent(0)) == N,
                    "rmsnorm: x is [", N, ", ", H, "], w [", w.extent(0), "], y [", y.extent(0), ", ", y.extent(1),
                    "], rstd [", rstd.extent(0), "]");
  BURST_CHECK_INPUT(eps > 0, "rmsnorm: eps = ", eps, " must be > 0");
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::rmsnorm_dispatches<T, Mem>()) {
    if (cuda::all_contiguous(x, w, y, rstd)) {
      cuda::check(rn::rmsnorm_forward(cuda::dtype_code<T>(), N, H, x.data(), w.data(), float(eps), y.data(), rstd.data(),
                                      Kokkos::Cuda().cuda_stream()),
                  "rmsnorm forward (kernels/cuda)");
      return;
    }
  }
#endif
  Kokkos::parallel_for(
      "burst::rmsnorm_forward", Kokkos::RangePolicy<Exec>(0, N), KOKKOS_LAMBDA(const long i) {
        Acc ss = 0;
        for (long h = 0; h < H; ++h) ss += Acc(x(i, h)) * Acc(x(i, h));
        const Acc r = Acc(1) / kx::sqrt(ss / Acc(H) + Acc(eps));
        rstd(i) = r;
        for (long h = 0; h < H; ++h) y(i, h) = T(Acc(x(i, h)) * r * Acc(w(h)));
      });
}

// dx = rstd * (g - x * rstd^2 * mean(g * x)) [+ residual], g = dy * w; dw = sum_i dy * x * rstd.
// dw is added to (accumulated over micro-batches), dx is written. A residual
// (the block's skip connection; empty = none) is added in the accumulation
// type before dx's one rounding: the pass a separate add would cost, saved.
template <class T, class Mem>
void rmsnorm_backward(Kokkos::View<const T**, Layout, Mem> dy, Kokkos::View<const T**, Layout, Mem> x,
                      Kokkos::View<const T*, Layout, Mem> w, Kokkos::View<const accum_t<T>*, Layout, Mem> rstd,
                      Kokkos::View<T**, Layout, Mem> dx, Kokkos::View<accum_t<T>*, Layout, Mem> dw,
                      Kokkos::View<const T**, Layout, Mem> residual = {}) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  const long N = x.extent(0), H = x.extent(1);
  BURST_CHECK_INPUT(dy.extent(0) == x.extent(0) && dy.extent(1) == x.extent(1) && dx.extent(0) == x.extent(0) &&
                        dx.extent(1) == x.extent(1) && long(dw.extent(0)) == H && long(rstd.extent(0)) == N,
                    "rmsnorm backward: shapes of dy, x, dx, dw, rstd disagree");
  const bool has_res = residual.data() != nullptr;
  BURST_CHECK_INPUT(!has_res || (residual.extent(0) == x.extent(0) && residual.extent(1) == x.extent(1)),
                    "rmsnorm backward: the residual is ", residual.extent(0), " x ", residual.extent(1), ", x is ",
                    x.extent(0), " x ", x.extent(1));
  BURST_CHECK_INPUT(!has_res || residual.data() != dx.data(),
                    "rmsnorm backward: the residual must not be dx itself (dx is written while rows are read)");
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::rmsnorm_dispatches<T, Mem>()) {
    if (cuda::all_contiguous(dy, x, w, rstd, dx, dw) && (!has_res || residual.span_is_contiguous())) {
      void* ws = cuda::workspace(rn::rmsnorm_backward_workspace(N, H));
      cuda::check(rn::rmsnorm_backward(cuda::dtype_code<T>(), N, H, dy.data(), x.data(), w.data(), rstd.data(),
                                       has_res ? residual.data() : nullptr, dx.data(), dw.data(), ws,
                                       Kokkos::Cuda().cuda_stream()),
                  "rmsnorm backward (kernels/cuda)");
      return;
    }
  }
#endif
  Kokkos::parallel_for(
      "burst::rmsnorm_backward_dx", Kokkos::RangePolicy<Exec>(0, N), KOKKOS_LAMBDA(const long i) {
        const Acc r = rstd(i);
        Acc gx = 0;
        for (long h = 0; h < H; ++h) gx += Acc(dy(i, h)) * Acc(w(h)) * Acc(x(i, h));
        const Acc c = r * r * gx / Acc(H);
        for (long h = 0; h < H; ++h)
          dx(i, h) = T(r * (Acc(dy(i, h)) * Acc(w(h)) - Acc(x(i, h)) * c) + (has_res ? Acc(residual(i, h)) : Acc(0)));
      });
  // Column sums, each column summed over the rows in order: deterministic,
  // no atomics. On a device a thread per column (a warp reads consecutive
  // columns of a row); on the host a thread per block of B columns, whose
  // row loop reads B consecutive values and keeps B independent sums: the
  // same order per column (the same result up to where the compiler forms
  // FMAs), without a dependent add chain per column or a stride of a whole
  // row per element (2048 x 4096 floats on a 2-core CPU: the backward 89 ->
  // 15 ms, NOTES "RMSNorm", v2 host).
  constexpr long B = is_host_exec<Exec>() ? 16 : 1;
  Kokkos::parallel_for(
      "burst::rmsnorm_backward_dw", Kokkos::RangePolicy<Exec>(0, (H + B - 1) / B), KOKKOS_LAMBDA(const long blk) {
        const long h0 = blk * B, nb = H - h0 < B ? H - h0 : B;
        Acc s[B];
        for (long b = 0; b < B; ++b) s[b] = 0;
        if (nb == B) {  // a whole block: a constant trip count, which the compiler vectorises
          for (long i = 0; i < N; ++i) {
            const Acc r = rstd(i);
            for (long b = 0; b < B; ++b) s[b] += Acc(dy(i, h0 + b)) * Acc(x(i, h0 + b)) * r;
          }
        } else {
          for (long i = 0; i < N; ++i) {
            const Acc r = rstd(i);
            for (long b = 0; b < nb; ++b) s[b] += Acc(dy(i, h0 + b)) * Acc(x(i, h0 + b)) * r;
          }
        }
        for (long b = 0; b < nb; ++b) dw(h0 + b) += s[b];
      });
}

}  // namespace burst::kernels

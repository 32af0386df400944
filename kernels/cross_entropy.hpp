// Cross-entropy over logits [N, V] with an ignore index. The fused LM head
// (kernels/lm_head_loss.hpp) calls it per chunk of tokens. On CUDA builds,
// bf16 / float device views go to one kernel per call (online LSE, loss and
// gradient in place: kernels/cuda/cross_entropy_cuda.hpp).
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#include <cstdint>

namespace burst::kernels {

constexpr std::int32_t kIgnoreIndex = -100;

struct LossSum {
  double sum = 0;   // sum of -log p(target) over valid tokens
  long valid = 0;   // tokens whose target is not the ignore index
};

}  // namespace burst::kernels

#ifdef BURST_HAVE_CUDA
#define BURST_CROSS_ENTROPY_HPP_INCLUDES_CUDA
#include "kernels/cuda/cross_entropy_cuda.hpp"  // one-kernel online LSE for bf16 / float device views
#undef BURST_CROSS_ENTROPY_HPP_INCLUDES_CUDA
#endif

namespace burst::kernels {

// Per-token losses into `loss` (0 for ignored tokens) and, when dlogits is
// non-empty, dlogits = (softmax - onehot) * grad_scale (grad_scale is
// 1 / N_valid of the whole group for a mean loss; 0 for ignored rows).
template <class T, class Mem>
LossSum cross_entropy(Kokkos::View<const T**, Layout, Mem> logits, Kokkos::View<const std::int32_t*, Layout, Mem> target,
                      Kokkos::View<accum_t<T>*, Layout, Mem> loss, Kokkos::View<T**, Layout, Mem> dlogits,
                      double grad_scale) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  const long N = logits.extent(0), V = logits.extent(1);
  BURST_CHECK_INPUT(long(target.extent(0)) == N && long(loss.extent(0)) == N, "cross_entropy: ", N, " rows of logits but ",
                    target.extent(0), " targets and ", loss.extent(0), " loss entries");
  const bool grad = dlogits.extent(0) > 0;
  if (grad) BURST_CHECK_INPUT(long(dlogits.extent(0)) == N && long(dlogits.extent(1)) == V, "cross_entropy: dlogits shape");
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::ce_dispatches<T, Mem>()) {
    if (cuda::ce_usable<T, Mem>(logits, dlogits)) return cuda::cross_entropy_cuda<T, Mem>(logits, target, loss, dlogits, grad_scale);
  }
#endif
  long bad = N;  // the Min reducer starts from the largest long: no bad row leaves bad >= N
  Kokkos::parallel_reduce(
      "burst::cross_entropy_check", Kokkos::RangePolicy<Exec>(0, N),
      KOKKOS_LAMBDA(const long i, long& m) {
        const auto t = target(i);
        if (t != kIgnoreIndex && (t < 0 || t >= V) && i < m) m = i;
      },
      Kokkos::Min<long>(bad));
  BURST_CHECK_INPUT(bad >= N, "cross_entropy: target at row ", bad, " is outside [0, ", V, ") and is not the ignore index ",
                    kIgnoreIndex);
  Kokkos::parallel_for(
      "burst::cross_entropy", Kokkos::RangePolicy<Exec>(0, N), KOKKOS_LAMBDA(const long i) {
        const auto t = target(i);
        if (t == kIgnoreIndex) {
          loss(i) = 0;
          if (grad)
            for (long c = 0; c < V; ++c) dlogits(i, c) = T(0);
          return;
        }
        Acc mx = Acc(logits(i, 0));
        for (long c = 1; c < V; ++c) mx = Acc(logits(i, c)) > mx ? Acc(logits(i, c)) : mx;
        Acc z = 0;
        for (long c = 0; c < V; ++c) z += kx::exp(Acc(logits(i, c)) - mx);
        const Acc lse = mx + kx::log(z);
        loss(i) = lse - Acc(logits(i, t));
        if (grad)
          for (long c = 0; c < V; ++c)
            dlogits(i, c) = T((kx::exp(Acc(logits(i, c)) - lse) - (c == t ? Acc(1) : Acc(0))) * Acc(grad_scale));
      });
  double sum = 0;
  long valid = 0;
  Kokkos::parallel_reduce(
      "burst::cross_entropy_sum", Kokkos::RangePolicy<Exec>(0, N),
      KOKKOS_LAMBDA(const long i, double& s) { s += double(loss(i)); }, sum);
  Kokkos::parallel_reduce(
      "burst::cross_entropy_valid", Kokkos::RangePolicy<Exec>(0, N),
      KOKKOS_LAMBDA(const long i, long& c) { c += target(i) != kIgnoreIndex ? 1 : 0; }, valid);
  return {sum, valid};
}

}  // namespace burst::kernels

// The LM head fused with the cross-entropy loss (ALGORITHMS.md section 8):
// never an [N, V] logits buffer. The tokens are split into chunks; for each
// chunk
//
//   logits = x W^T                      [c, V]   (the only logits held)
//   loss   = lse(logits) - logits[target]
//   G      = (softmax(logits) - onehot(target)) * grad_scale   (in place)
//   dx     = G W                        [c, H]
//   dW    += G^T x                      [V, H]
//
// all in the forward pass: the loss is the last operation and its incoming
// gradient is the scalar 1, so nothing is recomputed in backward (3 GEMMs
// per chunk, as Liger does; the BurstEngine repository's chunked version
// recomputes the logits in backward, 4 GEMMs). Tokens whose target is the
// ignore index count in neither the loss nor N_valid; grad_scale is
// 1 / N_valid of the whole group (the caller all-reduces the count).
//
// Extra memory: one chunk of logits [chunk, V] and its per-token losses.
#pragma once

#include "core/memory.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"

#include <algorithm>
#include <type_traits>

namespace burst::kernels {

// x [N, H], W [V, H], target [N]. dx [N, H] is overwritten and dW [V, H]
// accumulated into when `dx` is non-empty (else the loss only). dW is a 2-D
// view of T or of accum_t<T> (the bf16 model keeps fp32 gradients).
template <class T, class Mem, class DW = Kokkos::View<T**, Layout, Mem>>
LossSum lm_head_cross_entropy(Kokkos::View<const T**, Layout, Mem> x, Kokkos::View<const T**, Layout, Mem> W,
                              Kokkos::View<const std::int32_t*, Layout, Mem> target, long chunk, double grad_scale,
                              Kokkos::View<T**, Layout, Mem> dx, const DW& dW) {
  static_assert(DW::rank == 2 && std::is_same<typename DW::memory_space, typename Mem::memory_space>::value &&
                    (std::is_same<typename DW::non_const_value_type, T>::value ||
                     std::is_same<typename DW::non_const_value_type, accum_t<T>>::value),
                "lm_head_cross_entropy: dW must be a 2-D view of T or accum_t<T> in the same memory space");
  using Acc = accum_t<T>;
  using U2 = Kokkos::View<T**, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using CU2 = Kokkos::View<const T**, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using CU1 = Kokkos::View<const std::int32_t*, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using UA1 = Kokkos::View<Acc*, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const long N = long(x.extent(0)), H = long(x.extent(1)), V = long(W.extent(0));
  BURST_CHECK_INPUT(chunk > 0, "lm_head_cross_entropy: chunk = ", chunk, " must be positive");
  BURST_CHECK_INPUT(long(W.extent(1)) == H, "lm_head_cross_entropy: W is ", V, " x ", W.extent(1), ", x has ", H, " columns");
  BURST_CHECK_INPUT(long(target.extent(0)) == N, "lm_head_cross_entropy: ", N, " rows but ", target.extent(0), " targets");
  const bool grad = dx.extent(0) > 0;
  if (grad)
    BURST_CHECK_INPUT(long(dx.extent(0)) == N && long(dx.extent(1)) == H && long(dW.extent(0)) == V &&
                          long(dW.extent(1)) == H,
                      "lm_head_cross_entropy: dx must be ", N, " x ", H, " and dW ", V, " x ", H);
  const long c = std::min(chunk, std::max(N, 1L));
  Kokkos::View<T**, Layout, Mem> logits(Kokkos::view_alloc(Kokkos::WithoutInitializing,
                                                           mem_label(MemCategory::Activations, "lm_head.logits_chunk")),
                                        size_t(c), size_t(V));
  Kokkos::View<Acc*, Layout, Mem> loss(mem_label(MemCategory::Activations, "lm_head.loss_chunk"), size_t(c));
  LossSum total;
  for (long r0 = 0; r0 < N; r0 += c) {
    const long rows = std::min(c, N - r0);
    CU2 xc(x.data() + r0 * H, size_t(rows), size_t(H));
    U2 lg(logits.data(), size_t(rows), size_t(V));
    gemm('N', 'T', 1, xc, W, 0, lg);
    // The gradient overwrites the logits it is computed from (row by row,
    // each element read before it is written), so one buffer serves both.
    const LossSum ls = cross_entropy<T, Mem>(CU2(lg.data(), size_t(rows), size_t(V)), CU1(target.data() + r0, size_t(rows)),
                                             UA1(loss.data(), size_t(rows)), grad ? lg : U2(), grad_scale);
    total.sum += ls.sum;
    total.valid += ls.valid;
    if (!grad) continue;
    gemm('N', 'N', 1, lg, W, 0, U2(dx.data() + r0 * H, size_t(rows), size_t(H)));
    gemm('T', 'N', 1, lg, xc, 1, dW);
  }
  return total;
}

}  // namespace burst::kernels

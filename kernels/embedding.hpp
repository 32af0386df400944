// Token embedding: out[i] = W[tok[i]]; backward dW[tok[i]] += dout[i].
#pragma once

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/views.hpp"

#include <cstdint>
#include <utility>

namespace burst::kernels {

// Checks every id is in [0, V); the error names the first bad position.
template <class Mem> void check_token_ids(Kokkos::View<const std::int32_t*, Layout, Mem> tok, long V, const char* what) {
  using Exec = typename Kokkos::View<const std::int32_t*, Layout, Mem>::execution_space;
  long first_bad = 0;
  const long n = tok.extent(0);
  Kokkos::parallel_reduce(
      "burst::check_token_ids", Kokkos::RangePolicy<Exec>(0, n),
      KOKKOS_LAMBDA(const long i, long& m) {
        if ((tok(i) < 0 || tok(i) >= V) && i < m) m = i;
      },
      Kokkos::Min<long>(first_bad));
  if (first_bad < n) {
    std::int32_t bad = 0;
    Kokkos::deep_copy(bad, Kokkos::subview(tok, first_bad));
    BURST_FAIL(ErrorKind::Input, what, ": token id ", bad, " at position ", first_bad, " is outside the vocabulary [0, ", V, ")");
  }
}

template <class T, class Mem>
void embedding_forward(Kokkos::View<const std::int32_t*, Layout, Mem> tok, Kokkos::View<const T**, Layout, Mem> W,
                       Kokkos::View<T**, Layout, Mem> out) {
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  const long N = tok.extent(0), H = W.extent(1);
  BURST_CHECK_INPUT(long(out.extent(0)) == N && long(out.extent(1)) == H, "embedding: out is [", out.extent(0), ", ",
                    out.extent(1), "], expected [", N, ", ", H, "]");
  check_token_ids<Mem>(tok, W.extent(0), "embedding");
  Kokkos::parallel_for(
      "burst::embedding_forward", Kokkos::RangePolicy<Exec>(0, N * H),
      KOKKOS_LAMBDA(const long e) { out(e / H, e % H) = W(tok(e / H), e % H); });
}

// Values per unrolled step of the embedding backward's sums (registers).
constexpr int kEmbeddingUnroll = 8;

// The positions 0..N-1 ordered by token id, positions ascending within a
// token (a stable LSD radix sort, one bit per pass: an exclusive scan of the
// zeros, then a scatter; scans and scatters are deterministic), into
// `order`; `tmp` and `scan` are scratch of N entries. Bits: those of V - 1.
// The ids must lie in [0, V) (the caller checks them).
template <class Mem>
void sort_positions_by_token(Kokkos::View<const std::int32_t*, Layout, Mem> tok, long V,
                             Kokkos::View<std::int32_t*, Layout, Mem> order, Kokkos::View<std::int32_t*, Layout, Mem> tmp,
                             Kokkos::View<std::int32_t*, Layout, Mem> scan) {
  using Exec = typename Kokkos::View<std::int32_t*, Layout, Mem>::execution_space;
  using I = std::int32_t;
  const long N = tok.extent(0);
  BURST_CHECK_INPUT(long(order.extent(0)) >= N && long(tmp.extent(0)) >= N && long(scan.extent(0)) >= N,
                    "sort_positions_by_token: scratch of ", order.extent(0), " / ", tmp.extent(0), " / ", scan.extent(0),
                    " entries for ", N, " tokens");
  BURST_CHECK_INPUT(V >= 1 && V <= (1L << 31), "sort_positions_by_token: vocabulary ", V, " outside [1, 2^31]");
  auto a = order, b = tmp;
  Kokkos::parallel_for("burst::embedding_sort_init", Kokkos::RangePolicy<Exec>(0, N), KOKKOS_LAMBDA(const long i) { a(i) = I(i); });
  int bits = 0;
  while ((1L << bits) < V) ++bits;
  for (int bit = 0; bit < bits; ++bit) {
    I zeros = 0;
    Kokkos::parallel_scan(
        "burst::embedding_sort_scan", Kokkos::RangePolicy<Exec>(0, N),
        KOKKOS_LAMBDA(const long k, I& upd, const bool final) {
          const I zero = ((tok(a(k)) >> bit) & 1) == 0 ? 1 : 0;
          if (final) scan(k) = upd;
          upd += zero;
        },
        zeros);
    Kokkos::parallel_for(
        "burst::embedding_sort_scatter", Kokkos::RangePolicy<Exec>(0, N), KOKKOS_LAMBDA(const long k) {
          const I p = a(k);
          b(((tok(p) >> bit) & 1) ? zeros + (I(k) - scan(k)) : scan(k)) = p;
        });
    std::swap(a, b);
  }
  if (a.data() != order.data()) Kokkos::deep_copy(order, a);
}

// dW[tok[i]] += dout[i], deterministic and without atomics: the positions
// are sorted by token (stable), each distinct token's positions form a
// group, and one thread per (group, hidden column) adds the group's rows in
// position order to dW, kEmbeddingUnroll loads in flight at a time. The sums
// are bitwise those of the one-token-at-a-time loop (every token's rows in
// position order onto its dW row), now with (distinct tokens) x H threads
// instead of H threads walking all N positions (v1: 15.7 ms for 32K tokens
// at hidden 2048 on an H100; the cost moved to the sort's 2 x log2(V)
// small passes). A token repeated at most positions (a filler) still sums
// its rows one after another, in H threads.
template <class T, class Mem>
void embedding_backward(Kokkos::View<const std::int32_t*, Layout, Mem> tok, Kokkos::View<const T**, Layout, Mem> dout,
                        Kokkos::View<accum_t<T>**, Layout, Mem> dW) {
  using Acc = accum_t<T>;
  using I = std::int32_t;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  using IV = Kokkos::View<I*, Layout, Mem>;
  constexpr int U = kEmbeddingUnroll;
  const long N = tok.extent(0), H = dW.extent(1), V = dW.extent(0);
  BURST_CHECK_INPUT(long(dout.extent(0)) == N && long(dout.extent(1)) == H, "embedding backward: dout is [",
                    dout.extent(0), ", ", dout.extent(1), "], expected [", N, ", ", H, "]");
  BURST_CHECK_INPUT(N < (1L << 31) - 1, "embedding backward: ", N, " tokens, more than 2^31 - 2");
  if (N == 0 || H == 0) return;
  check_token_ids<Mem>(tok, V, "embedding backward");
  IV order = uninit_view<IV>(mem_label(MemCategory::Workspace, "embedding.order"), N);
  IV tmp = uninit_view<IV>(mem_label(MemCategory::Workspace, "embedding.order_tmp"), N);
  IV scan = uninit_view<IV>(mem_label(MemCategory::Workspace, "embedding.scan"), N);
  sort_positions_by_token<Mem>(tok, V, order, tmp, scan);
  // Group starts (the k where the token changes in sorted order) into tmp[0..G).
  I groups = 0;
  Kokkos::parallel_scan(
      "burst::embedding_groups", Kokkos::RangePolicy<Exec>(0, N),
      KOKKOS_LAMBDA(const long k, I& upd, const bool final) {
        const bool start = k == 0 || tok(order(k)) != tok(order(k - 1));
        if (final && start) tmp(upd) = I(k);
        upd += start ? 1 : 0;
      },
      groups);
  const long G = groups;
  Kokkos::parallel_for(
      "burst::embedding_backward", Kokkos::RangePolicy<Exec>(0, G * H), KOKKOS_LAMBDA(const long e) {
        const long g = e / H, h = e % H;  // consecutive threads: consecutive columns of one group
        const long k0 = tmp(g), k1 = g + 1 < G ? long(tmp(g + 1)) : N;
        const I v = tok(order(k0));
        Acc w = dW(v, h);
        long k = k0;
        for (; k + U <= k1; k += U) {
          Acc d[U];
#pragma unroll
          for (int j = 0; j < U; ++j) d[j] = Acc(dout(order(k + j), h));
#pragma unroll
          for (int j = 0; j < U; ++j) w += d[j];  // position order
        }
        for (; k < k1; ++k) w += Acc(dout(order(k), h));
        dW(v, h) = w;
      });
}

}  // namespace burst::kernels

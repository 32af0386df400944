// Token embedding: out[i] = W[tok[i]]; backward dW[tok[i]] += dout[i].
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#include <cstdint>

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

// dW[tok[i]] += dout[i]: one thread per hidden column walks the tokens in
// order, so repeated tokens add up deterministically without atomics.
template <class T, class Mem>
void embedding_backward(Kokkos::View<const std::int32_t*, Layout, Mem> tok, Kokkos::View<const T**, Layout, Mem> dout,
                        Kokkos::View<accum_t<T>**, Layout, Mem> dW) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  const long N = tok.extent(0), H = dW.extent(1);
  BURST_CHECK_INPUT(long(dout.extent(0)) == N && long(dout.extent(1)) == H, "embedding backward: dout shape");
  Kokkos::parallel_for(
      "burst::embedding_backward", Kokkos::RangePolicy<Exec>(0, H), KOKKOS_LAMBDA(const long h) {
        for (long i = 0; i < N; ++i) dW(tok(i), h) += Acc(dout(i, h));
      });
}

}  // namespace burst::kernels

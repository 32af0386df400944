// kernels::gemm (Kokkos Kernels / BLAS TPL on host) and gemm_portable against
// a double-precision triple loop, for every transpose, odd sizes, beta != 0.
#include "core/error.hpp"
#include "kernels/gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace burst;

namespace {
template <class T> View2<T> random_view(long r, long c, unsigned seed) {
  View2<T> v("work/test_gemm", r, c);
  auto h = Kokkos::create_mirror_view(v);
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (long i = 0; i < r; ++i)
    for (long j = 0; j < c; ++j) h(i, j) = T(u(g));
  Kokkos::deep_copy(v, h);
  return v;
}

// max |C - ref| / max|ref| with ref computed in double on the host.
template <class T, class F>
double check(char ta, char tb, long m, long n, long k, double alpha, double beta, unsigned seed, F&& call) {
  auto A = ta == 'N' ? random_view<T>(m, k, seed) : random_view<T>(k, m, seed);
  auto B = tb == 'N' ? random_view<T>(k, n, seed + 1) : random_view<T>(n, k, seed + 1);
  auto C = random_view<T>(m, n, seed + 2);
  auto hA = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), A);
  auto hB = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), B);
  auto hC0 = Kokkos::create_mirror(Kokkos::HostSpace(), C);  // a copy, never an alias of C
  Kokkos::deep_copy(hC0, C);
  call(ta, tb, T(alpha), A, B, T(beta), C);
  auto hC = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
  double worst = 0, scale = 1e-300;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double ref = beta * double(hC0(i, j));
      for (long p = 0; p < k; ++p)
        ref += alpha * double(ta == 'N' ? hA(i, p) : hA(p, i)) * double(tb == 'N' ? hB(p, j) : hB(j, p));
      worst = std::max(worst, std::fabs(double(hC(i, j)) - ref));
      scale = std::max(scale, std::fabs(ref));
    }
  return worst / scale;
}
}  // namespace

TEST(Gemm, MatchesDoubleReferenceForEveryTranspose) {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'}) {
      auto dispatch = [](auto... a) { kernels::gemm(a...); };
      auto portable = [](auto... a) { kernels::gemm_portable(a...); };
      EXPECT_LT(check<double>(ta, tb, 37, 19, 53, 1.0, 0.0, 1, dispatch), 1e-14) << ta << tb;
      EXPECT_LT(check<double>(ta, tb, 17, 33, 9, -0.5, 2.0, 2, dispatch), 1e-14) << ta << tb;
      EXPECT_LT(check<float>(ta, tb, 64, 31, 77, 1.0, 0.5, 3, dispatch), 1e-5) << ta << tb;
      EXPECT_LT(check<double>(ta, tb, 13, 29, 41, 1.5, -1.0, 4, portable), 1e-14) << ta << tb;
      EXPECT_LT(check<bf16>(ta, tb, 16, 8, 32, 1.0, 0.0, 5, portable), 2e-2) << ta << tb;
    }
}

TEST(Gemm, EmptyInnerDimensionScalesC) {
  auto dispatch = [](auto... a) { kernels::gemm(a...); };
  EXPECT_LT(check<double>('N', 'N', 5, 7, 0, 1.0, 3.0, 9, dispatch), 1e-15);
}

TEST(Gemm, ShapeMismatchIsAnInputError) {
  View2<double> A("work/a", 4, 5), B("work/b", 6, 3), C("work/c", 4, 3);
  try {
    kernels::gemm('N', 'N', 1.0, A, B, 0.0, C);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_STREQ(e.what(), "gemm: inner dimensions differ: op(A) is 4 x 5, op(B) is 6 x 3");
  }
  View2<double> B2("work/b2", 5, 3), C2("work/c2", 3, 3);
  EXPECT_THROW(kernels::gemm('N', 'N', 1.0, A, B2, 0.0, C2), Error);
  EXPECT_THROW(kernels::gemm('X', 'N', 1.0, A, B2, 0.0, C), Error);
}

// D = alpha op(A) op(B) + beta C into a separate D: C untouched, D as the in-place result; D = C is the
// in-place GEMM; a D of another shape is an input error.
TEST(Gemm, SeparateOutputLeavesCUntouched) {
  for (char ta : {'N', 'T'}) {
    const long m = 23, n = 17, k = 31;
    auto A = ta == 'N' ? random_view<double>(m, k, 11) : random_view<double>(k, m, 11);
    auto B = random_view<double>(k, n, 12);
    auto C = random_view<double>(m, n, 13);
    View2<double> D("work/d", m, n), ref("work/ref", m, n);
    Kokkos::deep_copy(D, std::nan(""));  // poisoned: every element must be written
    Kokkos::deep_copy(ref, C);
    kernels::gemm(ta, 'N', 1.5, A, B, 1.0, C, D);
    kernels::gemm(ta, 'N', 1.5, A, B, 1.0, ref);  // the in-place result
    auto hC0 = Kokkos::create_mirror(Kokkos::HostSpace(), C);
    auto c0 = random_view<double>(m, n, 13);
    Kokkos::deep_copy(hC0, c0);
    auto hC = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    auto hD = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), D);
    auto hR = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ref);
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) {
        EXPECT_EQ(hC(i, j), hC0(i, j)) << "C changed at " << i << "," << j;
        EXPECT_NEAR(hD(i, j), hR(i, j), 1e-13) << ta << " " << i << "," << j;
      }
    kernels::gemm(ta, 'N', 1.5, A, B, 1.0, C, C);  // D = C: in place
    auto hC2 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) EXPECT_NEAR(hC2(i, j), hR(i, j), 1e-13);
    View2<double> D2("work/d2", m, n + 1);
    EXPECT_THROW(kernels::gemm(ta, 'N', 1.0, A, B, 1.0, C, D2), Error);
  }
}

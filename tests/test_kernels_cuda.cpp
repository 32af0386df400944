// The CUDA kernels behind kernels::gemm (cuBLASLt), cross_entropy (one-kernel
// online LSE), lm_head_cross_entropy (the two together, chunked) and
// rmsnorm_forward / rmsnorm_backward, the elementwise bf16 kernels (SwiGLU
// forward / backward, fp32 -> bf16, attention's rowsum; the block's residual add is in RMSNorm's backward),
// against double-precision references
// computed on the host from the same (rounded) inputs: fresh random inputs
// each run (the seed is printed), outputs poisoned with NaN before each call
// where the kernel overwrites them, odd sizes (vector and scalar paths,
// strided views), and that the CUDA paths were the ones taken. bf16
// tolerances: 1e-2 relative (norm-wise) for bf16 outputs, tighter for fp32.
// Registered on CUDA builds only (label gpu).
#include "core/error.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"
#include "kernels/lm_head_loss.hpp"
#include "kernels/activations.hpp"
#include "kernels/attention.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifndef BURST_HAVE_CUDA
#error "test_kernels_cuda is built on CUDA builds only"
#endif

using namespace burst;
using namespace burst::kernels;

namespace {

using Mem = Kokkos::CudaSpace;
template <class T> using D2 = Kokkos::View<T**, Layout, Mem>;
template <class T> using D1 = Kokkos::View<T*, Layout, Mem>;

std::mt19937_64& rng() {
  static std::mt19937_64 g = [] {
    std::random_device rd;
    const std::uint64_t s = (std::uint64_t(rd()) << 32) ^ rd();
    std::printf("test_kernels_cuda: seed %llu\n", (unsigned long long)s);
    return std::mt19937_64(s);
  }();
  return g;
}

template <class V> void fill_random(const V& v, double amp) {
  auto h = Kokkos::create_mirror_view(v);
  std::uniform_real_distribution<double> u(-amp, amp);
  using T = typename V::non_const_value_type;
  for (size_t i = 0; i < h.extent(0); ++i)
    for (size_t j = 0; j < h.extent(1); ++j) h(i, j) = T(u(rng()));
  Kokkos::deep_copy(v, h);
}
template <class T> void fill_random1(const D1<T>& v, double amp) {
  auto h = Kokkos::create_mirror_view(v);
  std::uniform_real_distribution<double> u(-amp, amp);
  for (size_t i = 0; i < h.extent(0); ++i) h(i) = T(u(rng()));
  Kokkos::deep_copy(v, h);
}
template <class V> void poison(const V& v) {
  using T = typename V::non_const_value_type;
  Kokkos::deep_copy(v, T(std::numeric_limits<float>::quiet_NaN()));
}
template <class V> auto host(const V& v) { return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v); }

// ||a - b|| / ||b|| over two equally long double vectors; NaN fails.
double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double n = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    n += (a[i] - b[i]) * (a[i] - b[i]), d += b[i] * b[i];
  }
  return std::sqrt(n / std::max(d, 1e-300));
}

// ---------------------------------------------------------------- GEMM

template <class T, class TC> void gemm_case(char ta, char tb, long m, long n, long k, double beta, bool strided, double tol) {
  SCOPED_TRACE(testing::Message() << scalar_name<T>() << "->" << scalar_name<TC>() << " " << ta << tb << " m=" << m
                                  << " n=" << n << " k=" << k << " beta=" << beta << (strided ? " strided" : ""));
  const long ar = ta == 'N' ? m : k, ac = ta == 'N' ? k : m, br = tb == 'N' ? k : n, bc = tb == 'N' ? n : k;
  // strided: A and C are column windows of wider matrices (row stride > columns).
  D2<T> Abig("A", ar, ac + (strided ? 24 : 0));
  D2<T> B("B", br, bc);
  D2<TC> Cbig("C", m, n + (strided ? 40 : 0));
  fill_random(Abig, 1.0), fill_random(B, 1.0);
  if (beta != 0) fill_random(Cbig, 1.0);
  else poison(Cbig);
  const auto acols = std::make_pair(strided ? 8L : 0L, (strided ? 8L : 0L) + ac);
  const auto ccols = std::make_pair(strided ? 16L : 0L, (strided ? 16L : 0L) + n);
  auto A = Kokkos::subview(Abig, Kokkos::ALL(), acols);
  auto C = Kokkos::subview(Cbig, Kokkos::ALL(), ccols);
  // Host copies of the whole matrices, windows taken there (Kokkos 3.4 has
  // no device-to-host deep_copy of a strided window).
  auto hAbig = host(Abig);
  auto hA = Kokkos::subview(hAbig, Kokkos::ALL(), acols);
  auto hB = host(B);
  auto hC0big = host(Cbig);
  auto hC0 = Kokkos::subview(hC0big, Kokkos::ALL(), ccols);
  const long calls = lt::call_count();
  gemm(ta, tb, 1.5, A, B, beta, C);
  Kokkos::fence();
  EXPECT_EQ(lt::call_count(), calls + 1) << "the call did not reach cuBLASLt";
  auto hCbig = host(Cbig);
  auto hC = Kokkos::subview(hCbig, Kokkos::ALL(), ccols);
  std::vector<double> got, ref;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = 0;
      for (long p = 0; p < k; ++p)
        s += double(ta == 'N' ? hA(i, p) : hA(p, i)) * double(tb == 'N' ? hB(p, j) : hB(j, p));
      ref.push_back(1.5 * s + (beta != 0 ? beta * double(hC0(i, j)) : 0.0));
      got.push_back(double(hC(i, j)));
    }
  EXPECT_LE(rel_err(got, ref), tol);
}

TEST(GemmCuda, AllTransposesAndTypes) {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'}) {
      gemm_case<bf16, bf16>(ta, tb, 77, 130, 200, 0.0, false, 1e-2);
      gemm_case<bf16, float>(ta, tb, 77, 130, 200, 0.0, false, 1e-5);
      gemm_case<float, float>(ta, tb, 65, 33, 129, 0.0, false, 1e-5);
      gemm_case<double, double>(ta, tb, 31, 17, 45, 0.0, false, 1e-12);
    }
}

TEST(GemmCuda, AccumulateOddAndStrided) {
  gemm_case<bf16, bf16>('N', 'T', 129, 257, 64, 1.0, false, 1e-2);
  gemm_case<bf16, float>('T', 'N', 96, 72, 1000, 1.0, false, 1e-5);
  gemm_case<bf16, float>('N', 'N', 33, 7, 13, 0.0, false, 1e-5);   // no 16-byte alignment anywhere
  gemm_case<bf16, bf16>('N', 'T', 100, 64, 96, 0.0, true, 1e-2);   // strided A and C
  gemm_case<float, float>('N', 'N', 50, 40, 30, 1.0, true, 1e-5);
  gemm_case<bf16, float>('N', 'N', 1, 300, 128, 0.0, false, 1e-5);  // one row
  gemm_case<bf16, bf16>('N', 'T', 1024, 1024, 1024, 0.0, false, 1e-2);
}

// D = 1.5 A B^T + C into a separate D (the model's residual GEMMs): one cuBLASLt call reading C and writing
// D; C untouched; D poisoned first, so every element must be written.
void separate_output_case(long m, long n, long k) {
  SCOPED_TRACE(testing::Message() << "separate D, m=" << m << " n=" << n << " k=" << k);
  D2<bf16> A("A", m, k), B("B", n, k), C("C", m, n), D("D", m, n);
  fill_random(A, 1.0), fill_random(B, 1.0), fill_random(C, 1.0);
  poison(D);
  auto hA = host(A), hB = host(B), hC0 = host(C);
  const long calls = lt::call_count();
  gemm('N', 'T', 1.5, A, B, 1.0, C, D);
  Kokkos::fence();
  EXPECT_EQ(lt::call_count(), calls + 1) << "the call did not reach cuBLASLt as one GEMM";
  auto hC = host(C), hD = host(D);
  std::vector<double> got, ref;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double acc = 0;
      for (long p = 0; p < k; ++p) acc += double(hA(i, p)) * double(hB(j, p));
      ref.push_back(1.5 * acc + double(hC0(i, j)));
      got.push_back(double(hD(i, j)));
      EXPECT_EQ(float(hC(i, j)), float(hC0(i, j))) << "C changed at " << i << "," << j;
    }
  EXPECT_LE(rel_err(got, ref), 1e-2);
}

TEST(GemmCuda, SeparateOutput) {
  separate_output_case(33, 7, 13);     // no 16-byte alignment
  separate_output_case(300, 256, 512);  // 16-byte aligned
}

// Sets an environment variable for a scope, and unsets it on the way out
// (an assertion or exception included).
struct EnvGuard {
  EnvGuard(const char* var, const char* value) : var_(var) { setenv(var, value, 1); }
  ~EnvGuard() { unsetenv(var_); }
  const char* var_;
};

// BURST_GEMM_TUNE=1: the algorithm is chosen by timing the candidates on the
// call's own operands, so the call must still compute the GEMM exactly once:
// an in-place accumulation (C += A B, the weight gradients; also with a row
// stride wider than C) times its candidates into a scratch D, never into C;
// a separate D with beta 1 leaves C as it was. The plans are released first,
// so every shape makes (and tunes) a new plan; each bf16 call tunes one.
// Then a bad value is a configuration error naming the variable.
TEST(GemmCuda, TunedChoiceComputesTheSameGemm) {
  lt::release();
  {
    EnvGuard env("BURST_GEMM_TUNE", "1");
    auto tunes = [](auto&& call, const char* what) {
      const long before = lt::tuned_plans();
      call();
      EXPECT_EQ(lt::tuned_plans(), before + 1) << what << ": not tuned (fewer than two candidates?)";
    };
    tunes([] { gemm_case<bf16, float>('T', 'N', 384, 256, 1536, 1.0, false, 1e-5); }, "dW += dY^T X, in place");
    tunes([] { gemm_case<bf16, bf16>('N', 'T', 1536, 384, 256, 0.0, false, 1e-2); }, "forward");
    tunes([] { gemm_case<bf16, bf16>('N', 'N', 1536, 256, 384, 1.0, false, 1e-2); }, "dX += dY W, in place");
    tunes([] { gemm_case<bf16, bf16>('N', 'T', 1000, 384, 256, 1.0, true, 1e-2); }, "in place, strided A and C");
    tunes([] { separate_output_case(1200, 512, 384); }, "separate D");
    gemm_case<float, float>('N', 'N', 257, 130, 99, 1.0, false, 1e-5);
    std::printf("GemmCuda.TunedChoiceComputesTheSameGemm: %ld plans tuned, %ld chose another than the first\n",
                lt::tuned_plans(), lt::tuned_changed());
  }
  EnvGuard bad("BURST_GEMM_TUNE", "yes");
  D2<bf16> A("A", 40, 24), B("B", 24, 56);
  D2<float> C("C", 40, 56);
  try {
    gemm('N', 'N', 1.0, A, B, 0.0, C);  // a shape without a plan yet: the switch is read
    ADD_FAILURE() << "BURST_GEMM_TUNE=yes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("BURST_GEMM_TUNE"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- cross-entropy

template <class T> void ce_case(long N, long V, bool in_place) {
  SCOPED_TRACE(testing::Message() << scalar_name<T>() << " N=" << N << " V=" << V << (in_place ? " in place" : ""));
  D2<T> logits("logits", N, V), dl("dl", in_place ? 0 : N, V);
  D1<std::int32_t> target("t", N);
  D1<float> loss("loss", N);
  fill_random(logits, 4.0);
  auto ht = Kokkos::create_mirror_view(target);
  std::uniform_int_distribution<long> u(0, V - 1);
  for (long i = 0; i < N; ++i) ht(i) = (i % 7 == 3) ? kIgnoreIndex : std::int32_t(u(rng()));
  Kokkos::deep_copy(target, ht);
  auto hl = host(logits);
  if (!in_place) poison(dl);
  Kokkos::deep_copy(loss, std::numeric_limits<float>::quiet_NaN());
  const double scale = 0.37;
  D2<T> out = in_place ? logits : dl;
  const LossSum ls = cross_entropy<T, Mem>(logits, target, loss, out, scale);
  auto hout = host(out);
  auto hloss = host(loss);
  std::vector<double> g, gref, l, lref;
  double sum = 0;
  long valid = 0;
  for (long i = 0; i < N; ++i) {
    const bool ign = ht(i) == kIgnoreIndex;
    double mx = -1e300, z = 0;
    for (long c = 0; c < V; ++c) mx = std::max(mx, double(hl(i, c)));
    for (long c = 0; c < V; ++c) z += std::exp(double(hl(i, c)) - mx);
    const double lse = mx + std::log(z);
    const double li = ign ? 0.0 : lse - double(hl(i, ht(i)));
    l.push_back(hloss(i)), lref.push_back(li);
    sum += li, valid += ign ? 0 : 1;
    for (long c = 0; c < V; ++c) {
      g.push_back(double(hout(i, c)));
      gref.push_back(ign ? 0.0 : (std::exp(double(hl(i, c)) - lse) - (c == ht(i) ? 1.0 : 0.0)) * scale);
    }
  }
  EXPECT_EQ(ls.valid, valid);
  EXPECT_NEAR(ls.sum, sum, 1e-5 * std::fabs(sum));
  EXPECT_LE(rel_err(l, lref), 1e-5);
  EXPECT_LE(rel_err(g, gref), (std::is_same<T, bf16>::value ? 1e-2 : 1e-5));
}

TEST(CrossEntropyCuda, VectorAndScalarPaths) {
  ce_case<bf16>(37, 1000, false);   // 16-byte rows: vector path
  ce_case<bf16>(37, 1001, false);   // odd rows: scalar path
  ce_case<bf16>(20, 5000, true);    // in place
  ce_case<float>(37, 1000, false);
  ce_case<float>(13, 777, true);
  ce_case<bf16>(3, 128256, true);   // the LLaMA-3 vocabulary
}

TEST(CrossEntropyCuda, InvalidTargetThrows) {
  D2<bf16> logits("logits", 5, 64);
  fill_random(logits, 1.0);
  D1<std::int32_t> target("t", 5);
  Kokkos::deep_copy(target, 1);
  Kokkos::deep_copy(Kokkos::subview(target, 3), 64);
  D1<float> loss("loss", 5);
  EXPECT_THROW((cross_entropy<bf16, Mem>(logits, target, loss, logits, 1.0)), burst::Error);
}

// ---------------------------------------------------------------- fused LM head

template <class T> void lm_head_case(long N, long H, long V, long chunk, double tol) {
  SCOPED_TRACE(testing::Message() << scalar_name<T>() << " N=" << N << " H=" << H << " V=" << V << " chunk=" << chunk);
  D2<T> x("x", N, H), W("W", V, H), dx("dx", N, H), dW("dW", V, H);
  D1<std::int32_t> target("t", N);
  fill_random(x, 1.0), fill_random(W, 0.3);
  // dW is accumulated into: start from values small enough (bf16) that the
  // increment, not the start, dominates the comparison.
  fill_random(dW, std::is_same<T, bf16>::value ? 1e-4 : 0.1);
  auto ht = Kokkos::create_mirror_view(target);
  std::uniform_int_distribution<long> u(0, V - 1);
  long valid = 0;
  for (long i = 0; i < N; ++i) ht(i) = (i % 11 == 5) ? kIgnoreIndex : std::int32_t(u(rng())), valid += ht(i) >= 0;
  Kokkos::deep_copy(target, ht);
  poison(dx);
  auto hx = host(x);
  auto hW = host(W);
  auto hdW0 = host(dW);
  const double scale = 1.0 / double(valid);
  const long calls = lt::call_count();
  const LossSum ls = lm_head_cross_entropy<T, Mem>(x, W, target, chunk, scale, dx, dW);
  EXPECT_EQ(lt::call_count(), calls + 3 * ((N + chunk - 1) / chunk)) << "GEMMs did not reach cuBLASLt";
  auto hdx = host(dx);
  auto hdW = host(dW);
  std::vector<double> dxr(size_t(N) * H, 0.0), dWr(size_t(V) * H), lg(V);
  for (long v = 0; v < V; ++v)
    for (long h = 0; h < H; ++h) dWr[v * H + h] = double(hdW0(v, h));
  double sum = 0;
  for (long i = 0; i < N; ++i) {
    if (ht(i) < 0) continue;
    double mx = -1e300, z = 0;
    for (long v = 0; v < V; ++v) {
      double s = 0;
      for (long h = 0; h < H; ++h) s += double(hx(i, h)) * double(hW(v, h));
      lg[v] = s, mx = std::max(mx, s);
    }
    for (long v = 0; v < V; ++v) z += std::exp(lg[v] - mx);
    const double lse = mx + std::log(z);
    sum += lse - lg[ht(i)];
    for (long v = 0; v < V; ++v) {
      const double g = (std::exp(lg[v] - lse) - (v == ht(i) ? 1.0 : 0.0)) * scale;
      for (long h = 0; h < H; ++h) dxr[i * H + h] += g * double(hW(v, h)), dWr[v * H + h] += g * double(hx(i, h));
    }
  }
  std::vector<double> dxg(size_t(N) * H), dWg(size_t(V) * H), dWd(size_t(V) * H), dWrd(size_t(V) * H);
  for (long i = 0; i < N; ++i)
    for (long h = 0; h < H; ++h) dxg[i * H + h] = double(hdx(i, h));
  for (long v = 0; v < V; ++v)
    for (long h = 0; h < H; ++h)
      dWg[v * H + h] = double(hdW(v, h)), dWd[v * H + h] = dWg[v * H + h] - double(hdW0(v, h)),
                dWrd[v * H + h] = dWr[v * H + h] - double(hdW0(v, h));
  EXPECT_EQ(ls.valid, valid);
  EXPECT_NEAR(ls.sum, sum, tol * std::fabs(sum));
  EXPECT_LE(rel_err(dxg, dxr), tol);
  EXPECT_LE(rel_err(dWg, dWr), tol);   // the accumulated dW
  if (std::is_same<T, float>::value) EXPECT_LE(rel_err(dWd, dWrd), tol);  // the increment alone (bf16 rounds it into dW)
}

TEST(LmHeadCuda, ChunkedAgainstDouble) {
  lm_head_case<bf16>(300, 64, 1000, 128, 2e-2);
  lm_head_case<bf16>(257, 128, 4099, 300, 2e-2);  // odd vocabulary: scalar CE path, unaligned GEMM rows
  lm_head_case<float>(200, 64, 777, 64, 1e-4);
}

// ---------------------------------------------------------------- RMSNorm

// With `residual`, the backward adds a residual view into dx (the block's
// skip connection, fused) and the reference adds it too.
template <class T> void rmsnorm_case(long N, long H, double tol, bool residual = false) {
  SCOPED_TRACE(testing::Message() << scalar_name<T>() << " N=" << N << " H=" << H << " residual=" << residual);
  D2<T> x("x", N, H), y("y", N, H), dy("dy", N, H), dx("dx", N, H), res;
  if (residual) {
    res = D2<T>("res", N, H);
    fill_random(res, 3.0);
  }
  D1<T> w("w", H);
  D1<float> rstd("rstd", N), dw("dw", H);
  fill_random(x, 2.0), fill_random(dy, 1.0), fill_random1(w, 1.5), fill_random1(dw, 0.5);
  poison(y), poison(dx);
  Kokkos::deep_copy(rstd, std::numeric_limits<float>::quiet_NaN());
  auto hx = host(x);
  auto hdy = host(dy);
  auto hw = host(w);
  auto hdw0 = host(dw);
  const double eps = 1e-5;
  rmsnorm_forward<T, Mem>(x, w, eps, y, rstd);
  rmsnorm_backward<T, Mem>(dy, x, w, rstd, dx, dw, res);
  auto hy = host(y);
  auto hdx = host(dx);
  auto hres = residual ? host(res) : decltype(host(res))();
  auto hdw = host(dw);
  auto hr = host(rstd);
  std::vector<double> yg, yr, dxg, dxr, dwg, dwr(H), rg, rr;
  for (long h = 0; h < H; ++h) dwr[h] = hdw0(h), dwg.push_back(hdw(h));
  for (long i = 0; i < N; ++i) {
    double ss = 0, gx = 0;
    for (long h = 0; h < H; ++h) ss += double(hx(i, h)) * double(hx(i, h));
    const double r = 1.0 / std::sqrt(ss / H + eps);
    rg.push_back(hr(i)), rr.push_back(r);
    for (long h = 0; h < H; ++h) {
      yg.push_back(double(hy(i, h))), yr.push_back(double(hx(i, h)) * r * double(hw(h)));
      gx += double(hdy(i, h)) * double(hw(h)) * double(hx(i, h));
      dwr[h] += double(hdy(i, h)) * double(hx(i, h)) * r;
    }
    const double c = r * r * gx / H;
    for (long h = 0; h < H; ++h)
      dxg.push_back(double(hdx(i, h))), dxr.push_back(r * (double(hdy(i, h)) * double(hw(h)) - double(hx(i, h)) * c) +
                                                      (residual ? double(hres(i, h)) : 0.0));
  }
  EXPECT_LE(rel_err(rg, rr), 1e-5);
  EXPECT_LE(rel_err(yg, yr), tol);
  EXPECT_LE(rel_err(dxg, dxr), tol);
  EXPECT_LE(rel_err(dwg, dwr), 1e-4);
}

TEST(RmsNormCuda, ForwardBackward) {
  // Rows not a whole number of 16-byte vectors, or wider than 4 vectors per
  // thread: the v1 kernels (element loads, dx and dw in two passes).
  rmsnorm_case<bf16>(50, 300, 1e-2);
  rmsnorm_case<float>(1, 7, 1e-5);
  rmsnorm_case<bf16>(5, 8200, 1e-2);
  // v2 (16-byte vectors in registers, one backward kernel over 512 blocks):
  // 1, 2 and 4 vectors per thread, a last vector column shared by fewer
  // threads, fewer rows than blocks and several rows per block.
  rmsnorm_case<bf16>(3000, 4096, 1e-2);
  rmsnorm_case<bf16>(600, 2048, 1e-2);
  rmsnorm_case<bf16>(40, 8192, 1e-2);
  rmsnorm_case<bf16>(1030, 2056, 1e-2);
  rmsnorm_case<float>(70, 2048, 1e-5);
  rmsnorm_case<float>(513, 4096, 1e-5);
  rmsnorm_case<float>(3, 1028, 1e-5);
  // The residual added in the backward's pass, on both kernels and types.
  rmsnorm_case<bf16>(50, 300, 1e-2, true);
  rmsnorm_case<float>(1, 7, 1e-5, true);
  rmsnorm_case<bf16>(3000, 4096, 1e-2, true);
  rmsnorm_case<bf16>(1030, 2056, 1e-2, true);
  rmsnorm_case<float>(513, 4096, 1e-5, true);
}

// ---------------------------------------------------------------- RoPE

// rope_apply_to on device views against a double reference on the host: the
// CUDA kernel (head dims that are multiples of 16: it must be the one that
// runs), in place and out of place, fp32 <-> bf16, forward and inverse, an
// attention factor other than 1, positions up to ~2M, more chunks and
// frequencies than a block's 128 threads (the strided loops); d = 40 runs
// the portable kernel (not a multiple of 16).
template <class TI, class TO>
void rope_case(long S, long nh, long d, bool in_place, bool inverse, double af, double tol) {
  SCOPED_TRACE(testing::Message() << scalar_name<TI>() << " -> " << scalar_name<TO>() << " S=" << S << " nh=" << nh
                                  << " d=" << d << (in_place ? " in place" : "") << (inverse ? " inverse" : "")
                                  << " af=" << af);
  Kokkos::View<TI***, Layout, Mem> x("x", S, nh, d);
  Kokkos::View<TO***, Layout, Mem> y("y", S, nh, d);
  Kokkos::View<long*, Layout, Mem> pos("pos", S);
  RopeConfig rc;
  rc.theta = 500000.0, rc.head_dim = d;
  const RopeTable tab = rope_table(rc, S);
  Kokkos::View<double*, Layout, Mem> inv("inv", d / 2);
  {
    auto hx = Kokkos::create_mirror_view(x);
    auto hp = Kokkos::create_mirror_view(pos);
    auto hi = Kokkos::create_mirror_view(inv);
    std::uniform_real_distribution<double> u(-1.5, 1.5);
    std::uniform_int_distribution<long> up(0, 2000000);
    for (long i = 0; i < S; ++i) {
      hp(i) = i == 0 ? 0 : up(rng());
      for (long h = 0; h < nh; ++h)
        for (long e = 0; e < d; ++e) hx(i, h, e) = TI(u(rng()));
    }
    for (long e = 0; e < d / 2; ++e) hi(e) = tab.inv_freq[size_t(e)];
    Kokkos::deep_copy(x, hx), Kokkos::deep_copy(pos, hp), Kokkos::deep_copy(inv, hi);
  }
  auto hx = host(x);
  auto hp = host(pos);
  // The CUDA kernel takes every case with d % 16 == 0 here (else this test
  // would pass on the portable kernel alone).
  EXPECT_EQ(rope::rope_supported(S, nh, d, x.data(), y.data()), d % 16 == 0);
  Kokkos::View<const long*, Layout, Mem> cpos = pos;
  Kokkos::View<const double*, Layout, Mem> cinv = inv;
  if constexpr (std::is_same<TI, TO>::value) {
    if (in_place) {
      rope_apply<TI, Mem>(x, cpos, cinv, af, inverse);
      Kokkos::deep_copy(y, x);
    }
  }
  if (!in_place) {
    poison(y);
    rope_apply_to<TI, TO, Mem>(x, y, cpos, cinv, af, inverse);
  }
  auto hy = host(y);
  std::vector<double> got, want;
  const long half = d / 2;
  for (long i = 0; i < S; ++i)
    for (long e = 0; e < half; ++e) {
      const double ang = double(hp(i)) * tab.inv_freq[size_t(e)];
      const double c = std::cos(ang) * af, sn = (inverse ? -1.0 : 1.0) * std::sin(ang) * af;
      for (long h = 0; h < nh; ++h) {
        const double a = double(hx(i, h, e)), b = double(hx(i, h, e + half));
        want.push_back(a * c - b * sn), got.push_back(double(hy(i, h, e)));
        want.push_back(b * c + a * sn), got.push_back(double(hy(i, h, e + half)));
      }
    }
  EXPECT_LE(rel_err(got, want), tol);
}

// Sets BURST_ROPE_CUDA=1 for its scope (the CUDA RoPE is the default, but
// the caller's environment may have turned it off), restoring the variable
// after, also when an assertion returns early.
struct RopeCudaOn {
  std::string old;
  bool had = false;
  RopeCudaOn() {
    if (const char* v = std::getenv("BURST_ROPE_CUDA")) had = true, old = v;
    ::setenv("BURST_ROPE_CUDA", "1", 1);
  }
  ~RopeCudaOn() {
    if (had) ::setenv("BURST_ROPE_CUDA", old.c_str(), 1);
    else ::unsetenv("BURST_ROPE_CUDA");
  }
};

TEST(RopeCuda, MatchesDoubleReference) {
  RopeCudaOn on;
  ASSERT_TRUE(cuda::rope_cuda_enabled());
  rope_case<bf16, bf16>(77, 3, 128, true, false, 1.0, 1e-2);
  rope_case<bf16, bf16>(64, 16, 64, true, true, 1.0, 1e-2);
  rope_case<bf16, bf16>(7, 32, 128, true, false, 0.7, 1e-2);    // 256 chunks per token: two passes of 128 threads
  rope_case<float, bf16>(50, 5, 128, false, true, 1.0, 1e-2);
  rope_case<float, bf16>(5, 3, 512, false, false, 1.07, 1e-2);  // 256 frequencies: the angle loop's second pass
  rope_case<bf16, float>(11, 4, 64, false, true, 0.7, 1e-2);
  rope_case<float, float>(33, 4, 32, false, false, 1.0, 1e-5);
  rope_case<float, float>(9, 40, 128, false, true, 1.3, 1e-5);
  rope_case<bf16, bf16>(21, 2, 40, true, false, 1.0, 1e-2);  // d = 40: the portable kernel
  rope_case<float, float>(9, 3, 40, false, true, 0.7, 1e-5);
}

// ---------------------------------------------------------------- elementwise bf16

// N x F contiguous views: the CUDA kernels, 16-byte vectors over the first
// N * F / 8 * 8 elements, a scalar tail for the rest.
void elementwise_case(long N, long F) {
  SCOPED_TRACE(testing::Message() << "elementwise N=" << N << " F=" << F);
  D2<bf16> g("g", N, F), u("u", N, F), h("h", N, F), dh("dh", N, F), dg("dg", N, F), du("du", N, F);
  D2<float> xf("xf", N, F);
  D2<bf16> xb("xb", N, F);
  D2<float> xw("xw", N, F);
  fill_random(g, 4.0), fill_random(u, 1.0), fill_random(dh, 1.0), fill_random(xf, 3.0);
  poison(h), poison(dg), poison(du), poison(xb), poison(xw);
  auto hg = host(g);
  auto hu = host(u);
  auto hdh = host(dh);
  auto hxf = host(xf);
  swiglu_forward<bf16, Mem>(g, u, h);
  swiglu_backward<bf16, Mem>(dh, g, u, dg, du);
  convert<float, bf16, Mem>(xf, xb);
  convert<bf16, float, Mem>(xb, xw);  // widening back: exact
  auto hh = host(h);
  auto hdg = host(dg);
  auto hdu = host(du);
  auto hxb = host(xb);
  auto hxw = host(xw);
  std::vector<double> hg_, hr, dgg, dgr, dug, dur, cg, cr;
  for (long i = 0; i < N; ++i)
    for (long f = 0; f < F; ++f) {
      const double a = double(hg(i, f)), b = double(hu(i, f)), d = double(hdh(i, f)), sg = 1.0 / (1.0 + std::exp(-a));
      hg_.push_back(double(hh(i, f))), hr.push_back(a * sg * b);
      dgg.push_back(double(hdg(i, f))), dgr.push_back(d * b * sg * (1.0 + a * (1.0 - sg)));
      dug.push_back(double(hdu(i, f))), dur.push_back(d * a * sg);
      cg.push_back(double(hxb(i, f))), cr.push_back(double(hxf(i, f)));
      // round to nearest even: the converted value is the bf16 nearest to x
      ASSERT_EQ(hxb(i, f).bits, bf16(hxf(i, f)).bits) << "at " << i << ", " << f;
      ASSERT_EQ(hxw(i, f), float(hxb(i, f))) << "widened at " << i << ", " << f;
    }
  EXPECT_LE(rel_err(hg_, hr), 1e-2);
  EXPECT_LE(rel_err(dgg, dgr), 1e-2);
  EXPECT_LE(rel_err(dug, dur), 1e-2);
  EXPECT_LE(rel_err(cg, cr), 4e-3);
}

TEST(ElementwiseCuda, SwigluConvertWiden) {
  elementwise_case(64, 11008 / 8);  // vectors only
  elementwise_case(37, 301);        // vectors and a scalar tail
  elementwise_case(1, 5);           // the tail alone
}

// D = rowsum(dO * O) with O in fp32 (TO = float) or in bf16 (TO = bf16, the
// copy the layers keep), on the CUDA rowsum kernel, against double sums of
// the same rounded inputs.
template <class TO> void rowsum_case(long s, long n, long d) {
  SCOPED_TRACE(std::string(std::is_same<TO, bf16>::value ? "bf16" : "fp32") + " O, s " + std::to_string(s) + " n " +
               std::to_string(n) + " d " + std::to_string(d));
  Kokkos::View<bf16***, Layout, Mem> dout("dout", s, n, d);
  Kokkos::View<TO***, Layout, Mem> o("o", s, n, d);
  D2<float> D("D", s, n);
  fill_random(D2<bf16>(dout.data(), s * n, d), 1.0), fill_random(D2<TO>(o.data(), s * n, d), 1.0);
  auto hdo = host(dout);
  auto ho = host(o);
  std::vector<double> ref;
  for (long i = 0; i < s; ++i)
    for (long h = 0; h < n; ++h) {
      double r = 0;
      for (long e = 0; e < d; ++e) r += double(hdo(i, h, e)) * double(ho(i, h, e));
      ref.push_back(r);
    }
  auto got = [&] {
    auto hD = host(D);
    std::vector<double> g;
    for (long i = 0; i < s; ++i)
      for (long h = 0; h < n; ++h) g.push_back(hD(i, h));
    return g;
  };
  // The engine's entry point (the CUDA kernel when the views allow it) ...
  poison(D);
  attention_backward_rowsum<bf16, Mem, TO>(dout, o, D);
  EXPECT_LE(rel_err(got(), ref), 1e-5) << "attention_backward_rowsum";
  // ... and the CUDA kernel itself, which a fallback to the portable kernel would not exercise.
  poison(D);
  const auto* op = [&] {
    if constexpr (std::is_same<TO, bf16>::value) return reinterpret_cast<const __nv_bfloat16*>(o.data());
    else return o.data();
  }();
  ASSERT_EQ(burst::fa::flash_rowsum(int(s), int(n), int(d), reinterpret_cast<const __nv_bfloat16*>(dout.data()), op, D.data(),
                             Kokkos::Cuda().cuda_stream()),
            cudaSuccess);
  Kokkos::fence();
  EXPECT_LE(rel_err(got(), ref), 1e-5) << "burst::fa::flash_rowsum";
}

TEST(AttentionRowsumCuda, MatchesDouble) {
  rowsum_case<float>(77, 3, 128);
  rowsum_case<bf16>(77, 3, 128);
  rowsum_case<bf16>(5, 7, 64);
  rowsum_case<bf16>(3, 2, 96);  // d not a multiple of 64: lanes past d idle
}

// The ring forward's merge of a block's (O_b, lse_b) into the running (O,
// lse) on fp32 CUDA views: the engine's entry (lse_merge, the CUDA kernel
// for contiguous views), the kernel itself and the portable kernel, each on
// its own copy of the same inputs, against a double merge. Rows whose lse is
// -inf (every 5th) take (O_b, lse_b) exactly, rows whose lse_b is -inf
// (every 7th; every 35th both) stay exactly as they were. d = 128 and 64 run
// the 16-byte vectors, d = 5 the scalar loop; rows past a block's 8 idle.
void lse_merge_case(long s, long n, long d) {
  SCOPED_TRACE("s " + std::to_string(s) + " n " + std::to_string(n) + " d " + std::to_string(d));
  using O3 = Kokkos::View<float***, Layout, Mem>;
  O3 o0("o0", s, n, d), ob("ob", s, n, d);
  D2<float> l0("l0", s, n), lb("lb", s, n);
  fill_random(D2<float>(o0.data(), s * n, d), 1.0), fill_random(D2<float>(ob.data(), s * n, d), 1.0);
  fill_random(l0, 4.0), fill_random(lb, 4.0);
  const float ninf = -std::numeric_limits<float>::infinity();
  {
    auto h0 = host(l0), hb = host(lb);
    for (long r = 0; r < s * n; ++r) {
      if (r % 5 == 0) h0(r / n, r % n) = ninf;
      if (r % 7 == 0) hb(r / n, r % n) = ninf;
    }
    Kokkos::deep_copy(l0, h0), Kokkos::deep_copy(lb, hb);
  }
  auto ho0 = host(o0), hob = host(ob);
  auto hl0 = host(l0), hlb = host(lb);
  auto run = [&](int which) {
    O3 o("o", s, n, d);
    D2<float> l("l", s, n);
    Kokkos::deep_copy(o, o0), Kokkos::deep_copy(l, l0);
    if (which == 0) lse_merge<float, Mem>(o, l, ob, lb);
    if (which == 1)
      EXPECT_EQ(burst::fa::flash_lse_merge((long long)(s * n), int(d), o.data(), l.data(), ob.data(), lb.data(),
                                           Kokkos::Cuda().cuda_stream()),
                cudaSuccess);
    if (which == 2) impl::lse_merge_portable<float, Mem>(o, l, ob, lb);
    Kokkos::fence();
    auto ho = host(o);
    auto hl = host(l);
    std::vector<double> got, ref, gotl, refl;
    for (long i = 0; i < s; ++i)
      for (long h = 0; h < n; ++h) {
        const float a = hl0(i, h), b = hlb(i, h);
        if (b == ninf || a == ninf) {  // exact: untouched, or the block's result as it is
          const bool take = b != ninf;
          ASSERT_EQ(hl(i, h), take ? b : a) << "row " << i << " head " << h << " (kernel " << which << ")";
          for (long e = 0; e < d; ++e)
            ASSERT_EQ(ho(i, h, e), take ? hob(i, h, e) : ho0(i, h, e)) << "row " << i << " head " << h << " (kernel " << which << ")";
          continue;
        }
        const double mx = std::max<double>(a, b), lnew = mx + std::log(std::exp(a - mx) + std::exp(b - mx));
        gotl.push_back(hl(i, h)), refl.push_back(lnew);
        for (long e = 0; e < d; ++e) {
          got.push_back(ho(i, h, e));
          ref.push_back(std::exp(a - lnew) * ho0(i, h, e) + std::exp(b - lnew) * hob(i, h, e));
        }
      }
    EXPECT_LE(rel_err(got, ref), 1e-6) << "kernel " << which;
    EXPECT_LE(rel_err(gotl, refl), 1e-6) << "kernel " << which;
  };
  for (int which = 0; which < 3; ++which) run(which);
}

TEST(LseMergeCuda, MatchesDouble) {
  lse_merge_case(77, 3, 128);
  lse_merge_case(41, 5, 64);
  lse_merge_case(9, 4, 5);
}

}  // namespace

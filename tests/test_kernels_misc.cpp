// RMSNorm, SwiGLU, GELU, RoPE (and its scalings), embedding, cross-entropy,
// AdamW, clipping, schedule: forward against direct formulas, backward
// against central finite differences in double (relative error < 1e-6).
#include "core/error.hpp"
#include "kernels/activations.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/optim.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <random>
#include <string>
#include <vector>

using namespace burst;
using namespace burst::kernels;
using Mem = DeviceMem;
using Vec = std::vector<double>;

namespace {
std::mt19937 rng(42);
Vec randn(size_t n, double scale = 1.0) {
  std::normal_distribution<double> N(0, scale);
  Vec v(n);
  for (auto& x : v) x = N(rng);
  return v;
}
Kokkos::View<double**, Layout, Mem> dev2(const Vec& v, long r, long c) {
  Kokkos::View<double**, Layout, Mem> d("act/t2", r, c);
  auto h = Kokkos::create_mirror_view(d);
  for (long i = 0; i < r * c; ++i) h.data()[i] = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}
Kokkos::View<double*, Layout, Mem> dev1(const Vec& v) {
  Kokkos::View<double*, Layout, Mem> d("act/t1", v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}
Kokkos::View<std::int32_t*, Layout, Mem> dev_ids(const std::vector<std::int32_t>& v) {
  Kokkos::View<std::int32_t*, Layout, Mem> d("act/tok", v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}
// One step of a 64-bit LCG (Knuth's MMIX constants): a reproducible stream
// for the tests that need exact values, independent of the library's RNG.
std::uint64_t lcg(std::uint64_t& r) { return r = r * 6364136223846793005ULL + 1442695040888963407ULL; }
template <class V> Vec host(const V& d) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  return Vec(h.data(), h.data() + h.span());
}
double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
// max over elements of |fd - analytic| / max(1, |fd|), central differences.
double fd_error(Vec& x, const Vec& grad, const std::function<double()>& loss, double eps = 1e-6) {
  double worst = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    const double x0 = x[e];
    x[e] = x0 + eps;
    const double lp = loss();
    x[e] = x0 - eps;
    const double lm = loss();
    x[e] = x0;
    const double fd = (lp - lm) / (2 * eps);
    worst = std::max(worst, std::fabs(fd - grad[e]) / std::max(1.0, std::fabs(fd)));
  }
  return worst;
}
}  // namespace

TEST(RmsNorm, ForwardAndGradients) {
  const long N = 5, H = 7;
  Vec x = randn(N * H), w = randn(H), W = randn(N * H);
  auto fwd = [&](Vec& y, Vec& rstd) {
    Kokkos::View<double**, Layout, Mem> dy("act/y", N, H);
    Kokkos::View<double*, Layout, Mem> dr("act/r", N);
    rmsnorm_forward<double, Mem>(dev2(x, N, H), dev1(w), 1e-5, dy, dr);
    y = host(dy), rstd = host(dr);
  };
  Vec y, rstd;
  fwd(y, rstd);
  for (long i = 0; i < N; ++i) {
    double ss = 0;
    for (long h = 0; h < H; ++h) ss += x[i * H + h] * x[i * H + h];
    const double r = 1 / std::sqrt(ss / H + 1e-5);
    EXPECT_NEAR(rstd[i], r, 1e-14);
    for (long h = 0; h < H; ++h) EXPECT_NEAR(y[i * H + h], x[i * H + h] * r * w[h], 1e-13);
  }
  Kokkos::View<double**, Layout, Mem> dx("act/dx", N, H);
  Kokkos::View<double*, Layout, Mem> dw("grads/dw", H);
  rmsnorm_backward<double, Mem>(dev2(W, N, H), dev2(x, N, H), dev1(w), dev1(rstd), dx, dw);
  Vec gx = host(dx), gw = host(dw);
  auto loss = [&]() {
    Vec yy, rr;
    fwd(yy, rr);
    return dot(yy, W);
  };
  EXPECT_LT(fd_error(x, gx, loss), 1e-6);
  EXPECT_LT(fd_error(w, gw, loss), 1e-6);
  // The residual form: dx = the same gradient + the residual, dw accumulated again.
  {
    Vec R = randn(N * H, 2.0);
    Kokkos::View<double**, Layout, Mem> dx2("act/dx2", N, H);
    rmsnorm_backward<double, Mem>(dev2(W, N, H), dev2(x, N, H), dev1(w), dev1(rstd), dx2, dw, dev2(R, N, H));
    const Vec gx2 = host(dx2), gw2 = host(dw);
    for (long e = 0; e < N * H; ++e) EXPECT_NEAR(gx2[e], gx[e] + R[e], 1e-13);
    for (long h = 0; h < H; ++h) EXPECT_NEAR(gw2[h], 2 * gw[h], 1e-13);
    EXPECT_THROW((rmsnorm_backward<double, Mem>(dev2(W, N, H), dev2(x, N, H), dev1(w), dev1(rstd), dx2, dw,
                                                Kokkos::View<double**, Layout, Mem>("act/r", N, H + 1))),
                 Error);  // a residual of another shape
    EXPECT_THROW((rmsnorm_backward<double, Mem>(dev2(W, N, H), dev2(x, N, H), dev1(w), dev1(rstd), dx2, dw,
                                                Kokkos::View<const double**, Layout, Mem>(dx2))),
                 Error);  // dx itself as the residual
  }
  EXPECT_THROW((rmsnorm_forward<double, Mem>(dev2(x, N, H), dev1(w), 0.0, Kokkos::View<double**, Layout, Mem>("act/y", N, H),
                                             Kokkos::View<double*, Layout, Mem>("act/r", N))),
               Error);
}

// dw's column sums: every column summed over the rows in order and added to
// dw (accumulated), at widths with whole and partial blocks of the host's
// column blocking (16), against the sequential sum: equal to a rounding
// (where the compiler contracts a product and an add into an FMA differs
// between the loops; measured 1.0e-15 relative at most on this CPU).
TEST(RmsNorm, WeightGradientColumnSumsInRowOrder) {
  const long N = 37;
  double worst = 0;
  for (long H : {1L, 15L, 16L, 17L, 45L, 64L}) {
    Vec x = randn(N * H), w = randn(H), W = randn(N * H), rstd = randn(N), dw0 = randn(H);
    for (double& r : rstd) r = 0.5 + std::fabs(r);
    Kokkos::View<double**, Layout, Mem> dx("act/dx", N, H);
    auto dw = dev1(dw0);
    rmsnorm_backward<double, Mem>(dev2(W, N, H), dev2(x, N, H), dev1(w), dev1(rstd), dx, dw);
    const Vec got = host(dw);
    for (long h = 0; h < H; ++h) {
      double sum = 0;
      for (long i = 0; i < N; ++i) sum += W[i * H + h] * x[i * H + h] * rstd[i];
      const double want = dw0[h] + sum;
      EXPECT_NEAR(got[h], want, 1e-13 * (1 + std::fabs(want))) << "H " << H << " column " << h;
      worst = std::max(worst, std::fabs(got[h] - want) / (1 + std::fabs(want)));
    }
  }
  EXPECT_LT(worst, 1e-14);  // one rounding's worth: the order is the sequential one
}

TEST(Activations, SwiGluGradients) {
  const long N = 4, F = 6;
  Vec g = randn(N * F, 2.0), u = randn(N * F), W = randn(N * F);
  auto fwd = [&]() {
    Kokkos::View<double**, Layout, Mem> h("act/h", N, F);
    swiglu_forward<double, Mem>(dev2(g, N, F), dev2(u, N, F), h);
    return host(h);
  };
  Vec h = fwd();
  for (long e = 0; e < N * F; ++e) EXPECT_NEAR(h[e], g[e] / (1 + std::exp(-g[e])) * u[e], 1e-14);
  Kokkos::View<double**, Layout, Mem> dg("act/dg", N, F), du("act/du", N, F);
  swiglu_backward<double, Mem>(dev2(W, N, F), dev2(g, N, F), dev2(u, N, F), dg, du);
  Vec gg = host(dg), gu = host(du);
  auto loss = [&]() { return dot(fwd(), W); };
  EXPECT_LT(fd_error(g, gg, loss), 1e-6);
  EXPECT_LT(fd_error(u, gu, loss), 1e-6);
}

// convert: double -> float and float -> bf16 round to nearest even (the bf16
// model's fp32 attention outputs before its GEMMs).
TEST(Activations, Convert) {
  const long N = 5, F = 7;
  const Vec x = randn(N * F, 3.0);
  Kokkos::View<float**, Layout, Mem> xf("act/xf", N, F);
  convert<double, float, Mem>(dev2(x, N, F), xf);
  Kokkos::View<bf16**, Layout, Mem> xb("act/xb", N, F);
  convert<float, bf16, Mem>(xf, xb);
  auto hf = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), xf);
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), xb);
  for (long e = 0; e < N * F; ++e) {
    EXPECT_EQ(hf.data()[e], float(x[size_t(e)]));
    EXPECT_EQ(hb.data()[e].bits, bf16(float(x[size_t(e)])).bits);
  }
  try {
    convert<float, bf16, Mem>(xf, Kokkos::View<bf16**, Layout, Mem>("act/bad", N, F + 1));
    FAIL() << "convert accepted another shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("convert"), std::string::npos) << e.what();
  }
}

TEST(Activations, GeluGradientsBothForms) {
  const long N = 3, F = 9;
  for (Gelu kind : {Gelu::Erf, Gelu::Tanh}) {
    Vec x = randn(N * F, 2.0), W = randn(N * F);
    auto fwd = [&]() {
      Kokkos::View<double**, Layout, Mem> y("act/y", N, F);
      gelu_forward<double, Mem>(dev2(x, N, F), kind, y);
      return host(y);
    };
    Vec y = fwd();
    for (long e = 0; e < N * F; ++e) {
      const double ref = kind == Gelu::Erf ? 0.5 * x[e] * (1 + std::erf(x[e] / std::sqrt(2.0)))
                                           : 0.5 * x[e] * (1 + std::tanh(std::sqrt(2 / M_PI) * (x[e] + 0.044715 * std::pow(x[e], 3))));
      EXPECT_NEAR(y[e], ref, 1e-14);
    }
    Kokkos::View<double**, Layout, Mem> dx("act/dx", N, F);
    gelu_backward<double, Mem>(dev2(W, N, F), dev2(x, N, F), kind, dx);
    Vec gx = host(dx);
    EXPECT_LT(fd_error(x, gx, [&]() { return dot(fwd(), W); }), 1e-6);
  }
}

namespace {
// x [s, nh, d] and the positions as device views.
std::pair<Kokkos::View<double***, Layout, Mem>, Kokkos::View<long*, Layout, Mem>> rope_inputs(const Vec& x, long s, long nh, long d,
                                                                                             const std::vector<long>& pos) {
  Kokkos::View<double***, Layout, Mem> v("act/x", s, nh, d);
  auto h = Kokkos::create_mirror_view(v);
  for (size_t e = 0; e < x.size(); ++e) h.data()[e] = x[e];
  Kokkos::deep_copy(v, h);
  Kokkos::View<long*, Layout, Mem> p("act/pos", s);
  auto hp = Kokkos::create_mirror_view(p);
  for (long i = 0; i < s; ++i) hp(i) = pos[i];
  Kokkos::deep_copy(p, hp);
  return {v, p};
}
Vec rope_run(const Vec& x, long s, long nh, long d, const std::vector<long>& pos, const RopeTable& t, bool inverse) {
  auto [v, p] = rope_inputs(x, s, nh, d, pos);
  rope_apply<double, Mem>(v, p, dev1(t.inv_freq), t.attention_factor, inverse);
  return host(v);
}
}  // namespace

// rope_apply_to: out of place and converting (double -> float here; the model's backward runs fp32 -> bf16):
// the in-place rotation rounded once, the input untouched; a wrong output shape is refused.
TEST(Rope, OutOfPlaceConvertingEqualsInPlaceRounded) {
  const long s = 5, nh = 3, d = 8;
  RopeConfig cfg;
  cfg.head_dim = d;
  RopeTable t = rope_table(cfg, s);
  const std::vector<long> pos = {7, 0, 123456, 2, 99};
  const Vec x = randn(s * nh * d);
  for (bool inverse : {false, true}) {
    const Vec ref = rope_run(x, s, nh, d, pos, t, inverse);
    auto [v, p] = rope_inputs(x, s, nh, d, pos);
    Kokkos::View<float***, Layout, Mem> y("act/y", s, nh, d);
    rope_apply_to<double, float, Mem>(v, y, p, dev1(t.inv_freq), t.attention_factor, inverse);
    auto hy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    auto hv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    for (size_t e = 0; e < x.size(); ++e) {
      EXPECT_EQ(hy.data()[e], float(ref[e])) << e << (inverse ? " inverse" : "");
      EXPECT_EQ(hv.data()[e], x[e]) << "the input changed at " << e;
    }
    Kokkos::View<float***, Layout, Mem> bad("act/bad", s, nh + 1, d);
    EXPECT_THROW((rope_apply_to<double, float, Mem>(v, bad, p, dev1(t.inv_freq), t.attention_factor, inverse)), Error);
  }
}

TEST(Rope, RotationPropertiesAndBackward) {
  const long s = 6, nh = 2, d = 8;
  RopeConfig cfg;
  cfg.head_dim = d;
  RopeTable t = rope_table(cfg, s);
  std::vector<long> pos = {0, 5, 17, 1000000, 3, 2};
  Vec x = randn(s * nh * d);
  Vec y = rope_run(x, s, nh, d, pos, t, false);
  // Position 0 is the identity; every rotation preserves the norm.
  for (long e = 0; e < nh * d; ++e) EXPECT_NEAR(y[e], x[e], 1e-15);
  for (long i = 0; i < s; ++i) {
    double a = 0, b = 0;
    for (long e = 0; e < nh * d; ++e) a += x[i * nh * d + e] * x[i * nh * d + e], b += y[i * nh * d + e] * y[i * nh * d + e];
    EXPECT_NEAR(a, b, 1e-12);
  }
  // inverse is the transpose (= the backward): <R x, w> = <x, R^T w>, and R^T R = I.
  Vec w = randn(s * nh * d);
  EXPECT_NEAR(dot(y, w), dot(x, rope_run(w, s, nh, d, pos, t, true)), 1e-11);
  Vec back = rope_run(y, s, nh, d, pos, t, true);
  for (size_t e = 0; e < x.size(); ++e) EXPECT_NEAR(back[e], x[e], 1e-12);
  // The score of rotated q, k depends on the position difference only.
  Vec q = randn(d), k = randn(d);
  auto score = [&](long pq, long pk) {
    return dot(rope_run(q, 1, 1, d, {pq}, t, false), rope_run(k, 1, 1, d, {pk}, t, false));
  };
  EXPECT_NEAR(score(10, 3), score(107, 100), 1e-11);
  // HF's frequencies: theta^(-2e/d).
  for (long e = 0; e < d / 2; ++e) EXPECT_NEAR(t.inv_freq[e], std::pow(10000.0, -2.0 * e / d), 1e-15);
}

TEST(Rope, ScalingKinds) {
  RopeConfig base;
  base.head_dim = 128;
  base.theta = 500000;
  base.max_position_embeddings = 131072;
  const RopeTable plain = rope_table(base, 1);
  RopeConfig c = base;
  c.scaling.type = "linear";
  c.scaling.factor = 4;
  RopeTable lin = rope_table(c, 1);
  for (size_t e = 0; e < plain.inv_freq.size(); ++e) EXPECT_DOUBLE_EQ(lin.inv_freq[e], plain.inv_freq[e] / 4);
  // llama3 (Llama 3.1: factor 8, low 1, high 4, original 8192): high
  // frequencies kept, low ones divided by the factor, smooth in between.
  c.scaling = RopeScaling{"llama3", 8.0, 8192, 1.0, 4.0};
  RopeTable l3 = rope_table(c, 1);
  EXPECT_DOUBLE_EQ(l3.inv_freq[0], plain.inv_freq[0]);
  EXPECT_DOUBLE_EQ(l3.inv_freq.back(), plain.inv_freq.back() / 8);
  int medium = 0;
  for (size_t e = 0; e < l3.inv_freq.size(); ++e) {
    EXPECT_LE(l3.inv_freq[e], plain.inv_freq[e]);
    EXPECT_GE(l3.inv_freq[e], plain.inv_freq[e] / 8 * (1 - 1e-12));
    if (l3.inv_freq[e] < plain.inv_freq[e] && l3.inv_freq[e] > plain.inv_freq[e] / 8 * (1 + 1e-12)) ++medium;
  }
  EXPECT_GT(medium, 0);
  // yarn: fast dims extrapolate (unchanged), slow dims interpolate (/factor), attention factor 0.1 ln f + 1.
  c.scaling = RopeScaling{};
  c.scaling.type = "yarn";
  c.scaling.factor = 4;
  c.scaling.original_max_position_embeddings = 4096;
  RopeTable y = rope_table(c, 1);
  EXPECT_DOUBLE_EQ(y.inv_freq[0], plain.inv_freq[0]);
  EXPECT_NEAR(y.inv_freq.back(), plain.inv_freq.back() / 4, 1e-18);
  EXPECT_NEAR(y.attention_factor, 0.1 * std::log(4.0) + 1, 1e-15);
  // dynamic NTK: unchanged up to the original length, a larger base beyond.
  c.scaling = RopeScaling{};
  c.scaling.type = "dynamic";
  c.scaling.factor = 2;
  c.scaling.original_max_position_embeddings = 4096;
  EXPECT_DOUBLE_EQ(rope_table(c, 4096).inv_freq[5], plain.inv_freq[5]);
  const double b2 = 500000 * std::pow(2.0 * 16384 / 4096 - 1, 128.0 / 126.0);
  EXPECT_NEAR(rope_table(c, 16384).inv_freq[5], std::pow(b2, -10.0 / 128), 1e-15);
  c.scaling.type = "ntk-by-parts";
  try {
    rope_table(c, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_STREQ(e.what(), "rope_scaling type 'ntk-by-parts' is not supported (default, linear, dynamic, llama3, yarn)");
  }
}

TEST(Embedding, ForwardBackwardWithRepeatedTokens) {
  const long V = 5, H = 3;
  Vec W = randn(V * H);
  std::vector<std::int32_t> ids = {3, 0, 3, 4, 3};
  Kokkos::View<std::int32_t*, Layout, Mem> tok("act/tok", ids.size());
  auto ht = Kokkos::create_mirror_view(tok);
  for (size_t i = 0; i < ids.size(); ++i) ht(i) = ids[i];
  Kokkos::deep_copy(tok, ht);
  Kokkos::View<double**, Layout, Mem> out("act/emb", ids.size(), H);
  embedding_forward<double, Mem>(tok, dev2(W, V, H), out);
  Vec o = host(out);
  for (size_t i = 0; i < ids.size(); ++i)
    for (long h = 0; h < H; ++h) EXPECT_EQ(o[i * H + h], W[ids[i] * H + h]);
  Vec dout = randn(ids.size() * H);
  Kokkos::View<double**, Layout, Mem> dW("grads/emb", V, H);
  embedding_backward<double, Mem>(tok, dev2(dout, ids.size(), H), dW);
  Vec g = host(dW);
  for (long h = 0; h < H; ++h) {
    EXPECT_NEAR(g[3 * H + h], dout[0 * H + h] + dout[2 * H + h] + dout[4 * H + h], 1e-15);
    EXPECT_EQ(g[1 * H + h], 0.0);
  }
  ht(3) = 9;
  Kokkos::deep_copy(tok, ht);
  try {
    embedding_forward<double, Mem>(tok, dev2(W, V, H), out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding: token id 9 at position 3 is outside the vocabulary [0, 5)");
  }
  try {  // the backward checks the ids too: a bad one would write outside dW
    embedding_backward<double, Mem>(tok, dev2(dout, ids.size(), H), dW);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding backward: token id 9 at position 3 is outside the vocabulary [0, 5)");
  }
}

// The sorted backward (positions sorted by token, one thread per distinct
// token and column) against the one-token-at-a-time loop in float, where the
// order of the additions shows: bitwise equal, with repeated tokens (one token
// at a third of the positions, runs of 40 of one token, one token at every
// position), lengths around the unroll of 8, token ids up to V - 1 (every
// radix bit), and a dW that starts non-zero.
TEST(Embedding, BackwardAddsInPositionOrder) {
  const long H = 5;
  for (long V : {37L, 17L})  // 6 radix passes (the order ends in `order`) and 5 (it ends in the scratch and is copied)
  for (long N : {1L, 7L, 8L, 9L, 17L, 100L, 1000L, -300L}) {
    const bool one_token = N < 0;
    N = one_token ? -N : N;
    std::vector<std::int32_t> ids(static_cast<size_t>(N));
    std::uint64_t r = 12345 + std::uint64_t(N);
    for (long i = 0; i < N; ++i) {
      const std::int32_t x = std::int32_t((lcg(r) >> 33) % std::uint64_t(V));
      ids[size_t(i)] = one_token ? std::int32_t(V - 1)
                                 : (i / 40) % 5 == 1 ? 7 : (x % 3 == 0 ? 3 : x);  // runs of 40 x token 7, token 3 at ~1/3
    }
    const auto tok = dev_ids(ids);
    Kokkos::View<float**, Layout, Mem> dout("act/dout", N, H), dW("grads/emb", V, H);
    auto hd = Kokkos::create_mirror_view(dout);
    auto hw = Kokkos::create_mirror_view(dW);
    for (long i = 0; i < N; ++i)
      for (long h = 0; h < H; ++h)
        hd(i, h) = float(double(lcg(r) >> 11) / double(1ULL << 53) * 2 - 1) * (i % 7 == 0 ? 1e4f : 1.f);  // magnitudes that round
    for (long v = 0; v < V; ++v)
      for (long h = 0; h < H; ++h) hw(v, h) = 0.25f * float(v) - 0.5f * float(h);
    Kokkos::deep_copy(dout, hd);
    Kokkos::deep_copy(dW, hw);
    std::vector<float> want(static_cast<size_t>(V * H));
    for (long v = 0; v < V; ++v)
      for (long h = 0; h < H; ++h) want[size_t(v * H + h)] = hw(v, h);
    for (long i = 0; i < N; ++i)
      for (long h = 0; h < H; ++h) want[size_t(ids[size_t(i)] * H + h)] += hd(i, h);  // the position order
    embedding_backward<float, Mem>(tok, dout, dW);
    Kokkos::deep_copy(hw, dW);
    long differ = 0;
    for (long v = 0; v < V; ++v)
      for (long h = 0; h < H; ++h) differ += hw(v, h) != want[size_t(v * H + h)];
    EXPECT_EQ(differ, 0) << "V = " << V << ", N = " << N;
  }
}

// The stable sort under the backward: positions grouped by token in
// increasing id, ascending within a token, at vocabularies of 1, 2 (one radix
// bit), 3 and 2^17 + 5.
TEST(Embedding, SortPositionsByTokenIsStable) {
  for (long V : {1L, 2L, 3L, (1L << 17) + 5}) {
    const long N = 777;
    std::vector<std::int32_t> ids(static_cast<size_t>(N));
    std::uint64_t r = 99 + std::uint64_t(V);
    for (long i = 0; i < N; ++i)
      ids[size_t(i)] = std::int32_t((lcg(r) >> 33) % std::uint64_t(V > 64 ? 40 : V)) * std::int32_t(V > 64 ? 3277 : 1);
    const auto tok = dev_ids(ids);
    Kokkos::View<std::int32_t*, Layout, Mem> order("work/o", N), tmp("work/t", N), scan("work/s", N);
    sort_positions_by_token<Mem>(tok, V, order, tmp, scan);
    auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), order);
    std::vector<std::int32_t> want(static_cast<size_t>(N));
    for (long i = 0; i < N; ++i) want[size_t(i)] = std::int32_t(i);
    std::stable_sort(want.begin(), want.end(), [&](std::int32_t x, std::int32_t y) { return ids[size_t(x)] < ids[size_t(y)]; });
    long differ = 0;
    for (long i = 0; i < N; ++i) differ += ho(i) != want[size_t(i)];
    EXPECT_EQ(differ, 0) << "V = " << V;
    EXPECT_THROW(sort_positions_by_token<Mem>(tok, V, order, tmp, Kokkos::View<std::int32_t*, Layout, Mem>("work/s", N - 1)),
                 Error);  // scratch shorter than the tokens
  }
}

TEST(CrossEntropy, ValueGradientAndIgnoreIndex) {
  const long N = 6, V = 7;
  Vec logits = randn(N * V, 3.0);
  std::vector<std::int32_t> tg = {2, kIgnoreIndex, 6, 0, kIgnoreIndex, 3};
  Kokkos::View<std::int32_t*, Layout, Mem> target("act/tg", N);
  auto ht = Kokkos::create_mirror_view(target);
  for (long i = 0; i < N; ++i) ht(i) = tg[i];
  Kokkos::deep_copy(target, ht);
  auto run = [&](bool grad, Vec* dl) {
    Kokkos::View<double*, Layout, Mem> loss("act/loss", N);
    Kokkos::View<double**, Layout, Mem> d("act/dl", grad ? N : 0, grad ? V : 0);
    LossSum s = cross_entropy<double, Mem>(dev2(logits, N, V), target, loss, d, 1.0 / 4);
    if (dl) *dl = host(d);
    return s;
  };
  Vec dl;
  LossSum s = run(true, &dl);
  EXPECT_EQ(s.valid, 4);
  double ref = 0;
  for (long i = 0; i < N; ++i) {
    if (tg[i] == kIgnoreIndex) continue;
    double z = 0;
    for (long c = 0; c < V; ++c) z += std::exp(logits[i * V + c]);
    ref += std::log(z) - logits[i * V + tg[i]];
  }
  EXPECT_NEAR(s.sum, ref, 1e-12);
  EXPECT_LT(fd_error(logits, dl, [&]() { return run(false, nullptr).sum / 4; }), 1e-6);
  for (long c = 0; c < V; ++c) EXPECT_EQ(dl[1 * V + c], 0.0);
  ht(0) = 7;
  Kokkos::deep_copy(target, ht);
  try {
    run(false, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cross_entropy: target at row 0 is outside [0, 7) and is not the ignore index -100");
  }
}

TEST(Optim, AdamWMatchesScalarReference) {
  const long n = 10;
  Vec p = randn(n), g0 = randn(n);
  AdamWParams hp{1e-2, 0.9, 0.95, 1e-8, 0.1};
  auto dp = dev1(p);
  Kokkos::View<double*, Layout, Mem> m("optim/m", n), v("optim/v", n);
  Vec rp = p, rm(n, 0), rv(n, 0);
  for (long t = 1; t <= 3; ++t) {
    Vec g = g0;
    for (auto& x : g) x *= double(t);
    adamw_step<double, Mem>(dp, dev1(g), m, v, hp, t);
    for (long i = 0; i < n; ++i) {
      rp[i] *= 1 - hp.lr * hp.weight_decay;
      rm[i] = 0.9 * rm[i] + 0.1 * g[i];
      rv[i] = 0.95 * rv[i] + 0.05 * g[i] * g[i];
      rp[i] -= hp.lr * (rm[i] / (1 - std::pow(0.9, t))) / (std::sqrt(rv[i] / (1 - std::pow(0.95, t))) + 1e-8);
    }
  }
  Vec got = host(dp);
  for (long i = 0; i < n; ++i) EXPECT_NEAR(got[i], rp[i], 1e-14);
}

// The clip factor applied inside the step (g_scale, as the trainer does)
// equals scaling the gradient first (in double: the same products).
TEST(Optim, AdamWScalesTheGradientInside) {
  const long n = 64;
  Vec p = randn(n), g = randn(n);
  AdamWParams hp{1e-2, 0.9, 0.95, 1e-8, 0.1};
  const double clip = 0.23;
  auto pa = dev1(p), pb = dev1(p), gb = dev1(g);
  Kokkos::View<double*, Layout, Mem> ma("optim/ma", n), va("optim/va", n), mb("optim/mb", n), vb("optim/vb", n);
  for (long t = 1; t <= 3; ++t) {
    adamw_step<double, Mem>(pa, dev1(g), ma, va, hp, t, 0.5, clip);
    auto gs = dev1(g);
    kernels::scale_inplace<double, Mem>(gs, clip);
    adamw_step<double, Mem>(pb, gs, mb, vb, hp, t, 0.5);
  }
  Vec a = host(pa), b = host(pb), ref = p;
  for (long i = 0; i < n; ++i) EXPECT_EQ(a[i], b[i]) << i;
  double moved = 0;
  for (long i = 0; i < n; ++i) moved = std::max(moved, std::fabs(a[i] - ref[i]));
  EXPECT_GT(moved, 1e-4);  // the step did update
}

// The mixed-precision step: the master follows adamw_step exactly (with the
// gradient scaled inside), and the bf16 copy is the master rounded to nearest.
TEST(Optim, AdamWCopyMatchesAdamWAndRoundsTheCopy) {
  const long n = 1000;
  Vec p0 = randn(n), g0 = randn(n);
  AdamWParams hp{3e-2, 0.9, 0.95, 1e-8, 0.1};
  std::vector<float> pf(p0.begin(), p0.end()), gf(g0.begin(), g0.end());
  auto devf = [&](const std::vector<float>& x) {
    Kokkos::View<float*, Layout, Mem> d("optim/test", x.size());
    auto h = Kokkos::create_mirror_view(d);
    for (size_t i = 0; i < x.size(); ++i) h(i) = x[i];
    Kokkos::deep_copy(d, h);
    return d;
  };
  auto a = devf(pf), b = devf(pf), g = devf(gf), gs = devf(gf);
  const double scale = 0.37;
  kernels::scale_inplace<float, Mem>(gs, scale);
  Kokkos::View<float*, Layout, Mem> ma("optim/ma", n), va("optim/va", n), mb("optim/mb", n), vb("optim/vb", n);
  auto copy = uninit_view<Kokkos::View<bf16*, Layout, Mem>>("optim/copy", n);
  for (long t = 1; t <= 3; ++t) {
    adamw_step<float, Mem>(a, gs, ma, va, hp, t);
    adamw_step_copy<float, bf16, Mem>(b, g, mb, vb, hp, t, copy, scale);
  }
  auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  auto hc = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), copy);
  for (long i = 0; i < n; ++i) {
    EXPECT_NEAR(hb(i), ha(i), 1e-6 * (1 + std::fabs(ha(i))));
    EXPECT_EQ(hc(i).bits, bf16(hb(i)).bits) << i;
  }
  Kokkos::View<bf16*, Layout, Mem> short_copy("optim/short", n - 1);
  try {
    adamw_step_copy<float, bf16, Mem>(b, g, mb, vb, hp, 4, short_copy);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("copy lengths differ"), std::string::npos) << e.what();
  }
}

// Every length class of the U-way split (n below U, not a multiple of U,
// a multiple): the sum of the squares, in double, of every element once.
TEST(Optim, SumSquaresEveryElementOnce) {
  for (long n : {0L, 1L, 7L, 8L, 9L, 63L, 64L, 1000L, 4099L}) {
    Vec g(n);
    long double ref = 0;
    for (long i = 0; i < n; ++i) {
      g[i] = std::sin(0.37 * double(i) + 1.0) * double(1 + i % 5);
      ref += (long double)g[i] * g[i];
    }
    const double got = sum_squares<double, Mem>(dev1(g));
    EXPECT_NEAR(got, double(ref), 1e-13 * (1.0 + double(ref))) << n;
    if (n > 0) {  // one element changed: the sum moves by its change
      Vec h = g;
      h[n - 1] += 1.0;
      const double d = sum_squares<double, Mem>(dev1(h)) - got;
      EXPECT_NEAR(d, 2.0 * g[n - 1] + 1.0, 1e-12 * (1.0 + double(ref))) << n;
    }
  }
  Kokkos::View<float*, Layout, Mem> f("optim/f", 4099);
  Kokkos::deep_copy(f, 0.5f);
  EXPECT_DOUBLE_EQ((sum_squares<float, Mem>(f)), 4099 * 0.25);
}

TEST(Optim, ClippingAndSchedule) {
  Vec g = {3, 4};
  EXPECT_DOUBLE_EQ((sum_squares<double, Mem>(dev1(g))), 25.0);
  EXPECT_DOUBLE_EQ(clip_factor(5.0, 10.0), 1.0);
  EXPECT_NEAR(clip_factor(5.0, 1.0), 1.0 / 5.0, 1e-6);
  EXPECT_DOUBLE_EQ(clip_factor(5.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(cosine_lr(0, 10, 110, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(cosine_lr(9, 10, 110, 1.0, 0.1), 1.0);
  EXPECT_DOUBLE_EQ(cosine_lr(10, 10, 110, 1.0, 0.1), 1.0);
  EXPECT_NEAR(cosine_lr(60, 10, 110, 1.0, 0.1), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(cosine_lr(110, 10, 110, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(cosine_lr(500, 10, 110, 1.0, 0.1), 0.1);
}

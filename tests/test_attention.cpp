// The block flash-attention kernel against a naive softmax(QK^T)V reference
// in double, for every mask kind, GQA 1/2/4, odd sizes (sq != sk, sizes not
// multiples of the tile), rows with no visible key; its backward against the
// analytic reference and against central finite differences; tile skipping;
// and the LSE merge; the closed-form / reduced tile count (what the CUDA path
// returns) against the kernel's own.
#include "core/error.hpp"
#include "kernels/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace burst;
using namespace burst::kernels;

namespace {

using HV3 = Kokkos::View<double***, Layout, Kokkos::HostSpace>;
using HV2 = Kokkos::View<double**, Layout, Kokkos::HostSpace>;

struct Case {
  long sq, sk, n, nkv, d;
  MaskKind kind;
  long offset = 0, window = 0;
  bool gcausal = true, same_doc = true;  // General only (window: 0 = none)
};

struct MaskData {
  std::vector<long> qpos, kpos;
  std::vector<int> qdoc, kdoc;
};

// Host predicate, written independently of the kernel's.
bool visible_ref(const Case& c, const MaskData& m, long i, long j) {
  switch (c.kind) {
    case MaskKind::None: return true;
    case MaskKind::Causal: return j <= i + c.offset;
    case MaskKind::Window: return m.qpos[i] >= m.kpos[j] && m.qpos[i] - m.kpos[j] < c.window;
    case MaskKind::Document: return m.qdoc[i] == m.kdoc[j] && m.kpos[j] <= m.qpos[i];
    case MaskKind::General: {
      if (m.qdoc[i] < 0 || m.kdoc[j] < 0) return false;  // padding
      if (c.same_doc && m.qdoc[i] != m.kdoc[j]) return false;
      if (c.gcausal && m.kpos[j] > m.qpos[i]) return false;
      return c.window <= 0 || m.qpos[i] - m.kpos[j] < c.window;
    }
  }
  return true;
}

MaskData make_mask_data(const Case& c, std::mt19937& g) {
  MaskData m;
  // Keys at positions 0..sk-1; queries are the last sq of them shifted by a
  // random amount, so some queries precede every key (empty rows).
  long shift = long(g() % 5) - 2;
  for (long j = 0; j < c.sk; ++j) m.kpos.push_back(j);
  for (long i = 0; i < c.sq; ++i) m.qpos.push_back(c.sk - c.sq + i + shift);
  // Documents: contiguous runs of random length over positions.
  auto doc_of = [&](long pos) { return int((pos < 0 ? 0 : pos) / 7 + ((pos % 5 == 0) ? 1000 : 0)); };
  for (long j = 0; j < c.sk; ++j) m.kdoc.push_back(doc_of(m.kpos[j]));
  for (long i = 0; i < c.sq; ++i) m.qdoc.push_back(doc_of(m.qpos[i]));
  if (c.kind == MaskKind::General) {  // a padded tail on both sides
    for (long j = c.sk - c.sk / 6; j < c.sk; ++j) m.kdoc[j] = -1;
    for (long i = c.sq - c.sq / 5; i < c.sq; ++i) m.qdoc[i] = -1;
  }
  return m;
}

template <class Mem>
AttnMask<Mem> mask_of(const Case& c, Kokkos::View<long*, Mem> qp, Kokkos::View<long*, Mem> kp, Kokkos::View<int*, Mem> qd,
                      Kokkos::View<int*, Mem> kd) {
  switch (c.kind) {
    case MaskKind::None: return AttnMask<Mem>::none();
    case MaskKind::Causal: return AttnMask<Mem>::causal(c.offset);
    case MaskKind::Window: return AttnMask<Mem>::sliding_window(c.window, qp, kp);
    case MaskKind::Document: return AttnMask<Mem>::document(qd, kd, qp, kp);
    case MaskKind::General: return AttnMask<Mem>::general(c.gcausal, c.window, c.same_doc, qd, kd, qp, kp);
  }
  return AttnMask<Mem>::none();
}

HV3 random3(long a, long b, long c, std::mt19937& g) {
  HV3 v("act/t", a, b, c);
  std::normal_distribution<double> N(0, 1);
  for (long i = 0; i < a * b * c; ++i) v.data()[i] = N(g);
  return v;
}

struct Result {
  HV3 o, dq, dk, dv;
  HV2 lse;
  long fwd_tiles = 0, bwd_tiles = 0;
};

// The kernel under test, in double, on the default memory space.
Result run_kernel(const Case& c, const MaskData& md, const HV3& q, const HV3& k, const HV3& v, const HV3& dout,
                  AttnTiles tiles) {
  using Mem = DeviceMem;
  auto dq_ = Kokkos::create_mirror_view_and_copy(Mem(), q);
  auto dk_ = Kokkos::create_mirror_view_and_copy(Mem(), k);
  auto dv_ = Kokkos::create_mirror_view_and_copy(Mem(), v);
  auto ddo = Kokkos::create_mirror_view_and_copy(Mem(), dout);
  Kokkos::View<long*, Mem> qp("act/qp", c.sq), kp("act/kp", c.sk);
  Kokkos::View<int*, Mem> qd("act/qd", c.sq), kd("act/kd", c.sk);
  {
    auto hqp = Kokkos::create_mirror_view(qp);
    auto hkp = Kokkos::create_mirror_view(kp);
    auto hqd = Kokkos::create_mirror_view(qd);
    auto hkd = Kokkos::create_mirror_view(kd);
    // Index-based masks need no positions: the vectors may be empty then.
    if (long(md.qpos.size()) == c.sq)
      for (long i = 0; i < c.sq; ++i) hqp(i) = md.qpos[i], hqd(i) = md.qdoc[i];
    if (long(md.kpos.size()) == c.sk)
      for (long j = 0; j < c.sk; ++j) hkp(j) = md.kpos[j], hkd(j) = md.kdoc[j];
    Kokkos::deep_copy(qp, hqp);
    Kokkos::deep_copy(kp, hkp);
    Kokkos::deep_copy(qd, hqd);
    Kokkos::deep_copy(kd, hkd);
  }
  const AttnMask<Mem> mask = mask_of(c, qp, kp, qd, kd);
  const double scale = 1.0 / std::sqrt(double(c.d));
  Kokkos::View<double***, Layout, Mem> o("act/o", c.sq, c.n, c.d), gq("grads/dq", c.sq, c.n, c.d),
      gk("grads/dk", c.sk, c.nkv, c.d), gv("grads/dv", c.sk, c.nkv, c.d);
  Kokkos::View<double**, Layout, Mem> lse("act/lse", c.sq, c.n), D("act/D", c.sq, c.n);
  Kokkos::deep_copy(o, std::nan(""));  // poison: every element must be written
  Kokkos::deep_copy(gq, std::nan(""));
  Kokkos::deep_copy(gk, std::nan(""));
  Kokkos::deep_copy(gv, std::nan(""));
  Result r;
  r.fwd_tiles = flash_attention_forward<double, Mem>(dq_, dk_, dv_, mask, scale, o, lse, tiles);
  attention_backward_rowsum<double, Mem>(ddo, o, D);
  r.bwd_tiles = flash_attention_backward<double, Mem>(dq_, dk_, dv_, ddo, lse, D, mask, scale, gq, gk, gv, false, tiles);
  // The count the CUDA path returns (computed from the mask alone) is the one
  // the portable kernel reports.
  const long counted = impl::count_visible_tiles<ExecSpace>(mask, c.sq, c.sk, c.n, tiles);
  EXPECT_EQ(counted, r.fwd_tiles) << "count_visible_tiles vs the forward's count, " << mask_kind_name(c.kind);
  EXPECT_EQ(counted, r.bwd_tiles) << "count_visible_tiles vs the backward's count, " << mask_kind_name(c.kind);
  r.o = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
  r.lse = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lse);
  r.dq = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gq);
  r.dk = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gk);
  r.dv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gv);
  return r;
}

// Naive reference: explicit softmax, and the analytic gradients of
// L = sum(O * dO) (so dL/dO = dO).
Result run_reference(const Case& c, const MaskData& md, const HV3& q, const HV3& k, const HV3& v, const HV3& dout) {
  const double scale = 1.0 / std::sqrt(double(c.d));
  const long group = c.n / c.nkv;
  Result r;
  r.o = HV3("act/ro", c.sq, c.n, c.d);
  r.lse = HV2("act/rl", c.sq, c.n);
  r.dq = HV3("act/rdq", c.sq, c.n, c.d);
  r.dk = HV3("act/rdk", c.sk, c.nkv, c.d);
  r.dv = HV3("act/rdv", c.sk, c.nkv, c.d);
  std::vector<double> s(c.sk), p(c.sk), dp(c.sk);
  for (long h = 0; h < c.n; ++h) {
    const long hk = h / group;
    for (long i = 0; i < c.sq; ++i) {
      double mx = -INFINITY;
      for (long j = 0; j < c.sk; ++j) {
        s[j] = -INFINITY;
        if (!visible_ref(c, md, i, j)) continue;
        double dot = 0;
        for (long e = 0; e < c.d; ++e) dot += q(i, h, e) * k(j, hk, e);
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      if (mx == -INFINITY) {
        r.lse(i, h) = -INFINITY;
        continue;  // O row stays 0, no gradient
      }
      double z = 0;
      for (long j = 0; j < c.sk; ++j) z += std::exp(s[j] - mx);
      r.lse(i, h) = mx + std::log(z);
      for (long j = 0; j < c.sk; ++j) p[j] = std::exp(s[j] - r.lse(i, h));
      for (long e = 0; e < c.d; ++e) {
        double acc = 0;
        for (long j = 0; j < c.sk; ++j) acc += p[j] * v(j, hk, e);
        r.o(i, h, e) = acc;
      }
      double Di = 0;
      for (long e = 0; e < c.d; ++e) Di += dout(i, h, e) * r.o(i, h, e);
      for (long j = 0; j < c.sk; ++j) {
        if (p[j] == 0) continue;
        double dpj = 0;
        for (long e = 0; e < c.d; ++e) dpj += dout(i, h, e) * v(j, hk, e);
        const double ds = p[j] * (dpj - Di);
        for (long e = 0; e < c.d; ++e) {
          r.dv(j, hk, e) += p[j] * dout(i, h, e);
          r.dq(i, h, e) += scale * ds * k(j, hk, e);
          r.dk(j, hk, e) += scale * ds * q(i, h, e);
        }
      }
    }
  }
  return r;
}

template <class V> double rel_err(const V& a, const V& b) {
  double num = 0, den = 0;
  for (size_t x = 0; x < a.span(); ++x) {
    const double u = a.data()[x], w = b.data()[x];
    if (std::isinf(u) || std::isinf(w)) {
      if (u != w) return INFINITY;
      continue;
    }
    if (std::isnan(u) || std::isnan(w)) return INFINITY;
    num += (u - w) * (u - w);
    den += w * w;
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  const long shapes[][3] = {{37, 53, 8}, {64, 64, 16}, {1, 70, 8}, {45, 13, 4}};
  for (auto& sh : shapes)
    for (long ratio : {1, 2, 4})
      for (int kind = 0; kind < 4; ++kind) {
        Case c{sh[0], sh[1], 4, 4 / ratio, sh[2], MaskKind(kind)};
        if (c.kind == MaskKind::Causal) c.offset = sh[1] - sh[0] - 3;  // some rows see nothing when sk < sq
        if (c.kind == MaskKind::Window) c.window = 9;
        cs.push_back(c);
      }
  // strictly lower and a plain diagonal
  cs.push_back(Case{33, 33, 2, 1, 8, MaskKind::Causal, -1});
  cs.push_back(Case{33, 33, 2, 2, 8, MaskKind::Causal, 0});
  // the head dims the host kernel compiles as constants (16 above; 32, 64, 128)
  for (long d : {32, 64, 128}) {
    cs.push_back(Case{41, 57, 4, 2, d, MaskKind::None});
    cs.push_back(Case{70, 70, 2, 1, d, MaskKind::Causal, 0});
    cs.push_back(Case{48, 48, 2, 2, d, MaskKind::Document});
  }
  // General (what the distributed methods pass): padding, causality, window,
  // same-document, in each combination the trainer uses
  for (bool causal : {true, false})
    for (bool same : {true, false})
      for (long window : {0L, 9L}) {
        Case c{61, 77, 4, 2, 16, MaskKind::General, 0, window};
        c.gcausal = causal, c.same_doc = same;
        cs.push_back(c);
      }
  return cs;
}

}  // namespace

TEST(FlashAttention, MatchesNaiveReferenceForEveryMaskAndGqa) {
  std::mt19937 g(1234);
  for (const Case& c : all_cases()) {
    MaskData md = make_mask_data(c, g);
    HV3 q = random3(c.sq, c.n, c.d, g), k = random3(c.sk, c.nkv, c.d, g), v = random3(c.sk, c.nkv, c.d, g),
        dout = random3(c.sq, c.n, c.d, g);
    Result ref = run_reference(c, md, q, k, v, dout);
    for (AttnTiles t : {AttnTiles{16, 16}, AttnTiles{7, 11}, AttnTiles{64, 5}}) {
      Result got = run_kernel(c, md, q, k, v, dout, t);
      const std::string what = std::string(mask_kind_name(c.kind)) + " sq=" + std::to_string(c.sq) +
                               " sk=" + std::to_string(c.sk) + " n=" + std::to_string(c.n) + " nkv=" +
                               std::to_string(c.nkv) + " tiles " + std::to_string(t.br) + "x" + std::to_string(t.bc);
      EXPECT_LT(rel_err(got.o, ref.o), 1e-12) << what;
      EXPECT_LT(rel_err(got.lse, ref.lse), 1e-12) << what;
      EXPECT_LT(rel_err(got.dq, ref.dq), 1e-11) << what;
      EXPECT_LT(rel_err(got.dk, ref.dk), 1e-11) << what;
      EXPECT_LT(rel_err(got.dv, ref.dv), 1e-11) << what;
    }
  }
}

// tile_all_visible is exact (true only when every pair is visible) and
// tile_visible is safe (false only when no pair is), for every mask kind on
// random tiles; for None and Causal tile_all_visible is also complete.
TEST(FlashAttention, TileVisibilityBoundsAreExactOrSafe) {
  std::mt19937 g(77);
  std::vector<Case> cs = all_cases();
  long wholes = 0, partials = 0;
  for (const Case& c : cs) {
    MaskData md = make_mask_data(c, g);
    using Mem = Kokkos::HostSpace;
    Kokkos::View<long*, Mem> qp("act/qp", c.sq), kp("act/kp", c.sk);
    Kokkos::View<int*, Mem> qd("act/qd", c.sq), kd("act/kd", c.sk);
    for (long i = 0; i < c.sq; ++i) qp(i) = md.qpos[i], qd(i) = md.qdoc[i];
    for (long j = 0; j < c.sk; ++j) kp(j) = md.kpos[j], kd(j) = md.kdoc[j];
    const AttnMask<Mem> mask = mask_of(c, qp, kp, qd, kd);
    for (int trial = 0; trial < 200; ++trial) {
      const long i0 = long(g() % c.sq), j0 = long(g() % c.sk);
      const long i1 = std::min(c.sq, i0 + 1 + long(g() % 16)), j1 = std::min(c.sk, j0 + 1 + long(g() % 16));
      bool all = true, any = false;
      for (long i = i0; i < i1; ++i)
        for (long j = j0; j < j1; ++j) {
          const bool vis = visible_ref(c, md, i, j);
          all = all && vis, any = any || vis;
        }
      const bool whole = mask.tile_all_visible(i0, i1, j0, j1);
      if (whole) EXPECT_TRUE(all) << mask_kind_name(c.kind) << " tile " << i0 << ":" << i1 << " x " << j0 << ":" << j1;
      if (!mask.tile_visible(i0, i1, j0, j1)) EXPECT_FALSE(any) << mask_kind_name(c.kind);
      if (c.kind == MaskKind::None || c.kind == MaskKind::Causal) EXPECT_EQ(whole, all) << mask_kind_name(c.kind);
      wholes += whole, partials += (any && !all);
    }
  }
  EXPECT_GT(wholes, 100);  // both kinds of tile were exercised
  EXPECT_GT(partials, 100);
}

// The host kernel's float softmax exponential against std::exp.
TEST(FlashAttention, HostSoftmaxExpIsAccurate) {
  double worst = 0;
  for (int x = -870000; x <= 10000; ++x) {
    const float a = float(x) * 1e-4f;
    const double want = std::exp(double(a));
    worst = std::max(worst, std::abs(double(impl::softmax_exp(a)) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_LT(impl::softmax_exp(-INFINITY), 1e-37f);
  EXPECT_GE(impl::softmax_exp(-INFINITY), 0.0f);
  EXPECT_EQ(impl::softmax_exp(0.0f), 1.0f);
}

TEST(FlashAttention, RowsWithNoVisibleKey) {
  // Causal with offset -sq: no query sees any key.
  std::mt19937 g(5);
  Case c{10, 10, 2, 2, 4, MaskKind::Causal, -10};
  MaskData md = make_mask_data(c, g);
  HV3 q = random3(10, 2, 4, g), k = random3(10, 2, 4, g), v = random3(10, 2, 4, g), dout = random3(10, 2, 4, g);
  Result r = run_kernel(c, md, q, k, v, dout, {4, 4});
  for (long i = 0; i < 10; ++i)
    for (long h = 0; h < 2; ++h) {
      EXPECT_EQ(r.lse(i, h), -INFINITY);
      for (long e = 0; e < 4; ++e) {
        EXPECT_EQ(r.o(i, h, e), 0.0);
        EXPECT_EQ(r.dq(i, h, e), 0.0);
      }
    }
  EXPECT_EQ(r.fwd_tiles, 0);  // every tile masked: nothing computed
  EXPECT_EQ(r.bwd_tiles, 0);
}

TEST(FlashAttention, SkipsFullyMaskedTiles) {
  std::mt19937 g(6);
  // Causal 64 x 64 with 16 x 16 tiles: 4 + 3 + 2 + 1 = 10 of 16 tile pairs per head.
  Case c{64, 64, 3, 1, 4, MaskKind::Causal, 0};
  MaskData md = make_mask_data(c, g);
  HV3 q = random3(64, 3, 4, g), k = random3(64, 1, 4, g), v = random3(64, 1, 4, g), dout = random3(64, 3, 4, g);
  Result r = run_kernel(c, md, q, k, v, dout, {16, 16});
  EXPECT_EQ(r.fwd_tiles, 10 * 3);
  EXPECT_EQ(r.bwd_tiles, 10 * 3);
  Case nc = c;
  nc.kind = MaskKind::None;
  EXPECT_EQ(run_kernel(nc, md, q, k, v, dout, {16, 16}).fwd_tiles, 16 * 3);
  // Sliding window 9 over 64 positions, tiles of 16: the diagonal tiles and
  // the ones just below (keys up to 8 positions back) only: 4 + 3 = 7.
  Case w = c;
  w.kind = MaskKind::Window;
  w.window = 9;
  MaskData wd;
  for (long j = 0; j < 64; ++j) wd.kpos.push_back(j), wd.qpos.push_back(j), wd.kdoc.push_back(0), wd.qdoc.push_back(0);
  EXPECT_EQ(run_kernel(w, wd, q, k, v, dout, {16, 16}).fwd_tiles, 7 * 3);
  // Documents of 16 tokens aligned to the tiles: only the 4 diagonal tiles.
  Case dc = c;
  dc.kind = MaskKind::Document;
  MaskData dd = wd;
  for (long j = 0; j < 64; ++j) dd.kdoc[j] = dd.qdoc[j] = int(j / 16);
  EXPECT_EQ(run_kernel(dc, dd, q, k, v, dout, {16, 16}).fwd_tiles, 4 * 3);
}

// Central finite differences of L = sum(O * W) in double against the kernel's
// backward with dO = W, for every input element of a small case per mask.
TEST(FlashAttention, GradientsMatchFiniteDifferences) {
  std::mt19937 g(77);
  for (int kind = 0; kind < 4; ++kind) {
    Case c{9, 11, 4, 2, 3, MaskKind(kind), 1, 5};
    MaskData md = make_mask_data(c, g);
    HV3 q = random3(c.sq, c.n, c.d, g), k = random3(c.sk, c.nkv, c.d, g), v = random3(c.sk, c.nkv, c.d, g),
        w = random3(c.sq, c.n, c.d, g);
    Result r = run_kernel(c, md, q, k, v, w, {4, 4});
    auto loss = [&]() {
      Result f = run_kernel(c, md, q, k, v, w, {4, 4});
      double L = 0;
      for (size_t x = 0; x < f.o.span(); ++x) L += f.o.data()[x] * w.data()[x];
      return L;
    };
    const double eps = 1e-5;
    double worst = 0;
    auto check = [&](HV3& x, const HV3& grad) {
      for (size_t e = 0; e < x.span(); ++e) {
        const double x0 = x.data()[e];
        x.data()[e] = x0 + eps;
        const double lp = loss();
        x.data()[e] = x0 - eps;
        const double lm = loss();
        x.data()[e] = x0;
        const double fd = (lp - lm) / (2 * eps);
        worst = std::max(worst, std::fabs(fd - grad.data()[e]) / std::max(1.0, std::fabs(fd)));
      }
    };
    check(q, r.dq);
    check(k, r.dk);
    check(v, r.dv);
    EXPECT_LT(worst, 1e-6) << mask_kind_name(c.kind);
  }
}

TEST(FlashAttention, FloatInputsAccumulateInFloat) {
  std::mt19937 g(9);
  Case c{40, 40, 2, 1, 16, MaskKind::Causal, 0};
  MaskData md = make_mask_data(c, g);
  HV3 q = random3(40, 2, 16, g), k = random3(40, 1, 16, g), v = random3(40, 1, 16, g), dout = random3(40, 2, 16, g);
  Result ref = run_reference(c, md, q, k, v, dout);
  using Mem = DeviceMem;
  auto to_float = [](const HV3& x) {
    Kokkos::View<float***, Layout, Mem> y("act/f", x.extent(0), x.extent(1), x.extent(2));
    auto h = Kokkos::create_mirror_view(y);
    for (size_t e = 0; e < x.span(); ++e) h.data()[e] = float(x.data()[e]);
    Kokkos::deep_copy(y, h);
    return y;
  };
  auto fq = to_float(q), fk = to_float(k), fv = to_float(v);
  Kokkos::View<float***, Layout, Mem> o("act/o", 40, 2, 16);
  Kokkos::View<float**, Layout, Mem> lse("act/lse", 40, 2);
  flash_attention_forward<float, Mem>(fq, fk, fv, AttnMask<Mem>::causal(0), 0.25f, o, lse);
  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
  HV3 od("act/od", 40, 2, 16);
  for (size_t e = 0; e < od.span(); ++e) od.data()[e] = ho.data()[e];
  EXPECT_LT(rel_err(od, ref.o), 1e-5);
}

TEST(FlashAttention, BadShapesAreInputErrors) {
  using Mem = DeviceMem;
  Kokkos::View<double***, Layout, Mem> q("act/q", 4, 3, 8), k("act/k", 5, 2, 8), v("act/v", 5, 2, 8), o("act/o", 4, 3, 8);
  Kokkos::View<double**, Layout, Mem> lse("act/l", 4, 3);
  try {
    flash_attention_forward<double, Mem>(q, k, v, AttnMask<Mem>::none(), 1.0, o, lse);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_STREQ(e.what(), "attention: 3 query heads are not a multiple of 2 key/value heads");
  }
  Kokkos::View<double***, Layout, Mem> k2("act/k", 5, 1, 8), v2("act/v", 5, 1, 8);
  Kokkos::View<long*, Mem> p("act/p", 4);
  EXPECT_THROW((flash_attention_forward<double, Mem>(q, k2, v2, AttnMask<Mem>::sliding_window(0, p, p), 1.0, o, lse)), Error);
}

TEST(LseMerge, MergingBlocksEqualsAttentionOverTheirUnion) {
  std::mt19937 g(11);
  using Mem = DeviceMem;
  const long sq = 13, n = 2, d = 5, s1 = 7, s2 = 9;
  // Causal with offsets chosen so that some rows see only block 1, some only
  // block 2, some both and some neither.
  Case whole{sq, s1 + s2, n, n, d, MaskKind::Causal, 2};
  MaskData md;
  HV3 q = random3(sq, n, d, g), k = random3(s1 + s2, n, d, g), v = random3(s1 + s2, n, d, g), dout = random3(sq, n, d, g);
  Result ref = run_reference(whole, md, q, k, v, dout);
  // Block b holds keys [lo, hi): a causal offset of 2 - lo in block-local indices.
  auto block = [&](long lo, long hi) {
    HV3 kb("act/kb", hi - lo, n, d), vb("act/vb", hi - lo, n, d);
    for (long j = lo; j < hi; ++j)
      for (long h = 0; h < n; ++h)
        for (long e = 0; e < d; ++e) kb(j - lo, h, e) = k(j, h, e), vb(j - lo, h, e) = v(j, h, e);
    Case c{sq, hi - lo, n, n, d, MaskKind::Causal, 2 - lo};
    return run_kernel(c, md, q, kb, vb, dout, {4, 4});
  };
  Result b1 = block(0, s1), b2 = block(s1, s1 + s2);
  // Row 0 sees keys 0..2 (block 1 only); no row sees block 2 only here, so
  // also merge in the other order and with an empty block.
  for (int order = 0; order < 2; ++order) {
    const Result& first = order == 0 ? b1 : b2;
    const Result& second = order == 0 ? b2 : b1;
    // Copies, never aliases: the merge works in place.
    auto copy = [](const auto& x) {
      auto y = Kokkos::create_mirror(Mem(), x);
      Kokkos::deep_copy(y, x);
      return y;
    };
    auto o = copy(first.o);
    auto l = copy(first.lse);
    auto ob = copy(second.o);
    auto lb = copy(second.lse);
    lse_merge<double, Mem>(o, l, ob, lb);
    // Merging a block that saw nothing changes nothing.
    Kokkos::View<double***, Layout, Mem> oe("act/oe", sq, n, d);
    Kokkos::View<double**, Layout, Mem> le("act/le", sq, n);
    Kokkos::deep_copy(le, -INFINITY);
    lse_merge<double, Mem>(o, l, oe, le);
    auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
    auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l);
    EXPECT_LT(rel_err(ho, ref.o), 1e-13) << order;
    EXPECT_LT(rel_err(hl, ref.lse), 1e-13) << order;
  }
  // flash_attention_forward_merge (the ring forward's step; here the
  // portable path: a partial into the scratch, then lse_merge): block 1
  // computed, block 2 merged in, in either order, then a block no row sees.
  for (int order = 0; order < 2; ++order) {
    const long lo[2] = {order == 0 ? 0 : s1, order == 0 ? s1 : 0}, hi[2] = {order == 0 ? s1 : s1 + s2, order == 0 ? s1 + s2 : s1};
    auto dev = [](const HV3& x) {
      Kokkos::View<double***, Layout, Mem> y("act/x", x.extent(0), x.extent(1), x.extent(2));
      Kokkos::deep_copy(y, x);
      return y;
    };
    auto keys = [&](const HV3& x, long a, long b) {
      HV3 y("act/kb", b - a, n, d);
      for (long j = a; j < b; ++j)
        for (long h = 0; h < n; ++h)
          for (long e = 0; e < d; ++e) y(j - a, h, e) = x(j, h, e);
      return dev(y);
    };
    auto qd = dev(q);
    Kokkos::View<double***, Layout, Mem> o("act/o", sq, n, d), ob("act/ob", sq, n, d);
    Kokkos::View<double**, Layout, Mem> l("act/l", sq, n), lb("act/lb", sq, n);
    flash_attention_forward<double, Mem>(qd, keys(k, lo[0], hi[0]), keys(v, lo[0], hi[0]),
                                         AttnMask<Mem>::causal(2 - lo[0]), 1.0 / std::sqrt(double(d)), o, l);
    Kokkos::deep_copy(ob, std::nan("")), Kokkos::deep_copy(lb, std::nan(""));  // scratch: read only after written
    const long t = flash_attention_forward_merge<double, Mem>(qd, keys(k, lo[1], hi[1]), keys(v, lo[1], hi[1]),
                                                              AttnMask<Mem>::causal(2 - lo[1]), 1.0 / std::sqrt(double(d)),
                                                              o, l, ob, lb);
    EXPECT_GT(t, 0);
    // Keys no row sees (a causal offset below every row): nothing changes.
    flash_attention_forward_merge<double, Mem>(qd, keys(k, 0, 3), keys(v, 0, 3), AttnMask<Mem>::causal(-sq - 1),
                                               1.0 / std::sqrt(double(d)), o, l, ob, lb);
    auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
    auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l);
    EXPECT_LT(rel_err(ho, ref.o), 1e-13) << "forward_merge, order " << order;
    EXPECT_LT(rel_err(hl, ref.lse), 1e-13) << "forward_merge, order " << order;
    Kokkos::View<double***, Layout, Mem> bad("act/bad", sq + 1, n, d);
    EXPECT_THROW((flash_attention_forward_merge<double, Mem>(qd, keys(k, 0, 3), keys(v, 0, 3), AttnMask<Mem>::none(), 1.0, o,
                                                             l, bad, lb)),
                 Error);
  }
  // Both sides -inf stays (0, -inf) without NaN.
  Kokkos::View<double***, Layout, Mem> o0("act/o0", 2, 1, 3), o1("act/o1", 2, 1, 3);
  Kokkos::View<double**, Layout, Mem> l0("act/l0", 2, 1), l1("act/l1", 2, 1);
  Kokkos::deep_copy(l0, -INFINITY);
  Kokkos::deep_copy(l1, -INFINITY);
  lse_merge<double, Mem>(o0, l0, o1, l1);
  auto hl0 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l0);
  auto ho0 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o0);
  EXPECT_EQ(hl0(0, 0), -INFINITY);
  EXPECT_EQ(ho0(1, 0, 2), 0.0);
}

// The CUDA flash attention (kernels/cuda/, reached through
// flash_attention_forward / flash_attention_backward with bf16 views in CUDA
// memory) against the portable kernel computed in double on the same bf16
// inputs: every mask kind, GQA 1 and 4, head dims 64 and 128, odd sizes
// (sq != sk, not multiples of any tile), rows with no visible key; fresh
// random inputs each run (the seed is printed), outputs poisoned with NaN
// before each call; the accumulate flags; the returned tile counts; and that
// the dispatch did (d = 64, 128) or did not (d = 32: portable fallback)
// reach the CUDA kernels; the ring forward's merging call, its keys in two
// blocks, through the kernels' epilogue and through a partial + lse_merge. Registered on CUDA builds only (label gpu).
#include "core/error.hpp"
#include "kernels/attention.hpp"

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
#error "test_attention_cuda is built on CUDA builds only"
#endif

using namespace burst;
using namespace burst::kernels;

namespace {

using Mem = Kokkos::CudaSpace;
template <class T> using DV3 = Kokkos::View<T***, Layout, Mem>;
template <class T> using DV2 = Kokkos::View<T**, Layout, Mem>;

std::uint64_t run_seed() {
  static const std::uint64_t s = [] {
    std::random_device rd;
    const std::uint64_t v = (std::uint64_t(rd()) << 32) ^ rd();
    std::printf("test_attention_cuda: seed %llu\n", (unsigned long long)v);
    return v;
  }();
  return s;
}

struct Case {
  std::string name;
  long sq, sk;
  MaskKind kind;
  long offset = 0, window = 0;
  bool causal = false, same_doc = false, padding = false;
  long qshift = 0;           // position masks: queries start this far from the last sq keys' positions
  bool expect_empty = false; // the case must have rows with no visible key
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"none", 300, 517, MaskKind::None});
  c.push_back({"causal_bottom_right", 300, 517, MaskKind::Causal, 517 - 300});
  c.push_back({"causal_top_left", 300, 517, MaskKind::Causal, 0});
  c.push_back({"strictly_lower", 300, 517, MaskKind::Causal, -1, 0, false, false, false, 0, true});
  c.push_back({"causal_minus70", 300, 517, MaskKind::Causal, -70, 0, false, false, false, 0, true});
  c.push_back({"causal_tall", 517, 300, MaskKind::Causal, 0});
  c.push_back({"none_tiny", 1, 3, MaskKind::None});
  Case w{"window100", 300, 517, MaskKind::Window, 0, 100};
  w.qshift = -(517 - 300) - 37, w.expect_empty = true;  // the first 37 queries precede every key
  c.push_back(w);
  Case d{"document", 300, 517, MaskKind::Document};
  d.qshift = -(517 - 300) - 30, d.expect_empty = true;  // the first 30 queries precede every key
  c.push_back(d);
  Case g1{"general_causal_samedoc_pad", 300, 517, MaskKind::General};
  g1.causal = true, g1.same_doc = true, g1.padding = true, g1.expect_empty = true;
  c.push_back(g1);
  Case g2{"general_window77_pad", 300, 517, MaskKind::General, 0, 77};
  g2.causal = true, g2.padding = true, g2.qshift = -20, g2.expect_empty = true;
  c.push_back(g2);
  Case g3{"general_bidirectional_doc_pad", 333, 211, MaskKind::General};
  g3.same_doc = true, g3.padding = true, g3.expect_empty = true;
  c.push_back(g3);
  return c;
}

struct Heads {
  long n, nkv, d;
};

// Host data of one case: bf16 inputs and their exact double values.
struct Inputs {
  std::vector<bf16> q, k, v, dout;
  std::vector<long> qpos, kpos;
  std::vector<int> qdoc, kdoc;
};

Inputs make_inputs(const Case& c, const Heads& h, std::mt19937_64& g) {
  Inputs in;
  std::normal_distribution<float> N(0.f, 1.f);
  auto fill = [&](std::vector<bf16>& x, long count, float s) {
    x.resize(count);
    for (auto& e : x) e = bf16(N(g) * s);
  };
  fill(in.q, c.sq * h.n * h.d, 1.f);
  fill(in.k, c.sk * h.nkv * h.d, 1.f);
  fill(in.v, c.sk * h.nkv * h.d, 1.f);
  fill(in.dout, c.sq * h.n * h.d, 1.f);
  // Global positions: keys 1000 + j, queries aligned with the last sq keys and
  // moved by qshift; documents are random runs of 1-150 positions.
  const long base = 1000;
  for (long j = 0; j < c.sk; ++j) in.kpos.push_back(base + j);
  for (long i = 0; i < c.sq; ++i) in.qpos.push_back(base + (c.sk - c.sq) + i + c.qshift);
  const long lo = std::min(in.kpos.front(), in.qpos.front()), hi = std::max(in.kpos.back(), in.qpos.back());
  std::vector<int> doc_at(hi - lo + 1);
  std::uniform_int_distribution<int> len(1, 150);
  int doc = 0;
  for (long p = 0; p <= hi - lo;) {
    const long l = len(g);
    for (long e = p; e < p + l && e <= hi - lo; ++e) doc_at[e] = doc;
    p += l, ++doc;
  }
  std::uniform_real_distribution<double> U(0, 1);
  for (long j = 0; j < c.sk; ++j) in.kdoc.push_back(c.padding && U(g) < 0.1 ? -1 : doc_at[in.kpos[j] - lo]);
  for (long i = 0; i < c.sq; ++i) in.qdoc.push_back(c.padding && U(g) < 0.1 ? -1 : doc_at[in.qpos[i] - lo]);
  return in;
}

template <class T, class S> DV3<T> to_device3(const std::vector<S>& x, long a, long b, long c, const char* label) {
  DV3<T> v(std::string(label), a, b, c);
  auto h = Kokkos::create_mirror_view(v);
  for (long e = 0; e < a * b * c; ++e) h.data()[e] = T(float(x[e]));
  Kokkos::deep_copy(v, h);
  return v;
}

template <class T> std::vector<double> to_host(const Kokkos::View<T***, Layout, Mem>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.size());
}
template <class T> std::vector<double> to_host(const Kokkos::View<T**, Layout, Mem>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.size());
}

// ||x - f ref|| / ||f ref|| (Frobenius); infinity if x has a NaN.
double rel_error(const std::vector<double>& x, const std::vector<double>& ref, double f = 1.0) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<double>::infinity();
    num += (x[i] - f * ref[i]) * (x[i] - f * ref[i]);
    den += f * ref[i] * f * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct Fixture {
  Case c;
  Heads h;
  Inputs in;
  Kokkos::View<long*, Mem> qp, kp;
  Kokkos::View<int*, Mem> qd, kd;
  AttnMask<Mem> mask;
  double scale;
};

Fixture make_fixture(const Case& c, const Heads& h, std::uint64_t seed) {
  Fixture f{c, h, {}, {}, {}, {}, {}, {}, 1.0 / std::sqrt(double(h.d))};
  std::mt19937_64 g(seed);
  f.in = make_inputs(c, h, g);
  f.qp = Kokkos::View<long*, Mem>("act/qp", c.sq), f.kp = Kokkos::View<long*, Mem>("act/kp", c.sk);
  f.qd = Kokkos::View<int*, Mem>("act/qd", c.sq), f.kd = Kokkos::View<int*, Mem>("act/kd", c.sk);
  auto copy = [](auto dev, const auto& vec) {
    auto hv = Kokkos::create_mirror_view(dev);
    for (size_t i = 0; i < vec.size(); ++i) hv(i) = vec[i];
    Kokkos::deep_copy(dev, hv);
  };
  copy(f.qp, f.in.qpos), copy(f.kp, f.in.kpos), copy(f.qd, f.in.qdoc), copy(f.kd, f.in.kdoc);
  switch (c.kind) {
    case MaskKind::None: f.mask = AttnMask<Mem>::none(); break;
    case MaskKind::Causal: f.mask = AttnMask<Mem>::causal(c.offset); break;
    case MaskKind::Window: f.mask = AttnMask<Mem>::sliding_window(c.window, f.qp, f.kp); break;
    case MaskKind::Document: f.mask = AttnMask<Mem>::document(f.qd, f.kd, f.qp, f.kp); break;
    case MaskKind::General: f.mask = AttnMask<Mem>::general(c.causal, c.window, c.same_doc, f.qd, f.kd, f.qp, f.kp); break;
  }
  return f;
}

struct Outputs {
  std::vector<double> o, lse, dq, dk, dv;
  long fwd_tiles = -1, bwd_tiles = -1;
};

// The portable kernel in double on the bf16 inputs' exact values.
Outputs reference(const Fixture& f, DV2<double>& lse_out, DV2<double>& D_out) {
  const Case& c = f.c;
  const Heads& h = f.h;
  DV3<double> q = to_device3<double>(f.in.q, c.sq, h.n, h.d, "act/q"), k = to_device3<double>(f.in.k, c.sk, h.nkv, h.d, "act/k"),
              v = to_device3<double>(f.in.v, c.sk, h.nkv, h.d, "act/v"),
              dout = to_device3<double>(f.in.dout, c.sq, h.n, h.d, "act/do");
  DV3<double> o("act/o", c.sq, h.n, h.d), dq("grads/dq", c.sq, h.n, h.d), dk("grads/dk", c.sk, h.nkv, h.d),
      dv("grads/dv", c.sk, h.nkv, h.d);
  lse_out = DV2<double>("act/lse", c.sq, h.n), D_out = DV2<double>("act/D", c.sq, h.n);
  Outputs r;
  r.fwd_tiles = flash_attention_forward<double, Mem>(q, k, v, f.mask, f.scale, o, lse_out);
  attention_backward_rowsum<double, Mem>(dout, o, D_out);
  r.bwd_tiles = flash_attention_backward<double, Mem>(q, k, v, dout, lse_out, D_out, f.mask, f.scale, dq, dk, dv, false);
  r.o = to_host(o), r.lse = to_host(lse_out), r.dq = to_host(dq), r.dk = to_host(dk), r.dv = to_host(dv);
  return r;
}

void expect_close(const std::vector<double>& x, const std::vector<double>& ref, double f, const std::string& what,
                  double tol = 1e-2) {
  const double e = rel_error(x, ref, f);
  EXPECT_LT(e, tol) << what << ": relative error " << e;
}

// O and lse of a forward against the reference: O within bf16 tolerance,
// the -inf pattern of lse exact (and O exactly 0 there), lse within 1e-3.
void check_o_lse(const Case& c, const Heads& h, const std::vector<double>& ho, const std::vector<double>& hl,
                 const Outputs& ref, const std::string& what) {
  expect_close(ho, ref.o, 1.0, what + ": O");
  long lse_bad = 0, zero_bad = 0;
  double lse_err = 0;
  for (long x = 0; x < c.sq * h.n; ++x) {
    const bool ref_empty = ref.lse[x] == -std::numeric_limits<double>::infinity();
    if (ref_empty) {
      lse_bad += hl[x] != -std::numeric_limits<double>::infinity();
      for (long e = 0; e < h.d; ++e) zero_bad += ho[x * h.d + e] != 0.0;
    } else {
      if (!std::isfinite(hl[x])) ++lse_bad;
      else lse_err = std::max(lse_err, std::abs(hl[x] - ref.lse[x]));
    }
  }
  EXPECT_EQ(lse_bad, 0) << what << ": lse: -inf pattern differs from the reference, or not finite";
  EXPECT_EQ(zero_bad, 0) << what << ": rows with no visible key must have O exactly 0";
  EXPECT_LT(lse_err, 1e-3) << what << ": lse max abs error (nats)";
}

// The ring forward's step (flash_attention_forward_merge): the keys split at
// 2/5 into blocks A and B (the mask restricted to each: a causal offset moved
// by the split, the key positions and documents cut), one block computed
// with the plain forward, the other merged into it, in both orders; through
// the CUDA kernels' merging epilogue (one dispatch, the scratch untouched)
// and through impl::forward_then_merge (a partial, then lse_merge). Both must
// equal attention over all the keys (the reference), -inf rows exactly.
void check_merge(const Fixture& f, const Outputs& ref, const DV3<bf16>& q, bool expect_cuda) {
  const Case& c = f.c;
  const Heads& h = f.h;
  const long cut = c.sk * 2 / 5, kvw = h.nkv * h.d;
  struct Part {
    DV3<bf16> k, v;
    Kokkos::View<long*, Mem> kp;
    Kokkos::View<int*, Mem> kd;
    AttnMask<Mem> mask;
  };
  auto part = [&](long a, long b) {
    Part p;
    p.k = to_device3<bf16>(std::vector<bf16>(f.in.k.begin() + a * kvw, f.in.k.begin() + b * kvw), b - a, h.nkv, h.d, "act/kp");
    p.v = to_device3<bf16>(std::vector<bf16>(f.in.v.begin() + a * kvw, f.in.v.begin() + b * kvw), b - a, h.nkv, h.d, "act/vp");
    p.kp = Kokkos::View<long*, Mem>("act/kpos", b - a), p.kd = Kokkos::View<int*, Mem>("act/kdoc", b - a);
    auto hp = Kokkos::create_mirror_view(p.kp);
    auto hd = Kokkos::create_mirror_view(p.kd);
    for (long j = a; j < b; ++j) hp(j - a) = f.in.kpos[j], hd(j - a) = f.in.kdoc[j];
    Kokkos::deep_copy(p.kp, hp), Kokkos::deep_copy(p.kd, hd);
    p.mask = f.mask;
    if (p.mask.kind == MaskKind::Causal) p.mask.diag_offset -= a;  // block-local key j - a
    if (p.mask.kind != MaskKind::None && p.mask.kind != MaskKind::Causal) p.mask.k_pos = p.kp, p.mask.k_doc = p.kd;
    return p;
  };
  const Part parts[2] = {part(0, cut), part(cut, c.sk)};
  const float nan = std::numeric_limits<float>::quiet_NaN(), scale = float(f.scale);
  for (int order = 0; order < 2; ++order)
    for (int fused = 0; fused < 2; ++fused) {
      const Part &first = parts[order], &second = parts[1 - order];
      const std::string what = std::string("forward merge (") + (fused ? "in the epilogue" : "partial + lse_merge") +
                               (order ? ", B then A)" : ", A then B)");
      DV3<float> o("act/o", c.sq, h.n, h.d), ob("act/ob", c.sq, h.n, h.d);
      DV2<float> lse("act/lse", c.sq, h.n), lseb("act/lseb", c.sq, h.n);
      Kokkos::deep_copy(o, nan), Kokkos::deep_copy(lse, nan), Kokkos::deep_copy(ob, nan), Kokkos::deep_copy(lseb, nan);
      flash_attention_forward<bf16, Mem>(q, first.k, first.v, first.mask, scale, o, lse);
      const long calls = cuda::dispatch_count();
      if (fused)
        flash_attention_forward_merge<bf16, Mem>(q, second.k, second.v, second.mask, scale, o, lse, ob, lseb,
                                                 AttnTiles::uncounted());
      else
        impl::forward_then_merge<bf16, Mem>(q, second.k, second.v, second.mask, scale, o, lse, ob, lseb,
                                            AttnTiles::uncounted());
      EXPECT_EQ(cuda::dispatch_count() - calls, expect_cuda ? 1 : 0) << what << ": dispatch";
      if (fused && expect_cuda && cuda::forward_merge_enabled()) {  // the partial never went through memory
        const std::vector<double> hb = to_host(lseb);
        long touched = 0;
        for (double x : hb) touched += !std::isnan(x);
        EXPECT_EQ(touched, 0) << what << ": the epilogue merge wrote the scratch";
      }
      check_o_lse(c, h, to_host(o), to_host(lse), ref, what);
    }
}

// One case at one head configuration: forward, then backward (given the
// reference's lse and D, so it is checked on its own), then the accumulate
// modes.
void check_case(const Case& c, const Heads& h, std::uint64_t seed, bool expect_cuda) {
  SCOPED_TRACE(c.name + " sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk) + " heads " + std::to_string(h.n) +
               ":" + std::to_string(h.nkv) + " d=" + std::to_string(h.d) + " seed " + std::to_string(seed));
  Fixture f = make_fixture(c, h, seed);
  DV2<double> lse_ref_d, D_ref_d;
  const Outputs ref = reference(f, lse_ref_d, D_ref_d);

  long empty = 0;
  for (double x : ref.lse) empty += x == -std::numeric_limits<double>::infinity();
  if (c.expect_empty) EXPECT_GT(empty, 0) << "the case should have rows with no visible key";

  DV3<bf16> q = to_device3<bf16>(f.in.q, c.sq, h.n, h.d, "act/q"), k = to_device3<bf16>(f.in.k, c.sk, h.nkv, h.d, "act/k"),
            v = to_device3<bf16>(f.in.v, c.sk, h.nkv, h.d, "act/v"),
            dout = to_device3<bf16>(f.in.dout, c.sq, h.n, h.d, "act/do");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float scale = float(f.scale);

  // ---- forward
  DV3<float> o("act/o", c.sq, h.n, h.d);
  DV2<float> lse("act/lse", c.sq, h.n);
  Kokkos::deep_copy(o, nan), Kokkos::deep_copy(lse, nan);
  const long calls0 = cuda::dispatch_count();
  const long fwd_tiles = flash_attention_forward<bf16, Mem>(q, k, v, f.mask, scale, o, lse);
  EXPECT_EQ(cuda::dispatch_count() - calls0, expect_cuda ? 1 : 0) << "forward dispatch";
  EXPECT_EQ(fwd_tiles, ref.fwd_tiles) << "forward tile count";
  const std::vector<double> ho = to_host(o), hl = to_host(lse);
  {  // uncounted, as the engine calls it: -1 from the CUDA path (no wait on a count), the same O and lse
    DV3<float> o2("act/o2", c.sq, h.n, h.d);
    DV2<float> lse2("act/lse2", c.sq, h.n);
    Kokkos::deep_copy(o2, nan), Kokkos::deep_copy(lse2, nan);
    const long t2 = flash_attention_forward<bf16, Mem>(q, k, v, f.mask, scale, o2, lse2, AttnTiles::uncounted());
    EXPECT_EQ(t2, expect_cuda ? -1L : ref.fwd_tiles) << "uncounted forward";
    EXPECT_TRUE(to_host(o2) == ho && to_host(lse2) == hl) << "uncounted forward: O and lse differ from the counted call's";
  }
  check_o_lse(c, h, ho, hl, ref, "forward");
  check_merge(f, ref, q, expect_cuda);

  // ---- backward, on the reference's lse and D (rounded to float)
  DV2<float> lse_f("act/lse_f", c.sq, h.n), D_f("act/D_f", c.sq, h.n);
  {
    auto hl2 = Kokkos::create_mirror_view(lse_f);
    auto hD = Kokkos::create_mirror_view(D_f);
    auto rD = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), D_ref_d);
    for (long x = 0; x < c.sq * h.n; ++x) hl2.data()[x] = float(ref.lse[x]), hD.data()[x] = float(rD.data()[x]);
    Kokkos::deep_copy(lse_f, hl2), Kokkos::deep_copy(D_f, hD);
  }
  DV3<float> dq("grads/dq", c.sq, h.n, h.d), dk("grads/dk", c.sk, h.nkv, h.d), dv("grads/dv", c.sk, h.nkv, h.d);
  Kokkos::deep_copy(dq, nan), Kokkos::deep_copy(dk, nan), Kokkos::deep_copy(dv, nan);
  const long calls1 = cuda::dispatch_count();
  const long bwd_tiles =
      flash_attention_backward<bf16, Mem>(q, k, v, dout, lse_f, D_f, f.mask, scale, dq, dk, dv, BackwardAccumulate(false));
  EXPECT_EQ(cuda::dispatch_count() - calls1, expect_cuda ? 1 : 0) << "backward dispatch";
  EXPECT_EQ(bwd_tiles, ref.bwd_tiles) << "backward tile count";
  expect_close(to_host(dq), ref.dq, 1.0, "dQ");
  expect_close(to_host(dk), ref.dk, 1.0, "dK");
  expect_close(to_host(dv), ref.dv, 1.0, "dV");

  // ---- accumulate: add into dQ only, then into dK/dV only
  flash_attention_backward<bf16, Mem>(q, k, v, dout, lse_f, D_f, f.mask, scale, dq, dk, dv, BackwardAccumulate(true, false));
  expect_close(to_host(dq), ref.dq, 2.0, "dQ after accumulate_dq");
  expect_close(to_host(dk), ref.dk, 1.0, "dK overwritten (accumulate_dq only)");
  expect_close(to_host(dv), ref.dv, 1.0, "dV overwritten (accumulate_dq only)");
  flash_attention_backward<bf16, Mem>(q, k, v, dout, lse_f, D_f, f.mask, scale, dq, dk, dv, BackwardAccumulate(false, true));
  expect_close(to_host(dq), ref.dq, 1.0, "dQ overwritten (accumulate_dkdv only)");
  expect_close(to_host(dk), ref.dk, 2.0, "dK after accumulate_dkdv");
  expect_close(to_host(dv), ref.dv, 2.0, "dV after accumulate_dkdv");
}

void run_all(long d) {
  const std::uint64_t seed = run_seed();
  const std::vector<Case> cs = cases();
  const Heads heads[] = {{4, 4, d}, {8, 2, d}};  // GQA 1 and 4
  std::uint64_t k = 0;
  for (const Heads& h : heads)
    for (const Case& c : cs) check_case(c, h, seed + 1000 * std::uint64_t(d) + (k++), d == 64 || d == 128);
}

TEST(AttentionCuda, MatchesPortableHeadDim64) { run_all(64); }
TEST(AttentionCuda, MatchesPortableHeadDim128) { run_all(128); }

// The default d = 128 forward switches from the 128 x 128 kernel to the
// 128 x 176 one at 8192 keys (kFwd176MinKeys, flash_attn.cu): key lengths on
// either side, none of them a multiple of 176, with a short query block as
// the ring's zigzag half blocks have, full and causal, GQA 1 and 4.
TEST(AttentionCuda, LongKeysEitherSideOfTheForwardSwitch) {
  // Which kernel the default picks (BURST_FA_FORWARD unset; the tma128 /
  // tma176 ctests force one at every length).
  const char* forced = std::getenv("BURST_FA_FORWARD");
  if (!forced || !*forced || std::string(forced) == "tma") {
    const auto variant = [](long sk, const burst::fa::Mask& m) {
      burst::fa::AttnShape sh;
      sh.sq = 160, sh.sk = int(sk), sh.n = 4, sh.n_kv = 4, sh.d = 128;
      return burst::fa::flash_forward_variant(sh, m);
    };
    EXPECT_EQ(variant(8191, burst::fa::Mask::none()), 10);
    EXPECT_EQ(variant(8192, burst::fa::Mask::none()), 17);
    EXPECT_EQ(variant(8513, burst::fa::Mask::causal(8513 - 160)), 17);
    EXPECT_EQ(variant(32768, burst::fa::Mask::sliding_window(4096, nullptr, nullptr)), 10) << "a window of 4096 keys";
    EXPECT_EQ(variant(32768, burst::fa::Mask::sliding_window(16384, nullptr, nullptr)), 17);
    burst::fa::AttnShape d64;
    d64.sq = 160, d64.sk = 32768, d64.n = 4, d64.n_kv = 4, d64.d = 64;
    EXPECT_EQ(burst::fa::flash_forward_variant(d64, burst::fa::Mask::none()), 9);
  }
  std::uint64_t k = 0;
  for (const long sk : {8191L, 8192L, 8513L}) {
    const Heads heads[] = {{4, 4, 128}, {8, 2, 128}};
    for (const Heads& h : heads) {
      check_case({"none_long", 160, sk, MaskKind::None}, h, run_seed() + 20 + (k++), true);
      check_case({"causal_long", 160, sk, MaskKind::Causal, sk - 160}, h, run_seed() + 20 + (k++), true);
    }
  }
}

// MoreTilesThanOneGridHolds' device work: x[e] = pattern[e mod n], and
// the count of e with !(a[e] == b[row(e) mod P, col(e)]).
struct Repeat {
  bf16* x;
  const bf16* pattern;
  long n;
  KOKKOS_INLINE_FUNCTION void operator()(long e) const { x[e] = pattern[e % n]; }
};
struct CountUnlike {
  const float* a;
  const float* b;
  long width, P;
  KOKKOS_INLINE_FUNCTION void operator()(long e, long& bad) const {
    const long r = e / width, c = e - r * width;
    if (!(a[e] == b[(r % P) * width + c])) ++bad;
  }
};

// More tiles than one grid's y dimension holds (65535): the cp.async and
// mma.sync kernels launch in several grids (launch_tile_sections, the
// forward's longest tiles first, the backward's key tiles in order). With
// no mask every query row's O and lse depend only on that row and the keys,
// and every key row's dK, dV only on that key and the queries (lse and D
// given): inputs repeating with period P rows give outputs repeating with
// it, so every row of the long call must equal, bit for bit, its row in a
// call on the first P rows. Run under every kernel choice (the ctests'
// BURST_FA_* variants); the TMA kernels' grids hold the tiles in one launch.
TEST(AttentionCuda, MoreTilesThanOneGridHolds) {
  constexpr long P = 4099, d = 64, few = 64;
  const long many = 65536L * 128 + 300;  // 65539 tiles of 128 (the forward's query tiles, the backward's key tiles)
  const float scale = 0.125f;
  std::mt19937_64 g(run_seed() + 31);
  std::normal_distribution<float> N(0.f, 1.f);
  // On the device (functors below): the host copies of ~537M values each made this test a minute long.
  auto periodic = [&](long rows, const char* label) {
    std::vector<bf16> one(P * d);
    for (auto& e : one) e = bf16(N(g));
    DV3<bf16> x(std::string(label), rows, 1, d), pattern(std::string(label) + "_pattern", P, 1, d);
    Kokkos::deep_copy(pattern, Kokkos::View<const bf16***, Layout, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(one.data(), P, 1, d));
    Kokkos::parallel_for("test/periodic", Kokkos::RangePolicy<Kokkos::Cuda>(0, rows * d), Repeat{x.data(), pattern.data(), P * d});
    Kokkos::fence();  // before `pattern` is freed, whatever stream its deallocation takes
    return x;
  };
  // Every row of `lng` against row (r mod P) of `shrt`: the count of values that differ (NaN included).
  auto rows_repeat = [&](const auto& lng, const auto& shrt, long width, const char* what) {
    long bad = 0;
    Kokkos::parallel_reduce("test/rows_repeat", Kokkos::RangePolicy<Kokkos::Cuda>(0, long(lng.size())),
                            CountUnlike{lng.data(), shrt.data(), width, P}, bad);
    EXPECT_EQ(bad, 0) << what << ": " << bad << " values differ from the short call's rows";
  };
  const AttnMask<Mem> none = AttnMask<Mem>::none();
  {  // forward: `many` queries, `few` keys
    DV3<bf16> q = periodic(many, "act/q"), qs(std::string("act/qs"), P, 1, d), k = periodic(few, "act/k"), v = periodic(few, "act/v");
    Kokkos::deep_copy(qs, Kokkos::subview(q, Kokkos::make_pair(0L, P), Kokkos::ALL, Kokkos::ALL));
    DV3<float> o("act/o", many, 1, d), os("act/os", P, 1, d);
    DV2<float> l("act/lse", many, 1), ls("act/lses", P, 1);
    Kokkos::deep_copy(o, std::numeric_limits<float>::quiet_NaN());
    const long calls0 = cuda::dispatch_count();
    flash_attention_forward<bf16, Mem>(q, k, v, none, scale, o, l, AttnTiles::uncounted());
    flash_attention_forward<bf16, Mem>(qs, k, v, none, scale, os, ls, AttnTiles::uncounted());
    EXPECT_EQ(cuda::dispatch_count() - calls0, 2);
    rows_repeat(o, os, d, "forward O");
    rows_repeat(l, ls, 1, "forward lse");
  }
  {  // backward: `few` queries, `many` keys
    DV3<bf16> q = periodic(few, "act/q"), dout = periodic(few, "act/do"), k = periodic(many, "act/k"), v = periodic(many, "act/v");
    DV3<bf16> ks(std::string("act/ks"), P, 1, d), vs(std::string("act/vs"), P, 1, d);
    Kokkos::deep_copy(ks, Kokkos::subview(k, Kokkos::make_pair(0L, P), Kokkos::ALL, Kokkos::ALL));
    Kokkos::deep_copy(vs, Kokkos::subview(v, Kokkos::make_pair(0L, P), Kokkos::ALL, Kokkos::ALL));
    DV2<float> lse("act/lse", few, 1), D("act/D", few, 1);
    Kokkos::deep_copy(lse, 4.f), Kokkos::deep_copy(D, 0.5f);  // any values: each key row's dK, dV is a function of them
    DV3<float> dq("grads/dq", few, 1, d), dk("grads/dk", many, 1, d), dv("grads/dv", many, 1, d), dks("grads/dks", P, 1, d),
        dvs("grads/dvs", P, 1, d);
    Kokkos::deep_copy(dk, std::numeric_limits<float>::quiet_NaN()), Kokkos::deep_copy(dv, std::numeric_limits<float>::quiet_NaN());
    flash_attention_backward<bf16, Mem>(q, k, v, dout, lse, D, none, scale, dq, dk, dv, false, AttnTiles::uncounted());
    flash_attention_backward<bf16, Mem>(q, ks, vs, dout, lse, D, none, scale, dq, dks, dvs, false, AttnTiles::uncounted());
    rows_repeat(dk, dks, d, "backward dK");
    rows_repeat(dv, dvs, d, "backward dV");
  }
}

// Other head dims fall back to the portable kernel (in bf16 storage), with
// the same results and counts.
TEST(AttentionCuda, HeadDim32FallsBackToPortable) {
  const Case c{"causal_bottom_right", 300, 517, MaskKind::Causal, 517 - 300};
  check_case(c, {8, 2, 32}, run_seed() + 7, false);
  Case w{"window100", 300, 517, MaskKind::Window, 0, 100};
  w.qshift = -(517 - 300) - 37, w.expect_empty = true;
  check_case(w, {4, 4, 32}, run_seed() + 8, false);
}

// A tile count with other portable tile sizes follows the tiles argument.
TEST(AttentionCuda, TileCountFollowsTiles) {
  Case g{"general_causal_samedoc_pad", 300, 517, MaskKind::General};
  g.causal = true, g.same_doc = true, g.padding = true;
  const Heads h{8, 2, 64};
  Fixture f = make_fixture(g, h, run_seed() + 9);
  for (const AttnTiles t : {AttnTiles{16, 64}, AttnTiles{64, 16}, AttnTiles{7, 13}}) {
    DV3<double> qd = to_device3<double>(f.in.q, g.sq, h.n, h.d, "act/q"), kd = to_device3<double>(f.in.k, g.sk, h.nkv, h.d, "act/k"),
                vd = to_device3<double>(f.in.v, g.sk, h.nkv, h.d, "act/v");
    DV3<double> od("act/o", g.sq, h.n, h.d);
    DV2<double> ld("act/lse", g.sq, h.n);
    const long want = flash_attention_forward<double, Mem>(qd, kd, vd, f.mask, f.scale, od, ld, t);
    DV3<bf16> q = to_device3<bf16>(f.in.q, g.sq, h.n, h.d, "act/q"), k = to_device3<bf16>(f.in.k, g.sk, h.nkv, h.d, "act/k"),
              v = to_device3<bf16>(f.in.v, g.sk, h.nkv, h.d, "act/v");
    DV3<float> o("act/o", g.sq, h.n, h.d);
    DV2<float> l("act/lse", g.sq, h.n);
    const long calls0 = cuda::dispatch_count();
    EXPECT_EQ((flash_attention_forward<bf16, Mem>(q, k, v, f.mask, float(f.scale), o, l, t)), want)
        << "tiles " << t.br << " x " << t.bc;
    EXPECT_EQ(cuda::dispatch_count() - calls0, 1);
    EXPECT_GT(want, 0);
  }
}

}  // namespace

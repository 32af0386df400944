// Driver for the lab flash attention: correctness against a float64 GPU
// reference on fresh random inputs (every mask kind, GQA 1 and 4, head dims
// 64 and 128, odd sizes, empty rows), then timing (CUDA events, warmup,
// median) of every kernel variant on the benchmark shapes.
//
//   bench_attn [--check] [--time] [--seed N] [--out DIR] [--sizes 4096,8192,...] [--reps-ms 300]
//              [--fwd-variants 0,1,...] [--bwd-variants 0,1,...] [--no-bwd] [--no-diag]
//              [--masks full,causal] [--rounds 1]
// --fwd-variants / --bwd-variants restrict the variants checked and timed
// (default: all; -1: none); --no-bwd skips the backward (checks and
// timings), --no-diag the diag_nodq timings. --masks restricts the timed
// masks of the S x S shapes (and makes "the first launch" of a profile the
// one wanted); --rounds N times the whole list N times over, one row per
// round (an A/B on a card whose clocks drift from row to row: compare the
// variants' medians over rounds). A forward or backward call that
// returns an error or faults is reported as a FAIL with the error; a fault
// (sticky error: the CUDA context is lost) ends the process with exit code 3
// after the CSVs are flushed, so run_h200.sh runs risky variants in a
// separate process.
// Writes DIR/check.csv, DIR/time.csv; exits 1 if any check fails.
#include "flash_attn.h"
#include "flash_common.cuh"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace burst_fa;
using bf16 = __nv_bfloat16;

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)

template <class T> struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t count) : n(count) { if (count) CK(cudaMalloc(&p, count * sizeof(T))); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; o.n = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) { if (p) cudaFree(p); p = o.p; n = o.n; o.p = nullptr; o.n = 0; }
    return *this;
  }
  ~DevBuf() { if (p) cudaFree(p); }
  void upload(const std::vector<T>& h) { CK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void poison() { if (n) CK(cudaMemset(p, 0xff, n * sizeof(T))); }  // NaN for float/bf16
};

// ------------------------------------------------------------ reference (fp64)
struct RefMask {
  dev::MaskDev m;  // qb/kb unused
};

__device__ bool ref_visible(const dev::MaskDev& m, int i, int j) {
  dev::RowInfo qi{0, 0}, kj{0, 0};
  if (m.kind >= kMaskWindow) {
    qi.pos = m.q_pos[i], kj.pos = m.k_pos[j];
    if (m.kind != kMaskWindow) qi.doc = m.q_doc[i], kj.doc = m.k_doc[j];
  }
  return dev::elem_visible(m, i, j, qi, kj);
}

__device__ double dotb(const bf16* a, const bf16* b, int d) {
  double s = 0;
  for (int e = 0; e < d; ++e) s += (double)__bfloat162float(a[e]) * (double)__bfloat162float(b[e]);
  return s;
}

__global__ void ref_fwd(int sq, int sk, int n, int nkv, int d, const bf16* q, const bf16* k, const bf16* v,
                        dev::MaskDev m, double scale, double* o, double* lse) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= sq * n) return;
  const int i = idx / n, h = idx % n, hk = h / (n / nkv);
  const bf16* qi = q + ((size_t)i * n + h) * d;
  double mx = -INFINITY;
  for (int j = 0; j < sk; ++j)
    if (ref_visible(m, i, j)) mx = fmax(mx, dotb(qi, k + ((size_t)j * nkv + hk) * d, d) * scale);
  double acc[128];
  for (int e = 0; e < d; ++e) acc[e] = 0;
  double sum = 0;
  if (mx != -INFINITY) {
    for (int j = 0; j < sk; ++j) {
      if (!ref_visible(m, i, j)) continue;
      const double p = exp(dotb(qi, k + ((size_t)j * nkv + hk) * d, d) * scale - mx);
      sum += p;
      const bf16* vj = v + ((size_t)j * nkv + hk) * d;
      for (int e = 0; e < d; ++e) acc[e] += p * (double)__bfloat162float(vj[e]);
    }
  }
  for (int e = 0; e < d; ++e) o[(size_t)idx * d + e] = sum > 0 ? acc[e] / sum : 0.0;
  lse[idx] = sum > 0 ? mx + log(sum) : -INFINITY;
}

__global__ void ref_rowsum(int rows, int d, const bf16* dout, const double* o, double* D) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= rows) return;
  double s = 0;
  for (int e = 0; e < d; ++e) s += (double)__bfloat162float(dout[(size_t)idx * d + e]) * o[(size_t)idx * d + e];
  D[idx] = s;
}

__global__ void ref_dq(int sq, int sk, int n, int nkv, int d, const bf16* q, const bf16* k, const bf16* v,
                       const bf16* dout, const double* lse, const double* D, dev::MaskDev m, double scale, double* dq) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= sq * n) return;
  const int i = idx / n, h = idx % n, hk = h / (n / nkv);
  double acc[128];
  for (int e = 0; e < d; ++e) acc[e] = 0;
  if (lse[idx] != -INFINITY) {
    const bf16* qi = q + (size_t)idx * d;
    const bf16* di = dout + (size_t)idx * d;
    for (int j = 0; j < sk; ++j) {
      if (!ref_visible(m, i, j)) continue;
      const bf16* kj = k + ((size_t)j * nkv + hk) * d;
      const double p = exp(dotb(qi, kj, d) * scale - lse[idx]);
      const double ds = p * (dotb(di, v + ((size_t)j * nkv + hk) * d, d) - D[idx]);
      for (int e = 0; e < d; ++e) acc[e] += scale * ds * (double)__bfloat162float(kj[e]);
    }
  }
  for (int e = 0; e < d; ++e) dq[(size_t)idx * d + e] = acc[e];
}

__global__ void ref_dkdv(int sq, int sk, int n, int nkv, int d, const bf16* q, const bf16* k, const bf16* v,
                         const bf16* dout, const double* lse, const double* D, dev::MaskDev m, double scale, double* dk,
                         double* dv) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= sk * nkv) return;
  const int j = idx / nkv, hk = idx % nkv, group = n / nkv;
  double ak[128], av[128];
  for (int e = 0; e < d; ++e) ak[e] = av[e] = 0;
  const bf16* kj = k + (size_t)idx * d;
  const bf16* vj = v + (size_t)idx * d;
  for (int gi = 0; gi < group; ++gi) {
    const int h = hk * group + gi;
    for (int i = 0; i < sq; ++i) {
      const size_t r = (size_t)i * n + h;
      if (lse[r] == -INFINITY || !ref_visible(m, i, j)) continue;
      const bf16* qi = q + r * d;
      const bf16* di = dout + r * d;
      const double p = exp(dotb(qi, kj, d) * scale - lse[r]);
      const double ds = p * (dotb(di, vj, d) - D[r]);
      for (int e = 0; e < d; ++e) {
        av[e] += p * (double)__bfloat162float(di[e]);
        ak[e] += scale * ds * (double)__bfloat162float(qi[e]);
      }
    }
  }
  for (int e = 0; e < d; ++e) dk[(size_t)idx * d + e] = ak[e], dv[(size_t)idx * d + e] = av[e];
}

__global__ void fill_uniform(bf16* x, size_t n, unsigned long long seed, float amp) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = (float)(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x[i] = __float2bfloat16((2.f * u - 1.f) * amp);
  }
}

// ------------------------------------------------------------ error metrics
struct Err {
  double rel_fro = 0, rel_max = 0;
  long bad = 0;  // NaN / unwritten / -inf pattern mismatch
  long first_bad = -1;               // flat index of the first bad element
  long worst = -1;                   // flat index of the largest |got - ref|
  double worst_got = 0, worst_ref = 0;
  double bad_got = 0, bad_ref = 0;   // values at first_bad
  std::string err;                   // a CUDA error instead of a result
};
template <class T> double tod(T x) { return (double)x; }
template <> double tod<bf16>(bf16 x) { return (double)__bfloat162float(x); }

template <class T> Err compare(const std::vector<T>& got, const std::vector<double>& ref, double scale_ref = 1.0) {
  Err e;
  double num = 0, den = 0, mx = 0, mref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = tod(got[i]), r = ref[i] * scale_ref;
    if (!std::isfinite(g)) {
      if (e.bad++ == 0) e.first_bad = (long)i, e.bad_got = g, e.bad_ref = r;
      continue;
    }
    num += (g - r) * (g - r), den += r * r;
    if (std::fabs(g - r) > mx || e.worst < 0) mx = std::fabs(g - r), e.worst = (long)i, e.worst_got = g, e.worst_ref = r;
    mref = std::max(mref, std::fabs(r));
  }
  e.rel_fro = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  e.rel_max = mref > 0 ? mx / mref : mx;
  return e;
}
Err compare_lse(const std::vector<float>& got, const std::vector<double>& ref) {
  Err e;
  double mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool rinf = ref[i] == -INFINITY, ginf = got[i] == -INFINITY;
    if (rinf != ginf || std::isnan(got[i])) {
      if (e.bad++ == 0) e.first_bad = (long)i, e.bad_got = got[i], e.bad_ref = ref[i];
      continue;
    }
    if (!rinf && (std::fabs((double)got[i] - ref[i]) > mx || e.worst < 0))
      mx = std::fabs((double)got[i] - ref[i]), e.worst = (long)i, e.worst_got = got[i], e.worst_ref = ref[i];
  }
  e.rel_fro = e.rel_max = mx;  // absolute, in nats
  return e;
}

// ------------------------------------------------------------ cases
struct Case {
  std::string name;
  int sq, sk, n, nkv, d;
  int kind;
  long long diag = 0, window = 0;
  int gen_causal = 0, gen_same_doc = 0;
};

struct MaskData {
  DevBuf<long long> qp, kp;
  DevBuf<int> qd, kd;
  Mask mask;
  long empty_rows_expected = -1;
};

static MaskData make_mask(const Case& c, std::mt19937_64& rng) {
  MaskData md;
  Mask m;
  m.kind = c.kind;
  m.diag_offset = c.diag;
  m.window = c.window;
  m.is_causal = c.gen_causal;
  m.same_doc = c.gen_same_doc;
  if (c.kind >= kMaskWindow) {
    // Keys are global positions 0..sk-1; queries are the last sq of them,
    // shifted back by 40 so the first rows precede every key (empty rows).
    std::vector<long long> qp(c.sq), kp(c.sk);
    for (int j = 0; j < c.sk; ++j) kp[j] = j;
    for (int i = 0; i < c.sq; ++i) qp[i] = (long long)(c.sk - c.sq) + i - 40;
    std::vector<int> qd(c.sq), kd(c.sk);
    // documents: random lengths 1..150 over positions -40..sk
    std::vector<long long> starts;
    std::uniform_int_distribution<int> len(1, 150);
    auto doc_of = [&](long long pos) {
      int id = 0;
      for (size_t s = 1; s < starts.size(); ++s) if (pos >= starts[s]) id = (int)s;
      return id;
    };
    for (long long pos = -40; pos < c.sk + 1; pos += len(rng)) starts.push_back(pos);
    for (int j = 0; j < c.sk; ++j) kd[j] = doc_of(kp[j]);
    for (int i = 0; i < c.sq; ++i) qd[i] = doc_of(qp[i]);
    if (c.kind == kMaskGeneral) {  // padding: a few random tokens on each side
      std::uniform_int_distribution<int> pick(0, 19);
      for (auto& x : kd) if (pick(rng) == 0) x = -1;
      for (auto& x : qd) if (pick(rng) == 0) x = -1;
    }
    md.qp = DevBuf<long long>(c.sq), md.kp = DevBuf<long long>(c.sk);
    md.qp.upload(qp), md.kp.upload(kp);
    md.qd = DevBuf<int>(c.sq), md.kd = DevBuf<int>(c.sk);
    md.qd.upload(qd), md.kd.upload(kd);
    m.q_pos = md.qp.p, m.k_pos = md.kp.p, m.q_doc = md.qd.p, m.k_doc = md.kd.p;
    if (c.kind == kMaskWindow) m.q_doc = m.k_doc = nullptr;
  }
  md.mask = m;
  return md;
}

static FILE* g_check_csv = nullptr;
static std::vector<int> g_fwd_vars, g_bwd_vars;  // empty: every variant
static bool g_no_bwd = false, g_no_diag = false;
static bool fwd_enabled(int v) {
  return g_fwd_vars.empty() || std::find(g_fwd_vars.begin(), g_fwd_vars.end(), v) != g_fwd_vars.end();
}
static bool bwd_enabled(int v) {
  return g_bwd_vars.empty() || std::find(g_bwd_vars.begin(), g_bwd_vars.end(), v) != g_bwd_vars.end();
}
// A forward call's error: "" if none. A sticky error (a fault: the context is
// lost) flushes the CSVs and ends the process (exit 3).
static std::string fwd_error(cudaError_t launch) {
  cudaError_t e = launch;
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return "";
  const std::string msg = cudaGetErrorString(e);
  cudaGetLastError();  // clears a non-sticky error
  if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) {
    std::printf("FATAL: %s left the CUDA context unusable; stopping (exit 3)\n", msg.c_str());
    std::fflush(stdout);
    if (g_check_csv) std::fflush(g_check_csv);
    std::_Exit(3);
  }
  return msg;
}
static int g_fail = 0, g_checks = 0;
static double g_worst[6] = {0, 0, 0, 0, 0, 0};  // o, obf16, lse(abs), dq, dk, dv

// "(row r, head h, col e)" of a flat index into [rows, heads, d] (or [rows, heads] for lse-like outputs).
static std::string where(const Case& c, const char* what, long idx) {
  if (idx < 0) return "-";
  const std::string w = what;
  const bool kv = w.rfind("dk", 0) == 0 || w.rfind("dv", 0) == 0;
  const int heads = kv ? c.nkv : c.n;
  char buf[96];
  if (w == "lse") std::snprintf(buf, sizeof buf, "[%ld] (row %ld, head %ld)", idx, idx / heads, idx % heads);
  else std::snprintf(buf, sizeof buf, "[%ld] (row %ld, head %ld, col %ld)", idx, idx / ((long)heads * c.d), (idx / c.d) % heads, idx % c.d);
  return buf;
}

static void report(const Case& c, const char* what, const char* variant, const Err& e, double tol) {
  const bool ok = e.err.empty() && e.bad == 0 && e.rel_fro <= tol && std::isfinite(e.rel_fro);
  ++g_checks;
  if (!ok) {
    ++g_fail;
    if (!e.err.empty()) {
      std::printf("FAIL %-34s %-5s %-36s CUDA error: %s\n", c.name.c_str(), what, variant, e.err.c_str());
    } else {
      std::printf("FAIL %-34s %-5s %-36s rel_fro=%.3e rel_max=%.3e bad=%ld (sq=%d sk=%d n=%d/%d d=%d)\n", c.name.c_str(),
                  what, variant, e.rel_fro, e.rel_max, e.bad, c.sq, c.sk, c.n, c.nkv, c.d);
      if (e.first_bad >= 0)
        std::printf("     first bad %s: got %.6g ref %.6g\n", where(c, what, e.first_bad).c_str(), e.bad_got, e.bad_ref);
      if (e.worst >= 0)
        std::printf("     max |err| %s: got %.6g ref %.6g\n", where(c, what, e.worst).c_str(), e.worst_got, e.worst_ref);
    }
    std::fflush(stdout);
  }
  std::fprintf(g_check_csv, "%s,%d,%d,%d,%d,%d,%s,%s,%.4e,%.4e,%ld,%s\n", c.name.c_str(), c.sq, c.sk, c.n, c.nkv, c.d,
               what, variant, e.rel_fro, e.rel_max, e.bad, ok ? "ok" : "FAIL");
}

static void run_case(const Case& c, std::mt19937_64& rng) {
  bool any = false;  // skip a case no enabled forward variant serves (e.g. d = 64 for the wgmma-only run)
  for (int var = 0; var < kMaxVariants; ++var) any = any || (flash_fwd_variant_name(c.d, var) && fwd_enabled(var));
  if (!any && g_no_bwd) return;
  const size_t nq = (size_t)c.sq * c.n * c.d, nk = (size_t)c.sk * c.nkv * c.d, nr = (size_t)c.sq * c.n;
  DevBuf<bf16> q(nq), k(nk), v(nk), dout(nq);
  const unsigned long long s0 = rng();
  fill_uniform<<<256, 256>>>(q.p, nq, s0 ^ 1, 2.5f);
  fill_uniform<<<256, 256>>>(k.p, nk, s0 ^ 2, 1.7f);
  fill_uniform<<<256, 256>>>(v.p, nk, s0 ^ 3, 1.7f);
  fill_uniform<<<256, 256>>>(dout.p, nq, s0 ^ 4, 1.7f);
  CK(cudaGetLastError());
  MaskData md = make_mask(c, rng);
  const dev::MaskDev rm = dev::make_mask_dev(md.mask, nullptr, c.sq, c.sk);
  const double scale = 1.0 / std::sqrt((double)c.d);

  DevBuf<double> o_ref(nq), lse_ref(nr), D_ref(nr), dq_ref(nq), dk_ref(nk), dv_ref(nk);
  ref_fwd<<<(unsigned)((nr + 127) / 128), 128>>>(c.sq, c.sk, c.n, c.nkv, c.d, q.p, k.p, v.p, rm, scale, o_ref.p, lse_ref.p);
  CK(cudaGetLastError());
  ref_rowsum<<<(unsigned)((nr + 127) / 128), 128>>>((int)nr, c.d, dout.p, o_ref.p, D_ref.p);
  CK(cudaGetLastError());
  if (!g_no_bwd) {
    ref_dq<<<(unsigned)((nr + 63) / 64), 64>>>(c.sq, c.sk, c.n, c.nkv, c.d, q.p, k.p, v.p, dout.p, lse_ref.p, D_ref.p, rm,
                                              scale, dq_ref.p);
    CK(cudaGetLastError());
    const size_t nkr = (size_t)c.sk * c.nkv;
    ref_dkdv<<<(unsigned)((nkr + 31) / 32), 32>>>(c.sq, c.sk, c.n, c.nkv, c.d, q.p, k.p, v.p, dout.p, lse_ref.p, D_ref.p,
                                                 rm, scale, dk_ref.p, dv_ref.p);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  const auto ho = o_ref.download(), hl = lse_ref.download(), hdq = dq_ref.download(), hdk = dk_ref.download(),
             hdv = dv_ref.download();

  AttnShape s{c.sq, c.sk, c.n, c.nkv, c.d};
  DevBuf<unsigned char> ws(std::max<size_t>(flash_workspace_bytes(s, md.mask), 1));
  DevBuf<float> o(nq), lse(nr), D(nr), dq(nq), dk(nk), dv(nk);
  DevBuf<bf16> ob(nq);
  const double tol = 1e-2;
  for (int var = 0; var < kMaxVariants; ++var) {
    if (!flash_fwd_variant_name(c.d, var) || !fwd_enabled(var)) continue;
    o.poison(), ob.poison(), lse.poison();
    const char* vn = flash_fwd_variant_name(c.d, var);
    const std::string err =
        fwd_error(flash_forward(s, q.p, k.p, v.p, md.mask, (float)scale, o.p, ob.p, lse.p, ws.p, 0, FwdConfig{var}));
    if (!err.empty()) {
      Err e;
      e.err = err;
      report(c, "o", vn, e, tol);
      continue;
    }
    const auto hoo = o.download();
    Err eo = compare(hoo, ho), eb = compare(ob.download(), ho), el = compare_lse(lse.download(), hl);
    report(c, "o", vn, eo, tol);
    report(c, "o_bf16", vn, eb, tol);
    report(c, "lse", vn, el, 1e-3);
    g_worst[0] = std::max(g_worst[0], eo.rel_fro), g_worst[1] = std::max(g_worst[1], eb.rel_fro);
    g_worst[2] = std::max(g_worst[2], el.rel_fro);
    // Empty-row contract: rows the reference finds empty must be exactly O = 0.
    Err ez;
    for (size_t r = 0; r < nr; ++r)
      if (hl[r] == -INFINITY)
        for (int e = 0; e < c.d; ++e)
          if (hoo[r * c.d + e] != 0.f && ez.bad++ == 0) ez.first_bad = (long)(r * c.d + e), ez.bad_got = hoo[r * c.d + e];
    report(c, "empty_rows_zero", vn, ez, 1.0);
  }
  {
    long empty = 0;
    for (size_t r = 0; r < nr; ++r) empty += hl[r] == -INFINITY;
    std::printf("  %-34s sq=%d sk=%d n=%d/%d d=%d: %ld empty (row, head) pairs\n", c.name.c_str(), c.sq, c.sk, c.n,
                c.nkv, c.d, empty);
  }
  if (g_no_bwd) return;
  // Backward on the default forward's lse and D = rowsum(dO * O) (what the engine does).
  o.poison(), lse.poison(), D.poison();
  CK(flash_forward(s, q.p, k.p, v.p, md.mask, (float)scale, o.p, nullptr, lse.p, ws.p, 0, FwdConfig{0}));
  CK(flash_rowsum(c.sq, c.n, c.d, dout.p, o.p, D.p, 0));
  for (int var = 0; var < kMaxVariants; ++var) {  // a number the head dim lacks (nullptr) is skipped
    if (!flash_bwd_variant_name(c.d, var) || !bwd_enabled(var)) continue;
    dq.poison(), dk.poison(), dv.poison();
    const char* vn = flash_bwd_variant_name(c.d, var);
    {  // an error or fault is a FAIL (a fault ends the process: fwd_error)
      const std::string err = fwd_error(flash_backward(s, q.p, k.p, v.p, dout.p, lse.p, D.p, md.mask, (float)scale, dq.p,
                                                       dk.p, dv.p, false, false, ws.p, 0, BwdConfig{var}));
      if (!err.empty()) {
        Err e;
        e.err = err;
        report(c, "dq", vn, e, tol);
        continue;
      }
    }
    Err eq = compare(dq.download(), hdq), ek = compare(dk.download(), hdk), ev = compare(dv.download(), hdv);
    report(c, "dq", vn, eq, tol);
    report(c, "dk", vn, ek, tol);
    report(c, "dv", vn, ev, tol);
    g_worst[3] = std::max(g_worst[3], eq.rel_fro), g_worst[4] = std::max(g_worst[4], ek.rel_fro);
    g_worst[5] = std::max(g_worst[5], ev.rel_fro);
    {  // accumulate mode (every variant): a second call adds the same gradients again
      const std::string err = fwd_error(flash_backward(s, q.p, k.p, v.p, dout.p, lse.p, D.p, md.mask, (float)scale, dq.p,
                                                       dk.p, dv.p, true, true, ws.p, 0, BwdConfig{var}));
      if (!err.empty()) {
        Err e;
        e.err = err;
        report(c, "dq_acc", vn, e, tol);
        continue;
      }
      report(c, "dq_acc", vn, compare(dq.download(), hdq, 2.0), tol);
      report(c, "dk_acc", vn, compare(dk.download(), hdk, 2.0), tol);
      report(c, "dv_acc", vn, compare(dv.download(), hdv, 2.0), tol);
    }
  }

}

// ------------------------------------------------------------ timing
static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class F> static double time_ms(F&& f, double budget_ms) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();  // warmup x2
  f();
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(a));
  f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float t1 = 0;
  CK(cudaEventElapsedTime(&t1, a, b));
  const int reps = std::max(5, std::min(50, (int)(budget_ms / std::max(t1, 1e-3f))));
  std::vector<float> ts;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ts.push_back(t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return median(ts);
}

struct TShape {
  int sq, sk, causal;
};

// FLOPs of the forward: 4 sq sk n d, half of the square for causal (sq = sk).
static double fwd_flops(const TShape& t, int n, int d) {
  return 4.0 * t.sq * (double)t.sk * n * d * (t.causal ? 0.5 : 1.0);
}

static void run_timing(const std::vector<TShape>& shapes, int n, int nkv, int d, double budget_ms, FILE* csv) {
  int smax = 0;
  for (const auto& t : shapes) smax = std::max(smax, std::max(t.sq, t.sk));
  const size_t nq = (size_t)smax * n * d, nk = (size_t)smax * nkv * d, nr = (size_t)smax * n;
  DevBuf<bf16> q(nq), k(nk), v(nk), dout(nq);
  DevBuf<float> o(nq), lse(nr), D(nr), dq(nq), dk(nk), dv(nk);
  fill_uniform<<<1024, 256>>>(q.p, nq, 11, 2.5f);
  fill_uniform<<<1024, 256>>>(k.p, nk, 12, 1.7f);
  fill_uniform<<<1024, 256>>>(v.p, nk, 13, 1.7f);
  fill_uniform<<<1024, 256>>>(dout.p, nq, 14, 1.7f);
  CK(cudaGetLastError());
  const float scale = 1.f / std::sqrt((float)d);
  for (const TShape& ts : shapes) {
    const int causal = ts.causal;
    AttnShape s{ts.sq, ts.sk, n, nkv, d};
    const Mask m = causal ? Mask::causal(0) : Mask::none();
    const double fwd_flop = fwd_flops(ts, n, d);
    const char* mk = causal ? "causal" : "full";
    auto row = [&](const std::string& kern, double t, double tf) {
      std::fprintf(csv, "ours,%s,%d,%d,%d,%d,%d,%d,%.5f,%.2f\n", kern.c_str(), ts.sq, ts.sk, n, nkv, d, causal, t, tf);
    };
    if (!g_no_bwd) {
      CK(flash_forward(s, q.p, k.p, v.p, m, scale, o.p, nullptr, lse.p, nullptr, 0, FwdConfig{0}));
      CK(flash_rowsum(ts.sq, n, d, dout.p, o.p, D.p, 0));
      row("rowsum", time_ms([&] { CK(flash_rowsum(ts.sq, n, d, dout.p, o.p, D.p, 0)); }, budget_ms / 4), 0);
    }
    for (int var = 0; var < kMaxVariants; ++var) {
      if (!flash_fwd_variant_name(d, var) || !fwd_enabled(var)) continue;
      {  // a variant that fails to launch is skipped (a fault ends the process: fwd_error)
        const std::string err =
            fwd_error(flash_forward(s, q.p, k.p, v.p, m, scale, o.p, nullptr, lse.p, nullptr, 0, FwdConfig{var}));
        if (!err.empty()) {
          std::printf("time %-40s SKIPPED: %s\n", flash_fwd_variant_name(d, var), err.c_str());
          continue;
        }
      }
      const double t = time_ms(
          [&] { CK(flash_forward(s, q.p, k.p, v.p, m, scale, o.p, nullptr, lse.p, nullptr, 0, FwdConfig{var})); },
          budget_ms);
      const double tf = fwd_flop / (t * 1e-3) / 1e12;
      std::printf("time %-40s sq=%-6d sk=%-6d n=%d/%d d=%d %-6s %9.3f ms %6.1f TFLOP/s\n",
                  flash_fwd_variant_name(d, var), ts.sq, ts.sk, n, nkv, d, mk, t, tf);
      row(flash_fwd_variant_name(d, var), t, tf);
      std::fflush(stdout);
    }
    if (g_no_bwd) continue;
    // lse and D for the backward from the default forward
    CK(flash_forward(s, q.p, k.p, v.p, m, scale, o.p, nullptr, lse.p, nullptr, 0, FwdConfig{0}));
    CK(flash_rowsum(ts.sq, n, d, dout.p, o.p, D.p, 0));
    for (int var = 0; var < kMaxVariants; ++var) {
      if (!flash_bwd_variant_name(d, var) || !bwd_enabled(var)) continue;
      {  // a variant that fails to launch is skipped (a fault ends the process: fwd_error)
        const std::string err = fwd_error(flash_backward(s, q.p, k.p, v.p, dout.p, lse.p, D.p, m, scale, dq.p, dk.p,
                                                         dv.p, false, false, nullptr, 0, BwdConfig{var}));
        if (!err.empty()) {
          std::printf("time %-40s SKIPPED: %s\n", flash_bwd_variant_name(d, var), err.c_str());
          continue;
        }
      }
      const double t = time_ms(
          [&] {
            CK(flash_backward(s, q.p, k.p, v.p, dout.p, lse.p, D.p, m, scale, dq.p, dk.p, dv.p, false, false, nullptr, 0,
                              BwdConfig{var}));
          },
          budget_ms);
      const double tf = 2.5 * fwd_flop / (t * 1e-3) / 1e12;
      std::printf("time %-40s sq=%-6d sk=%-6d n=%d/%d d=%d %-6s %9.3f ms %6.1f TFLOP/s\n",
                  flash_bwd_variant_name(d, var), ts.sq, ts.sk, n, nkv, d, mk, t, tf);
      row(flash_bwd_variant_name(d, var), t, tf);
      std::fflush(stdout);
    }
    // Diagnostic split: the same backward without the dQ product and its atomics
    // (the wgmma variants, 4+: without the atomics only; the dQ product still runs).
    for (int var = 0; var < kMaxVariants && !g_no_diag; ++var) {
      if (!flash_bwd_variant_name(d, var) || !bwd_enabled(var)) continue;
      BwdConfig cfg{var, 1};
      {  // as above: a variant that fails to launch is skipped, not a process exit
        const std::string err = fwd_error(flash_backward(s, q.p, k.p, v.p, dout.p, lse.p, D.p, m, scale, dq.p, dk.p,
                                                         dv.p, false, false, nullptr, 0, cfg));
        if (!err.empty()) {
          std::printf("time diag_nodq %-30s SKIPPED: %s\n", flash_bwd_variant_name(d, var), err.c_str());
          continue;
        }
      }
      const double t = time_ms(
          [&] {
            CK(flash_backward(s, q.p, k.p, v.p, dout.p, lse.p, D.p, m, scale, dq.p, dk.p, dv.p, false, false, nullptr, 0,
                              cfg));
          },
          budget_ms / 2);
      const std::string nm = std::string("diag_nodq ") + flash_bwd_variant_name(d, var);
      std::printf("time %-40s sq=%-6d sk=%-6d n=%d/%d d=%d %-6s %9.3f ms (no dQ: not a result)\n", nm.c_str(), ts.sq,
                  ts.sk, n, nkv, d, mk, t);
      row(nm, t, 0);
    }
  }
}

int main(int argc, char** argv) {
  bool do_check = false, do_time = false;
  unsigned long long seed = (unsigned long long)std::chrono::high_resolution_clock::now().time_since_epoch().count();
  std::string out = ".";
  std::vector<int> sizes = {4096, 8192, 16384, 32768};
  double budget_ms = 300;
  bool gqa_time = false, time_full = true, time_causal = true;
  int rounds = 1;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    if (s == "--check") do_check = true;
    else if (s == "--time") do_time = true;
    else if (s == "--gqa-time") gqa_time = true;
    else if (s == "--seed" && a + 1 < argc) seed = std::strtoull(argv[++a], nullptr, 10);
    else if (s == "--out" && a + 1 < argc) out = argv[++a];
    else if (s == "--reps-ms" && a + 1 < argc) budget_ms = std::atof(argv[++a]);
    else if (s == "--no-bwd") g_no_bwd = true;
    else if (s == "--no-diag") g_no_diag = true;
    else if (s == "--rounds" && a + 1 < argc) {
      rounds = std::atoi(argv[++a]);
      if (rounds < 1) {
        std::fprintf(stderr, "--rounds: %s is not a positive count\n", argv[a]);
        return 2;
      }
    } else if (s == "--masks" && a + 1 < argc) {
      const std::string l = argv[++a];
      time_full = time_causal = false;
      size_t p = 0;
      while (p < l.size()) {
        size_t q = l.find(',', p);
        if (q == std::string::npos) q = l.size();
        const std::string m = l.substr(p, q - p);
        if (m == "full") time_full = true;
        else if (m == "causal") time_causal = true;
        else {
          std::fprintf(stderr, "--masks: '%s' is not a mask (full, causal)\n", m.c_str());
          return 2;
        }
        p = q + 1;
      }
    }
    else if ((s == "--fwd-variants" || s == "--bwd-variants") && a + 1 < argc) {
      std::vector<int>& vars = s == "--fwd-variants" ? g_fwd_vars : g_bwd_vars;
      const std::string l = argv[++a];
      size_t p = 0;
      while (p < l.size()) {
        size_t q = l.find(',', p);
        if (q == std::string::npos) q = l.size();
        vars.push_back(std::atoi(l.substr(p, q - p).c_str()));
        if (vars.back() >= kMaxVariants) {  // the loops stop at kMaxVariants: it would silently never run
          std::fprintf(stderr, "%s: variant %d is past kMaxVariants (%d, flash_attn.h)\n", s.c_str(), vars.back(), kMaxVariants);
          return 2;
        }
        p = q + 1;
      }
    }
    else if (s == "--sizes" && a + 1 < argc) {
      sizes.clear();
      std::string l = argv[++a];
      size_t p = 0;
      while (p < l.size()) {
        size_t q = l.find(',', p);
        if (q == std::string::npos) q = l.size();
        sizes.push_back(std::atoi(l.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", s.c_str());
      return 2;
    }
  }
  if (!do_check && !do_time) do_check = do_time = true;
  int dev_id = 0;
  CK(cudaGetDevice(&dev_id));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev_id));
  std::printf("device %s, %d SMs, cc %d.%d, smem/block optin %zu\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor, prop.sharedMemPerBlockOptin);

  if (do_check) {
    std::printf("check seed %llu\n", seed);
    g_check_csv = std::fopen((out + "/check.csv").c_str(), "w");
    if (!g_check_csv) { std::perror("check.csv"); return 2; }
    std::fprintf(g_check_csv, "case,sq,sk,n,nkv,d,output,variant,rel_fro,rel_max,bad,status\n");
    std::mt19937_64 rng(seed);
    std::vector<Case> cases;
    for (int d : {64, 128})
      for (int grp : {1, 4}) {
        const int n = 8, nkv = n / grp;
        const int sq = 300, sk = 517;  // odd, not multiples of any tile, sq != sk
        auto add = [&](const char* nm, int kind, long long diag, long long win, int gc, int gs, int sq_, int sk_) {
          Case c;
          c.name = std::string(nm) + "_d" + std::to_string(d) + "_g" + std::to_string(grp);
          c.sq = sq_, c.sk = sk_, c.n = n, c.nkv = nkv, c.d = d, c.kind = kind, c.diag = diag, c.window = win;
          c.gen_causal = gc, c.gen_same_doc = gs;
          cases.push_back(c);
        };
        add("none", kMaskNone, 0, 0, 0, 0, sq, sk);
        add("causal_bottomright", kMaskCausal, sk - sq, 0, 0, 0, sq, sk);
        add("causal_topleft", kMaskCausal, 0, 0, 0, 0, sq, sk);
        add("strictly_lower", kMaskCausal, -1, 0, 0, 0, sq, sk);
        add("causal_empty_rows(-70)", kMaskCausal, -70, 0, 0, 0, sq, sk);
        add("window100", kMaskWindow, 0, 100, 0, 0, sq, sk);
        add("document", kMaskDocument, 0, 0, 0, 0, sq, sk);
        add("general_causal_doc_pad", kMaskGeneral, 0, 0, 1, 1, sq, sk);
        add("general_window77_pad", kMaskGeneral, 0, 77, 0, 0, sq, sk);
        add("none_1024", kMaskNone, 0, 0, 0, 0, 1024, 1024);
        add("causal_1000x1000", kMaskCausal, 0, 0, 0, 0, 1000, 1000);
        add("window_300_big", kMaskWindow, 0, 300, 0, 0, 777, 1500);
      }
    for (const Case& c : cases) run_case(c, rng);
    std::fclose(g_check_csv);
    std::printf("CHECK %s: %d of %d checks failed; worst rel_fro o=%.2e o_bf16=%.2e dq=%.2e dk=%.2e dv=%.2e; "
                "worst lse abs err=%.2e\n",
                g_fail ? "FAILED" : "PASSED", g_fail, g_checks, g_worst[0], g_worst[1], g_worst[3], g_worst[4],
                g_worst[5], g_worst[2]);
  }
  if (do_time) {
    FILE* csv = std::fopen((out + "/time.csv").c_str(), "w");
    if (!csv) { std::perror("time.csv"); return 2; }
    std::fprintf(csv, "impl,kernel,sq,sk,n,nkv,d,causal,ms,tflops\n");
    std::vector<TShape> shapes;
    for (int S : sizes) {
      if (time_full) shapes.push_back({S, S, 0});
      if (time_causal) shapes.push_back({S, S, 1});
    }
    for (int r = 0; r < rounds; ++r) {
      if (rounds > 1) std::printf("timing round %d of %d\n", r + 1, rounds);
      run_timing(shapes, 32, 32, 128, budget_ms, csv);
      if (gqa_time) {
        // GQA 32:8 at 16K, and the zigzag ring's half blocks (all queries x first
        // half of K/V; second half of queries x all K/V) at 8K and 16K tokens per rank.
        run_timing({{16384, 16384, 0}, {16384, 16384, 1}}, 32, 8, 128, budget_ms, csv);
        run_timing({{8192, 4096, 0}, {4096, 8192, 0}, {16384, 8192, 0}, {8192, 16384, 0}}, 32, 32, 128, budget_ms, csv);
      }
    }
    std::fclose(csv);
  }
  return g_fail ? 1 : 0;
}

// Host API of the CUDA flash attention (see flash_attn.h), the mask bounds
// pre-pass and the D = rowsum(dO * O) kernel.
#include "flash_api.cuh"
#include "flash_choices.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace burst {
namespace fa {

namespace dev {

__global__ void chunk_bounds_kernel(int rows, int nchunks, const long long* pos, const int* doc, int kind,
                                    ChunkBounds* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= nchunks) return;
  ChunkBounds b{LLONG_MAX, LLONG_MIN, INT_MAX, INT_MIN, 0, 0};
  for (int r = c * kChunk; r < min(rows, (c + 1) * kChunk); ++r) {
    const int d = doc ? doc[r] : 0;
    if (kind == kMaskGeneral && d < 0) continue;  // padding
    const long long p = pos[r];
    b.pmin = min(b.pmin, p), b.pmax = max(b.pmax, p), b.dmin = min(b.dmin, d), b.dmax = max(b.dmax, d);
    b.nvalid += 1;
  }
  out[c] = b;
}

cudaError_t prepare_mask(const AttnShape& s, const Mask& m, void* ws, cudaStream_t st) {
  if (m.kind == kMaskNone || m.kind == kMaskCausal) return cudaSuccess;
  if (!ws || !m.q_pos || !m.k_pos) return cudaErrorInvalidValue;
  if (m.kind != kMaskWindow && (!m.q_doc || !m.k_doc)) return cudaErrorInvalidValue;
  const int nq = (s.sq + kChunk - 1) / kChunk, nk = (s.sk + kChunk - 1) / kChunk;
  const int* qd = m.kind == kMaskWindow ? nullptr : m.q_doc;
  const int* kd = m.kind == kMaskWindow ? nullptr : m.k_doc;
  auto* b = static_cast<ChunkBounds*>(ws);
  if (nq > 0) chunk_bounds_kernel<<<(nq + 127) / 128, 128, 0, st>>>(s.sq, nq, m.q_pos, qd, m.kind, b);
  if (nk > 0) chunk_bounds_kernel<<<(nk + 127) / 128, 128, 0, st>>>(s.sk, nk, m.k_pos, kd, m.kind, b + nq);
  return cudaGetLastError();
}

// One warp per (row, head); O in fp32 (float) or in the storage type
// (__nv_bfloat16, as FlashAttention reads its own bf16 O for D).
__device__ inline float2 load_pair(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ inline float2 load_pair(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
template <class TO>
__global__ void rowsum_kernel(int rows, int d, const __nv_bfloat16* dout, const TO* o, float* D) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (w >= rows) return;
  const __nv_bfloat16* a = dout + w * d;
  const TO* b = o + w * d;
  float acc = 0.f;
  for (int e = lane * 2; e < d; e += 64) {
    const float2 x = load_pair(a + e);
    const float2 y = load_pair(b + e);
    acc += x.x * y.x + x.y * y.y;
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) D[w] = acc;
}

// Merge (ob, lseb) into (o, lse) in place, one warp per (row, head), each
// lane a 16-byte vector of the row at a time (d % 4 == 0 and every pointer
// 16-byte aligned: VEC) or single floats 32 apart, so a warp's accesses are
// consecutive: the portable kernel's thread per row strides by d across the
// warp (32 rows' worth of cache lines per load). Exact for -inf rows on
// either side, as kernels::lse_merge: lseb = -inf leaves the row as it is,
// lse = -inf takes (ob, lseb) as they are.
template <bool VEC>
__global__ void lse_merge_kernel(long long rows, int d, float* __restrict__ o, float* __restrict__ lse,
                                 const float* __restrict__ ob, const float* __restrict__ lseb) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (w >= rows) return;
  const float a = lse[w], b = lseb[w];
  if (b == -INFINITY) return;  // nothing new
  const bool take = a == -INFINITY;  // nothing yet: the block's result as it is
  float wa = 0.f, wb = 1.f, lnew = b;
  if (!take) {
    const float mx = fmaxf(a, b), mn = fminf(a, b);
    lnew = mx + log1pf(expf(mn - mx));
    wa = expf(a - lnew), wb = expf(b - lnew);
  }
  float* orow = o + w * d;
  const float* brow = ob + w * d;
  if constexpr (VEC) {
    for (int e = lane * 4; e < d; e += 128) {
      const float4 y = *reinterpret_cast<const float4*>(brow + e);
      float4 x = y;
      if (!take) {
        x = *reinterpret_cast<const float4*>(orow + e);
        x.x = wa * x.x + wb * y.x, x.y = wa * x.y + wb * y.y, x.z = wa * x.z + wb * y.z, x.w = wa * x.w + wb * y.w;
      }
      *reinterpret_cast<float4*>(orow + e) = x;
    }
  } else {
    for (int e = lane; e < d; e += 32) orow[e] = take ? brow[e] : wa * orow[e] + wb * brow[e];
  }
  __syncwarp();  // every lane has read lse[w] above
  if (lane == 0) lse[w] = lnew;
}

}  // namespace dev

size_t flash_workspace_bytes(const AttnShape& s, const Mask& m) {
  if (m.kind == kMaskNone || m.kind == kMaskCausal) return 0;
  return size_t((s.sq + dev::kChunk - 1) / dev::kChunk + (s.sk + dev::kChunk - 1) / dev::kChunk) *
         sizeof(dev::ChunkBounds);
}

// cp.async moves 16-byte rows of Q/K/V/dO (d * 2 bytes is a multiple of 16,
// so the base pointers must be 16-byte aligned); fp32 outputs are written as
// float2, lse/D read by 4-byte cp.async.
static bool aligned(const void* p, size_t a) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % a == 0; }

static bool shape_ok(const AttnShape& s) {
  return s.sq >= 0 && s.sk >= 0 && s.n >= 1 && s.n_kv >= 1 && s.n % s.n_kv == 0 && (s.d == 64 || s.d == 128);
}

// Which kernel runs (A/B runs; read once per variable): BURST_FA_FORWARD /
// BURST_FA_BACKWARD = tma (the default: the TMA wgmma kernels, forward 1.9x,
// backward 2.0x the mma.sync ones on the H200. At d = 128 the forward on 128
// x 176 tiles from kFwd176MinKeys keys on (below: variant 10), the lab's
// variant 17, since 2026-12-06: +2.6% / +7.7% TFLOP/s
// (full / causal, medians of 4 rounds at 16K-32K) and -2.1% cycles against
// variant 10 on an H100, 0.95-0.98x cuDNN in the same call; the backward on
// 80 x 128 tiles with dQ computed transposed, the lab's variant 14, since
// 2026-12-06: -7.5% / -5.5% cycles against the 64-row variant, 1.01-1.06x
// cuDNN in the same call), tma80 (the same), tma176 (variant 17 at any key
// length), tma64
// (backward only: the 64-row variant 11, the default before), tma128
// (forward only: the 128 x 128 variant 10, the default before), tma12 (the
// lab's variants 12, measured no faster), wgmma (the cp.async wgmma
// kernels, 1.3x) or mma (mma.sync). A choice that does not exist for a
// direction or head dim runs tma there. Another value is reported once and
// the default used.
// Impl follows kKernelChoices (flash_choices.h, the one list of the names).
enum class Impl { Tma, Tma80, Tma64, Tma12, Tma176, Tma128, Wgmma, Mma };
static_assert(kNumKernelChoices == int(Impl::Mma) + 1, "Impl and kKernelChoices (flash_choices.h) list the same kernels");
static Impl kernel_choice(const char* var) {
  const char* e = std::getenv(var);
  if (!e || !*e) return Impl::Tma;
  const int i = kernel_choice_index(e);
  if (i >= 0) return Impl(i);
  std::fprintf(stderr, "burst: warning: %s = '%s' is not a flash kernel (%s): using tma\n", var, e, kernel_choice_list().c_str());
  return Impl::Tma;
}
// The default d = 128 forward runs the 128 x 128 variant 10 below this
// many keys and the 128 x 176 variant 17 from it on. On short key blocks
// (the ring's per-rank blocks and zigzag's half blocks at 2K-8K tokens per
// GPU) variant 17 pads its last key tile further (4096 keys: 24 x 176 =
// 4224 columns) over fewer tiles per query tile. On two H100s (2026-12-06,
// ab3 and ab4, medians of 3-4 rounds) variant 10 won at 2K and 4K keys by
// 4-12% (4K full / causal 607.7 / 425.8 against 585.3 / 412.5 TFLOP/s),
// the two were level (within 1%) at 6K and 8K, and from 16K variant 17 won
// on two cards of three (+1.1% to +7.7%; experiments/kernels/flash_attn/
// NOTES.md, "The ab3 and ab4 calls, and the forward by key length").
constexpr long kFwd176MinKeys = 8192;
static Impl forward_choice() {
  static const Impl c = kernel_choice("BURST_FA_FORWARD");
  return c;
}
static Impl backward_choice() {
  static const Impl c = kernel_choice("BURST_FA_BACKWARD");
  return c;
}

// The kind a choice runs at head dim d in either direction, or -1 for the
// d = 128 TMA choices (each direction picks those below): tma12 its
// variants, wgmma the cp.async kernels (mma too: its callers launch the
// mma.sync kernels instead), and
// at d = 64 every TMA choice the one TMA kernel (kWgTma).
static int shared_kind(Impl c, int d) {
  if (c == Impl::Tma12) return dev::kWgTma12;
  if (c == Impl::Wgmma || c == Impl::Mma) return dev::kWgCpAsync;
  if (d != 128) return dev::kWgTma;
  return -1;
}
// The forward's kind for this shape and mask at d = 128: tma128 the 128 x
// 128 variant 10, tma176 the 128 x 176 variant 17, the others (the default
// tma) by the keys a query tile visits (a sliding window bounds them: its
// tiles skip the rest).
static int forward_kind(const AttnShape& s, const Mask& mask) {
  const Impl c = forward_choice();
  if (const int k = shared_kind(c, s.d); k >= 0) return k;
  if (c == Impl::Tma128) return dev::kWgTma;
  if (c == Impl::Tma176) return dev::kWgTma176;
  const bool windowed = mask.kind == kMaskWindow || (mask.kind == kMaskGeneral && mask.window > 0);
  const long keys = windowed ? std::min<long>(s.sk, long(mask.window) + 128) : long(s.sk);
  return keys < kFwd176MinKeys ? dev::kWgTma : dev::kWgTma176;
}
// The backward's kind at d = 128: tma64 the 64-row variant 11, the others
// the 80-row variant 14.
static int backward_kind(int d) {
  const Impl c = backward_choice();
  if (const int k = shared_kind(c, d); k >= 0) return k;
  return c == Impl::Tma64 ? dev::kWgTma : dev::kWgTma80;
}

int flash_forward_variant(const AttnShape& s, const Mask& mask) {
  if (forward_choice() == Impl::Mma) return -1;
  switch (forward_kind(s, mask)) {
    case dev::kWgTma176: return 17;
    case dev::kWgTma: return s.d == 128 ? 10 : 9;
    case dev::kWgTma12: return 12;
    default: return 4;  // kWgCpAsync
  }
}

namespace {
cudaError_t forward_impl(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                         const Mask& mask, float scale, float* o_f32, __nv_bfloat16* o_bf16, float* lse, bool merge,
                         void* workspace, cudaStream_t st) {
  if (!shape_ok(s) || !lse || (!o_f32 && !o_bf16) || (merge && (!o_f32 || o_bf16))) return cudaErrorInvalidValue;
  if (!aligned(q, 16) || !aligned(k, 16) || !aligned(v, 16) || !aligned(o_f32, 8) || !aligned(o_bf16, 4) ||
      !aligned(lse, 4))
    return cudaErrorMisalignedAddress;
  if (s.sq == 0 || (merge && s.sk == 0)) return cudaSuccess;  // merging no key changes nothing
  // sk == 0 runs the kernel too: no key tile, so every row gets O = 0, lse = -inf.
  cudaError_t e = dev::prepare_mask(s, mask, workspace, st);
  if (e != cudaSuccess) return e;
  dev::FwdParams p;
  p.q = q, p.k = k, p.v = v, p.o_f32 = o_f32, p.o_bf16 = o_bf16, p.lse = lse;
  p.sq = s.sq, p.sk = s.sk, p.n = s.n, p.nkv = s.n_kv, p.group = s.n / s.n_kv;
  p.scale_log2 = scale * 1.4426950408889634f;
  p.mask = dev::make_mask_dev(mask, workspace, s.sq, s.sk);
  p.merge = merge ? 1 : 0;
  if (forward_choice() != Impl::Mma) {
    const int kind = forward_kind(s, mask);
    e = s.d == 128 ? dev::fwd_wgmma_d128(p, kind, st) : dev::fwd_wgmma_d64(p, kind, st);
    // The sm_90a objects load on compute capability 9.0 only: elsewhere the
    // mma.sync kernel (sm_90 objects, any Hopper) runs instead.
    if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction) return e;
    cudaGetLastError();
  }
  return s.d == 128 ? dev::fwd_d128(p, st) : dev::fwd_d64(p, st);
}
}  // namespace

cudaError_t flash_forward(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                          const Mask& mask, float scale, float* o_f32, __nv_bfloat16* o_bf16, float* lse,
                          void* workspace, cudaStream_t st) {
  return forward_impl(s, q, k, v, mask, scale, o_f32, o_bf16, lse, false, workspace, st);
}

cudaError_t flash_forward_merge(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                const __nv_bfloat16* v, const Mask& mask, float scale, float* o_f32, float* lse,
                                void* workspace, cudaStream_t st) {
  return forward_impl(s, q, k, v, mask, scale, o_f32, nullptr, lse, true, workspace, st);
}

cudaError_t flash_backward(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                           const __nv_bfloat16* dout, const float* lse, const float* D, const Mask& mask, float scale,
                           float* dq, float* dk, float* dv, bool accumulate_dq, bool accumulate_dkdv, void* workspace,
                           cudaStream_t st) {
  if (!shape_ok(s) || !dq || !dk || !dv || !lse || !D) return cudaErrorInvalidValue;
  if (!aligned(q, 16) || !aligned(k, 16) || !aligned(v, 16) || !aligned(dout, 16) || !aligned(dq, 8) ||
      !aligned(dk, 8) || !aligned(dv, 8) || !aligned(lse, 4) || !aligned(D, 4))
    return cudaErrorMisalignedAddress;
  cudaError_t e = cudaSuccess;
  if (!accumulate_dq && s.sq > 0) e = cudaMemsetAsync(dq, 0, size_t(s.sq) * s.n * s.d * sizeof(float), st);
  if (e != cudaSuccess) return e;
  if (s.sk == 0) return cudaSuccess;
  e = dev::prepare_mask(s, mask, workspace, st);
  if (e != cudaSuccess) return e;
  dev::BwdParams p;
  p.q = q, p.k = k, p.v = v, p.dout = dout, p.lse = lse, p.D = D, p.dq = dq, p.dk = dk, p.dv = dv;
  p.sq = s.sq, p.sk = s.sk, p.n = s.n, p.nkv = s.n_kv, p.group = s.n / s.n_kv;
  p.scale = scale, p.scale_log2 = scale * 1.4426950408889634f;
  p.acc_dkdv = accumulate_dkdv ? 1 : 0;
  p.diag_no_dq = 0;
  p.mask = dev::make_mask_dev(mask, workspace, s.sq, s.sk);
  if (backward_choice() != Impl::Mma) {
    const int kind = backward_kind(s.d);
    e = s.d == 128 ? dev::bwd_wgmma_d128(p, kind, st) : dev::bwd_wgmma_d64(p, kind, st);
    if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction) return e;
    cudaGetLastError();  // not compute capability 9.0: the mma.sync kernel
  }
  return s.d == 128 ? dev::bwd_d128(p, st) : dev::bwd_d64(p, st);
}

template <class TO>
static cudaError_t rowsum(int sq, int n, int d, const __nv_bfloat16* dout, const TO* o, float* D, cudaStream_t st) {
  const long long rows = (long long)sq * n;
  if (rows == 0) return cudaSuccess;
  dev::rowsum_kernel<TO><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>((int)rows, d, dout, o, D);
  return cudaGetLastError();
}
cudaError_t flash_rowsum(int sq, int n, int d, const __nv_bfloat16* dout, const float* o, float* D, cudaStream_t st) {
  return rowsum(sq, n, d, dout, o, D, st);
}
cudaError_t flash_rowsum(int sq, int n, int d, const __nv_bfloat16* dout, const __nv_bfloat16* o, float* D,
                         cudaStream_t st) {
  return rowsum(sq, n, d, dout, o, D, st);
}

cudaError_t flash_lse_merge(long long rows, int d, float* o, float* lse, const float* ob, const float* lseb,
                            cudaStream_t st) {
  if (rows < 0 || d < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned blocks = unsigned((rows + 7) / 8);  // 8 warps of 256 threads: one row each
  if (d % 4 == 0 && aligned(o, 16) && aligned(ob, 16))
    dev::lse_merge_kernel<true><<<blocks, 256, 0, st>>>(rows, d, o, lse, ob, lseb);
  else
    dev::lse_merge_kernel<false><<<blocks, 256, 0, st>>>(rows, d, o, lse, ob, lseb);
  return cudaGetLastError();
}

}  // namespace fa
}  // namespace burst

// Host API of the lab flash attention (see flash_attn.h), the mask bounds
// pre-pass and the D = rowsum(dO * O) kernel.
#include "flash_api.cuh"

#include <cmath>

namespace burst_fa {

namespace {
// Variant tables (the template arguments live in flash_{fwd,bwd}_d{64,128}.cu).
const char* kFwdNames128[] = {"fwd BR128 BC64 8w (Q in regs)", "fwd BR128 BC32 4w MT2 (Q in smem)",
                              "fwd BR64 BC64 4w x2/SM (Q in regs)", "fwd BR128 BC64 4w MT2 (Q in smem)",
                              "fwd wgmma BR128 BC128 2WG", "fwd wgmma BR128 BC128 2WG overlap",
                              "fwd wgmma overlap DIAG V-desc LBO/SBO swapped", "fwd wgmma_tma_ws BR128 BC128 pingpong",
                              "fwd wgmma_tma_ws pingpong trap-free", "fwd wgmma_tma_ws pingpong trap-free intra-WG overlap",
                              "fwd wgmma_tma_ws intra-WG overlap 3 stages",
                              "fwd wgmma_tma_ws 3 stages persistent snake grid",
                              "fwd wgmma_tma_ws 3 stages descriptor diet sleeping producer",
                              "fwd wgmma_tma_ws 3 stages persistent descriptor diet sleeping producer",
                              "fwd wgmma_tma_ws 3 stages descriptor diet interleaved softmax",
                              "fwd wgmma_tma_ws 3 stages diet interleaved softmax quarter exp2 on FMA",
                              "fwd wgmma_tma_ws 3 stages descriptor diet no ping-pong",
                              "fwd wgmma_tma_ws BC176 2 stages descriptor diet",
                              "fwd wgmma_tma_ws BC176 2 stages descriptor diet no ping-pong",
                              "fwd wgmma_tma_ws BC176 2 stages descriptor diet merge epilogue compiled in",
                              "fwd wgmma_tma_ws BC176 2 stages descriptor diet launched head by head",
                              "fwd wgmma_tma_ws intra-WG overlap 3 stages launched head by head",
                              "fwd BR128 BC64 4w MT2 (Q in smem) launched head by head",
                              "fwd wgmma BR128 BC128 2WG launched head by head"};
const char* kFwdNames64[] = {"fwd BR128 BC64 8w (Q in regs)", "fwd BR128 BC32 4w MT2 (Q in smem)",
                             "fwd BR64 BC64 4w x2/SM (Q in regs)", "fwd BR128 BC64 4w MT2 (Q in smem)",
                             "fwd wgmma BR128 BC128 2WG", "fwd wgmma BR128 BC128 2WG overlap",
                             nullptr /* 6: d128 only */, "fwd wgmma_tma_ws BR128 BC128 pingpong",
                              "fwd wgmma_tma_ws pingpong trap-free", "fwd wgmma_tma_ws pingpong trap-free intra-WG overlap",
                              "fwd wgmma_tma_ws intra-WG overlap 3 stages",
                              nullptr /* 11: d128 only */, "fwd wgmma_tma_ws 3 stages descriptor diet sleeping producer",
                              nullptr /* 13: d128 only */, "fwd wgmma_tma_ws 3 stages descriptor diet interleaved softmax",
                              "fwd wgmma_tma_ws 3 stages diet interleaved softmax quarter exp2 on FMA",
                              "fwd wgmma_tma_ws 3 stages descriptor diet no ping-pong"};
const char* kBwdNames128[] = {"bwd BR64 BC64 8w", "bwd BR64 BC128 8w", "bwd BR64 BC128 8w dQ32x32", "bwd BR64 BC64 4w x2/SM",
                              "bwd wgmma BR64 BC128 2WG", "bwd wgmma DIAG dS K-major (no tnspA)",
                              "bwd wgmma BR64 BC128 2WG early dV", "bwd wgmma BR64 BC128 2WG early dV dQ-TMA-reduce",
                              "bwd wgmma_tma_ws BR64 BC128 producer warp dQ-TMA-reduce",
                              "bwd wgmma_tma_ws producer warp instruction diet",
                              "bwd wgmma_tma_ws instruction diet dQ before dK",
                              "bwd wgmma_tma_ws dQ before dK conflict-free dQ staging",
                              "bwd wgmma_tma_ws conflict-free dQ staging sleeping loader and dQ writer",
                              "bwd wgmma_tma_ws BR80 dQ^T (FA3 full-mask tile) sleeping loader and dQ writer",
                              "bwd wgmma_tma_ws BR80 dQ^T lse/D loaded before the stage wait",
                              "bwd wgmma_tma_ws BR64 lse/D loaded before the stage wait",
                              "bwd wgmma_tma_ws BR80 dQ^T lse/D early launched head by head",
                              "bwd BR64 BC128 8w dQ32x32 launched head by head",
                              "bwd wgmma BR64 BC128 2WG early dV launched head by head"};
const char* kBwdNames64[] = {"bwd BR64 BC64 8w", "bwd BR64 BC128 8w", "bwd BR64 BC128 8w dQ32x32", "bwd BR64 BC64 4w x2/SM",
                             "bwd wgmma BR64 BC128 2WG", "bwd wgmma DIAG dS K-major (no tnspA)",
                              "bwd wgmma BR64 BC128 2WG early dV", "bwd wgmma BR64 BC128 2WG early dV dQ-TMA-reduce",
                              "bwd wgmma_tma_ws BR64 BC128 producer warp dQ-TMA-reduce",
                              "bwd wgmma_tma_ws producer warp instruction diet",
                              "bwd wgmma_tma_ws instruction diet dQ before dK",
                              "bwd wgmma_tma_ws dQ before dK conflict-free dQ staging",
                              "bwd wgmma_tma_ws conflict-free dQ staging sleeping loader and dQ writer",
                              nullptr /* 13: d128 only */, nullptr /* 14: d128 only */,
                              "bwd wgmma_tma_ws BR64 lse/D loaded before the stage wait"};
template <size_t N> const char* pick(const char* (&a)[N], int v) { return v >= 0 && v < (int)N ? a[v] : nullptr; }
}  // namespace

const char* flash_fwd_variant_name(int d, int v) { return d == 128 ? pick(kFwdNames128, v) : pick(kFwdNames64, v); }
const char* flash_bwd_variant_name(int d, int v) { return d == 128 ? pick(kBwdNames128, v) : pick(kBwdNames64, v); }

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

// One warp per (row, head).
__global__ void rowsum_kernel(int rows, int d, const __nv_bfloat16* dout, const float* o, float* D) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (w >= rows) return;
  const __nv_bfloat16* a = dout + w * d;
  const float* b = o + w * d;
  float acc = 0.f;
  for (int e = lane * 2; e < d; e += 64) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(a + e));
    const float2 y = *reinterpret_cast<const float2*>(b + e);
    acc += x.x * y.x + x.y * y.y;
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) D[w] = acc;
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

cudaError_t flash_forward(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                          const Mask& mask, float scale, float* o_f32, __nv_bfloat16* o_bf16, float* lse,
                          void* workspace, cudaStream_t st, FwdConfig cfg) {
  if (!shape_ok(s) || !lse || (!o_f32 && !o_bf16)) return cudaErrorInvalidValue;
  if (!aligned(q, 16) || !aligned(k, 16) || !aligned(v, 16) || !aligned(o_f32, 8) || !aligned(o_bf16, 4) ||
      !aligned(lse, 4))
    return cudaErrorMisalignedAddress;
  if (s.sq == 0) return cudaSuccess;
  // sk == 0 runs the kernel too: no key tile, so every row gets O = 0, lse = -inf.
  cudaError_t e = dev::prepare_mask(s, mask, workspace, st);
  if (e != cudaSuccess) return e;
  dev::FwdParams p;
  p.q = q, p.k = k, p.v = v, p.o_f32 = o_f32, p.o_bf16 = o_bf16, p.lse = lse;
  p.sq = s.sq, p.sk = s.sk, p.n = s.n, p.nkv = s.n_kv, p.group = s.n / s.n_kv;
  p.scale_log2 = scale * 1.4426950408889634f;
  p.mask = dev::make_mask_dev(mask, workspace, s.sq, s.sk);
  return s.d == 128 ? dev::fwd_d128(p, cfg.variant, st) : dev::fwd_d64(p, cfg.variant, st);
}

cudaError_t flash_backward(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                           const __nv_bfloat16* dout, const float* lse, const float* D, const Mask& mask, float scale,
                           float* dq, float* dk, float* dv, bool accumulate_dq, bool accumulate_dkdv, void* workspace,
                           cudaStream_t st, BwdConfig cfg) {
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
  p.diag_no_dq = cfg.diag_no_dq;
  p.mask = dev::make_mask_dev(mask, workspace, s.sq, s.sk);
  return s.d == 128 ? dev::bwd_d128(p, cfg.variant, st) : dev::bwd_d64(p, cfg.variant, st);
}

cudaError_t flash_rowsum(int sq, int n, int d, const __nv_bfloat16* dout, const float* o, float* D, cudaStream_t st) {
  const long long rows = (long long)sq * n;
  if (rows == 0) return cudaSuccess;
  dev::rowsum_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, st>>>((int)rows, d, dout, o, D);
  return cudaGetLastError();
}

}  // namespace burst_fa

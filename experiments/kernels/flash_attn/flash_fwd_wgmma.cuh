// Forward kernel on Hopper warpgroup MMA (wgmma.mma_async, sm_90a only; bf16
// in, fp32 accumulate). Same contract and mask handling as flash_fwd.cuh.
//
// One block of 2 warpgroups (256 threads) per (query head, query tile of 128
// rows); warpgroup w owns rows [64 w, 64 w + 64). K and V tiles of BC rows
// stream through a two-stage cp.async ring into shared memory in the
// canonical 128-byte-swizzled layout that wgmma reads (see sw128 below).
//   S = Q K^T   : wgmma m64nBCk16, A = Q and B = K from shared memory, both
//                 K-major (d contiguous), D/16 instructions per tile.
//   O += P V    : wgmma m64nDk16, A = P from registers (the accumulator
//                 fragment of S re-packed to bf16, same layout as mma.sync's A),
//                 B = V from shared memory, MN-major (d contiguous) with the
//                 transpose flag, BC/16 instructions per tile.
// The online softmax runs on the accumulator fragment in registers (log2
// units, one FFMA + ex2 per score), exactly as in flash_fwd.cuh.
//
// PIPE = false: per tile, S; wait; softmax; P V; wait (no overlap inside a
// warpgroup: only the other warpgroup and the cp.async of the next tile run
// alongside).
// PIPE = true (FlashAttention-3's intra-warpgroup overlap): per tile j, issue
// S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back, wait for S_j only,
// do the softmax of S_j while P_{j-1} V_{j-1} runs on the tensor cores, then
// wait for it and rescale O. V_j therefore arrives one iteration after K_j:
// iteration j loads K_{j+1} and V_j.
#pragma once

#include "flash_fwd.cuh"
#include "flash_wgmma_ops.cuh"

#include <type_traits>

namespace burst_fa {
namespace dev {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ordinary (generic-proxy) shared-memory writes, cp.async included, made
// visible to the async proxy that wgmma reads through.
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keep the compiler from moving accesses of wgmma operand registers across
// the issue / wait points.
template <int N> __device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void reg_fence(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(r[i][e])::"memory");
}

// The canonical 128-byte-swizzle layout of a ROWS x D bf16 tile: D/64 column
// blocks of ROWS x 64 (128-byte rows; block b at b * ROWS * 128 bytes), the
// 16-byte chunk c of row r at chunk c ^ (r & 7). With every block 1024-byte
// aligned this is what the hardware's 128B swizzle expects (it XORs address
// bits [4,7) with bits [7,10)), for K-major operands (rows = M/N, 8-row
// groups 1024 bytes apart) and for MN-major ones (rows = K) alike.
template <int ROWS> __device__ __forceinline__ int sw128(int r, int c) {
  return (c >> 6) * ROWS * 64 + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
}

// Rows [row0, row0 + ROWS) of a [rows_total, heads, D] bf16 tensor (head
// `head`) into an sw128 tile by 16-byte cp.async; rows past rows_total are
// zero-filled (so masked columns multiply zeros of V, never stale data).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_sw128(__nv_bfloat16* smem, const __nv_bfloat16* g, int row0, int rows_total,
                                                int heads, int head, int tid) {
  constexpr int CH = D / 8;
  constexpr int TOTAL = ROWS * CH;
  static_assert(TOTAL % NT == 0, "tile chunks must divide by the thread count");
#pragma unroll
  for (int it = 0; it < TOTAL / NT; ++it) {
    const int c = tid + it * NT;
    const int r = c / CH, ch = c % CH;
    const int row = row0 + r;
    const bool valid = row < rows_total;
    const __nv_bfloat16* src = g + ((size_t)(valid ? row : 0) * heads + head) * D + ch * 8;
    cp_async16(smem_u32(smem + sw128<ROWS>(r, ch * 8)), src, valid);
  }
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading
// and stride byte offsets (all >> 4), layout type 1 (128B) in bits [62,64).
// K-major: the leading offset is unused (the k16 step stays inside one
// 128-byte row), stride = 1024 (8-row groups). MN-major: leading = distance
// between 64-element column blocks, stride = 1024 (8-row groups along K).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = (uint64_t)((saddr >> 4) & 0x3FFF);
  d |= (uint64_t)((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= (uint64_t)((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= (uint64_t)1 << 62;
  return d;
}

template <int D, int BC, bool PIPE> struct WgTraits {
  static constexpr int BR = 128, NT = 256;
  // Q, K[2], V[2], plus 1 KB to align the base to 1024 bytes.
  static constexpr size_t smem_bytes = size_t(BR * D + 4 * BC * D) * sizeof(__nv_bfloat16) + 1024;
  static_assert(D == 64 || D == 128, "head dim");
  static_assert(BC == 64 || BC == 128, "key tile (wgmma N) must be 64 or 128 here");
};

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (N == 176) wgmma_ss_m64n176(d, da, db, scale_d);
  else if constexpr (N == 128) wgmma_ss_m64n128(d, da, db, scale_d);
  else if constexpr (N == 80) wgmma_ss_m64n80(d, da, db, scale_d);
  else wgmma_ss_m64n64(d, da, db, scale_d);
}
template <int N>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, int scale_d) {
  if constexpr (N == 128) wgmma_rs_m64n128_tb(d, a, db, scale_d);
  else wgmma_rs_m64n64_tb(d, a, db, scale_d);
}

// The per-tile math of the wgmma forward, shared by variant 4 (below) and the
// TMA kernel's modes (flash_fwd_tma_ws.cuh). Thread layout
// of the wgmma accumulators: rows g and g + 8 of the warp's 16 (hf = 0, 1),
// columns x * 8 + 2 t + {0, 1} for x < N / 8.
//
// Masks the raw scores of a partial tile (key columns j0 + ...).
template <int BC, bool POS>
__device__ __forceinline__ void tile_mask(float (&s)[BC / 2], const MaskDev& mask, int sk, int row0, int j0, int t,
                                          const RowInfo* qinfo) {
#pragma unroll
  for (int x = 0; x < BC / 8; ++x) {
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1) {
      const int j = j0 + x * 8 + 2 * t + e1;
      const RowInfo kinfo = row_info_t<POS>(mask, min(j, sk - 1), false);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = row0 + hf * 8;
        if (j >= sk || !elem_visible_t<POS>(mask, i, j, qinfo[POS ? hf : 0], kinfo)) s[x * 4 + hf * 2 + e1] = -INFINITY;
      }
    }
  }
}
// Online softmax step (log2 units): S -> P in place, m and l updated, alpha
// the factor for the previous O (0 on the first visible tile, m = -inf).
template <int BC>
__device__ __forceinline__ void softmax_step(float (&s)[BC / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = -INFINITY;
#pragma unroll
    for (int x = 0; x < BC / 8; ++x) mx = fmaxf(mx, fmaxf(s[x * 4 + hf * 2], s[x * 4 + hf * 2 + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(m[hf], mx * scale_log2);  // scale > 0
    const float muse = mnew == -INFINITY ? 0.f : mnew;
    alpha[hf] = fast_exp2(m[hf] - muse);
    m[hf] = mnew;
    float rs = 0.f;
#pragma unroll
    for (int x = 0; x < BC / 8; ++x) {
      const float p0 = fast_exp2(fmaf(s[x * 4 + hf * 2], scale_log2, -muse));
      const float p1 = fast_exp2(fmaf(s[x * 4 + hf * 2 + 1], scale_log2, -muse));
      s[x * 4 + hf * 2] = p0, s[x * 4 + hf * 2 + 1] = p1;
      rs += p0 + p1;
    }
    l[hf] = l[hf] * alpha[hf] + rs;
  }
}
// softmax_step with the two rows' work interleaved (forward variant 14): both
// rows' maxima first (two chains per row), then both rows' exponentials
// alternating, each row's sum in two partial accumulators. The same values up
// to the order of the row sum's additions. Why (lab NOTES, "Run 12"):
// softmax_step finishes row 0 before row 1's max is known, so row 1's 32
// exponentials run back to back with only the sum's serial FADD chain beside
// them; the MUFU waits there were 62 K stall samples of the kernel's 736 K
// (cuDNN's forward: 4.4 K).
// 2^x on the FMA and integer pipes (forward variant 15): x rounded to the
// nearest integer j by the 1.5 * 2^23 shift, 2^f for f = x - j in [-0.5, 0.5]
// by a cubic (relative error 1.0e-4, against bf16's 3.9e-3 rounding of P),
// then j added to the exponent field: (bits(x + 1.5 * 2^23) << 23) is
// j << 23, the shift constant's own bits falling off the word. x <= -127
// (masked entries are -inf) gives exactly +0: j = -127, f = 0, p = 1.0.
// Never NaN or negative for x <= 0 (checked over [-30, 0] and the edge
// cases by emulating these float operations in numpy,
// tools/exp2_poly_check.py; lab NOTES, variant 15). Between -127 and -126 it
// returns subnormals that are not 2^x (MUFU's ex2.approx.ftz gives 0 there;
// both < 1.2e-38). A NaN x gives 0 (the clamp), where MUFU passes it on; the
// row max's fmaxf already drops NaN scores in both paths.
__device__ __forceinline__ float exp2_poly(float x) {
  x = fmaxf(x, -127.f);
  const float t = x + 12582912.f;
  const float f = x - (t - 12582912.f);
  float p = fmaf(5.500869080e-02f, f, 2.422106266e-01f);
  p = fmaf(p, f, 6.932829022e-01f);
  p = fmaf(p, f, 1.f);
  return __uint_as_float(__float_as_uint(p) + (__float_as_uint(t) << 23u));  // unsigned: the wrap is defined
}
// POLY > 0 (variant 15): the exponentials of every POLY-th column group (4
// columns of the two rows: 1 / POLY of them) by exp2_poly instead of MUFU,
// so that the MUFU pipe (16 results per clock per SM: 8 cycles per warp
// instruction, 512 cycles of each consumer warp's 64 exponentials per tile)
// shares the work with the FMA pipe, as FlashAttention-4 does on Blackwell.
template <int BC, int POLY = 0>
__device__ __forceinline__ void softmax_step_il(float (&s)[BC / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                float scale_log2) {
  float mx[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
  for (int x = 0; x < BC / 8; ++x) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      mx[hf][x & 1] = fmaxf(mx[hf][x & 1], fmaxf(s[x * 4 + hf * 2], s[x * 4 + hf * 2 + 1]));
  }
  float mr[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) mr[hf] = fmaxf(mx[hf][0], mx[hf][1]);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) mr[hf] = fmaxf(mr[hf], __shfl_xor_sync(0xffffffffu, mr[hf], 1));
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) mr[hf] = fmaxf(mr[hf], __shfl_xor_sync(0xffffffffu, mr[hf], 2));
  float muse[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float mnew = fmaxf(m[hf], mr[hf] * scale_log2);  // scale > 0
    muse[hf] = mnew == -INFINITY ? 0.f : mnew;
    alpha[hf] = fast_exp2(m[hf] - muse[hf]);
    m[hf] = mnew;
  }
  float rs[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
  for (int x = 0; x < BC / 8; ++x) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const float a0 = fmaf(s[x * 4 + hf * 2], scale_log2, -muse[hf]);
      const float a1 = fmaf(s[x * 4 + hf * 2 + 1], scale_log2, -muse[hf]);
      constexpr int kEvery = POLY > 0 ? POLY : 1;
      const bool poly = POLY > 0 && x % kEvery == kEvery - 1;  // static after unrolling
      const float p0 = poly ? exp2_poly(a0) : fast_exp2(a0);
      const float p1 = poly ? exp2_poly(a1) : fast_exp2(a1);
      s[x * 4 + hf * 2] = p0, s[x * 4 + hf * 2 + 1] = p1;
      rs[hf][x & 1] += p0 + p1;
    }
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) l[hf] = l[hf] * alpha[hf] + (rs[hf][0] + rs[hf][1]);
}
// P as wgmma A fragments (the accumulator re-pack of variant 4).
template <int BC> __device__ __forceinline__ void pack_p(const float (&s)[BC / 2], uint32_t (&pf)[BC / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BC / 16; ++kk) {
    pf[kk][0] = pack_bf16(s[(2 * kk) * 4 + 0], s[(2 * kk) * 4 + 1]);
    pf[kk][1] = pack_bf16(s[(2 * kk) * 4 + 2], s[(2 * kk) * 4 + 3]);
    pf[kk][2] = pack_bf16(s[(2 * kk + 1) * 4 + 0], s[(2 * kk + 1) * 4 + 1]);
    pf[kk][3] = pack_bf16(s[(2 * kk + 1) * 4 + 2], s[(2 * kk + 1) * 4 + 3]);
  }
}
template <int D> __device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int x = 0; x < D / 8; ++x) {
    o[x * 4 + 0] *= alpha[0], o[x * 4 + 1] *= alpha[0];
    o[x * 4 + 2] *= alpha[1], o[x * 4 + 3] *= alpha[1];
  }
}
// The epilogue shared by the wgmma forwards (variants 4, 7-17): O / l, lse =
// (m + log2 l) ln 2 for this thread's rows row0 and row0 + 8 of head h (l
// summed over the quad first); rows past sq write nothing, an empty row O = 0
// and lse = -inf. With p.merge, merged into the running (O, lse) instead
// (an empty row leaves them as they are). MERGE = false compiles the merge
// out of the TMA kernels' plain forward (flash_fwd_tma_ws.cuh), and p.merge
// must be 0 there. ptxas 13.0, variant 17's spill stores / loads: 44 / 76 B
// without the branch, 44 / 96 with it; since the launch in sections of heads
// 8 / 16 B without, 12 / 20 with.
template <int D, bool MERGE = true>
__device__ __forceinline__ void write_o_lse(const FwdParams& p, const float (&o)[D / 2], const float (&m)[2],
                                            const float (&l)[2], int row0, int h, int t) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float lsum = l[hf];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
    const int i = row0 + hf * 8;
    const bool merge = MERGE && p.merge;
    const float lold = merge ? fwd_merge_lse_old(p, i, h, t) : -INFINITY;
    if (i >= p.sq) continue;
    const bool empty = !(lsum > 0.f);
    if (merge && empty) continue;  // no key seen: the running (O, lse) stay
    const size_t rowbase = ((size_t)i * p.n + h) * D + 2 * t;
    if (merge) {
      // Every load of the running O before any store: one memory round trip
      // per row, not one per vector (interleaved, a store could alias the
      // next load for all the compiler knows, and each load waited alone:
      // the ring step 34% slower than a partial + merge pass on an H100).
      float2 old[D / 8];
#pragma unroll
      for (int x = 0; x < D / 8; ++x) old[x] = *reinterpret_cast<const float2*>(p.o_f32 + rowbase + x * 8);
      float ca, cb, lse_out;
      fwd_merge_weights(lold, (m[hf] + log2f(lsum)) * 0.69314718055994531f, lsum, ca, cb, lse_out);
#pragma unroll
      for (int x = 0; x < D / 8; ++x)
        *reinterpret_cast<float2*>(p.o_f32 + rowbase + x * 8) =
            make_float2(ca * old[x].x + cb * o[x * 4 + hf * 2], ca * old[x].y + cb * o[x * 4 + hf * 2 + 1]);
      if (t == 0) p.lse[(size_t)i * p.n + h] = lse_out;
      continue;
    }
    const float inv = empty ? 0.f : 1.f / lsum;
#pragma unroll
    for (int x = 0; x < D / 8; ++x) {
      const float v0 = o[x * 4 + hf * 2] * inv, v1 = o[x * 4 + hf * 2 + 1] * inv;
      if (p.o_f32) *reinterpret_cast<float2*>(p.o_f32 + rowbase + x * 8) = make_float2(v0, v1);
      if (p.o_bf16) *reinterpret_cast<__nv_bfloat162*>(p.o_bf16 + rowbase + x * 8) = __floats2bfloat162_rn(v0, v1);
    }
    if (t == 0) p.lse[(size_t)i * p.n + h] = empty ? -INFINITY : (m[hf] + log2f(lsum)) * 0.69314718055994531f;
  }
}
// S = Q K^T (SS wgmma, swizzled tiles at qa, ka), issued, not committed.
// desc(base + off) = desc(base) + off / 16 while the 14-bit address field
// cannot carry (every operand lies inside the block's 227 KB of shared
// memory, so (base + off) / 16 < 2^14): a 32-bit add on the low word, the
// high word (stride offset, layout type) reused as it is.
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t off) {
  return ((d >> 32) << 32) | (uint32_t)((uint32_t)d + (off >> 4));
}
// S = Q K^T (SS wgmma), issued, not committed. DIET (forward variant 12):
// one base descriptor per operand, then a constant add per k-step, instead
// of the shift / mask / or of sw128_desc per k-step (the profile of variant
// 10: ULOP3 + USHF ~56 uniform instructions per tile and warp, none in
// cuDNN's forward).
template <int D, int BC, int BR, bool DIET = false>
__device__ __forceinline__ void issue_qk(float (&s)[BC / 2], uint32_t qa, uint32_t ka) {
  const uint64_t dq = sw128_desc(qa, 16, 1024), dk = sw128_desc(ka, 16, 1024);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t qoff = (ks / 4) * BR * 128 + (ks % 4) * 32, koff = (ks / 4) * BC * 128 + (ks % 4) * 32;
    if constexpr (DIET) {
      wgmma_ss<BC>(s, desc_add(dq, qoff), desc_add(dk, koff), ks > 0 ? 1 : 0);
    } else {
      wgmma_ss<BC>(s, sw128_desc(qa + qoff, 16, 1024), sw128_desc(ka + koff, 16, 1024), ks > 0 ? 1 : 0);
    }
  }
}
// O += P V (RS wgmma; V MN-major, settled by run 3), issued, not committed.
template <int D, int BC, bool DIET = false>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], uint32_t (&pf)[BC / 16][4], uint32_t va) {
  constexpr uint32_t V_LBO = BC * 128, V_SBO = 1024;
  const uint64_t dv = sw128_desc(va, V_LBO, V_SBO);
#pragma unroll
  for (int kk = 0; kk < BC / 16; ++kk) {
    if constexpr (DIET) wgmma_rs_tb<D>(o, pf[kk], desc_add(dv, kk * 16 * 128), 1);
    else wgmma_rs_tb<D>(o, pf[kk], sw128_desc(va + kk * 16 * 128, V_LBO, V_SBO), 1);
  }
}

// VSWAP (diagnostic only): V's descriptor with the leading and stride byte
// offsets exchanged, in case the MN-major reading above is the wrong way
// round; whichever of variants 5 / 6 passes the check settles it.
template <int D, int BC, bool PIPE, bool POS, bool VSWAP = false>
__global__ void __launch_bounds__(256, 1) flash_fwd_wgmma_kernel(const FwdParams p) {
  using Tr = WgTraits<D, BC, PIPE>;
  constexpr int BR = Tr::BR, NT = Tr::NT;
  extern __shared__ __align__(1024) unsigned char wg_smem_raw[];
  const uint32_t raw_u32 = smem_u32(wg_smem_raw);
  unsigned char* base = wg_smem_raw + (((raw_u32 + 1023u) & ~1023u) - raw_u32);
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(base);
  __nv_bfloat16* Ks = Qs + BR * D;      // [2][BC*D]
  __nv_bfloat16* Vs = Ks + 2 * BC * D;  // [2][BC*D]

  const int h = blockIdx.z * gridDim.x + blockIdx.x;  // launch_tile_sections' grid
  if (h >= p.n) return;                                 // past the last section's heads
  const int qt = p.tile0 + gridDim.y - 1 - blockIdx.y;  // the longest (causal) tiles first
  const int hk = h / p.group;
  const int tid = threadIdx.x, wg = tid / 128, wtid = tid % 128;
  const int lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int wrow = wg * 64 + (wtid / 32) * 16;  // this warp's first row in the block's tile
  const int i0 = qt * BR, i1 = min(i0 + BR, p.sq);
  const MaskDev& mask = p.mask;

  const int nkt = (p.sk + BC - 1) / BC;
  int kt_end = nkt;
  if (mask.kind == kMaskCausal) {
    const long long last = (long long)(i1 - 1) + mask.diag_offset;
    kt_end = last < 0 ? 0 : (int)(last / BC + 1 < nkt ? last / BC + 1 : nkt);
  }
  auto tile_cls = [&](int kt) {
    const int j0 = kt * BC;
    return classify_tile(mask, i0, i1, j0, min(j0 + BC, p.sk), j0 + BC > p.sk);
  };
  auto next_tile = [&](int kt) {
    while (kt < kt_end && tile_cls(kt) == 0) ++kt;
    return kt;
  };

  // Prologue: Q and the first K (and V, unless PIPE: then V_j comes with K_{j+1}).
  load_tile_sw128<BR, D, NT>(Qs, p.q, i0, p.sq, p.n, h, tid);
  int cur = next_tile(0);
  if (cur < kt_end) {
    load_tile_sw128<BC, D, NT>(Ks, p.k, cur * BC, p.sk, p.nkv, hk, tid);
    if constexpr (!PIPE) load_tile_sw128<BC, D, NT>(Vs, p.v, cur * BC, p.sk, p.nkv, hk, tid);
  }
  cp_async_commit();

  RowInfo qinfo[POS ? 2 : 1];
  if constexpr (POS) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) qinfo[hf] = row_info(mask, min(i0 + wrow + g + hf * 8, p.sq - 1), true);
  }

  float o[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x) o[x] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t pf[BC / 16][4];  // P of the previous tile (PIPE) / this tile, as wgmma A fragments

  const uint32_t q_base = smem_u32(Qs) + wg * 64 * 128;
  const uint32_t k_base = smem_u32(Ks), v_base = smem_u32(Vs);
  constexpr uint32_t KV_STAGE = BC * D * 2;  // bytes
  constexpr uint32_t V_LBO = VSWAP ? 1024 : BC * 128, V_SBO = VSWAP ? BC * 128 : 1024;

  int it = 0;  // iteration count: K_j (and V_j) live in stage j & 1
  // One key tile. FIRST (peeled, so that every wgmma issue below is
  // unconditional, which ptxas needs to keep the pipeline stages async):
  // O is still zero (no rescale) and, PIPE, there is no pending P V.
  auto step = [&](auto first_c) {
    constexpr bool FIRST = decltype(first_c)::value;
    const int nxt = next_tile(cur + 1);
    const int st = it & 1;
    if (nxt < kt_end) load_tile_sw128<BC, D, NT>(Ks + (st ^ 1) * BC * D, p.k, nxt * BC, p.sk, p.nkv, hk, tid);
    if constexpr (PIPE) load_tile_sw128<BC, D, NT>(Vs + st * BC * D, p.v, cur * BC, p.sk, p.nkv, hk, tid);
    else if (nxt < kt_end) load_tile_sw128<BC, D, NT>(Vs + (st ^ 1) * BC * D, p.v, nxt * BC, p.sk, p.nkv, hk, tid);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the group just issued
    fence_proxy_async_smem();
    __syncthreads();

    const int j0 = cur * BC;
    const int cls = tile_cls(cur);

    // ---- S = Q K^T (and, PIPE, O += P_prev V_prev behind it)
    float s[BC / 2];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint64_t da = sw128_desc(q_base + (ks / 4) * BR * 128 + (ks % 4) * 32, 16, 1024);
      const uint64_t db = sw128_desc(k_base + st * KV_STAGE + (ks / 4) * BC * 128 + (ks % 4) * 32, 16, 1024);
      wgmma_ss<BC>(s, da, db, ks > 0 ? 1 : 0);
    }
    wgmma_commit();
    if constexpr (PIPE && !FIRST) {
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        const uint64_t db = sw128_desc(v_base + (st ^ 1) * KV_STAGE + kk * 16 * 128, V_LBO, V_SBO);
        wgmma_rs_tb<D>(o, pf[kk], db, 1);
      }
      wgmma_commit();
      wgmma_wait<1>();  // S done; P_prev V_prev may still run
    } else {
      wgmma_wait<0>();
    }
    reg_fence(s);

    // ---- mask (partial tiles only) on the raw scores
    if (cls == 1) tile_mask<BC, POS>(s, mask, p.sk, i0 + wrow + g, j0, t, qinfo);

    // ---- online softmax (log2 units)
    float alpha[2];
    softmax_step<BC>(s, m, l, alpha, p.scale_log2);
    if constexpr (PIPE && !FIRST) {
      wgmma_wait<0>();  // P_prev V_prev done: O and pf are free
      reg_fence(o);
      reg_fence(pf);
    }
    if constexpr (!FIRST) rescale_o<D>(o, alpha);
    pack_p<BC>(s, pf);

    if constexpr (!PIPE) {
      // ---- O += P V
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        const uint64_t db = sw128_desc(v_base + st * KV_STAGE + kk * 16 * 128, V_LBO, V_SBO);
        wgmma_rs_tb<D>(o, pf[kk], db, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(o);
    }
    __syncthreads();  // both warpgroups are done with this stage before it is refilled
    cur = nxt;
    ++it;
  };

  if (cur < kt_end) {
    step(std::true_type{});
    while (cur < kt_end) step(std::false_type{});
    if constexpr (PIPE) {  // the last tile's P V: its V came with the last iteration's loads
      cp_async_wait<0>();
      fence_proxy_async_smem();
      __syncthreads();
      const int st = (it - 1) & 1;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        const uint64_t db = sw128_desc(v_base + st * KV_STAGE + kk * 16 * 128, V_LBO, V_SBO);
        wgmma_rs_tb<D>(o, pf[kk], db, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(o);
    }
  }
  cp_async_wait<0>();

  // ---- epilogue: O / l, lse = (m + log2 l) ln 2
  write_o_lse<D>(p, o, m, l, i0 + wrow + g, h, t);
}

template <int D, int BC, bool PIPE, bool POS, bool VSWAP>
cudaError_t launch_fwd_wgmma_t(const FwdParams& p, cudaStream_t st) {
  using Tr = WgTraits<D, BC, PIPE>;
  auto kern = flash_fwd_wgmma_kernel<D, BC, PIPE, POS, VSWAP>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const int nt = (p.sq + Tr::BR - 1) / Tr::BR;
  FwdParams pk = p;  // the launch order: fwd_head_section, launch_tile_sections (flash_common.cuh)
  pk.head_sect = fwd_head_section<D>(p, nt);
  return launch_tile_sections(nt, p.n, pk.head_sect, true, [&](dim3 grid, int tile0) {
    pk.tile0 = tile0;
    kern<<<grid, Tr::NT, Tr::smem_bytes, st>>>(pk);
    return cudaGetLastError();
  });
}

template <int D, int BC, bool PIPE, bool VSWAP = false>
cudaError_t launch_fwd_wgmma(const FwdParams& p, cudaStream_t st) {
  return p.mask.kind >= kMaskWindow ? launch_fwd_wgmma_t<D, BC, PIPE, true, VSWAP>(p, st)
                                    : launch_fwd_wgmma_t<D, BC, PIPE, false, VSWAP>(p, st);
}

}  // namespace dev
}  // namespace burst_fa

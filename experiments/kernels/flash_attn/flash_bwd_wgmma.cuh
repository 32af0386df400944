// Backward kernel on Hopper warpgroup MMA (wgmma.mma_async, sm_90a only; bf16
// in, fp32 accumulate). Same contract, mask handling and launch order as
// flash_bwd.cuh (one block per (key tile, kv head); dK, dV in registers over
// the group's query heads and every visible query tile, written once; dQ by
// fp32 red.global.add).
//
// One block = 2 warpgroups (256 threads) per BC = 128 keys; warpgroup w owns
// keys [64 w, 64 w + 64) of the tile. Query tiles of BR = 64 rows (Q, dO, lse,
// D) stream through a two-stage cp.async ring; K and V stay in shared memory.
// Every tile is in the canonical 128-byte-swizzled layout (sw128, see
// flash_fwd_wgmma.cuh). Per query tile, per warpgroup (its 64 keys):
//   S^T  = K Q^T      wgmma m64n64k16 SS, A = K, B = Q, both K-major (d contiguous)
//   dP^T = V dO^T     the same with V, dO
//   P^T  = exp2(S^T scale log2e - lse log2e)   (lse per column: per query)
//   dS^T = P^T (dP^T - D)                      (D per column)
// P^T and dS^T live in the accumulator fragments in key-major order, which
// is exactly the register A operand of
//   dV  += P^T  dO    wgmma m64nDk16 RS, B = dO [BR][D] MN-major (transpose flag)
//   dK  += dS^T Q     the same with Q
// dS^T also goes to shared memory (bf16, [BC keys][BR queries], query
// contiguous: the accumulator's natural order, 4-byte stores) for
//   dQ  += dS K       wgmma m64n64k16 SS, A = dS from that tile, MN-major
//                     (transpose flag: stored [K = keys][M = queries]),
//                     B = K [BC][D] MN-major (transpose flag).
// D = 128: warpgroup w computes dQ columns [64 w, 64 w + 64) over all 128
// keys; D = 64: warpgroup w computes all 64 columns over its own 64 keys
// (both add into dQ: twice the atomics, no extra barrier).
// DS_KMAJOR (diagnostic): dS stored [BR][BC] key-contiguous (2-byte
// transposed stores) and read as a K-major A without the transpose flag, the
// layout the forward verified; if only the default's dQ fails, the
// transposed-A descriptor is the culprit.
// EARLY_DV (performance variant): dV += P^T dO is issued as soon as P^T is
// packed, before waiting for dP^T, so it runs on the tensor cores during the
// dS^T elementwise work and the dS^T stores (wait_group 1 then retires dP^T
// only); dK and dQ follow as before.
// DQ_TMA (variant 7, with EARLY_DV): dQ leaves the block through shared memory
// instead of per-thread red.global.add: each warpgroup writes its scaled fp32
// 64 x 64 dQ partial into a double-buffered staging tile (two 64 x 32 boxes
// in the 128-byte-swizzle layout the tensor map names) and fences the async
// proxy; after the item's last block barrier one elected thread (lane 0 of
// warp 7) issues four `cp.reduce.async.bulk.tensor.3d ... .add` into dQ
// [sq, n, D] through a CUtensorMap (box 32 cols x 1 head x 64 rows; rows past
// sq are clipped by the copy engine), commits the bulk group and waits (.read)
// for the previous item's group, whose staging buffer the next item writes.
// Warp 7 issues no cp.async (the other 7 warps load Q, dO, K, V): in SASS the
// cp.async and the bulk groups are both waited for with DEPBAR.LE SB0 (one
// shared counter, it appears), so a cp.async.wait_group in the issuing warp
// would also wait for the reduce-add it issued at the end of the last item.
#pragma once

#include "flash_bwd.cuh"
#include "flash_fwd_wgmma.cuh"
#include "flash_tma.cuh"

#include <cstring>

namespace burst_fa {
namespace dev {

// Bulk-async (copy engine) helpers for the dQ reduce-add (DQ_TMA).
// dQ[c2][c1][c0 ..] += the box at src (shared, 1024-aligned, the map's swizzle); coordinates innermost first.
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// At most N of this thread's bulk groups still reading their shared-memory source.
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// At most N of this thread's bulk groups not yet complete (writes performed).
template <int N> __device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// load_tile_sw128 over the first NLOAD threads (any count; the last round partial).
template <int ROWS, int D, int NLOAD>
__device__ __forceinline__ void load_tile_sw128_n(__nv_bfloat16* smem, const __nv_bfloat16* g, int row0, int rows_total,
                                                  int heads, int head, int tid) {
  constexpr int CH = D / 8;
  constexpr int TOTAL = ROWS * CH;
#pragma unroll
  for (int it = 0; it < (TOTAL + NLOAD - 1) / NLOAD; ++it) {
    const int c = tid + it * NLOAD;  // tid < NLOAD
    if ((it + 1) * NLOAD > TOTAL && c >= TOTAL) break;  // only the last round can run past the tile
    const int r = c / CH, ch = c % CH;
    const int row = row0 + r;
    const bool valid = row < rows_total;
    const __nv_bfloat16* src = g + ((size_t)(valid ? row : 0) * heads + head) * D + ch * 8;
    cp_async16(smem_u32(smem + sw128<ROWS>(r, ch * 8)), src, valid);
  }
}

// P^T = exp2(S^T scale log2 e - lse log2 e) in place of S^T (this thread's accumulator fragments of the
// warpgroup's 64 keys x NSX * 8 queries; lse per column = per query, read from Lb, natural log; a row with
// no visible key, lse = -inf, gives P = 0), masked per element on partial tiles (cls == 1). The lse test
// and the mask's bookkeeping run for every tile: the backward's per-tile softmax of variants 4-8
// (flash_bwd_tma_ws.cuh's instruction diet, variants 9-10, moves both off the full tiles' path).
template <bool POS, int N>
__device__ __forceinline__ void bwd_p_from_s(float (&s)[N], const float* Lb, int t, int i0, int cls, const BwdParams& p,
                                             const MaskDev& mask, const int (&jrow)[2],
                                             const RowInfo (&kinfo)[POS ? 2 : 1]) {
  constexpr int NSX = N / 4;
#pragma unroll
  for (int x = 0; x < NSX; ++x) {
    const float2 l2 = *reinterpret_cast<const float2*>(Lb + x * 8 + 2 * t);
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1) {
      const float lse_c = e1 ? l2.y : l2.x;
      const float L = lse_c == -INFINITY ? INFINITY : lse_c * 1.4426950408889634f;  // empty row: P = 0
      const int i = i0 + x * 8 + 2 * t + e1;
      RowInfo qinfo{0, 0};
      if (POS && cls == 1) qinfo = row_info_t<POS>(mask, min(i, p.sq - 1), true);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float pe = fast_exp2(fmaf(s[x * 4 + hf * 2 + e1], p.scale_log2, -L));
        if (cls == 1) {
          const int j = jrow[hf];
          if (j >= p.sk || !elem_visible_t<POS>(mask, i, j, qinfo, kinfo[POS ? hf : 0])) pe = 0.f;
        }
        s[x * 4 + hf * 2 + e1] = pe;
      }
    }
  }
}

// dS^T (fp32, in the wgmma accumulator layout of a 64-key x BR-query tile) packed as the bf16 A fragments of
// the dK product: fragment kk holds query columns 16 kk .. 16 kk + 15.
template <int NF, int N>
__device__ __forceinline__ void pack_ds_frags(uint32_t (&sf)[NF][4], const float (&dp)[N]) {
  static_assert(N >= 8 * NF, "pack_ds_frags: NF fragments read 8 NF accumulator values");
#pragma unroll
  for (int kk = 0; kk < NF; ++kk) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int x = 2 * kk + (e >> 1), hf = e & 1;
      sf[kk][e] = pack_bf16(dp[x * 4 + hf * 2], dp[x * 4 + hf * 2 + 1]);
    }
  }
}
// Those fragments into the [BC keys][BR queries] sw128 tile dSs (the dQ product's A operand, transposed):
// this thread's keys wrow + g (+ 8), queries 8 x + 2 t (+ 1). Conflict-free: the 8 rows g of a warp hit the
// 8 chunks (x ^ g) of a 128-byte row.
template <int BC, int NF>
__device__ __forceinline__ void store_ds_t(__nv_bfloat16* dSs, const uint32_t (&sf)[NF][4], int wrow, int g, int t) {
#pragma unroll
  for (int kk = 0; kk < NF; ++kk) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int x = 2 * kk + (e >> 1), hf = e & 1;
      const int r = wrow + g + hf * 8, c = x * 8 + 2 * t;  // key, query in the tile
      *reinterpret_cast<uint32_t*>(dSs + sw128<BC>(r, c)) = sf[kk][e];
    }
  }
}
// One warpgroup's BR x 64 fp32 dQ partial (wgmma accumulator layout), scaled, into its staging tile stg for
// the bulk tensor reduce-add: box x >> 2 (columns 32 (x >> 2) ..) row r at (x >> 2) * BR * 128 + r * 128
// bytes, its 16-byte chunk c at c ^ (r & 7) (the tensor map's 128B swizzle; r & 7 == g for this thread's
// rows). SWZ (backward variant 11): lanes of odd g store column x ^ 2 at step x, so that each 16-lane
// phase of the 64-bit stores hits 8 distinct chunks (one wavefront, not two: tools/dq_staging_banks.py).
template <int BR, bool SWZ>
__device__ __forceinline__ void stage_dq(unsigned char* stg, const float (&dq)[32], float scale, int wtid, int g, int t) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = (wtid / 32) * 16 + g + hf * 8;
#pragma unroll
    for (int x = 0; x < 8; ++x) {
      if constexpr (!SWZ) {
        const int off = (x >> 2) * (BR * 128) + r * 128 + ((((x & 3) * 2 + (t >> 1)) ^ g) << 4) + (t & 1) * 8;
        *reinterpret_cast<float2*>(stg + off) = make_float2(scale * dq[x * 4 + hf * 2], scale * dq[x * 4 + hf * 2 + 1]);
      } else {
        const bool odd = (g & 1) != 0;
        const int xs = x ^ (odd ? 2 : 0);  // the column this lane stores at step x (selects, not a lane-dependent index)
        const float v0 = odd ? dq[(x ^ 2) * 4 + hf * 2] : dq[x * 4 + hf * 2];
        const float v1 = odd ? dq[(x ^ 2) * 4 + hf * 2 + 1] : dq[x * 4 + hf * 2 + 1];
        const int off = (xs >> 2) * (BR * 128) + r * 128 + ((((xs & 3) * 2 + (t >> 1)) ^ g) << 4) + (t & 1) * 8;
        *reinterpret_cast<float2*>(stg + off) = make_float2(scale * v0, scale * v1);
      }
    }
  }
}

template <int D, bool DQ_TMA = false> struct WgBwdTraits {
  static constexpr int BR = 64, BC = 128, NT = 256;
  // dQ staging (DQ_TMA): 2 buffers x 2 warpgroups x (BR x 64) fp32, each as two 1024-aligned BR x 32 boxes.
  static constexpr size_t dq_stage_bytes = DQ_TMA ? size_t(2 * 2 * BR * 64) * sizeof(float) : 0;
  // K, V, Q[2], dO[2], dS, then lse[2][BR], D[2][BR] (1 KB, so the dQ staging stays 1024-aligned),
  // then the dQ staging; +1 KB to align the base.
  static constexpr size_t smem_bytes =
      size_t(2 * BC * D + 4 * BR * D + BC * BR) * sizeof(__nv_bfloat16) + 4 * BR * sizeof(float) + dq_stage_bytes + 1024;
};

template <int D, bool POS, bool DS_KMAJOR, bool EARLY_DV, bool DQ_TMA>
__global__ void __launch_bounds__(256, 1)
    flash_bwd_wgmma_kernel(const BwdParams p, const __grid_constant__ CUtensorMap dq_map) {
  using Tr = WgBwdTraits<D, DQ_TMA>;
  constexpr int BR = Tr::BR, BC = Tr::BC, NT = Tr::NT;
  constexpr int NSX = BR / 8;  // n8 column groups of S^T per thread
  constexpr int NKX = D / 8;   // n8 column groups of dK / dV
  extern __shared__ __align__(1024) unsigned char wgb_smem_raw[];
  const uint32_t raw_u32 = smem_u32(wgb_smem_raw);
  unsigned char* base = wgb_smem_raw + (((raw_u32 + 1023u) & ~1023u) - raw_u32);
  __nv_bfloat16* Ks = reinterpret_cast<__nv_bfloat16*>(base);
  __nv_bfloat16* Vs = Ks + BC * D;
  __nv_bfloat16* Qs = Vs + BC * D;       // [2][BR*D]
  __nv_bfloat16* dOs = Qs + 2 * BR * D;  // [2][BR*D]
  __nv_bfloat16* dSs = dOs + 2 * BR * D; // [BC*BR]
  float* Ls = reinterpret_cast<float*>(dSs + BC * BR);  // [2][BR]
  float* Dsm = Ls + 2 * BR;                             // [2][BR]
  unsigned char* dQs = reinterpret_cast<unsigned char*>(Dsm + 2 * BR);  // [2 buffers][2 warpgroups][2 boxes][BR][32] fp32 (DQ_TMA)
  static_assert((size_t(2 * BC * D + 4 * BR * D + BC * BR) * 2 + 4 * BR * 4) % 1024 == 0, "dQ staging must be 1024-aligned");

  const int hk = blockIdx.z * gridDim.x + blockIdx.x;  // launch_tile_sections' grid
  if (hk >= p.nkv) return;                              // past the last section's heads
  const int kt = p.tile0 + blockIdx.y;  // key tile 0 first: the most query tiles under a causal mask
  const int tid = threadIdx.x, wg = tid / 128, wtid = tid % 128;
  const int lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int wrow = wg * 64 + (wtid / 32) * 16;  // this warp's first key row in the tile
  const int j0 = kt * BC, j1 = min(j0 + BC, p.sk);
  const bool col_edge = j0 + BC > p.sk;
  const MaskDev& mask = p.mask;

  const int nqt = (p.sq + BR - 1) / BR;
  const int qt_begin = causal_first_query_tile(mask, j0, BR, nqt);
  const int total = p.group * nqt;
  auto next_item = [&](int idx) {
    while (idx < total) {
      const int qt = idx % nqt;
      if (qt < qt_begin) { idx += qt_begin - qt; continue; }
      const int i0 = qt * BR;
      if (classify_tile(mask, i0, min(i0 + BR, p.sq), j0, j1, col_edge) != 0) return idx;
      ++idx;
    }
    return idx;
  };
  // DQ_TMA: warp 7 issues the dQ reduce-adds and no cp.async (see the top of the file).
  constexpr int NLOAD = DQ_TMA ? NT - 32 : NT;
  const bool loader = !DQ_TMA || tid < NLOAD;  // warp-uniform
  const bool dq_issuer = DQ_TMA && tid == NT - 32;
  auto issue_q = [&](int idx, int b) {
    const int h = hk * p.group + idx / nqt, i0 = (idx % nqt) * BR;
    load_tile_sw128_n<BR, D, NLOAD>(Qs + b * BR * D, p.q, i0, p.sq, p.n, h, tid);
    load_tile_sw128_n<BR, D, NLOAD>(dOs + b * BR * D, p.dout, i0, p.sq, p.n, h, tid);
    // rows past sq: lse = D = 0 with Q = dO = 0, so P = 1 but dS = 0 and dO = 0: nothing added
    if (tid < 2 * BR) {
      const int rr = tid % BR, i = i0 + rr;
      const bool valid = i < p.sq;
      const size_t off = (size_t)(valid ? i : 0) * p.n + h;
      if (tid < BR) cp_async4(smem_u32(Ls + b * BR + rr), p.lse + off, valid);
      else cp_async4(smem_u32(Dsm + b * BR + rr), p.D + off, valid);
    }
  };

  // The key rows of this thread's accumulator fragments (fixed for the block).
  int jrow[2];
  RowInfo kinfo[POS ? 2 : 1];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    jrow[hf] = j0 + wrow + g + hf * 8;
    if constexpr (POS) kinfo[hf] = row_info(mask, min(jrow[hf], p.sk - 1), false);
  }

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x) dk[x] = dv[x] = 0.f;

  int cur = next_item(0);
  if (dq_issuer && cur < total && !p.diag_no_dq) prefetch_tensormap(&dq_map);
  if (loader) {
    if (cur < total) {
      load_tile_sw128_n<BC, D, NLOAD>(Ks, p.k, j0, p.sk, p.nkv, hk, tid);
      load_tile_sw128_n<BC, D, NLOAD>(Vs, p.v, j0, p.sk, p.nkv, hk, tid);
      issue_q(cur, 0);
    }
    cp_async_commit();
  }

  const uint32_t k_base = smem_u32(Ks), v_base = smem_u32(Vs), ds_base = smem_u32(dSs);
  constexpr uint32_t Q_STAGE = BR * D * 2;  // bytes
  // dQ: which n-block of 64 columns (D = 128) or which 64 keys (D = 64) this warpgroup does
  constexpr int NKQ = D == 128 ? BC / 16 : BC / 32;  // k16 steps of the dQ product per warpgroup
  const int kq0 = D == 128 ? 0 : wg * (BC / 32);     // first k16 step (keys / 16)
  const int ncol0 = D == 128 ? wg * 64 : 0;          // first dQ column
  const uint32_t kq_base = k_base + (D == 128 ? wg * BC * 128 : 0);

  int buf = 0;
  while (cur < total) {
    const int nxt = next_item(cur + 1);
    if (loader) {
      if (nxt < total) issue_q(nxt, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();  // everything but the group just issued
    }
    fence_proxy_async_smem();
    __syncthreads();
    const int h = hk * p.group + cur / nqt, i0 = (cur % nqt) * BR;
    const int cls = classify_tile(mask, i0, min(i0 + BR, p.sq), j0, j1, col_edge);
    const uint32_t q_st = smem_u32(Qs) + buf * Q_STAGE, do_st = smem_u32(dOs) + buf * Q_STAGE;
    const float* Lb = Ls + buf * BR;
    const float* Db = Dsm + buf * BR;

    // ---- S^T = K Q^T, dP^T = V dO^T (this warpgroup's 64 keys x BR queries)
    float s[BR / 2], dp[BR / 2];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t koff = (ks / 4) * BC * 128 + wg * 64 * 128 + (ks % 4) * 32;
      const uint32_t qoff = (ks / 4) * BR * 128 + (ks % 4) * 32;
      wgmma_ss<BR>(s, sw128_desc(k_base + koff, 16, 1024), sw128_desc(q_st + qoff, 16, 1024), ks > 0 ? 1 : 0);
    }
    wgmma_commit();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t koff = (ks / 4) * BC * 128 + wg * 64 * 128 + (ks % 4) * 32;
      const uint32_t qoff = (ks / 4) * BR * 128 + (ks % 4) * 32;
      wgmma_ss<BR>(dp, sw128_desc(v_base + koff, 16, 1024), sw128_desc(do_st + qoff, 16, 1024), ks > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait<1>();  // S^T done; dP^T may still run
    reg_fence(s);

    // ---- P^T (in place of S^T), masked on partial tiles
    bwd_p_from_s<POS>(s, Lb, t, i0, cls, p, mask, jrow, kinfo);
    uint32_t pf[BR / 16][4], sf[BR / 16][4];
    auto issue_dv = [&]() {  // dV += P^T dO (register A, dO MN-major with the transpose flag)
#pragma unroll
      for (int kk = 0; kk < BR / 16; ++kk) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int x = 2 * kk + (e >> 1), hf = e & 1;
          pf[kk][e] = pack_bf16(s[x * 4 + hf * 2], s[x * 4 + hf * 2 + 1]);
        }
      }
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BR / 16; ++kk)
        wgmma_rs_tb<D>(dv, pf[kk], sw128_desc(do_st + kk * 16 * 128, BR * 128, 1024), 1);
    };
    if constexpr (EARLY_DV) {  // dV goes to the tensor cores before dP^T is waited for
      issue_dv();
      wgmma_commit();
      wgmma_wait<1>();  // dP^T done (groups retire in order); dV may still run
    } else {
      wgmma_wait<0>();
    }
    reg_fence(dp);
    // ---- dS^T = P^T (dP^T - D) (in place of dP^T)
#pragma unroll
    for (int x = 0; x < NSX; ++x) {
      const float2 d2 = *reinterpret_cast<const float2*>(Db + x * 8 + 2 * t);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        dp[x * 4 + hf * 2] = s[x * 4 + hf * 2] * (dp[x * 4 + hf * 2] - d2.x);
        dp[x * 4 + hf * 2 + 1] = s[x * 4 + hf * 2 + 1] * (dp[x * 4 + hf * 2 + 1] - d2.y);
      }
    }
    pack_ds_frags(sf, dp);
    // ---- dS^T (or dS, DS_KMAJOR) to shared memory for the dQ product
    if constexpr (!DS_KMAJOR) {
      store_ds_t<BC>(dSs, sf, wrow, g, t);
    } else {
#pragma unroll
      for (int kk = 0; kk < BR / 16; ++kk) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int x = 2 * kk + (e >> 1), hf = e & 1;
          const int r = wrow + g + hf * 8, c = x * 8 + 2 * t;  // key, query in the tile
          __nv_bfloat16* d0 = dSs + sw128<BR>(c, r);
          __nv_bfloat16* d1 = dSs + sw128<BR>(c + 1, r);
          *reinterpret_cast<unsigned short*>(d0) = (unsigned short)(sf[kk][e] & 0xFFFFu);
          *reinterpret_cast<unsigned short*>(d1) = (unsigned short)(sf[kk][e] >> 16);
        }
      }
    }
    fence_proxy_async_smem();

    // ---- (dV += P^T dO,) dK += dS^T Q (register A, B MN-major with the transpose flag)
    if constexpr (!EARLY_DV) issue_dv();
    else wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk)
      wgmma_rs_tb<D>(dk, sf[kk], sw128_desc(q_st + kk * 16 * 128, BR * 128, 1024), 1);
    wgmma_commit();

    __syncthreads();  // dS^T of both warpgroups is in shared memory

    // ---- dQ (BR x 64 per warpgroup) = dS K
    float dq[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < NKQ; ++kk) {
      const int kg = kq0 + kk;  // k16 step over the tile's keys
      const uint64_t db = sw128_desc(kq_base + kg * 16 * 128, BC * 128, 1024);
      if constexpr (!DS_KMAJOR) {
        const uint64_t da = sw128_desc(ds_base + kg * 16 * 128, BC * 128, 1024);
        wgmma_ss_m64n64_ta_tb(dq, da, db, kk > 0 ? 1 : 0);
      } else {
        const uint64_t da = sw128_desc(ds_base + (kg / 4) * BR * 128 + (kg % 4) * 32, 16, 1024);
        wgmma_ss_m64n64_tb(dq, da, db, kk > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(dq);
    reg_fence(dk);
    reg_fence(dv);
    reg_fence(pf);
    reg_fence(sf);

    if constexpr (DQ_TMA) {
      if (!p.diag_no_dq) {
        // This warpgroup's staging tile in buffer `buf` (stage_dq's layout). The copy engine last read this
        // buffer two items ago; the issuer waited for that read (.read) before the previous item's
        // top-of-loop barrier.
        stage_dq<BR, false>(dQs + (buf * 2 + wg) * (BR * 64 * 4), dq, p.scale, wtid, g, t);
        fence_proxy_async_smem();  // these generic-proxy writes, visible to the copy engine after the barrier below
      }
    } else if (!p.diag_no_dq) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = i0 + (wtid / 32) * 16 + g + hf * 8;
        if (i >= p.sq) continue;
        float* dst = p.dq + ((size_t)i * p.n + h) * D + ncol0 + 2 * t;
#pragma unroll
        for (int x = 0; x < 8; ++x) red_add_f32x2(dst + x * 8, p.scale * dq[x * 4 + hf * 2], p.scale * dq[x * 4 + hf * 2 + 1]);
      }
    }
    __syncthreads();  // dS and this Q/dO stage are free for the next item (DQ_TMA: and both dQ partials staged)
    if constexpr (DQ_TMA) {
      if (dq_issuer && !p.diag_no_dq) {
        const uint32_t src = smem_u32(dQs + buf * 2 * (BR * 64 * 4));
        const int qh = hk * p.group + cur / nqt, q0 = (cur % nqt) * BR;  // h, i0 (recomputed: not kept live for all)
#pragma unroll
        for (int w = 0; w < 2; ++w) {  // warpgroup w's columns (D = 64: both add all 64 columns)
          const int c0 = D == 128 ? w * 64 : 0;
          tma_reduce_add_3d(&dq_map, src + w * (BR * 64 * 4), c0, qh, q0);  // rows past sq: clipped
          tma_reduce_add_3d(&dq_map, src + w * (BR * 64 * 4) + BR * 128, c0 + 32, qh, q0);
        }
        bulk_commit();
        bulk_wait_read<1>();  // the previous item's group has read buffer buf ^ 1 (the next item's); this one runs on
      }
    }
    cur = nxt;
    buf ^= 1;
  }
  if (loader) cp_async_wait<0>();
  if (dq_issuer) bulk_wait<0>();  // the last reduce-adds done before the block's shared memory goes away

  // ---- write dK (scaled), dV; every key tile writes (zeros where nothing was visible)
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int j = jrow[hf];
    if (j >= p.sk) continue;
    const size_t rb = ((size_t)j * p.nkv + hk) * D + 2 * t;
#pragma unroll
    for (int x = 0; x < NKX; ++x) {
      float2 kv = make_float2(p.scale * dk[x * 4 + hf * 2], p.scale * dk[x * 4 + hf * 2 + 1]);
      float2 vv = make_float2(dv[x * 4 + hf * 2], dv[x * 4 + hf * 2 + 1]);
      float2* pk = reinterpret_cast<float2*>(p.dk + rb + x * 8);
      float2* pv = reinterpret_cast<float2*>(p.dv + rb + x * 8);
      if (p.acc_dkdv) {
        const float2 ok = *pk, ov = *pv;
        kv.x += ok.x, kv.y += ok.y, vv.x += ov.x, vv.y += ov.y;
      }
      *pk = kv;
      *pv = vv;
    }
  }
}

// dQ [sq, n, D] fp32 as a 3-d tensor (D, n, sq innermost first) with boxes of 32 columns x 1 head x box_rows
// rows in the 128-byte swizzle (32 fp32 = 128 bytes, the swizzle's row). Needs dq 16-byte aligned, sq > 0.
inline cudaError_t make_dq_tensor_map(CUtensorMap* map, float* dq, int sq, int n, int D, int box_rows = 64) {
  const auto enc = tensor_map_encoder();
  if (!enc) return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)n, (cuuint64_t)sq};
  const cuuint64_t strides[2] = {(cuuint64_t)D * sizeof(float), (cuuint64_t)n * D * sizeof(float)};  // bytes, dims 1, 2
  const cuuint32_t box[3] = {32, 1, (cuuint32_t)box_rows};
  const cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, dq, dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <int D, bool POS, bool DS_KMAJOR, bool EARLY_DV, bool DQ_TMA>
cudaError_t launch_bwd_wgmma_t(const BwdParams& p, const CUtensorMap& dq_map, cudaStream_t st) {
  using Tr = WgBwdTraits<D, DQ_TMA>;
  auto kern = flash_bwd_wgmma_kernel<D, POS, DS_KMAJOR, EARLY_DV, DQ_TMA>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const int nt = (p.sk + Tr::BC - 1) / Tr::BC;
  BwdParams pk = p;  // the launch order: bwd_head_section, launch_tile_sections (flash_common.cuh)
  pk.head_sect = bwd_head_section<D>(p, nt);
  return launch_tile_sections(nt, p.nkv, pk.head_sect, false, [&](dim3 grid, int tile0) {
    pk.tile0 = tile0;
    kern<<<grid, Tr::NT, Tr::smem_bytes, st>>>(pk, dq_map);
    return cudaGetLastError();
  });
}

template <int D, bool DS_KMAJOR = false, bool EARLY_DV = false, bool DQ_TMA = false>
cudaError_t launch_bwd_wgmma(const BwdParams& p, cudaStream_t st) {
  CUtensorMap map;
  std::memset(&map, 0, sizeof map);  // unused unless DQ_TMA (and sq > 0: no item runs otherwise)
  if constexpr (DQ_TMA) {
    // The copy engine needs a 16-byte-aligned dQ (the API promises 8): otherwise the same kernel with atomics (variant 6).
    if (reinterpret_cast<uintptr_t>(p.dq) % 16 != 0) return launch_bwd_wgmma<D, DS_KMAJOR, EARLY_DV, false>(p, st);
    if (p.sq > 0) {
      const cudaError_t e = make_dq_tensor_map(&map, p.dq, p.sq, p.n, D);
      if (e != cudaSuccess) return e;
    }
  }
  return p.mask.kind >= kMaskWindow ? launch_bwd_wgmma_t<D, true, DS_KMAJOR, EARLY_DV, DQ_TMA>(p, map, st)
                                    : launch_bwd_wgmma_t<D, false, DS_KMAJOR, EARLY_DV, DQ_TMA>(p, map, st);
}

}  // namespace dev
}  // namespace burst_fa

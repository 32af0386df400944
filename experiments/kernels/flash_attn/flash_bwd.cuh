// Backward kernel: FlashAttention-2 style, one pass. One block per (kv head,
// key tile of BC rows): K and V stay in shared memory, dK and dV accumulate in
// registers over the query heads of the GQA group and every visible query
// tile (so dK/dV need no atomics and are written once). Per query tile:
//   S = Q K^T, dP = dO V^T               (warps tiled WM_S x WN_S over BR x BC)
//   P = exp2(S scale log2e - lse log2e), dS = P (dP - D)   -> bf16 in smem
//   dV += P^T dO, dK += dS^T Q           (warps tiled WM_KV x WN_KV over BC x D)
//   dQ_partial = dS K                    (warps tiled WM_Q x WN_Q over BR x D)
//   dQ += scale * dQ_partial             fp32 atomics (red.global.add.v2.f32)
// Q, dO (and lse, D) of the next query tile are prefetched with cp.async
// into the second buffer while the current one is computed.
#pragma once

#include "flash_common.cuh"

namespace burst_fa {
namespace dev {

struct BwdParams {
  const __nv_bfloat16 *q, *k, *v, *dout;
  const float *lse, *D;
  float *dq, *dk, *dv;
  int sq, sk, n, nkv, group;
  float scale, scale_log2;
  int acc_dkdv;
  int diag_no_dq;  // diagnostic timing only: skip the dQ product and its atomics (dQ stays wrong)
  MaskDev mask;
  // The launch order over (key tile, kv head) of every backward kernel
  // (launch_tile_head, launch_tile_sections): kv heads per section; 0 =
  // chosen by the launch, 1 = head by head.
  int head_sect = 0;
  // The cp.async / mma.sync kernels' first key tile of this launch
  // (launch_tile_sections); set by the launch.
  int tile0 = 0;
};

template <int D, int BR, int BC, int NWARPS> struct BwdTraits {
  static constexpr size_t smem_bytes =
      size_t(2 * BC * D + 4 * BR * D + 2 * BR * BC) * sizeof(__nv_bfloat16) + 4 * BR * sizeof(float);
};

__device__ __forceinline__ void red_add_f32x2(float* addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
#endif
}

template <int D, int BR, int BC, int NWARPS, int WM_S, int WM_KV, int WM_Q, int MINB, bool POS>
__global__ void __launch_bounds__(NWARPS * 32, MINB) flash_bwd_kernel(const BwdParams p) {
  constexpr int NT = NWARPS * 32;
  constexpr int WN_S = NWARPS / WM_S, WN_KV = NWARPS / WM_KV, WN_Q = NWARPS / WM_Q;
  constexpr int TM_S = BR / WM_S, TN_S = BC / WN_S;      // warp tile of S / dP
  constexpr int TM_KV = BC / WM_KV, TN_KV = D / WN_KV;   // warp tile of dK / dV
  constexpr int TM_Q = BR / WM_Q, TN_Q = D / WN_Q;       // warp tile of dQ
  constexpr int MT_S = TM_S / 16, NT_S = TN_S / 8;
  constexpr int MT_KV = TM_KV / 16, NT_KV = TN_KV / 8;
  constexpr int MT_Q = TM_Q / 16, NT_Q = TN_Q / 8;
  static_assert(WM_S * WN_S == NWARPS && WM_KV * WN_KV == NWARPS && WM_Q * WN_Q == NWARPS, "warp grids");
  static_assert(MT_S >= 1 && NT_S % 2 == 0 && MT_KV >= 1 && NT_KV % 2 == 0 && MT_Q >= 1 && NT_Q % 2 == 0, "warp tiles");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* Ks = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Vs = Ks + BC * D;
  __nv_bfloat16* Qs = Vs + BC * D;       // [2][BR*D]
  __nv_bfloat16* dOs = Qs + 2 * BR * D;  // [2][BR*D]
  __nv_bfloat16* Ps = dOs + 2 * BR * D;  // [BR*BC]
  __nv_bfloat16* dSs = Ps + BR * BC;     // [BR*BC]
  float* Ls = reinterpret_cast<float*>(dSs + BR * BC);  // [2][BR], lse as given (rows past sq: 0, with Q = dO = 0)
  float* Dsm = Ls + 2 * BR;                             // [2][BR]

  // Key tiles of one kv head (of one section of heads under a causal mask)
  // are adjacent in launch order: resident blocks share those heads' Q, dO in
  // L2 and their dQ atomics land in their dQ (L2-resident) instead of all
  // heads' (v1, run 1).
  const int hk = blockIdx.z * gridDim.x + blockIdx.x;  // launch_tile_sections' grid
  if (hk >= p.nkv) return;                              // past the last section's heads
  const int kt = p.tile0 + (int)blockIdx.y;  // key tile 0 first: the most query tiles under a causal mask
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
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
  auto issue_q = [&](int idx, int b) {
    const int h = hk * p.group + idx / nqt, i0 = (idx % nqt) * BR;
    load_tile_async<BR, D, NT>(Qs + b * BR * D, p.q, i0, p.sq, p.n, h, tid);
    load_tile_async<BR, D, NT>(dOs + b * BR * D, p.dout, i0, p.sq, p.n, h, tid);
    // lse and D by 4-byte cp.async (no stall on a plain load); rows past sq
    // are zero-filled: with Q = dO = 0 there, P = 1 but dS = 0 and dO = 0, so
    // they add nothing.
    for (int r = tid; r < 2 * BR; r += NT) {
      const int rr = r % BR, i = i0 + rr;
      const bool valid = i < p.sq;
      const size_t off = (size_t)(valid ? i : 0) * p.n + h;
      if (r < BR) cp_async4(smem_u32(Ls + b * BR + rr), p.lse + off, valid);
      else cp_async4(smem_u32(Dsm + b * BR + rr), p.D + off, valid);
    }
  };

  const int ws_m = (warp / WN_S) * TM_S, ws_n = (warp % WN_S) * TN_S;
  const int wk_m = (warp / WN_KV) * TM_KV, wk_n = (warp % WN_KV) * TN_KV;
  const int wq_m = (warp / WN_Q) * TM_Q, wq_n = (warp % WN_Q) * TN_Q;

  float dk[MT_KV][NT_KV][4], dv[MT_KV][NT_KV][4];
#pragma unroll
  for (int a = 0; a < MT_KV; ++a)
#pragma unroll
    for (int b = 0; b < NT_KV; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[a][b][e] = dv[a][b][e] = 0.f;

  int cur = next_item(0);
  if (cur < total) {
    load_tile_async<BC, D, NT>(Ks, p.k, j0, p.sk, p.nkv, hk, tid);
    load_tile_async<BC, D, NT>(Vs, p.v, j0, p.sk, p.nkv, hk, tid);
    issue_q(cur, 0);
  }
  cp_async_commit();

  int buf = 0;
  while (cur < total) {
    // An opaque copy of the lane id: the ldmatrix addresses derived from it
    // are recomputed per use (a few integer ops) instead of being hoisted
    // out of the loop into ~60 registers, which made the larger tiles spill.
    int ln = lane;
    asm volatile("" : "+r"(ln));
    const int nxt = next_item(cur + 1);
    if (nxt < total) issue_q(nxt, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int h = hk * p.group + cur / nqt, i0 = (cur % nqt) * BR;
    const int cls = classify_tile(mask, i0, min(i0 + BR, p.sq), j0, j1, col_edge);
    const __nv_bfloat16* Qb = Qs + buf * BR * D;
    const __nv_bfloat16* dOb = dOs + buf * BR * D;
    const float* Lb = Ls + buf * BR;
    const float* Db = Dsm + buf * BR;

    // ---- S = Q K^T and dP = dO V^T
    {
      float s[MT_S][NT_S][4], dp[MT_S][NT_S][4];
#pragma unroll
      for (int a = 0; a < MT_S; ++a)
#pragma unroll
        for (int b = 0; b < NT_S; ++b)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[a][b][e] = dp[a][b][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t aq[MT_S][4], ad[MT_S][4];
#pragma unroll
        for (int mt = 0; mt < MT_S; ++mt) {
          const int r = ws_m + mt * 16 + (ln & 7) + ((ln >> 3) & 1) * 8, c = ks * 16 + (ln >> 4) * 8;
          ldsm_x4(smem_u32(Qb + swz<D>(r, c)), aq[mt][0], aq[mt][1], aq[mt][2], aq[mt][3]);
          ldsm_x4(smem_u32(dOb + swz<D>(r, c)), ad[mt][0], ad[mt][1], ad[mt][2], ad[mt][3]);
        }
#pragma unroll
        for (int np = 0; np < NT_S / 2; ++np) {
          const int r = ws_n + np * 16 + (ln & 7) + (ln >> 4) * 8, c = ks * 16 + ((ln >> 3) & 1) * 8;
          uint32_t b0, b1, b2, b3;
          ldsm_x4(smem_u32(Ks + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
          for (int mt = 0; mt < MT_S; ++mt) {
            mma16816(s[mt][2 * np], aq[mt], b0, b1);
            mma16816(s[mt][2 * np + 1], aq[mt], b2, b3);
          }
          ldsm_x4(smem_u32(Vs + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
          for (int mt = 0; mt < MT_S; ++mt) {
            mma16816(dp[mt][2 * np], ad[mt], b0, b1);
            mma16816(dp[mt][2 * np + 1], ad[mt], b2, b3);
          }
        }
      }
      // ---- P, dS -> bf16 in shared memory
#pragma unroll
      for (int mt = 0; mt < MT_S; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int rl = ws_m + mt * 16 + g + hf * 8;
          const float lse_r = Lb[rl], Dv = Db[rl];
          const float L = lse_r == -INFINITY ? INFINITY : lse_r * 1.4426950408889634f;  // empty row: P = 0
          RowInfo qinfo{0, 0};
          if (cls == 1) qinfo = row_info_t<POS>(mask, min(i0 + rl, p.sq - 1), true);
#pragma unroll
          for (int x = 0; x < NT_S; ++x) {
            const int cl = ws_n + x * 8 + 2 * t;
            float pv[2], dsv[2];
#pragma unroll
            for (int e1 = 0; e1 < 2; ++e1) {
              float pe = fast_exp2(fmaf(s[mt][x][hf * 2 + e1], p.scale_log2, -L));
              if (cls == 1) {
                const int j = j0 + cl + e1;
                const RowInfo kinfo = row_info_t<POS>(mask, min(j, p.sk - 1), false);
                if (j >= p.sk || !elem_visible_t<POS>(mask, i0 + rl, j, qinfo, kinfo)) pe = 0.f;
              }
              pv[e1] = pe;
              dsv[e1] = pe * (dp[mt][x][hf * 2 + e1] - Dv);
            }
            *reinterpret_cast<uint32_t*>(Ps + swz<BC>(rl, cl)) = pack_bf16(pv[0], pv[1]);
            *reinterpret_cast<uint32_t*>(dSs + swz<BC>(rl, cl)) = pack_bf16(dsv[0], dsv[1]);
          }
        }
      }
    }
    __syncthreads();

    // ---- dV += P^T dO, dK += dS^T Q
#pragma unroll
    for (int ks = 0; ks < BR / 16; ++ks) {
      uint32_t ap[MT_KV][4], as[MT_KV][4];
#pragma unroll
      for (int mt = 0; mt < MT_KV; ++mt) {
        const int r = ks * 16 + (ln & 7) + (ln >> 4) * 8, c = wk_m + mt * 16 + ((ln >> 3) & 1) * 8;
        ldsm_x4_t(smem_u32(Ps + swz<BC>(r, c)), ap[mt][0], ap[mt][1], ap[mt][2], ap[mt][3]);
        ldsm_x4_t(smem_u32(dSs + swz<BC>(r, c)), as[mt][0], as[mt][1], as[mt][2], as[mt][3]);
      }
#pragma unroll
      for (int np = 0; np < NT_KV / 2; ++np) {
        const int r = ks * 16 + (ln & 7) + ((ln >> 3) & 1) * 8, c = wk_n + np * 16 + (ln >> 4) * 8;
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(smem_u32(dOb + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT_KV; ++mt) {
          mma16816(dv[mt][2 * np], ap[mt], b0, b1);
          mma16816(dv[mt][2 * np + 1], ap[mt], b2, b3);
        }
        ldsm_x4_t(smem_u32(Qb + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT_KV; ++mt) {
          mma16816(dk[mt][2 * np], as[mt], b0, b1);
          mma16816(dk[mt][2 * np + 1], as[mt], b2, b3);
        }
      }
    }

    // ---- dQ += scale * dS K (fp32 atomics)
    if (!p.diag_no_dq) {
      float dq[MT_Q][NT_Q][4];
#pragma unroll
      for (int a = 0; a < MT_Q; ++a)
#pragma unroll
        for (int b = 0; b < NT_Q; ++b)
#pragma unroll
          for (int e = 0; e < 4; ++e) dq[a][b][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < BC / 16; ++ks) {
        uint32_t a[MT_Q][4];
#pragma unroll
        for (int mt = 0; mt < MT_Q; ++mt) {
          const int r = wq_m + mt * 16 + (ln & 7) + ((ln >> 3) & 1) * 8, c = ks * 16 + (ln >> 4) * 8;
          ldsm_x4(smem_u32(dSs + swz<BC>(r, c)), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
        }
#pragma unroll
        for (int np = 0; np < NT_Q / 2; ++np) {
          const int r = ks * 16 + (ln & 7) + ((ln >> 3) & 1) * 8, c = wq_n + np * 16 + (ln >> 4) * 8;
          uint32_t b0, b1, b2, b3;
          ldsm_x4_t(smem_u32(Ks + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
          for (int mt = 0; mt < MT_Q; ++mt) {
            mma16816(dq[mt][2 * np], a[mt], b0, b1);
            mma16816(dq[mt][2 * np + 1], a[mt], b2, b3);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT_Q; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int i = i0 + wq_m + mt * 16 + g + hf * 8;
          if (i >= p.sq) continue;
          float* dst = p.dq + ((size_t)i * p.n + h) * D + wq_n + 2 * t;
#pragma unroll
          for (int x = 0; x < NT_Q; ++x)
            red_add_f32x2(dst + x * 8, p.scale * dq[mt][x][hf * 2], p.scale * dq[mt][x][hf * 2 + 1]);
        }
    }
    __syncthreads();  // P/dS and this buffer are free for the next item
    cur = nxt;
    buf ^= 1;
  }
  cp_async_wait<0>();

  // ---- write dK (scaled), dV; every key tile writes (zeros where nothing was visible)
#pragma unroll
  for (int mt = 0; mt < MT_KV; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int j = j0 + wk_m + mt * 16 + g + hf * 8;
      if (j >= p.sk) continue;
      const size_t base = ((size_t)j * p.nkv + hk) * D + wk_n + 2 * t;
#pragma unroll
      for (int x = 0; x < NT_KV; ++x) {
        float2 kv = make_float2(p.scale * dk[mt][x][hf * 2], p.scale * dk[mt][x][hf * 2 + 1]);
        float2 vv = make_float2(dv[mt][x][hf * 2], dv[mt][x][hf * 2 + 1]);
        float2* pk = reinterpret_cast<float2*>(p.dk + base + x * 8);
        float2* pv = reinterpret_cast<float2*>(p.dv + base + x * 8);
        if (p.acc_dkdv) {
          const float2 ok = *pk, ov = *pv;
          kv.x += ok.x, kv.y += ok.y, vv.x += ov.x, vv.y += ov.y;
        }
        *pk = kv;
        *pv = vv;
      }
    }
}

// Host: the kv heads per section of a backward's launch over nt key tiles
// (p.head_sect when set, else causal_head_section's choice): the streamed
// operand is Q and dO of a kv head's group of query heads. Every backward
// launcher asks here (the TMA, cp.async and mma.sync kernels).
template <int D> inline int bwd_head_section(const BwdParams& p, int nt) {
  return p.head_sect > 0 ? p.head_sect : causal_head_section(p.mask, nt, p.nkv, (long long)p.sq * D * 4 * p.group);
}

// The launch of the kernel above (the instantiation files call launch_bwd<...>).
template <int D, int BR, int BC, int NWARPS, int WM_S, int WM_KV, int WM_Q, int MINB, bool POS>
cudaError_t launch_bwd_t(const BwdParams& p, cudaStream_t st) {
  using Tr = BwdTraits<D, BR, BC, NWARPS>;
  auto kern = flash_bwd_kernel<D, BR, BC, NWARPS, WM_S, WM_KV, WM_Q, MINB, POS>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const int nt = (p.sk + BC - 1) / BC;
  BwdParams pk = p;  // the launch order: bwd_head_section, launch_tile_sections (flash_common.cuh)
  pk.head_sect = bwd_head_section<D>(p, nt);
  return launch_tile_sections(nt, p.nkv, pk.head_sect, false, [&](dim3 grid, int tile0) {
    pk.tile0 = tile0;
    kern<<<grid, NWARPS * 32, Tr::smem_bytes, st>>>(pk);
    return cudaGetLastError();
  });
}

template <int D, int BR, int BC, int NWARPS, int WM_S, int WM_KV, int WM_Q, int MINB>
cudaError_t launch_bwd(const BwdParams& p, cudaStream_t st) {
  return p.mask.kind >= kMaskWindow ? launch_bwd_t<D, BR, BC, NWARPS, WM_S, WM_KV, WM_Q, MINB, true>(p, st)
                                    : launch_bwd_t<D, BR, BC, NWARPS, WM_S, WM_KV, WM_Q, MINB, false>(p, st);
}

}  // namespace dev
}  // namespace burst_fa

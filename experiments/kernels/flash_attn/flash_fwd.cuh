// Forward kernel: FlashAttention-2 on mma.sync m16n8k16 (bf16 in, fp32
// accumulate). One block per (query head, query tile of BR rows); NWARPS warps,
// each owning MT = BR / (16 NWARPS) m16 row tiles. K and V tiles of BC rows
// stream through a two-stage cp.async ring (the next tile is in flight while
// the current one is computed). S and P stay in registers (the S accumulator
// is re-packed as the A operand of P V). Tiles the mask hides are never
// loaded; tiles it shows completely skip the per-element test.
#pragma once

#include "flash_common.cuh"

namespace burst_fa {
namespace dev {

struct FwdParams {
  const __nv_bfloat16 *q, *k, *v;
  float* o_f32;
  __nv_bfloat16* o_bf16;
  float* lse;
  int sq, sk, n, nkv, group;
  float scale_log2;
  MaskDev mask;
  // merge (the engine's ring forward): o_f32 and lse hold a running result
  // over other keys, and the epilogue merges this call's into it in place
  // (fwd_merge_weights) instead of overwriting; o_bf16 must be null.
  int merge = 0;
  // The launch order of every forward kernel's grid (launch_tile_head,
  // launch_tile_sections): heads per section; 0 = chosen by the launch
  // (causal_head_section), 1 = head by head.
  int head_sect = 0;
  // The cp.async / mma.sync kernels' first query tile of this launch
  // (launch_tile_sections: at most 65535 tiles a launch); set by the launch.
  int tile0 = 0;
};

// The merge's lse of the running result at (row i, head h), read by the
// quad's thread t = 0 and shuffled to the other three (it alone writes the
// new value back, so no thread may read after that write). Called by all 32
// lanes (rows past sq read nothing).
__device__ __forceinline__ float fwd_merge_lse_old(const FwdParams& p, int i, int h, int t) {
  float lold = -INFINITY;
  if (t == 0 && i < p.sq) lold = p.lse[(size_t)i * p.n + h];
  return __shfl_sync(0xffffffffu, lold, 0, 4);
}
// The merge rule (ALGORITHMS.md section 1) for a row whose block saw keys
// (lnew finite, natural log): lse' = log(e^lold + e^lnew), O' = ca O_old +
// cb O_new, with O_new = acc / lsum folded into cb. lold = -inf gives ca = 0,
// cb = 1 / lsum, lse' = lnew (the block's result as it is).
__device__ __forceinline__ void fwd_merge_weights(float lold, float lnew, float lsum, float& ca, float& cb, float& lse) {
  const float mx = fmaxf(lold, lnew);
  const float wa = expf(lold - mx), wb = expf(lnew - mx), tot = wa + wb;
  ca = wa / tot, cb = wb / (tot * lsum), lse = mx + logf(tot);
}

template <int D, int BR, int BC, int NWARPS> struct FwdTraits {
  static constexpr int NT = NWARPS * 32;
  static constexpr int MT = BR / (16 * NWARPS);
  static constexpr bool Q_IN_REGS = (MT == 1);
  static constexpr size_t smem_bytes = size_t(BR + 4 * BC) * D * sizeof(__nv_bfloat16);
  static_assert(MT >= 1 && MT * 16 * NWARPS == BR, "BR must be 16 * NWARPS * MT");
  static_assert(BC % 16 == 0 && D % 16 == 0 && D >= 64, "tile shapes");
};

template <int D, int BR, int BC, int NWARPS, int MINB, bool POS>
__global__ void __launch_bounds__(NWARPS * 32, MINB) flash_fwd_kernel(const FwdParams p) {
  using Tr = FwdTraits<D, BR, BC, NWARPS>;
  constexpr int NT = Tr::NT, MT = Tr::MT;
  constexpr int NTS = BC / 8;   // n8 tiles of S per row tile
  constexpr int NTO = D / 8;    // n8 tiles of O per row tile
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Ks = Qs + BR * D;          // [2][BC*D]
  __nv_bfloat16* Vs = Ks + 2 * BC * D;      // [2][BC*D]

  // Query tiles of one head (of one section of heads under a causal mask) are
  // adjacent in launch order, so the blocks resident together share those
  // heads' K and V in L2; a head-fastest order over all heads streamed every
  // head's K/V from HBM at once (v1, run 1).
  const int h = blockIdx.z * gridDim.x + blockIdx.x;  // launch_tile_sections' grid
  if (h >= p.n) return;                                 // past the last section's heads
  const int qt = p.tile0 + (int)(gridDim.y - 1u - blockIdx.y);  // the longest (causal) tiles first
  const int hk = h / p.group;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int i0 = qt * BR, i1 = min(i0 + BR, p.sq);
  const MaskDev& mask = p.mask;

  const int nkt = (p.sk + BC - 1) / BC;
  int kt_end = nkt;
  if (mask.kind == kMaskCausal) {
    const long long last = (long long)(i1 - 1) + mask.diag_offset;  // last key any row may see
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

  load_tile_async<BR, D, NT>(Qs, p.q, i0, p.sq, p.n, h, tid);
  cp_async_commit();
  int cur = next_tile(0);
  if (cur < kt_end) {
    load_tile_async<BC, D, NT>(Ks, p.k, cur * BC, p.sk, p.nkv, hk, tid);
    load_tile_async<BC, D, NT>(Vs, p.v, cur * BC, p.sk, p.nkv, hk, tid);
  }
  cp_async_commit();

  const int wrow = warp * MT * 16;  // this warp's first row in the tile
  RowInfo qinfo[POS ? MT : 1][2];
  if constexpr (POS) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) qinfo[mt][hf] = row_info(mask, min(i0 + wrow + mt * 16 + g + hf * 8, p.sq - 1), true);
  }

  float o[MT][NTO][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int x = 0; x < NTO; ++x) o[mt][x][0] = o[mt][x][1] = o[mt][x][2] = o[mt][x][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  uint32_t qf[Tr::Q_IN_REGS ? D / 16 : 1][4];
  cp_async_wait<1>();
  __syncthreads();
  if constexpr (Tr::Q_IN_REGS) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const int r = wrow + (lane & 7) + ((lane >> 3) & 1) * 8, c = ks * 16 + (lane >> 4) * 8;
      ldsm_x4(smem_u32(Qs + swz<D>(r, c)), qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3]);
    }
  }

  int buf = 0;
  while (cur < kt_end) {
    // An opaque copy of the lane id: the ldmatrix addresses derived from it
    // are recomputed per use (a few integer ops) instead of being hoisted
    // out of the loop into ~60 registers, which made the larger tiles spill.
    int ln = lane;
    asm volatile("" : "+r"(ln));
    const int nxt = next_tile(cur + 1);
    if (nxt < kt_end) {
      load_tile_async<BC, D, NT>(Ks + (buf ^ 1) * BC * D, p.k, nxt * BC, p.sk, p.nkv, hk, tid);
      load_tile_async<BC, D, NT>(Vs + (buf ^ 1) * BC * D, p.v, nxt * BC, p.sk, p.nkv, hk, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const __nv_bfloat16* Kb = Ks + buf * BC * D;
    const __nv_bfloat16* Vb = Vs + buf * BC * D;
    const int j0 = cur * BC;
    const int cls = tile_cls(cur);

    // ---- S = Q K^T
    float s[MT][NTS][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int x = 0; x < NTS; ++x) s[mt][x][0] = s[mt][x][1] = s[mt][x][2] = s[mt][x][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (Tr::Q_IN_REGS) {
          a[mt][0] = qf[ks][0], a[mt][1] = qf[ks][1], a[mt][2] = qf[ks][2], a[mt][3] = qf[ks][3];
        } else {
          const int r = wrow + mt * 16 + (ln & 7) + ((ln >> 3) & 1) * 8, c = ks * 16 + (ln >> 4) * 8;
          ldsm_x4(smem_u32(Qs + swz<D>(r, c)), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
        }
      }
#pragma unroll
      for (int np = 0; np < NTS / 2; ++np) {
        uint32_t b0, b1, b2, b3;
        const int r = np * 16 + (ln & 7) + (ln >> 4) * 8, c = ks * 16 + ((ln >> 3) & 1) * 8;
        ldsm_x4(smem_u32(Kb + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(s[mt][2 * np], a[mt], b0, b1);
          mma16816(s[mt][2 * np + 1], a[mt], b2, b3);
        }
      }
    }

    // ---- mask (partial tiles only) on the raw scores
    if (cls == 1) {
#pragma unroll
      for (int x = 0; x < NTS; ++x) {
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1) {
          const int j = j0 + x * 8 + 2 * t + e1;
          const RowInfo kinfo = row_info_t<POS>(mask, min(j, p.sk - 1), false);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int i = i0 + wrow + mt * 16 + g + hf * 8;
              if (j >= p.sk || !elem_visible_t<POS>(mask, i, j, qinfo[POS ? mt : 0][hf], kinfo)) s[mt][x][hf * 2 + e1] = -INFINITY;
            }
        }
      }
    }

    // ---- online softmax in log2 units: p = exp2(s * scale_log2 - m) (one FFMA + one MUFU
    // per element), then P packed to bf16 A fragments at once so the fp32 scores die early.
    uint32_t pf[MT][BC / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = -INFINITY;
#pragma unroll
        for (int x = 0; x < NTS; ++x) mx = fmaxf(mx, fmaxf(s[mt][x][hf * 2], s[mt][x][hf * 2 + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(m[mt][hf], mx * p.scale_log2);  // scale > 0
        const float muse = mnew == -INFINITY ? 0.f : mnew;
        const float alpha = fast_exp2(m[mt][hf] - muse);
        m[mt][hf] = mnew;
        float rs = 0.f;
#pragma unroll
        for (int x = 0; x < NTS; ++x) {
          const float p0 = fast_exp2(fmaf(s[mt][x][hf * 2], p.scale_log2, -muse));
          const float p1 = fast_exp2(fmaf(s[mt][x][hf * 2 + 1], p.scale_log2, -muse));
          s[mt][x][hf * 2] = p0, s[mt][x][hf * 2 + 1] = p1;
          rs += p0 + p1;
        }
        l[mt][hf] = l[mt][hf] * alpha + rs;
#pragma unroll
        for (int x = 0; x < NTO; ++x) o[mt][x][hf * 2] *= alpha, o[mt][x][hf * 2 + 1] *= alpha;
      }
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        pf[mt][kk][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pf[mt][kk][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pf[mt][kk][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pf[mt][kk][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
    }

    // ---- O += P V
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b0, b1, b2, b3;
        const int r = kk * 16 + (ln & 7) + ((ln >> 3) & 1) * 8, c = dp * 16 + (ln >> 4) * 8;
        ldsm_x4_t(smem_u32(Vb + swz<D>(r, c)), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(o[mt][2 * dp], pf[mt][kk], b0, b1);
          mma16816(o[mt][2 * dp + 1], pf[mt][kk], b2, b3);
        }
      }
    }
    __syncthreads();  // everyone is done with `buf` before the next iteration refills it
    cur = nxt;
    buf ^= 1;
  }
  cp_async_wait<0>();

  // ---- epilogue: O / l, lse = (m + log2 l) ln 2
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float lsum = l[mt][hf];
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
      const int i = i0 + wrow + mt * 16 + g + hf * 8;
      const float lold = p.merge ? fwd_merge_lse_old(p, i, h, t) : -INFINITY;
      if (i >= p.sq) continue;
      const bool empty = !(lsum > 0.f);
      if (p.merge && empty) continue;  // no key seen: the running (O, lse) stay
      const size_t base = ((size_t)i * p.n + h) * D + 2 * t;
      if (p.merge) {  // every load before any store (flash_fwd_wgmma.cuh's write_o_lse says why)
        float2 old[NTO];
#pragma unroll
        for (int x = 0; x < NTO; ++x) old[x] = *reinterpret_cast<const float2*>(p.o_f32 + base + x * 8);
        float ca, cb, lse_out;
        fwd_merge_weights(lold, (m[mt][hf] + log2f(lsum)) * 0.69314718055994531f, lsum, ca, cb, lse_out);
#pragma unroll
        for (int x = 0; x < NTO; ++x)
          *reinterpret_cast<float2*>(p.o_f32 + base + x * 8) =
              make_float2(ca * old[x].x + cb * o[mt][x][hf * 2], ca * old[x].y + cb * o[mt][x][hf * 2 + 1]);
        if (t == 0) p.lse[(size_t)i * p.n + h] = lse_out;
        continue;
      }
      const float inv = empty ? 0.f : 1.f / lsum;
#pragma unroll
      for (int x = 0; x < NTO; ++x) {
        const float v0 = o[mt][x][hf * 2] * inv, v1 = o[mt][x][hf * 2 + 1] * inv;
        if (p.o_f32) *reinterpret_cast<float2*>(p.o_f32 + base + x * 8) = make_float2(v0, v1);
        if (p.o_bf16) *reinterpret_cast<__nv_bfloat162*>(p.o_bf16 + base + x * 8) = __floats2bfloat162_rn(v0, v1);
      }
      if (t == 0) p.lse[(size_t)i * p.n + h] = empty ? -INFINITY : (m[mt][hf] + log2f(lsum)) * 0.69314718055994531f;
    }
  }
}

// Host: the heads per section of a forward's launch over nt query tiles
// (p.head_sect when set, else causal_head_section's choice): the streamed
// operand is a head's K and V, shared by its group's query heads. Every
// forward launcher asks here (the TMA, cp.async and mma.sync kernels).
template <int D> inline int fwd_head_section(const FwdParams& p, int nt) {
  return p.head_sect > 0 ? p.head_sect
                         : causal_head_section(p.mask, nt, p.n, (long long)p.sk * D * 4 / (p.group > 0 ? p.group : 1));
}

// The launch of the kernel above (the instantiation files call launch_fwd<...>).
template <int D, int BR, int BC, int NWARPS, int MINB, bool POS>
cudaError_t launch_fwd_t(const FwdParams& p, cudaStream_t st) {
  using Tr = FwdTraits<D, BR, BC, NWARPS>;
  auto kern = flash_fwd_kernel<D, BR, BC, NWARPS, MINB, POS>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const int nt = (p.sq + BR - 1) / BR;
  FwdParams pk = p;  // the launch order: fwd_head_section, launch_tile_sections (flash_common.cuh)
  pk.head_sect = fwd_head_section<D>(p, nt);
  return launch_tile_sections(nt, p.n, pk.head_sect, true, [&](dim3 grid, int tile0) {
    pk.tile0 = tile0;
    kern<<<grid, NWARPS * 32, Tr::smem_bytes, st>>>(pk);
    return cudaGetLastError();
  });
}

template <int D, int BR, int BC, int NWARPS, int MINB>
cudaError_t launch_fwd(const FwdParams& p, cudaStream_t st) {
  return p.mask.kind >= kMaskWindow ? launch_fwd_t<D, BR, BC, NWARPS, MINB, true>(p, st)
                                    : launch_fwd_t<D, BR, BC, NWARPS, MINB, false>(p, st);
}

}  // namespace dev
}  // namespace burst_fa

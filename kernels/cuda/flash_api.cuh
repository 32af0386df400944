// Host-side launch helpers shared by the instantiation files.
#pragma once

#include "flash_bwd.cuh"
#include "flash_fwd.cuh"

namespace burst {
namespace fa {
namespace dev {

// Fills the per-chunk bounds for the position masks; no-op for None/Causal.
cudaError_t prepare_mask(const AttnShape& s, const Mask& m, void* ws, cudaStream_t st);

template <int D, int BR, int BC, int NWARPS, int MINB, bool POS>
cudaError_t launch_fwd_t(const FwdParams& p, cudaStream_t st) {
  using Tr = FwdTraits<D, BR, BC, NWARPS>;
  auto kern = flash_fwd_kernel<D, BR, BC, NWARPS, MINB, POS>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const int nt = (p.sq + BR - 1) / BR;
  FwdParams pk = p;  // the launch order: causal_head_section, launch_tile_sections (flash_common.cuh)
  if (pk.head_sect <= 0)
    pk.head_sect = causal_head_section(p.mask, nt, p.n, (long long)p.sk * D * 4 / (p.group > 0 ? p.group : 1));
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

template <int D, int BR, int BC, int NWARPS, int WM_S, int WM_KV, int WM_Q, int MINB, bool POS>
cudaError_t launch_bwd_t(const BwdParams& p, cudaStream_t st) {
  using Tr = BwdTraits<D, BR, BC, NWARPS>;
  auto kern = flash_bwd_kernel<D, BR, BC, NWARPS, WM_S, WM_KV, WM_Q, MINB, POS>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const int nt = (p.sk + BC - 1) / BC;
  BwdParams pk = p;  // the launch order: causal_head_section, launch_tile_sections (flash_common.cuh)
  if (pk.head_sect <= 0) pk.head_sect = causal_head_section(p.mask, nt, p.nkv, (long long)p.sq * D * 4 * p.group);
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

// The instantiations (one file each, so they build in parallel).
cudaError_t fwd_d64(const FwdParams& p, cudaStream_t st);
cudaError_t fwd_d128(const FwdParams& p, cudaStream_t st);
// The wgmma forward and backward (flash_{fwd_wgmma,fwd_tma_ws,bwd_wgmma,
// bwd_tma_ws}.cuh; sm_90a objects only). kind: kWgTma (the default) the TMA
// versions (the lab's forward 10 (d128) / 9 (d64) and backward 11), kWgTma12
// the lab's variants 12 on top of them (forward: the descriptor diet and the
// producer asleep in its waits; backward: the loader and the dQ writer
// asleep; an A/B choice until measured), kWgCpAsync the cp.async ones
// (forward 4, backward 6). kWgTma176: the forward on 128 x 176 tiles (the
// lab's variant 17, head dim 128; FlashAttention-3's full-mask tile);
// flash_attn.cu's default for the d128 forward since 2026-12-06 (kWgTma
// there: the 128 x 128 variant 10).
// kWgTma80: the backward on 80 x 128 tiles with dQ computed transposed (the
// lab's variant 14: 13 with lse / D loaded early; head dim 128;
// FlashAttention-3's full-mask backward tile); flash_attn.cu's default for
// the d128 backward since 2026-12-06 (kWgTma there: the 64-row variant 11).
enum WgKind { kWgCpAsync = 0, kWgTma = 1, kWgTma12 = 2, kWgTma176 = 3, kWgTma80 = 4 };
cudaError_t fwd_wgmma_d64(const FwdParams& p, int kind, cudaStream_t st);
cudaError_t fwd_wgmma_d128(const FwdParams& p, int kind, cudaStream_t st);
// The TMA forwards (kWgTma, kWgTma12, kWgTma176) with the merging epilogue
// (p.merge: the ring forward's step), in their own files so the plain ones
// above carry no merge code and both build in parallel; fwd_wgmma_d* call
// them when p.merge is set.
cudaError_t fwd_wgmma_merge_d64(const FwdParams& p, int kind, cudaStream_t st);
cudaError_t fwd_wgmma_merge_d128(const FwdParams& p, int kind, cudaStream_t st);
cudaError_t bwd_wgmma_d64(const BwdParams& p, int kind, cudaStream_t st);
cudaError_t bwd_wgmma_d128(const BwdParams& p, int kind, cudaStream_t st);
cudaError_t bwd_d64(const BwdParams& p, cudaStream_t st);
cudaError_t bwd_d128(const BwdParams& p, cudaStream_t st);

}  // namespace dev
}  // namespace fa
}  // namespace burst

// Host-side launch helpers shared by the instantiation files.
#pragma once

#include "flash_bwd.cuh"
#include "flash_fwd.cuh"

namespace burst_fa {
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

cudaError_t fwd_d64(const FwdParams& p, int variant, cudaStream_t st);
cudaError_t fwd_d128(const FwdParams& p, int variant, cudaStream_t st);
// The wgmma forward (flash_fwd_wgmma.cuh, built for sm_90a only): variants 4, 5 (d128: 6, a diagnostic),
// and 7 (flash_fwd_tma_ws.cuh: TMA + warp-specialised ping-pong).
cudaError_t fwd_wgmma_d64(const FwdParams& p, int variant, cudaStream_t st);
cudaError_t fwd_wgmma_d128(const FwdParams& p, int variant, cudaStream_t st);
// The wgmma backward (flash_bwd_wgmma.cuh, sm_90a only): variants 4, 5, 6, 7 (5: a diagnostic), and 8
// (flash_bwd_tma_ws.cuh: 7 with TMA loads by a producer warp on an mbarrier ring).
cudaError_t bwd_wgmma_d64(const BwdParams& p, int variant, cudaStream_t st);
cudaError_t bwd_wgmma_d128(const BwdParams& p, int variant, cudaStream_t st);
cudaError_t bwd_d64(const BwdParams& p, int variant, cudaStream_t st);
cudaError_t bwd_d128(const BwdParams& p, int variant, cudaStream_t st);

}  // namespace dev
}  // namespace burst_fa

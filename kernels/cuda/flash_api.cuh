// Host-side launch helpers shared by the instantiation files.
#pragma once

#include "flash_bwd.cuh"
#include "flash_fwd.cuh"

namespace burst {
namespace fa {
namespace dev {

// Fills the per-chunk bounds for the position masks; no-op for None/Causal.
cudaError_t prepare_mask(const AttnShape& s, const Mask& m, void* ws, cudaStream_t st);

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

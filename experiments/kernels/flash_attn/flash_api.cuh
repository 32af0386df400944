// Host-side launch helpers shared by the instantiation files.
#pragma once

#include "flash_bwd.cuh"
#include "flash_fwd.cuh"

namespace burst_fa {
namespace dev {

// Fills the per-chunk bounds for the position masks; no-op for None/Causal.
cudaError_t prepare_mask(const AttnShape& s, const Mask& m, void* ws, cudaStream_t st);

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

// Host-side launch helpers shared by the instantiation files.
#pragma once

#include "flash_bwd.cuh"
#include "flash_fwd.cuh"

// A build of some variants only (a device call's A/B: the lab's build of
// every variant took ~115 s of a call, the d128 wgmma forward's 18 variants
// most of it): with -DLAB_SOME a variant is compiled when -DLAB_FWD_<v>=1 /
// -DLAB_BWD_<v>=1 names it (run_h200.sh: LAB_SOME=1 sets them from WG_FWD /
// WG_BWD), and the others fall to the dispatch's unknown-variant error
// (cudaErrorInvalidValue), which bench_attn reports as a FAIL if one is asked
// for. The mma.sync forward 0 (the lse and
// O the backward's check starts from) is always compiled.
#ifdef LAB_SOME
#define LAB_ALL 0
#else
#define LAB_ALL 1
#endif

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

// Forward on Hopper warpgroup MMA, head dim 128. kWgTma176 (flash_attn.cu's
// default since 2026-12-06): lab variant 17 (variant 12 on 128 x 176 tiles,
// 2 stages). kWgTma (BURST_FA_FORWARD=tma128, the default before): the
// lab's variant 10 (TMA loads on a 3-stage mbarrier K/V ring, a producer
// warpgroup, two consumer warpgroups in ping-pong, each overlapping the
// softmax of S_c with its own P_{c-1} V_{c-1}; 545-596 TFLOP/s at 32 x 128 in
// lab run 7, 0.90-0.96x cuDNN in the same call); kWgCpAsync: variant 4 (cp.async, 2
// warpgroups in lockstep; 387-414, run 3); kWgTma12: lab variant 12 (A/B).
// experiments/kernels/flash_attn/
// NOTES.md. sm_90a only: CMake builds this file in burst_kernels_cuda_sm90a.
#include "flash_api.cuh"
#include "flash_fwd_tma_kinds.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_d128.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t fwd_wgmma_d128(const FwdParams& p, int kind, cudaStream_t st) {
  if (kind == kWgCpAsync) return launch_fwd_wgmma<128, 128, false>(p, st);
  // The ring's merging forward: the same kinds' merge instantiations
  // (flash_fwd_wgmma_merge_d128.cu); the ones here have no merge code.
  if (p.merge) return fwd_wgmma_merge_d128(p, kind, st);
  return launch_fwd_tma_kind<128, false>(p, kind, st);
}
}}}

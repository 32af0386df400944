// Forward on Hopper warpgroup MMA, head dim 64. tma = true (the default): the
// lab's variant 9 (TMA loads on an mbarrier K/V ring, a producer warpgroup,
// two consumer warpgroups in ping-pong, each overlapping the softmax of S_c
// with its own P_{c-1} V_{c-1}; 537-573 TFLOP/s at 32 x 128 (head dim 128) in lab run 6,
// 0.88-1.06x cuDNN in the same call); false: variant 4 (cp.async, 2
// warpgroups in lockstep; 387-414, run 3). experiments/kernels/flash_attn/
// NOTES.md. sm_90a only: CMake builds this file in burst_kernels_cuda_sm90a.
#include "flash_api.cuh"
#include "flash_fwd_tma_kinds.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_d64.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t fwd_wgmma_d64(const FwdParams& p, int kind, cudaStream_t st) {
  if (kind == kWgCpAsync) return launch_fwd_wgmma<64, 128, false>(p, st);
  // The ring's merging forward: the same kinds' merge instantiations
  // (flash_fwd_wgmma_merge_d64.cu); the ones here have no merge code.
  if (p.merge) return fwd_wgmma_merge_d64(p, kind, st);
  return launch_fwd_tma_kind<64, false>(p, kind, st);
}
}}}

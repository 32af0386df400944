// Backward on Hopper warpgroup MMA, head dim 128 (BR64 BC128, 2 warpgroups, dV
// issued before the dP^T wait). dq_tma = true (the default): the lab's
// variant 7, dQ staged in shared memory and added into the fp32 dQ by TMA
// reduce-adds (361-382 TFLOP/s at 32 x 128, 0.69-0.82x cuDNN, run 5); false:
// variant 6, dQ by fp32 atomics (313-324, run 4).
// experiments/kernels/flash_attn/NOTES.md. sm_90a only: CMake builds this
// file in burst_kernels_cuda_sm90a.
#include "flash_api.cuh"
#include "flash_bwd_wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_bwd_wgmma_d128.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t bwd_wgmma_d128(const BwdParams& p, bool dq_tma, cudaStream_t st) {
  return dq_tma ? launch_bwd_wgmma<128, false, true, true>(p, st) : launch_bwd_wgmma<128, false, true>(p, st);
}
}}}

// Backward on Hopper warpgroup MMA, head dim 128: the lab's wgmma variant 6
// (BR64 BC128, 2 warpgroups, dV issued before the dP^T wait), measured
// fastest of the wgmma backward variants on the H200
// (experiments/kernels/flash_attn/NOTES.md, run 4). sm_90a only: CMake builds
// this file in burst_kernels_cuda_sm90a.
#include "flash_api.cuh"
#include "flash_bwd_wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_bwd_wgmma_d128.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t bwd_wgmma_d128(const BwdParams& p, cudaStream_t st) { return launch_bwd_wgmma<128, false, true>(p, st); }
}}}

// Forward on Hopper warpgroup MMA, head dim 64: the lab's wgmma variant 4
// (BR128 BC128, 2 warpgroups, no intra-warpgroup overlap), measured fastest
// of the wgmma variants on the H200 (experiments/kernels/flash_attn/NOTES.md,
// run 3). sm_90a only: CMake builds this file in burst_kernels_cuda_sm90a.
#include "flash_api.cuh"
#include "flash_fwd_wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_d64.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t fwd_wgmma_d64(const FwdParams& p, cudaStream_t st) { return launch_fwd_wgmma<64, 128, false>(p, st); }
}}}

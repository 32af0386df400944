// The TMA forwards of flash_fwd_wgmma_d64.cu with the merging epilogue
// (MERGE = true: the ring forward's step). Same kinds and tiles as there;
// sm_90a only (burst_kernels_cuda_sm90a).
#include "flash_api.cuh"
#include "flash_fwd_tma_kinds.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_merge_d64.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t fwd_wgmma_merge_d64(const FwdParams& p, int kind, cudaStream_t st) {
  return launch_fwd_tma_kind<64, true>(p, kind, st);
}
}}}

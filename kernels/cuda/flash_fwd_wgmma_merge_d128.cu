// The TMA forwards of flash_fwd_wgmma_d128.cu with the merging epilogue
// (MERGE = true: the result merged into a running (O, lse), the ring
// forward's step, kernels::flash_attention_forward_merge). Same kinds and
// tiles as there; sm_90a only (burst_kernels_cuda_sm90a).
#include "flash_api.cuh"
#include "flash_fwd_tma_kinds.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_merge_d128.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t fwd_wgmma_merge_d128(const FwdParams& p, int kind, cudaStream_t st) {
  return launch_fwd_tma_kind<128, true>(p, kind, st);
}
}}}

// wgmma forward instantiations, head dim 64 (sm_90a only: build this file
// with -gencode=arch=compute_90a,code=sm_90a). Forward variants 4, 5, 7-10, 12 and 14-16 of
// flash_attn.cu's d64 table land here as variant - 4 (d64 has no variants 6, 11 and 13).
#include "flash_api.cuh"
#include "flash_fwd_wgmma.cuh"
#include "flash_fwd_tma_ws.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_d64.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst_fa { namespace dev {
cudaError_t fwd_wgmma_d64(const FwdParams& p, int variant, cudaStream_t st) {
  switch (variant) {
#if LAB_ALL || LAB_FWD_4 || LAB_FWD_23
    case 0: return launch_fwd_wgmma<64, 128, false>(p, st);
#endif
#if LAB_ALL || LAB_FWD_5
    case 1: return launch_fwd_wgmma<64, 128, true>(p, st);
#endif
#if LAB_ALL || LAB_FWD_7
    case 3: return launch_fwd_tma_ws<64, 128, 2>(p, st);  // TMA + warp-specialised ping-pong (flash_fwd_tma_ws.cuh)
#endif
#if LAB_ALL || LAB_FWD_8
    case 4: return launch_fwd_tma_ws<64, 128, 2, 1>(p, st);  // variant 8: trap-free waits
#endif
#if LAB_ALL || LAB_FWD_9
    case 5: return launch_fwd_tma_ws<64, 128, 2, 2>(p, st);  // variant 9: + intra-warpgroup overlap
#endif
#if LAB_ALL || LAB_FWD_10
    case 6: return launch_fwd_tma_ws<64, 128, 3, 2>(p, st);  // variant 10: variant 9 with 3 K/V stages
#endif
#if LAB_ALL || LAB_FWD_12
    case 8: return launch_fwd_tma_ws<64, 128, 3, 2 | kFwdDiet>(p, st);  // variant 12 (d64 has no variant 11)
#endif
#if LAB_ALL || LAB_FWD_14
    case 10: return launch_fwd_tma_ws<64, 128, 3, 2 | kFwdDiet | kFwdSoftIL>(p, st);  // variant 14: 12 + interleaved softmax
#endif
#if LAB_ALL || LAB_FWD_15
    case 11: return launch_fwd_tma_ws<64, 128, 3, 2 | kFwdDiet | kFwdSoftIL | kFwdPolyExp>(p, st);  // variant 15: 14 + a quarter of exp2 on the FMA pipe
#endif
#if LAB_ALL || LAB_FWD_16
    case 12: return launch_fwd_tma_ws<64, 128, 3, 2 | kFwdDiet | kFwdNoPingPong>(p, st);  // variant 16: 12 without the ping-pong barriers
#endif
  }
  return cudaErrorInvalidValue;
}
}}

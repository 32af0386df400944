// wgmma backward instantiations, head dim 64 (sm_90a only: build this file
// with -gencode=arch=compute_90a,code=sm_90a). Backward variants 4-12 of
// flash_attn.cu's d64 table land here as 0-8.
#include "flash_api.cuh"
#include "flash_bwd_wgmma.cuh"
#include "flash_bwd_tma_ws.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_bwd_wgmma_d64.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst_fa { namespace dev {
cudaError_t bwd_wgmma_d64(const BwdParams& p, int variant, cudaStream_t st) {
  switch (variant) {
#if LAB_ALL || LAB_BWD_4
    case 0: return launch_bwd_wgmma<64, false>(p, st);
#endif
#if LAB_ALL || LAB_BWD_5
    case 1: return launch_bwd_wgmma<64, true>(p, st);  // diagnostic: dS stored K-major (no transposed A)
#endif
#if LAB_ALL || LAB_BWD_6 || LAB_BWD_18
    case 2: return launch_bwd_wgmma<64, false, true>(p, st);  // dV issued before the dP^T wait
#endif
#if LAB_ALL || LAB_BWD_7
    case 3: return launch_bwd_wgmma<64, false, true, true>(p, st);  // + dQ by smem and a bulk tensor reduce-add
#endif
#if LAB_ALL || LAB_BWD_8
    case 4: return launch_bwd_tma_ws<64>(p, st);  // 7 + TMA producer warp, mbarrier ring (flash_bwd_tma_ws.cuh)
#endif
#if LAB_ALL || LAB_BWD_9
    case 5: return launch_bwd_tma_ws<64, 1>(p, st);  // 8 + the instruction diet
#endif
#if LAB_ALL || LAB_BWD_10
    case 6: return launch_bwd_tma_ws<64, 3>(p, st);  // 9 + dQ before dK, staged while dK runs
#endif
#if LAB_ALL || LAB_BWD_11
    case 7: return launch_bwd_tma_ws<64, 7>(p, st);  // 10 + the dQ staging without bank conflicts
#endif
#if LAB_ALL || LAB_BWD_12
    case 8: return launch_bwd_tma_ws<64, 7 | kBwdSleep>(p, st);  // 11 + the loader and the dQ writer asleep in their waits
#endif
#if LAB_ALL || LAB_BWD_15
    case 11: return launch_bwd_tma_ws<64, 15 | kBwdLseEarly>(p, st);  // 15: 12 + lse / D loaded before the stage wait
#endif
  }
  return cudaErrorInvalidValue;
}
}}

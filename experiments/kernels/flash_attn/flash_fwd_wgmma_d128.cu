// wgmma forward instantiations, head dim 128 (sm_90a only: build this file
// with -gencode=arch=compute_90a,code=sm_90a). Forward variants 4-21 of
// flash_attn.cu's d128 table land here as 0-17.
#include "flash_api.cuh"
#include "flash_fwd_wgmma.cuh"
#include "flash_fwd_tma_ws.cuh"
#include "flash_fwd_persist.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_fwd_wgmma_d128.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst_fa { namespace dev {
cudaError_t fwd_wgmma_d128(const FwdParams& p, int variant, cudaStream_t st) {
  switch (variant) {
#if LAB_ALL || LAB_FWD_4 || LAB_FWD_23
    case 0: return launch_fwd_wgmma<128, 128, false>(p, st);
#endif
#if LAB_ALL || LAB_FWD_5
    case 1: return launch_fwd_wgmma<128, 128, true>(p, st);
#endif
#if LAB_ALL || LAB_FWD_6
    case 2: return launch_fwd_wgmma<128, 128, true, true>(p, st);  // diagnostic: V descriptor offsets swapped
#endif
#if LAB_ALL || LAB_FWD_7
    case 3: return launch_fwd_tma_ws<128, 128, 2>(p, st);          // TMA + warp-specialised ping-pong (flash_fwd_tma_ws.cuh)
#endif
#if LAB_ALL || LAB_FWD_8
    case 4: return launch_fwd_tma_ws<128, 128, 2, 1>(p, st);  // variant 8: trap-free waits
#endif
#if LAB_ALL || LAB_FWD_9
    case 5: return launch_fwd_tma_ws<128, 128, 2, 2>(p, st);  // variant 9: + intra-warpgroup overlap
#endif
#if LAB_ALL || LAB_FWD_10
    case 6: return launch_fwd_tma_ws<128, 128, 3, 2>(p, st);  // variant 10: variant 9 with 3 K/V stages
#endif
#if LAB_ALL || LAB_FWD_11
    case 7: return launch_fwd_persist<128, 128, 3>(p, st);    // variant 11: variant 10 on a persistent grid
#endif
#if LAB_ALL || LAB_FWD_12
    case 8: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet>(p, st);  // variant 12: variant 10, descriptor diet, sleeping producer
#endif
#if LAB_ALL || LAB_FWD_13
    case 9: return launch_fwd_persist<128, 128, 3, true>(p, st);  // variant 13: variant 11 with variant 12's diet
#endif
#if LAB_ALL || LAB_FWD_14
    case 10: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet | kFwdSoftIL>(p, st);  // variant 14: 12 + interleaved softmax
#endif
#if LAB_ALL || LAB_FWD_15
    case 11: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet | kFwdSoftIL | kFwdPolyExp>(p, st);  // variant 15: 14 + a quarter of exp2 on the FMA pipe
#endif
#if LAB_ALL || LAB_FWD_16
    case 12: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet | kFwdNoPingPong>(p, st);  // variant 16: 12 without the ping-pong barriers
#endif
#if LAB_ALL || LAB_FWD_17
    case 13: return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet>(p, st);  // variant 17: 12 with 176-key tiles, 2 stages
#endif
#if LAB_ALL || LAB_FWD_18
    case 14: return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet | kFwdNoPingPong>(p, st);  // variant 18: 17 without the ping-pong
#endif
#if LAB_ALL || LAB_FWD_19
    case 15: return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet, true>(p, st);  // variant 19: 17 with the merging epilogue compiled in (p.merge 0: the engine's plain forward of 2026-12-06 / 07)
#endif
#if LAB_ALL || LAB_FWD_20
    case 16: {  // variant 20: 17 launched head by head (the order before 2026-12-07), for the A/B
      FwdParams q = p;
      q.head_sect = 1;
      return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet>(q, st);
    }
#endif
#if LAB_ALL || LAB_FWD_21
    case 17: {  // variant 21: 10 launched head by head
      FwdParams q = p;
      q.head_sect = 1;
      return launch_fwd_tma_ws<128, 128, 3, 2>(q, st);
    }
#endif
  }
  return cudaErrorInvalidValue;
}
}}

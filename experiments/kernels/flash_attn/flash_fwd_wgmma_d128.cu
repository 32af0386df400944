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
    case 0: return launch_fwd_wgmma<128, 128, false>(p, st);
    case 1: return launch_fwd_wgmma<128, 128, true>(p, st);
    case 2: return launch_fwd_wgmma<128, 128, true, true>(p, st);  // diagnostic: V descriptor offsets swapped
    case 3: return launch_fwd_tma_ws<128, 128, 2>(p, st);          // TMA + warp-specialised ping-pong (flash_fwd_tma_ws.cuh)
    case 4: return launch_fwd_tma_ws<128, 128, 2, 1>(p, st);  // variant 8: trap-free waits
    case 5: return launch_fwd_tma_ws<128, 128, 2, 2>(p, st);  // variant 9: + intra-warpgroup overlap
    case 6: return launch_fwd_tma_ws<128, 128, 3, 2>(p, st);  // variant 10: variant 9 with 3 K/V stages
    case 7: return launch_fwd_persist<128, 128, 3>(p, st);    // variant 11: variant 10 on a persistent grid
    case 8: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet>(p, st);  // variant 12: variant 10, descriptor diet, sleeping producer
    case 9: return launch_fwd_persist<128, 128, 3, true>(p, st);  // variant 13: variant 11 with variant 12's diet
    case 10: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet | kFwdSoftIL>(p, st);  // variant 14: 12 + interleaved softmax
    case 11: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet | kFwdSoftIL | kFwdPolyExp>(p, st);  // variant 15: 14 + a quarter of exp2 on the FMA pipe
    case 12: return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet | kFwdNoPingPong>(p, st);  // variant 16: 12 without the ping-pong barriers
    case 13: return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet>(p, st);  // variant 17: 12 with 176-key tiles, 2 stages
    case 14: return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet | kFwdNoPingPong>(p, st);  // variant 18: 17 without the ping-pong
    case 15: return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet, true>(p, st);  // variant 19: 17 with the merging epilogue compiled in (p.merge 0: the engine's plain forward of 2026-12-06 / 07)
    case 16:    // variant 20: 17 launched head by head (the order before 2026-12-07), for the A/B
    case 17: {  // variant 21: 10 launched head by head
      FwdParams q = p;
      q.head_sect = 1;
      return variant == 16 ? launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet>(q, st) : launch_fwd_tma_ws<128, 128, 3, 2>(q, st);
    }
  }
  return cudaErrorInvalidValue;
}
}}

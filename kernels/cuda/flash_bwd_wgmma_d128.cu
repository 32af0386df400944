// Backward on Hopper warpgroup MMA, head dim 128. kWgTma80 (flash_attn.cu's
// default since 2026-12-06): the lab's variant 14, variant 12 on 80 x 128
// tiles with dQ computed transposed and lse / D loaded before the stage wait
// (16K, H100, ncu: -7.5% / -5.5% cycles full / causal against variant 12,
// tensor pipe 61% -> 66%; lab NOTES "v11 backward", run 14 and the ab1
// call). kWgTma: the lab's variant 11 (flash_bwd_tma_ws.cuh, MODE kBwdDiet | kBwdDqFirst | kBwdDqSwz):
// a TMA producer warp for Q / dO and a dQ-writer warp (bulk tensor
// reduce-adds of the fp32 dQ partials), two consumer warpgroups (BR64 BC128),
// lse / D staged in log2 units, uniform wgmma descriptors, the mask only on
// partial tiles, dQ issued before dK and staged while dK runs, the staging's
// shared stores free of bank conflicts (503-538 TFLOP/s at 32 x 128, 0.95-1.09x
// cuDNN in the same call, lab run 9; variant 10: 495-515, run 8;
// d = 64 passes the same checks, its speed not timed); false: variant 6, dQ
// by fp32 atomics (313-324, run 4). experiments/kernels/flash_attn/NOTES.md.
// sm_90a only: CMake builds this file in burst_kernels_cuda_sm90a.
#include "flash_api.cuh"
#include "flash_bwd_tma_ws.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_bwd_wgmma_d128.cu needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace burst { namespace fa { namespace dev {
cudaError_t bwd_wgmma_d128(const BwdParams& p, int kind, cudaStream_t st) {
  if (kind == kWgTma12) return launch_bwd_tma_ws<128, kBwdDiet | kBwdDqFirst | kBwdDqSwz | kBwdSleep>(p, st);  // lab variant 12
  if (kind == kWgTma80)  // lab variant 14: 80 x 128 tiles, dQ^T = K^T dS^T, lse / D loaded before the stage wait
    return launch_bwd_tma_ws<128, kBwdDiet | kBwdDqFirst | kBwdDqSwz | kBwdSleep | kBwdQ80 | kBwdLseEarly>(p, st);
  return kind == kWgTma ? launch_bwd_tma_ws<128, kBwdDiet | kBwdDqFirst | kBwdDqSwz>(p, st) : launch_bwd_wgmma<128, false, true>(p, st);
}
}}}

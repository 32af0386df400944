// Forward instantiations, head dim 64. Variant table: see flash_attn.cu.
#include "flash_api.cuh"
namespace burst_fa { namespace dev {
cudaError_t fwd_d64(const FwdParams& p, int variant, cudaStream_t st) {
  switch (variant) {
    case 0: return launch_fwd<64, 128, 64, 8, 1>(p, st);
#if LAB_ALL || LAB_FWD_1
    case 1: return launch_fwd<64, 128, 32, 4, 2>(p, st);
#endif
#if LAB_ALL || LAB_FWD_2
    case 2: return launch_fwd<64, 64, 64, 4, 2>(p, st);
#endif
#if LAB_ALL || LAB_FWD_3
    case 3: return launch_fwd<64, 128, 64, 4, 2>(p, st);
#endif
    case 4:
    case 5:
    case 7:
    case 8:
    case 9:
    case 10:
    case 12:
    case 14:
    case 15:
    case 16: return fwd_wgmma_d64(p, variant - 4, st);  // sm_90a (flash_fwd_wgmma_d64.cu)
  }
  return cudaErrorInvalidValue;
}
}}

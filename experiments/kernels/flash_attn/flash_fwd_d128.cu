// Forward instantiations, head dim 128. Variant table: see flash_attn.cu.
#include "flash_api.cuh"
namespace burst_fa { namespace dev {
cudaError_t fwd_d128(const FwdParams& p, int variant, cudaStream_t st) {
  switch (variant) {
    case 0: return launch_fwd<128, 128, 64, 8, 1>(p, st);
#if LAB_ALL || LAB_FWD_1
    case 1: return launch_fwd<128, 128, 32, 4, 2>(p, st);
#endif
#if LAB_ALL || LAB_FWD_2
    case 2: return launch_fwd<128, 64, 64, 4, 2>(p, st);
#endif
#if LAB_ALL || LAB_FWD_3
    case 3: return launch_fwd<128, 128, 64, 4, 2>(p, st);
#endif
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14:
    case 15:
    case 16:
    case 17:
    case 18:
    case 19:
    case 20:
    case 21: return fwd_wgmma_d128(p, variant - 4, st);  // sm_90a (flash_fwd_wgmma_d128.cu)
    case 22:    // 3 launched head by head (the order before 2026-12-07), for the A/B
    case 23: {  // 4 (sm_90a) launched head by head
      FwdParams q = p;
      q.head_sect = 1;
      return variant == 22 ? launch_fwd<128, 128, 64, 4, 2>(q, st) : fwd_wgmma_d128(q, 0, st);
    }
  }
  return cudaErrorInvalidValue;
}
}}

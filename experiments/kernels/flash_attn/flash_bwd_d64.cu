// Backward instantiations, head dim 64. Variant table: see flash_attn.cu.
#include "flash_api.cuh"
namespace burst_fa { namespace dev {
cudaError_t bwd_d64(const BwdParams& p, int variant, cudaStream_t st) {
  switch (variant) {
    //                        D  BR  BC  W WM_S WM_KV WM_Q MINB
    case 0: return launch_bwd<64, 64, 64, 8, 4, 4, 4, 1>(p, st);
#if LAB_ALL || LAB_BWD_1
    case 1: return launch_bwd<64, 64, 128, 8, 2, 4, 4, 1>(p, st);
#endif
#if LAB_ALL || LAB_BWD_2
    case 2: return launch_bwd<64, 64, 128, 8, 2, 4, 2, 1>(p, st);
#endif
#if LAB_ALL || LAB_BWD_3
    case 3: return launch_bwd<64, 64, 64, 4, 4, 4, 4, 2>(p, st);
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
    case 15: return bwd_wgmma_d64(p, variant - 4, st);  // (13, 14: head dim 128 only)  // sm_90a (flash_bwd_wgmma_d64.cu)
  }
  return cudaErrorInvalidValue;
}
}}

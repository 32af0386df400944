// Backward instantiation, head dim 64: BR64 BC128, 8 warps, 32x32 dQ warp tiles
// (the lab's variant 2, measured fastest on the H200).
#include "flash_api.cuh"
namespace burst { namespace fa { namespace dev {
//                                           D  BR  BC  W WM_S WM_KV WM_Q MINB
cudaError_t bwd_d64(const BwdParams& p, cudaStream_t st) { return launch_bwd<64, 64, 128, 8, 2, 4, 2, 1>(p, st); }
}}}

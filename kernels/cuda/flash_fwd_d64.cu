// Forward instantiation, head dim 64: BR128 BC64, 4 warps x 2 row tiles (the
// lab's variant 3, measured fastest on the H200: experiments/kernels/flash_attn/NOTES.md).
#include "flash_api.cuh"
namespace burst { namespace fa { namespace dev {
cudaError_t fwd_d64(const FwdParams& p, cudaStream_t st) { return launch_fwd<64, 128, 64, 4, 2>(p, st); }
}}}

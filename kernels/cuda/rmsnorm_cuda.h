// RMSNorm forward and backward on the GPU (the CUDA path of
// kernels/rmsnorm.hpp for bf16 and float device views). No Kokkos here.
//   forward:  rstd[i] = 1 / sqrt(mean_h x^2 + eps), y = x * rstd * w
//   backward: dx = rstd * (dy w - x rstd^2 mean_h(dy w x)) [+ residual] (written;
//             the residual, when not null, is added before the one rounding),
//             dw += sum_i dy x rstd (accumulated, fp32, deterministic)
// x, y, dy, dx [N, H] contiguous rows, w [H], all of one type (dtype 0 =
// fp32, 1 = bf16); rstd [N] and dw [H] fp32. The backward needs a scratch of
// rmsnorm_backward_workspace(N, H) bytes (per-chunk column sums of dw).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace burst {
namespace rn {

cudaError_t rmsnorm_forward(int dtype, long N, long H, const void* x, const void* w, float eps, void* y, float* rstd,
                            cudaStream_t stream);
size_t rmsnorm_backward_workspace(long N, long H);
cudaError_t rmsnorm_backward(int dtype, long N, long H, const void* dy, const void* x, const void* w, const float* rstd,
                             const void* residual, void* dx, float* dw, void* workspace, cudaStream_t stream);

}  // namespace rn
}  // namespace burst

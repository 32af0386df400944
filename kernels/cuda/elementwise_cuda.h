// Elementwise bf16 kernels of a LLaMA layer on the GPU (the CUDA path of
// kernels/activations.hpp for bf16 device views). No Kokkos here.
//   swiglu_forward:  h = silu(g) * u
//   swiglu_backward: dg = dh * u * s * (1 + g (1 - s)), du = dh * g * s, s = sigmoid(g)
//   f32_to_bf16:     y = bf16(x) (round to nearest even)
//   bf16_to_f32:     y = float(x) (exact)
// All arrays are n contiguous elements, bf16 unless named fp32; math in fp32.
// 16-byte vector accesses (8 bf16) when every pointer is 16-byte aligned,
// else a scalar loop. Asynchronous on `stream`; returns the launch's error.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace burst {
namespace ew {

cudaError_t swiglu_forward(long n, const __nv_bfloat16* g, const __nv_bfloat16* u, __nv_bfloat16* h, cudaStream_t stream);
cudaError_t swiglu_backward(long n, const __nv_bfloat16* dh, const __nv_bfloat16* g, const __nv_bfloat16* u,
                            __nv_bfloat16* dg, __nv_bfloat16* du, cudaStream_t stream);
cudaError_t f32_to_bf16(long n, const float* x, __nv_bfloat16* y, cudaStream_t stream);
cudaError_t bf16_to_f32(long n, const __nv_bfloat16* x, float* y, cudaStream_t stream);

}  // namespace ew
}  // namespace burst

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

// AdamW on a flat fp32 shard (kernels/optim.hpp's rule, the same operations
// in the same order): g scaled by gs; p *= 1 - lr * wd; m, v updated; p -=
// lr * (m / bc1) / (sqrt(v / bc2) + eps); and, when `out` is not null, out =
// bf16(p) in the same pass (the working copy). float4 accesses (out: 8 bytes
// per 4) when p, g, m, v are 16-byte and out 8-byte aligned, else scalars.
// Floor per element: 28 B (p, g, m, v read; p, m, v written), 30 B with out.
cudaError_t adamw(long n, float* p, const float* g, float* m, float* v, __nv_bfloat16* out, float lr, float b1, float b2,
                  float eps, float wd, float gs, float bc1, float bc2, cudaStream_t stream);

}  // namespace ew
}  // namespace burst

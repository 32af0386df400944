// RoPE on the GPU (the CUDA path of kernels/rope.hpp's rope_apply_to for
// contiguous bf16 / float device views whose head dim is a multiple of 16).
// No Kokkos here.
//   y[i, h, e]        = x[i, h, e] c - x[i, h, e + d/2] s
//   y[i, h, e + d/2]  = x[i, h, e + d/2] c + x[i, h, e] s
// c = cos(pos[i] inv_freq[e]) af, s = sign sin(pos[i] inv_freq[e]) af, the
// angle in double, c and s rounded to float, the rotation in float (as the
// portable kernel). x, y [s, nh, d] contiguous (y may be x: in place), dtype
// 0 = fp32, 1 = bf16, each 16-byte aligned; pos [s] int64, inv_freq [d/2]
// double.
#pragma once

#include <cuda_runtime.h>

namespace burst {
namespace rope {

// Whether rope_apply takes these: d a multiple of 16 (at most 4096), s and
// nh x d within int, x and y 16-byte aligned (else the caller runs the
// portable kernel); rope_apply returns cudaErrorInvalidValue otherwise.
bool rope_supported(long s, long nh, long d, const void* x, const void* y);
cudaError_t rope_apply(int in_dtype, int out_dtype, long s, long nh, long d, const void* x, void* y, const long* pos,
                       const double* inv_freq, double attention_factor, bool inverse, cudaStream_t stream);

}  // namespace rope
}  // namespace burst

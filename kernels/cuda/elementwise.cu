// Elementwise bf16 kernels (see elementwise_cuda.h). Each thread handles 8
// consecutive elements as one 16-byte load / store per bf16 array, two per
// fp32 array (a grid-stride
// loop over n / 8 vectors, flat indices, no div/mod), the n % 8 tail in a
// scalar loop. Floors per element (bf16): SwiGLU forward 6 B (g, u in, h
// out), backward 10 B (dh, g, u in, dg, du out), add 6 B, fp32 -> bf16 6 B,
// bf16 -> fp32 6 B.
#include "kernels/cuda/elementwise_cuda.h"

#include <cstdint>

namespace burst {
namespace ew {
namespace {

constexpr int kThreads = 256;

struct alignas(16) Vec8 {
  __nv_bfloat162 v[4];
};

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

__device__ __forceinline__ void swiglu_f(float g, float u, float& h) { h = g * sigmoid(g) * u; }
__device__ __forceinline__ void swiglu_b(float d, float g, float u, float& dg, float& du) {
  const float s = sigmoid(g);
  dg = d * u * s * (1.f + g * (1.f - s));
  du = d * g * s;
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

unsigned blocks_for(long work) {
  long b = (work + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > 132L * 32) b = 132L * 32;  // grid-stride beyond a few waves of the H200's 132 SMs
  return unsigned(b);
}

__global__ void swiglu_fwd_vec(long nv, const Vec8* __restrict__ g, const Vec8* __restrict__ u, Vec8* __restrict__ h) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < nv; i += long(gridDim.x) * blockDim.x) {
    const Vec8 a = g[i], b = u[i];
    Vec8 r;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 ga = __bfloat1622float2(a.v[k]), ub = __bfloat1622float2(b.v[k]);
      float h0, h1;
      swiglu_f(ga.x, ub.x, h0);
      swiglu_f(ga.y, ub.y, h1);
      r.v[k] = __floats2bfloat162_rn(h0, h1);
    }
    h[i] = r;
  }
}

__global__ void swiglu_fwd_scalar(long b, long e, const __nv_bfloat16* g, const __nv_bfloat16* u, __nv_bfloat16* h) {
  for (long i = b + blockIdx.x * long(blockDim.x) + threadIdx.x; i < e; i += long(gridDim.x) * blockDim.x) {
    float r;
    swiglu_f(__bfloat162float(g[i]), __bfloat162float(u[i]), r);
    h[i] = __float2bfloat16_rn(r);
  }
}

__global__ void swiglu_bwd_vec(long nv, const Vec8* __restrict__ dh, const Vec8* __restrict__ g, const Vec8* __restrict__ u,
                               Vec8* __restrict__ dg, Vec8* __restrict__ du) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < nv; i += long(gridDim.x) * blockDim.x) {
    const Vec8 d = dh[i], a = g[i], b = u[i];
    Vec8 rg, ru;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 dd = __bfloat1622float2(d.v[k]), ga = __bfloat1622float2(a.v[k]), ub = __bfloat1622float2(b.v[k]);
      float g0, g1, u0, u1;
      swiglu_b(dd.x, ga.x, ub.x, g0, u0);
      swiglu_b(dd.y, ga.y, ub.y, g1, u1);
      rg.v[k] = __floats2bfloat162_rn(g0, g1);
      ru.v[k] = __floats2bfloat162_rn(u0, u1);
    }
    dg[i] = rg;
    du[i] = ru;
  }
}

__global__ void swiglu_bwd_scalar(long b, long e, const __nv_bfloat16* dh, const __nv_bfloat16* g, const __nv_bfloat16* u,
                                  __nv_bfloat16* dg, __nv_bfloat16* du) {
  for (long i = b + blockIdx.x * long(blockDim.x) + threadIdx.x; i < e; i += long(gridDim.x) * blockDim.x) {
    float rg, ru;
    swiglu_b(__bfloat162float(dh[i]), __bfloat162float(g[i]), __bfloat162float(u[i]), rg, ru);
    dg[i] = __float2bfloat16_rn(rg);
    du[i] = __float2bfloat16_rn(ru);
  }
}

__global__ void cvt_vec(long nv, const float4* __restrict__ x, Vec8* __restrict__ y) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < nv; i += long(gridDim.x) * blockDim.x) {
    const float4 a = x[2 * i], b = x[2 * i + 1];
    Vec8 r;
    r.v[0] = __floats2bfloat162_rn(a.x, a.y);
    r.v[1] = __floats2bfloat162_rn(a.z, a.w);
    r.v[2] = __floats2bfloat162_rn(b.x, b.y);
    r.v[3] = __floats2bfloat162_rn(b.z, b.w);
    y[i] = r;
  }
}

__global__ void widen_vec(long nv, const Vec8* __restrict__ x, float4* __restrict__ y) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < nv; i += long(gridDim.x) * blockDim.x) {
    const Vec8 a = x[i];
    const float2 p0 = __bfloat1622float2(a.v[0]), p1 = __bfloat1622float2(a.v[1]), p2 = __bfloat1622float2(a.v[2]),
                 p3 = __bfloat1622float2(a.v[3]);
    y[2 * i] = make_float4(p0.x, p0.y, p1.x, p1.y);
    y[2 * i + 1] = make_float4(p2.x, p2.y, p3.x, p3.y);
  }
}

__global__ void widen_scalar(long b, long e, const __nv_bfloat16* x, float* y) {
  for (long i = b + blockIdx.x * long(blockDim.x) + threadIdx.x; i < e; i += long(gridDim.x) * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}

__global__ void cvt_scalar(long b, long e, const float* x, __nv_bfloat16* y) {
  for (long i = b + blockIdx.x * long(blockDim.x) + threadIdx.x; i < e; i += long(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

// Every launcher's shape: when all its pointers are 16-byte aligned, the
// vector kernel over the first n / 8 vectors (vec(nv)); the scalar kernel over
// the rest [b, e) (tail(b, e)), all of it when they are not.
template <class Vec, class Tail> cudaError_t vectors_then_tail(long n, bool aligned, Vec vec, Tail tail) {
  if (n <= 0) return cudaSuccess;
  const long done = aligned ? n / 8 * 8 : 0;
  if (done > 0) vec(done / 8);
  if (done < n) tail(done, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t swiglu_forward(long n, const __nv_bfloat16* g, const __nv_bfloat16* u, __nv_bfloat16* h, cudaStream_t st) {
  return vectors_then_tail(
      n, aligned16(g) && aligned16(u) && aligned16(h),
      [&](long nv) {
        swiglu_fwd_vec<<<blocks_for(nv), kThreads, 0, st>>>(nv, reinterpret_cast<const Vec8*>(g), reinterpret_cast<const Vec8*>(u),
                                                           reinterpret_cast<Vec8*>(h));
      },
      [&](long b, long e) { swiglu_fwd_scalar<<<blocks_for(e - b), kThreads, 0, st>>>(b, e, g, u, h); });
}

cudaError_t swiglu_backward(long n, const __nv_bfloat16* dh, const __nv_bfloat16* g, const __nv_bfloat16* u,
                            __nv_bfloat16* dg, __nv_bfloat16* du, cudaStream_t st) {
  return vectors_then_tail(
      n, aligned16(dh) && aligned16(g) && aligned16(u) && aligned16(dg) && aligned16(du),
      [&](long nv) {
        swiglu_bwd_vec<<<blocks_for(nv), kThreads, 0, st>>>(nv, reinterpret_cast<const Vec8*>(dh), reinterpret_cast<const Vec8*>(g),
                                                           reinterpret_cast<const Vec8*>(u), reinterpret_cast<Vec8*>(dg),
                                                           reinterpret_cast<Vec8*>(du));
      },
      [&](long b, long e) { swiglu_bwd_scalar<<<blocks_for(e - b), kThreads, 0, st>>>(b, e, dh, g, u, dg, du); });
}

cudaError_t f32_to_bf16(long n, const float* x, __nv_bfloat16* y, cudaStream_t st) {
  return vectors_then_tail(
      n, aligned16(x) && aligned16(y),
      [&](long nv) { cvt_vec<<<blocks_for(nv), kThreads, 0, st>>>(nv, reinterpret_cast<const float4*>(x), reinterpret_cast<Vec8*>(y)); },
      [&](long b, long e) { cvt_scalar<<<blocks_for(e - b), kThreads, 0, st>>>(b, e, x, y); });
}

cudaError_t bf16_to_f32(long n, const __nv_bfloat16* x, float* y, cudaStream_t st) {
  return vectors_then_tail(
      n, aligned16(x) && aligned16(y),
      [&](long nv) { widen_vec<<<blocks_for(nv), kThreads, 0, st>>>(nv, reinterpret_cast<const Vec8*>(x), reinterpret_cast<float4*>(y)); },
      [&](long b, long e) { widen_scalar<<<blocks_for(e - b), kThreads, 0, st>>>(b, e, x, y); });
}

}  // namespace ew
}  // namespace burst

// RMSNorm kernels (see rmsnorm_cuda.h).
//
// forward / backward dx: one 256-thread block per row; the row is read twice
// (the sum of squares, then the output), the second time from L1 (a 4096-wide
// bf16 row is 8 KB). backward dw: a grid of (256-column tiles x row chunks),
// each thread one column over one chunk (coalesced across the warp), then one
// thread per column adds the chunks' sums into dw in a fixed order.
// Floors per element (bf16): forward 4 B (x in, y out), backward 6 B
// (dy, x in, dx out); these kernels move 4 B and 10 B (dw re-reads dy and x).
#include "kernels/cuda/rmsnorm_cuda.h"

#include <cuda_bf16.h>

namespace burst {
namespace rn {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float block_sum(float v, float* sm) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sm[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kThreads / 32 ? sm[threadIdx.x] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) sm[kThreads / 32] = v;
  }
  __syncthreads();
  return sm[kThreads / 32];
}

template <class T>
__global__ void __launch_bounds__(kThreads) fwd_kernel(long H, const T* __restrict__ x, const T* __restrict__ w, float eps,
                                                       T* __restrict__ y, float* __restrict__ rstd) {
  __shared__ float sm[kThreads / 32 + 1];
  const long row = blockIdx.x;
  const T* xr = x + row * H;
  float ss = 0.f;
  for (long h = threadIdx.x; h < H; h += kThreads) {
    const float v = to_f(xr[h]);
    ss += v * v;
  }
  ss = block_sum(ss, sm);
  const float r = rsqrtf(ss / float(H) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  T* yr = y + row * H;
  for (long h = threadIdx.x; h < H; h += kThreads) yr[h] = from_f<T>(to_f(xr[h]) * r * to_f(w[h]));
}

template <class T>
__global__ void __launch_bounds__(kThreads) bwd_dx_kernel(long H, const T* __restrict__ dy, const T* __restrict__ x,
                                                          const T* __restrict__ w, const float* __restrict__ rstd,
                                                          T* __restrict__ dx) {
  __shared__ float sm[kThreads / 32 + 1];
  const long row = blockIdx.x;
  const T *dyr = dy + row * H, *xr = x + row * H;
  float gx = 0.f;
  for (long h = threadIdx.x; h < H; h += kThreads) gx += to_f(dyr[h]) * to_f(w[h]) * to_f(xr[h]);
  gx = block_sum(gx, sm);
  const float r = rstd[row], c = r * r * gx / float(H);
  T* dxr = dx + row * H;
  for (long h = threadIdx.x; h < H; h += kThreads) dxr[h] = from_f<T>(r * (to_f(dyr[h]) * to_f(w[h]) - to_f(xr[h]) * c));
}

template <class T>
__global__ void __launch_bounds__(kThreads) bwd_dw_partial(long N, long H, long rows_per_chunk, const T* __restrict__ dy,
                                                           const T* __restrict__ x, const float* __restrict__ rstd,
                                                           float* __restrict__ part) {
  const long h = long(blockIdx.x) * kThreads + threadIdx.x;
  if (h >= H) return;
  const long r0 = long(blockIdx.y) * rows_per_chunk, r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
  float s = 0.f;
  for (long i = r0; i < r1; ++i) s += to_f(dy[i * H + h]) * to_f(x[i * H + h]) * rstd[i];
  part[long(blockIdx.y) * H + h] = s;
}

__global__ void bwd_dw_sum(long H, int chunks, const float* __restrict__ part, float* __restrict__ dw) {
  const long h = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h >= H) return;
  float s = 0.f;
  for (int c = 0; c < chunks; ++c) s += part[long(c) * H + h];
  dw[h] += s;
}

void chunking(long N, long H, int& chunks, long& rows) {
  const long col_blocks = (H + kThreads - 1) / kThreads;
  long c = 1024 / (col_blocks > 0 ? col_blocks : 1);  // ~1024 blocks: several waves on 132 SMs
  if (c < 1) c = 1;
  if (c > N) c = N > 0 ? N : 1;
  if (c > 65535) c = 65535;
  rows = (N + c - 1) / c;
  chunks = int((N + rows - 1) / rows);
}

template <class T>
cudaError_t fwd(long N, long H, const void* x, const void* w, float eps, void* y, float* rstd, cudaStream_t st) {
  fwd_kernel<T><<<unsigned(N), kThreads, 0, st>>>(H, static_cast<const T*>(x), static_cast<const T*>(w), eps,
                                                  static_cast<T*>(y), rstd);
  return cudaGetLastError();
}

template <class T>
cudaError_t bwd(long N, long H, const void* dy, const void* x, const void* w, const float* rstd, void* dx, float* dw,
                void* ws, cudaStream_t st) {
  bwd_dx_kernel<T><<<unsigned(N), kThreads, 0, st>>>(H, static_cast<const T*>(dy), static_cast<const T*>(x),
                                                     static_cast<const T*>(w), rstd, static_cast<T*>(dx));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  int chunks;
  long rows;
  chunking(N, H, chunks, rows);
  float* part = static_cast<float*>(ws);
  const dim3 grid(unsigned((H + kThreads - 1) / kThreads), unsigned(chunks));
  bwd_dw_partial<T><<<grid, kThreads, 0, st>>>(N, H, rows, static_cast<const T*>(dy), static_cast<const T*>(x), rstd, part);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  bwd_dw_sum<<<unsigned((H + 255) / 256), 256, 0, st>>>(H, chunks, part, dw);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm_forward(int dtype, long N, long H, const void* x, const void* w, float eps, void* y, float* rstd,
                            cudaStream_t stream) {
  if (N <= 0 || H <= 0) return cudaSuccess;
  if (N > 0x7fffffffL) return cudaErrorInvalidValue;
  return dtype == 1 ? fwd<__nv_bfloat16>(N, H, x, w, eps, y, rstd, stream) : fwd<float>(N, H, x, w, eps, y, rstd, stream);
}

size_t rmsnorm_backward_workspace(long N, long H) {
  if (N <= 0 || H <= 0) return 0;
  int chunks;
  long rows;
  chunking(N, H, chunks, rows);
  return size_t(chunks) * size_t(H) * sizeof(float);
}

cudaError_t rmsnorm_backward(int dtype, long N, long H, const void* dy, const void* x, const void* w, const float* rstd,
                             void* dx, float* dw, void* workspace, cudaStream_t stream) {
  if (N <= 0 || H <= 0) return cudaSuccess;
  if (N > 0x7fffffffL) return cudaErrorInvalidValue;
  return dtype == 1 ? bwd<__nv_bfloat16>(N, H, dy, x, w, rstd, dx, dw, workspace, stream)
                    : bwd<float>(N, H, dy, x, w, rstd, dx, dw, workspace, stream);
}

}  // namespace rn
}  // namespace burst

// RMSNorm kernels (see rmsnorm_cuda.h).
//
// forward / backward dx: one 256-thread block per row; the row is read twice
// (the sum of squares, then the output), the second time from L1 (a 4096-wide
// bf16 row is 8 KB). backward dw: a grid of (256-column tiles x row chunks),
// each thread one column over one chunk (coalesced across the warp), then one
// thread per column adds the chunks' sums into dw in a fixed order.
// Floors per element (bf16): forward 4 B (x in, y out), backward 6 B
// (dy, x in, dx out); these kernels move 4 B and 10 B (dw re-reads dy and x).
//
// v2 (rows whose width H is a multiple of one 16-byte vector, at most
// kMaxVec vectors per thread, 16-byte aligned arrays; the kernels above stay
// for the rest): each thread loads its columns as 16-byte vectors once into
// registers (v1 loaded 2-byte elements, twice). The backward is one kernel:
// kBwdBlocks blocks walk the rows (row = block, block + kBwdBlocks, ...),
// write dx and keep their columns' dw sums in registers, then store one
// partial row each; bwd_dw_sum adds the kBwdBlocks partials in a fixed
// order (deterministic). It moves the floor's 6 B per element (+ the
// partials, kBwdBlocks x H x 4 B).
#include "kernels/cuda/rmsnorm_cuda.h"

#include <cuda_bf16.h>

#include <cstdint>

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
                                                          const T* __restrict__ res, T* __restrict__ dx) {
  __shared__ float sm[kThreads / 32 + 1];
  const long row = blockIdx.x;
  const T *dyr = dy + row * H, *xr = x + row * H;
  float gx = 0.f;
  for (long h = threadIdx.x; h < H; h += kThreads) gx += to_f(dyr[h]) * to_f(w[h]) * to_f(xr[h]);
  gx = block_sum(gx, sm);
  const float r = rstd[row], c = r * r * gx / float(H);
  T* dxr = dx + row * H;
  const T* rr = res ? res + row * H : nullptr;
  for (long h = threadIdx.x; h < H; h += kThreads)
    dxr[h] = from_f<T>(r * (to_f(dyr[h]) * to_f(w[h]) - to_f(xr[h]) * c) + (rr ? to_f(rr[h]) : 0.f));
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

// ---- v2: 16-byte vectors in registers ----
constexpr int kMaxVec = 4;        // vectors per thread (NV = 1, 2 or 4): H <= 256 x 4 x 8 = 8192 (bf16), 4096 (fp32)
constexpr int kBwdBlocks = 512;   // backward blocks (~4 per SM on 132 SMs): the dw partials' rows

template <class T>
struct Vec {
  static constexpr int n = 16 / int(sizeof(T));  // elements per 16-byte vector
};

__device__ __forceinline__ void unpack(const uint4& u, float (&f)[8], __nv_bfloat16) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ void unpack(const uint4& u, float (&f)[4], float) {
  const float* p = reinterpret_cast<const float*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) f[i] = p[i];
}
__device__ __forceinline__ uint4 pack(const float (&f)[8], __nv_bfloat16) {
  uint4 u;
  __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return u;
}
__device__ __forceinline__ uint4 pack(const float (&f)[4], float) {
  uint4 u;
  float* p = reinterpret_cast<float*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = f[i];
  return u;
}

// One block per row; thread t holds vectors t, t + kThreads, ... (nv of them
// in all; NV per thread at most: the register arrays are NV vectors long).
template <class T, int NV>
__global__ void __launch_bounds__(kThreads) fwd_vec_kernel(long H, const T* __restrict__ x, const T* __restrict__ w,
                                                           float eps, T* __restrict__ y, float* __restrict__ rstd) {
  constexpr int V = Vec<T>::n;
  __shared__ float sm[kThreads / 32 + 1];
  const long row = blockIdx.x;
  const int nv = int(H / V);
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * H);
  float xv[NV][V];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < nv) {
      unpack(__ldg(xr + j), xv[k], T());
#pragma unroll
      for (int e = 0; e < V; ++e) ss += xv[k][e] * xv[k][e];
    }
  }
  ss = block_sum(ss, sm);
  const float r = rsqrtf(ss / float(H) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  uint4* yr = reinterpret_cast<uint4*>(y + row * H);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < nv) {
      float wf[V];
      unpack(__ldg(wv + j), wf, T());
#pragma unroll
      for (int e = 0; e < V; ++e) xv[k][e] = xv[k][e] * r * wf[e];
      yr[j] = pack(xv[k], T());
    }
  }
}

// kBwdBlocks blocks over the rows: dx per row, the block's dw column sums in
// registers, one partial row per block at the end (part[blockIdx.x][h]).
template <class T, int NV>
__global__ void __launch_bounds__(kThreads) bwd_vec_kernel(long N, long H, const T* __restrict__ dy,
                                                           const T* __restrict__ x, const T* __restrict__ w,
                                                           const float* __restrict__ rstd, const T* __restrict__ res,
                                                           T* __restrict__ dx, float* __restrict__ part) {
  constexpr int V = Vec<T>::n;
  __shared__ float sm[kThreads / 32 + 1];
  const int nv = int(H / V);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  float wf[NV][V], acc[NV][V];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int j = threadIdx.x + k * kThreads;
#pragma unroll
    for (int e = 0; e < V; ++e) acc[k][e] = 0.f;
    if (j < nv) unpack(__ldg(wv + j), wf[k], T());
  }
  for (long row = blockIdx.x; row < N; row += gridDim.x) {
    const uint4* dyr = reinterpret_cast<const uint4*>(dy + row * H);
    const uint4* xr = reinterpret_cast<const uint4*>(x + row * H);
    float dyv[NV][V], xv[NV][V];
    float gx = 0.f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = threadIdx.x + k * kThreads;
      if (j < nv) {
        unpack(__ldg(dyr + j), dyv[k], T());
        unpack(__ldg(xr + j), xv[k], T());
#pragma unroll
        for (int e = 0; e < V; ++e) gx += dyv[k][e] * wf[k][e] * xv[k][e];
      }
    }
    gx = block_sum(gx, sm);
    const float r = rstd[row], c = r * r * gx / float(H);
    uint4* dxr = reinterpret_cast<uint4*>(dx + row * H);
    const uint4* rr = res ? reinterpret_cast<const uint4*>(res + row * H) : nullptr;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = threadIdx.x + k * kThreads;
      if (j < nv) {
        float o[V], rv[V];
        if (rr) {
          unpack(__ldg(rr + j), rv, T());
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) rv[e] = 0.f;
        }
#pragma unroll
        for (int e = 0; e < V; ++e) {
          o[e] = r * (dyv[k][e] * wf[k][e] - xv[k][e] * c) + rv[e];
          acc[k][e] += dyv[k][e] * xv[k][e] * r;
        }
        dxr[j] = pack(o, T());
      }
    }
  }
  float* pr = part + long(blockIdx.x) * H;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < nv) {
#pragma unroll
      for (int e = 0; e < V; ++e) pr[long(j) * V + e] = acc[k][e];
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Vectors per thread for rows of H (1, 2 or 4), 0 where v2 does not apply.
template <class T>
int vec_per_thread(long H) {
  if (H % Vec<T>::n != 0) return 0;
  const long per = (H / Vec<T>::n + kThreads - 1) / kThreads;
  return per <= 1 ? 1 : per <= 2 ? 2 : per <= kMaxVec ? kMaxVec : 0;
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
  const int nv = vec_per_thread<T>(H);
  if (nv > 0 && aligned16(x) && aligned16(w) && aligned16(y)) {
    auto k = nv == 1 ? fwd_vec_kernel<T, 1> : nv == 2 ? fwd_vec_kernel<T, 2> : fwd_vec_kernel<T, kMaxVec>;
    k<<<unsigned(N), kThreads, 0, st>>>(H, static_cast<const T*>(x), static_cast<const T*>(w), eps, static_cast<T*>(y),
                                        rstd);
    return cudaGetLastError();
  }
  fwd_kernel<T><<<unsigned(N), kThreads, 0, st>>>(H, static_cast<const T*>(x), static_cast<const T*>(w), eps,
                                                  static_cast<T*>(y), rstd);
  return cudaGetLastError();
}

template <class T>
cudaError_t bwd(long N, long H, const void* dy, const void* x, const void* w, const float* rstd, const void* res,
                void* dx, float* dw, void* ws, cudaStream_t st) {
  float* part = static_cast<float*>(ws);
  cudaError_t e;
  const int nv = vec_per_thread<T>(H);
  if (nv > 0 && aligned16(dy) && aligned16(x) && aligned16(w) && aligned16(dx) && aligned16(res)) {
    const int blocks = int(N < kBwdBlocks ? N : kBwdBlocks);
    auto k = nv == 1 ? bwd_vec_kernel<T, 1> : nv == 2 ? bwd_vec_kernel<T, 2> : bwd_vec_kernel<T, kMaxVec>;
    k<<<unsigned(blocks), kThreads, 0, st>>>(N, H, static_cast<const T*>(dy), static_cast<const T*>(x),
                                             static_cast<const T*>(w), rstd, static_cast<const T*>(res),
                                             static_cast<T*>(dx), part);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    bwd_dw_sum<<<unsigned((H + 255) / 256), 256, 0, st>>>(H, blocks, part, dw);
    return cudaGetLastError();
  }
  bwd_dx_kernel<T><<<unsigned(N), kThreads, 0, st>>>(H, static_cast<const T*>(dy), static_cast<const T*>(x),
                                                     static_cast<const T*>(w), rstd, static_cast<const T*>(res),
                                                     static_cast<T*>(dx));
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  int chunks;
  long rows;
  chunking(N, H, chunks, rows);
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
  // v1's chunks or v2's blocks (which path runs depends on the pointers' alignment too)
  const long v2 = N < kBwdBlocks ? N : kBwdBlocks;
  return size_t(chunks > v2 ? chunks : v2) * size_t(H) * sizeof(float);
}

cudaError_t rmsnorm_backward(int dtype, long N, long H, const void* dy, const void* x, const void* w, const float* rstd,
                             const void* residual, void* dx, float* dw, void* workspace, cudaStream_t stream) {
  if (N <= 0 || H <= 0) return cudaSuccess;
  if (N > 0x7fffffffL) return cudaErrorInvalidValue;
  return dtype == 1 ? bwd<__nv_bfloat16>(N, H, dy, x, w, rstd, residual, dx, dw, workspace, stream)
                    : bwd<float>(N, H, dy, x, w, rstd, residual, dx, dw, workspace, stream);
}

}  // namespace rn
}  // namespace burst

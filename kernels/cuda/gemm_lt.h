// Row-major GEMM through cuBLASLt: the CUDA path of burst::kernels::gemm
// (kernels/cuda/gemm_cuda.hpp maps Kokkos views onto this). No Kokkos here.
//
//   C[m, n] = alpha * op(A) * op(B) + beta * C,  row-major, op = 'N' or 'T'
//
// Types (in -> out, compute):
//   bf16 -> bf16 or fp32, fp32 accumulate (CUBLAS_COMPUTE_32F)
//   fp32 -> fp32, plain fp32 (CUBLAS_COMPUTE_32F: no TF32, as the portable kernel)
//   fp64 -> fp64 (CUBLAS_COMPUTE_64F)
// beta = 0 never reads C (a NaN-poisoned C is overwritten, as BLAS).
//
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt
// is called with the operands swapped and m, n exchanged, no copies.
//
// One cublasLt handle, one 32 MiB workspace (cuBLAS' recommendation for
// Hopper) and one cache of (descriptors, heuristic algorithm) per distinct
// call shape, kept for the process (release() frees them). Calls are
// asynchronous on `stream`; the workspace is shared by every call, so all
// calls must go to one stream (or be ordered between streams by the caller).
// Not thread-safe beyond a mutex around the cache.
//
// Gemm::tune (kernels/cuda/gemm_cuda.hpp: BURST_GEMM_TUNE), asked only by
// the call that makes a shape's plan; when it answers true, the heuristic's first 8 algorithms are
// timed on the call's own operands (into a scratch D when repeating the call
// would not be harmless, i.e. an in-place accumulation) and the fastest is
// kept for the shape if it beats the first by 2%; one line per tuned shape
// goes to stderr. Off by default: the heuristic's first choice is the
// same on every run, a timed choice may differ run to run (and with it the
// rounding of the results).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace burst {
namespace lt {

enum DType : int { kF32 = 0, kBF16 = 1, kF64 = 2 };

struct Gemm {
  char ta = 'N', tb = 'N';
  long m = 0, n = 0, k = 0;
  long lda = 0, ldb = 0, ldc = 0;  // row strides (elements) of A, B, C as stored
  DType a_type = kBF16, b_type = kBF16, c_type = kBF16;
  bool (*tune)() = nullptr;  // a new shape's plan: choose its algorithm by timing? (see above; null: no)
};

// Is this type combination one cuBLASLt runs here?
bool supported(DType a, DType b, DType c);

// Returns a short message (static storage) on failure, nullptr on success.
// D (nullptr: C) receives alpha op(A) op(B) + beta C; a separate D has C's type
// and row stride (ldc), and C is then only read.
const char* gemm(const Gemm& g, double alpha, const void* A, const void* B, double beta, const void* C, void* D,
                 cudaStream_t stream);
inline const char* gemm(const Gemm& g, double alpha, const void* A, const void* B, double beta, void* C, cudaStream_t stream) {
  return gemm(g, alpha, A, B, beta, C, C, stream);
}

// Workspace bytes held (0 before the first call): counted by the benches.
size_t workspace_bytes();
// How many calls went through cuBLASLt (tests check the dispatch).
long call_count();
// How many plans had their algorithm chosen by timing (BURST_GEMM_TUNE=1),
// and how many of those chose another than the heuristic's first.
long tuned_plans();
long tuned_changed();
// Frees the handle, the workspace and the cache (the next call re-creates them).
void release();

}  // namespace lt
}  // namespace burst

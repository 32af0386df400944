// Cross-entropy over rows of logits on the GPU, one kernel: per row an online
// log-sum-exp over the vocabulary (one read), the loss lse - x[target], and
// the gradient (softmax - onehot) * scale written in place or to a separate
// buffer (a second read and one write). The CUDA path of
// burst::kernels::cross_entropy and so of the fused LM head
// (kernels/lm_head_loss.hpp; ALGORITHMS.md section 8). No Kokkos here.
//
// logits [rows, V] (row stride ld elements), bf16 or fp32; dlogits the same
// type (may equal logits: each element is read before the same thread
// writes it; nullptr = loss only). Rows whose target is `ignore` get loss 0
// and a zero gradient. A target outside [0, V) (and not `ignore`) is
// reported through CeAccum::bad_row (the smallest such row + 1); that row's
// outputs are unspecified. fp32 arithmetic throughout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace burst {
namespace ce {

// Device-side sums over the rows of every call since the last reset.
struct CeAccum {
  double loss_sum;                 // sum of losses over valid rows
  unsigned long long valid;        // rows whose target is not `ignore`
  unsigned long long bad_row;      // 0, or 1 + the smallest row with an invalid target
};

cudaError_t accum_reset(CeAccum* acc, cudaStream_t stream);

// dtype: 0 = fp32, 1 = bf16. loss [rows] fp32 (nullptr = not written).
cudaError_t cross_entropy_rows(int dtype, long rows, long V, const void* logits, long ld, void* dlogits, long ldd,
                               const std::int32_t* target, std::int32_t ignore, float* loss, float scale, CeAccum* acc,
                               cudaStream_t stream);

}  // namespace ce
}  // namespace burst

// The CUDA backend of kernels/cross_entropy.hpp (the tpl layer): bf16 and
// float logits in CUDA memory with unit column stride go to the one-kernel
// online-LSE cross-entropy of kernels/cuda/cross_entropy_cuda.h (loss and
// in-place gradient in one launch, two reads and one write per logit);
// other views run the portable kernel. One host wait per call (the loss sum,
// valid count and the first invalid target come back together, 24 bytes).
// An invalid target throws the portable kernel's error, but after the launch:
// the outputs of that call are then unspecified. Included by
// kernels/cross_entropy.hpp only, on CUDA builds.
#pragma once

#ifndef BURST_CROSS_ENTROPY_HPP_INCLUDES_CUDA
#error "include kernels/cross_entropy.hpp, not kernels/cuda/cross_entropy_cuda.hpp"
#endif

#include "kernels/cuda/cross_entropy_cuda.h"

#include <type_traits>

namespace burst::kernels::cuda {

template <class T, class Mem> constexpr bool ce_dispatches() {
  using U = std::remove_const_t<T>;
  return (std::is_same<U, bf16>::value || std::is_same<U, float>::value) && std::is_same<Mem, Kokkos::CudaSpace>::value;
}

// The kept device accumulator (released at Kokkos::finalize).
ce::CeAccum* ce_accum();
// Copies the accumulator back (waits on the stream) and throws the portable
// kernel's error for an invalid target.
void ce_finish(ce::CeAccum* acc, long V, double& sum, long& valid);
// Throws burst::Error (Internal) for a failed launch.
void ce_check(cudaError_t e);

template <class V> bool rows_unit_stride(const V& v) { return v.extent(0) <= 1 || v.extent(1) <= 1 || v.stride(1) == 1; }
template <class V> long ld_of(const V& v) { return v.extent(0) <= 1 ? long(v.extent(1)) : long(v.stride(0)); }

template <class T, class Mem>
bool ce_usable(const Kokkos::View<const T**, Layout, Mem>& logits, const Kokkos::View<T**, Layout, Mem>& dlogits) {
  return logits.extent(0) > 0 && logits.extent(1) > 0 && rows_unit_stride(logits) &&
         (dlogits.extent(0) == 0 || rows_unit_stride(dlogits)) && logits.extent(0) <= 0x7fffffffL;
}

template <class T, class Mem>
LossSum cross_entropy_cuda(Kokkos::View<const T**, Layout, Mem> logits, Kokkos::View<const std::int32_t*, Layout, Mem> target,
                           Kokkos::View<accum_t<T>*, Layout, Mem> loss, Kokkos::View<T**, Layout, Mem> dlogits,
                           double grad_scale) {
  static_assert(std::is_same<accum_t<T>, float>::value, "the CUDA cross-entropy writes fp32 losses");
  const long N = long(logits.extent(0)), V = long(logits.extent(1));
  const bool grad = dlogits.extent(0) > 0;
  const cudaStream_t st = Kokkos::Cuda().cuda_stream();
  ce::CeAccum* acc = ce_accum();
  ce_check(ce::accum_reset(acc, st));
  ce_check(ce::cross_entropy_rows(std::is_same<T, bf16>::value ? 1 : 0, N, V, logits.data(), ld_of(logits),
                                  grad ? static_cast<void*>(dlogits.data()) : nullptr, grad ? ld_of(dlogits) : 0,
                                  target.data(), kIgnoreIndex, loss.data(), float(grad_scale), acc, st));
  LossSum r;
  ce_finish(acc, V, r.sum, r.valid);
  return r;
}

}  // namespace burst::kernels::cuda

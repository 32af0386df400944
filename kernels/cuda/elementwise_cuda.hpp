// The CUDA backend of kernels/activations.hpp (the tpl layer): SwiGLU forward
// and backward, the residual add and the fp32 -> bf16 conversion on bf16
// views in CUDA memory whose spans are contiguous go to
// kernels/cuda/elementwise_cuda.h (flat 16-byte accesses instead of the
// portable kernels' 2-byte accesses with a div/mod per element); other views
// run the portable kernels. Included by kernels/activations.hpp only, on
// CUDA builds.
#pragma once

#ifndef BURST_ACTIVATIONS_HPP_INCLUDES_CUDA
#error "include kernels/activations.hpp, not kernels/cuda/elementwise_cuda.hpp"
#endif

#include "kernels/cuda/elementwise_cuda.h"
#include "kernels/cuda/tpl_common.hpp"

namespace burst::kernels::cuda {

template <class T, class Mem> constexpr bool ew_dispatches() { return is_bf16<T>() && in_cuda_mem<Mem>(); }

inline const __nv_bfloat16* nvb(const bf16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
inline __nv_bfloat16* nvb(bf16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace burst::kernels::cuda

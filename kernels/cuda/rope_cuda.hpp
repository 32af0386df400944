// The CUDA backend of kernels/rope.hpp (the tpl layer): contiguous bf16 and
// float views in CUDA memory whose head dim is a multiple of 16 go to
// kernels/cuda/rope_cuda.h (a block per token: the angles once in shared
// memory, 16-byte vectors); other views run the portable kernel.
// Included by kernels/rope.hpp only, on CUDA builds.
#pragma once

#ifndef BURST_ROPE_HPP_INCLUDES_CUDA
#error "include kernels/rope.hpp, not kernels/cuda/rope_cuda.hpp"
#endif

#include "kernels/cuda/rope_cuda.h"
#include "kernels/cuda/tpl_common.hpp"

#include "core/env.hpp"

namespace burst::kernels::cuda {

template <class TI, class TO, class Mem> constexpr bool rope_dispatches() {
  return bf16_or_float<TI>() && bf16_or_float<TO>() && in_cuda_mem<Mem>();
}
// The CUDA RoPE is the default on CUDA views since its first GPU run passed
// RopeCuda.MatchesDoubleReference and the bf16 block's check against double
// (2026-12-05, H100; -0.5 ms on the 1B block, -0.9 ms on the 7B). Setting
// BURST_ROPE_CUDA=0 runs the portable kernel instead (a side-by-side
// measurement, or a fallback); 1 or unset, the CUDA kernel. Another value is
// a configuration error (status 2) naming it, not read as either: a typo
// must not silently turn an A/B run into two runs of one kernel. Read once.
inline bool rope_cuda_enabled() {
  static const bool on = rope_cuda_switch();  // core/env.hpp
  return on;
}

}  // namespace burst::kernels::cuda

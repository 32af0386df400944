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

#include <cstdlib>

namespace burst::kernels::cuda {

template <class TI, class TO, class Mem> constexpr bool rope_dispatches() {
  return bf16_or_float<TI>() && bf16_or_float<TO>() && in_cuda_mem<Mem>();
}
// The CUDA RoPE runs only with BURST_ROPE_CUDA=1 until its first GPU run has
// passed RopeCuda.MatchesDoubleReference (written 2026-12-05, when the
// session's device time had run out): until then the portable kernel, run
// on the H200 since 2026-12-02, stays the default.
inline bool rope_cuda_enabled() {
  const char* v = std::getenv("BURST_ROPE_CUDA");
  return v != nullptr && v[0] == '1' && v[1] == '\0';
}

}  // namespace burst::kernels::cuda

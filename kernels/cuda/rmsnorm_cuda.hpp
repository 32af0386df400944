// The CUDA backend of kernels/rmsnorm.hpp (the tpl layer): bf16 and float
// views in CUDA memory, contiguous, go to kernels/cuda/rmsnorm_cuda.h (a
// block per row instead of the portable thread per row, whose loads stride
// by a whole row across a warp; and a chunked, deterministic dw instead of
// one thread per column over all rows). Other views run the portable kernels.
// Included by kernels/rmsnorm.hpp only, on CUDA builds.
#pragma once

#ifndef BURST_RMSNORM_HPP_INCLUDES_CUDA
#error "include kernels/rmsnorm.hpp, not kernels/cuda/rmsnorm_cuda.hpp"
#endif

#include "kernels/cuda/rmsnorm_cuda.h"
#include "kernels/cuda/tpl_common.hpp"

namespace burst::kernels::cuda {

template <class T, class Mem> constexpr bool rmsnorm_dispatches() { return bf16_or_float<T>() && in_cuda_mem<Mem>(); }

}  // namespace burst::kernels::cuda

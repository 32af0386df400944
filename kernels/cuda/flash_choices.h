// The values of BURST_FA_FORWARD / BURST_FA_BACKWARD, in one list: the CUDA
// kernel library maps them to its kernels (kernels/cuda/flash_attn.cu, in
// this order), and `burst` refuses another value at start
// (cli/environment.hpp). Plain C++, so host builds include it too.
#pragma once

namespace burst::fa {

inline constexpr const char* kKernelChoices[] = {"tma", "tma80", "tma64", "tma12", "tma176", "tma128", "wgmma", "mma"};
inline constexpr int kNumKernelChoices = int(sizeof kKernelChoices / sizeof kKernelChoices[0]);

}  // namespace burst::fa

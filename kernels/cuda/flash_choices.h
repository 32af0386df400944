// The values of BURST_FA_FORWARD / BURST_FA_BACKWARD, in one list: the CUDA
// kernel library maps them to its kernels (kernels/cuda/flash_attn.cu, in
// this order), and `burst` refuses another value at start
// (cli/environment.hpp). Plain C++, so host builds include it too.
#pragma once

#include <cstring>
#include <string>

namespace burst::fa {

inline constexpr const char* kKernelChoices[] = {"tma", "tma80", "tma64", "tma12", "tma176", "tma128", "wgmma", "mma"};
inline constexpr int kNumKernelChoices = int(sizeof kKernelChoices / sizeof kKernelChoices[0]);

// The index of v in kKernelChoices, -1 if it is not one of them.
inline int kernel_choice_index(const char* v) {
  for (int i = 0; i < kNumKernelChoices; ++i)
    if (std::strcmp(v, kKernelChoices[i]) == 0) return i;
  return -1;
}
// "tma, tma80, ...": the list as messages name it.
inline std::string kernel_choice_list() {
  std::string out;
  for (const char* c : kKernelChoices) out += (out.empty() ? "" : ", ") + std::string(c);
  return out;
}

}  // namespace burst::fa

#include "core/blas_core.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace burst {

namespace {

std::string openblas_core() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!fn) return "";
  const char* c = fn();
  return c ? std::string(c) : std::string();
}

}  // namespace

std::string blas_core_name() {
  const std::string c = openblas_core();
  return c.empty() ? "" : "OpenBLAS " + c;
}

void select_blas_core(char** argv) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("BURST_BLAS_CORE_SET")) return;
  std::string core = openblas_core();
  if (core.empty()) return;
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  // OpenBLAS' fallbacks for CPUs it does not recognise (and older cores).
  const bool weak = core == "prescott" || core == "core2" || core == "penryn" || core == "dunnington" ||
                    core == "nehalem" || core == "unknown";
  if (!weak) return;
  __builtin_cpu_init();
  const char* want = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") ? "SkylakeX"
                     : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")   ? "Haswell"
                                                                                          : nullptr;
  if (!want) return;
  setenv("OPENBLAS_CORETYPE", want, 1);
  setenv("BURST_BLAS_CORE_SET", "1", 1);  // never loop
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the slow kernels
#else
  (void)argv;
#endif
}

}  // namespace burst

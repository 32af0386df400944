// The environment variables that change what a run does: the engine's own
// (README, "Environment variables"), then the launchers' and libraries'.
// `burst info` prints them; every bench's HDF5 output keeps them in its
// `environment` attribute, so a result file says which kernels and switches
// produced it (an A/B under BURST_FA_BACKWARD, say).
#pragma once

#include "core/error.hpp"

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace burst::cli {

// (A static array: an initializer_list returned from a function would outlive its elements.)
inline constexpr const char* kRunEnvironment[] = {
    "BURST_GPUS_PER_NODE", "BURST_WAIT", "BURST_COMM", "BURST_FA_FORWARD", "BURST_FA_BACKWARD",
    "BURST_ROPE_CUDA", "BURST_POISON", "BURST_RING_TIMERS", "KOKKOS_CUDA_MALLOC_ASYNC",
    "OMP_NUM_THREADS", "OMP_PROC_BIND", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES",
    "SLURM_JOB_ID", "SLURM_NTASKS_PER_NODE", "NCCL_NVLS_ENABLE", "OPENBLAS_CORETYPE"};

// "NAME=value" for each, "(unset)" where unset, joined by sep.
inline std::string run_environment(const std::string& sep) {
  std::string out;
  for (const char* v : kRunEnvironment) {
    const char* s = std::getenv(v);
    if (!out.empty()) out += sep;
    out += std::string(v) + "=" + (s ? s : "(unset)");
  }
  return out;
}

// The engine's switches whose values form a closed list, checked on every rank before any work: a value
// outside it is bad input (status 2) naming the variable, the value and the list. The CUDA kernel library
// reads BURST_FA_* itself (it only warns, having no error path of its own); a typo there would otherwise
// turn an A/B run into two runs of the default kernel. BURST_POISON, BURST_RING_TIMERS, BURST_WAIT and
// BURST_COMM are checked where they are read.
inline void check_run_environment() {
  auto one_of = [](const char* var, std::initializer_list<const char*> values) {
    const char* e = std::getenv(var);
    if (!e || !*e) return;
    std::string list;
    for (const char* v : values) {
      if (std::string(e) == v) return;
      list += (list.empty() ? "" : ", ") + std::string(v);
    }
    BURST_CHECK_CONFIG(false, var, "='", e, "': expected one of ", list);
  };
  for (const char* var : {"BURST_FA_FORWARD", "BURST_FA_BACKWARD"})
    one_of(var, {"tma", "tma80", "tma64", "tma12", "tma176", "wgmma", "mma"});
  one_of("BURST_ROPE_CUDA", {"1", "0"});
}

}  // namespace burst::cli

// The environment variables that change what a run does: the engine's own
// (README, "Environment variables"), then the launchers' and libraries'.
// `burst info` prints them; every bench's HDF5 output keeps them in its
// `environment` attribute, so a result file says which kernels and switches
// produced it (an A/B under BURST_FA_BACKWARD, say).
#pragma once

#include "core/env.hpp"
#include "core/error.hpp"
#include "kernels/cuda/flash_choices.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace burst::cli {

// (A static array: an initializer_list returned from a function would outlive its elements.)
inline constexpr const char* kRunEnvironment[] = {
    "BURST_GPUS_PER_NODE", "BURST_WAIT", "BURST_COMM", "BURST_FA_FORWARD", "BURST_FA_BACKWARD",
    "BURST_FA_MERGE", "BURST_GEMM_TUNE", "BURST_ROPE_CUDA", "BURST_POISON", "BURST_RING_TIMERS", "KOKKOS_CUDA_MALLOC_ASYNC",
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

// The switches the CUDA libraries read on their own, checked on every rank before any work, on every build:
// a value outside the list is bad input (status 2) naming the variable, the value and the list. The flash
// kernel library reads BURST_FA_* itself and only warns (it has no error path of its own), so a typo would
// otherwise turn an A/B run into two runs of the default kernel; BURST_ROPE_CUDA and BURST_FA_MERGE are
// read once each, by rope_cuda_switch / fa_merge_switch (core/env.hpp), here and in the kernels; BURST_GEMM_TUNE by gemm_tune_switch when a CUDA GEMM shape's plan is made; KOKKOS_CUDA_MALLOC_ASYNC (read by the patched Kokkos by its first character) by cuda_malloc_async_switch. BURST_POISON, BURST_RING_TIMERS, BURST_WAIT
// and BURST_COMM are checked where they are read.
inline void check_run_environment() {
  for (const char* var : {"BURST_FA_FORWARD", "BURST_FA_BACKWARD"}) {
    const char* e = std::getenv(var);
    if (!e || !*e) continue;
    BURST_CHECK_CONFIG(fa::kernel_choice_index(e) >= 0, var, "='", e, "': expected one of ", fa::kernel_choice_list());
  }
  rope_cuda_switch();
  fa_merge_switch();
  gemm_tune_switch();
  cuda_malloc_async_switch();
}

}  // namespace burst::cli

// The environment variables that change what a run does: the engine's own
// (README, "Environment variables"), then the launchers' and libraries'.
// `burst info` prints them; every bench's HDF5 output keeps them in its
// `environment` attribute, so a result file says which kernels and switches
// produced it (an A/B under BURST_FA_BACKWARD, say).
#pragma once

#include <cstdlib>
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

}  // namespace burst::cli

// The CUDA runtime calls comm/nccl_communicator.cpp makes, simulated on the
// host for the NCCL backend's tests on CPU-only machines (host builds with
// BURST_SIM_NCCL; selected at run time by BURST_COMM=nccl-sim). Not CUDA:
// the "device" is this process, its memory the host's, and the one compute
// stream (Kokkos' kernels on the host) is synchronous, so work ordered after
// an event on it waits here, in the host. Other streams are queues that
// comm/sim/sim_nccl.cpp's progress thread runs in order, as a GPU would.
#pragma once

#include <cstddef>

namespace burst_sim {
struct Stream;
struct Event;
}  // namespace burst_sim

typedef burst_sim::Stream* cudaStream_t;
typedef burst_sim::Event* cudaEvent_t;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorNoDevice = 100,
  cudaErrorNotReady = 600,
  cudaErrorLaunchTimeout = 702,
};

constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventDisableTiming = 0x2;

// The message of the last error this thread got from a simulated call, or the
// generic text of `e`.
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device);

namespace burst_sim {
// The stream the engine's kernels run on (synchronous: the host).
cudaStream_t compute_stream();
}  // namespace burst_sim

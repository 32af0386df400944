// The simulated NCCL of host builds (BURST_SIM_NCCL): comm/nccl_communicator.cpp
// compiled against comm/sim/cuda_runtime.h and comm/sim/nccl.h, run over MPI
// with one "GPU" per process, when BURST_COMM=nccl-sim. It exists to run the
// NCCL backend's code (lanes, group launches, events between streams, the
// collectives, the bounded waits and aborts) at several ranks on machines
// without GPUs: one GPU cannot hold two NCCL ranks.
#pragma once

namespace burst_sim {

// Did this process ask for the simulated NCCL (BURST_COMM=nccl-sim)? Read at
// start-up: MPI must then be started with MPI_THREAD_MULTIPLE (the simulated
// device's progress thread calls MPI beside the engine).
bool requested();

// Stops the progress thread (before MPI_Finalize). Operations still queued
// are abandoned. Safe to call when the simulation never started.
void shutdown();

}  // namespace burst_sim

#include "comm/runtime.hpp"

#include "comm/collectives.hpp"

#include "core/error.hpp"
#include "core/kokkos_compat.hpp"
#include "core/memory.hpp"

#ifdef BURST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace burst {

namespace {
Runtime* g_runtime = nullptr;
std::atomic<int> g_abort_code{1};
}

int launcher_rank() {
  for (const char* v : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "MPI_LOCALRANKID"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return 0;
}

Runtime::Runtime(int* argc, char*** argv) {
  BURST_ASSERT(g_runtime == nullptr, "only one Runtime may exist");
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_mpi_ = true;
  }
  // Reorder the world so that each node's ranks are contiguous.
  int ni = 0, nc = 1;
  node_local_rank(MPI_COMM_WORLD, &hw_local_rank_, &hw_local_size_, &ni, &nc);
  MPI_Comm_split(MPI_COMM_WORLD, 0, ni * hw_local_size_ + hw_local_rank_, &world_);
  g_runtime = this;
  try {
    topo_ = Topology::detect(world_, std::getenv("BURST_GPUS_PER_NODE"));
    node_cores_ = configure_wait_mode(world_);
  } catch (...) {
    g_runtime = nullptr;
    throw;
  }

#ifdef BURST_HAVE_CUDA
  // One hardware work queue per device, so NCCL and compute streams issue in
  // program order (what Megatron-style overlap relies on). Must precede any
  // CUDA call.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  cudaError_t err = cudaGetDeviceCount(&device_count_);
  BURST_CHECK(err == cudaSuccess && device_count_ > 0, ErrorKind::Internal,
              "this is a CUDA build but no CUDA device is visible (cudaGetDeviceCount: ", cudaGetErrorString(err), ")");
  device_id_ = hw_local_rank_ % device_count_;
#endif
  kx::initialize(-1, device_id_);
  MemoryTracker::global().install();
}

Runtime::~Runtime() {
  MemoryTracker::global().uninstall();
  Kokkos::finalize();
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
  g_runtime = nullptr;
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

Runtime& Runtime::current() {
  BURST_ASSERT(g_runtime != nullptr, "no burst::Runtime is alive");
  return *g_runtime;
}

std::string Runtime::hostname() const {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

void abort_job(int code) {
  // MPI_Abort ends this process by exit(), whose static destructors once
  // freed Kokkos' state under a main thread still computing (the watchdog
  // aborts from its own thread: a segfault, status 139, instead of its
  // message's status). A handler registered now runs first and ends the
  // process at once with the status; what stdio holds is written first.
  g_abort_code = code;
  std::fflush(stdout);
  std::fflush(stderr);
  std::atexit([] { std::_Exit(g_abort_code.load()); });
  // The message is in the pipe to the launcher, but MPI_Abort reaches the
  // launcher by another channel, and Hydra can end the job before it has
  // read the pipe (a stopped rank's peers once all aborted with nothing
  // shown: cli_rank_stopped_np4). A short pause lets it forward what was
  // written; it only delays an abort.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // should it return
}

void exit_on_error(const std::exception& e) {
  const auto* be = dynamic_cast<const Error*>(&e);
  const bool collective = be && be->collective();
  int rank = launcher_rank(), size = 1, inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  const bool mpi_up = inited && !finalized;
  if (mpi_up) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  const std::string msg = be ? be->message() : e.what();
  if (!collective || rank == 0) {
    if (size > 1 && !collective) std::fprintf(stderr, "burst: error (rank %d): %s\n", rank, msg.c_str());
    else std::fprintf(stderr, "burst: error: %s\n", msg.c_str());
    std::fflush(stderr);
  }
  const int code = be ? be->exit_code() : 1;
  if (mpi_up && !collective && size > 1) abort_job(code);
  if (g_runtime != nullptr) {
    // Tear down in order; the Runtime object itself is abandoned.
    MemoryTracker::global().uninstall();
    if (Kokkos::is_initialized()) Kokkos::finalize();
  }
  if (mpi_up) MPI_Finalize();
  std::exit(code);
}

}  // namespace burst

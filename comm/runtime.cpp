#include "comm/runtime.hpp"

#include "comm/collectives.hpp"

#include "core/error.hpp"
#include "core/kokkos_compat.hpp"
#include "core/memory.hpp"

#ifdef BURST_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef BURST_SIM_NCCL
#include "comm/sim/sim_nccl.hpp"
#endif

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace burst {

namespace {
Runtime* g_runtime = nullptr;
// MPI_COMM_WORLD's private duplicate, made first thing by every path that
// starts MPI (so that the processes' MPI_Comm_dup match): the start-up
// handshake and the agreement on a collective error use it alone.
MPI_Comm g_agree = MPI_COMM_NULL;
bool g_owns_mpi = false;
std::atomic<int> g_abort_code{1};

// MPI (unless already up) and the agreement communicator.
void start_mpi(int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
#ifdef BURST_SIM_NCCL
    // The simulated NCCL's progress thread calls MPI beside the engine.
    MPI_Init_thread(argc, argv, burst_sim::requested() ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
#else
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
#endif
    g_owns_mpi = true;
  }
  if (g_agree == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &g_agree);
}

void finish_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
#ifdef BURST_SIM_NCCL
  burst_sim::shutdown();
#endif
  if (g_agree != MPI_COMM_NULL) MPI_Comm_free(&g_agree);
  if (g_owns_mpi) MPI_Finalize();
}

// The start-up handshake, every process's first collective after start_mpi
// (the runtime's and startup_error's alike): which ranks failed before the
// runtime, and the first whose command digest differs from rank 0's.
struct Handshake {
  int size = 1;
  int first_failed = 0;   // size when none failed
  bool all_failed = false;
  int first_differs = 0;  // size when every digest is rank 0's
};
Handshake startup_handshake(bool failed, std::uint64_t digest) {
  Handshake h;
  int rank = 0;
  MPI_Comm_rank(g_agree, &rank);
  MPI_Comm_size(g_agree, &h.size);
  std::uint64_t root = digest;
  MPI_Bcast(&root, 1, MPI_UINT64_T, 0, g_agree);
  const int mine[3] = {failed ? rank : h.size, failed ? 1 : 0, digest != root ? rank : h.size};
  int all[3] = {0, 0, 0};
  MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, g_agree);
  h.first_failed = all[0];
  h.all_failed = all[1] == 1;
  h.first_differs = all[2];
  return h;
}

// Whether every rank arrives here, each with an error it takes for
// collective: an MPI_Ibarrier on the agreement communicator, waited for at
// most 10 s (comm.timeout_s when shorter; ranks that found the same bad input
// arrive within moments of each other).
bool every_rank_failed() {
  if (g_agree == MPI_COMM_NULL) return true;  // MPI started without a Runtime: no agreement (the old rule)
  double limit = 10;
  if (comm_timeout() > 0) limit = std::min(limit, std::max(1.0, comm_timeout()));
  MPI_Request req;
  MPI_Ibarrier(g_agree, &req);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace

int launcher_rank() {
  for (const char* v : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "MPI_LOCALRANKID"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return 0;
}

int launcher_size() {
  for (const char* v : {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
  }
  return 1;
}

int startup_error(int* argc, char*** argv, std::uint64_t command_digest, int code, const std::string& message,
                  const std::function<void()>& report) {
  if (launcher_size() <= 1) {
    if (launcher_rank() == 0) report();
    return code;
  }
  start_mpi(argc, argv);
  const Handshake h = startup_handshake(true, command_digest);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (h.all_failed) {
    if (rank == 0) report();
  } else if (code == 0) {
    report();  // --help or --version on some ranks only
  } else {
    std::fprintf(stderr, "burst: error (rank %d): %s\n", rank, message.c_str());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  finish_mpi();
  return h.all_failed || code != 0 ? code : 2;
}

Runtime::Runtime(int* argc, char*** argv, std::uint64_t command_digest) {
  BURST_ASSERT(g_runtime == nullptr, "only one Runtime may exist");
  start_mpi(argc, argv);
  {
    const Handshake h = startup_handshake(false, command_digest);
    if (h.first_failed < h.size) {
      // Ranks that failed before the runtime said why (startup_error); this
      // one leaves with them, quietly, instead of waiting for them.
      std::fflush(stdout);
      finish_mpi();
      std::exit(2);
    }
    BURST_CHECK_CONFIG(h.first_differs == h.size, "the ranks were started with different arguments or configuration files "
                       "(rank ", h.first_differs, " differs from rank 0); every rank must run the same command");
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
  finish_mpi();
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
  bool collective = be && be->collective();
  int rank = launcher_rank(), size = 1, inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  const bool mpi_up = inited && !finalized;
  if (mpi_up) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::string msg = be ? be->message() : e.what();
  // Bad input that only some ranks found (their environment, a file only
  // they read) would leave the others waiting in their next collective for
  // this rank, and rank 0 may not be among those that can say why.
  if (collective && mpi_up && size > 1 && !every_rank_failed()) {
    collective = false;
    msg += " (not every rank stopped on this error: aborting the job)";
  }
  // Without MPI (burst simulate under a launcher of several processes)
  // nothing is agreed: each process speaks for itself, with its rank.
  if (!mpi_up && launcher_size() > 1) collective = false, size = launcher_size();
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
#ifdef BURST_SIM_NCCL
  burst_sim::shutdown();
#endif
  if (mpi_up) MPI_Finalize();
  std::exit(code);
}

}  // namespace burst

#include "comm/collectives.hpp"

#include "core/error.hpp"

#include <chrono>
#include <thread>

namespace burst {

std::int64_t& mpi_bytes_sent() {
  static std::int64_t bytes = 0;
  return bytes;
}

namespace {
double g_timeout_s = 0;
}

void set_comm_timeout(double seconds) { g_timeout_s = seconds; }
double comm_timeout() { return g_timeout_s; }

void wait_bounded(MPI_Request& req, const char* what, std::int64_t bytes) { wait_all_bounded(&req, 1, what, bytes); }

void wait_all_bounded(MPI_Request* reqs, int n, const char* what, std::int64_t bytes) {
  if (n == 0) return;
  const double limit = g_timeout_s;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::chrono::microseconds nap(0);
  for (long polls = 0;; ++polls) {
    int done = 0;
    MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (limit > 0 && waited > limit) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      // The request cannot be cancelled (collectives have no MPI_Cancel);
      // the caller ends the job, which frees it.
      BURST_FAIL(ErrorKind::Comm, what, " (", bytes, " bytes) on rank ", rank, " waited ", limit,
                 " s (comm.timeout_s) for the other ranks: one of them died, stalls or took another path");
    }
    // Spin first (a healthy transfer completes in microseconds), then sleep
    // with a growing nap: ranks may share cores, and a waiting rank must not
    // take the core from the one it waits for (MPICH's own wait busy-polls).
    // MPI_Testall drives progress, so the nap stays short (at most 1 ms).
    if (polls > 200) nap = std::min(std::chrono::microseconds(1000), nap * 2 + std::chrono::microseconds(10));
    if (nap.count() > 0) std::this_thread::sleep_for(nap);
  }
}

void barrier_bounded(MPI_Comm comm, const char* what) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  wait_bounded(req, what, 0);
}

}  // namespace burst

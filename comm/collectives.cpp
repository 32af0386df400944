#include "comm/collectives.hpp"

#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace burst {

std::int64_t& mpi_bytes_sent() {
  static std::int64_t bytes = 0;
  return bytes;
}

namespace {
// Yielding waits nap after this long. A wait for a partner's turn on a shared
// core lasts a scheduler slice or two (a few ms); a longer one is for the
// partner's own work (an unbalanced layout), and there a yielding rank still
// took much of its core from the rank it shares it with: 4 ranks on 2 cores,
// burst on the contiguous causal layout at 2048 tokens, 0.110 s yielding up to
// 100 ms, 0.097 s up to 5 ms, 0.106 s up to 10 ms, while balanced runs kept
// their times (zigzag 0.069-0.071 s; training steps within 3%).
constexpr double kYieldS = 0.005;
double g_timeout_s = 0;
WaitMode g_wait = WaitMode::Yield;  // until configure_wait_mode: right on shared cores, near spinning on free ones
}

void set_wait_mode(WaitMode m) { g_wait = m; }
WaitMode wait_mode() { return g_wait; }
const char* wait_mode_name(WaitMode m) { return m == WaitMode::Spin ? "spin" : m == WaitMode::Yield ? "yield" : "nap"; }

int configure_wait_mode(MPI_Comm world) {
  // The node's ranks and the union of their CPU affinities.
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local = 1;
  MPI_Comm_size(node, &local);
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(int(c), &mine);
  }
  MPI_Allreduce(&mine, &all, int(sizeof(cpu_set_t)), MPI_BYTE, MPI_BOR, node);
  MPI_Comm_free(&node);
  const int cores = CPU_COUNT(&all);
  const char* env = std::getenv("BURST_WAIT");
  const std::string want = env && *env ? env : "auto";  // empty: unset, as every BURST_* switch
  // Every rank agrees before any throws (the environment may differ between
  // ranks: one that stopped alone would leave the others waiting unbounded).
  const int bad = want == "auto" || want == "spin" || want == "yield" || want == "nap" ? 0 : 1;
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, world);
  BURST_CHECK_CONFIG(!bad, "BURST_WAIT='", want, "': expected spin, yield, nap or auto");
  BURST_CHECK_CONFIG(!any_bad, "BURST_WAIT is not spin, yield, nap or auto on another rank");
  g_wait = want == "spin"    ? WaitMode::Spin
           : want == "yield" ? WaitMode::Yield
           : want == "nap"   ? WaitMode::Nap
           : local > cores   ? WaitMode::Yield
                             : WaitMode::Spin;
  return cores;
}

void set_comm_timeout(double seconds) { g_timeout_s = seconds; }
double comm_timeout() { return g_timeout_s; }
namespace {
const char* g_timeout_name = "comm.timeout_s";
}
const char* comm_timeout_name() { return g_timeout_name; }

CommTimeoutScope::CommTimeoutScope(double seconds, const char* name) : seconds_(g_timeout_s), name_(g_timeout_name) {
  g_timeout_s = seconds, g_timeout_name = name;
}
CommTimeoutScope::~CommTimeoutScope() { g_timeout_s = seconds_, g_timeout_name = name_; }

void wait_bounded(MPI_Request& req, const char* what, std::int64_t bytes, const char* why) {
  wait_all_bounded(&req, 1, what, bytes, why);
}

void wait_all_bounded(MPI_Request* reqs, int n, const char* what, std::int64_t bytes, const char* why) {
  if (n == 0) return;
  const double limit = g_timeout_s;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // Poll without sleeping for this long (yielding between polls in Yield
  // mode), then nap with a growing nap of at most 1 ms: Spin 100 ms, Yield
  // kYieldS; Nap polls only its first 200 times (a healthy transfer
  // completes in microseconds).
  const double poll_s = g_wait == WaitMode::Spin ? 0.1 : g_wait == WaitMode::Yield ? kYieldS : 0.0;
  std::chrono::microseconds nap(0);
  for (long polls = 0;; ++polls) {
    int done = 0;
    MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (limit > 0 && waited > limit) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      // The request cannot be cancelled (collectives have no MPI_Cancel), and
      // MPI may still write into its buffers when a late rank sends: end the
      // job here, before unwinding frees them (exit_on_error prints the
      // message for this rank and calls MPI_Abort; the run log is flushed
      // row by row and checkpoints are whole files, so nothing written is lost).
      exit_on_error(Error(ErrorKind::Comm,
                          str_cat(what, " (", bytes, " bytes) on rank ", rank, " waited ", limit, " s (", g_timeout_name, ") ",
                                  why ? why : "for the other ranks: one of them died, stalls or took another path"),
                          __FILE__, __LINE__));
    }
    if (waited < poll_s) {
      if (g_wait == WaitMode::Yield) sched_yield();  // a rank that shares this core runs between polls
      continue;
    }
    if (polls > 200 || g_wait != WaitMode::Nap) nap = std::min(std::chrono::microseconds(1000), nap * 2 + std::chrono::microseconds(10));
    if (nap.count() > 0) std::this_thread::sleep_for(nap);
  }
}

void barrier_bounded(MPI_Comm comm, const char* what) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  wait_bounded(req, what, 0);
}

void check_output_path_on_root(MPI_Comm comm, const std::string& what, const std::string& path) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  check_problem_on_root(comm, rank == 0 ? output_path_problem(what, path) : "");
}

void check_problem_on_root(MPI_Comm comm, const std::string& problem) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string p = rank == 0 ? problem : "";
  int n = int(p.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  p.resize(size_t(n));
  if (n > 0) MPI_Bcast(&p[0], n, MPI_CHAR, 0, comm);
  BURST_CHECK_CONFIG(p.empty(), p);
}

}  // namespace burst

#include "comm/watchdog.hpp"

#include "comm/runtime.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace burst {

Watchdog::Watchdog(double timeout_s, int rank, double checkpoint_timeout_s) : timeout_s_(timeout_s), rank_(rank) {
  if (timeout_s_ > 0 || checkpoint_timeout_s > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(long step) { arm_for(step, false, 2 * timeout_s_); }
void Watchdog::arm_checkpoint(long step, double checkpoint_timeout_s) {
  arm_for(step, true, 2 * checkpoint_timeout_s);
}

void Watchdog::arm_for(long step, bool checkpoint, double timeout_s) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    armed_ = timeout_s > 0;  // unbounded: disarmed until the next arm
    checkpoint_ = checkpoint;
    step_ = step;
    armed_timeout_s_ = timeout_s;
    if (armed_)
      deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                         std::chrono::duration<double>(timeout_s));
  }
  cv_.notify_all();
}

void Watchdog::disarm() {
  if (!thread_.joinable()) return;
  std::lock_guard<std::mutex> lk(mu_);
  armed_ = false;
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lk);
      continue;
    }
    if (cv_.wait_until(lk, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      // A step that computes for longer than the limit (a huge batch on a
      // slow machine) looks the same from here as one that hangs: say both.
      if (checkpoint_)
        std::fprintf(stderr,
                     "burst: error (rank %d): %s the checkpoint of step %ld made no progress for %g s (watchdog, 2 "
                     "x io.checkpoint_timeout_s): the file system blocks, or the checkpoint takes longer than that to "
                     "write, which the watchdog takes for a hang; io.checkpoint_timeout_s must exceed a checkpoint's "
                     "write time (raise it for a large model or a slow file system; 0 = no bound); aborting the job\n",
                     rank_, rank_ == 0 ? "writing" : "waiting for rank 0 to write", step_, armed_timeout_s_);
      else
        std::fprintf(stderr,
                     "burst: error (rank %d): step %ld made no progress for %g s (watchdog, 2 x comm.timeout_s): this "
                     "rank hangs outside communication, or a single step computes for longer than that, which the "
                     "watchdog takes for a hang; for very long steps raise comm.timeout_s (0 turns the watchdog off); "
                     "aborting the job\n",
                     rank_, step_, armed_timeout_s_);
      std::fflush(stderr);
      // The one MPI call made off the main thread: MPI_Abort only tells the
      // launcher to end the job, which MPICH and Open MPI allow from any
      // thread in practice. Should it block (the main thread holds MPI or
      // stdout) the alarm ends this process, and the launcher the others.
      // abort_job ends the process with status 1 itself, without the static
      // destructors that MPI_Abort's exit() would run under the main thread.
      alarm(10);
      abort_job(1);
    }
  }
}

}  // namespace burst

// A step watchdog: a thread that ends the whole job (MPI_Abort) with a
// message when a step makes no progress for `timeout_s` seconds. The bounded
// collectives (collectives.hpp) catch a peer that died or stalls while this
// rank waits for it; the watchdog catches what they cannot see: this rank
// itself stuck outside communication (a hung kernel, a blocked file system,
// an MPI call that is not bounded). It cannot tell a hang from a step that
// only computes for longer than `timeout_s` (a huge batch): that step is
// aborted too, and its message says to raise comm.timeout_s.
//
//   Watchdog wd(timeout, rank);
//   for (...) { wd.arm(step); ...step...; }  wd.disarm();
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace burst {

class Watchdog {
 public:
  // Both bounds are the configured ones (comm.timeout_s,
  // io.checkpoint_timeout_s); the watchdog allows twice each, so that the
  // bounded collectives, which use the bound once, speak first.
  // timeout_s <= 0: steps unbounded (arm does nothing); the thread runs
  // anyway when a checkpoint bound may come (checkpoint_timeout_s > 0).
  Watchdog(double timeout_s, int rank, double checkpoint_timeout_s = 0);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(long step);  // a step begins: the deadline is now + 2 x timeout_s
  // The checkpoint of step `step` (the steps done) is written (rank 0) or
  // waited for (the others): the deadline is now + 2 x checkpoint_timeout_s
  // (io.checkpoint_timeout_s; 0: none until the next arm), and the message
  // names the checkpoint. Works whether or not the step bound is on.
  void arm_checkpoint(long step, double checkpoint_timeout_s);
  void disarm();

 private:
  void loop();
  void arm_for(long step, bool checkpoint, double timeout_s);
  double timeout_s_, armed_timeout_s_ = 0;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false, checkpoint_ = false;
  long step_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace burst

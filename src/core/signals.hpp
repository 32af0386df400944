// SIGINT / SIGTERM as a request to stop cleanly: while a StopSignals object
// lives, the first such signal only sets a flag (all a signal handler may
// safely do); the trainer agrees on the flag across ranks once per step,
// finishes that step on every rank, writes a checkpoint and exits 0. The
// handler then restores the default action, so a second Ctrl-C ends the
// process at once.
#pragma once

namespace burst {

class StopSignals {
 public:
  StopSignals();   // installs the handlers, clears the flag
  ~StopSignals();  // restores the previous handlers
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  static bool requested();
  static int signal_number();  // the signal that asked, 0 if none
  static const char* name(int sig);  // "SIGINT", "SIGTERM"
};

}  // namespace burst

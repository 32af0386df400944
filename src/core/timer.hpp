// Wall-clock timers and named phases. A Phase is a scoped region that shows
// up in Kokkos Tools (and NVTX on CUDA builds) and adds its duration to a
// PhaseTimes table, so a step log can print time per phase.
#pragma once

#include <chrono>
#include <ctime>
#include <map>
#include <string>

namespace burst {

class Timer {
 public:
  Timer() { reset(); }
  void reset() { t0_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

// CPU seconds of the whole process (every thread) and of the calling thread
// (POSIX clocks): with a wall clock beside them, the CPU share a rank got on
// cores shared with other ranks or jobs.
inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
inline double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct PhaseStat {
  double seconds = 0;
  long count = 0;
};

class PhaseTimes {
 public:
  void add(const std::string& name, double s) {
    auto& p = table_[name];
    p.seconds += s;
    p.count += 1;
  }
  const std::map<std::string, PhaseStat>& table() const { return table_; }
  double seconds(const std::string& name) const {
    auto it = table_.find(name);
    return it == table_.end() ? 0.0 : it->second.seconds;
  }
  void clear() { table_.clear(); }

 private:
  std::map<std::string, PhaseStat> table_;
};

// Named region for profilers: Kokkos Tools region, plus an NVTX range on CUDA builds.
void region_push(const std::string& name);
void region_pop();

// Scoped phase: a profiler region and, when `times` is given, its duration.
// `fence` waits for the device before reading the clock at both ends, so
// asynchronous kernels are charged to the phase that launched them.
class Phase {
 public:
  Phase(const std::string& name, PhaseTimes* times = nullptr, bool fence = false);
  ~Phase();
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  std::string name_;
  PhaseTimes* times_;
  bool fence_;
  Timer timer_;
};

}  // namespace burst

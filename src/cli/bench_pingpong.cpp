// `burst bench pingpong`: the MPI alpha-beta of this machine, measured the
// way the ring methods move blocks (nonblocking send and receive of one
// buffer between two ranks), so the performance model's link constants come
// from our own measurement. Ranks 0 and 1 play; the others wait. One-way
// time = round trip / 2; alpha and beta from the fastest round trip per
// size (the link's own time: on cores shared with other jobs the median also
// holds scheduler waits, which the model prices per collective round from
// `burst bench collective`, and the ring's transfers hide); the medians are
// written beside them.
#include "cli/bench_common.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace burst::cli {

static ConfigSchema bench_pingpong_schema() {
  ConfigSchema s;
  s.int_list("bench.bytes", {8, 4096, 65536, 1048576, 4194304}, 1, 1 << 30, "message sizes in bytes")
      .integer("bench.repeats", 20, 1, 100000, "timed round trips per size (the median is reported)")
      .integer("bench.warmup", 3, 0, 1000, "untimed round trips before timing")
      .string("bench.output", "experiments/results/pingpong.h5", {}, "HDF5 file to write");
  return s;
}

// t = alpha + bytes / beta: alpha is the smallest message's time, beta the
// largest message's bytes over its time beyond alpha. (A least-squares line
// is dominated by the large messages and, on a loaded machine where a
// round trip waits for the scheduler, gave negative intercepts.) The sizes
// differ (the caller's check). When the largest message was not slower than
// the smallest, no bandwidth can be read from them: beta is NaN (and said).
void fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& t, double* alpha, double* beta) {
  size_t lo = 0, hi = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] < bytes[lo]) lo = i;
    if (bytes[i] > bytes[hi]) hi = i;
  }
  *alpha = t[lo];
  const double dt = t[hi] - t[lo];
  *beta = dt > 0 ? (bytes[hi] - bytes[lo]) / dt : std::nan("");
}

int cmd_bench_pingpong(Runtime& rt, const BenchGemmOptions& opt) {
  const Config cfg = bench_pingpong_schema().load(opt.config, opt.sets);
  BURST_CHECK_CONFIG(rt.size() >= 2, "bench pingpong needs at least 2 ranks (mpiexec -n 2)");
  check_bench_output(rt, opt.output, opt.output.empty() ? cfg.get_string("bench.output") : opt.output);
  const auto& sizes = cfg.get_int_list("bench.bytes");
  BURST_CHECK_CONFIG(*std::min_element(sizes.begin(), sizes.end()) < *std::max_element(sizes.begin(), sizes.end()),
                     "bench.bytes needs at least two different message sizes: alpha is the smallest one's time, beta "
                     "the largest one's bytes beyond it");
  const int reps = int(cfg.get_int("bench.repeats")), warm = int(cfg.get_int("bench.warmup"));
  const int me = rt.rank();
  std::vector<double> bytes, oneway, fastest;
  for (long n : sizes) {
    std::vector<unsigned char> sbuf(size_t(n), 1), rbuf(size_t(n), 0);
    std::vector<double> ts;
    for (int r = 0; r < warm + reps; ++r) {
      MPI_Barrier(rt.world());
      Timer t;
      if (me <= 1) {
        const int peer = 1 - me;
        MPI_Request q[2];
        if (me == 0) {  // send, then wait for the echo
          MPI_Isend(sbuf.data(), int(n), MPI_BYTE, peer, 7, rt.world(), &q[0]);
          MPI_Irecv(rbuf.data(), int(n), MPI_BYTE, peer, 8, rt.world(), &q[1]);
          MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        } else {
          MPI_Irecv(rbuf.data(), int(n), MPI_BYTE, peer, 7, rt.world(), &q[1]);
          MPI_Wait(&q[1], MPI_STATUS_IGNORE);
          MPI_Isend(sbuf.data(), int(n), MPI_BYTE, peer, 8, rt.world(), &q[0]);
          MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        }
      }
      if (r >= warm) ts.push_back(t.seconds() / 2);
    }
    std::sort(ts.begin(), ts.end());
    bytes.push_back(double(n)), oneway.push_back(ts[ts.size() / 2]), fastest.push_back(ts.front());
  }
  double alpha = 0, beta = 0;
  fit_alpha_beta(bytes, fastest, &alpha, &beta);
  if (me == 0) {
    std::printf("pingpong over MPI, %d ranks (0 <-> 1), %d round trips, one-way time (fastest, median):\n", rt.size(), reps);
    for (size_t i = 0; i < bytes.size(); ++i)
      std::printf("  %10.0f B  %10.2f us  %8.3f GB/s   median %10.2f us\n", bytes[i], fastest[i] * 1e6, bytes[i] / fastest[i] / 1e9,
                  oneway[i] * 1e6);
    std::printf("alpha %.2f us, beta %.3f GB/s (fastest round trips: smallest message; largest beyond it)\n", alpha * 1e6, beta / 1e9);
    if (!std::isfinite(beta))
      std::fprintf(stderr, "bench pingpong: the largest message (%.0f B) was not slower than the smallest: no bandwidth "
                   "fitted (beta NaN); give larger bench.bytes or more bench.repeats\n", *std::max_element(bytes.begin(), bytes.end()));
    const std::string out = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
    io::H5Output f_out(out);  // "<out>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& f = f_out.file();
    f.write("pingpong/bytes", bytes);
    f.write("pingpong/oneway_seconds", oneway);
    f.write("pingpong/oneway_fastest_seconds", fastest);
    f.set_attr("/", "benchmark", std::string("pingpong"));
    f.set_attr("/", "alpha_s", alpha);
    f.set_attr("/", "beta_bytes_per_s", beta);
    f.set_attr("/", "ranks", std::int64_t(rt.size()));
    f.set_attr("/", "config", cfg.dump());
    f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

}  // namespace burst::cli

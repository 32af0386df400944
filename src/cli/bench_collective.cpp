// `burst bench collective`: what one blocking collective costs when the ranks
// of a run share cores (with each other and with other jobs), measured the
// way the engine calls it, so the performance model's per-collective wait
// comes from our own measurement.
//
// Every rank repeats "compute W CPU-milliseconds, then one collective" and,
// interleaved with it, "compute W" alone. Per case (kind x chunk x W):
//   t_coll, t_none  wall per iteration (the slowest rank's block time / iterations)
//   share           CPU seconds per wall second of a rank in the collective
//                   block (mean over ranks; a yielding wait counts as CPU,
//                   as in the training runs' shares)
//   excess          t_coll - W / share: the wall time per collective beyond
//                   the compute the rank's share pays for
//   rounds          the dependent rounds of MPICH's algorithm for the size
//                   (perf::mpi_collective_rounds; 1 for the all-reduce)
// The kinds are the engine's own calls: all_to_all, all_gather and
// reduce_scatter through the MPI Communicator, and all_reduce through
// comm::allreduce_sum, each a non-blocking MPI collective completed by
// wait_all_bounded (spinning on a core of its own, yielding then napping on
// shared cores: comm/collectives.hpp).
// `ring` is one round of the ring methods' program (parallel/ring_executor):
// a send of the chunk to the next rank of the group and a receive from the
// previous one, posted before the compute, completed by wait_all_bounded
// after it (so the compute can hide the transfer and the partner's turn).
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "comm/collectives.hpp"
#include "comm/communicator.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "perf/attention.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

namespace burst::cli {

namespace {

ConfigSchema bench_collective_schema() {
  ConfigSchema s;
  s.string_list("bench.kinds", {"all_to_all", "all_gather", "reduce_scatter", "all_reduce"},
                {"all_to_all", "all_gather", "reduce_scatter", "all_reduce", "ring"}, "collectives to time (the engine's calls)")
      .int_list("bench.chunk_bytes", {16384, 65536}, 4, 1 << 26, "bytes each rank sends to each peer (all_reduce: per rank / P)")
      .int_list("bench.work_us", {5000, 20000}, 0, 10000000, "CPU microseconds of compute between two collectives")
      .integer("bench.iterations", 10, 1, 100000, "iterations per timed block")
      .integer("bench.rounds", 2, 1, 1000, "timed pairs of blocks (compute alone, compute + collective), interleaved")
      .integer("bench.warmup", 2, 0, 1000, "untimed iterations before each case")
      .integer("bench.group", 0, 0, 4096,
               "ranks per collective: groups of this many consecutive ranks, each running its own collective "
               "(as USP's head-parallel pairs among all the ranks sharing the cores); 0: all ranks")
      .integer("bench.calls", 1, 1, 1000,
               "collectives back to back after each compute (as Ulysses/USP's k, v after q: only a pack between "
               "them); excess is per iteration, so per call it is excess / calls")
      .string("bench.output", "experiments/results/collective.h5", {}, "HDF5 file to write");
  return s;
}

// A dependent floating-point chain: CPU time and nothing else (no memory
// traffic), `n` steps.
volatile double g_sink = 0;
void spin_work(long n) {
  double a = 1.0;
  const double b = 1.0000001;
  for (long i = 0; i < n; ++i) a = a * b + 1e-9;
  g_sink = a;
}

// Steps per CPU-second of spin_work on this core (CPU time, so it does not
// depend on how many jobs share the core).
double steps_per_cpu_second() {
  const long n = 2000000;
  spin_work(n / 10);
  const double c0 = process_cpu_seconds();
  spin_work(n * 10);
  return double(n * 10) / std::max(1e-9, process_cpu_seconds() - c0);
}

struct Block {
  double wall = 0, cpu = 0;
};

}  // namespace

int cmd_bench_collective(Runtime& rt, const BenchGemmOptions& opt) {
  const Config cfg = bench_collective_schema().load(opt.config, opt.sets);
  const int P = rt.size(), me = rt.rank();
  BURST_CHECK_CONFIG(P >= 2, "bench collective needs at least 2 ranks (mpiexec -n P)");
  const int iters = int(cfg.get_int("bench.iterations")), rounds = int(cfg.get_int("bench.rounds")),
            warm = int(cfg.get_int("bench.warmup")), calls = int(cfg.get_int("bench.calls"));
  double rate = steps_per_cpu_second();
  MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, rt.world());  // one work size for every rank
  // bench.group: the collectives run within groups of G consecutive ranks
  // (every group at once); the compute, barriers and shares stay world-wide.
  const int G = cfg.get_int("bench.group") > 0 ? int(cfg.get_int("bench.group")) : P;
  BURST_CHECK_CONFIG(P % G == 0 && G >= 2, "bench.group ", G, " must be >= 2 and divide the ", P, " ranks");
  BURST_CHECK_CONFIG(!cfg.get_string_list("bench.kinds").empty(), "bench.kinds is empty: name at least one collective");
  {
    const auto& kinds = cfg.get_string_list("bench.kinds");
    const auto has = [&](const char* k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
    // A ring round is one transfer overlapping the compute: bench.calls does not apply to it.
    BURST_CHECK_CONFIG(calls == 1 || !has("ring"), "bench.calls = ", calls,
                       " applies to the collectives; kind 'ring' (one transfer per round, overlapping the compute) "
                       "takes no back-to-back calls: time it in a run of its own");
    // The reductions move floats: a chunk not a whole number of them would be timed as a smaller one.
    if (has("reduce_scatter") || has("all_reduce"))
      for (std::int64_t c : cfg.get_int_list("bench.chunk_bytes"))
        BURST_CHECK_CONFIG(c % 4 == 0, "bench.chunk_bytes entry ", c,
                           " is not a multiple of 4 bytes: reduce_scatter and all_reduce move floats");
  }
  check_bench_output(rt, opt.output, opt.output.empty() ? cfg.get_string("bench.output") : opt.output);
  {
    // Per case: the send and receive buffers (chunk x G each), the
    // reduce-scatter's (chunk x G and chunk) and the all-reduce's (chunk x G).
    std::int64_t chunk = 0;
    for (std::int64_t c : cfg.get_int_list("bench.chunk_bytes")) chunk = std::max(chunk, c);
    check_bench_fits_ranks(rt.world(), "bench collective at bench.chunk_bytes " + std::to_string(chunk) + " over groups of " +
                                           std::to_string(G) + " ranks",
                           double(chunk) * (4.0 * G + 1.0));
  }
  MPI_Comm group_comm = MPI_COMM_NULL;
  MPI_Comm_split(rt.world(), me / G, me, &group_comm);
  auto world = Communicator::create(group_comm, G == P ? "world" : "group");  // duplicates it
  MPI_Comm_free(&group_comm);

  std::vector<std::string> kind_col;
  std::vector<double> rounds_col, chunk_col, work_col, t_coll_col, t_none_col, share_col, share_none_col, excess_col, wait_col,
      extra_cpu_col;
  if (me == 0)
    std::printf("collectives over groups of %d of %d ranks (the engine's calls), %d back to back after each compute, %d x %d "
                "iterations per case (excess, in-coll: per iteration):\n"
                "  %-14s %9s %9s %10s %10s %7s %7s %10s %10s %6s %9s\n",
                G, P, calls, rounds, iters, "kind", "chunk B", "work ms", "t_none ms", "t_coll ms", "s_none", "s_coll", "excess ms",
                "in-coll ms", "rounds", "+CPU ms");
  for (const std::string& kind : cfg.get_string_list("bench.kinds")) {
    for (std::int64_t chunk : cfg.get_int_list("bench.chunk_bytes")) {
      for (std::int64_t work_us : cfg.get_int_list("bench.work_us")) {
        const long steps = long(rate * double(work_us) * 1e-6);
        const size_t total = size_t(chunk) * size_t(G);
        ByteView send("bench/coll_send", total), recv("bench/coll_recv", total);
        Kokkos::deep_copy(send, static_cast<unsigned char>(me + 1));
        Kokkos::View<float*, Layout, DeviceMem> fs("bench/rs_send", total / sizeof(float) / size_t(G) * size_t(G)),
            fr("bench/rs_recv", total / sizeof(float) / size_t(G));
        Kokkos::View<float*, Layout, Kokkos::HostSpace> ar("bench/ar", total / sizeof(float));
        double in_coll = 0;
        auto collective = [&] {
          Timer t;
          if (kind == "all_to_all") world->all_to_all(send, recv);
          else if (kind == "all_gather") world->all_gather(ByteView(send.data(), size_t(chunk)), recv);
          else if (kind == "reduce_scatter") world->reduce_scatter_sum(fs, fr);
          else allreduce_sum(ar, world->mpi_comm(), "bench collective: all-reduce");
          in_coll += t.seconds();
        };
        const int gme = me % G, base = me - gme;
        MPI_Request ring_req[2];
        // The ring's raw MPI transfers take host memory: a device build's
        // views are not readable by an MPI that is not CUDA-aware (it faulted
        // in MPI_Isend on the H200). The ring executor's MPI staging copies
        // device blocks to host buffers of this kind; the copies are not
        // part of what this bench measures (the wait on shared cores).
        const bool ring = kind == "ring";
        Kokkos::View<unsigned char*, Layout, Kokkos::HostSpace> ring_send("bench/ring_send", ring ? size_t(chunk) : 0),
            ring_recv("bench/ring_recv", ring ? size_t(chunk) : 0);
        Kokkos::deep_copy(ring_send, static_cast<unsigned char>(me + 1));
        auto ring_post = [&] {
          MPI_Irecv(ring_recv.data(), int(chunk), MPI_BYTE, base + (gme + G - 1) % G, 7, rt.world(), &ring_req[0]);
          MPI_Isend(ring_send.data(), int(chunk), MPI_BYTE, base + (gme + 1) % G, 7, rt.world(), &ring_req[1]);
        };
        auto ring_wait = [&] {
          Timer t;
          wait_all_bounded(ring_req, 2, "bench collective: ring round", chunk);
          in_coll += t.seconds();
        };
        auto iteration = [&](bool with) {
          if (with && ring) ring_post();
          spin_work(steps);
          if (with && ring) ring_wait();
          if (with && !ring)
            for (int c = 0; c < calls; ++c) collective();
        };
        auto block = [&](bool with) {
          barrier_bounded(rt.world(), "bench collective: barrier");
          const double c0 = process_cpu_seconds();
          Timer t;
          for (int i = 0; i < iters; ++i) iteration(with);
          return Block{t.seconds(), process_cpu_seconds() - c0};
        };
        for (int i = 0; i < warm; ++i) iteration(true);
        in_coll = 0;
        Block none, coll;
        for (int r = 0; r < rounds; ++r) {
          const Block a = block(false), b = block(true);
          none.wall += a.wall, none.cpu += a.cpu, coll.wall += b.wall, coll.cpu += b.cpu;
        }
        const double n = double(rounds) * iters;
        // The slowest rank's wall; the mean share; the mean time inside the collective.
        const double wall_coll = allreduce_max(coll.wall, rt.world(), "bench collective: time") / n;
        const double wall_none = allreduce_max(none.wall, rt.world(), "bench collective: time") / n;
        const double s_coll = allreduce_sum(coll.cpu / coll.wall, rt.world(), "bench collective: share") / P;
        const double s_none = allreduce_sum(none.cpu / none.wall, rt.world(), "bench collective: share") / P;
        const double w_cpu = allreduce_sum(none.cpu, rt.world(), "bench collective: work") / P / n;  // CPU s of compute per iteration
        const double waited = allreduce_sum(in_coll, rt.world(), "bench collective: wait") / P / n;
        const double excess = wall_coll - w_cpu / s_coll;
        // CPU seconds a rank spends per iteration on the collective itself
        // (posting, polling, MPI's copies), beyond the same compute alone.
        const double extra_cpu = allreduce_sum(coll.cpu - none.cpu, rt.world(), "bench collective: extra CPU") / P / n;
        // Dependent rounds of MPICH's algorithm for this size, as the model
        // counts them (the all-reduce: one wait per call).
        using K = perf::Collective;
        const double rounds = kind == "all_to_all"       ? perf::mpi_collective_rounds({K::AllToAll, double(chunk)}, G)
                              : kind == "all_gather"     ? perf::mpi_collective_rounds({K::AllGather, double(total)}, G)
                              : kind == "reduce_scatter" ? perf::mpi_collective_rounds({K::ReduceScatter, double(total)}, G)
                                                         : 1.0;
        rounds_col.push_back(rounds);
        kind_col.push_back(kind), chunk_col.push_back(double(chunk)), work_col.push_back(w_cpu);
        t_coll_col.push_back(wall_coll), t_none_col.push_back(wall_none), share_col.push_back(s_coll);
        share_none_col.push_back(s_none), excess_col.push_back(excess), wait_col.push_back(waited);
        extra_cpu_col.push_back(extra_cpu);
        if (me == 0)
          std::printf("  %-14s %9lld %9.2f %10.3f %10.3f %7.3f %7.3f %10.3f %10.3f %6.0f %9.3f\n", kind.c_str(),
                      static_cast<long long>(chunk), w_cpu * 1e3, wall_none * 1e3, wall_coll * 1e3, s_none, s_coll, excess * 1e3,
                      waited * 1e3, rounds, extra_cpu * 1e3);
      }
    }
  }
  if (me == 0) {
    const std::string out = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
    io::H5Output f_out(out);  // "<out>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& f = f_out.file();
    // One group per kind, one entry per (chunk, work) case.
    for (const std::string& kind : cfg.get_string_list("bench.kinds")) {
      auto pick = [&](const std::vector<double>& col) {
        std::vector<double> v;
        for (size_t i = 0; i < col.size(); ++i)
          if (kind_col[i] == kind) v.push_back(col[i]);
        return v;
      };
      const std::string g = "collective/" + kind + "/";
      f.write(g + "chunk_bytes", pick(chunk_col));
      f.write(g + "rounds", pick(rounds_col));
      f.write(g + "work_cpu_seconds", pick(work_col));
      f.write(g + "t_coll_seconds", pick(t_coll_col));
      f.write(g + "t_none_seconds", pick(t_none_col));
      f.write(g + "cpu_share", pick(share_col));
      f.write(g + "cpu_share_none", pick(share_none_col));
      f.write(g + "excess_seconds", pick(excess_col));
      f.write(g + "in_collective_seconds", pick(wait_col));
      f.write(g + "extra_cpu_seconds", pick(extra_cpu_col));
    }
    f.set_attr("/", "benchmark", std::string("collective"));
    f.set_attr("/", "ranks", std::int64_t(P));
    f.set_attr("/", "group", std::int64_t(G));
    f.set_attr("/", "calls_per_iteration", std::int64_t(calls));
    f.set_attr("/", "spin_steps_per_cpu_second", rate);
    f.set_attr("/", "config", cfg.dump());
    f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

}  // namespace burst::cli

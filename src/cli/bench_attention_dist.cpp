// `burst bench attention` with bench.methods: the distributed attention
// methods under mpiexec, forward + backward per method, layout, mask, ring
// shape and sequence length; warm-up runs, then bench.repeats timed runs.
//
// Three runs of each case, each with its own warm-up and repeats:
//   total    the method as used (communicator from Communicator::create)
//   compute  the same method on the null transport (moves nothing): the
//            same per-rank blocks and kernels, on every rank at once, so the
//            ranks share the cores as in the total run
//   comm     the same method with comm_only: every transfer and its copies,
//            no attention math
// and overlap = (t_compute + t_comm - t_total) / t_comm, with each t the
// median over repeats of the slowest rank's forward + backward. Exposed
// communication is the time each rank spent blocked in waits (CommStats):
// host waits on MPI, the compute stream's stalls on NCCL.
//
// FLOPs by the paper's attention convention (ALGORITHMS.md section 9):
// forward 4 S^2 n d for the full mask, half of it for causal, 4 x (visible
// query-key pairs) x n d for window and document masks; backward 2.5 x
// forward; per rank = / P.
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "comm/collectives.hpp"
#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/activations.hpp"
#include "parallel/attention_method.hpp"
#include "perf/shape.hpp"

#include <algorithm>
#include <filesystem>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <random>

namespace burst::cli {

using namespace burst::parallel;

namespace {

// Documents of log-uniform lengths (1 .. S) summing to S, seeded.
std::vector<long> document_lengths(long S, long count) {
  count = std::min(count, S);
  std::mt19937_64 g(1);
  std::uniform_real_distribution<double> u(0.0, std::log(double(S)));
  std::vector<double> w(static_cast<size_t>(count));
  double total = 0;
  for (auto& x : w) total += (x = std::exp(u(g)));
  std::vector<long> len(static_cast<size_t>(count));
  long used = 0;
  for (long i = 0; i < count; ++i) {
    len[size_t(i)] = std::max(1L, long(std::floor(double(S - count) * w[size_t(i)] / total)) + 1);
    used += len[size_t(i)];
  }
  len.back() += S - used;  // the rounding remainder (the sum of floors never exceeds S)
  return len;
}

// Visible query-key pairs of the mask on the natural order (the paper counts
// causal as S^2 / 2 exactly).
double visible_pairs(const AttnProblem& pb) {
  const double S = double(pb.seq);
  switch (pb.mask.type) {
    case MaskType::Full: return S * S;
    case MaskType::Causal: return S * S / 2;
    case MaskType::Window: {
      double v = 0;
      for (long q = 0; q < pb.seq; ++q) v += double(std::min(q + 1, pb.mask.window));
      return v;
    }
    case MaskType::Document: return perf::document_area(pb.doc_lengths);
  }
  return S * S;
}

struct Timing {
  std::vector<double> fwd, bwd;  // per repeat, slowest rank
  std::vector<double> total;     // per repeat, slowest rank's fwd + bwd
  double exposed = 0;            // this rank, median over repeats
  std::int64_t bytes = 0;        // this rank, per fwd + bwd (the same every repeat)
  bool bytes_stable = true;
  std::string description;
  std::int64_t analytic = 0;
  std::string backend;
};

template <class T>
Timing time_method(Runtime& rt, const AttnOptions& ao, const AttnProblem& pb, Communicator& group, int warmup, int reps) {
  using Acc = accum_t<T>;
  const int P = rt.size(), me = rt.rank();
  std::vector<int> members(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) members[size_t(i)] = i;
  auto method = make_attention<T>(ao, pb, group, rt.topology(), members);
  const AttnLayouts lay = plan_layouts(resolve_options(ao, P, rt.topology().ranks_per_node), pb, P);
  const long s = lay.shards.local, n = pb.heads, m = pb.kv_heads, d = pb.head_dim;
  View3<T> q("act/q", s, n, d), k("act/k", s, m, d), v("act/v", s, m, d), dout("act/do", s, n, d);
  for (auto* x : {&q, &k, &v, &dout}) {
    auto h = Kokkos::create_mirror_view(*x);
    std::mt19937 g(unsigned(me * 7919 + int(x->extent(1))));
    std::normal_distribution<double> N(0, 1);
    for (size_t e = 0; e < h.span(); ++e) h.data()[e] = T(N(g));
    Kokkos::deep_copy(*x, h);
  }
  View3<Acc> o("act/o", s, n, d), dq("grads/dq", s, n, d), dk("grads/dk", s, m, d), dv("grads/dv", s, m, d);
  View2<Acc> lse("act/lse", s, n);
  Timing t;
  t.description = method->describe();
  t.analytic = method->analytic_bytes();
  t.backend = group.backend();
  std::vector<double> exposed;
  for (int r = 0; r < warmup + reps; ++r) {
    Kokkos::fence();
    barrier_bounded(rt.world(), "bench attention: barrier");
    CommStats::get().reset();
    Timer tm;
    method->forward(0, q, k, v, o, lse);
    Kokkos::fence();
    const double tf = tm.seconds();
    // O in the storage type for the backward, as a layer converts it (bf16;
    // float: o itself), outside the timed passes.
    const auto ob = kernels::storage_copy<T, DeviceMem>(o, "act/o_storage");
    Kokkos::fence();
    Timer tmb;
    method->backward(0, q, k, v, ob, lse, dout, dq, dk, dv);
    Kokkos::fence();
    const double tb = tmb.seconds();
    if (r < warmup) continue;
    const std::int64_t b = CommStats::get().total_bytes();
    if (r > warmup && b != t.bytes) t.bytes_stable = false;
    t.bytes = b;
    exposed.push_back(CommStats::get().wait_seconds());
    t.fwd.push_back(allreduce_max(tf, rt.world(), "bench attention: time"));
    t.bwd.push_back(allreduce_max(tb, rt.world(), "bench attention: time"));
    t.total.push_back(allreduce_max(tf + tb, rt.world(), "bench attention: time"));
  }
  t.exposed = median(exposed);
  return t;
}

template <class X> std::vector<X> gather(Runtime& rt, X x) {
  std::vector<X> all(size_t(rt.size()));
  MPI_Gather(&x, int(sizeof(X)), MPI_BYTE, all.data(), int(sizeof(X)), MPI_BYTE, 0, rt.world());
  return all;
}

struct Case {
  std::string method, layout, mask, ring;
  long seq;
  std::string name() const {
    return method + "/" + layout + "_" + mask + (ring == "-" ? "" : "_" + ring) + "/S" + std::to_string(seq);
  }
};

// The method's options and the problem of case `c`.
std::pair<AttnOptions, AttnProblem> case_setup(const Config& cfg, const Case& c) {
  AttnOptions ao;
  ao.method = c.method;
  ao.ring = c.ring == "-" ? "auto" : c.ring;
  ao.backward = cfg.get_string("bench.backward");
  ao.partial_bf16 = cfg.get_string("bench.partial") == "bf16";
  ao.hp = int(cfg.get_int("bench.hp"));
  ao.inner = int(cfg.get_int("bench.inner"));
  AttnProblem pb;
  pb.layout = parse_layout(c.layout);
  pb.mask.type = parse_mask(c.mask);
  pb.seq = c.seq;
  pb.heads = cfg.get_int("bench.heads"), pb.kv_heads = cfg.get_int("bench.kv_heads"), pb.head_dim = cfg.get_int("bench.head_dim");
  if (pb.mask.type == MaskType::Window) {
    const long w = cfg.get_int("bench.window");
    pb.mask.window = w > 0 ? w : std::max(1L, c.seq / 4);
  }
  if (pb.mask.type == MaskType::Document || pb.layout == LayoutKind::Document)
    pb.doc_lengths = document_lengths(c.seq, cfg.get_int("bench.documents"));
  return {ao, pb};
}

// A lower bound of what time_method allocates on a rank: its local q, k,
// v, dO and the storage copy of O (T), O, dQ, dK, dV and the LSE (the
// accumulator type); the method's own buffers come on top.
template <class T> double case_local_bytes(const AttnOptions& ao, const AttnProblem& pb, int P, int L) {
  const double s = double(plan_layouts(resolve_options(ao, P, L), pb, P).shards.local);
  const double n = double(pb.heads), m = double(pb.kv_heads), d = double(pb.head_dim);
  return s * d * ((3 * n + 2 * m) * sizeof(T) + (2 * n + 2 * m) * sizeof(accum_t<T>)) + s * n * sizeof(accum_t<T>);
}

template <class T> int run_all(Runtime& rt, const Config& cfg, const std::string& output) {
  const int P = rt.size(), L = rt.topology().ranks_per_node;
  const int warmup = int(cfg.get_int("bench.warmup")), reps = int(cfg.get_int("bench.repeats"));
  // (An empty bench.seq, a number list, is refused by the schema.)
  for (const char* key : {"bench.layouts", "bench.masks", "bench.rings"})
    BURST_CHECK_CONFIG(!cfg.get_string_list(key).empty(), key,
                       " is empty: the methods' cases are every combination, so there would be none");
  std::vector<Case> cases;
  for (const auto& m : cfg.get_string_list("bench.methods"))
    for (const auto& lay : cfg.get_string_list("bench.layouts"))
      for (const auto& mk : cfg.get_string_list("bench.masks")) {
        // The ring shape matters to the ring family and USP's inner ring only.
        const bool shaped = m == "ring" || m == "burst" || m == "usp";
        const std::vector<std::string> rings = shaped ? cfg.get_string_list("bench.rings") : std::vector<std::string>{"-"};
        for (const auto& ring : rings)
          for (long S : cfg.get_int_list("bench.seq")) cases.push_back({m, lay, mk, ring, S});
      }
  // Every case before any work: a duplicate (its group in the file would
  // hold the last run only) and memory beyond the host's are refused; the
  // cases validate_attention refuses are skipped (the same answer on every
  // rank), and when that is every one, nothing runs.
  std::vector<std::string> skip(cases.size());
  std::vector<std::pair<AttnOptions, AttnProblem>> setups;  // each case's, for the runs below
  long runnable = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      BURST_CHECK_CONFIG(cases[i].name() != cases[j].name(), "bench attention: the case ", cases[i].name(),
                         " is listed twice (bench.methods, layouts, masks, rings or seq repeat an entry)");
    setups.push_back(case_setup(cfg, cases[i]));
    const auto& [ao, pb] = setups.back();
    try {
      validate_attention(ao, pb, P, L);
    } catch (const Error& e) {
      skip[i] = e.message();
      continue;
    }
    ++runnable;
    check_bench_fits_ranks(rt.world(), "bench attention, " + cases[i].name() + " (" + std::to_string(pb.heads) + " heads, " +
                                           std::to_string(pb.kv_heads) + " kv, " + std::to_string(pb.head_dim) +
                                           " wide: the rank's q, k, v, O, dO and gradients, before the method's buffers)",
                           case_local_bytes<T>(ao, pb, P, L));
  }
  if (runnable == 0) {
    if (rt.rank() == 0)
      for (size_t i = 0; i < cases.size(); ++i) std::printf("%-46s skipped: %s\n", cases[i].name().c_str(), skip[i].c_str());
    BURST_CHECK_CONFIG(false, "bench attention: every one of the ", cases.size(),
                       " cases was skipped, nothing was measured (the last: ", skip.back(), ")");
  }

  std::unique_ptr<io::H5Output> h5_out;  // "<out>.tmp" until complete: a failed or refused run leaves the earlier file
  io::H5File* h5 = nullptr;
  const std::string out = !output.empty() ? output
                          : cfg.origin("bench.output") == "default"
                              ? "experiments/results/attention_dist_np" + std::to_string(P) + ".h5"
                              : cfg.get_string("bench.output");
  check_bench_output(rt, output, out);
  if (rt.rank() == 0) {
    h5_out = std::make_unique<io::H5Output>(out);
    h5 = &h5_out->file();
    std::printf("distributed attention, %s, %ld heads (kv %ld) x %ld, %d ranks (%s), %d warm-up + %d repeats, on %s\n",
                scalar_name<T>(), long(cfg.get_int("bench.heads")), long(cfg.get_int("bench.kv_heads")),
                long(cfg.get_int("bench.head_dim")), P, rt.topology().describe().c_str(), warmup, reps,
                Kokkos::DefaultExecutionSpace::name());
    std::printf("%-10s %-10s %-8s %-6s %7s %9s %9s %10s %12s %12s %9s %9s %9s %8s\n", "method", "layout", "mask", "ring", "S",
                "fwd s", "bwd s", "TFLOP/s", "bytes/rank", "analytic", "exposed", "compute", "comm", "overlap");
  }
  int status = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const auto& [ao, pb] = setups[ci];
    const std::string name = c.name();
    if (!skip[ci].empty()) {
      if (rt.rank() == 0) std::printf("%-46s skipped: %s\n", name.c_str(), skip[ci].c_str());
      continue;
    }
    auto world = Communicator::create(rt.world(), "world");
    // CPU seconds per wall second of this rank over the timed case: below 1
    // when ranks share cores with each other or with other jobs (the
    // experiment runners predict each case with the cores it got).
    const double cpu0 = process_cpu_seconds();
    Timer case_wall;
    const Timing total = time_method<T>(rt, ao, pb, *world, warmup, reps);
    const double cpu_share_rank = (process_cpu_seconds() - cpu0) / std::max(1e-9, case_wall.seconds());
    Timing compute;
    {
      auto none = Communicator::null(rt.world(), "null");
      compute = time_method<T>(rt, ao, pb, *none, warmup, reps);
    }
    AttnOptions co = ao;
    co.comm_only = true;
    const Timing comm = time_method<T>(rt, co, pb, *world, warmup, reps);

    const double t_total = median(total.total), t_compute = median(compute.total), t_comm = median(comm.total);
    const double overlap = P > 1 && comm.bytes > 0 && t_comm > 0 ? (t_compute + t_comm - t_total) / t_comm : NAN;
    const double fwd_flops = 4.0 * visible_pairs(pb) * double(pb.heads) * double(pb.head_dim);
    const double tf = median(total.fwd), tb = median(total.bwd);
    const double tflops_fwd = fwd_flops / P / tf / 1e12, tflops_bwd = 2.5 * fwd_flops / P / tb / 1e12;
    const double tflops = 3.5 * fwd_flops / P / t_total / 1e12;
    const auto bytes = gather(rt, total.bytes), analytic = gather(rt, total.analytic);
    const auto exposed = gather(rt, total.exposed);
    const auto comm_bytes = gather(rt, comm.bytes);
    const auto shares = gather(rt, cpu_share_rank);
    const auto stable = gather(rt, int(total.bytes_stable && comm.bytes == total.bytes));
    if (rt.rank() == 0) {
      bool ok = true;
      for (int r = 0; r < P; ++r) ok = ok && bytes[size_t(r)] == analytic[size_t(r)] && stable[size_t(r)] != 0;
      if (!ok) status = 1;
      std::printf("%-10s %-10s %-8s %-6s %7ld %9.4f %9.4f %10.6f %12lld %12lld %9.4f %9.4f %9.4f %8.3f%s\n", c.method.c_str(),
                  c.layout.c_str(), c.mask.c_str(), c.ring.c_str(), c.seq, tf, tb, tflops,
                  (long long)*std::max_element(bytes.begin(), bytes.end()),
                  (long long)*std::max_element(analytic.begin(), analytic.end()),
                  *std::max_element(exposed.begin(), exposed.end()), t_compute, t_comm, overlap,
                  ok ? "" : "  BYTES DIFFER FROM THE SCHEDULE");
      const std::string g = "runs/" + name;
      h5->write(g + "/fwd_s", total.fwd);
      h5->write(g + "/bwd_s", total.bwd);
      h5->write(g + "/total_s", total.total);
      h5->write(g + "/compute_s", compute.total);
      h5->write(g + "/comm_s", comm.total);
      h5->write(g + "/bytes_sent", bytes);
      h5->write(g + "/bytes_analytic", analytic);
      h5->write(g + "/bytes_comm_only", comm_bytes);
      h5->write(g + "/exposed_s", exposed);
      h5->set_attr(g, "method", c.method);
      h5->set_attr(g, "layout", c.layout);
      h5->set_attr(g, "mask", c.mask);
      h5->set_attr(g, "ring", c.ring);
      h5->set_attr(g, "seq", std::int64_t(c.seq));
      h5->set_attr(g, "window", std::int64_t(pb.mask.window));
      if (!pb.doc_lengths.empty())  // the documents of the document mask / layout (the model takes them)
        h5->write(g + "/doc_lengths", std::vector<std::int64_t>(pb.doc_lengths.begin(), pb.doc_lengths.end()));
      h5->set_attr(g, "describe", total.description);
      h5->set_attr(g, "backend", total.backend);
      h5->set_attr(g, "fwd_flops", fwd_flops);
      h5->set_attr(g, "fwd_s_median", tf);
      h5->set_attr(g, "bwd_s_median", tb);
      h5->set_attr(g, "total_s_median", t_total);
      h5->set_attr(g, "compute_s_median", t_compute);
      h5->set_attr(g, "comm_s_median", t_comm);
      h5->set_attr(g, "tflops_per_rank_fwd", tflops_fwd);
      h5->set_attr(g, "tflops_per_rank_bwd", tflops_bwd);
      h5->set_attr(g, "tflops_per_rank", tflops);
      h5->set_attr(g, "overlap_ratio", overlap);
      double share_sum = 0;
      for (double x : shares) share_sum += x;
      h5->set_attr(g, "cpu_share", share_sum / double(P));
      h5->set_attr(g, "bytes_match_schedule", std::int64_t(ok));
    }
  }
  if (rt.rank() == 0) {
    h5->set_attr("/", "benchmark", std::string("distributed attention"));
    h5->set_attr("/", "ranks", std::int64_t(P));
    h5->set_attr("/", "topology", rt.topology().describe());
    h5->set_attr("/", "dtype", std::string(scalar_name<T>()));
    h5->set_attr("/", "execution_space", std::string(Kokkos::DefaultExecutionSpace::name()));
    h5->set_attr("/", "threads_per_rank", std::int64_t(Kokkos::DefaultExecutionSpace::concurrency()));
    h5->set_attr("/", "flop_convention",
                 std::string("fwd 4 x visible pairs x n d (causal S^2/2, full S^2), bwd 2.5 x fwd, per rank / P"));
    h5->set_attr("/", "time_convention",
                 std::string("per repeat the slowest rank; medians over repeats; exposed = CommStats wait time per rank"));
    h5->set_attr("/", "overlap_convention",
                 std::string("(t_compute + t_comm - t_total) / t_comm; t_compute: the method on the null transport "
                             "(same blocks, all ranks at once); t_comm: the method with comm_only (transfers, no math)"));
    h5->set_attr("/", "config", cfg.dump());
    h5->set_attr("/", "environment", run_environment("; "));
    h5_out->publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", out.c_str());
    if (status != 0) std::fprintf(stderr, "bench attention: bytes handed to the transport differ from the schedule's count\n");
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, rt.world());
  return status;
}

}  // namespace

int bench_attention_methods(Runtime& rt, const Config& cfg, const std::string& output) {
  const std::string dt = cfg.get_string("bench.dtype");
  if (dt == "bf16") return run_all<bf16>(rt, cfg, output);
  return dt == "double" ? run_all<double>(rt, cfg, output) : run_all<float>(rt, cfg, output);
}

}  // namespace burst::cli

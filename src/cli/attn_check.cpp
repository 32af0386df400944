// `burst attn-check`: one distributed attention forward + backward, checked
// against a single-rank double-precision reference of the same problem.
//
// Inputs (q, k, v, do; global, natural token order) come from --input or
// from a seed; every rank takes its layout shard, the method runs, rank 0
// gathers o, lse, dq, dk, dv back into natural order and compares them with
// the reference. It prints the maximum relative error of each (max |x - ref|
// / max |ref|), the bytes each rank handed to the transport against the
// count derived from the schedule, the exposed communication time (time
// blocked in waits) and the time. Exit status 1 past tolerance, on a byte
// mismatch, or when a payload carried the wrong block id.
#include "cli/bench_common.hpp"
#include "cli/commands.hpp"
#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/attention.hpp"
#include "parallel/check.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

namespace burst::cli {

using namespace burst::parallel;

namespace {

constexpr double kMaxCheckElems = 134217728;  // 2^27 per [S, heads, d] tensor: 1 GiB in double

// Whether a method's ranks exchange partial outputs (forward) or gradient
// partials (backward), the payloads --partial rounds: the rings (ring, burst,
// loongtrain, usp with a ring over more than one group; `resolved`: hp filled
// in), not ulysses or the all-gather method (whole K,V gathered, dK,dV
// reduce-scattered in fp32).
bool partials_travel(const AttnOptions& resolved, int P) {
  if (resolved.method == "ulysses" || resolved.method == "allgather") return false;
  return resolved.method != "usp" || resolved.hp < P;  // usp over one group: no ring
}

template <class T> int run(Runtime& rt, const AttnCheckOptions& opt) {
  using Acc = accum_t<T>;
  const int P = rt.size(), me = rt.rank();
  AttnOptions ao;
  ao.method = opt.method, ao.ring = opt.ring, ao.backward = opt.backward, ao.inner = opt.inner, ao.hp = opt.hp;
  ao.placement = opt.placement, ao.usp_inner = opt.usp_inner, ao.partial_bf16 = opt.partial == "bf16", ao.trace = true;
  BURST_CHECK_CONFIG(opt.partial == "fp32" || opt.partial == "bf16", "--partial '", opt.partial, "': expected fp32 or bf16");
  AttnProblem pb;
  pb.layout = parse_layout(opt.layout);
  pb.mask.type = parse_mask(opt.mask);
  pb.mask.window = opt.window;
  pb.seq = opt.seq;
  BURST_CHECK_CONFIG(opt.seq >= 1, "--seq ", opt.seq, " must be >= 1");
  BURST_CHECK_CONFIG(opt.doc_lengths.empty() || pb.layout == LayoutKind::Document || pb.mask.type == MaskType::Document,
                     "--doc-lengths is used by --mask document or --layout document only (here --mask ", opt.mask, ", --layout ",
                     opt.layout, ")");
  if (!opt.doc_lengths.empty()) pb.doc_lengths = parse_doc_lengths(opt.doc_lengths, opt.seq);
  pb.heads = opt.heads, pb.kv_heads = opt.kv_heads, pb.head_dim = opt.head_dim;
  // Overrides are given or not (0); a negative one is a mistake.
  BURST_CHECK_CONFIG(opt.hp >= 0, "--hp ", opt.hp, " must be >= 1 (default: ranks per node)");
  BURST_CHECK_CONFIG(opt.inner >= 0, "--inner ", opt.inner, " must be >= 1 (default: ranks per node)");
  BURST_CHECK_CONFIG(std::isfinite(opt.tolerance) && opt.tolerance >= 0, "--tolerance ", opt.tolerance,
                     " must be a relative error > 0 (or 0: the dtype's default)");
  // Every rank holds the global inputs and the double reference their outputs:
  // the problem must fit a host's memory (a bad_alloc otherwise).
  const double elems = double(opt.seq) * double(std::max(opt.heads, opt.kv_heads)) * double(opt.head_dim);
  BURST_CHECK_CONFIG(opt.heads < 1 || opt.kv_heads < 1 || opt.head_dim < 1 || elems <= kMaxCheckElems, "--seq ", opt.seq,
                     " x heads ", std::max(opt.heads, opt.kv_heads), " x --head-dim ", opt.head_dim, " = ", elems,
                     " elements per tensor is beyond attn-check's ", kMaxCheckElems,
                     " (every rank holds the whole problem in double, the reference runs on one rank)");
  if (!opt.output.empty()) {
    // The results never replace the inputs (rank 0 writes them: its verdict for every rank).
    check_problem_on_root(rt.world(), rt.rank() == 0 && same_file(opt.output, opt.input)
                                          ? "--output '" + opt.output + "' is the --input file: the results would replace q, k, v and do"
                                          : "");
    check_bench_output(rt, opt.output, opt.output);
  }
  validate_attention(ao, pb, P, rt.topology().ranks_per_node);
  const Tensors in = make_inputs(pb, opt.input, opt.seed);
  const CheckResult r = check_attention<T>(ao, pb, rt.world(), rt.topology(), in);
  const long n = opt.heads, m = opt.kv_heads, d = opt.head_dim;
  const Outputs& got = r.natural;
  std::vector<std::int64_t> all_sent(static_cast<size_t>(P)), all_expect(static_cast<size_t>(P));
  std::vector<double> all_exposed(static_cast<size_t>(P)), all_time(static_cast<size_t>(P));
  std::vector<long> all_mis(static_cast<size_t>(P)), all_checked(static_cast<size_t>(P));
  const double tt = r.forward_s + r.backward_s;
  MPI_Gather(&r.bytes, 1, MPI_INT64_T, all_sent.data(), 1, MPI_INT64_T, 0, rt.world());
  MPI_Gather(&r.analytic, 1, MPI_INT64_T, all_expect.data(), 1, MPI_INT64_T, 0, rt.world());
  MPI_Gather(&r.exposed_s, 1, MPI_DOUBLE, all_exposed.data(), 1, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(&tt, 1, MPI_DOUBLE, all_time.data(), 1, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(&r.mismatches, 1, MPI_LONG, all_mis.data(), 1, MPI_LONG, 0, rt.world());
  MPI_Gather(&r.checked, 1, MPI_LONG, all_checked.data(), 1, MPI_LONG, 0, rt.world());

  int status = 0;
  if (me == 0) {
    // bf16: inputs and outputs rounded to 8 bits of mantissa (2^-8 = 3.9e-3
    // relative per element), products in fp32 (tensor cores on the GPU).
    // --partial bf16: the travelling partial outputs / gradients are rounded
    // to bf16 whatever the dtype, so the default is bf16's.
    const double tol = opt.tolerance > 0                                     ? opt.tolerance
                       : std::is_same<T, bf16>::value || opt.partial == "bf16" ? 2e-2
                       : std::is_same<T, double>::value                        ? 1e-10
                                                                               : 1e-4;
    const char* names[] = {"o", "lse", "dq", "dk", "dv"};
    std::printf("attn-check: %s, %s layout, %s mask%s, S=%ld, heads %ld (kv %ld) x %ld, %s, %d ranks (%s)\n", r.description.c_str(),
                opt.layout.c_str(), opt.mask.c_str(), opt.mask == "window" ? (" " + std::to_string(opt.window)).c_str() : "",
                opt.seq, n, m, d, scalar_name<T>(), P, rt.topology().describe().c_str());
    std::printf("  padding %ld slots; travel %ld of %ld slots per block\n", r.padding, r.travel, r.local);
    if (opt.partial == "bf16" && !partials_travel(resolve_options(ao, P, rt.topology().ranks_per_node), P))
      std::printf("  note: --partial bf16 has no effect here: %s moves no partial outputs or gradients between ranks\n",
                  opt.method.c_str());
    std::printf("  gradients judged against max(their own scale, %.1f x the largest gradient's)\n", kGradientFloor);
    std::vector<double> errs;
    for (int i = 0; i < 5; ++i) {
      errs.push_back(r.err[i]);
      std::printf("  max rel error %-3s %.3e%s\n", names[i], errs.back(), errs.back() <= tol ? "" : "  FAIL");
      if (!(errs.back() <= tol)) status = 1;
    }
    std::printf("  %4s %14s %14s %12s %10s %8s\n", "rank", "bytes sent", "analytic", "exposed s", "time s", "blocks ok");
    for (int k = 0; k < P; ++k) {
      const size_t i = size_t(k);
      const bool ok = all_sent[i] == all_expect[i] && all_mis[i] == 0;
      std::printf("  %4d %14lld %14lld %12.6f %10.6f %4ld/%ld%s\n", k, (long long)all_sent[i], (long long)all_expect[i],
                  all_exposed[i], all_time[i], all_checked[i] - all_mis[i], all_checked[i], ok ? "" : "  FAIL");
      if (!ok) status = 1;
    }
    std::printf("attn-check: %s (tolerance %.1e)\n", status == 0 ? "PASS" : "FAIL", tol);
    if (!opt.output.empty()) {
      io::H5Output f_out(opt.output);  // "<output>.tmp" until complete: a failed write leaves the earlier file
      io::H5File& f = f_out.file();
      mark_command_output(f, "attn-check");
      const io::Dims qd{std::uint64_t(opt.seq), std::uint64_t(n), std::uint64_t(d)}, kd{std::uint64_t(opt.seq), std::uint64_t(m), std::uint64_t(d)};
      f.write("o", got.o, qd);
      f.write("lse", got.lse, io::Dims{std::uint64_t(opt.seq), std::uint64_t(n)});
      f.write("dq", got.dq, qd);
      f.write("dk", got.dk, kd);
      f.write("dv", got.dv, kd);
      f.write("bytes_sent", all_sent);
      f.write("bytes_analytic", all_expect);
      f.write("exposed_s", all_exposed);
      f.write("time_s", all_time);
      for (int i = 0; i < 5; ++i) f.set_attr("/", std::string("max_rel_error_") + names[i], errs[size_t(i)]);
      f.set_attr("/", "method", r.description);
      f.set_attr("/", "layout", opt.layout);
      f.set_attr("/", "mask", opt.mask);
      f.set_attr("/", "ranks", std::int64_t(P));
      f.set_attr("/", "dtype", std::string(scalar_name<T>()));
      f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, rt.world());
  return status;
}

}  // namespace

int cmd_attn_check(Runtime& rt, const AttnCheckOptions& opt) {
  BURST_CHECK_CONFIG(opt.dtype == "float" || opt.dtype == "double" || opt.dtype == "bf16", "--dtype '", opt.dtype,
                     "': expected float, double or bf16");
  if (opt.dtype == "bf16") return run<bf16>(rt, opt);
  return opt.dtype == "double" ? run<double>(rt, opt) : run<float>(rt, opt);
}

}  // namespace burst::cli

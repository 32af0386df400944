// `burst bench ce`: the fused chunked LM head + cross-entropy
// (kernels::lm_head_cross_entropy: per chunk logits = X W^T, one kernel for
// LSE / loss / gradient in place, dX = G W, dW += G^T X) at a LLaMA-3 shape
// (32K tokens, hidden 4096, vocab 128256 by default), per chunk size: median
// time of forward + backward, TFLOP/s (6 N H V), and the peak device memory
// beyond the inputs (x, W, targets) and outputs (dx, dW): the logits chunk,
// the per-token losses and the GEMM workspace. A chunk of N tokens is the
// naive head (the whole [N, V] logits at once) through the same kernels.
// Checked first on a few tokens against a double-precision host reference
// (loss, dx and sampled rows of dW). Rank 0's numbers are written.
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/lm_head_loss.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <type_traits>
#include <vector>

namespace burst::cli {

static ConfigSchema bench_ce_schema() {
  ConfigSchema s;
  s.integer("bench.tokens", 32768, 1, 1L << 24, "tokens N")
      .integer("bench.hidden", 4096, 1, 1 << 20, "hidden size H")
      .integer("bench.vocab", 128256, 2, 1 << 24, "vocabulary V")
      .int_list("bench.chunks", {1024, 2048, 4096, 8192}, 1, 1L << 24, "token chunk sizes to time (N = the naive head)")
      .string("bench.dtype", "bf16", {"bf16", "float", "double"}, "element type of x, W, logits, dx, dW")
      .integer("bench.repeats", 3, 1, 1000, "timed repetitions per chunk size (median)")
      .integer("bench.warmup", 1, 0, 100, "untimed repetitions first")
      .integer("bench.check_tokens", 2, 0, 64, "tokens checked against the double-precision host reference (0: none)")
      .real("bench.tolerance", 0, 0, 1, "relative error bound of the check (0: 2e-2 bf16, 1e-4 float, 1e-10 double)")
      .string("bench.output", "experiments/results/ce.h5", {}, "HDF5 file to write");
  return s;
}

namespace {

KOKKOS_INLINE_FUNCTION double hash01(unsigned long i, unsigned seed) {
  unsigned long x = i * 0x9E3779B97F4A7C15ul + seed * 0xBF58476D1CE4E5B9ul;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBul;
  x ^= x >> 29;
  return double(x >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
}

template <class V> void fill(const V& v, unsigned seed, double amp) {
  using T = typename V::non_const_value_type;
  const long cols = long(v.extent(1));
  Kokkos::parallel_for(
      "burst::bench_ce_fill", Kokkos::RangePolicy<typename V::execution_space>(0, long(v.extent(0)) * cols),
      KOKKOS_LAMBDA(const long i) { v(i / cols, i % cols) = T((2 * hash01(i, seed) - 1) * amp); });
}

}  // namespace

template <class T> static void run(Runtime& rt, const Config& cfg, const std::string& output) {
  using Mem = DeviceMem;
  using CV2 = Kokkos::View<const T**, Layout, Mem>;
  using CI1 = Kokkos::View<const std::int32_t*, Layout, Mem>;
  const long N = cfg.get_int("bench.tokens"), H = cfg.get_int("bench.hidden"), V = cfg.get_int("bench.vocab");
  const int repeats = int(cfg.get_int("bench.repeats")), warmup = int(cfg.get_int("bench.warmup"));
  const long check = std::min<long>(cfg.get_int("bench.check_tokens"), N);
  double tol = cfg.get_real("bench.tolerance");
  if (tol == 0) tol = std::is_same<T, bf16>::value ? 2e-2 : std::is_same<T, float>::value ? 1e-4 : 1e-10;

  {
    // x, dx [N, H], W, dW [V, H], the targets and the largest chunk's logits [c, V].
    long c = 1;
    for (auto ch : cfg.get_int_list("bench.chunks")) c = std::max<long>(c, std::min<long>(ch, N));
    const double views =
        (2.0 * double(N) * double(H) + 2.0 * double(V) * double(H) + double(c) * double(V)) * double(sizeof(T)) + 4.0 * double(N);
    // The check's double-precision reference on the host: the checked
    // tokens' logits [check, V], the dW rows it compares and a dx row; on a
    // device build also the host copies of x, W and dW.
    const bool device = bench_dev_kind() == MemSpaceKind::Device;
    const double host = check == 0 ? 0.0
                                   : 8.0 * (double(check) * double(V) + double(check + 4) * double(H)) +
                                         (device ? (double(N) + 2.0 * double(V)) * double(H) * double(sizeof(T)) : 0.0);
    const std::string what = "bench ce at N = " + std::to_string(N) + " tokens, H = " + std::to_string(H) + ", V = " +
                             std::to_string(V) + " (x, dx, W, dW and a chunk's logits";
    const std::string ref = "the reference of bench.check_tokens = " + std::to_string(check) + " (0: no check)";
    if (device) {
      check_bench_fits(what + ")", views);
      const double avail = host_memory_available();
      BURST_CHECK_CONFIG(host <= avail, "bench ce: ", ref, " needs ", format_bytes(whole_bytes(host)),
                         " of host memory, more than the ", format_bytes(whole_bytes(avail)), " this process may use");
    } else {
      check_bench_fits(what + "; " + ref + ")", views + host);
    }
  }
  View2<T> x(mem_label(MemCategory::Workspace, "ce.x"), N, H), W(mem_label(MemCategory::Params, "ce.W"), V, H);
  View2<T> dx(mem_label(MemCategory::Workspace, "ce.dx"), N, H), dW(mem_label(MemCategory::Grads, "ce.dW"), V, H);
  View1<std::int32_t> target(mem_label(MemCategory::Workspace, "ce.target"), N);
  const unsigned seed = 7u + 13u * unsigned(rt.rank());
  fill(x, seed, 1.0);
  fill(W, seed + 1, 0.05);  // logits of standard deviation ~1 at H = 4096
  Kokkos::parallel_for(
      "burst::bench_ce_targets", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const long i) {
        target(i) = (i % 101 == 100) ? kernels::kIgnoreIndex : std::int32_t(hash01(i, seed + 2) * double(V)) % std::int32_t(V);
      });
  Kokkos::fence();
  long valid = 0;
  for (long i = 0; i < N; ++i) valid += (i % 101 == 100) ? 0 : 1;
  const double scale = 1.0 / double(std::max(valid, 1L));

  // ---- check on the first `check` tokens (grad_scale 1) against double on the host
  double err_loss = 0, err_dx = 0, err_dw = 0;
  if (check > 0) {
    Kokkos::deep_copy(dW, T(0));
    View2<T> dxc("work/ce.dx_check", check, H);
    auto xs = Kokkos::subview(x, std::make_pair(0L, check), Kokkos::ALL());
    auto ts = Kokkos::subview(target, std::make_pair(0L, check));
    const kernels::LossSum ls = kernels::lm_head_cross_entropy<T, Mem>(CV2(xs), CV2(W), CI1(ts), check, 1.0, dxc, dW);
    auto hx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
    auto hW = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), W);
    auto hdx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dxc);
    auto hdW = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dW);
    auto ht = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), target);
    std::vector<long> vs = {0, V - 1, V / 2};
    for (long i = 0; i < check; ++i)
      if (ht(i) >= 0) vs.push_back(ht(i));
    std::vector<double> G(size_t(check) * V), dwref(vs.size() * size_t(H), 0.0);
    double loss_ref = 0, num = 0, den = 0;
    for (long i = 0; i < check; ++i) {
      double* g = &G[size_t(i) * V];
      if (ht(i) < 0) continue;
      double mx = -1e300;
      for (long v = 0; v < V; ++v) {
        double s = 0;
        for (long h = 0; h < H; ++h) s += double(hx(i, h)) * double(hW(v, h));
        g[v] = s, mx = std::max(mx, s);
      }
      double z = 0;
      for (long v = 0; v < V; ++v) z += std::exp(g[v] - mx);
      const double lse = mx + std::log(z);
      loss_ref += lse - g[ht(i)];
      for (long v = 0; v < V; ++v) g[v] = std::exp(g[v] - lse) - (v == ht(i) ? 1.0 : 0.0);
      std::vector<double> dxr(H, 0.0);
      for (long v = 0; v < V; ++v)
        for (long h = 0; h < H; ++h) dxr[h] += g[v] * double(hW(v, h));
      for (long h = 0; h < H; ++h) num += std::pow(double(hdx(i, h)) - dxr[h], 2), den += dxr[h] * dxr[h];
      for (size_t s = 0; s < vs.size(); ++s)
        for (long h = 0; h < H; ++h) dwref[s * H + h] += g[vs[s]] * double(hx(i, h));
    }
    err_loss = std::fabs(ls.sum - loss_ref) / std::max(std::fabs(loss_ref), 1e-300);
    err_dx = std::sqrt(num / std::max(den, 1e-300));
    double n2 = 0, d2 = 0;
    for (size_t s = 0; s < vs.size(); ++s)
      for (long h = 0; h < H; ++h) n2 += std::pow(double(hdW(vs[s], h)) - dwref[s * H + h], 2), d2 += std::pow(dwref[s * H + h], 2);
    err_dw = std::sqrt(n2 / std::max(d2, 1e-300));
    if (rt.rank() == 0)
      std::printf("check, %ld tokens: loss %.6f (ref %.6f), relative errors: loss %.2e, dx %.2e, dW rows %.2e (tolerance %.0e)\n",
                  check, ls.sum, loss_ref, err_loss, err_dx, err_dw, tol);
  }
  const double worst = std::max(err_loss, std::max(err_dx, err_dw));
  BURST_CHECK(!(worst > tol), ErrorKind::Numeric, "bench ce: fused LM head differs from the double reference: ", worst,
              " > ", tol);

  // ---- timing
  const auto& chunks = cfg.get_int_list("bench.chunks");
  const int nc = int(chunks.size());
  std::vector<double> sec(nc), tflops(nc), extra(nc), loss_mean(nc);
  Kokkos::deep_copy(dW, T(0));
  Kokkos::fence();
  for (int ci = 0; ci < nc; ++ci) {
    const long c = std::min<long>(chunks[ci], N);
    Kokkos::fence();
    MemoryTracker::global().reset_peaks();
    const std::int64_t base = MemoryTracker::global().counters(bench_dev_kind()).current_total;
    kernels::LossSum ls;
    for (int w = 0; w < warmup; ++w) ls = kernels::lm_head_cross_entropy<T, Mem>(CV2(x), CV2(W), CI1(target), c, scale, dx, dW);
    Kokkos::fence();
    std::vector<double> ts;
    for (int r = 0; r < repeats; ++r) {
      Timer t;
      ls = kernels::lm_head_cross_entropy<T, Mem>(CV2(x), CV2(W), CI1(target), c, scale, dx, dW);
      Kokkos::fence();
      ts.push_back(t.seconds());
    }
    std::sort(ts.begin(), ts.end());
    sec[ci] = ts[ts.size() / 2];
    tflops[ci] = 6.0 * double(N) * H * V / sec[ci] / 1e12;
    extra[ci] = double(MemoryTracker::global().counters(bench_dev_kind()).peak_total - base + bench_gemm_workspace_bytes());
    loss_mean[ci] = ls.sum / double(std::max(ls.valid, 1L));
  }
  if (rt.rank() == 0) {
    std::printf("fused LM head + cross-entropy, %s, N = %ld tokens, H = %ld, V = %ld (%ld valid), on %s\n", scalar_name<T>(),
                N, H, V, valid, Kokkos::DefaultExecutionSpace::name());
    std::printf("%8s %11s %9s %16s %10s\n", "chunk", "median s", "TFLOP/s", "extra peak MiB", "mean loss");
    for (int ci = 0; ci < nc; ++ci)
      std::printf("%8lld %11.5f %9.1f %16.1f %10.5f\n", (long long)std::min<long>(chunks[ci], N), sec[ci], tflops[ci],
                  extra[ci] / 1048576.0, loss_mean[ci]);
    io::H5Output f_out(output);  // "<output>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& f = f_out.file();
    std::vector<std::int64_t> ch;
    for (auto c : chunks) ch.push_back(std::min<long>(c, N));
    f.write("ce/chunks", ch);
    f.write("ce/seconds", sec);
    f.write("ce/tflops", tflops);
    f.write("ce/extra_peak_bytes", extra);
    f.write("ce/loss_mean", loss_mean);
    f.set_attr("/", "benchmark", std::string("ce"));
    f.set_attr("/", "tokens", std::int64_t(N));
    f.set_attr("/", "hidden", std::int64_t(H));
    f.set_attr("/", "vocab", std::int64_t(V));
    f.set_attr("/", "valid_tokens", std::int64_t(valid));
    f.set_attr("/", "dtype", std::string(scalar_name<T>()));
    f.set_attr("/", "flops_convention", std::string("6 N H V (logits, dX, dW GEMMs)"));
    f.set_attr("/", "extra_peak_meaning",
               std::string("device allocation peak during the calls minus what was allocated before (x, W, dx, dW, "
                           "targets), plus the cuBLASLt workspace"));
    f.set_attr("/", "check_tokens", std::int64_t(check));
    f.set_attr("/", "check_rel_error_loss", err_loss);
    f.set_attr("/", "check_rel_error_dx", err_dx);
    f.set_attr("/", "check_rel_error_dw_rows", err_dw);
    set_bench_provenance(f, rt, cfg);
    f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", output.c_str());
  }
}

int cmd_bench_ce(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_ce_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  const std::string output = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
  check_bench_output(rt, opt.output, output);
  return with_bench_dtype(cfg.get_string("bench.dtype"), [&](auto t) {
    run<decltype(t)>(rt, cfg, output);
    return 0;
  });
}

}  // namespace burst::cli

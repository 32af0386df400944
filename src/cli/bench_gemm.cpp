// `burst bench gemm`: GEMM rate per rank through kernels::gemm, checked
// against a double-precision dot product on sampled entries, written to HDF5
// with the shapes, TFLOP/s, bytes and the peak memory of each shape.
//
// Shapes: the squares of bench.sizes ('N','N'; unless bench.squares = false),
// the entries of bench.shapes ("TATB:MxNxK", e.g. "NT:32768x4096x4096" = row-major X W^T), and with
// bench.llama = true the GEMMs of a LLaMA layer at bench.tokens tokens for
// the 1B (2048 / 5632) and 7B (4096 / 11008) shapes and the 128256-word LM
// head: forward X W^T (NT), input gradient dY W (NN), weight gradient dY^T X (TN).
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>
#include <type_traits>
#include <vector>

namespace burst::cli {

static ConfigSchema bench_gemm_schema() {
  ConfigSchema s;
  s.int_list("bench.sizes", {256, 512, 1024}, 1, 16384, "square GEMM sizes n (n x n x n)")
      .boolean("bench.squares", true, "time the bench.sizes squares (false: only bench.shapes / bench.llama)")
      .string_list("bench.shapes", {}, {}, "extra shapes \"TATB:MxNxK\" (row-major C[M,N] = op(A) op(B)), e.g. NT:32768x4096x4096")
      .boolean("bench.llama", false, "add the LLaMA 1B / 7B layer and LM-head GEMMs at bench.tokens tokens")
      .integer("bench.tokens", 32768, 1, 1 << 22, "tokens (M) of the LLaMA shapes")
      .string("bench.dtype", "float", {"float", "double", "bf16"}, "input (and default output) type")
      .string("bench.out_dtype", "same", {"same", "float"}, "output type: same as the inputs, or float (bf16 inputs)")
      .string("bench.beta", "0", {"0", "1"}, "C = op(A) op(B) + beta C: 1 = accumulate, as the model's weight gradients (fp32) and dX sums")
      .integer("bench.repeats", 5, 1, 10000, "timed repetitions per shape (the median is reported)")
      .integer("bench.warmup", 1, 0, 1000, "untimed repetitions before timing")
      .string("bench.output", "experiments/results/gemm_host.h5", {}, "HDF5 file to write")
      .rule([](const Config& c) -> std::string {
        if (!c.get_bool("bench.llama") && c.origin("bench.tokens") != "default")
          return "bench.tokens (" + c.origin("bench.tokens") + ") is the M of the LLaMA shapes: it needs bench.llama = true";
        return "";
      });
  return s;
}

namespace {

struct Shape {
  std::string label;
  char ta = 'N', tb = 'N';
  long m = 0, n = 0, k = 0;
};

Shape parse_shape(const std::string& s) {
  Shape r;
  long m = 0, n = 0, k = 0;
  char ta = 0, tb = 0;
  int used = 0;
  BURST_CHECK_CONFIG(std::sscanf(s.c_str(), "%c%c:%ldx%ldx%ld%n", &ta, &tb, &m, &n, &k, &used) == 5 &&
                         used == int(s.size()) && (ta == 'N' || ta == 'T') && (tb == 'N' || tb == 'T') && m > 0 &&
                         n > 0 && k > 0,
                     "bench.shapes: '", s, "' is not TATB:MxNxK (TA, TB in N/T; M, N, K > 0)");
  // An overflowing number reads as LONG_MAX: views of that size wrap around
  // (a hang or a crash), so each extent is bounded (bench.tokens' bound x 4).
  const long kMaxExtent = 1L << 24;
  BURST_CHECK_CONFIG(m <= kMaxExtent && n <= kMaxExtent && k <= kMaxExtent, "bench.shapes: '", s, "': M, N and K must be <= ",
                     kMaxExtent);
  r.label = s, r.ta = ta, r.tb = tb, r.m = m, r.n = n, r.k = k;
  return r;
}

std::vector<Shape> shapes_of(const Config& cfg) {
  std::vector<Shape> v;
  if (cfg.get_bool("bench.squares"))
    for (auto n : cfg.get_int_list("bench.sizes")) v.push_back({"NN:" + std::to_string(n) + "^3", 'N', 'N', n, n, n});
  for (const auto& s : cfg.get_string_list("bench.shapes")) v.push_back(parse_shape(s));
  if (cfg.get_bool("bench.llama")) {
    const long T = cfg.get_int("bench.tokens");
    const struct { const char* name; long h, f; } models[] = {{"1B", 2048, 5632}, {"7B", 4096, 11008}};
    for (const auto& md : models) {
      const std::string p = std::string(md.name) + " ";
      v.push_back({p + "qkvo fwd XW^T", 'N', 'T', T, md.h, md.h});
      v.push_back({p + "up/gate fwd XW^T", 'N', 'T', T, md.f, md.h});
      v.push_back({p + "down fwd XW^T", 'N', 'T', T, md.h, md.f});
      v.push_back({p + "qkvo dX=dYW", 'N', 'N', T, md.h, md.h});
      v.push_back({p + "up/gate dX=dYW", 'N', 'N', T, md.h, md.f});
      v.push_back({p + "qkvo dW=dY^TX", 'T', 'N', md.h, md.h, T});
      v.push_back({p + "up/gate dW=dY^TX", 'T', 'N', md.f, md.h, T});
    }
    v.push_back({"LM head 128256 fwd XW^T", 'N', 'T', T, 128256, 4096});
    v.push_back({"LM head 128256 dX=GW", 'N', 'N', T, 4096, 128256});
    v.push_back({"LM head 128256 dW=G^TX", 'T', 'N', 128256, 4096, T});
  }
  BURST_CHECK_CONFIG(!v.empty(), "bench gemm: no shapes (bench.squares = false, no bench.shapes, bench.llama = false)");
  return v;
}

// Deterministic pseudo-random fill in [-1, 1): a hash of the index and a seed.
template <class V> void fill(const V& v, unsigned seed) {
  using T = typename V::non_const_value_type;
  const long cols = long(v.extent(1));
  Kokkos::parallel_for(
      "burst::bench_fill", Kokkos::RangePolicy<typename V::execution_space>(0, long(v.extent(0)) * cols),
      KOKKOS_LAMBDA(const long i) {
        unsigned long x = (unsigned long)(i) * 0x9E3779B97F4A7C15ul + seed * 0xBF58476D1CE4E5B9ul;
        x ^= x >> 31;
        x *= 0x94D049BB133111EBul;
        x ^= x >> 29;
        v(i / cols, i % cols) = T(double(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
      });
}

constexpr MemSpaceKind device_kind() {
  return std::is_same<DeviceMem, Kokkos::HostSpace>::value ? MemSpaceKind::Host : MemSpaceKind::Device;
}

std::int64_t extra_workspace_bytes() {
#ifdef BURST_HAVE_CUDA
  return std::int64_t(lt::workspace_bytes());
#else
  return 0;
#endif
}

}  // namespace

template <class T, class TC> static void run(Runtime& rt, const Config& cfg, const std::string& output) {
  const std::vector<Shape> shapes = shapes_of(cfg);
  const int repeats = int(cfg.get_int("bench.repeats")), warmup = int(cfg.get_int("bench.warmup"));
  const int ns = int(shapes.size());
  const double beta = cfg.get_string("bench.beta") == "1" ? 1.0 : 0.0;
  std::vector<double> gflops(ns), seconds(ns), err(ns), peak(ns);
  for (const Shape& sh : shapes)  // every shape before the first is timed
    check_bench_fits("bench gemm shape '" + sh.label + "' (A, B and C: " + std::to_string(sh.m) + " x " + std::to_string(sh.n) +
                         " x " + std::to_string(sh.k) + ")",
                     (double(sh.m) * double(sh.k) + double(sh.k) * double(sh.n)) * double(sizeof(T)) +
                         double(sh.m) * double(sh.n) * double(sizeof(TC)));
#ifdef BURST_HAVE_CUDA
  const long lt_calls0 = lt::call_count();
#endif
  for (int si = 0; si < ns; ++si) {
    const Shape& sh = shapes[si];
    MemoryTracker::global().reset_peaks();
    const std::int64_t base = MemoryTracker::global().counters(device_kind()).current_total;
    // Stored shapes: A is [m, k] ('N') or [k, m] ('T'); B is [k, n] or [n, k].
    View2<T> A(mem_label(MemCategory::Workspace, "gemm.A"), sh.ta == 'N' ? sh.m : sh.k, sh.ta == 'N' ? sh.k : sh.m);
    View2<T> B(mem_label(MemCategory::Workspace, "gemm.B"), sh.tb == 'N' ? sh.k : sh.n, sh.tb == 'N' ? sh.n : sh.k);
    View2<TC> C(mem_label(MemCategory::Workspace, "gemm.C"), sh.m, sh.n);
    fill(A, 1 + rt.rank()), fill(B, 2 + rt.rank());
    Kokkos::deep_copy(C, TC(0));  // beta = 1 accumulates onto it
    for (int w = 0; w < warmup; ++w) kernels::gemm(sh.ta, sh.tb, 1, A, B, beta, C);
    Kokkos::fence();
    std::vector<double> ts;
    for (int r = 0; r < repeats; ++r) {
      Timer t;
      kernels::gemm(sh.ta, sh.tb, 1, A, B, beta, C);
      Kokkos::fence();
      ts.push_back(t.seconds());
    }
    // The checked result: with beta = 1 one more call onto a known C0 (the timed ones accumulated), checked
    // as C - C0 against A B, so a kernel that ignored beta would fail the check.
    decltype(Kokkos::create_mirror(Kokkos::HostSpace(), C)) hC0;
    if (beta != 0) {
      hC0 = Kokkos::create_mirror(Kokkos::HostSpace(), C);  // a copy, also of a host C
      fill(C, 3 + rt.rank());
      Kokkos::deep_copy(hC0, C);
      kernels::gemm(sh.ta, sh.tb, 1, A, B, beta, C);
      Kokkos::fence();
    }
    std::sort(ts.begin(), ts.end());
    seconds[si] = ts[ts.size() / 2];
    gflops[si] = 2.0 * double(sh.m) * sh.n * sh.k / seconds[si] / 1e9;
    peak[si] = double(MemoryTracker::global().counters(device_kind()).peak_total - base + extra_workspace_bytes());
    // Check 64 sampled entries against a dot product in double, relative to sum |a b|.
    auto hA = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), A);
    auto hB = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), B);
    auto hC = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    double worst = 0;
    for (int s = 0; s < 64; ++s) {
      const long i = (s * 7919L) % sh.m, j = (s * 104729L + 13) % sh.n;
      double ref = 0, mag = 0;
      for (long p = 0; p < sh.k; ++p) {
        const double a = sh.ta == 'N' ? double(hA(i, p)) : double(hA(p, i));
        const double b = sh.tb == 'N' ? double(hB(p, j)) : double(hB(j, p));
        ref += a * b, mag += std::fabs(a * b);
      }
      const double got = double(hC(i, j)) - (beta != 0 ? double(hC0(i, j)) : 0.0);
      worst = std::max(worst, std::fabs(got - ref) / std::max(mag, 1e-300));
    }
    err[si] = worst;
  }
  const char* path = "portable";
#ifdef BURST_HAVE_KOKKOSKERNELS
  if (std::is_same<typename View2<T>::memory_space, Kokkos::HostSpace>::value && !std::is_same<T, bf16>::value)
    path = "KokkosBlas::gemm (BLAS TPL)";
#endif
#ifdef BURST_HAVE_CUDA
  if (lt::call_count() > lt_calls0) path = "cuBLASLt";
#endif
  // Gather [ranks x shapes] on rank 0.
  const int P = rt.size();
  std::vector<double> g_all(rt.rank() == 0 ? P * ns : 1), s_all(g_all.size()), e_all(g_all.size()), p_all(g_all.size());
  MPI_Gather(gflops.data(), ns, MPI_DOUBLE, g_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(seconds.data(), ns, MPI_DOUBLE, s_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(err.data(), ns, MPI_DOUBLE, e_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(peak.data(), ns, MPI_DOUBLE, p_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  // bf16 inputs are exact products summed in fp32; a bf16 output rounds to 2^-9.
  const double tol = std::is_same<T, double>::value ? 1e-13
                     : std::is_same<TC, bf16>::value ? 1e-2
                                                     : 1e-5;
  double worst = 0;
  for (double e : e_all) worst = std::max(worst, e);
  if (rt.rank() == 0) {
    std::printf("gemm %s -> %s%s, %d rank(s) on %s (concurrency %d), path %s\n", scalar_name<T>(), scalar_name<TC>(),
                beta != 0 ? " (C += A B)" : "", P,
                Kokkos::DefaultExecutionSpace::name(), int(Kokkos::DefaultExecutionSpace::concurrency()), path);
    std::printf("%-26s %2s %7s %7s %7s %11s %12s %12s %11s\n", "shape", "op", "M", "N", "K", "median s", "TFLOP/s rank0",
                "TFLOP/s sum", "peak MiB");
    std::vector<std::int64_t> m(ns), n(ns), k(ns), ta(ns), tb(ns), bytes(ns);
    for (int si = 0; si < ns; ++si) {
      const Shape& sh = shapes[si];
      double sum = 0;
      for (int r = 0; r < P; ++r) sum += g_all[r * ns + si];
      m[si] = sh.m, n[si] = sh.n, k[si] = sh.k, ta[si] = sh.ta == 'T', tb[si] = sh.tb == 'T';
      bytes[si] = std::int64_t(sizeof(T)) * (sh.m * sh.k + sh.k * sh.n) + std::int64_t(sizeof(TC)) * sh.m * sh.n * (beta != 0 ? 2 : 1);
      std::printf("%-26s %c%c %7ld %7ld %7ld %11.6f %12.2f %12.2f %11.1f\n", sh.label.c_str(), sh.ta, sh.tb, sh.m, sh.n,
                  sh.k, s_all[si], g_all[si] / 1e3, sum / 1e3, p_all[si] / 1048576.0);
    }
    std::printf("max relative error on sampled entries %.3g (tolerance %.0e)\n", worst, tol);
    io::H5Output f_out(output);  // "<output>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& f = f_out.file();
    if (cfg.get_bool("bench.squares")) {  // the squares timed (the first shapes); gemm/m, n, k hold every shape
      std::vector<std::int64_t> sq;
      for (auto v : cfg.get_int_list("bench.sizes")) sq.push_back(v);
      f.write("gemm/sizes", sq);
    }
    f.write("gemm/m", m), f.write("gemm/n", n), f.write("gemm/k", k);
    f.write("gemm/trans_a", ta), f.write("gemm/trans_b", tb);
    f.write("gemm/bytes", bytes);
    f.write("gemm/gflops", g_all, {std::uint64_t(P), std::uint64_t(ns)});
    std::vector<double> tf(g_all.size());
    for (size_t i = 0; i < tf.size(); ++i) tf[i] = g_all[i] / 1e3;
    f.write("gemm/tflops", tf, {std::uint64_t(P), std::uint64_t(ns)});
    f.write("gemm/seconds", s_all, {std::uint64_t(P), std::uint64_t(ns)});
    f.write("gemm/max_rel_error", e_all, {std::uint64_t(P), std::uint64_t(ns)});
    f.write("gemm/peak_bytes", p_all, {std::uint64_t(P), std::uint64_t(ns)});
    std::string labels;
    for (const auto& sh : shapes) labels += (labels.empty() ? "" : ";") + sh.label;
    f.set_attr("/", "shape_labels", labels);
    f.set_attr("/", "benchmark", std::string("gemm"));
    f.set_attr("/", "dtype", std::string(scalar_name<T>()));
    f.set_attr("/", "out_dtype", std::string(scalar_name<TC>()));
    f.set_attr("/", "beta", beta);
    f.set_attr("/", "ranks", std::int64_t(P));
    f.set_attr("/", "threads_per_rank", std::int64_t(Kokkos::DefaultExecutionSpace::concurrency()));
    f.set_attr("/", "gemm_path", std::string(path));
    set_bench_provenance(f, rt, cfg);
    f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", output.c_str());
  }
  BURST_CHECK(worst <= tol, ErrorKind::Numeric, "gemm result differs from the double-precision reference: relative error ",
              worst, " > ", tol);
}

int cmd_bench_gemm(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_gemm_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  const std::string output = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
  const std::string dt = cfg.get_string("bench.dtype"), out = cfg.get_string("bench.out_dtype");
  BURST_CHECK_CONFIG(out == "same" || dt == "bf16", "bench.out_dtype = float needs bench.dtype = bf16");
  shapes_of(cfg);  // the shapes' errors first (the same on every rank)
  check_bench_output(rt, opt.output, output);
  if (dt == "float") run<float, float>(rt, cfg, output);
  else if (dt == "double") run<double, double>(rt, cfg, output);
  else if (out == "float") run<bf16, float>(rt, cfg, output);
  else run<bf16, bf16>(rt, cfg, output);
  return 0;
}

}  // namespace burst::cli

// `burst bench gemm`: GEMM rate per rank through kernels::gemm, checked
// against a double-precision dot product on sampled entries, written to HDF5.
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "kernels/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace burst::cli {

static ConfigSchema bench_gemm_schema() {
  ConfigSchema s;
  s.int_list("bench.sizes", {256, 512, 1024}, 1, 16384, "square GEMM sizes n (n x n x n)")
      .string("bench.dtype", "float", {"float", "double"}, "scalar type")
      .integer("bench.repeats", 5, 1, 10000, "timed repetitions per size (the median is reported)")
      .integer("bench.warmup", 1, 0, 1000, "untimed repetitions before timing")
      .string("bench.output", "experiments/results/gemm_host.h5", {}, "HDF5 file to write");
  return s;
}

// Deterministic pseudo-random fill in [-1, 1): a hash of the index and a seed.
template <class V> static void fill(const V& v, unsigned seed) {
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

template <class T> static void run(Runtime& rt, const Config& cfg, const std::string& output) {
  const auto& sizes = cfg.get_int_list("bench.sizes");
  const int repeats = int(cfg.get_int("bench.repeats")), warmup = int(cfg.get_int("bench.warmup"));
  const int ns = int(sizes.size());
  std::vector<double> gflops(ns), seconds(ns), err(ns);
  for (int si = 0; si < ns; ++si) {
    const long n = sizes[si];
    View2<T> A(mem_label(MemCategory::Workspace, "gemm.A"), n, n), B(mem_label(MemCategory::Workspace, "gemm.B"), n, n),
        C(mem_label(MemCategory::Workspace, "gemm.C"), n, n);
    fill(A, 1 + rt.rank()), fill(B, 2 + rt.rank());
    for (int w = 0; w < warmup; ++w) kernels::gemm('N', 'N', 1, A, B, 0, C);
    Kokkos::fence();
    std::vector<double> ts;
    for (int r = 0; r < repeats; ++r) {
      Timer t;
      kernels::gemm('N', 'N', 1, A, B, 0, C);
      Kokkos::fence();
      ts.push_back(t.seconds());
    }
    std::sort(ts.begin(), ts.end());
    seconds[si] = ts[ts.size() / 2];
    gflops[si] = 2.0 * double(n) * n * n / seconds[si] / 1e9;
    // Check 64 sampled entries against a dot product in double.
    auto hA = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), A);
    auto hB = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), B);
    auto hC = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    double worst = 0;
    for (int s = 0; s < 64; ++s) {
      long i = (s * 7919L) % n, j = (s * 104729L + 13) % n;
      double ref = 0, mag = 0;
      for (long p = 0; p < n; ++p) ref += double(hA(i, p)) * double(hB(p, j)), mag += std::fabs(double(hA(i, p)) * double(hB(p, j)));
      worst = std::max(worst, std::fabs(double(hC(i, j)) - ref) / std::max(mag, 1e-300));
    }
    err[si] = worst;
  }
  // Gather [ranks x sizes] on rank 0.
  const int P = rt.size();
  std::vector<double> g_all(rt.rank() == 0 ? P * ns : 1), s_all(g_all.size()), e_all(g_all.size());
  MPI_Gather(gflops.data(), ns, MPI_DOUBLE, g_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(seconds.data(), ns, MPI_DOUBLE, s_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  MPI_Gather(err.data(), ns, MPI_DOUBLE, e_all.data(), ns, MPI_DOUBLE, 0, rt.world());
  const double tol = std::is_same<T, float>::value ? 1e-5 : 1e-13;
  double worst = 0;
  for (double e : e_all) worst = std::max(worst, e);
  if (rt.rank() == 0) {
#ifdef BURST_HAVE_KOKKOSKERNELS
    const char* path = std::is_same<typename View2<T>::memory_space, Kokkos::HostSpace>::value ? "KokkosBlas::gemm (BLAS TPL)" : "portable";
#else
    const char* path = "portable";
#endif
    std::printf("gemm %s, %d rank(s) on %s (concurrency %d), path %s\n", scalar_name<T>(), P,
                Kokkos::DefaultExecutionSpace::name(), int(Kokkos::DefaultExecutionSpace::concurrency()), path);
    std::printf("%8s %12s %14s %14s\n", "n", "median s", "GFLOP/s rank0", "GFLOP/s sum");
    for (int si = 0; si < ns; ++si) {
      double sum = 0;
      for (int r = 0; r < P; ++r) sum += g_all[r * ns + si];
      std::printf("%8lld %12.5f %14.2f %14.2f\n", (long long)sizes[si], s_all[si], g_all[si], sum);
    }
    std::printf("max relative error on sampled entries %.3g (tolerance %.0e)\n", worst, tol);
    io::H5File f = io::H5File::create(output);
    std::vector<std::int64_t> sz(sizes.begin(), sizes.end());
    f.write("gemm/sizes", sz);
    f.write("gemm/gflops", g_all, {std::uint64_t(P), std::uint64_t(ns)});
    f.write("gemm/seconds", s_all, {std::uint64_t(P), std::uint64_t(ns)});
    f.write("gemm/max_rel_error", e_all, {std::uint64_t(P), std::uint64_t(ns)});
    f.set_attr("/", "benchmark", std::string("gemm"));
    f.set_attr("/", "dtype", std::string(scalar_name<T>()));
    f.set_attr("/", "ranks", std::int64_t(P));
    f.set_attr("/", "threads_per_rank", std::int64_t(Kokkos::DefaultExecutionSpace::concurrency()));
    f.set_attr("/", "execution_space", std::string(Kokkos::DefaultExecutionSpace::name()));
    f.set_attr("/", "gemm_path", std::string(path));
    f.set_attr("/", "host", rt.hostname());
    f.set_attr("/", "config", cfg.dump());
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    f.set_attr("/", "date", std::string(date));
    std::printf("wrote %s\n", output.c_str());
  }
  BURST_CHECK(worst <= tol, ErrorKind::Numeric, "gemm result differs from the double-precision reference: relative error ",
              worst, " > ", tol);
}

int cmd_bench_gemm(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_gemm_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  const std::string output = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
  if (cfg.get_string("bench.dtype") == "float") run<float>(rt, cfg, output);
  else run<double>(rt, cfg, output);
  return 0;
}

}  // namespace burst::cli

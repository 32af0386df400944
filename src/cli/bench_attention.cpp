// `burst bench attention`: the block flash-attention kernel, forward and
// backward, on one rank: time and GFLOP/s (paper convention: forward
// 4 S^2 n d, halved for causal; backward 2.5 x forward), against a peak.
// With bench.methods, the distributed methods under mpiexec instead
// (bench_attention_dist.cpp).
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/attention.hpp"

#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <random>

namespace burst::cli {

static ConfigSchema bench_attention_schema() {
  ConfigSchema s;
  s.int_list("bench.seq", {256, 512, 1024}, 1, 1 << 22, "sequence lengths (queries = keys)")
      .integer("bench.heads", 4, 1, 1024, "query heads")
      .integer("bench.kv_heads", 4, 1, 1024, "key/value heads")
      .integer("bench.head_dim", 64, 2, 1024, "head dimension")
      .boolean("bench.causal", true, "causal mask (else full)")
      .integer("bench.repeats", 3, 1, 10000, "timed repetitions (median)")
      .integer("bench.tile", 32, 1, 1024, "query and key tile size")
      .real("bench.peak_gflops", 224.0, 1e-3, 1e9,
            "peak to compare with (default: OpenBLAS sgemm on this 2-core CPU, PLATFORM.md)")
      .string("bench.output", "experiments/results/attention_host.h5", {},
              "HDF5 file to write (with bench.methods, by default experiments/results/attention_dist_np<P>.h5)")
      .string_list("bench.methods", {}, {"ring", "burst", "loongtrain", "ulysses", "usp", "allgather"},
                   "distributed methods to run under mpiexec (empty: the single-rank kernel benchmark)")
      .string_list("bench.layouts", {"zigzag"}, {"contiguous", "zigzag", "striped", "document"}, "methods: sequence layouts")
      .string_list("bench.masks", {"causal"}, {"full", "causal", "window", "document"}, "methods: masks")
      .string_list("bench.rings", {"auto"}, {"flat", "double", "auto"}, "methods: ring shapes (ring, burst, usp)")
      .string("bench.backward", "auto", {"burst", "kv", "auto"}, "methods: what travels in backward")
      .string("bench.partial", "fp32", {"fp32", "bf16"}, "methods: travelling partial sums")
      .integer("bench.window", 0, 0, 1 << 22, "methods, window mask: keys per query (0: S/4)")
      .integer("bench.documents", 4, 1, 1 << 16, "methods, document mask/layout: documents of log-uniform lengths")
      .integer("bench.hp", 0, 0, 1 << 16, "usp: head-parallel size (0: ranks per node)")
      .integer("bench.inner", 0, 0, 1 << 16, "loongtrain: ranks per inner ring (0: ranks per node)")
      .boolean("bench.tile_costs", false,
               "one rank: the kernel's cost per tile by kind (whole, partly visible under each mask, skipped) and of "
               "all-skipped calls, CPU clock, at the block size bench.seq[0] (bench_tiles.cpp)")
      .integer("bench.warmup", 1, 0, 1000, "methods: untimed runs before the repeats")
      .string("bench.dtype", "float", {"float", "double", "bf16"},
              "methods: element type (bf16: bf16 storage, fp32 accumulation and lse, partials per bench.partial; on "
              "CUDA the tensor-core kernels at head dims 64 / 128)")
      .rule([](const Config& c) -> std::string {
        if (c.get_string_list("bench.methods").empty() && c.get_string("bench.dtype") != "float")
          return "bench.dtype = " + c.get_string("bench.dtype") +
                 " needs bench.methods: the single-rank benchmark times the portable float kernel (the bf16 "
                 "tensor-core kernels alone: experiments/kernels/flash_attn/run_h200.sh; in a block: burst bench layer)";
        return "";
      })
      .rule([](const Config& c) -> std::string {
        // A key the chosen mode does not read, given, is refused: a run that
        // silently ignored it (bench.causal = false under the methods, whose
        // mask is bench.masks) would be taken for what was asked.
        const bool methods = !c.get_string_list("bench.methods").empty(), tiles = !methods && c.get_bool("bench.tile_costs");
        const std::vector<std::string> for_methods = {"bench.layouts", "bench.masks", "bench.rings",  "bench.backward",
                                                      "bench.partial", "bench.window", "bench.documents", "bench.hp",
                                                      "bench.inner"};
        std::vector<std::string> unused;
        if (methods) {
          unused = {"bench.causal", "bench.tile", "bench.peak_gflops", "bench.tile_costs"};
        } else {
          unused = for_methods;
          unused.push_back("bench.warmup");  // the kernel and tile benchmarks warm up once
          if (tiles) unused.insert(unused.end(), {"bench.causal", "bench.tile", "bench.peak_gflops"});
        }
        const char* mode = methods ? "the distributed methods (bench.methods; the mask: bench.masks)"
                           : tiles ? "bench.tile_costs (the engine's tiles, causal and other masks by kind)"
                                   : "the single-rank kernel benchmark (no bench.methods)";
        for (const std::string& k : unused)
          if (c.origin(k) != "default") return k + " (" + c.origin(k) + ") is not read by " + mode;
        if (tiles && c.get_int_list("bench.seq").size() > 1)
          return "bench.tile_costs times one block size, bench.seq[0]: bench.seq lists " +
                 std::to_string(c.get_int_list("bench.seq").size()) + " sizes";
        return "";
      })
      .rule([](const Config& c) -> std::string {
        if (c.get_int("bench.heads") % c.get_int("bench.kv_heads") != 0)
          return "bench.heads = " + std::to_string(c.get_int("bench.heads")) + " must be divisible by bench.kv_heads = " +
                 std::to_string(c.get_int("bench.kv_heads"));
        return "";
      });
  return s;
}

int cmd_bench_attention(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_attention_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  if (!cfg.get_string_list("bench.methods").empty()) return bench_attention_methods(rt, cfg, opt.output);
  if (cfg.get_bool("bench.tile_costs")) return bench_attention_tiles(rt, cfg, opt.output);
  check_bench_output(rt, opt.output, opt.output.empty() ? cfg.get_string("bench.output") : opt.output);
  using Mem = DeviceMem;
  const long n = cfg.get_int("bench.heads"), nkv = cfg.get_int("bench.kv_heads"), d = cfg.get_int("bench.head_dim");
  const bool causal = cfg.get_bool("bench.causal");
  const int reps = int(cfg.get_int("bench.repeats"));
  const kernels::AttnTiles tiles{cfg.get_int("bench.tile"), cfg.get_int("bench.tile")};
  const double peak = cfg.get_real("bench.peak_gflops");
  const auto& seqs = cfg.get_int_list("bench.seq");
  for (long S : seqs)  // every length before the first runs
    check_bench_fits("bench attention at " + std::to_string(S) + " tokens (" + std::to_string(n) + " heads, " +
                         std::to_string(nkv) + " kv heads, head dim " + std::to_string(d) + ")",
                     float_attention_views_bytes(S, n, nkv, d));
  std::vector<double> tf, tb, gf, gb, share;
  // CPU seconds of this process per wall second over the timed rounds: below
  // 1 when other jobs share the machine (the experiment runners' calibration
  // divides rates by it: rates per CPU-second).
  std::vector<std::int64_t> sz(seqs.begin(), seqs.end());
  if (rt.rank() == 0)
    std::printf("flash attention (portable kernel), float, %ld heads (kv %ld) x %ld, %s, on %s\n%8s %10s %10s %12s %12s %8s\n", n,
                nkv, d, causal ? "causal" : "full", Kokkos::DefaultExecutionSpace::name(), "S", "fwd s", "bwd s",
                "fwd GFLOP/s", "bwd GFLOP/s", "of peak");
  for (long S : seqs) {
    Kokkos::View<float***, Layout, Mem> q("work/q", S, n, d), k("work/k", S, nkv, d), v("work/v", S, nkv, d),
        dout("work/do", S, n, d), o("work/o", S, n, d), dq("work/dq", S, n, d), dk("work/dk", S, nkv, d),
        dv("work/dv", S, nkv, d);
    Kokkos::View<float**, Layout, Mem> lse("work/lse", S, n), D("work/D", S, n);
    for (auto* x : {&q, &k, &v, &dout}) {
      auto h = Kokkos::create_mirror_view(*x);
      std::mt19937 g(unsigned(S + x->size()));
      std::normal_distribution<float> N(0, 1);
      for (size_t e = 0; e < h.span(); ++e) h.data()[e] = N(g);
      Kokkos::deep_copy(*x, h);
    }
    const auto mask = causal ? kernels::AttnMask<Mem>::causal(0) : kernels::AttnMask<Mem>::none();
    const float scale = 1.0f / std::sqrt(float(d));
    std::vector<double> f, b;
    double cpu_sum = 0, wall_sum = 0;
    for (int r = 0; r <= reps; ++r) {  // first round is warm-up
      const double c0 = process_cpu_seconds();
      Timer t;
      kernels::flash_attention_forward<float, Mem>(q, k, v, mask, scale, o, lse, tiles);
      Kokkos::fence();
      const double t1 = t.seconds();
      kernels::attention_backward_rowsum<float, Mem>(dout, o, D);
      kernels::flash_attention_backward<float, Mem>(q, k, v, dout, lse, D, mask, scale, dq, dk, dv, false, tiles);
      Kokkos::fence();
      if (r > 0) f.push_back(t1), b.push_back(t.seconds() - t1), cpu_sum += process_cpu_seconds() - c0, wall_sum += t.seconds();
    }
    share.push_back(wall_sum > 0 ? cpu_sum / wall_sum / double(Kokkos::DefaultExecutionSpace::concurrency()) : 1.0);
    std::sort(f.begin(), f.end());
    std::sort(b.begin(), b.end());
    const double fwd_flops = 4.0 * double(S) * double(S) * double(n) * double(d) * (causal ? 0.5 : 1.0);
    tf.push_back(f[f.size() / 2]), tb.push_back(b[b.size() / 2]);
    gf.push_back(fwd_flops / tf.back() / 1e9), gb.push_back(2.5 * fwd_flops / tb.back() / 1e9);
    if (rt.rank() == 0)
      std::printf("%8ld %10.4f %10.4f %12.2f %12.2f %7.1f%%\n", S, tf.back(), tb.back(), gf.back(), gb.back(),
                  100.0 * (fwd_flops * 3.5) / (tf.back() + tb.back()) / 1e9 / peak);
  }
  if (rt.rank() == 0) {
    const std::string out = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
    io::H5Output h_out(out);  // "<out>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& h = h_out.file();
    h.write("attention/seq", sz);
    h.write("attention/fwd_seconds", tf);
    h.write("attention/bwd_seconds", tb);
    h.write("attention/fwd_gflops", gf);
    h.write("attention/bwd_gflops", gb);
    h.write("attention/cpu_share", share);
    h.set_attr("/", "benchmark", std::string("attention"));
    h.set_attr("/", "kernel", std::string("portable flash attention (kernels/attention.hpp)"));
    h.set_attr("/", "execution_space", std::string(Kokkos::DefaultExecutionSpace::name()));
    h.set_attr("/", "threads", std::int64_t(Kokkos::DefaultExecutionSpace::concurrency()));
    h.set_attr("/", "peak_gflops", peak);
    h.set_attr("/", "flop_convention", std::string("fwd 4 S^2 n d (x0.5 causal), bwd 2.5 x fwd"));
    h.set_attr("/", "config", cfg.dump());
    h.set_attr("/", "environment", run_environment("; "));
    h_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

}  // namespace burst::cli

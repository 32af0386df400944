// `burst bench step`: one whole training step of a model preset on one
// device (one sequence, causal): forward and backward through the model code
// with an activation policy and the fused LM head + loss, the global
// gradient norm and clipping, and AdamW. In bf16 the weights the model reads
// are a bf16 copy of fp32 master weights; gradients and AdamW moments are
// fp32 (the update writes master and copy in one pass). Reports the step
// time, tokens/s, TFLOP/s and MFU in the paper's convention (ALGORITHMS.md
// section 9: paper_flops, dense peak 989 TFLOP/s unless bench.peak_tflops),
// the phase breakdown (each phase fenced), the loss of every step and the
// peak device memory by category, into HDF5.
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/optim.hpp"
#include "model/llama.hpp"
#include "train/flops.hpp"
#include "train/memory_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace burst::cli {

static ConfigSchema bench_step_schema() {
  ConfigSchema s;
  std::vector<std::string> presets = model_preset_names();
  s.string("bench.preset", "1B", presets, "model preset (model/config.cpp)")
      .int_list("bench.tokens", {32768}, 2, 1L << 26, "sequence lengths, one sequence per step, causal")
      .string("bench.dtype", "bf16", {"bf16", "float", "double"},
              "storage type (bf16: bf16 weights and activations, fp32 master weights, gradients and moments)")
      .string("bench.activation", "whole", {"keep", "full", "whole", "half"}, "activation policy (ALGORITHMS.md 7)")
      .integer("bench.loss_chunk", 2048, 0, 1L << 24, "tokens per chunk of the fused LM head + loss (0: the plain head)")
      .integer("bench.repeats", 3, 1, 1000, "timed steps (median)")
      .integer("bench.warmup", 1, 0, 100, "untimed steps first")
      .real("bench.lr", 1e-4, 0, 1, "AdamW learning rate (constant)")
      .real("bench.grad_clip", 1.0, 0, 1e30, "global gradient-norm clip (0: none)")
      .real("bench.peak_tflops", 989.0, 1e-6, 1e9, "dense peak for the MFU (H100/H200 bf16: 989)")
      .string("bench.output", "experiments/results/step.h5", {}, "HDF5 file to write");
  return s;
}

namespace {

KOKKOS_INLINE_FUNCTION unsigned long mix64(unsigned long x) {
  x ^= x >> 31;
  x *= 0x94D049BB133111EBul;
  x ^= x >> 29;
  return x;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0.0;
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct StepResult {
  long tokens = 0;
  double step_s = 0, fwd_bwd_s = 0, optim_s = 0;
  std::vector<double> step_times, losses, grad_norms;
  std::vector<std::string> phase_names;
  std::vector<double> phase_s;  // per step (median step's table is not kept: mean over the timed steps)
  std::array<std::int64_t, kMemCategories> peak_by_cat{};
  std::int64_t peak_total = 0;
  std::int64_t pool_reserved_high = -1;  // the stream-ordered pool's high-water mark over this size's steps
};

template <class T> StepResult run_one(const Config& cfg, ModelConfig mc, long S) {
  using A = accum_t<T>;
  using Mem = DeviceMem;
  StepResult r;
  r.tokens = S;
  mc.max_position_embeddings = std::max(mc.max_position_embeddings, S);
  mc.rope.max_position_embeddings = std::max(mc.rope.max_position_embeddings, S);
  ModelOptions mo;
  mo.policy = parse_act_policy(cfg.get_string("bench.activation"));
  mo.loss_chunk = cfg.get_int("bench.loss_chunk");
  LlamaModel<T, Mem> model(mc, std::make_shared<LocalAttention<T, Mem>>(1.0 / std::sqrt(double(mc.head_dim))), mo);

  // Weights: uniform with unit output variance per matrix (norms 1), drawn
  // in A and rounded into T; the master keeps A's values.
  auto P = model.params().flat();
  const long np = long(P.extent(0));
  Kokkos::View<A*, Layout, Mem> master;
  if constexpr (std::is_same<A, T>::value) master = P;
  else master = Kokkos::View<A*, Layout, Mem>(mem_label(MemCategory::Optimizer, "master"), size_t(np));
  for (const ParamInfo& p : model.params().table()) {
    const double amp = p.is_norm ? 0.0 : std::sqrt(3.0 / double(p.shape.size() > 1 ? p.shape[1] : 1));
    const double center = p.is_norm ? 1.0 : 0.0;
    const long off = p.offset;
    auto M = master;
    Kokkos::parallel_for(
        "burst::bench_step_init", Kokkos::RangePolicy<ExecSpace>(0, p.size), KOKKOS_LAMBDA(const long i) {
          const unsigned long x = mix64((unsigned long)(off + i) * 0x9E3779B97F4A7C15ul + 0x1234567ul);
          M(off + i) = A(center + amp * (double(x >> 11) * (2.0 / 9007199254740992.0) - 1.0));
        });
  }
  if constexpr (!std::is_same<A, T>::value) {
    auto M = master;
    Kokkos::parallel_for(
        "burst::bench_step_copy", Kokkos::RangePolicy<ExecSpace>(0, np), KOKKOS_LAMBDA(const long i) { P(i) = T(M(i)); });
  }
  Kokkos::View<A*, Layout, Mem> m(mem_label(MemCategory::Optimizer, "adam_m"), size_t(np)),
      v(mem_label(MemCategory::Optimizer, "adam_v"), size_t(np));

  // One sequence: random tokens, labels the next token, positions 0..S-1.
  Kokkos::View<std::int32_t*, Layout, Mem> tok(mem_label(MemCategory::Workspace, "bench.tokens"), size_t(S)),
      lab(mem_label(MemCategory::Workspace, "bench.labels"), size_t(S));
  Kokkos::View<long*, Layout, Mem> pos(mem_label(MemCategory::Workspace, "bench.positions"), size_t(S));
  const long V = mc.vocab;
  Kokkos::parallel_for(
      "burst::bench_step_tokens", Kokkos::RangePolicy<ExecSpace>(0, S), KOKKOS_LAMBDA(const long i) {
        tok(i) = std::int32_t(mix64((unsigned long)i + 77ul) % (unsigned long)V);
        pos(i) = i;
      });
  Kokkos::parallel_for(
      "burst::bench_step_labels", Kokkos::RangePolicy<ExecSpace>(0, S),
      KOKKOS_LAMBDA(const long i) { lab(i) = i + 1 < S ? tok(i + 1) : std::int32_t(kernels::kIgnoreIndex); });
  TokenBatch<Mem> b;
  b.tokens = tok, b.labels = lab, b.positions = pos;
  const long valid = S - 1;

  kernels::AdamWParams hp;
  hp.lr = cfg.get_real("bench.lr");
  const double clip = cfg.get_real("bench.grad_clip");
  PhaseTimes pt;
  auto G = model.grads().flat();
  long t = 0;
  // timed: the step's time is kept (no fences inside); phases: one more
  // step with each phase fenced, for the breakdown only.
  auto one_step = [&](bool timed, bool phases) {
    Kokkos::fence();
    Timer total;
    model.set_phase_times(phases ? &pt : nullptr);
    Kokkos::deep_copy(G, A(0));
    const StepLoss ls = model.forward_backward(b, double(valid));
    Kokkos::fence();
    const double fb = total.seconds();
    Timer opt;
    const double norm = std::sqrt(kernels::sum_squares<A, Mem>(G));
    const double f = kernels::clip_factor(norm, clip);
    ++t;
    if constexpr (std::is_same<A, T>::value) {
      kernels::adamw_step<A, Mem>(master, G, m, v, hp, t, 1.0, f);
    } else {
      kernels::adamw_step_copy<A, T, Mem>(master, G, m, v, hp, t, P, f);
    }
    Kokkos::fence();
    model.set_phase_times(nullptr);
    if (phases) pt.add("optimizer", opt.seconds());
    if (timed) {
      r.step_times.push_back(total.seconds());
      r.losses.push_back(ls.sum / double(std::max(ls.valid, 1L)));
      r.grad_norms.push_back(norm);
      r.fwd_bwd_s += fb;
      r.optim_s += opt.seconds();
    }
    BURST_CHECK(std::isfinite(ls.sum) && std::isfinite(norm), ErrorKind::Numeric, "bench step: step ", t,
                " gave a non-finite loss (", ls.sum, ") or gradient norm (", norm, ")");
  };
  const int warmup = int(cfg.get_int("bench.warmup")), repeats = int(cfg.get_int("bench.repeats"));
  for (int w = 0; w < warmup; ++w) one_step(false, false);
  Kokkos::fence();
  MemoryTracker::global().reset_peaks();
  device_pool_reset_high();
  for (int i = 0; i < repeats; ++i) one_step(true, false);
  one_step(false, true);
  r.pool_reserved_high = device_pool_reserved_high();
  const MemCounters mcnt = MemoryTracker::global().counters(bench_dev_kind());
  for (int c = 0; c < kMemCategories; ++c) r.peak_by_cat[size_t(c)] = mcnt.peak[size_t(c)];
  r.peak_total = mcnt.peak_total + bench_gemm_workspace_bytes();
  r.step_s = median_of(r.step_times);
  r.fwd_bwd_s /= repeats;
  for (const auto& [name, st] : pt.table()) {
    r.phase_names.push_back(name);
    r.phase_s.push_back(st.seconds);
  }
  r.optim_s /= repeats;
  return r;
}

template <class T> int run(Runtime& rt, const Config& cfg, const std::string& cli_output, const std::string& output) {
  const ModelConfig mc = model_preset(cfg.get_string("bench.preset"));
  const double peak = cfg.get_real("bench.peak_tflops") * 1e12;
  std::vector<long> sizes;
  for (auto x : cfg.get_int_list("bench.tokens")) {
    BURST_CHECK_CONFIG(x >= 2, "bench step: bench.tokens entry ", x, " must be >= 2");
    sizes.push_back(long(x));
  }
  BURST_CHECK_CONFIG(!sizes.empty(), "bench step: bench.tokens is empty");
  for (size_t i = 0; i < sizes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      BURST_CHECK_CONFIG(sizes[i] != sizes[j], "bench step: bench.tokens lists ", sizes[i], " twice");
  check_bench_output(rt, cli_output, output);
  {  // every size before the first runs: a lower bound of what a step allocates at once
    const double np = double(mc.parameter_count());
    using A = accum_t<T>;
    // weights (T), fp32 gradients, AdamW's m and v, the fp32 master when T is not A
    const double fixed = np * double(sizeof(T) + 3 * sizeof(A) + (std::is_same<A, T>::value ? 0 : sizeof(A)));
    for (long S : sizes)  // plus each layer's input, which every activation policy keeps
      check_bench_fits("bench step at " + std::to_string(S) + " tokens (the " + cfg.get_string("bench.preset") +
                           " model's weights, gradients and optimizer state, each layer's input)",
                       fixed + double(mc.layers) * double(S) * double(mc.hidden) * double(sizeof(T)));
  }
  // The file first: a path that cannot be created fails before any step runs;
  // each size's group is written as soon as it is measured, into the
  // temporary that publish() renames onto --output at the end.
  std::unique_ptr<io::H5Output> h;  // "<output>.tmp" until complete: a failed or stopped run leaves the earlier file
  if (rt.rank() == 0) h = std::make_unique<io::H5Output>(output);
  std::vector<StepResult> res;
  for (long S : sizes) {
    res.push_back(run_one<T>(cfg, mc, S));
    const StepResult& r = res.back();
    const double fl = paper_flops(mc, double(S), true);
    if (rt.rank() == 0) {
      std::printf("%s %s, %ld tokens, %s, loss chunk %ld: step %.4f s (median of %zu), %.0f tokens/s, %.4g TFLOP/s, "
                  "MFU %.3g%% of %.0f; loss %.4f -> %.4f\n",
                  mc.name.c_str(), scalar_name<T>(), S, cfg.get_string("bench.activation").c_str(),
                  cfg.get_int("bench.loss_chunk"), r.step_s, r.step_times.size(), double(S) / r.step_s,
                  fl / r.step_s / 1e12, 100.0 * fl / r.step_s / peak, peak / 1e12, r.losses.front(), r.losses.back());
      double sum = 0;
      for (size_t i = 0; i < r.phase_names.size(); ++i) sum += r.phase_s[i];
      for (size_t i = 0; i < r.phase_names.size(); ++i)
        std::printf("  %-20s %10.4f s %6.1f%%\n", r.phase_names[i].c_str(), r.phase_s[i],
                    100.0 * r.phase_s[i] / std::max(sum, 1e-300));
      std::printf("  device memory peak %s:", format_bytes(r.peak_total).c_str());
      for (int c = 0; c < kMemCategories; ++c)
        if (r.peak_by_cat[size_t(c)] > 0)
          std::printf(" %s %s", mem_category_name(MemCategory(c)), format_bytes(r.peak_by_cat[size_t(c)]).c_str());
      std::printf("\n");
      // The trainer's analytic model of the same step (one rank, no ZeRO, local attention) beside it.
      MemoryModelInput mi;
      mi.model = mc, mi.slots = S, mi.scalar_bytes = int(sizeof(T)), mi.accum_bytes = int(sizeof(accum_t<T>));
      mi.policy = parse_act_policy(cfg.get_string("bench.activation")), mi.loss_chunk = cfg.get_int("bench.loss_chunk");
      const MemoryEstimate est = estimate_memory(mi);
      std::printf("  analytic model (train/memory_model.hpp) %s\n", est.report().c_str());
      const std::string g = "tokens_" + std::to_string(r.tokens);
      h->file().write(g + "/step_seconds", r.step_times);
      h->file().write(g + "/loss", r.losses);
      h->file().write(g + "/grad_norm", r.grad_norms);
      h->file().write(g + "/phase_seconds", r.phase_s);
      std::string names;
      for (const auto& n : r.phase_names) names += (names.empty() ? "" : ";") + n;
      h->file().set_attr("/" + g, "phase_names", names);
      std::vector<double> mem;
      for (int c = 0; c < kMemCategories; ++c) mem.push_back(double(r.peak_by_cat[size_t(c)]));
      h->file().write(g + "/peak_bytes_by_category", mem);
      std::vector<double> mod;
      for (int c = 0; c < kMemCategories; ++c) mod.push_back(double(est.bytes[size_t(c)]));
      h->file().write(g + "/model_peak_bytes_by_category", mod);
      h->file().set_attr("/" + g, "peak_bytes", r.peak_total);
      h->file().set_attr("/" + g, "pool_reserved_high_bytes", r.pool_reserved_high);
    }
  }
  if (rt.rank() == 0) {
    io::H5File& hf = h->file();
    std::vector<double> tok, step, tps, tfl, mfu, fb, opt;
    for (size_t k = 0; k < res.size(); ++k) {
      const StepResult& r = res[k];
      const double fl = paper_flops(mc, double(r.tokens), true);
      tok.push_back(double(r.tokens)), step.push_back(r.step_s), tps.push_back(double(r.tokens) / r.step_s);
      tfl.push_back(fl / r.step_s / 1e12), mfu.push_back(fl / r.step_s / peak), fb.push_back(r.fwd_bwd_s);
      opt.push_back(r.optim_s);
    }
    hf.write("tokens", tok);
    hf.write("median_step_seconds", step);
    hf.write("tokens_per_second", tps);
    hf.write("tflops", tfl);
    hf.write("mfu", mfu);
    hf.write("mean_fwd_bwd_seconds", fb);
    hf.write("mean_optimizer_seconds", opt);
    std::string cats;
    for (int c = 0; c < kMemCategories; ++c) cats += (c ? ";" : "") + std::string(mem_category_name(MemCategory(c)));
    hf.set_attr("/", "memory_categories", cats);
    hf.set_attr("/", "benchmark", std::string("step"));
    hf.set_attr("/", "model", mc.name);
    hf.set_attr("/", "dtype", std::string(scalar_name<T>()));
    hf.set_attr("/", "parameters", std::int64_t(mc.parameter_count()));
    hf.set_attr("/", "peak_tflops", peak / 1e12);
    hf.set_attr("/", "flops_convention",
               std::string("ALGORITHMS.md 9: paper_flops = 12 S L h^2 [1 + n_kv/n + S/(2h) + 1.5 ffn/h + V/(2 L h)] per "
                           "step (forward + backward, causal), MFU = paper_flops / step time / peak"));
    hf.set_attr("/", "phase_meaning",
               std::string("one more step after the timed ones with each phase of forward_backward fenced at both "
                           "ends (embedding, layer_forward, lm_head_loss, recompute, layer_backward, embedding_backward), "
                           "optimizer = grad norm + clip + AdamW; the timed steps run without those fences"));
    set_bench_provenance(hf, rt, cfg);
    h->publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", output.c_str());
  }
  return 0;
}

}  // namespace

int cmd_bench_step(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_step_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  const std::string output = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
  return with_bench_dtype(cfg.get_string("bench.dtype"),
                          [&](auto t) { return run<decltype(t)>(rt, cfg, opt.output, output); });
}

}  // namespace burst::cli

// `burst bench layer`: one LLaMA decoder block (RMSNorm, q/k/v/o, RoPE,
// causal attention, residual, RMSNorm, SwiGLU MLP, residual) forward and
// backward through the engine's model code (LlamaModel::block_forward /
// block_backward, the code forward_backward runs per layer), at the LLaMA
// 1B / 7B widths and 32K tokens by default, in bf16 (fp32 accumulation,
// fp32 gradients) or float / double. Reported:
//   - the median time of forward + backward and of forward alone, and
//     TFLOP/s in the paper's convention (block_flops_forward; ALGORITHMS.md
//     section 9), as the torch peer (experiments/peers/peers.py `block`);
//   - the phase breakdown, measured in isolation on the same shapes and
//     tensors: attention (LocalAttention forward; backward = rowsum + flash
//     backward), the block's 7 forward and 14 backward GEMMs, and the rest
//     (total minus both: RMSNorm, RoPE, SwiGLU, residual adds, conversions,
//     copies, allocations);
//   - the device memory: the tracker's peak over one forward + backward
//     (every Kokkos allocation: weights, gradients, inputs, activations) and
//     that peak beyond what was allocated before, plus the cuBLASLt workspace;
//   - first, a check at bench.check_tokens tokens (same widths): the block in
//     the bench's type against the block in double with the same weights
//     (relative L2 errors of y, dx and the weight gradients); a miss fails the
//     command after the results are written.
// Rank 0 writes the HDF5 file.
#include "cli/bench_layer.hpp"

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
#include "model/llama.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace burst::cli {

static ConfigSchema bench_layer_schema() {
  ConfigSchema s;
  s.string("bench.preset", "7B", {"1B", "7B", "custom"}, "block widths: 1B (2048, 16 x 128, ffn 5632), 7B (4096, 32 x 128, 11008)")
      .integer("bench.hidden", 0, 0, 1 << 20, "hidden size (0: the preset's)")
      .integer("bench.heads", 0, 0, 4096, "query heads (0: the preset's)")
      .integer("bench.kv_heads", 0, 0, 4096, "key/value heads (0: = heads)")
      .integer("bench.head_dim", 0, 0, 1024, "head dimension (0: the preset's)")
      .integer("bench.ffn", 0, 0, 1 << 20, "MLP width (0: the preset's)")
      .integer("bench.tokens", 32768, 2, 1L << 24, "tokens (one sequence, causal)")
      .string("bench.dtype", "bf16", {"bf16", "float", "double"}, "storage type of weights and activations")
      .integer("bench.repeats", 5, 1, 1000, "timed repetitions (median)")
      .integer("bench.warmup", 1, 0, 100, "untimed forward + backward first")
      .boolean("bench.phases", true, "also time attention and the GEMMs alone (the phase breakdown)")
      .integer("bench.check_tokens", 256, 0, 1L << 20, "tokens of the check against the double block (0: no check)")
      .real("bench.tolerance", 0, 0, 1, "relative error bound of the check (0: 3e-2 bf16, 1e-4 float, 1e-10 double)")
      .string("bench.clock", "wall", {"wall", "cpu"},
              "what the timings measure: wall time, or this process's CPU time (one thread per rank on a shared host)")
      .string("bench.output", "experiments/results/layer.h5", {}, "HDF5 file to write");
  return s;
}

ModelConfig bench_layer_model(const std::string& preset, long hidden, long heads, long kv_heads, long head_dim, long ffn,
                              long tokens) {
  long H = 0, n = 0, d = 0, F = 0;
  if (preset == "1B") H = 2048, n = 16, d = 128, F = 5632;
  else if (preset == "7B") H = 4096, n = 32, d = 128, F = 11008;
  else
    BURST_CHECK_CONFIG(preset == "custom", "bench layer: preset '", preset, "' is not one of 1B, 7B, custom");
  if (hidden > 0) H = hidden;
  if (heads > 0) n = heads;
  if (head_dim > 0) d = head_dim;
  if (ffn > 0) F = ffn;
  BURST_CHECK_CONFIG(H > 0 && n > 0 && d > 0 && F > 0, "bench layer: preset custom needs bench.hidden, bench.heads, "
                     "bench.head_dim and bench.ffn (got ", hidden, ", ", heads, ", ", head_dim, ", ", ffn, ")");
  BURST_CHECK_CONFIG(tokens >= 2, "bench layer: tokens = ", tokens, " must be >= 2");
  const long m = kv_heads > 0 ? kv_heads : n;
  BURST_CHECK_CONFIG(n % m == 0, "bench layer: bench.heads = ", n, heads > 0 ? "" : " (the preset's)",
                     " must be divisible by bench.kv_heads = ", m);
  ModelConfig c;
  c.name = "bench-layer-" + preset;
  c.vocab = 8;  // the block alone: embedding and head are allocated but never used
  c.hidden = H, c.layers = 1, c.heads = n, c.kv_heads = kv_heads > 0 ? kv_heads : n, c.head_dim = d, c.ffn = F;
  c.rms_eps = 1e-5;
  c.mlp = MlpKind::SwiGLU;
  c.max_position_embeddings = std::max(tokens, 2L);
  c.rope.theta = 500000.0;
  c.rope.head_dim = d;
  c.rope.max_position_embeddings = c.max_position_embeddings;
  c.validate();
  return c;
}

double block_flops_forward(const ModelConfig& c, long tokens, bool causal) {
  const double S = double(tokens), h = double(c.hidden), q = double(c.q_dim()), kv = double(c.kv_dim());
  const double gemms = 2.0 * S * (h * q + 2.0 * h * kv + q * h + 3.0 * h * double(c.ffn));
  const double attn = 4.0 * S * S * double(c.heads) * double(c.head_dim) * (causal ? 0.5 : 1.0);
  return gemms + attn;
}

namespace {

KOKKOS_INLINE_FUNCTION double hash_pm1(unsigned long i, unsigned seed) {
  unsigned long x = i * 0x9E3779B97F4A7C15ul + (seed + 1ul) * 0xBF58476D1CE4E5B9ul;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBul;
  x ^= x >> 29;
  return double(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;  // [-1, 1)
}

// v[off + i] = center + amp * u_i, rounded through R (the bench's type), so a
// double block can hold exactly the values of a bf16 or float one.
template <class R, class S>
void fill_range(Kokkos::View<S*, Layout, DeviceMem> v, long off, long n, unsigned seed, double center, double amp) {
  Kokkos::parallel_for(
      "burst::bench_layer_fill", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const long i) {
        v(off + i) = S(double(R(center + amp * hash_pm1((unsigned long)(off + i), seed))));
      });
}

template <class R, class S> void fill_2d(Kokkos::View<S**, Layout, DeviceMem> v, unsigned seed, double amp) {
  fill_range<R, S>(Kokkos::View<S*, Layout, DeviceMem>(v.data(), v.size()), 0, long(v.size()), seed, 0.0, amp);
}

void fill_iota(Kokkos::View<long*, Layout, DeviceMem> v) {
  Kokkos::parallel_for(
      "burst::bench_layer_iota", Kokkos::RangePolicy<ExecSpace>(0, long(v.extent(0))), KOKKOS_LAMBDA(const long i) { v(i) = i; });
}

// sqrt(sum (a - b)^2 / sum b^2) over two flat device arrays.
template <class A, class B> double rel_l2(const A* a, const B* b, long n) {
  Kokkos::View<const A*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> va(a, n);
  Kokkos::View<const B*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> vb(b, n);
  double num = 0, den = 0;
  Kokkos::parallel_reduce(
      "burst::bench_layer_err", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const long i, double& s) {
        const double e = double(va(i)) - double(vb(i));
        s += e * e;
      },
      num);
  Kokkos::parallel_reduce(
      "burst::bench_layer_norm", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const long i, double& s) { s += double(vb(i)) * double(vb(i)); }, den);
  return std::sqrt(num / std::max(den, 1e-300));
}

// One block (layer 0 of a one-layer model), its inputs and buffers. Values
// are hashed from `seed` and rounded through R: weights uniform with unit
// output variance (amplitude sqrt(3 / fan_in)), norm weights 1 +- 0.2, x and
// dy uniform in [-sqrt 3, sqrt 3) (unit variance).
template <class T> struct Block {
  using Model = LlamaModel<T, DeviceMem>;
  ModelConfig cfg;
  long s;
  Model model;
  TokenBatch<DeviceMem> batch;
  View2<T> x, dy, y, dx;
  typename Model::LayerActs acts;

  template <class R>
  static Block make(const ModelConfig& c, long tokens, unsigned seed) {
    Block b(c, tokens);
    b.template fill<R>(seed);
    return b;
  }

  void forward() { model.block_forward(0, batch, x, y, acts); }
  void load_dy() { Kokkos::deep_copy(dx, dy); }
  void backward() { model.block_backward(0, batch, acts, dx); }
  void zero_grads() { Kokkos::deep_copy(model.grads().flat(), accum_t<T>(0)); }

 private:
  Block(const ModelConfig& c, long tokens)
      : cfg(c),
        s(tokens),
        model(c, std::make_shared<LocalAttention<T, DeviceMem>>(1.0 / std::sqrt(double(c.head_dim)))),
        x(mem_label(MemCategory::Workspace, "bench.x"), tokens, c.hidden),
        dy(mem_label(MemCategory::Workspace, "bench.dy"), tokens, c.hidden),
        y(mem_label(MemCategory::Workspace, "bench.y"), tokens, c.hidden),
        dx(mem_label(MemCategory::Workspace, "bench.dx"), tokens, c.hidden) {
    Kokkos::View<std::int32_t*, Layout, DeviceMem> tok(mem_label(MemCategory::Workspace, "bench.tokens"), tokens);
    Kokkos::View<long*, Layout, DeviceMem> pos(mem_label(MemCategory::Workspace, "bench.positions"), tokens);
    fill_iota(pos);
    batch.tokens = tok;
    batch.labels = tok;
    batch.positions = pos;
  }
  template <class R> void fill(unsigned seed) {
    const auto& table = model.params().table();
    auto flat = model.params().flat();
    for (size_t k = 0; k < table.size(); ++k) {
      const ParamInfo& p = table[k];
      const double fan_in = p.shape.size() > 1 ? double(p.shape[1]) : 1.0;
      if (p.is_norm) fill_range<R, T>(flat, p.offset, p.size, seed + 100 + unsigned(k), 1.0, 0.2);
      else fill_range<R, T>(flat, p.offset, p.size, seed + 100 + unsigned(k), 0.0, std::sqrt(3.0 / fan_in));
    }
    fill_2d<R, T>(x, seed + 1, std::sqrt(3.0));
    fill_2d<R, T>(dy, seed + 2, std::sqrt(3.0));
    zero_grads();
  }
};

// The block's GEMMs alone, with the model's weights and gradient buffers and
// inputs / outputs of the block's shapes: the 7 forward calls, the 14 backward.
template <class T> struct BlockGemms {
  using A = accum_t<T>;
  View2<T> in_h, in_q, in_kv, in_f, out_h, out_q, out_kv, out_f;
  FlatTensors<T, DeviceMem>* W;
  FlatTensors<A, DeviceMem>* G;
  BlockGemms(const ModelConfig& c, long s, LlamaModel<T, DeviceMem>& m)
      : in_h(mem_label(MemCategory::Workspace, "bench.g.in_h"), s, c.hidden),
        in_q(mem_label(MemCategory::Workspace, "bench.g.in_q"), s, c.q_dim()),
        in_kv(mem_label(MemCategory::Workspace, "bench.g.in_kv"), s, c.kv_dim()),
        in_f(mem_label(MemCategory::Workspace, "bench.g.in_f"), s, c.ffn),
        out_h(mem_label(MemCategory::Workspace, "bench.g.out_h"), s, c.hidden),
        out_q(mem_label(MemCategory::Workspace, "bench.g.out_q"), s, c.q_dim()),
        out_kv(mem_label(MemCategory::Workspace, "bench.g.out_kv"), s, c.kv_dim()),
        out_f(mem_label(MemCategory::Workspace, "bench.g.out_f"), s, c.ffn),
        W(&m.params()),
        G(&m.grads()) {
    fill_2d<T, T>(in_h, 11, 1.0), fill_2d<T, T>(in_q, 12, 1.0), fill_2d<T, T>(in_kv, 13, 1.0), fill_2d<T, T>(in_f, 14, 1.0);
  }
  void forward() {
    using kernels::gemm;
    const std::string p = "model.layers.0.";
    gemm('N', 'T', 1, in_h, W->mat(p + "self_attn.q_proj.weight"), 0, out_q);
    gemm('N', 'T', 1, in_h, W->mat(p + "self_attn.k_proj.weight"), 0, out_kv);
    gemm('N', 'T', 1, in_h, W->mat(p + "self_attn.v_proj.weight"), 0, out_kv);
    gemm('N', 'T', 1, in_q, W->mat(p + "self_attn.o_proj.weight"), 1, out_h);
    gemm('N', 'T', 1, in_h, W->mat(p + "mlp.up_proj.weight"), 0, out_f);
    gemm('N', 'T', 1, in_h, W->mat(p + "mlp.gate_proj.weight"), 0, out_f);
    gemm('N', 'T', 1, in_f, W->mat(p + "mlp.down_proj.weight"), 1, out_h);
  }
  void backward() {
    using kernels::gemm;
    const std::string p = "model.layers.0.";
    gemm('N', 'N', 1, in_h, W->mat(p + "mlp.down_proj.weight"), 0, out_f);
    gemm('T', 'N', 1, in_h, in_f, 1, G->mat(p + "mlp.down_proj.weight"));
    gemm('N', 'N', 1, in_f, W->mat(p + "mlp.gate_proj.weight"), 0, out_h);
    gemm('T', 'N', 1, in_f, in_h, 1, G->mat(p + "mlp.gate_proj.weight"));
    gemm('N', 'N', 1, in_f, W->mat(p + "mlp.up_proj.weight"), 1, out_h);
    gemm('T', 'N', 1, in_f, in_h, 1, G->mat(p + "mlp.up_proj.weight"));
    gemm('N', 'N', 1, in_h, W->mat(p + "self_attn.o_proj.weight"), 0, out_q);
    gemm('T', 'N', 1, in_h, in_q, 1, G->mat(p + "self_attn.o_proj.weight"));
    gemm('N', 'N', 1, in_q, W->mat(p + "self_attn.q_proj.weight"), 0, out_h);
    gemm('N', 'N', 1, in_kv, W->mat(p + "self_attn.k_proj.weight"), 1, out_h);
    gemm('N', 'N', 1, in_kv, W->mat(p + "self_attn.v_proj.weight"), 1, out_h);
    gemm('T', 'N', 1, in_q, in_h, 1, G->mat(p + "self_attn.q_proj.weight"));
    gemm('T', 'N', 1, in_kv, in_h, 1, G->mat(p + "self_attn.k_proj.weight"));
    gemm('T', 'N', 1, in_kv, in_h, 1, G->mat(p + "self_attn.v_proj.weight"));
  }
};

// bench.clock: "wall" (steady clock) or "cpu" (this process's CPU time: on a
// host shared with other processes, the time the rank computed, whatever
// the scheduler gave it; meaningful for one thread per rank).
bool g_cpu_clock = false;
double clock_now() {
  if (!g_cpu_clock) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return process_cpu_seconds();
}
struct BenchTimer {
  double t0 = clock_now();
  double seconds() const { return clock_now() - t0; }
};

double time_median(int repeats, const std::function<void()>& before, const std::function<void()>& fn) {
  std::vector<double> ts;
  for (int r = 0; r < repeats; ++r) {
    if (before) before();
    Kokkos::fence();
    BenchTimer t;
    fn();
    Kokkos::fence();
    ts.push_back(t.seconds());
  }
  return median(ts);
}

}  // namespace

template <class T> BlockCheck check_block_against_double(const ModelConfig& cfg, long tokens, unsigned seed) {
  BlockCheck r;
  auto a = Block<T>::template make<T>(cfg, tokens, seed);
  a.forward(), a.load_dy(), a.backward();
  auto ref = Block<double>::template make<T>(cfg, tokens, seed);
  ref.forward(), ref.load_dy(), ref.backward();
  Kokkos::fence();
  r.y = rel_l2(a.y.data(), ref.y.data(), long(a.y.size()));
  r.dx = rel_l2(a.dx.data(), ref.dx.data(), long(a.dx.size()));
  const UnitInfo u = a.model.grads().units()[1];  // layer 0
  r.dw = rel_l2(a.model.grads().flat().data() + u.begin, ref.model.grads().flat().data() + u.begin, u.size);
  return r;
}

template BlockCheck check_block_against_double<float>(const ModelConfig&, long, unsigned);
template BlockCheck check_block_against_double<double>(const ModelConfig&, long, unsigned);
template BlockCheck check_block_against_double<bf16>(const ModelConfig&, long, unsigned);

template <class T> static int run(Runtime& rt, const Config& cfg, const std::string& cli_output, const std::string& output) {
  using A = accum_t<T>;
  const long S = cfg.get_int("bench.tokens");
  const std::string preset = cfg.get_string("bench.preset");
  const ModelConfig mc = bench_layer_model(preset, cfg.get_int("bench.hidden"), cfg.get_int("bench.heads"),
                                           cfg.get_int("bench.kv_heads"), cfg.get_int("bench.head_dim"),
                                           cfg.get_int("bench.ffn"), S);
  check_bench_output(rt, cli_output, output);  // after the widths' errors, before any work
  // A lower bound of what the timed block allocates at once: its weights (T)
  // and fp32 gradients, and x, dy, y, dx ([S, hidden] each); its activations
  // come on top.
  check_bench_fits("bench layer at " + std::to_string(S) + " tokens (the block's weights and gradients, x, dy, y, dx)",
                   double(mc.parameter_count()) * double(sizeof(T) + sizeof(A)) + 4.0 * double(S) * double(mc.hidden) * double(sizeof(T)));
  const int repeats = int(cfg.get_int("bench.repeats")), warmup = int(cfg.get_int("bench.warmup"));
  g_cpu_clock = cfg.get_string("bench.clock") == "cpu";
  const long check = std::min(cfg.get_int("bench.check_tokens"), S);
  double tol = cfg.get_real("bench.tolerance");
  if (tol == 0) tol = std::is_same<T, bf16>::value ? 3e-2 : std::is_same<T, float>::value ? 1e-4 : 1e-10;
  const long n = mc.heads, nkv = mc.kv_heads, d = mc.head_dim;

  // ---- check against the double block (same widths, check_tokens tokens)
  BlockCheck chk;
  std::string check_error;  // the check could not run: the timing still does, the command fails at the end
  if (check > 0) {
    ModelConfig cc = mc;
    cc.max_position_embeddings = std::max(check, 2L);
    cc.rope.max_position_embeddings = cc.max_position_embeddings;
    try {
      chk = check_block_against_double<T>(cc, check, 5);
    } catch (const std::exception& e) {
      check_error = e.what();
      chk.y = chk.dx = chk.dw = std::numeric_limits<double>::quiet_NaN();
    }
    if (rt.rank() == 0 && check_error.empty())
      std::printf("check, %ld tokens, %s vs double: relative errors y %.2e, dx %.2e, dW %.2e (tolerance %.0e)\n", check,
                  scalar_name<T>(), chk.y, chk.dx, chk.dw, tol);
    if (rt.rank() == 0 && !check_error.empty()) std::printf("check could not run: %s\n", check_error.c_str());
  }
  const double worst = std::max(chk.y, std::max(chk.dx, chk.dw));
  const bool passed = check_error.empty() && chk.y <= tol && chk.dx <= tol && chk.dw <= tol;  // NaN fails

  // ---- timing
  auto blk = Block<T>::template make<T>(mc, S, 7);
  for (int w = 0; w < warmup; ++w) blk.forward(), blk.load_dy(), blk.backward();
  Kokkos::fence();
  std::vector<double> t_fb, t_f;
  std::int64_t peak = 0, peak_extra = 0;
  // CPU seconds of this process per wall second over the timed forward +
  // backward rounds: below 1 when other processes share the cores (several
  // copies under mpiexec, other jobs); the experiment runners' calibration
  // divides by it (rates per CPU-second).
  double cpu_fb = 0, wall_fb = 0;
  for (int r = 0; r < repeats; ++r) {
    blk.load_dy();
    Kokkos::fence();
    const std::int64_t base = MemoryTracker::global().counters(bench_dev_kind()).current_total;
    if (r == 0) MemoryTracker::global().reset_peaks();
    const double c0 = process_cpu_seconds();
    Timer wall;
    BenchTimer t;
    {
      NvtxRange range("block_fwd_bwd", r == 0);  // the first timed forward + backward (run_h200.sh PART 8)
      blk.forward();
      blk.backward();
      Kokkos::fence();
    }
    t_fb.push_back(t.seconds());
    cpu_fb += process_cpu_seconds() - c0, wall_fb += wall.seconds();
    if (r == 0) {
      peak = MemoryTracker::global().counters(bench_dev_kind()).peak_total + bench_gemm_workspace_bytes();
      peak_extra = MemoryTracker::global().counters(bench_dev_kind()).peak_total - base + bench_gemm_workspace_bytes();
    }
  }
  for (int r = 0; r < repeats; ++r) {
    Kokkos::fence();
    BenchTimer t;
    blk.forward();
    Kokkos::fence();
    t_f.push_back(t.seconds());
    blk.acts = typename LlamaModel<T, DeviceMem>::LayerActs();
  }
  const double fb = median(t_fb), f = median(t_f);
  const double cpu_share = wall_fb > 0 ? cpu_fb / wall_fb / double(Kokkos::DefaultExecutionSpace::concurrency()) : 1.0;
  const double fl_f = block_flops_forward(mc, S, true), fl_fb = 3.0 * fl_f;

  // ---- phases, each alone on the block's shapes
  std::vector<std::string> ph_names;
  std::vector<double> ph_sec;
  double phase_share = 1.0;
  if (cfg.get_bool("bench.phases")) {
    const double pc0 = process_cpu_seconds();
    Timer pt;
    blk.forward();  // the attention inputs (q, k, v after RoPE) and outputs of a real forward
    auto& a = blk.acts;
    using A3 = Kokkos::View<A***, Layout, DeviceMem>;
    using C3 = Kokkos::View<const T***, Layout, DeviceMem>;
    // (O in T, which the layer keeps and the backward reads, stands in for dO too.)
    const C3 q(a.q.data(), S, n, d), k(a.k.data(), S, nkv, d), v(a.v.data(), S, nkv, d), ob(a.ob.data(), S, n, d),
        dout = ob;
    A3 o(mem_label(MemCategory::Workspace, "bench.o"), S, n, d);
    A3 dq(mem_label(MemCategory::Workspace, "bench.dq"), S, n, d), dk(mem_label(MemCategory::Workspace, "bench.dk"), S, nkv, d),
        dv(mem_label(MemCategory::Workspace, "bench.dv"), S, nkv, d);
    auto& op = blk.model.attention();
    const auto attn_f = [&] { op.forward(0, blk.batch, q, k, v, o, a.lse); };
    const auto attn_b = [&] { op.backward(0, blk.batch, q, k, v, ob, a.lse, dout, dq, dk, dv); };
    attn_f(), attn_b();
    const double af = time_median(repeats, nullptr, attn_f), ab = time_median(repeats, nullptr, attn_b);
    blk.acts = typename LlamaModel<T, DeviceMem>::LayerActs();
    o = A3(), dq = A3(), dk = A3(), dv = A3();
    BlockGemms<T> g(mc, S, blk.model);
    g.forward(), g.backward();
    const double gf = time_median(repeats, nullptr, [&] { g.forward(); });
    const double gb = time_median(repeats, nullptr, [&] { g.backward(); });
    ph_names = {"attention_fwd", "attention_bwd", "gemm_fwd", "gemm_bwd", "rest_fwd", "rest_bwd"};
    ph_sec = {af, ab, gf, gb, f - af - gf, (fb - f) - ab - gb};
    phase_share = (process_cpu_seconds() - pc0) / std::max(1e-12, pt.seconds()) / double(Kokkos::DefaultExecutionSpace::concurrency());
  }

  if (rt.rank() == 0) {
    std::printf("LLaMA block %s (hidden %ld, %ld x %ld heads, %ld kv heads, ffn %ld), %ld tokens causal, %s, on %s\n",
                preset.c_str(), mc.hidden, n, d, nkv, mc.ffn, S, scalar_name<T>(), Kokkos::DefaultExecutionSpace::name());
    std::printf("FLOPs (paper convention, ALGORITHMS.md 9): forward %.4g, forward + backward %.4g\n", fl_f, fl_fb);
    std::printf("%-20s %12s %10s  (%s clock)\n", "", "median s", "TFLOP/s", cfg.get_string("bench.clock").c_str());
    std::printf("%-20s %12.6f %10.2f\n", "forward + backward", fb, fl_fb / fb / 1e12);
    std::printf("%-20s %12.6f %10.2f\n", "forward", f, fl_f / f / 1e12);
    std::printf("CPU share over the forward + backward rounds: %.3f\n", cpu_share);
    for (size_t i = 0; i < ph_names.size(); ++i)
      std::printf("  %-18s %12.6f %9.1f%%\n", ph_names[i].c_str(), ph_sec[i],
                  100.0 * ph_sec[i] / (i % 2 == 0 ? f : std::max(fb - f, 1e-300)));
    std::printf("device memory: peak %s over forward + backward, %s beyond what was allocated before (incl. %s cuBLASLt "
                "workspace)\n",
                format_bytes(peak).c_str(), format_bytes(peak_extra).c_str(), format_bytes(bench_gemm_workspace_bytes()).c_str());
    if (device_pool_reserved_high() >= 0)
      std::printf("device memory pool: %s reserved at most (stream-ordered allocation; the whole run, the double check "
                  "included)\n",
                  format_bytes(device_pool_reserved_high()).c_str());
    io::H5Output h_out(output);  // "<output>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& h = h_out.file();
    h.write("layer/fwd_bwd_seconds", t_fb);
    h.write("layer/fwd_seconds", t_f);
    std::string all;
    for (const auto& s : ph_names) all += (all.empty() ? "" : ";") + s;
    if (!ph_sec.empty()) h.write("phases/seconds", ph_sec);
    h.set_attr("/", "phase_names", all);
    h.set_attr("/", "phase_meaning",
               std::string("attention (LocalAttention fwd; bwd = rowsum + flash bwd) and the block's 7 fwd / 14 bwd GEMMs, "
                           "each timed alone on the block's shapes; rest = the block's time minus both"));
    h.set_attr("/", "benchmark", std::string("layer"));
    h.set_attr("/", "preset", preset);
    h.set_attr("/", "tokens", std::int64_t(S));
    h.set_attr("/", "hidden", std::int64_t(mc.hidden));
    h.set_attr("/", "heads", std::int64_t(n));
    h.set_attr("/", "kv_heads", std::int64_t(nkv));
    h.set_attr("/", "head_dim", std::int64_t(d));
    h.set_attr("/", "ffn", std::int64_t(mc.ffn));
    h.set_attr("/", "causal", std::int64_t(1));
    h.set_attr("/", "dtype", std::string(scalar_name<T>()));
    h.set_attr("/", "median_fwd_bwd_s", fb);
    h.set_attr("/", "median_fwd_s", f);
    h.set_attr("/", "cpu_share", cpu_share);
    h.set_attr("/", "clock", cfg.get_string("bench.clock"));
    h.set_attr("/", "cpu_share_phases", phase_share);
    h.set_attr("/", "cpu_share_meaning",
               std::string("process CPU seconds per wall second per thread over the timed forward + backward rounds "
                           "(cpu_share_phases: over the phase timings)"));
    h.set_attr("/", "flops_fwd", fl_f);
    h.set_attr("/", "flops_fwd_bwd", fl_fb);
    h.set_attr("/", "tflops_fwd_bwd", fl_fb / fb / 1e12);
    h.set_attr("/", "tflops_fwd", fl_f / f / 1e12);
    h.set_attr("/", "flops_convention",
               std::string("ALGORITHMS.md 9 per layer: fwd = 2 S (h q + 2 h kv + q h + 3 h ffn) + 4 S^2 n d c (c = 0.5 "
                           "causal), fwd + bwd = 3 fwd = 12 S h^2 [1 + n_kv/n + c S/h + 1.5 ffn/h] when n d = h"));
    h.set_attr("/", "peak_bytes", peak);
    h.set_attr("/", "peak_extra_bytes", peak_extra);
    h.set_attr("/", "pool_reserved_high_bytes", device_pool_reserved_high());
    h.set_attr("/", "peak_meaning",
               std::string("memory tracker (every Kokkos device allocation) over the first timed forward + backward, "
                           "absolute and beyond what was allocated before (weights, fp32 grads, x, dy, y, dx), plus the "
                           "cuBLASLt workspace"));
    h.set_attr("/", "check_tokens", std::int64_t(check));
    h.set_attr("/", "check_rel_error_y", chk.y);
    h.set_attr("/", "check_rel_error_dx", chk.dx);
    h.set_attr("/", "check_rel_error_dw", chk.dw);
    h.set_attr("/", "check_tolerance", tol);
    h.set_attr("/", "check_passed", std::int64_t(passed ? 1 : 0));
    h.set_attr("/", "check_error", check_error);
    set_bench_provenance(h, rt, cfg);
    h_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", output.c_str());
  }
  BURST_CHECK(check_error.empty(), ErrorKind::Numeric, "bench layer: the check against the double block failed to run: ",
              check_error, " (results written with check_passed = 0)");
  BURST_CHECK(passed, ErrorKind::Numeric, "bench layer: the ", scalar_name<T>(), " block differs from the double block: ",
              worst, " > ", tol, " (results written with check_passed = 0)");
  return 0;
}

int cmd_bench_layer(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_layer_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  const std::string output = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
  return with_bench_dtype(cfg.get_string("bench.dtype"),
                          [&](auto t) { return run<decltype(t)>(rt, cfg, opt.output, output); });
}

}  // namespace burst::cli

// The whole LLaMA step: gradients of every parameter against central finite
// differences in double (relative error < 1e-6) for SwiGLU and GELU MLPs,
// GQA, tied and untied heads, document masks and ignored labels; presets and
// Hugging Face config.json in both of its forms. One block alone (the API
// `burst bench layer` times): finite differences in double, float and bf16
// against double, the bench's HDF5 file.
#include "cli/bench_layer.hpp"
#include "cli/commands.hpp"
#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "kernels/cross_entropy.hpp"
#include "model/config.hpp"
#include "model/llama.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace burst;
using Mem = DeviceMem;

namespace {
// (f(x + eps) - f(x - eps)) / 2 eps for the parameter x, left as it was.
template <class F> double central_difference(double& x, double eps, F&& loss) {
  const double x0 = x;
  x = x0 + eps;
  const double lp = loss();
  x = x0 - eps;
  const double lm = loss();
  x = x0;
  return (lp - lm) / (2 * eps);
}

ModelConfig small_config(MlpKind mlp, bool tied, long kv) {
  ModelConfig c;
  c.name = "grad-check";
  c.vocab = 11, c.hidden = 8, c.layers = 2, c.heads = 2, c.kv_heads = kv, c.head_dim = 4, c.ffn = 6;
  c.mlp = mlp;
  c.tie_embeddings = tied;
  c.rope.head_dim = 4;
  c.rope.theta = 100;
  c.rope.scaling.type = "linear";
  c.rope.scaling.factor = 2;
  return c;
}

struct HostBatch {
  std::vector<std::int32_t> tokens, labels;
  std::vector<long> pos;
  std::vector<int> docs;
  std::vector<long> index;
};

template <class T> Kokkos::View<T*, Layout, Mem> dev(const std::vector<T>& v, const char* name) {
  Kokkos::View<T*, Layout, Mem> d(std::string(name), v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}

TokenBatch<Mem> to_device(const HostBatch& h) {
  TokenBatch<Mem> b;
  b.tokens = dev(h.tokens, "act/tokens");
  b.labels = dev(h.labels, "act/labels");
  b.positions = dev(h.pos, "act/pos");
  if (!h.docs.empty()) b.doc_ids = dev(h.docs, "act/docs");
  if (!h.index.empty()) b.index = dev(h.index, "act/index");
  return b;
}
}  // namespace

TEST(Model, GradientsMatchFiniteDifferencesEverywhere) {
  struct Variant {
    MlpKind mlp;
    bool tied;
    long kv;
    bool docs;
    long log_scale;    // ModelConfig::attn_log_scale
    bool given_index;  // TokenBatch::index set (else the row number)
  };
  for (Variant var : {Variant{MlpKind::SwiGLU, false, 1, false, 3, false}, Variant{MlpKind::Gelu, true, 2, true, 0, false},
                      Variant{MlpKind::GeluTanh, false, 2, false, 2, true}}) {
    ModelConfig cfg = small_config(var.mlp, var.tied, var.kv);
    cfg.attn_log_scale = var.log_scale;
    if (var.log_scale == 2) cfg.nope_layers = {1};
    const double scale = 1.0 / std::sqrt(double(cfg.head_dim));
    LlamaModel<double, Mem> model(cfg, std::make_shared<LocalAttention<double, Mem>>(scale));
    init_params(model.params(), 7, 0.5);
    HostBatch hb;
    std::mt19937 g(3);
    const long s = 9;
    for (long i = 0; i < s; ++i) {
      hb.tokens.push_back(int(g() % cfg.vocab));
      hb.labels.push_back(i % 4 == 1 ? kernels::kIgnoreIndex : int(g() % cfg.vocab));
      hb.pos.push_back(var.docs ? (i < 4 ? i : i - 4) : i + 3);
      if (var.docs) hb.docs.push_back(i < 4 ? 0 : 1);
      if (var.given_index) hb.index.push_back(i + 5);
    }
    TokenBatch<Mem> b = to_device(hb);
    Kokkos::deep_copy(model.grads().flat(), 0.0);
    StepLoss l0 = model.forward_backward(b, 1.0);
    EXPECT_EQ(l0.valid, s - 2);
    auto grad = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.grads().flat());
    auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.params().flat());
    auto loss_at = [&]() {
      Kokkos::deep_copy(model.params().flat(), p);
      return model.forward_backward(b, 0.0).sum;
    };
    const double eps = 1e-6;
    double worst = 0;
    std::string worst_name;
    for (const ParamInfo& info : model.params().table()) {
      for (long e = 0; e < info.size; ++e) {
        const long x = info.offset + e;
        const double fd = central_difference(p(x), eps, loss_at);
        const double err = std::fabs(fd - grad(x)) / std::max(1.0, std::fabs(fd));
        if (err > worst) worst = err, worst_name = info.name;
      }
    }
    EXPECT_LT(worst, 1e-6) << "worst at " << worst_name << " (" << cfg.describe() << ")";
  }
}

TEST(Model, RecomputingPoliciesSkipTheLastLayerAndMatchKeep) {
  // Every policy but keep recomputes the layers that wait for their
  // backward, not the last one: its backward follows the head, so its
  // activations stay (llama.cpp embed_and_layers). The recompute phase runs
  // layers - 1 times; the loss and every gradient are keep's to the bit
  // (`whole`, `full`: the recompute runs the same deterministic kernels on
  // the same inputs) or to rounding (`half`: the first half's attention is
  // recomputed against the first half's keys alone).
  ModelConfig cfg = small_config(MlpKind::SwiGLU, false, 1);
  cfg.layers = 3;
  const double scale = 1.0 / std::sqrt(double(cfg.head_dim));
  HostBatch hb;
  std::mt19937 g(5);
  const long s = 10;
  for (long i = 0; i < s; ++i) {
    hb.tokens.push_back(int(g() % cfg.vocab));
    hb.labels.push_back(i % 5 == 2 ? kernels::kIgnoreIndex : int(g() % cfg.vocab));
    hb.pos.push_back(i);
  }
  const TokenBatch<Mem> b = to_device(hb);
  auto run = [&](ActPolicy p, long* recomputes) {
    ModelOptions mo;
    mo.policy = p;
    LlamaModel<double, Mem> model(cfg, std::make_shared<LocalAttention<double, Mem>>(scale), mo);
    init_params(model.params(), 13, 0.5);
    Kokkos::deep_copy(model.grads().flat(), 0.0);
    PhaseTimes times;
    model.set_phase_times(&times);
    const StepLoss l = model.forward_backward(b, double(s - 2));
    auto it = times.table().find("recompute");
    *recomputes = it == times.table().end() ? 0 : it->second.count;
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.grads().flat());
    std::vector<double> out(h.data(), h.data() + h.extent(0));
    out.push_back(l.sum);
    return out;
  };
  long n = -1;
  const std::vector<double> keep = run(ActPolicy::Keep, &n);
  EXPECT_EQ(n, 0);
  for (ActPolicy p : {ActPolicy::Full, ActPolicy::Whole, ActPolicy::Half}) {
    SCOPED_TRACE(act_policy_name(p));
    const std::vector<double> got = run(p, &n);
    EXPECT_EQ(n, cfg.layers - 1);
    ASSERT_EQ(got.size(), keep.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - keep[i]) / std::max(1.0, std::fabs(keep[i])));
    if (p == ActPolicy::Half) EXPECT_LT(worst, 1e-12);
    else EXPECT_EQ(worst, 0.0);
  }
}

TEST(Model, PresetsHaveThePapersSizes) {
  EXPECT_EQ(model_preset("7B").mlp, MlpKind::Gelu);
  // 7B with a non-gated GELU MLP: about 5.3B parameters (ALGORITHMS.md section 10).
  EXPECT_NEAR(double(model_preset("7B").parameter_count()) / 1e9, 5.30, 0.01);
  ModelConfig c14 = model_preset("14B");
  EXPECT_EQ(c14.heads, 40);
  EXPECT_EQ(c14.vocab, 120000);
  EXPECT_NEAR(double(c14.parameter_count()) / 1e9, 14.0, 0.5);
  EXPECT_NO_THROW(model_preset("tiny").validate());
  try {
    model_preset("3B");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST(Model, HuggingFaceConfigBothForms) {
  const std::string v4 = R"({"vocab_size": 128256, "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "head_dim": 64,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "hidden_act": "silu",
    "max_position_embeddings": 131072,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";
  ModelConfig a = model_from_hf_json(v4, "v4.json");
  EXPECT_EQ(a.kv_heads, 8);
  EXPECT_EQ(a.head_dim, 64);
  EXPECT_TRUE(a.tie_embeddings);
  EXPECT_EQ(a.rope.theta, 500000.0);
  EXPECT_EQ(a.rope.scaling.type, "llama3");
  EXPECT_EQ(a.rope.scaling.factor, 32.0);
  EXPECT_EQ(a.rope.scaling.original_max_position_embeddings, 8192);
  const std::string v5 = R"({"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "rope_parameters": {"rope_theta": 20000.0, "rope_type": "yarn", "factor": 4.0,
                        "original_max_position_embeddings": 2048}})";
  ModelConfig b = model_from_hf_json(v5, "v5.json");
  EXPECT_EQ(b.rope.theta, 20000.0);
  EXPECT_EQ(b.rope.scaling.type, "yarn");
  EXPECT_EQ(b.head_dim, 16);
  // Round trip through our writer.
  ModelConfig c = model_from_hf_json(model_to_hf_json(a), "rt.json");
  EXPECT_EQ(c.describe(), a.describe());
  auto err = [](const std::string& text) {
    try {
      model_from_hf_json(text, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(err(R"({"vocab_size": 10})"), "bad.json: required key 'hidden_size' is missing");
  EXPECT_EQ(err(R"({"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 3,
                   "num_key_value_heads": 2, "intermediate_size": 4, "head_dim": 4})"),
            "model num_attention_heads = 3 must be divisible by num_key_value_heads = 2");
  // NoPE layers (Llama 4 / SmolLM3 no_rope_layers) and sliding-window
  // layers (layer_types + sliding_window), through our writer and back.
  const std::string mixed = R"({"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "no_rope_layers": [1, 1, 0],
    "layer_types": ["sliding_attention", "full_attention", "full_attention"], "sliding_window": 512})";
  ModelConfig m = model_from_hf_json(mixed, "mixed.json");
  EXPECT_EQ(m.nope_layers, std::vector<long>({2}));
  EXPECT_EQ(m.window_layers, std::vector<long>({0}));
  EXPECT_EQ(m.sliding_window, 512);
  EXPECT_TRUE(m.uses_rope(0) && m.uses_rope(1) && !m.uses_rope(2));
  EXPECT_TRUE(m.windowed(0) && !m.windowed(1));
  ModelConfig mr = model_from_hf_json(model_to_hf_json(m), "rt.json");
  EXPECT_EQ(mr.nope_layers, m.nope_layers);
  EXPECT_EQ(mr.window_layers, m.window_layers);
  EXPECT_EQ(mr.sliding_window, 512);
  EXPECT_EQ(model_to_hf_json(mr), model_to_hf_json(m));
  const std::string base = R"({"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
                   "num_key_value_heads": 2, "intermediate_size": 4, )";
  EXPECT_EQ(err(base + R"("no_rope_layers": [1, 2]})"), "bad.json: 'no_rope_layers'[1] must be 0 or 1, got 2");
  EXPECT_EQ(err(base + R"("no_rope_layers": [1]})"),
            "bad.json: 'no_rope_layers' must be a list of 2 flags (1 = RoPE, 0 = NoPE), got [1]");
  EXPECT_EQ(err(base + R"("layer_types": ["sliding_attention", "full_attention"]})"),
            "bad.json: 'layer_types' names sliding_attention layers but 'sliding_window' is not an integer");
  EXPECT_EQ(err(base + R"("layer_types": ["chunked_attention", "full_attention"], "sliding_window": 4})"),
            "bad.json: 'layer_types'[0] = chunked_attention is not supported (sliding_attention, full_attention)");
  EXPECT_EQ(err(base + R"("layer_types": ["sliding_attention", "full_attention"], "sliding_window": 0})"),
            "model has 1 sliding-window layers but no sliding_window size");
  EXPECT_EQ(err("{not json"), err("{not json"));
  EXPECT_NE(err("{not json").find("cannot parse bad.json as JSON"), std::string::npos);
  // Absurd sizes are named before anything is built (a billion layers got
  // the process killed for memory); no positions at all is refused.
  auto cfg = [](const std::string& layers, const std::string& hidden, const std::string& heads, const std::string& vocab,
                const std::string& ffn, const std::string& extra) {
    return R"({"num_hidden_layers": )" + layers + R"(, "hidden_size": )" + hidden + R"(, "num_attention_heads": )" + heads +
           R"(, "vocab_size": )" + vocab + R"(, "intermediate_size": )" + ffn + extra + "}";
  };
  EXPECT_EQ(err(cfg("1000000000", "8", "2", "10", "4", "")), "bad.json: 'num_hidden_layers' = 1000000000 is out of range [1, 4096]");
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", R"(, "max_position_embeddings": 0)")),
            "bad.json: 'max_position_embeddings' = 0 is out of range [1, 1073741824]");
  EXPECT_EQ(err(cfg("2", "8", "2", "100000000000", "4", "")), "bad.json: 'vocab_size' = 100000000000 is out of range [2, 16777216]");
  EXPECT_EQ(err(cfg("2", "8", "0", "10", "4", "")), "bad.json: 'num_attention_heads' = 0 is out of range [1, 16384]");
  EXPECT_EQ(err(cfg("2", "99999999", "2", "10", "4", "")), "bad.json: 'hidden_size' = 99999999 is out of range [1, 1048576]");
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "-4", "")), "bad.json: 'intermediate_size' = -4 is out of range [1, 4194304]");
  // Another architecture's config is refused by name, the LLaMA family taken.
  EXPECT_EQ(err(R"({"model_type": "gpt2", "n_layer": 2})"),
            "bad.json: model_type 'gpt2' is not supported: this engine is a LLaMA decoder (llama, mistral, smollm3)");
  EXPECT_EQ(model_from_hf_json(cfg("2", "8", "2", "10", "4", R"(, "model_type": "mistral")"), "m.json").layers, 2);
  // Mistral with a sliding_window windows every layer (it was read as full
  // attention); null means none; a window on another family is not read, as
  // transformers' LlamaConfig does not read it.
  const ModelConfig mw = model_from_hf_json(cfg("3", "8", "2", "10", "4", R"(, "model_type": "mistral", "sliding_window": 4096)"), "m.json");
  EXPECT_EQ(mw.window_layers, std::vector<long>({0, 1, 2}));
  EXPECT_EQ(mw.sliding_window, 4096);
  EXPECT_TRUE(model_from_hf_json(cfg("2", "8", "2", "10", "4", R"(, "model_type": "mistral", "sliding_window": null)"), "m.json")
                  .window_layers.empty());
  EXPECT_TRUE(model_from_hf_json(cfg("2", "8", "2", "10", "4", R"(, "model_type": "llama", "sliding_window": 64)"), "m.json")
                  .window_layers.empty());
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", R"(, "model_type": "mistral", "sliding_window": 0)")),
            "bad.json: mistral 'sliding_window' must be a whole number >= 1 or null, got 0");
  // RoPE scaling that cannot be meant is refused, not replaced: a string or a
  // list was ignored (the default RoPE), original_max_position_embeddings <= 0
  // read as absent, a YaRN beta <= 0 gave infinite or NaN ramp bounds.
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", R"(, "rope_scaling": "linear")")),
            R"(bad.json: 'rope_scaling' must be an object ({"rope_type": ..., "factor": ...}) or null, got "linear")");
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", R"(, "rope_scaling": [2.0])")),
            R"(bad.json: 'rope_scaling' must be an object ({"rope_type": ..., "factor": ...}) or null, got [2.0])");
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", R"(, "rope_parameters": 5)")), "bad.json: 'rope_parameters' must be an object or null, got 5");
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4",
                    R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": -16})")),
            "bad.json: rope scaling original_max_position_embeddings = -16 must be >= 1");
  const std::string yarn = R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16)";
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", yarn + R"(, "beta_fast": 0})")),
            "rope_scaling yarn: beta_fast = 0 and beta_slow = 1 must be > 0");
  EXPECT_EQ(err(cfg("2", "8", "2", "10", "4", yarn + R"(, "beta_slow": -1})")),
            "rope_scaling yarn: beta_fast = 32 and beta_slow = -1 must be > 0");
  EXPECT_EQ(model_from_hf_json(cfg("2", "8", "2", "10", "4", yarn + "}"), "y.json").rope.scaling.type, "yarn");
  EXPECT_EQ(model_from_hf_json(cfg("2", "8", "2", "10", "4", R"(, "rope_scaling": null)"), "n.json").rope.scaling.type, "default");
}

// ------------------------------------------------------------ one block alone

namespace {
template <class T> Kokkos::View<T**, Layout, Mem> random2(long r, long c, std::mt19937& g, double amp) {
  Kokkos::View<T**, Layout, Mem> v("act/random", r, c);
  auto h = Kokkos::create_mirror_view(v);
  std::uniform_real_distribution<double> u(-amp, amp);
  for (long i = 0; i < r; ++i)
    for (long j = 0; j < c; ++j) h(i, j) = T(u(g));
  Kokkos::deep_copy(v, h);
  return v;
}
}  // namespace

// block_forward / block_backward (what `burst bench layer` times) of layer 1
// of a two-layer model: dL/dx and every weight gradient against central
// finite differences of L = sum(y * dy), in double; layer 0's gradients stay 0.
TEST(Block, ApiGradientsMatchFiniteDifferences) {
  ModelConfig cfg = small_config(MlpKind::SwiGLU, false, 1);
  const double scale = 1.0 / std::sqrt(double(cfg.head_dim));
  LlamaModel<double, Mem> model(cfg, std::make_shared<LocalAttention<double, Mem>>(scale));
  init_params(model.params(), 11, 0.5);
  HostBatch hb;
  const long s = 7, H = cfg.hidden;
  for (long i = 0; i < s; ++i) hb.tokens.push_back(0), hb.labels.push_back(0), hb.pos.push_back(i + 2);
  const TokenBatch<Mem> b = to_device(hb);
  std::mt19937 g(5);
  auto x = random2<double>(s, H, g, 1.0), dy = random2<double>(s, H, g, 1.0);
  Kokkos::View<double**, Layout, Mem> y("act/y", s, H), dx("act/dx", s, H);
  LlamaModel<double, Mem>::LayerActs acts;
  Kokkos::deep_copy(model.grads().flat(), 0.0);
  model.block_forward(1, b, x, y, acts);
  Kokkos::deep_copy(dx, dy);
  model.block_backward(1, b, acts, dx);
  EXPECT_EQ(acts.x_in.extent(0), 0u) << "the backward frees the layer's state";
  auto grad = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.grads().flat());
  auto hdx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dx);
  auto hdy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dy);
  auto hx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
  auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.params().flat());
  auto loss_at = [&]() {
    Kokkos::deep_copy(model.params().flat(), p);
    Kokkos::deep_copy(x, hx);
    LlamaModel<double, Mem>::LayerActs a;
    model.block_forward(1, b, x, y, a);
    auto hy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    double l = 0;
    for (long i = 0; i < s; ++i)
      for (long j = 0; j < H; ++j) l += hy(i, j) * hdy(i, j);
    return l;
  };
  const double eps = 1e-6;
  double worst = 0;
  std::string worst_name;
  const UnitInfo u1 = model.params().units()[2];  // layer 1
  for (const ParamInfo& info : model.params().table()) {
    for (long e = 0; e < info.size; ++e) {
      const long k = info.offset + e;
      if (k < u1.begin || k >= u1.begin + u1.size) {
        EXPECT_EQ(grad(k), 0.0) << info.name << " is not layer 1's";
        continue;
      }
      const double fd = central_difference(p(k), eps, loss_at);
      const double err = std::fabs(fd - grad(k)) / std::max(1.0, std::fabs(fd));
      if (err > worst) worst = err, worst_name = info.name;
    }
  }
  for (long i = 0; i < s; ++i)
    for (long j = 0; j < H; ++j) {
      const double fd = central_difference(hx(i, j), eps, loss_at);
      const double err = std::fabs(fd - hdx(i, j)) / std::max(1.0, std::fabs(fd));
      if (err > worst) worst = err, worst_name = "x";
    }
  EXPECT_LT(worst, 1e-6) << "worst at " << worst_name;
  EXPECT_GT(std::fabs(grad(u1.begin)), 0.0);
}

// The block in float and bf16 (bf16 weights and activations, fp32 gradients
// and attention outputs) against the double block with the same values: the
// bench's check. GQA 2:1, head dim 64 (on CUDA builds the flash kernels), a
// token count that is no multiple of the tiles.
TEST(Block, Bf16AndFloatMatchDouble) {
  const ModelConfig c = cli::bench_layer_model("custom", 128, 2, 1, 64, 192, 96);
  const cli::BlockCheck f = cli::check_block_against_double<float>(c, 96, 3);
  EXPECT_LT(f.y, 1e-5);
  EXPECT_LT(f.dx, 1e-5);
  EXPECT_LT(f.dw, 1e-5);
  const cli::BlockCheck h = cli::check_block_against_double<bf16>(c, 96, 3);
  std::printf("bf16 block vs double: y %.2e dx %.2e dW %.2e\n", h.y, h.dx, h.dw);
  EXPECT_LT(h.y, 3e-2);
  EXPECT_LT(h.dx, 3e-2);
  EXPECT_LT(h.dw, 3e-2);
  // and it is bf16: rounding the activations leaves a visible error
  EXPECT_GT(h.y, 1e-4);
  EXPECT_GT(h.dw, 1e-4);
}

TEST(Block, BenchModelPresetsAndBadInput) {
  const ModelConfig b1 = cli::bench_layer_model("1B", 0, 0, 0, 0, 0, 32768);
  EXPECT_EQ(b1.hidden, 2048);
  EXPECT_EQ(b1.heads, 16);
  EXPECT_EQ(b1.kv_heads, 16);
  EXPECT_EQ(b1.head_dim, 128);
  EXPECT_EQ(b1.ffn, 5632);
  const ModelConfig b7 = cli::bench_layer_model("7B", 0, 0, 8, 0, 0, 32768);
  EXPECT_EQ(b7.hidden, 4096);
  EXPECT_EQ(b7.kv_heads, 8);
  EXPECT_EQ(b7.ffn, 11008);
  // ALGORITHMS.md section 9 per layer (no vocabulary term), MHA and causal:
  // 12 S h^2 [1 + n_kv/n + S/(2h) + 1.5 ffn/h] for forward + backward.
  for (const ModelConfig& c : {b1, cli::bench_layer_model("7B", 0, 0, 0, 0, 0, 32768)}) {
    const double S = 32768, h = double(c.hidden);
    const double paper = 12 * S * h * h * (1 + 1 + 0.5 * S / h + 1.5 * double(c.ffn) / h);
    EXPECT_NEAR(3 * cli::block_flops_forward(c, 32768) / paper, 1.0, 1e-12);
  }
  // the torch peer's count at 1B: 0.053 s was 443 TFLOP/s (PLATFORM.md)
  EXPECT_NEAR(3 * cli::block_flops_forward(b1, 32768) / 0.053 / 1e12, 440, 5);
  for (auto bad : {std::vector<long>{0, 2, 0, 16, 8}, std::vector<long>{32, 3, 2, 16, 8}}) {
    try {
      cli::bench_layer_model("custom", bad[0], bad[1], bad[2], bad[3], bad[4], 64);
      FAIL() << "accepted a bad shape";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
    }
  }
}

// `burst bench layer` tiny, in float on the host: the HDF5 file holds the
// shapes, the times, the FLOP count by the convention, the phases, the memory
// and a passed check.
TEST(Block, BenchLayerWritesHdf5) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("burst_bench_layer_test_" + std::to_string(::getpid()) + ".h5")).string();
  cli::BenchGemmOptions opt;
  opt.sets = {"bench.preset=custom", "bench.hidden=32", "bench.heads=2", "bench.kv_heads=1", "bench.head_dim=16",
              "bench.ffn=48", "bench.tokens=40", "bench.dtype=float", "bench.repeats=2", "bench.warmup=0",
              "bench.check_tokens=24"};
  opt.output = out;
  ASSERT_EQ(cli::cmd_bench_layer(Runtime::current(), opt), 0);
  if (Runtime::current().rank() != 0) return;
  io::H5File f = io::H5File::open(out);
  EXPECT_EQ(f.attr_string("/", "benchmark"), "layer");
  EXPECT_EQ(f.attr_string("/", "dtype"), "float32");
  EXPECT_EQ(f.attr_int("/", "tokens"), 40);
  EXPECT_EQ(f.attr_int("/", "hidden"), 32);
  EXPECT_EQ(f.attr_int("/", "kv_heads"), 1);
  EXPECT_EQ(f.attr_int("/", "ffn"), 48);
  const double S = 40, h = 32, q = 32, kv = 16, F = 48;
  const double fwd = 2 * S * (h * q + 2 * h * kv + q * h + 3 * h * F) + 4 * S * S * 2 * 16 * 0.5;
  EXPECT_NEAR(f.attr_double("/", "flops_fwd"), fwd, 1e-6 * fwd);
  EXPECT_NEAR(f.attr_double("/", "flops_fwd_bwd"), 3 * fwd, 3e-6 * fwd);
  const std::vector<double> fb = f.read<double>("layer/fwd_bwd_seconds"), fo = f.read<double>("layer/fwd_seconds");
  ASSERT_EQ(fb.size(), 2u);
  ASSERT_EQ(fo.size(), 2u);
  for (double t : fb) EXPECT_GT(t, 0.0);
  const double med = f.attr_double("/", "median_fwd_bwd_s");
  EXPECT_TRUE(med == fb[0] || med == fb[1]);
  EXPECT_NEAR(f.attr_double("/", "tflops_fwd_bwd"), 3 * fwd / med / 1e12, 1e-9 * 3 * fwd / med / 1e12);
  EXPECT_EQ(f.attr_string("/", "phase_names"), "attention_fwd;attention_bwd;gemm_fwd;gemm_bwd;rest_fwd;rest_bwd");
  const std::vector<double> ph = f.read<double>("phases/seconds");
  ASSERT_EQ(ph.size(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_GT(ph[size_t(i)], 0.0);
  EXPECT_GT(f.attr_int("/", "peak_bytes"), f.attr_int("/", "peak_extra_bytes"));
  EXPECT_GT(f.attr_int("/", "peak_extra_bytes"), 0);
  EXPECT_EQ(f.attr_int("/", "check_tokens"), 24);
  EXPECT_EQ(f.attr_int("/", "check_passed"), 1);
  for (const char* k : {"check_rel_error_y", "check_rel_error_dx", "check_rel_error_dw"}) {
    EXPECT_LT(f.attr_double("/", k), 1e-4) << k;
    EXPECT_GT(f.attr_double("/", k), 0.0) << k << ": float against double cannot be exact";
  }
  for (const char* k : {"execution_space", "host", "config", "date", "flops_convention"})
    EXPECT_TRUE(f.has_attr("/", k)) << k;
  f.close();
  std::filesystem::remove(out);
}

// The whole LLaMA step: gradients of every parameter against central finite
// differences in double (relative error < 1e-6) for SwiGLU and GELU MLPs,
// GQA, tied and untied heads, document masks and ignored labels; presets and
// Hugging Face config.json in both of its forms.
#include "core/error.hpp"
#include "kernels/cross_entropy.hpp"
#include "model/config.hpp"
#include "model/llama.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace burst;
using Mem = DeviceMem;

namespace {
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
        const double x0 = p(x);
        p(x) = x0 + eps;
        const double lp = loss_at();
        p(x) = x0 - eps;
        const double lm = loss_at();
        p(x) = x0;
        const double fd = (lp - lm) / (2 * eps);
        const double err = std::fabs(fd - grad(x)) / std::max(1.0, std::fabs(fd));
        if (err > worst) worst = err, worst_name = info.name;
      }
    }
    EXPECT_LT(worst, 1e-6) << "worst at " << worst_name << " (" << cfg.describe() << ")";
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
}

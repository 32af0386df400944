// Model configuration: LLaMA-family decoder. Presets (tiny, 125M, 1B, the
// paper's 7B and 14B) and Hugging Face config.json in both forms found in the
// wild: rope_theta + rope_scaling (transformers 4.x) and rope_parameters
// {rope_theta, rope_type, ...} (transformers 5.x).
#pragma once

#include "kernels/rope.hpp"

#include <string>
#include <vector>

namespace burst {

enum class MlpKind { SwiGLU, Gelu, GeluTanh };

struct ModelConfig {
  std::string name = "custom";
  long vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  long max_position_embeddings = 4096;
  double rms_eps = 1e-5;
  MlpKind mlp = MlpKind::SwiGLU;
  bool tie_embeddings = false;
  kernels::RopeConfig rope;  // rope.head_dim == head_dim
  // Layers whose attention takes no rotary embedding (NoPE, as the
  // interleaved layers of Llama 4 / SmolLM3: Hugging Face `no_rope_layers`,
  // where 0 marks such a layer). Empty: every layer uses RoPE.
  std::vector<long> nope_layers;
  bool uses_rope(long layer) const;
  // Layers whose attention is a causal sliding window of `sliding_window`
  // tokens (the query's own included), the rest attend to everything before
  // them: Hugging Face `layer_types` ("sliding_attention" / "full_attention")
  // with `sliding_window`, as Gemma 3, Qwen 3 and gpt-oss configs have it.
  long sliding_window = 0;
  std::vector<long> window_layers;
  bool windowed(long layer) const;
  // > 0: log-length attention scaling (in the spirit of Scalable-Softmax and
  // Llama 4's attention temperature): the query of token index i (counted
  // from the sequence start, so it sees n = i + 1 keys) is multiplied by
  // max(1, ln n / ln attn_log_scale), so a key's logit margin grows with the
  // number of competitors instead of drowning among them. Not a Hugging Face
  // key: written as "burst_attn_log_scale".
  long attn_log_scale = 0;

  long q_dim() const { return heads * head_dim; }
  long kv_dim() const { return kv_heads * head_dim; }
  // Throws Error(Config) naming the impossible value.
  void validate() const;
  long parameter_count() const;
  std::string describe() const;
};

// "tiny", "125M", "1B", "7B", "14B".
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();
// A Hugging Face config.json (text). `source` names it in messages.
ModelConfig model_from_hf_json(const std::string& text, const std::string& source);
ModelConfig model_from_hf_file(const std::string& path);
// Writes the config as Hugging Face config.json text (transformers 4.x form).
std::string model_to_hf_json(const ModelConfig& c);

}  // namespace burst

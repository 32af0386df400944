#include "model/config.hpp"

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace burst {

void ModelConfig::validate() const {
  BURST_CHECK_CONFIG(vocab >= 2, "model vocab_size = ", vocab, " must be >= 2");
  BURST_CHECK_CONFIG(hidden >= 1, "model hidden_size = ", hidden, " must be >= 1");
  BURST_CHECK_CONFIG(layers >= 1, "model num_hidden_layers = ", layers, " must be >= 1");
  BURST_CHECK_CONFIG(heads >= 1 && kv_heads >= 1, "model heads = ", heads, " and kv_heads = ", kv_heads, " must be >= 1");
  BURST_CHECK_CONFIG(heads % kv_heads == 0, "model num_attention_heads = ", heads,
                     " must be divisible by num_key_value_heads = ", kv_heads);
  BURST_CHECK_CONFIG(head_dim >= 2 && head_dim % 2 == 0, "model head_dim = ", head_dim, " must be even and >= 2 (RoPE)");
  BURST_CHECK_CONFIG(ffn >= 1, "model intermediate_size = ", ffn, " must be >= 1");
  BURST_CHECK_CONFIG(rms_eps > 0, "model rms_norm_eps = ", rms_eps, " must be > 0");
  BURST_CHECK_CONFIG(rope.head_dim == head_dim, "rope dimension ", rope.head_dim, " must equal head_dim ", head_dim);
  kernels::rope_table(rope, 1);  // checks the scaling parameters
}

long ModelConfig::parameter_count() const {
  const long attn = hidden * q_dim() + 2 * hidden * kv_dim() + q_dim() * hidden;
  const long mlp_mats = mlp == MlpKind::SwiGLU ? 3 : 2;
  const long per_layer = attn + mlp_mats * hidden * ffn + 2 * hidden;
  return vocab * hidden * (tie_embeddings ? 1 : 2) + layers * per_layer + hidden;
}

std::string ModelConfig::describe() const {
  std::ostringstream os;
  os << name << ": " << layers << " layers, hidden " << hidden << ", heads " << heads << " (kv " << kv_heads
     << ") x " << head_dim << ", ffn " << ffn << " ("
     << (mlp == MlpKind::SwiGLU ? "SwiGLU" : mlp == MlpKind::Gelu ? "GELU" : "GELU-tanh") << "), vocab " << vocab
     << ", rope theta " << rope.theta << " (" << rope.scaling.type << ")" << (tie_embeddings ? ", tied" : "")
     << ", " << parameter_count() << " parameters";
  return os.str();
}

static ModelConfig make(const std::string& name, long vocab, long hidden, long layers, long heads, long kv, long ffn,
                        MlpKind mlp, long max_pos, double theta = 10000.0) {
  ModelConfig c;
  c.name = name;
  c.vocab = vocab, c.hidden = hidden, c.layers = layers, c.heads = heads, c.kv_heads = kv;
  c.head_dim = hidden / heads, c.ffn = ffn, c.mlp = mlp, c.max_position_embeddings = max_pos;
  c.rope.theta = theta;
  c.rope.head_dim = c.head_dim;
  c.rope.max_position_embeddings = max_pos;
  return c;
}

std::vector<std::string> model_preset_names() { return {"tiny", "125M", "1B", "7B", "14B"}; }

ModelConfig model_preset(const std::string& name) {
  // tiny: tests and the demo (byte-level vocabulary plus task tokens).
  if (name == "tiny") return make("tiny", 64, 64, 2, 4, 2, 128, MlpKind::SwiGLU, 65536);
  if (name == "125M") return make("125M", 32000, 768, 12, 12, 12, 2048, MlpKind::SwiGLU, 65536);
  if (name == "1B") return make("1B", 32000, 2048, 16, 16, 16, 5632, MlpKind::SwiGLU, 65536);
  // The paper's settings (ALGORITHMS.md section 10).
  if (name == "7B") return make("7B", 32000, 4096, 32, 32, 32, 11008, MlpKind::Gelu, 1 << 21);
  if (name == "14B") return make("14B", 120000, 5120, 40, 40, 40, 13824, MlpKind::SwiGLU, 1 << 21);
  std::string list;
  for (auto& n : model_preset_names()) list += (list.empty() ? "" : ", ") + n;
  BURST_FAIL(ErrorKind::Config, "unknown model preset '", name, "' (presets: ", list, "; or a config.json path)");
}

namespace {
using json = nlohmann::json;

long get_long(const json& j, const char* key, const std::string& src, long def = -1) {
  if (!j.contains(key) || j[key].is_null()) {
    BURST_CHECK_CONFIG(def >= 0, src, ": required key '", key, "' is missing");
    return def;
  }
  BURST_CHECK_CONFIG(j[key].is_number_integer(), src, ": '", key, "' must be an integer, got ", j[key].dump());
  return j[key].get<long>();
}

double get_double(const json& j, const char* key, double def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  return j[key].get<double>();
}

kernels::RopeScaling parse_scaling(const json& s, const std::string& src) {
  kernels::RopeScaling r;
  std::string type = s.contains("rope_type") ? s["rope_type"].get<std::string>()
                     : s.contains("type")    ? s["type"].get<std::string>()
                                             : "default";
  r.type = type;
  r.factor = get_double(s, "factor", 1.0);
  if (s.contains("original_max_position_embeddings") && !s["original_max_position_embeddings"].is_null())
    r.original_max_position_embeddings = s["original_max_position_embeddings"].get<long>();
  r.low_freq_factor = get_double(s, "low_freq_factor", 1.0);
  r.high_freq_factor = get_double(s, "high_freq_factor", 4.0);
  r.beta_fast = get_double(s, "beta_fast", 32.0);
  r.beta_slow = get_double(s, "beta_slow", 1.0);
  r.attention_factor = get_double(s, "attention_factor", 0.0);
  if (s.contains("truncate")) r.truncate = s["truncate"].get<bool>();
  (void)src;
  return r;
}
}  // namespace

ModelConfig model_from_hf_json(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
    BURST_FAIL(ErrorKind::Config, "cannot parse ", src, " as JSON: ", e.what());
  }
  BURST_CHECK_CONFIG(j.is_object(), src, ": a config.json must be a JSON object");
  try {
    ModelConfig c;
    c.name = j.value("_name_or_path", std::string("hf"));
    if (c.name.empty()) c.name = "hf";
    c.vocab = get_long(j, "vocab_size", src);
    c.hidden = get_long(j, "hidden_size", src);
    c.layers = get_long(j, "num_hidden_layers", src);
    c.heads = get_long(j, "num_attention_heads", src);
    c.kv_heads = get_long(j, "num_key_value_heads", src, c.heads);
    BURST_CHECK_CONFIG(c.heads >= 1, src, ": num_attention_heads = ", c.heads, " must be >= 1");
    c.head_dim = get_long(j, "head_dim", src, c.hidden / c.heads);
    c.ffn = get_long(j, "intermediate_size", src);
    c.max_position_embeddings = get_long(j, "max_position_embeddings", src, 4096);
    c.rms_eps = get_double(j, "rms_norm_eps", 1e-6);
    c.tie_embeddings = j.value("tie_word_embeddings", false);
    const std::string act = j.value("hidden_act", std::string("silu"));
    const bool gated = j.value("mlp_gated", act == "silu" || act == "swish");
    if (gated) {
      BURST_CHECK_CONFIG(act == "silu" || act == "swish", src, ": hidden_act '", act, "' with a gated MLP is not supported (silu)");
      c.mlp = MlpKind::SwiGLU;
    } else if (act == "gelu") {
      c.mlp = MlpKind::Gelu;
    } else if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
      c.mlp = MlpKind::GeluTanh;
    } else {
      BURST_FAIL(ErrorKind::Config, src, ": hidden_act '", act, "' is not supported (silu, gelu, gelu_new, gelu_pytorch_tanh)");
    }
    for (const char* k : {"attention_bias", "mlp_bias"})
      BURST_CHECK_CONFIG(!j.value(k, false), src, ": '", k, "' = true is not supported (LLaMA has no biases)");
    c.rope.head_dim = c.head_dim;
    c.rope.max_position_embeddings = c.max_position_embeddings;
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {  // transformers 5.x
      const json& rp = j["rope_parameters"];
      c.rope.theta = get_double(rp, "rope_theta", get_double(j, "rope_theta", 10000.0));
      c.rope.scaling = parse_scaling(rp, src);
    } else {  // transformers 4.x
      c.rope.theta = get_double(j, "rope_theta", 10000.0);
      if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) c.rope.scaling = parse_scaling(j["rope_scaling"], src);
    }
    c.validate();
    return c;
  } catch (const json::exception& e) {
    BURST_FAIL(ErrorKind::Config, src, ": a value has the wrong type: ", e.what());
  }
}

ModelConfig model_from_hf_file(const std::string& path) {
  std::ifstream in(path);
  BURST_CHECK_CONFIG(in.good(), "cannot open model config '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return model_from_hf_json(ss.str(), path);
}

std::string model_to_hf_json(const ModelConfig& c) {
  json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["vocab_size"] = c.vocab;
  j["hidden_size"] = c.hidden;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.ffn;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_eps;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["hidden_act"] = c.mlp == MlpKind::SwiGLU ? "silu" : c.mlp == MlpKind::Gelu ? "gelu" : "gelu_pytorch_tanh";
  if (c.mlp != MlpKind::SwiGLU) j["mlp_gated"] = false;
  j["rope_theta"] = c.rope.theta;
  if (c.rope.scaling.type != "default") {
    const auto& s = c.rope.scaling;
    json r{{"rope_type", s.type}, {"factor", s.factor}};
    if (s.original_max_position_embeddings > 0) r["original_max_position_embeddings"] = s.original_max_position_embeddings;
    if (s.type == "llama3") r["low_freq_factor"] = s.low_freq_factor, r["high_freq_factor"] = s.high_freq_factor;
    if (s.type == "yarn") {
      r["beta_fast"] = s.beta_fast, r["beta_slow"] = s.beta_slow;
      if (s.attention_factor > 0) r["attention_factor"] = s.attention_factor;
    }
    j["rope_scaling"] = r;
  }
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  return j.dump(2);
}

}  // namespace burst

#include "model/config.hpp"

#include "core/error.hpp"
#include "core/text_file.hpp"

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
  BURST_CHECK_CONFIG(max_position_embeddings >= 1, "model max_position_embeddings = ", max_position_embeddings, " must be >= 1");
  BURST_CHECK_CONFIG(rms_eps > 0, "model rms_norm_eps = ", rms_eps, " must be > 0");
  BURST_CHECK_CONFIG(rope.head_dim == head_dim, "rope dimension ", rope.head_dim, " must equal head_dim ", head_dim);
  kernels::rope_table(rope, 1);  // checks the scaling parameters
  for (std::size_t i = 0; i < nope_layers.size(); ++i) {
    BURST_CHECK_CONFIG(nope_layers[i] >= 0 && nope_layers[i] < layers, "model NoPE layer ", nope_layers[i],
                       " is not a layer index in [0, ", layers, ")");
    for (std::size_t j = 0; j < i; ++j)
      BURST_CHECK_CONFIG(nope_layers[j] != nope_layers[i], "model NoPE layer ", nope_layers[i], " is listed twice");
  }
  BURST_CHECK_CONFIG(attn_log_scale == 0 || attn_log_scale >= 2, "model attn_log_scale = ", attn_log_scale,
                     " must be 0 (off) or a length >= 2");
  BURST_CHECK_CONFIG(sliding_window >= 0, "model sliding_window = ", sliding_window, " must be >= 0");
  BURST_CHECK_CONFIG(window_layers.empty() || sliding_window >= 1, "model has ", window_layers.size(),
                     " sliding-window layers but no sliding_window size");
  for (std::size_t i = 0; i < window_layers.size(); ++i) {
    BURST_CHECK_CONFIG(window_layers[i] >= 0 && window_layers[i] < layers, "model sliding-window layer ", window_layers[i],
                       " is not a layer index in [0, ", layers, ")");
    for (std::size_t j = 0; j < i; ++j)
      BURST_CHECK_CONFIG(window_layers[j] != window_layers[i], "model sliding-window layer ", window_layers[i],
                         " is listed twice");
  }
}

bool ModelConfig::windowed(long layer) const {
  for (long l : window_layers)
    if (l == layer) return true;
  return false;
}

bool ModelConfig::uses_rope(long layer) const {
  for (long l : nope_layers)
    if (l == layer) return false;
  return true;
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
     << ", rope theta " << rope.theta << " (" << rope.scaling.type << ")";
  if (!nope_layers.empty()) {
    os << ", NoPE layers";
    for (long l : nope_layers) os << " " << l;
  }
  if (attn_log_scale > 0) os << ", log-n attention scale beyond " << attn_log_scale;
  if (!window_layers.empty()) {
    os << ", window " << sliding_window << " in layers";
    for (long l : window_layers) os << " " << l;
  }
  os << (tie_embeddings ? ", tied" : "")
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

// A size of the model: in [lo, hi], named with its key and the file.
// Absurd sizes (a billion layers) got the process killed for memory while
// the parameter table was being built.
long get_size(const json& j, const char* key, const std::string& src, long lo, long hi, long def = -1) {
  const long v = get_long(j, key, src, def);
  BURST_CHECK_CONFIG(v >= lo && v <= hi, src, ": '", key, "' = ", v, " is out of range [", lo, ", ", hi, "]");
  return v;
}

// Upper bounds of the sizes a config.json may give (far above any model
// released: Llama 3 405B has 126 layers, hidden 16384, ffn 53248; vocabularies
// stop near 262144; contexts near 10M).
constexpr long kMaxLayers = 4096, kMaxHidden = 1L << 20, kMaxHeads = 1L << 14, kMaxVocab = 1L << 24,
               kMaxFfn = 1L << 22, kMaxPositions = 1L << 30;

// The model_type values whose checkpoints are this LLaMA decoder (the same
// tensors and computation); absent = ours, or a hand-written config.
bool llama_family(const std::string& t) { return t == "llama" || t == "mistral" || t == "smollm3"; }

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
  if (s.contains("original_max_position_embeddings") && !s["original_max_position_embeddings"].is_null()) {
    r.original_max_position_embeddings = s["original_max_position_embeddings"].get<long>();
    // <= 0 read as absent: max_position_embeddings took its place without a word
    BURST_CHECK_CONFIG(r.original_max_position_embeddings >= 1, src, ": rope scaling original_max_position_embeddings = ",
                       r.original_max_position_embeddings, " must be >= 1");
  }
  r.low_freq_factor = get_double(s, "low_freq_factor", 1.0);
  r.high_freq_factor = get_double(s, "high_freq_factor", 4.0);
  r.beta_fast = get_double(s, "beta_fast", 32.0);
  r.beta_slow = get_double(s, "beta_slow", 1.0);
  r.attention_factor = get_double(s, "attention_factor", 0.0);
  if (s.contains("truncate")) r.truncate = s["truncate"].get<bool>();
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
    std::string model_type;
    if (j.contains("model_type") && !j["model_type"].is_null()) {
      const std::string t = j["model_type"].is_string() ? j["model_type"].get<std::string>() : j["model_type"].dump();
      BURST_CHECK_CONFIG(llama_family(t), src, ": model_type '", t,
                         "' is not supported: this engine is a LLaMA decoder (llama, mistral, smollm3)");
      model_type = t;
    }
    ModelConfig c;
    c.name = j.value("_name_or_path", std::string("hf"));
    if (c.name.empty()) c.name = "hf";
    c.vocab = get_size(j, "vocab_size", src, 2, kMaxVocab);
    c.hidden = get_size(j, "hidden_size", src, 1, kMaxHidden);
    c.layers = get_size(j, "num_hidden_layers", src, 1, kMaxLayers);
    c.heads = get_size(j, "num_attention_heads", src, 1, kMaxHeads);
    c.kv_heads = get_size(j, "num_key_value_heads", src, 1, kMaxHeads, c.heads);
    c.head_dim = get_size(j, "head_dim", src, 0, kMaxHidden, c.hidden / c.heads);  // 0: validate() names it
    c.ffn = get_size(j, "intermediate_size", src, 1, kMaxFfn);
    c.max_position_embeddings = get_size(j, "max_position_embeddings", src, 1, kMaxPositions, 4096);
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
    BURST_CHECK_CONFIG(!j.contains("rope_parameters") || j["rope_parameters"].is_null() || j["rope_parameters"].is_object(), src,
                       ": 'rope_parameters' must be an object or null, got ", j.contains("rope_parameters") ? j["rope_parameters"].dump() : "");
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {  // transformers 5.x
      const json& rp = j["rope_parameters"];
      c.rope.theta = get_double(rp, "rope_theta", get_double(j, "rope_theta", 10000.0));
      c.rope.scaling = parse_scaling(rp, src);
    } else {  // transformers 4.x
      c.rope.theta = get_double(j, "rope_theta", 10000.0);
      if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {  // a string or a list was ignored: the default RoPE
        BURST_CHECK_CONFIG(j["rope_scaling"].is_object(), src, ": 'rope_scaling' must be an object ({\"rope_type\": ..., "
                           "\"factor\": ...}) or null, got ", j["rope_scaling"].dump());
        c.rope.scaling = parse_scaling(j["rope_scaling"], src);
      }
    }
    if (j.contains("no_rope_layers") && !j["no_rope_layers"].is_null()) {  // Llama 4, SmolLM3: 1 = RoPE, 0 = NoPE
      const json& nr = j["no_rope_layers"];
      BURST_CHECK_CONFIG(nr.is_array() && long(nr.size()) >= c.layers, src, ": 'no_rope_layers' must be a list of ",
                         c.layers, " flags (1 = RoPE, 0 = NoPE), got ", nr.dump());
      for (long l = 0; l < c.layers; ++l) {
        BURST_CHECK_CONFIG(nr[l].is_number_integer() && (nr[l].get<long>() == 0 || nr[l].get<long>() == 1), src,
                           ": 'no_rope_layers'[", l, "] must be 0 or 1, got ", nr[l].dump());
        if (nr[l].get<long>() == 0) c.nope_layers.push_back(l);
      }
    }
    if (j.contains("burst_attn_log_scale") && !j["burst_attn_log_scale"].is_null()) {
      BURST_CHECK_CONFIG(j["burst_attn_log_scale"].is_number_integer(), src, ": 'burst_attn_log_scale' must be an integer, got ",
                         j["burst_attn_log_scale"].dump());
      c.attn_log_scale = j["burst_attn_log_scale"].get<long>();
    }
    if (j.contains("layer_types") && !j["layer_types"].is_null()) {  // Gemma 3, Qwen 3, gpt-oss
      const json& lt = j["layer_types"];
      BURST_CHECK_CONFIG(lt.is_array() && long(lt.size()) == c.layers, src, ": 'layer_types' must list ", c.layers,
                         " layer kinds, got ", lt.dump());
      for (long l = 0; l < c.layers; ++l) {
        const std::string k = lt[l].is_string() ? lt[l].get<std::string>() : lt[l].dump();
        BURST_CHECK_CONFIG(k == "sliding_attention" || k == "full_attention", src, ": 'layer_types'[", l, "] = ", k,
                           " is not supported (sliding_attention, full_attention)");
        if (k == "sliding_attention") c.window_layers.push_back(l);
      }
      if (!c.window_layers.empty()) {
        BURST_CHECK_CONFIG(j.contains("sliding_window") && j["sliding_window"].is_number_integer(), src,
                           ": 'layer_types' names sliding_attention layers but 'sliding_window' is not an integer");
        c.sliding_window = j["sliding_window"].get<long>();
      }
    } else if (model_type == "mistral" && j.contains("sliding_window") && !j["sliding_window"].is_null()) {
      // Mistral windows every layer when sliding_window is set (Mistral 7B
      // v0.1: 4096; later versions write null). It was read as full
      // attention: other logits beyond the window.
      BURST_CHECK_CONFIG(j["sliding_window"].is_number_integer() && j["sliding_window"].get<long>() >= 1, src,
                         ": mistral 'sliding_window' must be a whole number >= 1 or null, got ", j["sliding_window"].dump());
      c.sliding_window = j["sliding_window"].get<long>();
      for (long l = 0; l < c.layers; ++l) c.window_layers.push_back(l);
    }
    c.validate();
    return c;
  } catch (const json::exception& e) {
    BURST_FAIL(ErrorKind::Config, src, ": a value has the wrong type: ", e.what());
  }
}

ModelConfig model_from_hf_file(const std::string& path) {
  return model_from_hf_json(read_text_file("model config", path, ErrorKind::Config), path);
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
  if (!c.nope_layers.empty()) {
    std::vector<int> flags(std::size_t(c.layers), 1);
    for (long l : c.nope_layers) flags[std::size_t(l)] = 0;
    j["no_rope_layers"] = flags;
  }
  if (c.attn_log_scale > 0) j["burst_attn_log_scale"] = c.attn_log_scale;
  if (!c.window_layers.empty()) {
    std::vector<std::string> kinds(std::size_t(c.layers), "full_attention");
    for (long l : c.window_layers) kinds[std::size_t(l)] = "sliding_attention";
    j["layer_types"] = kinds;
    j["sliding_window"] = c.sliding_window;
  }
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  return j.dump(2);
}

}  // namespace burst

#include "model/params.hpp"

#include <random>

namespace burst {

std::vector<ParamInfo> llama_param_table(const ModelConfig& c) {
  std::vector<ParamInfo> t;
  long off = 0;
  int unit = 0;
  auto add = [&](const std::string& name, std::vector<long> shape, bool norm = false) {
    long n = 1;
    for (long s : shape) n *= s;
    t.push_back({name, shape, off, n, norm, unit});
    off += n;
  };
  add("model.embed_tokens.weight", {c.vocab, c.hidden});
  for (long l = 0; l < c.layers; ++l) {
    unit = int(l) + 1;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {c.hidden}, true);
    add(p + "self_attn.q_proj.weight", {c.q_dim(), c.hidden});
    add(p + "self_attn.k_proj.weight", {c.kv_dim(), c.hidden});
    add(p + "self_attn.v_proj.weight", {c.kv_dim(), c.hidden});
    add(p + "self_attn.o_proj.weight", {c.hidden, c.q_dim()});
    add(p + "post_attention_layernorm.weight", {c.hidden}, true);
    if (c.mlp == MlpKind::SwiGLU) add(p + "mlp.gate_proj.weight", {c.ffn, c.hidden});
    add(p + "mlp.up_proj.weight", {c.ffn, c.hidden});
    add(p + "mlp.down_proj.weight", {c.hidden, c.ffn});
  }
  unit = int(c.layers) + 1;
  add("model.norm.weight", {c.hidden}, true);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab, c.hidden});
  return t;
}

std::vector<UnitInfo> param_units(const std::vector<ParamInfo>& table) {
  std::vector<UnitInfo> u;
  for (const ParamInfo& p : table) {
    if (size_t(p.unit) >= u.size()) u.resize(size_t(p.unit) + 1, UnitInfo{p.offset, 0});
    UnitInfo& x = u[size_t(p.unit)];
    BURST_CHECK(x.begin + x.size == p.offset, ErrorKind::Internal, "parameter ", p.name, " is not contiguous with its unit");
    x.size += p.size;
  }
  return u;
}

template <class T, class Mem> void init_params(FlatTensors<T, Mem>& p, std::uint64_t seed, double std) {
  auto h = Kokkos::create_mirror_view(p.flat());
  const auto& t = p.table();
  for (size_t k = 0; k < t.size(); ++k) {
    std::mt19937_64 g(seed * 0x9E3779B97F4A7C15ull + k + 1);
    std::normal_distribution<double> N(0.0, std);
    for (long i = 0; i < t[k].size; ++i) h(t[k].offset + i) = T(t[k].is_norm ? 1.0 : N(g));
  }
  Kokkos::deep_copy(p.flat(), h);
}

template void init_params<float, DeviceMem>(FlatTensors<float, DeviceMem>&, std::uint64_t, double);
template void init_params<double, DeviceMem>(FlatTensors<double, DeviceMem>&, std::uint64_t, double);
template void init_params<bf16, DeviceMem>(FlatTensors<bf16, DeviceMem>&, std::uint64_t, double);

}  // namespace burst

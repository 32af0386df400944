#include "model/llama.hpp"

#include "core/timer.hpp"
#include "kernels/activations.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/lm_head_loss.hpp"
#include "kernels/rmsnorm.hpp"

#include <cmath>
#include <memory>

namespace burst {

using kernels::gemm;

// ------------------------------------------------------------ LocalAttention

namespace {
// (A free function: CUDA's extended lambdas may not live in private members.)
template <class Mem> void fill_iota(Kokkos::View<long*, Layout, Mem> ix) {
  Kokkos::parallel_for(
      "burst::attn_index", Kokkos::RangePolicy<typename Mem::execution_space>(0, long(ix.extent(0))),
      KOKKOS_LAMBDA(const long i) { ix(i) = i; });
}
}  // namespace

template <class T, class Mem> kernels::AttnMask<Mem> LocalAttention<T, Mem>::mask(const TokenBatch<Mem>& b) const {
  if (b.doc_ids.extent(0) > 0) return kernels::AttnMask<Mem>::document(b.doc_ids, b.doc_ids, b.positions, b.positions);
  if (window_ > 0) {
    // The window counts tokens (index order), as under sequence parallelism,
    // whatever positions RoPE is given (data.random_positions spreads them).
    const long s = b.seq_len();
    if (long(index_.extent(0)) != s) {
      index_ = Kokkos::View<long*, Layout, Mem>(mem_label(MemCategory::Workspace, "attn.index"), size_t(s));
      fill_iota<Mem>(index_);
    }
    return kernels::AttnMask<Mem>::sliding_window(window_, index_, index_);
  }
  return kernels::AttnMask<Mem>::causal(0);
}

template <class T, class Mem>
void LocalAttention<T, Mem>::forward(int, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) {
  kernels::flash_attention_forward<T, Mem>(q, k, v, mask(b), A(scale_), o, lse, kernels::AttnTiles::uncounted());
}

template <class T, class Mem>
void LocalAttention<T, Mem>::backward(int, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v,
                                      CV3 o, Kokkos::View<const A**, Layout, Mem> lse,
                                      CV3 dout, V3 dq, V3 dk, V3 dv) {
  auto D = uninit_view<Kokkos::View<A**, Layout, Mem>>(mem_label(MemCategory::Activations, "attn.D"), o.extent(0), o.extent(1));
  kernels::attention_backward_rowsum<T, Mem, T>(dout, o, D);
  kernels::flash_attention_backward<T, Mem>(q, k, v, dout, lse, D, mask(b), A(scale_), dq, dk, dv, false,
                                            kernels::AttnTiles::uncounted());
}

// ------------------------------------------------------------------- model

namespace {
// x [s, w] rows times max(1, ln(i + 1) / ln(ref)), i the token index of the
// row (b.index, or the row number): ModelConfig::attn_log_scale. The same
// factor scales dq in backward.
template <class T, class Mem>
void log_length_scale(Kokkos::View<T**, Layout, Mem> x, Kokkos::View<const long*, Layout, Mem> index, long ref) {
  const long s = long(x.extent(0)), w = long(x.extent(1));
  const bool given = index.extent(0) > 0;
  const double inv = 1.0 / std::log(double(ref));
  Kokkos::parallel_for(
      "burst::log_length_scale", Kokkos::RangePolicy<typename Mem::execution_space>(0, s * w), KOKKOS_LAMBDA(const long x_) {
        const long i = x_ / w, c = x_ % w;
        const double n = double(given ? index(i) : i) + 1.0;
        const double f = kx::log(n) * inv;
        if (f > 1.0) x(i, c) = T(double(x(i, c)) * f);
      });
}
}  // namespace

ActPolicy parse_act_policy(const std::string& name) {
  if (name == "keep") return ActPolicy::Keep;
  if (name == "full") return ActPolicy::Full;
  if (name == "whole") return ActPolicy::Whole;
  if (name == "half") return ActPolicy::Half;
  BURST_FAIL(ErrorKind::Config, "activation policy '", name, "' is not one of keep, full, whole, half");
}

const char* act_policy_name(ActPolicy p) {
  switch (p) {
    case ActPolicy::Keep: return "keep";
    case ActPolicy::Full: return "full";
    case ActPolicy::Whole: return "whole";
    case ActPolicy::Half: return "half";
  }
  return "?";
}

template <class T, class Mem>
LlamaModel<T, Mem>::LlamaModel(const ModelConfig& cfg, std::shared_ptr<AttentionOp<T, Mem>> attn, const ModelOptions& opt)
    : cfg_(cfg),
      attn_(std::move(attn)),
      opt_(opt),
      params_(llama_param_table(cfg), MemCategory::Params, "weights"),
      grads_(llama_param_table(cfg), MemCategory::Grads, "grads") {
  cfg_.validate();
  BURST_CHECK_CONFIG(opt_.loss_chunk >= 0, "loss chunk = ", opt_.loss_chunk, " must be >= 0 (0: the plain LM head)");
}

template <class T, class Mem>
void LlamaModel<T, Mem>::use_param_hooks(ParamHooks* hooks, bool params_per_unit, bool grads_per_unit) {
  hooks_ = hooks;
  if (params_per_unit) params_ = FlatTensors<T, Mem>::per_unit(params_.table());
  if (grads_per_unit) grads_ = FlatTensors<A, Mem>::per_unit(grads_.table());
}

template <class T, class Mem>
Kokkos::View<double*, Layout, Mem> LlamaModel<T, Mem>::rope_freqs(long seq_len, double* attention_factor) {
  if (seq_len != rope_len_) {
    kernels::RopeTable t = kernels::rope_table(cfg_.rope, seq_len);
    Kokkos::View<double*, Layout, Mem> f(mem_label(MemCategory::Workspace, "rope.inv_freq"), t.inv_freq.size());
    auto h = Kokkos::create_mirror_view(f);
    for (size_t e = 0; e < t.inv_freq.size(); ++e) h(e) = t.inv_freq[e];
    Kokkos::deep_copy(f, h);
    rope_table_ = f;
    rope_factor_ = t.attention_factor;
    rope_len_ = seq_len;
  }
  *attention_factor = rope_factor_;
  return rope_table_;
}

namespace {
// Activations are allocated without initialisation: every one is written
// whole by the kernel that makes it (tests run with BURST_POISON=1, which
// fills them with NaN first, to prove it).
template <class T, class Mem> Kokkos::View<T**, Layout, Mem> act2(const char* name, long r, long c) {
  return uninit_view<Kokkos::View<T**, Layout, Mem>>(mem_label(MemCategory::Activations, name), r, c);
}
template <class T, class Mem> Kokkos::View<T*, Layout, Mem> act1(const char* name, long r) {
  return uninit_view<Kokkos::View<T*, Layout, Mem>>(mem_label(MemCategory::Activations, name), r);
}
template <class V> auto as3(const V& v, long a, long b, long c) {
  using T = typename V::value_type;
  return Kokkos::View<T***, Layout, typename V::memory_space>(v.data(), a, b, c);
}
template <class V> auto cv(const V& v) {
  using T = typename V::non_const_value_type;
  return Kokkos::View<const T**, Layout, typename V::memory_space>(v);
}
// x (accum_t<T>) in the storage type T, an activation named `name`
// (kernels::storage_copy: x itself when the types agree).
template <class T, class Mem>
Kokkos::View<T**, Layout, Mem> to_storage(const char* name, const Kokkos::View<accum_t<T>**, Layout, Mem>& x) {
  return kernels::storage_copy<T, Mem>(x, mem_label(MemCategory::Activations, name));
}
// The backward's dq / dk (accum_t<T>, [s, heads * d]) rotated by RoPE's transpose into the storage type
// T: in place when the types agree, else into a new T view in the same pass as the conversion.
template <class T, class Mem>
Kokkos::View<T**, Layout, Mem> rope_to_storage(const char* name, const Kokkos::View<accum_t<T>**, Layout, Mem>& x, long heads,
                                               long d, Kokkos::View<const long*, Layout, Mem> pos,
                                               Kokkos::View<const double*, Layout, Mem> freqs, double af) {
  const long s = long(x.extent(0));
  if constexpr (std::is_same<accum_t<T>, T>::value) {
    (void)name;
    kernels::rope_apply<T, Mem>(as3(x, s, heads, d), pos, freqs, af, true);
    return x;
  } else {
    auto y = uninit_view<Kokkos::View<T**, Layout, Mem>>(mem_label(MemCategory::Activations, name), s, x.extent(1));
    kernels::rope_apply_to<accum_t<T>, T, Mem>(as3(x, s, heads, d), as3(y, s, heads, d), pos, freqs, af, true);
    return y;
  }
}
}  // namespace

template <class T, class Mem>
void LlamaModel<T, Mem>::layer_forward(int l, const TokenBatch<Mem>& b, V2 x, LayerActs& a, V2 x_out, AttnSource src) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  const long s = b.seq_len(), H = cfg_.hidden, n = cfg_.heads, nkv = cfg_.kv_heads, d = cfg_.head_dim, F = cfg_.ffn;
  a.x_in = x;
  a.h1 = act2<T, Mem>("h1", s, H);
  a.rstd1 = act1<A, Mem>("rstd1", s);
  kernels::rmsnorm_forward<T, Mem>(x, params_.vec(p + "input_layernorm.weight"), cfg_.rms_eps, a.h1, a.rstd1);
  a.q = act2<T, Mem>("q", s, n * d);
  a.k = act2<T, Mem>("k", s, nkv * d);
  a.v = act2<T, Mem>("v", s, nkv * d);
  gemm('N', 'T', 1, a.h1, params_.mat(p + "self_attn.q_proj.weight"), 0, a.q);
  gemm('N', 'T', 1, a.h1, params_.mat(p + "self_attn.k_proj.weight"), 0, a.k);
  gemm('N', 'T', 1, a.h1, params_.mat(p + "self_attn.v_proj.weight"), 0, a.v);
  if (cfg_.uses_rope(l)) {
    double af = 1;
    auto freqs = rope_freqs(s, &af);
    kernels::rope_apply<T, Mem>(as3(a.q, s, n, d), b.positions, freqs, af, false);
    kernels::rope_apply<T, Mem>(as3(a.k, s, nkv, d), b.positions, freqs, af, false);
  }
  if (cfg_.attn_log_scale > 0) log_length_scale<T, Mem>(a.q, b.index, cfg_.attn_log_scale);
  using A3 = Kokkos::View<A***, Layout, Mem>;
  AV2 o;  // the method's O (accum_t<T>), until it is in the storage type
  if (src == AttnSource::Compute) {
    o = act2<A, Mem>("attn.o", s, n * d);
    a.lse = act2<A, Mem>("attn.lse", s, n);
    attn_->forward(l, b, as3(a.q, s, n, d), as3(a.k, s, nkv, d), as3(a.v, s, nkv, d), as3(o, s, n, d), a.lse);
  } else if (src == AttnSource::FirstHalf) {
    // a.ob (O in the storage type), a.lse hold the cached second half
    // [s - s/2, .]; the first half is recomputed against first-half keys only.
    const long h = s / 2;
    o = act2<A, Mem>("attn.o", s, n * d);
    AV2 lse = act2<A, Mem>("attn.lse", s, n);
    kernels::convert<T, A, Mem>(a.ob, Kokkos::subview(o, std::make_pair(h, s), Kokkos::ALL));
    Kokkos::deep_copy(Kokkos::subview(lse, std::make_pair(h, s), Kokkos::ALL), a.lse);
    TokenBatch<Mem> bh;
    bh.tokens = decltype(bh.tokens)(b.tokens.data(), h);
    bh.labels = decltype(bh.labels)(b.labels.data(), h);
    bh.positions = decltype(bh.positions)(b.positions.data(), h);
    if (b.doc_ids.extent(0) > 0) bh.doc_ids = decltype(bh.doc_ids)(b.doc_ids.data(), h);
    if (b.index.extent(0) > 0) bh.index = decltype(bh.index)(b.index.data(), h);
    attn_->forward_first_half(l, bh, V3(a.q.data(), h, n, d), V3(a.k.data(), h, nkv, d), V3(a.v.data(), h, nkv, d),
                              A3(o.data(), h, n, d), AV2(lse.data(), h, n));
    a.lse = lse;
  }
  // AttnSource::Cached: a.ob (O in the storage type) and a.lse are the
  // forward's own. Otherwise O in the storage type is what the layer keeps
  // (the O projection and attention's backward read it; bf16: the fp32 O
  // goes as soon as it is converted).
  if (src != AttnSource::Cached) a.ob = to_storage<T, Mem>("attn.o_storage", o), o = AV2();
  // x2 = x + o_proj(o): the GEMM reads x and writes x2 (no copy of x first)
  a.x2 = act2<T, Mem>("x2", s, H);
  gemm('N', 'T', 1, a.ob, params_.mat(p + "self_attn.o_proj.weight"), 1, x, a.x2);
  a.h2 = act2<T, Mem>("h2", s, H);
  a.rstd2 = act1<A, Mem>("rstd2", s);
  kernels::rmsnorm_forward<T, Mem>(a.x2, params_.vec(p + "post_attention_layernorm.weight"), cfg_.rms_eps, a.h2, a.rstd2);
  a.up = act2<T, Mem>("mlp.up", s, F);
  a.m = act2<T, Mem>("mlp.act", s, F);
  gemm('N', 'T', 1, a.h2, params_.mat(p + "mlp.up_proj.weight"), 0, a.up);
  if (cfg_.mlp == MlpKind::SwiGLU) {
    a.gate = act2<T, Mem>("mlp.gate", s, F);
    gemm('N', 'T', 1, a.h2, params_.mat(p + "mlp.gate_proj.weight"), 0, a.gate);
    kernels::swiglu_forward<T, Mem>(a.gate, a.up, a.m);
  } else {
    kernels::gelu_forward<T, Mem>(a.up, cfg_.mlp == MlpKind::Gelu ? kernels::Gelu::Erf : kernels::Gelu::Tanh, a.m);
  }
  if (x_out.extent(0) == 0) return;
  gemm('N', 'T', 1, a.m, params_.mat(p + "mlp.down_proj.weight"), 1, a.x2, x_out);  // x_out = x2 + down(m)
}

template <class T, class Mem> void LlamaModel<T, Mem>::keep_for_backward(int l, LayerActs& a) {
  if (opt_.policy == ActPolicy::Keep) return;
  LayerActs kept;
  kept.x_in = a.x_in;
  // The attention cache holds O once, in the storage type (ALGORITHMS.md
  // section 7: s*H*2 + s*n*4 bytes per layer in bf16), not the fp32 O the
  // method produced: the O projection and attention's backward (D =
  // rowsum(dO * O), as FlashAttention computes D from its bf16 O) read that
  // copy anyway. (float / double: the same view.)
  if (opt_.policy == ActPolicy::Whole) {
    kept.ob = a.ob, kept.lse = a.lse;
  } else if (opt_.policy == ActPolicy::Half) {
    const long s = long(a.ob.extent(0)), h = s / 2;
    kept.ob = act2<T, Mem>("attn.o_second_half", s - h, long(a.ob.extent(1)));
    kept.lse = act2<A, Mem>("attn.lse_second_half", s - h, long(a.lse.extent(1)));
    Kokkos::deep_copy(kept.ob, Kokkos::subview(a.ob, std::make_pair(h, s), Kokkos::ALL));
    Kokkos::deep_copy(kept.lse, Kokkos::subview(a.lse, std::make_pair(h, s), Kokkos::ALL));
  }
  a = kept;
  attn_->release(l);
}

template <class T, class Mem> void LlamaModel<T, Mem>::recompute(int l, const TokenBatch<Mem>& b, LayerActs& a) {
  // Keep, or a layer whose activations stayed (the last layer in forward_backward).
  if (opt_.policy == ActPolicy::Keep || a.complete) return;
  Phase ph("recompute", phase_times_, phase_times_ != nullptr);
  const AttnSource src = opt_.policy == ActPolicy::Full    ? AttnSource::Compute
                         : opt_.policy == ActPolicy::Whole ? AttnSource::Cached
                                                           : AttnSource::FirstHalf;
  layer_forward(l, b, a.x_in, a, V2(), src);
}

template <class T, class Mem>
typename LlamaModel<T, Mem>::V2 LlamaModel<T, Mem>::embed_and_layers(const TokenBatch<Mem>& b, std::vector<LayerActs>& acts,
                                                                    AV1& rstd_f, V2& hf, bool for_backward) {
  const long s = b.seq_len(), H = cfg_.hidden;
  V2 x = act2<T, Mem>("x0", s, H);
  {
    Phase ph("embedding", phase_times_, phase_times_ != nullptr);
    Held p0(hooks_, 0);
    kernels::embedding_forward<T, Mem>(b.tokens, cv(params_.mat("model.embed_tokens.weight")), x);
  }
  acts.resize(cfg_.layers);
  for (int l = 0; l < cfg_.layers; ++l) {
    Phase ph("layer_forward", phase_times_, phase_times_ != nullptr);
    Held pl(hooks_, l + 1);
    V2 xo = act2<T, Mem>("x_out", s, H);
    layer_forward(l, b, x, acts[l], xo);
    if (for_backward && l + 1 == cfg_.layers && opt_.policy != ActPolicy::Keep) {
      // The last layer's backward comes right after the head: its
      // activations stay whole instead of being dropped and rebuilt by a
      // recompute (which would give the same bits; ALGORITHMS.md section 7's
      // policies are about the layers that wait). The method's state goes
      // as under the policy: its backward works from its arguments.
      acts[l].complete = true;
      attn_->release(l);
    } else if (for_backward) {
      keep_for_backward(l, acts[l]);
    } else {  // forward only: each layer's input stays (the hidden states)
      LayerActs in;
      in.x_in = acts[l].x_in;
      acts[l] = in;
      attn_->release(l);
    }
    x = xo;
  }
  hf = act2<T, Mem>("h_final", s, H);
  rstd_f = act1<A, Mem>("rstd_final", s);
  Held pn(hooks_, norm_unit());
  kernels::rmsnorm_forward<T, Mem>(x, params_.vec("model.norm.weight"), cfg_.rms_eps, hf, rstd_f);
  return x;
}

template <class T, class Mem> void LlamaModel<T, Mem>::forward_logits(const TokenBatch<Mem>& b, V2 logits) {
  std::vector<LayerActs> acts;
  AV1 rstd_f;
  V2 hf;
  embed_and_layers(b, acts, rstd_f, hf, false);
  Held ph(hooks_, head_unit());
  const char* head = cfg_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  gemm('N', 'T', 1, hf, params_.mat(head), 0, logits);
}

template <class T, class Mem>
void LlamaModel<T, Mem>::forward_logits(const TokenBatch<Mem>& b, V2 logits, std::vector<V2>& hidden_states) {
  std::vector<LayerActs> acts;
  AV1 rstd_f;
  V2 hf;
  embed_and_layers(b, acts, rstd_f, hf, false);
  Held ph(hooks_, head_unit());
  hidden_states.clear();
  for (auto& a : acts) hidden_states.push_back(a.x_in);  // layer l's input is layer l-1's output
  hidden_states.push_back(hf);
  const char* head = cfg_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  gemm('N', 'T', 1, hf, params_.mat(head), 0, logits);
}

template <class T, class Mem>
void LlamaModel<T, Mem>::layer_backward(int l, const TokenBatch<Mem>& b, LayerActs& a, V2 dx) {
  // On entry dx = dL/d(layer output); on exit dL/d(layer input).
  const std::string p = "model.layers." + std::to_string(l) + ".";
  const long s = b.seq_len(), H = cfg_.hidden, n = cfg_.heads, nkv = cfg_.kv_heads, d = cfg_.head_dim, F = cfg_.ffn;
  // MLP: out = x2 + down(m)
  V2 dm = act2<T, Mem>("d.mlp.act", s, F);
  gemm('N', 'N', 1, dx, params_.mat(p + "mlp.down_proj.weight"), 0, dm);
  gemm('T', 'N', 1, dx, a.m, 1, grads_.mat(p + "mlp.down_proj.weight"));
  V2 dh2 = act2<T, Mem>("d.h2", s, H);
  V2 dup = act2<T, Mem>("d.mlp.up", s, F);
  if (cfg_.mlp == MlpKind::SwiGLU) {
    V2 dgate = act2<T, Mem>("d.mlp.gate", s, F);
    kernels::swiglu_backward<T, Mem>(dm, a.gate, a.up, dgate, dup);
    gemm('N', 'N', 1, dgate, params_.mat(p + "mlp.gate_proj.weight"), 0, dh2);
    gemm('T', 'N', 1, dgate, a.h2, 1, grads_.mat(p + "mlp.gate_proj.weight"));
    gemm('N', 'N', 1, dup, params_.mat(p + "mlp.up_proj.weight"), 1, dh2);
  } else {
    kernels::gelu_backward<T, Mem>(dm, a.up, cfg_.mlp == MlpKind::Gelu ? kernels::Gelu::Erf : kernels::Gelu::Tanh, dup);
    gemm('N', 'N', 1, dup, params_.mat(p + "mlp.up_proj.weight"), 0, dh2);
  }
  gemm('T', 'N', 1, dup, a.h2, 1, grads_.mat(p + "mlp.up_proj.weight"));
  V2 dx2 = act2<T, Mem>("d.x2", s, H);
  // dx2 = RMSNorm's backward + dx (the residual, added in the same pass)
  kernels::rmsnorm_backward<T, Mem>(dh2, a.x2, params_.vec(p + "post_attention_layernorm.weight"), a.rstd2, dx2,
                                    grads_.vec(p + "post_attention_layernorm.weight"), dx);
  // The backward frees what it has read for the last time as it goes, so the
  // layer has two peaks, not one sum (the MLP's, then attention's; the
  // memory models count them so): the MLP's saved tensors and gradients go
  // before attention's backward allocates its own.
  dm = V2(), dh2 = V2(), dup = V2();
  a.m = V2(), a.gate = V2(), a.up = V2(), a.h2 = V2(), a.x2 = V2(), a.rstd2 = AV1();
  // Attention: x2 = x + o_proj(o)
  V2 dO = act2<T, Mem>("d.attn.o", s, n * d);
  gemm('N', 'N', 1, dx2, params_.mat(p + "self_attn.o_proj.weight"), 0, dO);
  gemm('T', 'N', 1, dx2, a.ob, 1, grads_.mat(p + "self_attn.o_proj.weight"));
  AV2 dqa = act2<A, Mem>("d.q", s, n * d), dka = act2<A, Mem>("d.k", s, nkv * d), dva = act2<A, Mem>("d.v", s, nkv * d);
  // O in the storage type, as every policy keeps it (whole: the cache).
  attn_->backward(l, b, as3(a.q, s, n, d), as3(a.k, s, nkv, d), as3(a.v, s, nkv, d), as3(a.ob, s, n, d), a.lse,
                  as3(dO, s, n, d), as3(dqa, s, n, d), as3(dka, s, nkv, d), as3(dva, s, nkv, d));
  dO = V2();
  a.q = V2(), a.k = V2(), a.v = V2(), a.ob = V2(), a.lse = AV2();
  if (cfg_.attn_log_scale > 0) log_length_scale<A, Mem>(dqa, b.index, cfg_.attn_log_scale);
  // The projections' backward reads the gradients in T (bf16: converted copies); dq and dk are rotated
  // back (RoPE's transpose) on the way, in one pass (in place when T is the accumulation type).
  V2 dq, dk;
  if (cfg_.uses_rope(l)) {
    double af = 1;
    auto freqs = rope_freqs(s, &af);
    dq = rope_to_storage<T, Mem>("d.q_storage", dqa, n, d, b.positions, freqs, af);
    dqa = AV2();  // (bf16: the fp32 gradient goes once converted; float / double: dq is the same view)
    dk = rope_to_storage<T, Mem>("d.k_storage", dka, nkv, d, b.positions, freqs, af);
    dka = AV2();
  } else {
    dq = to_storage<T, Mem>("d.q_storage", dqa), dqa = AV2();
    dk = to_storage<T, Mem>("d.k_storage", dka), dka = AV2();
  }
  V2 dv = to_storage<T, Mem>("d.v_storage", dva);
  dva = AV2();
  V2 dh1 = act2<T, Mem>("d.h1", s, H);
  gemm('N', 'N', 1, dq, params_.mat(p + "self_attn.q_proj.weight"), 0, dh1);
  gemm('N', 'N', 1, dk, params_.mat(p + "self_attn.k_proj.weight"), 1, dh1);
  gemm('N', 'N', 1, dv, params_.mat(p + "self_attn.v_proj.weight"), 1, dh1);
  gemm('T', 'N', 1, dq, a.h1, 1, grads_.mat(p + "self_attn.q_proj.weight"));
  gemm('T', 'N', 1, dk, a.h1, 1, grads_.mat(p + "self_attn.k_proj.weight"));
  gemm('T', 'N', 1, dv, a.h1, 1, grads_.mat(p + "self_attn.v_proj.weight"));
  dq = V2(), dk = V2(), dv = V2(), a.h1 = V2();
  // dx = RMSNorm's backward + dx2 (the residual; dx's old value, dL/d(output), is no longer read)
  kernels::rmsnorm_backward<T, Mem>(dh1, a.x_in, params_.vec(p + "input_layernorm.weight"), a.rstd1, dx,
                                    grads_.vec(p + "input_layernorm.weight"), dx2);
}

template <class T, class Mem> StepLoss LlamaModel<T, Mem>::forward_backward(const TokenBatch<Mem>& b, double grad_norm) {
  const long s = b.seq_len(), H = cfg_.hidden, V = cfg_.vocab;
  BURST_CHECK_INPUT(b.labels.extent(0) == size_t(s) && b.positions.extent(0) == size_t(s), "batch: ", s, " tokens but ",
                    b.labels.extent(0), " labels and ", b.positions.extent(0), " positions");
  std::vector<LayerActs> acts;
  AV1 rstd_f;
  V2 hf;
  const bool grad = grad_norm > 0;
  V2 xL = embed_and_layers(b, acts, rstd_f, hf, grad);
  if (forward_probe_) forward_probe_();
  const char* head = cfg_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  V2 dhf = act2<T, Mem>("d.h_final", grad ? s : 0, grad ? H : 0);
  kernels::LossSum ls;
  // The head and final norm units, held until the final norm's backward.
  auto p_head = std::make_unique<Held>(hooks_, head_unit());
  auto p_norm = std::make_unique<Held>(hooks_, norm_unit());
  if (grad) acquire_grads(head_unit()), acquire_grads(norm_unit());
  {
    Phase ph("lm_head_loss", phase_times_, phase_times_ != nullptr);
    if (opt_.loss_chunk > 0) {
      ls = kernels::lm_head_cross_entropy<T, Mem>(hf, params_.mat(head), b.labels, opt_.loss_chunk,
                                                  grad ? 1.0 / grad_norm : 0.0, dhf, AV2(grads_.mat(head)));
    } else {  // the plain head: logits [s, V], then the loss (the reference)
      V2 logits = act2<T, Mem>("logits", s, V);
      gemm('N', 'T', 1, hf, params_.mat(head), 0, logits);
      auto loss = act1<A, Mem>("loss", s);
      V2 dlogits = act2<T, Mem>("d.logits", grad ? s : 0, grad ? V : 0);
      ls = kernels::cross_entropy<T, Mem>(logits, b.labels, loss, dlogits, grad ? 1.0 / grad_norm : 0.0);
      if (grad) {
        gemm('N', 'N', 1, dlogits, params_.mat(head), 0, dhf);
        gemm('T', 'N', 1, dlogits, hf, 1, grads_.mat(head));
      }
    }
  }
  if (!grad) return {ls.sum, ls.valid};
  hf = V2();  // the head's input: read for the last time by the head's backward above
  V2 dx = act2<T, Mem>("d.x", s, H);
  kernels::rmsnorm_backward<T, Mem>(dhf, xL, params_.vec("model.norm.weight"), rstd_f, dx, grads_.vec("model.norm.weight"));
  dhf = V2(), xL = V2(), rstd_f = AV1();
  release_grads(norm_unit());
  // Tied embeddings: the head's gradients are the embedding's (unit 0),
  // which stays held until the embedding's own backward has added to it.
  if (!cfg_.tie_embeddings) release_grads(head_unit());
  p_head.reset();
  p_norm.reset();
  for (int l = cfg_.layers - 1; l >= 0; --l) {
    Held pl(hooks_, l + 1);
    acquire_grads(l + 1);
    recompute(l, b, acts[l]);
    Phase ph("layer_backward", phase_times_, phase_times_ != nullptr);
    layer_backward(l, b, acts[l], dx);
    acts[l] = LayerActs();  // free this layer's activations as soon as they are used
    release_grads(l + 1);
  }
  acquire_grads(0);
  {
    Phase ph("embedding_backward", phase_times_, phase_times_ != nullptr);
    kernels::embedding_backward<T, Mem>(b.tokens, dx, grads_.mat("model.embed_tokens.weight"));
  }
  release_grads(0);
  if (cfg_.tie_embeddings) release_grads(0);
  return {ls.sum, ls.valid};
}

template <class T, class Mem>
void LlamaModel<T, Mem>::block_forward(int l, const TokenBatch<Mem>& b, V2 x, V2 y, LayerActs& acts) {
  const long s = b.seq_len(), H = cfg_.hidden;
  BURST_CHECK_INPUT(l >= 0 && l < cfg_.layers, "block_forward: layer ", l, " is not in [0, ", cfg_.layers, ")");
  BURST_CHECK_INPUT(long(x.extent(0)) == s && long(x.extent(1)) == H && long(y.extent(0)) == s && long(y.extent(1)) == H,
                    "block_forward: x and y must be [", s, ", ", H, "], got [", x.extent(0), ", ", x.extent(1), "] and [",
                    y.extent(0), ", ", y.extent(1), "]");
  BURST_CHECK_INPUT(b.positions.extent(0) == size_t(s), "block_forward: ", b.positions.extent(0), " positions for ", s,
                    " tokens");
  Held pl(hooks_, l + 1);
  layer_forward(l, b, x, acts, y);
  keep_for_backward(l, acts);
}

template <class T, class Mem>
void LlamaModel<T, Mem>::block_backward(int l, const TokenBatch<Mem>& b, LayerActs& acts, V2 dx_io) {
  const long s = b.seq_len(), H = cfg_.hidden;
  BURST_CHECK_INPUT(l >= 0 && l < cfg_.layers, "block_backward: layer ", l, " is not in [0, ", cfg_.layers, ")");
  BURST_CHECK_INPUT(acts.x_in.extent(0) == size_t(s), "block_backward: no forward state of ", s, " tokens for layer ", l);
  BURST_CHECK_INPUT(long(dx_io.extent(0)) == s && long(dx_io.extent(1)) == H, "block_backward: dy must be [", s, ", ", H,
                    "]");
  Held pl(hooks_, l + 1);
  acquire_grads(l + 1);
  recompute(l, b, acts);
  layer_backward(l, b, acts, dx_io);
  acts = LayerActs();
  release_grads(l + 1);
}

template class LocalAttention<float, DeviceMem>;
template class LocalAttention<double, DeviceMem>;
template class LocalAttention<bf16, DeviceMem>;
template class LlamaModel<float, DeviceMem>;
template class LlamaModel<double, DeviceMem>;
template class LlamaModel<bf16, DeviceMem>;

}  // namespace burst

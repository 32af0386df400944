// LLaMA forward and hand-written backward on one token sequence (as llm.c
// does: no autograd). Everything but attention is local to the tokens it is
// given; attention goes through an AttentionOp, so the distributed methods
// plug in without the model knowing which one runs.
//
//   embed -> L x [rmsnorm -> q,k,v -> rope -> attention -> o_proj -> +res ->
//                 rmsnorm -> MLP -> +res] -> rmsnorm -> lm_head -> cross-entropy
#pragma once

#include "core/memory.hpp"
#include "core/timer.hpp"
#include "core/views.hpp"
#include "kernels/attention.hpp"
#include "kernels/rope.hpp"
#include "model/config.hpp"
#include "model/params.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace burst {

template <class Mem = DeviceMem> struct TokenBatch {
  Kokkos::View<const std::int32_t*, Layout, Mem> tokens;  // [s]
  Kokkos::View<const std::int32_t*, Layout, Mem> labels;  // [s], kIgnoreIndex where no loss
  Kokkos::View<const long*, Layout, Mem> positions;       // [s] RoPE positions (global)
  Kokkos::View<const int*, Layout, Mem> doc_ids;          // [s] or empty (one document)
  Kokkos::View<const long*, Layout, Mem> index;           // [s] token index in the whole sequence, or empty (0..s-1)
  long seq_len() const { return long(tokens.extent(0)); }
};

// Attention over one layer's q, k, v (after RoPE), as the model sees it.
// q, k, v and dO are in the storage type T; the forward's O, lse and dQ, dK,
// dV in the accumulation type accum_t<T> (fp32 for bf16, as the kernels
// write them; the same type as T for float and double). The backward takes
// O in T, the copy the layer keeps (FlashAttention too computes D =
// rowsum(dO * O) from its bf16 O).
template <class T, class Mem = DeviceMem> class AttentionOp {
 public:
  using A = accum_t<T>;
  using V3 = Kokkos::View<A***, Layout, Mem>;
  using CV3 = Kokkos::View<const T***, Layout, Mem>;
  using V2 = Kokkos::View<A**, Layout, Mem>;
  virtual ~AttentionOp() = default;
  virtual void forward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) = 0;
  virtual void backward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, CV3 o,
                        Kokkos::View<const A**, Layout, Mem> lse, CV3 dout, V3 dq, V3 dk, V3 dv) = 0;
  // The `half` activation policy's recompute: `b`, q, k, v hold the first
  // half of the local tokens (global positions < S/2 under the striped
  // layout); o and lse of those queries against those keys only (they never
  // see the second half). Methods that cannot do this say so.
  virtual void forward_first_half(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) = 0;
  // The forward of `layer` will be recomputed (or its O, lse are cached)
  // before its backward: drop whatever the method keeps between the two.
  virtual void release(int /*layer*/) {}
  // The communication buffers behind it (none for local attention).
  virtual CommBuffers comm_buffers() const { return {}; }
};

// Single-process causal attention (document-causal when the batch carries
// document ids), through the block flash kernel.
template <class T, class Mem = DeviceMem> class LocalAttention : public AttentionOp<T, Mem> {
 public:
  using typename AttentionOp<T, Mem>::A;
  using typename AttentionOp<T, Mem>::V3;
  using typename AttentionOp<T, Mem>::CV3;
  using typename AttentionOp<T, Mem>::V2;
  explicit LocalAttention(double scale, long window = 0) : scale_(scale), window_(window) {}
  void forward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override;
  void backward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, CV3 o,
                Kokkos::View<const A**, Layout, Mem> lse, CV3 dout, V3 dq, V3 dk, V3 dv) override;
  // One process holds every token in natural order: the first half of the
  // tokens is a sequence of its own.
  void forward_first_half(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override {
    forward(layer, b, q, k, v, o, lse);
  }

 private:
  kernels::AttnMask<Mem> mask(const TokenBatch<Mem>& b) const;
  double scale_;
  long window_;  // > 0: causal sliding window of this many tokens
  mutable Kokkos::View<long*, Layout, Mem> index_;  // 0..s-1, the window's token order
};

// Attention chosen per layer: the sliding-window layers of the model
// (ModelConfig::window_layers) go to `local`, the rest to `global`. Both
// must hold the same tokens in the same slots (one layout).
template <class T, class Mem = DeviceMem> class PerLayerAttention : public AttentionOp<T, Mem> {
 public:
  using Op = AttentionOp<T, Mem>;
  using typename Op::A;
  using typename Op::V3;
  using typename Op::CV3;
  using typename Op::V2;
  PerLayerAttention(std::shared_ptr<Op> global, std::shared_ptr<Op> local, std::vector<bool> windowed)
      : global_(std::move(global)), local_(std::move(local)), windowed_(std::move(windowed)) {}
  void forward(int l, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override {
    op(l).forward(l, b, q, k, v, o, lse);
  }
  void backward(int l, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, CV3 o,
                Kokkos::View<const A**, Layout, Mem> lse, CV3 dout, V3 dq, V3 dk, V3 dv) override {
    op(l).backward(l, b, q, k, v, o, lse, dout, dq, dk, dv);
  }
  void forward_first_half(int l, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override {
    op(l).forward_first_half(l, b, q, k, v, o, lse);
  }
  void release(int l) override { op(l).release(l); }
  CommBuffers comm_buffers() const override {
    const CommBuffers g = global_->comm_buffers(), w = local_->comm_buffers();
    return {g.persistent + w.persistent, std::max(g.transient, w.transient)};
  }

 private:
  Op& op(int l) { return size_t(l) < windowed_.size() && windowed_[size_t(l)] ? *local_ : *global_; }
  std::shared_ptr<Op> global_, local_;
  std::vector<bool> windowed_;
};

// Sequence-level selective checkpointing (ALGORITHMS.md section 7): what a
// layer keeps between its forward and its backward.
//   keep   every activation (no recompute)
//   full   the layer input; the layer, attention and its communication
//          included, is recomputed in backward
//   whole  full + attention O and lse: the recompute skips attention
//   half   full + O and lse of the second half of the local tokens (striped
//          layout); the recompute runs first-half queries against
//          first-half keys only
enum class ActPolicy { Keep, Full, Whole, Half };
ActPolicy parse_act_policy(const std::string& name);  // Error(Config) naming the known ones
const char* act_policy_name(ActPolicy p);

struct ModelOptions {
  ActPolicy policy = ActPolicy::Keep;
  // > 0: the LM head fused with the loss, this many tokens per chunk (never
  // an [s, V] logits buffer); 0: the plain head (logits, then cross-entropy).
  long loss_chunk = 0;
};

// Where a unit's parameters and gradients come from (ZeRO; see
// param_units): the model asks for a unit before it uses it and gives it back
// after. Calls pair up and may nest; every rank of the group makes the same
// calls in the same order (acquiring parameters and releasing gradients may
// communicate).
class ParamHooks {
 public:
  virtual ~ParamHooks() = default;
  virtual void acquire_params(int unit) = 0;
  virtual void release_params(int unit) = 0;
  virtual void acquire_grads(int unit) = 0;
  virtual void release_grads(int unit) = 0;
};

struct StepLoss {
  double sum = 0;  // sum of token losses
  long valid = 0;  // tokens with a label
};

// T = float or double: everything in T. T = bf16: weights and activations
// in bf16; gradients, RMSNorm's rstd, attention's O, lse and dQ / dK / dV
// in fp32 (accum_t<T>); every kernel accumulates in fp32 (GEMMs through
// cuBLASLt on CUDA builds, bf16 x bf16 -> fp32 for the weight gradients).
template <class T, class Mem = DeviceMem> class LlamaModel {
 public:
  using A = accum_t<T>;
  using V1 = Kokkos::View<T*, Layout, Mem>;
  using V2 = Kokkos::View<T**, Layout, Mem>;
  using V3 = Kokkos::View<T***, Layout, Mem>;
  using AV1 = Kokkos::View<A*, Layout, Mem>;
  using AV2 = Kokkos::View<A**, Layout, Mem>;

  LlamaModel(const ModelConfig& cfg, std::shared_ptr<AttentionOp<T, Mem>> attn, const ModelOptions& opt = {});

  const ModelConfig& config() const { return cfg_; }
  FlatTensors<T, Mem>& params() { return params_; }
  FlatTensors<A, Mem>& grads() { return grads_; }
  AttentionOp<T, Mem>& attention() { return *attn_; }
  // Another attention (e.g. built for another sequence length).
  void set_attention(std::shared_ptr<AttentionOp<T, Mem>> a) { attn_ = std::move(a); }
  const ModelOptions& options() const { return opt_; }
  // ZeRO: the parameters and/or gradients held per unit by `hooks` (which
  // must outlive the model's use of them); the flat buffers are freed.
  void use_param_hooks(ParamHooks* hooks, bool params_per_unit, bool grads_per_unit);
  // For tests: called at the end of forward_backward's forward, before the
  // LM head (to read what the activation policy kept).
  void set_forward_probe(std::function<void()> f) { forward_probe_ = std::move(f); }
  // Time the phases of forward_backward (embedding, layer_forward,
  // lm_head_loss, recompute, layer_backward, embedding_backward) into `t`,
  // fencing the device at both ends of each (`burst bench step`); nullptr:
  // profiler regions only, no fence.
  void set_phase_times(PhaseTimes* t) { phase_times_ = t; }

  // Forward and backward of the mean loss over `grad_norm` tokens (the
  // valid-label count of the whole step, which may span several sequences
  // or ranks): adds d(sum loss / grad_norm) into grads(). grad_norm = 0
  // skips the backward.
  StepLoss forward_backward(const TokenBatch<Mem>& b, double grad_norm);
  // Forward only: logits [s, V] (and the final hidden states if wanted).
  void forward_logits(const TokenBatch<Mem>& b, V2 logits);
  // Forward only, also giving the hidden states as Hugging Face's
  // output_hidden_states does: the input of each layer (the embeddings
  // first), then the final normed output; L + 1 views [s, hidden].
  void forward_logits(const TokenBatch<Mem>& b, V2 logits, std::vector<V2>& hidden_states);

  // What a layer keeps between its forward and its backward. ob is
  // attention's O in T, what o_proj and attention's backward read (the
  // method's accum_t<T> O itself when the types agree; in bf16 the fp32 O
  // goes once converted, so every policy keeps O once, in T), lse its lse
  // (accum_t<T>); under `whole` / `half` the cache is ob and lse.
  // layer_backward empties each member once it has read it for the last time.
  struct LayerActs {
    V2 x_in, h1, q, k, v, ob, x2, h2, gate, up, m;
    AV2 lse;
    AV1 rstd1, rstd2;
    bool complete = false;  // every activation of the layer's forward is here: no recompute before its backward
  };

  // One decoder layer on its own (`burst bench layer`, tests): the forward of
  // layer l on x [s, hidden] into y, keeping in `acts` what the backward
  // needs under the activation policy; the backward takes dL/dy in dx_io,
  // leaves dL/dx there and adds the layer's weight gradients into grads().
  // The same code forward_backward runs per layer (but for its last layer,
  // which it does not recompute).
  void block_forward(int l, const TokenBatch<Mem>& b, V2 x, V2 y, LayerActs& acts);
  void block_backward(int l, const TokenBatch<Mem>& b, LayerActs& acts, V2 dx_io);

 private:
  // How layer_forward gets attention's O and lse: computed (with its
  // communication), taken from the cache (`whole`), or the first half
  // computed and the second half taken from the cache (`half`).
  enum class AttnSource { Compute, Cached, FirstHalf };
  // for_backward: keep what the policy keeps; else keep nothing.
  V2 embed_and_layers(const TokenBatch<Mem>& b, std::vector<LayerActs>& acts, AV1& rstd_f, V2& hf, bool for_backward);
  // x_out empty: the layer's output is not needed (a recompute).
  void layer_forward(int l, const TokenBatch<Mem>& b, V2 x, LayerActs& a, V2 x_out, AttnSource src = AttnSource::Compute);
  void layer_backward(int l, const TokenBatch<Mem>& b, LayerActs& a, V2 dx);
  // What survives forward under the policy; a recompute rebuilds the rest.
  void keep_for_backward(int l, LayerActs& a);
  void recompute(int l, const TokenBatch<Mem>& b, LayerActs& a);
  // The RoPE table for a sequence length, built once and reused by every
  // layer's forward and backward until the length changes.
  Kokkos::View<double*, Layout, Mem> rope_freqs(long seq_len, double* attention_factor);

  // A unit's parameters held for a scope (acquire / release through the hooks).
  struct Held {
    ParamHooks* h;
    int u;
    Held(ParamHooks* hooks, int unit) : h(hooks), u(unit) {
      if (h) h->acquire_params(u);
    }
    ~Held() {
      if (h) h->release_params(u);
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
  };
  void acquire_grads(int u) {
    if (hooks_) hooks_->acquire_grads(u);
  }
  void release_grads(int u) {
    if (hooks_) hooks_->release_grads(u);
  }
  int head_unit() const { return cfg_.tie_embeddings ? 0 : int(cfg_.layers) + 1; }
  int norm_unit() const { return int(cfg_.layers) + 1; }

  ModelConfig cfg_;
  std::shared_ptr<AttentionOp<T, Mem>> attn_;
  ModelOptions opt_;
  ParamHooks* hooks_ = nullptr;
  std::function<void()> forward_probe_;
  PhaseTimes* phase_times_ = nullptr;
  FlatTensors<T, Mem> params_;
  FlatTensors<A, Mem> grads_;
  long rope_len_ = -1;
  double rope_factor_ = 1.0;
  Kokkos::View<double*, Layout, Mem> rope_table_;
};

}  // namespace burst

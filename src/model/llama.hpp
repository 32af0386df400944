// LLaMA forward and hand-written backward on one token sequence (as llm.c
// does: no autograd). Everything but attention is local to the tokens it is
// given; attention goes through an AttentionOp, so the distributed methods
// plug in without the model knowing which one runs.
//
//   embed -> L x [rmsnorm -> q,k,v -> rope -> attention -> o_proj -> +res ->
//                 rmsnorm -> MLP -> +res] -> rmsnorm -> lm_head -> cross-entropy
#pragma once

#include "core/views.hpp"
#include "kernels/attention.hpp"
#include "kernels/rope.hpp"
#include "model/config.hpp"
#include "model/params.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace burst {

template <class Mem = DeviceMem> struct TokenBatch {
  Kokkos::View<const std::int32_t*, Layout, Mem> tokens;  // [s]
  Kokkos::View<const std::int32_t*, Layout, Mem> labels;  // [s], kIgnoreIndex where no loss
  Kokkos::View<const long*, Layout, Mem> positions;       // [s] RoPE positions (global)
  Kokkos::View<const int*, Layout, Mem> doc_ids;          // [s] or empty (one document)
  long seq_len() const { return long(tokens.extent(0)); }
};

// Attention over one layer's q, k, v (after RoPE), as the model sees it.
template <class T, class Mem = DeviceMem> class AttentionOp {
 public:
  using V3 = Kokkos::View<T***, Layout, Mem>;
  using CV3 = Kokkos::View<const T***, Layout, Mem>;
  using V2 = Kokkos::View<T**, Layout, Mem>;
  virtual ~AttentionOp() = default;
  virtual void forward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) = 0;
  virtual void backward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, Kokkos::View<const T***, Layout, Mem> o,
                        Kokkos::View<const T**, Layout, Mem> lse, CV3 dout, V3 dq, V3 dk, V3 dv) = 0;
};

// Single-process causal attention (document-causal when the batch carries
// document ids), through the block flash kernel.
template <class T, class Mem = DeviceMem> class LocalAttention : public AttentionOp<T, Mem> {
 public:
  using typename AttentionOp<T, Mem>::V3;
  using typename AttentionOp<T, Mem>::CV3;
  using typename AttentionOp<T, Mem>::V2;
  explicit LocalAttention(double scale, long window = 0) : scale_(scale), window_(window) {}
  void forward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override;
  void backward(int layer, const TokenBatch<Mem>& b, CV3 q, CV3 k, CV3 v, Kokkos::View<const T***, Layout, Mem> o,
                Kokkos::View<const T**, Layout, Mem> lse, CV3 dout, V3 dq, V3 dk, V3 dv) override;

 private:
  kernels::AttnMask<Mem> mask(const TokenBatch<Mem>& b) const;
  double scale_;
  long window_;  // > 0: causal sliding window on positions
};

struct StepLoss {
  double sum = 0;  // sum of token losses
  long valid = 0;  // tokens with a label
};

template <class T, class Mem = DeviceMem> class LlamaModel {
  static_assert(std::is_same<accum_t<T>, T>::value,
                "the host model runs in float or double; the bf16 model arrives with the CUDA backend");

 public:
  using V1 = Kokkos::View<T*, Layout, Mem>;
  using V2 = Kokkos::View<T**, Layout, Mem>;
  using V3 = Kokkos::View<T***, Layout, Mem>;

  LlamaModel(const ModelConfig& cfg, std::shared_ptr<AttentionOp<T, Mem>> attn);

  const ModelConfig& config() const { return cfg_; }
  FlatTensors<T, Mem>& params() { return params_; }
  FlatTensors<T, Mem>& grads() { return grads_; }
  AttentionOp<T, Mem>& attention() { return *attn_; }

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

 private:
  struct LayerActs {
    V2 x_in, h1, q, k, v, o, x2, h2, gate, up, m;
    V1 rstd1, rstd2;
    V2 lse;
  };
  V2 embed_and_layers(const TokenBatch<Mem>& b, std::vector<LayerActs>& acts, V1& rstd_f, V2& hf);
  void layer_forward(int l, const TokenBatch<Mem>& b, V2 x, LayerActs& a, V2 x_out);
  void layer_backward(int l, const TokenBatch<Mem>& b, LayerActs& a, V2 dx);
  // The RoPE table for a sequence length, built once and reused by every
  // layer's forward and backward until the length changes.
  Kokkos::View<double*, Layout, Mem> rope_freqs(long seq_len, double* attention_factor);

  ModelConfig cfg_;
  std::shared_ptr<AttentionOp<T, Mem>> attn_;
  FlatTensors<T, Mem> params_, grads_;
  long rope_len_ = -1;
  double rope_factor_ = 1.0;
  Kokkos::View<double*, Layout, Mem> rope_table_;
};

}  // namespace burst

// The transformer the model times: a LLaMA block's sizes, parameter counts,
// GEMM FLOPs and the paper's FLOP convention (ALGORITHMS.md section 9).
#pragma once

#include <string>
#include <vector>

namespace burst::perf {

struct ModelShape {
  std::string name;
  long layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  bool gated = true;  // SwiGLU (3 MLP matrices) or a plain GELU MLP (2)
  bool tied = false;  // the LM head is the embedding (tie_word_embeddings): one V x h matrix, not two

  double vocab_matrices() const { return tied ? 1.0 : 2.0; }

  double mlp_matrices() const { return gated ? 3.0 : 2.0; }
  // Weights of one block (attention and MLP projections, two RMSNorm gains).
  double layer_params() const {
    const double h = double(hidden), q = double(heads * head_dim), kv = double(kv_heads * head_dim);
    return h * q + 2 * h * kv + q * h + mlp_matrices() * h * double(ffn) + 2 * h;
  }
  double params() const { return double(layers) * layer_params() + vocab_matrices() * double(vocab) * double(hidden) + double(hidden); }
  // Forward GEMM FLOPs of one block per token (2 per multiply-add).
  double gemm_flops_per_token() const {
    const double h = double(hidden), q = double(heads * head_dim), kv = double(kv_heads * head_dim);
    return 2.0 * (h * q + 2 * h * kv + q * h + mlp_matrices() * h * double(ffn));
  }
  // The GEMM FLOPs of a block's recompute per token: its forward's but the MLP's
  // down projection (ffn -> h), whose output is the block's, which the backward
  // does not read (llama.cpp: the recompute runs layer_forward without x_out).
  double recompute_gemm_flops_per_token() const { return gemm_flops_per_token() - 2.0 * double(hidden) * double(ffn); }
};

// F(S) = 12 S L h^2 [q/h + kv/h + c (S/h)(q/h) + 1.5 ffn/h + V/(2 L h)],
// c = 0.5 causal, q = heads x head_dim, kv = kv_heads x head_dim: forward
// + backward (3x the forward) of the Q, O projections (2 S h q each), K, V
// (2 S h kv each), attention (4 S^2 q, x c), the MLP (three matrices of
// 2 S h ffn) and the LM head (2 S h V). Where q = h and kv = h n_kv/n it is
// the paper's convention, 12 S L h^2 [1 + n_kv/n + c S/h + 1.5 ffn/h +
// V/(2 L h)] (ALGORITHMS.md section 9), to the last bit: q/h is then 1 and
// kv/h the same double as n_kv/n. Three MLP matrices are counted even for
// GELU, as the paper's script does, so MFUs compare with the published ones.
inline double paper_flops(const ModelShape& m, double S, bool causal = true) {
  const double h = double(m.hidden), L = double(m.layers);
  const double qh = double(m.heads * m.head_dim) / h, kvh = double(m.kv_heads * m.head_dim) / h;
  return 12.0 * S * L * h * h *
         (qh + kvh + (causal ? 0.5 : 1.0) * S / h * qh + 1.5 * double(m.ffn) / h + double(m.vocab) / (2.0 * L * h));
}

// Query-key pairs a mask lets through over a sequence of S tokens: causal
// S^2/2 (the paper's convention, diagonal not counted separately), full
// S^2, sliding window w (a query sees keys in (pos - w, pos]) S w - w^2/2.
inline double visible_area(double S, bool causal, double window) {
  if (window > 0) return window >= S ? S * S / 2 : S * window - window * window / 2;
  return causal ? S * S / 2 : S * S;
}

// Query-key pairs the document mask lets through: every document's causal
// triangle, diagonal included (the bench's convention).
inline double document_area(const std::vector<long>& doc_lengths) {
  double a = 0;
  for (long l : doc_lengths) a += double(l) * double(l + 1) / 2;
  return a;
}

// The same F(S) with the attention term counting the mask's visible area A
// (12 L A q; A = S^2/2 gives the causal formula above).
inline double paper_flops_area(const ModelShape& m, double S, double A) {
  const double h = double(m.hidden), L = double(m.layers);
  const double qh = double(m.heads * m.head_dim) / h, kvh = double(m.kv_heads * m.head_dim) / h;
  return 12.0 * S * L * h * h * (qh + kvh + A / (S * h) * qh + 1.5 * double(m.ffn) / h + double(m.vocab) / (2.0 * L * h));
}

// Attention-only convention: forward 4 S^2 n d / 2 causal (x2 full), backward 2.5 x forward.
inline double attention_flops_fwd(double S, long n, long d, bool causal) {
  return 4.0 * S * S * double(n) * double(d) * (causal ? 0.5 : 1.0);
}

}  // namespace burst::perf

// FLOPs per training step (forward + backward) in the paper's convention
// (ALGORITHMS.md section 9), used for TFLOP/s and MFU in every log.
#pragma once

#include "model/config.hpp"

namespace burst {

// F(S) = 12 S L h^2 [q/h + kv/h + c (S/h)(q/h) + 1.5 ffn/h + V/(2 L h)],
// c = 0.5 causal, q = heads x head_dim, kv = kv_heads x head_dim: the Q, O,
// K, V projections, attention, MLP and LM head of the real shape, which is
// the paper's 12 S L h^2 [1 + n_kv/n + c S/h + 1.5 ffn/h + V/(2 L h)] to the
// last bit where q = h (perf/shape.hpp has the same for the model's
// ModelShape). The 1.5 ffn/h term counts three MLP matrices (SwiGLU). We
// keep it for non-gated MLPs too, as the paper's script does, so MFUs
// compare with the published ones; for the 7B's GELU MLP it over-counts the
// MLP by 1/3.
inline double paper_flops(const ModelConfig& c, double S, bool causal = true) {
  const double h = double(c.hidden), L = double(c.layers);
  const double qh = double(c.q_dim()) / h, kvh = double(c.kv_dim()) / h;
  return 12.0 * S * L * h * h *
         (qh + kvh + (causal ? 0.5 : 1.0) * S / h * qh + 1.5 * double(c.ffn) / h + double(c.vocab) / (2.0 * L * h));
}

}  // namespace burst

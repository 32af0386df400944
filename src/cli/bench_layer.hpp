// `burst bench layer` (bench_layer.cpp): one LLaMA decoder block, forward and
// backward, through the engine's model code (LlamaModel::block_forward /
// block_backward). What the tests reach directly.
#pragma once

#include "model/config.hpp"

#include <string>

namespace burst::cli {

// The block of the bench: one layer, SwiGLU, RoPE (theta 500000, as the
// torch peer), rms_eps 1e-5, `tokens` positions. preset "1B" (hidden 2048,
// 16 heads x 128, ffn 5632), "7B" (4096, 32 x 128, 11008) or "custom"; each
// shape value > 0 overrides the preset's (custom needs all of them);
// kv_heads 0 = heads (MHA). Throws Error(Config) naming a bad value.
ModelConfig bench_layer_model(const std::string& preset, long hidden, long heads, long kv_heads, long head_dim, long ffn,
                              long tokens);

// The block's FLOPs in the paper's convention (ALGORITHMS.md section 9, one
// layer, no vocabulary term): forward = 2 S (h q + 2 h kv + q h + 3 h ffn)
// + 4 S^2 n d c (q = n d, kv = n_kv d; c = 0.5 causal), forward + backward
// = 3 x forward; with n d = h this is 12 S h^2 [1 + n_kv/n + c S/h + 1.5 ffn/h].
double block_flops_forward(const ModelConfig& c, long tokens, bool causal = true);

// The block in T (float, double or bf16) against the same block in double,
// same weights and inputs (T's values, hashed from `seed`): relative L2
// errors of the output y, of dL/dx and of the layer's weight gradients
// (every tensor of the layer, flattened), for the loss sum(y * dy).
struct BlockCheck {
  double y = 0, dx = 0, dw = 0;
};
template <class T> BlockCheck check_block_against_double(const ModelConfig& cfg, long tokens, unsigned seed);

}  // namespace burst::cli

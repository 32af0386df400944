#include "train/memory_model.hpp"

#include "model/params.hpp"

#include <algorithm>

namespace burst {

MemoryEstimate estimate_memory(const MemoryModelInput& in) {
  const ModelConfig& c = in.model;
  const std::int64_t e = in.scalar_bytes, s = in.slots, H = c.hidden, n = c.heads, kv = c.kv_heads, d = c.head_dim,
                     F = c.ffn, V = c.vocab, L = c.layers, g = c.mlp == MlpKind::SwiGLU ? 1 : 0;
  // The accumulation type's bytes (float / double: the storage type's; bf16: fp32), and whether they differ.
  const std::int64_t a = in.accum_bytes > 0 ? in.accum_bytes : e;
  const bool mixed = a != e;
  MemoryEstimate m;
  // ---- activations (layer_forward / layer_backward / forward_backward in model/llama.cpp)
  const std::int64_t X = e * s * H;                    // one residual-stream tensor
  // attention's O as the layer keeps it, in the storage type (o_proj and the
  // backward read it; the method's fp32 O goes once converted), and its lse (A)
  const std::int64_t OL = e * s * n * d + a * s * n;
  // a layer's acts, not its input/output: h1, q, k, v, x2, h2, MLP intermediates, O (T); rstd1, rstd2, lse (A)
  const std::int64_t A = e * s * (3 * H + n * d + 2 * kv * d + (2 + g) * F) + a * s * 2 + OL;
  const std::int64_t batch = s * (4 + 4 + 8);          // tokens, labels (int32), positions (int64)
  std::int64_t kept = 0;                               // per layer, beside its output
  switch (in.policy) {
    case ActPolicy::Keep: kept = A; break;
    case ActPolicy::Full: break;
    // the cache: O in the storage type and lse (ALGORITHMS.md section 7)
    case ActPolicy::Whole: kept = OL; break;
    case ActPolicy::Half: kept = (s - s / 2) * (e * n * d + a * n); break;
  }
  m.kept_per_layer = kept + X;
  const std::int64_t held = batch + X + L * (kept + X);  // x0, and each layer's output + what it keeps
  // The last layer keeps all its activations under every policy (its
  // backward follows the head, so it is not recomputed; llama.cpp
  // embed_and_layers): `top` beyond what the policy keeps.
  const std::int64_t top = A - kept;
  const std::int64_t forward = held + top;               // the end of the last layer's forward
  const std::int64_t head_out = X + a * s;               // final norm output and rstd
  const std::int64_t chunk = in.loss_chunk > 0 ? std::min<std::int64_t>(in.loss_chunk, s) : 0;
  // the fused head: one chunk of logits (T) and its losses (A); the plain head: logits, d.logits (T), losses (A)
  const std::int64_t head = forward + head_out + X /* dh_final */ + (chunk > 0 ? chunk * (e * V + a) : s * (2 * e * V + a));
  // The top layer's backward (layer_backward frees what it has read for the
  // last time as it goes), with the head's input, the last layer's output and
  // the final rstd gone and dx [s, H] there instead: two moments.
  //   The MLP's: the layer's activations and the MLP's gradients,
  //   d.mlp.act, d.h2, d.mlp.up with d.mlp.gate (SwiGLU) or d.x2.
  const std::int64_t base = held - X /* the last layer's output */ + X /* dx */ + top;
  const std::int64_t mlp_backward = base + e * s * (2 * F + H + std::max(g * F, H));
  //   Attention's: the MLP's saved tensors (x2, h2, rstd2, up, act, gate) and
  //   gradients gone; d.x2, dO (T), dq, dk, dv and local attention's D [s, n]
  //   (A; D is read from O in T, so no widened O).
  const std::int64_t mlp_acts = e * s * (2 * H + (2 + g) * F) + a * s;
  const std::int64_t attn_backward = base - mlp_acts + e * s * (H + n * d) + a * s * (n * d + 2 * kv * d + n);
  m.bytes[int(MemCategory::Activations)] = std::max({forward, head, mlp_backward, attn_backward});

  // ---- parameters (T), gradients (A), optimizer (A: Adam's m, v and, mixed, the master weights) (train/zero.cpp)
  const std::vector<ParamInfo> table = llama_param_table(c);
  const std::vector<UnitInfo> units = param_units(table);
  const std::int64_t N = table.back().offset + table.back().size, W = in.world;
  std::int64_t shard = 0, unit_max = 0, layer_max = 0;
  std::vector<std::int64_t> buf;  // a gathered unit: W equal chunks (elements)
  for (const UnitInfo& u : units) {
    const std::int64_t ch = (u.size + W - 1) / W;
    shard += ch;
    buf.push_back(ch * W);
    unit_max = std::max(unit_max, buf.back());
  }
  for (std::int64_t l = 1; l <= L; ++l) layer_max = std::max(layer_max, buf[size_t(l)]);
  const std::int64_t first = buf.front(), last = buf.back();
  // Units held together: the head's with the final norm's (one unit unless
  // tied), and with tied embeddings unit 0 held through the whole backward.
  const std::int64_t params_held = c.tie_embeddings ? std::max(unit_max, first + last) : unit_max;
  const std::int64_t grads_held = c.tie_embeddings ? first + std::max(last, layer_max) : unit_max;
  m.bytes[int(MemCategory::Params)] = in.zero_stage >= 3 ? e * (shard + params_held) : e * N;
  m.bytes[int(MemCategory::Grads)] = in.zero_stage >= 2 ? a * (shard + grads_held) : a * N;
  m.bytes[int(MemCategory::Optimizer)] = (mixed ? 3 : 2) * a * (in.zero_stage >= 1 ? shard : N);

  // ---- communication buffers (train/zero.cpp; the attention methods' own plan)
  std::int64_t chunk_max = 0;
  for (const UnitInfo& u : units) chunk_max = std::max<std::int64_t>(chunk_max, (u.size + W - 1) / W);
  // Stages 1-2: after the update, a unit's chunk and the whole gathered unit;
  // stage 3: a unit's reduce-scatter result (parameters gather as params).
  // (The reduce-scatter result is in A, the gathers in T.)
  const std::int64_t zero_comm = in.zero_stage == 0   ? 0
                                 : in.zero_stage >= 3 ? a * chunk_max
                                                      : std::max(e * chunk_max * (W + 1), in.zero_stage == 2 ? a * chunk_max : 0);
  m.bytes[int(MemCategory::Comm)] = in.attention.persistent + std::max(in.attention.transient, zero_comm);
  return m;
}

std::string MemoryEstimate::report() const {
  std::string r;
  for (int c = 0; c < kMemCategories; ++c) {
    if (bytes[size_t(c)] == 0) continue;
    r += (r.empty() ? "" : ", ") + std::string(mem_category_name(MemCategory(c))) + " " + format_bytes(bytes[size_t(c)]);
  }
  return r;
}

}  // namespace burst

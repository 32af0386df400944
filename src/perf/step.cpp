#include "perf/step.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <limits>

namespace burst::perf {

double block_activation_bytes_per_token(const ModelShape& m) {
  const double h = double(m.hidden), q = double(m.heads * m.head_dim), kv = double(m.kv_heads * m.head_dim), f = double(m.ffn);
  // norm1 out, q k v, rotated q k, attention out, o-proj out, residual,
  // norm2 out, MLP intermediates (gate, up, act | up, act), down-proj out.
  const double bf16 = h + (q + 2 * kv) + (q + kv) + q + h + h + h + (m.gated ? 3 : 2) * f + h;
  return 2 * bf16 + 4 * double(m.heads);  // + lse fp32
}

namespace {

// All-gather (or reduce-scatter) of a tensor of `total` bytes over P ranks:
// NVLink inside the node, the node's HCAs between nodes.
double collective_time(const Cluster& c, int P, double total) {
  if (P <= 1) return 0;
  const int G = c.gpus_per_node;
  const double chunk = total / P;
  double t = c.nvlink().time(double(P - 1) * chunk);
  if (P > G) t = std::max(t, Link{c.ib_latency, c.ib_node_bw()}.time(double(P - G) * chunk));
  return t;
}

}  // namespace

StepResult simulate_step(const Cluster& cluster, const Calibration& k, const StepConfig& s) {
  const Cluster c = cluster.shared_by(s.P);  // attention_cost below shares the unshared cluster itself
  const ModelShape& m = s.model;
  BURST_CHECK_CONFIG(s.policy == "keep" || s.policy == "full" || s.policy == "whole" || s.policy == "half", "--policy '", s.policy,
                     "': expected keep, full, whole or half");
  BURST_CHECK_CONFIG(s.policy != "half" || (s.attn.causal && s.attn.window == 0),
                     "--policy half is defined for the causal mask (striped layout) only");
  BURST_CHECK_CONFIG(s.zero >= 0 && s.zero <= 3, "--zero ", s.zero, ": expected 0, 1, 2 or 3");
  BURST_CHECK_CONFIG(m.heads % m.kv_heads == 0, m.name, ": ", m.heads, " heads not a multiple of ", m.kv_heads, " kv heads");
  const int P = s.P;
  const double tok = s.S / P, L = double(m.layers), h = double(m.hidden), V = double(m.vocab);
  const AttnProblem ap{P, s.S, m.heads, m.kv_heads, m.head_dim};
  const AttnCost at = attention_cost(cluster, s.attn, ap);
  StepResult r;
  r.attention = at.describe;

  // ---- one block
  r.gemm_fwd = m.gemm_flops_per_token() * tok / c.gemm_rate();
  const double elem_total = k.elem_passes * 2 * (h + double(m.ffn)) * tok / c.hbm_bw;
  r.elem_fwd = elem_total * k.elem_fwd_share;
  const double elem_bwd = elem_total - r.elem_fwd;
  // `whole` and `half` release the method's state after the forward and do
  // not rerun it (llama.cpp): Ulysses/USP rebuild it in the backward.
  const bool rebuilt = s.policy == "whole" || s.policy == "half";
  r.attn_fwd = at.fwd.time, r.attn_bwd = at.bwd.time + (rebuilt ? at.rebuild.time : 0.0);
  r.attn_exposed_comm = std::max(0.0, at.fwd.time - at.fwd.compute) + std::max(0.0, at.bwd.time - at.bwd.compute) +
                        (rebuilt ? at.rebuild.time : 0.0);
  if (s.policy == "full") r.attn_recompute = at.fwd.time;
  if (s.policy == "half") r.attn_recompute = at.half_fwd.time;
  // The last layer is not recomputed (its activations stay; llama.cpp
  // embed_and_layers): Lr layers are. Under `full` the last layer's backward
  // then rebuilds the method's state as `whole`'s does (the others' recompute
  // reran its forward).
  const double Lr = s.policy == "keep" ? 0.0 : L - 1, last_rebuilds = s.policy == "full" ? 1.0 : 0.0;
  {
    const PassCost* rec = s.policy == "full" ? &at.fwd : s.policy == "half" ? &at.half_fwd : nullptr;
    r.attn_collectives = L * (at.fwd.collectives + at.bwd.collectives + (rebuilt ? at.rebuild.collectives : 0)) +
                         Lr * (rec ? rec->collectives : 0) + last_rebuilds * at.rebuild.collectives;
    r.attn_sync = L * (at.fwd.sync + at.bwd.sync + (rebuilt ? at.rebuild.sync : 0.0)) + Lr * (rec ? rec->sync : 0.0) +
                  last_rebuilds * at.rebuild.sync;
  }
  // The per-layer overhead of a CPU host, split as the elementwise passes
  // (its forward part runs again in a recompute).
  const double over_fwd = c.layer_overhead * k.elem_fwd_share, over_bwd = c.layer_overhead - over_fwd;
  // (The recompute's GEMMs are the forward's but the down projection.)
  const double gemm_rec = m.recompute_gemm_flops_per_token() * tok / c.gemm_rate();
  const double recompute = s.policy == "keep" ? 0.0 : gemm_rec + r.elem_fwd + over_fwd + r.attn_recompute;
  const double fwd = r.gemm_fwd + r.elem_fwd + over_fwd + r.attn_fwd, bwd = 2 * r.gemm_fwd + elem_bwd + over_bwd + r.attn_bwd;
  r.t_layer_overhead = L * c.layer_overhead + Lr * over_fwd;
  r.layer_fwd = fwd, r.layer_bwd = bwd;

  // ZeRO: parameters gathered per layer (forward, and once for recompute +
  // backward), gradients reduce-scattered; on their own stream, hidden
  // behind the layer's compute when shorter.
  const double lp = m.layer_params();
  const double gather = s.zero >= 3 ? collective_time(c, P, 2 * lp) : 0.0;
  const double reduce = s.zero >= 2 ? collective_time(c, P, 2 * lp) : 2 * collective_time(c, P, s.grad_bytes * lp);
  r.zero_comm_layer = 2 * gather + reduce;
  auto exposed = [&](double rec) { return std::max(0.0, gather - fwd) + std::max(0.0, gather + reduce - rec - bwd); };
  // (the last layer: no recompute; under `full` its backward's rebuild hides traffic too)
  const double exposed_layers = Lr * exposed(recompute) + (L - Lr) * exposed(last_rebuilds * at.rebuild.time);
  r.t_layers_fwd = L * fwd;
  r.t_recompute = Lr * recompute;
  r.t_layers_bwd = L * bwd + last_rebuilds * at.rebuild.time;

  // ---- LM head and loss (embedding lookup/scatter is elementwise on s x h: folded in)
  const double logits = tok * V, gemm1 = 2 * tok * h * V / c.gemm_rate();
  if (s.fused_loss) r.t_lm_head = k.lm_fused_gemms * gemm1 + logits * k.lm_fused_bytes_per_logit / c.hbm_bw;
  else r.t_lm_head = 3 * gemm1 + logits * (s.inplace_ce ? k.lm_inplace_bytes_per_logit : k.lm_unfused_bytes_per_logit) / c.hbm_bw;
  const double head_params = V * h;  // LM head weight; the embedding is gathered and reduced the same way
  const double mats = m.vocab_matrices();  // 1 when tied: one matrix gathered and reduced
  const double head_comm = s.zero >= 3 ? mats * collective_time(c, P, 2 * head_params) : 0.0;
  const double head_reduce = (s.zero >= 2 ? mats * collective_time(c, P, 2 * head_params)
                                          : 2 * mats * collective_time(c, P, s.grad_bytes * head_params));
  r.t_zero_exposed = exposed_layers + head_comm + head_reduce;  // the ends of the model have nothing to hide behind

  // ---- optimizer over this rank's shard
  const double N = m.params(), shard = s.zero >= 1 ? N / P : N;
  if (s.offload) {
    const int on_node = std::min(P, c.gpus_per_node);  // processes sharing the host's memory bandwidth
    r.t_optimizer = c.pcie().time(shard * k.opt_offload_pcie_bytes_per_param) +
                    shard * k.opt_cpu_bytes_per_param / (c.host_mem_bw * c.link_efficiency / on_node);
  } else {
    r.t_optimizer = shard * k.opt_gpu_bytes_per_param / c.hbm_bw;
  }
  // The trainer's all-reduces inside a timed step (trainer.cpp: the
  // stop-signal agreement comes after the step's timer), nonblocking and
  // completed by wait_all_bounded: on shared cores each waits for its
  // members' turns, the share Cluster::wait_fraction of the compute since
  // they last met: the token count after the step's data (little: 0), the
  // gradients' after the backward (all of it), the loss right after them
  // (none). Without host.wait_work_ms every call waits the whole nap.
  if (P > 1) {
    const double nap = c.nap_collective_wait(P);
    r.t_step_sync = nap * (c.wait_fraction(P, 0) + c.wait_fraction(P, std::numeric_limits<double>::infinity()) + c.wait_fraction(P, 0));
  }
  r.t_step_overhead = c.step_overhead + c.step_overhead_per_token * tok;
  r.t_total = r.t_layers_fwd + r.t_recompute + r.t_layers_bwd + r.t_lm_head + r.t_zero_exposed + r.t_optimizer + r.t_step_sync +
              r.t_step_overhead;
  r.tokens_per_s_per_gpu = s.S / r.t_total / P;
  // Paper convention, the attention term counting the mask's visible area.
  r.tflops_per_gpu = paper_flops_area(m, s.S, visible_area(s.S, s.attn.causal, double(s.attn.window))) / s.S *
                     r.tokens_per_s_per_gpu / 1e12;
  r.mfu = r.tflops_per_gpu * 1e12 / c.peak_flops;
  r.mfu_paper_script = r.mfu * 1.024;  // the 1000/1024 slip of the authors' script (ALGORITHMS.md section 9)

  // ---- memory per GPU at the peak (the backward of the first block)
  auto add = [&](const char* name, double b) { r.memory.emplace_back(name, b); };
  add("parameters", s.zero >= 3 ? 2 * N / P : 2 * N);
  // With the optimizer offloaded, gradients stream to the host during the
  // backward (ZeRO-Offload): only the layer's bucket stays (zero_buffers).
  add("gradients", s.offload ? 0.0 : s.zero >= 2 ? 2 * N / P : s.grad_bytes * N);
  add("optimizer", s.offload ? 0.0 : 12 * N / (s.zero >= 1 ? P : 1));  // fp32 master, m, v
  add("zero_buffers", s.zero >= 3 ? (k.zero_prefetch_layers + 1) * 2 * lp + 2 * head_params : 0.0);
  const double act = block_activation_bytes_per_token(m) * tok;
  if (s.policy == "keep") add("activations", L * (act + 2 * tok * h));
  else add("checkpoints", L * 2 * tok * h);
  const double cache = tok * double(m.heads * m.head_dim) * 2 + tok * double(m.heads) * 4;  // O bf16 + lse fp32
  add("attention_cache", s.policy == "whole" ? L * cache : s.policy == "half" ? L * cache / 2 : 0.0);
  // The block in backward has two peaks, not one sum: while its MLP runs
  // backward, the recomputed activations plus the MLP's gradient buffers
  // (intermediates and dx, bf16); while its attention runs backward (after
  // the MLP's saved tensors and gradients are freed), what attention and the
  // projections before it still hold (norm1 out, q k v, rotated q k, dO,
  // lse, the residual's gradient) plus the method's buffers. Under `whole`
  // the attention output is the cache's O, not a new buffer (`half`: half of it).
  const double qd = double(m.heads * m.head_dim), kvd = double(m.kv_heads * m.head_dim);
  const double o_cached = s.policy == "whole" ? 2 * tok * qd : s.policy == "half" ? tok * qd : 0.0;
  const double act_layer = s.policy == "keep" ? 0.0 : act - o_cached;
  const double mlp_peak = act_layer + 2 * tok * ((m.gated ? 3 : 2) * double(m.ffn) + 2 * h);
  const double attn_held = (s.policy == "keep" ? 0.0 : 2 * tok * (h + (qd + 2 * kvd) + (qd + kvd) + qd) + 4 * tok * double(m.heads)) +
                           2 * tok * h;
  const bool attn_wins = attn_held + at.buffer_bytes > mlp_peak;
  add("layer_working", attn_wins ? attn_held : mlp_peak);
  add("attention_buffers", attn_wins ? at.buffer_bytes : 0.0);
  add("lm_head", s.fused_loss ? k.lm_chunk_tokens * V * 4 * 2 + 4 * head_params
                              : logits * (s.inplace_ce ? k.lm_inplace_mem_per_logit : k.lm_unfused_mem_per_logit));
  double sum = 0;
  for (auto& kv : r.memory) sum += kv.second;
  add("allocator_slack", sum * (k.allocator_slack - 1));
  r.memory_total = sum * k.allocator_slack;
  r.fits = r.memory_total <= c.mem_capacity;
  return r;
}

}  // namespace burst::perf

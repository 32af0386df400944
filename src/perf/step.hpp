// One training step of a LLaMA model on P GPUs holding one sequence of S
// tokens (sequence parallel over all of them): time per phase, throughput,
// MFU in the paper's convention, and peak memory by category.
#pragma once

#include "perf/attention.hpp"
#include "perf/hardware.hpp"
#include "perf/shape.hpp"

#include <string>
#include <utility>
#include <vector>

namespace burst::perf {

struct StepConfig {
  ModelShape model;
  double S = 0;
  int P = 1;
  AttnConfig attn;
  std::string policy = "whole";  // keep | full | whole | half (ALGORITHMS.md section 7)
  bool fused_loss = true;
  bool inplace_ce = false;       // plain head with flash-attn's cross-entropy (gradient written into the logits)
  int zero = 3;                  // 0..3 over all P ranks
  bool offload = false;          // optimizer state and step on the host (CPU Adam)
  double grad_bytes = 2;         // bytes per gradient element when not sharded (Megatron keeps fp32: 4)
};

struct StepResult {
  // seconds per step
  double t_layers_fwd = 0, t_recompute = 0, t_layers_bwd = 0, t_lm_head = 0, t_zero_exposed = 0, t_optimizer = 0, t_total = 0;
  // the step's own all-reduces (token count, gradients or their norm, loss:
  // trainer.cpp) waiting for their members on shared cores; 0 on devices
  double t_step_sync = 0;
  // CPU machines: the per-layer and per-step overheads the kernel rates do
  // not carry (Cluster::layer_overhead, step_overhead*), in the totals
  double t_layer_overhead = 0, t_step_overhead = 0;
  // per step: blocking collectives of the attention method, and their wait (inside the layer terms)
  double attn_collectives = 0, attn_sync = 0;
  // per layer, seconds
  double attn_fwd = 0, attn_bwd = 0, attn_recompute = 0, gemm_fwd = 0, elem_fwd = 0, attn_exposed_comm = 0;
  double zero_comm_layer = 0;
  // one block's forward and backward as `burst bench layer` times them: no recompute and no ZeRO traffic,
  // but with what the layer terms carry on every block (a CPU host's layer overhead; Ulysses / USP
  // rebuilding their released state in the backward under `whole` / `half`)
  double layer_fwd = 0, layer_bwd = 0;
  double tokens_per_s_per_gpu = 0, tflops_per_gpu = 0, mfu = 0, mfu_paper_script = 0;
  // bytes per GPU at the peak; names and values in `memory`
  std::vector<std::pair<std::string, double>> memory;
  double memory_total = 0;  // allocator slack included
  bool fits = true;
  std::string attention;    // the method's schedule in words
};

// Throws Error(Config) on a bad configuration (naming the rule).
StepResult simulate_step(const Cluster& c, const Calibration& k, const StepConfig& s);

// Activation bytes per token one block stores for its backward (bf16, lse fp32).
double block_activation_bytes_per_token(const ModelShape& m);

}  // namespace burst::perf

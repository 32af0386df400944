#include "perf/paper.hpp"

namespace burst::perf {

std::vector<Framework> paper_frameworks(int P) {
  std::vector<Framework> f(5);
  const bool offload = P < 16;  // their scaling sheet: CPU Adam off from 16 GPUs on
  // BurstEngine: burst attention on the topology-aware double ring, burst
  // backward (MHA), fused LM head, `whole` checkpointing (the ablation's end), ZeRO-3.
  f[0].name = "BurstEngine";
  f[0].config.attn.method = "burst";
  f[0].config.policy = "whole";
  f[0].config.fused_loss = true;
  // LoongTrain-USP: Ulysses over 4 GPUs inside the node x a ring over 8 with
  // ring-style backward (its double ring), every block checkpointed.
  f[1].name = "LoongTrain-USP";
  f[1].config.attn.method = "usp";
  f[1].config.attn.hp = 4;
  f[1].config.attn.usp_inner = "ring";
  f[1].config.attn.placement = "head-first";
  // LoongTrain double ring, inner rings of 8.
  f[2].name = "LoongTrain-DoubleRing";
  f[2].config.attn.method = "loongtrain";
  f[2].config.attn.inner = 8;
  f[3].name = "DeepSpeed-Ulysses";
  f[3].config.attn.method = "ulysses";
  // Megatron-CP: flat ring (Transformer Engine p2p), bf16 dK,dV partials,
  // distributed optimizer (ZeRO-1) with fp32 main gradients.
  f[4].name = "Megatron-CP";
  f[4].config.attn.method = "ring";
  f[4].config.attn.partial_bf16 = true;
  f[4].config.zero = 1;
  f[4].config.grad_bytes = 4;
  for (int i = 1; i < 5; ++i) {
    f[size_t(i)].config.policy = "full";
    f[size_t(i)].config.fused_loss = false;
  }
  // LoongTrain runs in InternEvo, whose loss is flash-attn's CrossEntropyLoss
  // with inplace_backward=True (internlm_init_CrossEntropyLoss): bf16 logits,
  // the gradient written into them, no fp32 copy.
  f[1].config.inplace_ce = f[2].config.inplace_ce = true;
  for (auto& x : f) x.config.offload = offload;
  return f;
}

std::vector<PublishedRow> published_rows() {
  const double M = 1048576.0;
  return {{"14B", 1 * M, 32, {118.4, 99.7, 55.5, 0, 0}, {54.0, 76.0, 71.2, 0, 0}},
          {"7B", 2 * M, 32, {100.1, 88.0, 77.4, 70.8, 0}, {55.4, 75.9, 76.4, 75.3, 0}}};
}

PublishedAttention published_attention() {
  const double K = 1024;
  PublishedAttention a;
  a.seq = {128 * K, 256 * K, 512 * K, 1024 * K};
  a.methods = {"BurstAttention", "LoongTrain-USP", "LoongTrain-DoubleRing", "Megatron-CP"};
  a.tflops = {{128.8, 163.3, 178.6, 187.7}, {140.4, 166.8, 174.5, 181.7}, {99.1, 145.4, 160.3, 140.7}, {53.1, 104.6, 0, 0}};
  return a;
}

AttnConfig attention_only_method(const std::string& name) {
  AttnConfig a;
  if (name == "BurstAttention") a.method = "burst";
  if (name == "LoongTrain-USP") a.method = "usp", a.hp = 4, a.usp_inner = "ring";
  if (name == "LoongTrain-DoubleRing") a.method = "loongtrain", a.inner = 8;
  if (name == "Megatron-CP") a.method = "ring", a.partial_bf16 = true;
  return a;
}

}  // namespace burst::perf

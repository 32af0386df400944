// The paper's experiments as model inputs, and the numbers it published
// (ALGORITHMS.md section 10), so predictions and the published values sit
// side by side. A "framework" is a method with the settings its system used.
#pragma once

#include "perf/step.hpp"

#include <string>
#include <vector>

namespace burst::perf {

struct Framework {
  std::string name;  // as the paper's tables say it
  StepConfig config; // method, policy, loss, ZeRO; model, S, P filled per row
};

// BurstEngine, LoongTrain-USP (hp 4 x cp 8 head-first), LoongTrain double
// ring (inner 8), DeepSpeed-Ulysses, Megatron-CP; `P` decides offload
// (the paper's scaling sheet: CPU Adam below 16 GPUs).
std::vector<Framework> paper_frameworks(int P);

struct PublishedRow {
  std::string model;  // "14B" | "7B"
  double S;           // tokens (2^20 per "1M")
  int P;
  // per framework (paper_frameworks order): tokens/s/GPU (0 = OOM), GiB per GPU
  std::vector<double> tgs, mem;
};
std::vector<PublishedRow> published_rows();

// Attention only, 40 heads x 128, causal, 32 GPUs, fwd+bwd TFLOP/s per GPU (0 = OOM).
struct PublishedAttention {
  std::vector<double> seq;  // 128K .. 1M
  std::vector<std::string> methods;  // burst, loongtrain-usp, loongtrain-dr, megatron-cp
  std::vector<std::vector<double>> tflops;  // [method][seq]
};
PublishedAttention published_attention();
AttnConfig attention_only_method(const std::string& name);

// One GPU, 14B, 32K tokens: 1201 tokens/s, 47.3% MFU (their script's MFU).
constexpr double kOneGpuTgs = 1201.0, kOneGpuMfu = 0.473;

}  // namespace burst::perf

// The `burst` subcommands. Each takes the live runtime and its parsed options.
#pragma once

#include "comm/runtime.hpp"
#include "core/config.hpp"

#include <string>
#include <vector>

namespace burst::cli {

int cmd_info(Runtime& rt);

struct BenchGemmOptions {
  std::string config;               // optional TOML run file
  std::vector<std::string> sets;    // --set overrides
  std::string output;               // HDF5 path ("" = config's bench.output)
};
int cmd_bench_gemm(Runtime& rt, const BenchGemmOptions& opt);
// Same options: --config, --set, --output.
int cmd_bench_attention(Runtime& rt, const BenchGemmOptions& opt);
// The fused LM head + cross-entropy (bench_ce.cpp); same options.
int cmd_bench_ce(Runtime& rt, const BenchGemmOptions& opt);
// The memory-bound layer kernels against their byte floors (bench_kernels.cpp).
int cmd_bench_kernels(Runtime& rt, const BenchGemmOptions& opt);
// One LLaMA block forward + backward through the model code (bench_layer.cpp).
int cmd_bench_layer(Runtime& rt, const BenchGemmOptions& opt);
// One whole training step of a model preset on one device (bench_step.cpp).
int cmd_bench_step(Runtime& rt, const BenchGemmOptions& opt);
// Its distributed part (bench.methods given): bench_attention_dist.cpp.
int bench_attention_methods(Runtime& rt, const Config& cfg, const std::string& output);
// Its tile-cost part (bench.tile_costs = true): bench_tiles.cpp.
int bench_attention_tiles(Runtime& rt, const Config& cfg, const std::string& output);
// MPI alpha-beta between ranks 0 and 1 (--config, --set, --output).
int cmd_bench_pingpong(Runtime& rt, const BenchGemmOptions& opt);
// Blocking collectives between compute on shared cores: the wait per collective (--config, --set, --output).
int cmd_bench_collective(Runtime& rt, const BenchGemmOptions& opt);
void fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& t, double* alpha, double* beta);

struct AttnCheckOptions {
  std::string method = "burst", layout = "zigzag", mask = "causal", ring = "auto", backward = "auto";
  std::string placement = "head-first", usp_inner = "burst", partial = "fp32", dtype = "double";
  std::string doc_lengths, input, output;
  long window = 0, seq = 256, heads = 4, kv_heads = 4, head_dim = 16;
  int inner = 0, hp = 0;
  unsigned long long seed = 1;
  double tolerance = 0;  // 0: 1e-10 in double, 1e-4 in float
};
int cmd_attn_check(Runtime& rt, const AttnCheckOptions& opt);

// Hugging Face checkpoints <-> our HDF5 weights (src/cli/hf.cpp), on one rank.
struct ImportHfOptions {
  std::string model_dir, output;
  std::string dtype = "auto";  // float32 | float64 | auto (float64 when the checkpoint has F64 tensors)
};
int cmd_import_hf(Runtime& rt, const ImportHfOptions& opt);
struct ExportHfOptions {
  std::string weights, output;
  std::string dtype = "f32";  // bf16 | f16 | f32 | f64
  double max_shard_mb = 0;    // 0: one file
};
int cmd_export_hf(Runtime& rt, const ExportHfOptions& opt);

// Logits (and hidden states) of a token file (src/cli/forward.cpp).
struct ForwardOptions {
  std::string model, weights, tokens, output;
  std::string dtype = "float";  // float | double
  bool hidden_states = false;
};
int cmd_forward(Runtime& rt, const ForwardOptions& opt);

}  // namespace burst::cli

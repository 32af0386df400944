// The `burst` subcommands. Each takes the live runtime and its parsed options.
#pragma once

#include "comm/runtime.hpp"

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

}  // namespace burst::cli

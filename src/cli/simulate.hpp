// `burst simulate`: options and the command (needs no runtime: no MPI, no Kokkos).
#pragma once

#include <set>
#include <string>

namespace burst::cli {

struct SimulateOptions {
  std::string cluster = "a800", model = "14B", seq = "1M", method = "burst", policy = "whole";
  std::string fused_loss = "on", offload = "off", ring = "auto", backward = "auto", usp_inner = "burst";
  std::string placement = "head-first", partial = "fp32", mask = "causal";
  std::string layout, doc_lengths;  // --attention-only with the ring methods: a chosen layout, documents a,b,c
  int gpus = 32, hp = 0, inner = 0, zero = 3;
  long window = 0;
  int gpus_per_node = 0;
  double host_cores = 0;       // > 0: override the cluster's host.cores (cores a CPU run actually had)
  double host_cpu = 0;         // > 0: as host_cores, but the CPU the run used (CPU s per wall s; its idle waits left out)
  bool attention_only = false; // time one layer's distributed attention (fwd + bwd) instead of a step
  std::string table, output, data_dir, calibration;
  // The options given on the command line ("--hp", ...): one that the run
  // asked for does not read is refused, not silently ignored.
  std::set<std::string> given;
};
int cmd_simulate(const SimulateOptions& o);

}  // namespace burst::cli

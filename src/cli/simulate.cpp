// `burst simulate`: the performance and memory model (src/perf/) for one
// configuration, or for every table of the paper (--table paper), or for
// the points the model is calibrated on (--table calibration).
#include "cli/simulate.hpp"
#include "cli/model_arg.hpp"

#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "parallel/layout.hpp"
#include "model/config.hpp"
#include "perf/paper.hpp"
#include "perf/step.hpp"
#include "train/weights.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>

namespace burst::cli {

using namespace burst::perf;

namespace {

const double kGiB = 1073741824.0;

double parse_seq(const std::string& text) {
  BURST_CHECK_CONFIG(!text.empty(), "--seq is empty");
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string suffix(end);
  double mult = 1;
  if (suffix == "K" || suffix == "k") mult = 1024;
  else if (suffix == "M" || suffix == "m") mult = 1048576;
  else BURST_CHECK_CONFIG(suffix.empty(), "--seq '", text, "': expected a token count like 32768, 128K or 1M (K = 1024)");
  BURST_CHECK_CONFIG(end != text.c_str() && v > 0 && std::isfinite(v), "--seq '", text, "' must be a positive number of tokens");
  // The model's arithmetic (and token counts held as long) stays meaningful
  // far below this; beyond it the step times overflow to inf / nan.
  const double S = v * mult, kMaxSeq = 1099511627776.0;  // 2^40 = 1024G tokens
  BURST_CHECK_CONFIG(S <= kMaxSeq, "--seq '", text, "' = ", S, " tokens is out of range: at most 2^40 = ", kMaxSeq, " tokens");
  BURST_CHECK_CONFIG(S == std::floor(S), "--seq '", text, "' = ", S, " tokens is not a whole number of tokens");
  return S;
}

// `mask_given`: --mask was given, so a config.json's sliding-window layers
// are priced as that mask on every layer (said in a note); without it they
// are refused rather than priced as full causal attention.
ModelShape shape_of(const std::string& name, bool mask_given = false) {
  const ModelConfig c = model_from_arg(name);
  // The model's layers are one shape for all: sliding-window layers
  // (layer_types) among full ones are not in it.
  BURST_CHECK_CONFIG(c.window_layers.empty() || mask_given, "--model ", name, ": ", c.window_layers.size(), " of its ", c.layers,
                     " layers are sliding-window layers (layer_types, sliding_window = ", c.sliding_window,
                     "): the model prices every layer alike; give --mask window --window ", c.sliding_window,
                     " (every layer windowed) or --mask causal (every layer full) for the two bounds");
  if (!c.window_layers.empty())
    std::fprintf(stderr, "note: --model %s: its %zu sliding-window layers are priced as the --mask given, as every layer\n",
                 name.c_str(), c.window_layers.size());
  ModelShape m;
  m.name = c.name;
  m.layers = c.layers, m.hidden = c.hidden, m.ffn = c.ffn, m.heads = c.heads, m.kv_heads = c.kv_heads, m.head_dim = c.head_dim;
  m.vocab = c.vocab;
  m.gated = c.mlp == MlpKind::SwiGLU;
  m.tied = c.tie_embeddings;
  return m;
}

bool on_off(const std::string& v, const char* flag) {
  BURST_CHECK_CONFIG(v == "on" || v == "off", flag, " '", v, "': expected on or off");
  return v == "on";
}

// 1M, 128K, or the whole count (never %g's 1.0486e+06: --seq is at most 2^40).
std::string seq_label(double S) {
  char b[40];
  const auto n = static_cast<long long>(S);
  if (n >= 1048576 && n % 1048576 == 0) std::snprintf(b, sizeof b, "%lldM", n / 1048576);
  else if (n >= 1024 && n % 1024 == 0) std::snprintf(b, sizeof b, "%lldK", n / 1024);
  else std::snprintf(b, sizeof b, "%lld", n);
  return b;
}

// The attention settings of a run (beside them the method, hp and inner as
// given: 0 is the default, which the description gives as resolved).
void write_attention_inputs(io::H5File& f, const std::string& g, const AttnConfig& a) {
  f.set_attr(g, "ring", a.ring);
  f.set_attr(g, "backward", a.backward);
  f.set_attr(g, "partial", std::string(a.partial_bf16 ? "bf16" : "fp32"));
  f.set_attr(g, "placement", a.placement);
  f.set_attr(g, "usp_inner", a.usp_inner);
  f.set_attr(g, "mask", std::string(a.document ? "document" : a.window > 0 ? "window" : a.causal ? "causal" : "full"));
  f.set_attr(g, "window", std::int64_t(a.window));
  f.set_attr(g, "layout", a.layout);
  if (!a.doc_lengths.empty()) f.write(g + "/doc_lengths", std::vector<std::int64_t>(a.doc_lengths.begin(), a.doc_lengths.end()));
}

// One prediction as an HDF5 group: inputs and outputs as attributes, the
// memory categories as a dataset.
void write_prediction(io::H5File& f, const std::string& g, const StepConfig& s, const StepResult& r) {
  f.create_group(g);
  f.set_attr(g, "model", s.model.name);
  f.set_attr(g, "seq", s.S);
  f.set_attr(g, "gpus", s.P);
  f.set_attr(g, "method", s.attn.method);
  f.set_attr(g, "hp", s.attn.hp);
  f.set_attr(g, "inner", s.attn.inner);
  f.set_attr(g, "policy", s.policy);
  f.set_attr(g, "fused_loss", int(s.fused_loss));
  f.set_attr(g, "zero", s.zero);
  f.set_attr(g, "offload", int(s.offload));
  write_attention_inputs(f, g, s.attn);
  f.set_attr(g, "attention", r.attention);
  const std::pair<const char*, double> vals[] = {
      {"t_layers_fwd", r.t_layers_fwd}, {"t_recompute", r.t_recompute}, {"t_layers_bwd", r.t_layers_bwd},
      {"t_lm_head", r.t_lm_head}, {"t_zero_exposed", r.t_zero_exposed}, {"t_optimizer", r.t_optimizer},
      {"t_total", r.t_total}, {"t_step_sync", r.t_step_sync}, {"t_layer_overhead", r.t_layer_overhead},
      {"t_step_overhead", r.t_step_overhead}, {"gemm_fwd_per_layer", r.gemm_fwd}, {"elem_fwd_per_layer", r.elem_fwd},
      {"attn_recompute_per_layer", r.attn_recompute}, {"zero_comm_per_layer", r.zero_comm_layer},
      {"attn_collectives_per_step", r.attn_collectives},
      {"attn_sync_per_step", r.attn_sync}, {"attn_fwd_per_layer", r.attn_fwd}, {"attn_bwd_per_layer", r.attn_bwd},
      {"attn_exposed_comm_per_layer", r.attn_exposed_comm},
      {"layer_fwd", r.layer_fwd}, {"layer_bwd", r.layer_bwd}, {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
      {"tflops_per_gpu", r.tflops_per_gpu}, {"mfu", r.mfu}, {"mfu_paper_script", r.mfu_paper_script},
      {"memory_gib", r.memory_total / kGiB}};
  for (const auto& v : vals) f.set_attr(g, v.first, v.second);
  f.set_attr(g, "fits", int(r.fits));
  std::vector<double> mem;
  std::string names;
  for (const auto& kv : r.memory) {
    mem.push_back(kv.second / kGiB);
    names += (names.empty() ? "" : ",") + kv.first;
  }
  f.write(g + "/memory_gib", mem);
  f.set_attr(g + "/memory_gib", "categories", names);
}

void print_result(const StepConfig& s, const StepResult& r, const Cluster& c) {
  std::printf("%s, %s tokens on %d x %s, %s\n", s.model.name.c_str(), seq_label(s.S).c_str(), s.P, c.name.c_str(), r.attention.c_str());
  const bool cpu = c.machine_cores > 0;  // a CPU cluster (host.cores): its ranks are processes, not GPUs
  std::printf("  policy %s, LM head %s, ZeRO-%d, optimizer %s\n", s.policy.c_str(), s.fused_loss ? "fused" : "unfused", s.zero,
              s.offload ? "offloaded (CPU Adam)" : cpu ? "on the ranks" : "on the GPU");
  std::printf("  per layer: attention fwd %.4f s, bwd %.4f s (exposed communication %.4f s), recompute attention %.4f s, "
              "GEMMs fwd %.4f s, elementwise fwd %.4f s, ZeRO comm %.4f s\n",
              r.attn_fwd, r.attn_bwd, r.attn_exposed_comm, r.attn_recompute, r.gemm_fwd, r.elem_fwd, r.zero_comm_layer);
  std::printf("  one block (burst bench layer's case: no recompute, no ZeRO traffic): forward %.4f s + backward %.4f s = %.4f s\n",
              r.layer_fwd, r.layer_bwd, r.layer_fwd + r.layer_bwd);
  std::printf("  step %.3f s = forward %.3f + recompute %.3f + backward %.3f + LM head %.3f + ZeRO exposed %.3f + optimizer %.3f"
              " + step all-reduce waits %.3f + step overhead %.3f\n",
              r.t_total, r.t_layers_fwd, r.t_recompute, r.t_layers_bwd, r.t_lm_head, r.t_zero_exposed, r.t_optimizer, r.t_step_sync,
              r.t_step_overhead);
  if (r.t_layer_overhead > 0)
    std::printf("  layer overheads (host, in the layer terms): %.4f s per step\n", r.t_layer_overhead);
  if (r.attn_collectives > 0)
    std::printf("  attention: %.0f blocking collectives per step, waiting %.4f s for their members on shared cores (in the layer terms)\n",
                r.attn_collectives, r.attn_sync);
  std::printf("  %.1f tokens/s/GPU, %.4g TFLOP/s/GPU, MFU %.1f%% of %.4g TFLOP/s (paper convention; %.1f%% with the authors' 1.024)\n",
              r.tokens_per_s_per_gpu, r.tflops_per_gpu, 100 * r.mfu, c.peak_flops / 1e12, 100 * r.mfu_paper_script);
  std::printf("  memory per GPU (GiB):");
  for (const auto& kv : r.memory) std::printf(" %s %.2f,", kv.first.c_str(), kv.second / kGiB);
  std::printf(" total %.2f of %.1f: %s\n", r.memory_total / kGiB, c.mem_capacity / kGiB, r.fits ? "fits" : "OOM");
}

struct Ctx {
  Cluster cl;
  Calibration k;
  ModelShape m14, m7;
};

StepConfig with(const StepConfig& base, const ModelShape& m, double S, int P) {
  StepConfig s = base;
  s.model = m, s.S = S, s.P = P;
  return s;
}

// A prediction that the configuration forbids (heads not divisible, ...)
// is recorded as infeasible with the reason.
bool try_step(const Ctx& x, const StepConfig& s, StepResult* r, std::string* why) {
  try {
    *r = simulate_step(x.cl, x.k, s);
    return true;
  } catch (const Error& e) {
    if (e.exit_code() != 2) throw;
    *why = e.message();
    return false;
  }
}

void table_end_to_end(io::H5File& f, const Ctx& x, const std::string& sect, const std::vector<PublishedRow>& rows) {
  std::printf("\n== %s: tokens/s/GPU and GiB/GPU, predicted vs published ==\n", sect.c_str());
  for (const auto& row : rows) {
    const ModelShape& m = row.model == "14B" ? x.m14 : x.m7;
    const auto fw = paper_frameworks(row.P);
    const std::string rg = sect + "/" + row.model + "_" + seq_label(row.S) + "_" + std::to_string(row.P);
    std::printf("%s, %s tokens, %d GPUs\n", row.model.c_str(), seq_label(row.S).c_str(), row.P);
    for (size_t i = 0; i < fw.size(); ++i) {
      const StepConfig s = with(fw[i].config, m, row.S, row.P);
      StepResult r;
      std::string why;
      const std::string g = rg + "/" + fw[i].name;
      const bool ok = try_step(x, s, &r, &why);
      if (ok) write_prediction(f, g, s, r);
      else {
        f.create_group(g);
        f.set_attr(g, "infeasible", why);
        f.set_attr(g, "fits", 0);
      }
      f.set_attr(g, "framework", fw[i].name);
      const bool pub = !row.tgs.empty();
      if (pub) {
        f.set_attr(g, "published_tokens_per_s_per_gpu", row.tgs[i]);  // 0 = OOM
        f.set_attr(g, "published_memory_gib", row.mem[i]);
      }
      char pred[96], pubs[64] = "";
      // (the reason is printed whole: a 96-byte buffer cut it mid-sentence)
      if (!ok) std::snprintf(pred, sizeof pred, "infeasible");
      else if (!r.fits) std::snprintf(pred, sizeof pred, "OOM (%.1f GiB; %.1f tok/s/GPU if it fitted)", r.memory_total / kGiB, r.tokens_per_s_per_gpu);
      else std::snprintf(pred, sizeof pred, "%.1f tok/s/GPU, %.1f GiB, MFU %.1f%%", r.tokens_per_s_per_gpu, r.memory_total / kGiB, 100 * r.mfu);
      if (pub) {
        if (row.tgs[i] == 0) std::snprintf(pubs, sizeof pubs, "published OOM");
        else std::snprintf(pubs, sizeof pubs, "published %.1f, %.1f GB (%+.1f%% tok/s)", row.tgs[i], row.mem[i],
                           ok && r.fits ? 100 * (r.tokens_per_s_per_gpu / row.tgs[i] - 1) : NAN);
      }
      std::printf("  %-22s %s  %s\n", fw[i].name.c_str(), pred, pubs);
      if (!ok) std::printf("  %-22s   (%s)\n", "", why.c_str());
    }
  }
}

void table_attention(io::H5File& f, const Ctx& x) {
  std::printf("\n== attention only: 40 heads x 128, causal, 32 GPUs, fwd+bwd TFLOP/s per GPU, predicted / published ==\n");
  const PublishedAttention pa = published_attention();
  for (size_t mi = 0; mi < pa.methods.size(); ++mi) {
    std::printf("  %-22s", pa.methods[mi].c_str());
    std::vector<double> pred, fwd, bwd;
    for (size_t si = 0; si < pa.seq.size(); ++si) {
      const AttnProblem p{32, pa.seq[si], 40, 40, 128};
      const AttnCost a = attention_cost(x.cl, attention_only_method(pa.methods[mi]), p);
      const double tf = 3.5 * attention_flops_fwd(p.S, p.n, p.d, true) / p.P / (a.fwd.time + a.bwd.time) / 1e12;
      pred.push_back(tf), fwd.push_back(a.fwd.time), bwd.push_back(a.bwd.time);
      std::printf("  %s %.1f / %.1f", seq_label(pa.seq[si]).c_str(), tf, pa.tflops[mi][si]);
    }
    std::printf("\n");
    const std::string g = "attention_only/" + pa.methods[mi];
    f.create_group(g);
    f.write(g + "/seq", pa.seq);
    f.write(g + "/predicted_tflops", pred);
    f.write(g + "/published_tflops", pa.tflops[mi]);
    f.write(g + "/fwd_s", fwd);
    f.write(g + "/bwd_s", bwd);
    f.set_attr(g, "note", "published 0 = OOM");
  }
}

void table_one_gpu(io::H5File& f, const Ctx& x) {
  StepConfig s = with(paper_frameworks(1)[0].config, x.m14, 32768, 1);
  const StepResult r = simulate_step(x.cl, x.k, s);
  std::printf("\n== one GPU, 14B, 32K tokens (calibration point) ==\n  predicted %.1f tokens/s, MFU %.1f%% (script %.1f%%); published %.0f, %.1f%%\n",
              r.tokens_per_s_per_gpu, 100 * r.mfu, 100 * r.mfu_paper_script, kOneGpuTgs, 100 * kOneGpuMfu);
  write_prediction(f, "calibration/one_gpu", s, r);
  f.set_attr("calibration/one_gpu", "published_tokens_per_s_per_gpu", kOneGpuTgs);
  f.set_attr("calibration/one_gpu", "published_mfu", kOneGpuMfu);
}

void table_ablation(io::H5File& f, const Ctx& x) {
  std::printf("\n== ablation: 14B, 1M tokens, 32 GPUs ==\n");
  const double S = 1048576;
  StepConfig s = with(paper_frameworks(32)[0].config, x.m14, S, 32);
  struct Step {
    const char* name;
    std::function<void(StepConfig&)> apply;
  };
  const std::vector<Step> steps = {
      {"baseline", [](StepConfig& c) { c.attn.method = "ring", c.attn.ring = "flat", c.fused_loss = false, c.policy = "full"; }},
      {"+burst_backward", [](StepConfig& c) { c.attn.method = "burst", c.attn.ring = "flat"; }},
      {"+double_ring", [](StepConfig& c) { c.attn.ring = "auto"; }},
      {"+fused_loss", [](StepConfig& c) { c.fused_loss = true; }},
      {"+half", [](StepConfig& c) { c.policy = "half"; }},
      {"+whole", [](StepConfig& c) { c.policy = "whole"; }}};
  std::vector<double> tgs, mem;
  std::string names;
  for (const auto& st : steps) {
    st.apply(s);
    const StepResult r = simulate_step(x.cl, x.k, s);
    tgs.push_back(r.tokens_per_s_per_gpu), mem.push_back(r.memory_total / kGiB);
    names += (names.empty() ? "" : ",") + std::string(st.name);
    write_prediction(f, std::string("ablation/") + st.name, s, r);
    std::printf("  %-16s %7.1f tok/s/GPU  %6.1f GiB %s\n", st.name, r.tokens_per_s_per_gpu, r.memory_total / kGiB, r.fits ? "" : "(OOM)");
  }
  f.write("ablation/tokens_per_s_per_gpu", tgs);
  f.write("ablation/memory_gib", mem);
  f.set_attr("ablation", "steps", names);
}

// Workload balance under sparse masks at the paper's scale (predicted; the
// paper gives no numbers we can compare): one layer's distributed attention,
// 14B heads (40 x 128), 1M tokens on 32 GPUs, burst and ring, each mask on
// an unbalanced layout (contiguous) and the balanced ones the engine plans
// (zigzag; for documents, the document layout), costed round by round from
// the tiles the kernels compute. The window is 64K tokens; the documents a
// fixed mix of long and short ones (128K, 8K, 64K, 4K, 32K, 16K, 2K, 2K,
// four times).
void table_sparse(io::H5File& f, const Ctx& x) {
  std::printf("\n== sparse masks: 14B heads, 1M tokens, 32 GPUs, one layer's attention fwd+bwd, TFLOP/s per GPU (visible area) ==\n");
  const double S = 1048576;
  const long window = 65536;
  std::vector<long> docs;
  for (int r = 0; r < 4; ++r)
    for (long l : {131072L, 8192L, 65536L, 4096L, 32768L, 16384L, 2048L, 2048L}) docs.push_back(l);
  struct Case {
    const char *mask, *layout;
  };
  const std::vector<Case> cases = {{"causal", "contiguous"}, {"causal", "zigzag"},      {"window", "contiguous"},
                                   {"window", "zigzag"},     {"document", "contiguous"}, {"document", "zigzag"},
                                   {"document", "document"}};
  f.create_group("sparse");
  f.set_attr("sparse", "seq", S);
  f.set_attr("sparse", "gpus", std::int64_t(32));
  f.set_attr("sparse", "window", std::int64_t(window));
  f.write("sparse/doc_lengths", std::vector<double>(docs.begin(), docs.end()));
  std::string masks, layouts;
  for (const auto& c : cases) {
    masks += (masks.empty() ? "" : ",") + std::string(c.mask);
    layouts += (layouts.empty() ? "" : ",") + std::string(c.layout);
  }
  f.set_attr("sparse", "masks", masks);
  f.set_attr("sparse", "layouts", layouts);
  for (const char* method : {"burst", "ring"}) {
    std::vector<double> tflops, total, compute;
    std::printf("  %-6s", method);
    for (const auto& c : cases) {
      AttnConfig a;
      a.method = method;
      a.layout = c.layout;
      a.causal = true;
      a.window = std::string(c.mask) == "window" ? window : 0;
      a.document = std::string(c.mask) == "document";
      if (a.document) a.doc_lengths = docs;
      const AttnProblem p{32, S, 40, 40, 128};
      validate_attention(a, p, x.cl.gpus_per_node);
      const AttnCost r = attention_cost(x.cl, a, p);
      const double area = a.document ? document_area(docs) : visible_area(S, true, double(a.window));
      const double t = r.fwd.time + r.bwd.time;
      tflops.push_back(3.5 * 4 * area * double(p.n * p.d) / p.P / t / 1e12);
      total.push_back(t), compute.push_back(r.fwd.compute + r.bwd.compute);
      std::printf("  %s/%s %.1f", c.mask, c.layout, tflops.back());
    }
    std::printf("\n");
    const std::string g = std::string("sparse/") + method;
    f.create_group(g);
    f.write(g + "/tflops_per_gpu", tflops);
    f.write(g + "/fwd_bwd_s", total);
    f.write(g + "/compute_s", compute);
  }
}

void table_scaling(io::H5File& f, const Ctx& x) {
  std::printf("\n== scaling: 14B, 32K tokens per GPU, BurstEngine ==\n");
  std::vector<double> gpus, tgs, mfu, mem;
  for (int P : {1, 2, 4, 8, 16, 32, 64}) {
    const StepConfig s = with(paper_frameworks(P)[0].config, x.m14, 32768.0 * P, P);
    const StepResult r = simulate_step(x.cl, x.k, s);
    gpus.push_back(P), tgs.push_back(r.tokens_per_s_per_gpu), mfu.push_back(r.mfu_paper_script), mem.push_back(r.memory_total / kGiB);
    write_prediction(f, "scaling/P" + std::to_string(P), s, r);
    std::printf("  %2d GPUs, %5s tokens: %7.1f tok/s/GPU, MFU %.1f%% (script), %.1f GiB%s\n", P, seq_label(s.S).c_str(),
                r.tokens_per_s_per_gpu, 100 * r.mfu_paper_script, r.memory_total / kGiB, r.fits ? "" : " OOM");
  }
  f.write("scaling/gpus", gpus);
  f.write("scaling/tokens_per_s_per_gpu", tgs);
  f.write("scaling/mfu_paper_script", mfu);
  f.write("scaling/memory_gib", mem);
  f.set_attr("scaling", "published_one_gpu_tokens_per_s", kOneGpuTgs);
}

void table_memory_vs_seq(io::H5File& f, const Ctx& x) {
  std::printf("\n== memory vs sequence length: 14B, 32 GPUs (GiB/GPU) ==\n");
  const auto fw = paper_frameworks(32);
  std::vector<double> seqs;
  for (double S = 131072; S <= 4194304; S *= 2) seqs.push_back(S);
  f.create_group("memory_vs_seq");
  f.write("memory_vs_seq/seq", seqs);
  for (const auto& w : fw) {
    std::vector<double> mem, tgs;
    std::printf("  %-22s", w.name.c_str());
    for (double S : seqs) {
      StepResult r;
      std::string why;
      if (try_step(x, with(w.config, x.m14, S, 32), &r, &why)) {
        mem.push_back(r.memory_total / kGiB), tgs.push_back(r.tokens_per_s_per_gpu);
        std::printf(" %s %.1f%s", seq_label(S).c_str(), r.memory_total / kGiB, r.fits ? "" : "!");
      } else {
        mem.push_back(NAN), tgs.push_back(NAN);
        std::printf(" %s -", seq_label(S).c_str());
      }
    }
    std::printf("\n");
    f.write("memory_vs_seq/" + w.name + "_memory_gib", mem);
    f.write("memory_vs_seq/" + w.name + "_tokens_per_s_per_gpu", tgs);
  }
  f.set_attr("memory_vs_seq", "capacity_gib", x.cl.mem_capacity / kGiB);
}

// The H200 layer microbenchmark the elementwise constant comes from, and its check.
void table_h200_layer(io::H5File& f, const Ctx& x, const std::string& data_dir) {
  const Cluster h = load_cluster("h200", data_dir);
  std::printf("\n== H200 LlamaDecoderLayer, 32K tokens, fwd+bwd (calibration of elementwise passes) ==\n");
  struct Pt {
    const char* name;
    long hidden, heads, ffn;
    double measured;
  } pts[] = {{"7B", 4096, 32, 11008, 0.134}, {"1B", 2048, 16, 5632, 0.053}};
  for (const auto& p : pts) {
    ModelShape m;
    m.name = p.name, m.layers = 1, m.hidden = p.hidden, m.heads = m.kv_heads = p.heads, m.head_dim = 128, m.ffn = p.ffn, m.gated = true;
    const double S = 32768, gemm = 3 * m.gemm_flops_per_token() * S / h.gemm_rate();
    const double af = attention_flops_fwd(S, m.heads, 128, true);
    const double attn = af / h.attn_rate_fwd(S) + 2.5 * af / h.attn_rate_bwd(S);
    const double elem = x.k.elem_passes * 2 * double(m.hidden + m.ffn) * S / h.hbm_bw;
    const double passes_needed = (p.measured - gemm - attn) * h.hbm_bw / (2 * double(m.hidden + m.ffn) * S);
    std::printf("  %s shape: GEMMs %.4f + attention %.4f + elementwise %.4f = %.4f s; measured %.3f s (passes that would match: %.1f)\n",
                p.name, gemm, attn, elem, gemm + attn + elem, p.measured, passes_needed);
    const std::string g = std::string("calibration/h200_layer_") + p.name;
    f.create_group(g);
    f.set_attr(g, "predicted_s", gemm + attn + elem);
    f.set_attr(g, "measured_s", p.measured);
    f.set_attr(g, "passes_matching", passes_needed);
  }
}

// Options given that the run asked for does not read. A setting of another
// kind of run (a step's under --attention-only, any run's under --table, a
// window without the window mask) is refused: taken silently, the prediction
// would be read as the one asked for. A method's own option given with
// another method is noted and has no effect (a sweep passes one set of
// options to every method, as the engine's train config does).
void check_unread_options(const SimulateOptions& o) {
  const auto given = [&](const char* name) { return o.given.count(name) > 0; };
  const auto refuse = [&](const char* name, const std::string& why) {
    BURST_CHECK_CONFIG(!given(name), name, " is not read by ", why);
  };
  if (!o.table.empty()) {  // the tables fix every run's settings themselves
    BURST_CHECK_CONFIG(o.table == "paper" || o.table == "calibration", "--table '", o.table, "': expected paper or calibration");
    for (const char* name : {"--model", "--seq", "--gpus", "--method", "--hp", "--inner", "--placement", "--usp-inner", "--ring",
                             "--backward", "--partial", "--mask", "--layout", "--doc-lengths", "--window", "--policy",
                             "--fused-loss", "--zero", "--offload", "--attention-only"})
      refuse(name, "--table " + o.table + " (its tables set every run's options; the cluster's are --cluster, "
                                          "--gpus-per-node, --host-cores, --host-cpu, --calibration, --data-dir)");
    return;
  }
  if (o.attention_only)
    for (const char* name : {"--policy", "--fused-loss", "--zero", "--offload"})
      refuse(name, "--attention-only (one layer's attention, fwd + bwd: no step)");
  if (given("--window") && o.mask != "window") refuse("--window", "--mask " + o.mask + " (--mask window reads it)");
  const std::string m = o.method;
  const auto note = [&](const char* name, const std::string& why) {
    if (given(name)) std::fprintf(stderr, "note: %s has no effect with --method %s (%s)\n", name, m.c_str(), why.c_str());
  };
  if (m != "usp") {
    note("--hp", m == "ulysses" ? "ulysses' head-parallel size is all the GPUs" : "usp's head-parallel size");
    note("--placement", "usp only");
    note("--usp-inner", "usp only");
  }
  if (m != "loongtrain") note("--inner", "loongtrain's inner ring");
  if (m == "loongtrain") note("--ring", "always a double ring: --inner sets its inner ring");
  if (m == "ulysses" || m == "allgather") note("--ring", "no ring");
  // What travels in the backward is burst's choice (and usp's over a burst inner ring).
  if (m != "burst" && !(m == "usp" && o.usp_inner == "burst"))
    note("--backward", m == "usp" ? "its ring stage is --usp-inner ring: K,V travel" : "its backward is fixed");
  if (m == "ulysses" || m == "allgather") note("--partial", "no partial sums travel");
}

}  // namespace

int cmd_simulate(const SimulateOptions& o) {
  // The model needs no MPI: several processes of one launch would each write
  // --output (and print the same prediction).
  for (const char* var : {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"}) {  // MPICH / srun, Open MPI
    const char* v = std::getenv(var);
    BURST_CHECK_CONFIG(v == nullptr || std::atol(v) <= 1, "burst simulate runs in one process (no MPI, no GPUs): this is one of ",
                       v ? v : "", " processes (", var, "); run it without mpiexec, or with -n 1 (a script started "
                       "under mpiexec that runs simulate itself: unset ", var, " for it)");
  }
  check_unread_options(o);
  const std::string dir = o.data_dir.empty() ? default_data_dir() : o.data_dir;
  {
    std::error_code ec;
    BURST_CHECK_CONFIG(o.data_dir.empty() || std::filesystem::is_directory(o.data_dir, ec), "--data-dir '", o.data_dir,
                       "' is not a directory (it holds clusters/ and perf_calibration.toml)");
  }
  // Overrides are given or not (0); a negative or non-finite one is a mistake, not "not given".
  BURST_CHECK_CONFIG(o.gpus_per_node >= 0, "--gpus-per-node ", o.gpus_per_node, " must be >= 1");
  BURST_CHECK_CONFIG(o.hp >= 0, "--hp ", o.hp, " must be >= 1 (default: GPUs per node)");
  BURST_CHECK_CONFIG(o.inner >= 0, "--inner ", o.inner, " must be >= 1 (default: GPUs per node)");
  // The range of the cluster file's host.cores (hardware.cpp): fewer cores scale the rates to denormals (times of 1e300 s).
  const auto cores_ok = [](double v) { return v == 0 || (v >= 0.01 && v <= 1e6); };  // NaN fails
  BURST_CHECK_CONFIG(cores_ok(o.host_cores), "--host-cores ", o.host_cores, " must be a number of cores in [0.01, 1e6]");
  BURST_CHECK_CONFIG(cores_ok(o.host_cpu), "--host-cpu ", o.host_cpu, " must be CPU seconds per wall second in [0.01, 1e6]");
  // The output file before any work.
  if (!o.output.empty()) check_output("--output", o.output);  // train/weights.hpp: never a checkpoint, a log, an input
  Ctx x;
  x.cl = load_cluster(o.cluster, dir);
  if (o.gpus_per_node > 0) {
    BURST_CHECK_CONFIG(o.gpus_per_node <= 4096, "--gpus-per-node ", o.gpus_per_node, " is out of range: must be in [1, 4096]");
    x.cl.gpus_per_node = o.gpus_per_node;
  }
  // The share of a CPU host's cores a run got: a GPU cluster (no host.cores)
  // has nothing to share, and the override silently changed its prediction.
  if (o.host_cores > 0 || o.host_cpu > 0)
    BURST_CHECK_CONFIG(x.cl.machine_cores > 0, o.host_cores > 0 ? "--host-cores " : "--host-cpu ",
                       o.host_cores > 0 ? o.host_cores : o.host_cpu, " is only for CPU clusters (a cluster file with host.cores); ",
                       x.cl.name, " (", x.cl.file, ") is a GPU cluster");
  if (o.host_cores > 0) x.cl.host_cores = o.host_cores;
  if (o.host_cpu > 0) {
    BURST_CHECK_CONFIG(o.host_cores <= 0, "--host-cores and --host-cpu: give one (the cores the ranks had, or the CPU they used)");
    x.cl.host_cores = o.host_cpu, x.cl.host_cpu_used = true;
  }
  x.k = load_calibration(o.calibration.empty() ? dir + "/perf_calibration.toml" : o.calibration);
  if (!o.table.empty()) {
    x.m14 = shape_of("14B"), x.m7 = shape_of("7B");
    const std::string out = o.output.empty() ? "experiments/results/simulate_" + o.table + ".h5" : o.output;
    if (o.output.empty()) check_output("the --table output (default; give --output)", out);  // --output: checked above
    io::H5Output f_out(out);  // "<out>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& f = f_out.file();
    mark_command_output(f, "simulate");
    f.set_attr("/", "cluster", x.cl.name);
    f.set_attr("/", "cluster_file", x.cl.file);
    f.set_attr("/", "calibration_file", x.k.file);
    f.set_attr("/", "table", o.table);
    f.set_attr("/", "peak_tflops", x.cl.peak_flops / 1e12);
    f.set_attr("/", "memory_capacity_gib", x.cl.mem_capacity / kGiB);
    f.set_attr("/", "gemm_fraction", x.cl.gemm_fraction);
    f.set_attr("/", "attn_rate_inf_tflops", x.cl.attn_rate_inf / 1e12);
    f.set_attr("/", "attn_t0_tokens", x.cl.attn_t0);
    f.set_attr("/", "link_efficiency", x.cl.link_efficiency);
    f.set_attr("/", "elementwise_passes", x.k.elem_passes);
    f.set_attr("/", "allocator_slack", x.k.allocator_slack);
    table_one_gpu(f, x);
    table_attention(f, x);
    table_h200_layer(f, x, dir);
    if (o.table == "paper") {
      table_end_to_end(f, x, "end_to_end", published_rows());
      std::vector<PublishedRow> r64;
      for (auto r : published_rows()) r64.push_back({r.model, r.S * 2, 64, {}, {}});
      table_end_to_end(f, x, "gpus64", r64);
      table_ablation(f, x);
      table_scaling(f, x);
      table_memory_vs_seq(f, x);
      table_sparse(f, x);
    }
    f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("\nwrote %s\n", out.c_str());
    return 0;
  }
  StepConfig s;
  s.model = shape_of(o.model, o.given.count("--mask") > 0);
  s.S = parse_seq(o.seq);
  s.P = o.gpus;
  BURST_CHECK_CONFIG(s.P >= 1 && s.P <= kMaxGpus, "--gpus ", s.P, " is out of range: must be in [1, ", kMaxGpus, "]");
  s.attn.method = o.method, s.attn.ring = o.ring, s.attn.backward = o.backward, s.attn.usp_inner = o.usp_inner;
  s.attn.placement = o.placement, s.attn.hp = o.hp, s.attn.inner = o.inner;
  BURST_CHECK_CONFIG(o.partial == "fp32" || o.partial == "bf16", "--partial '", o.partial, "': expected fp32 or bf16");
  s.attn.partial_bf16 = o.partial == "bf16";
  BURST_CHECK_CONFIG(o.mask == "causal" || o.mask == "full" || o.mask == "window" || o.mask == "document", "--mask '", o.mask,
                     "': expected causal, full, window or document");
  BURST_CHECK_CONFIG((o.mask == "window") == (o.window > 0), "--mask window needs --window W > 0 (and --window needs --mask window)");
  BURST_CHECK_CONFIG(double(o.window) <= s.S, "--window ", o.window, " exceeds the sequence of ", std::int64_t(s.S),
                     " tokens (a window covering the whole sequence is the causal mask: use --mask causal)");
  s.attn.causal = o.mask != "full";
  s.attn.window = o.window;
  s.attn.document = o.mask == "document";
  s.attn.layout = o.layout;
  BURST_CHECK_CONFIG(o.attention_only || (o.layout.empty() && !s.attn.document),
                     "--layout and --mask document are modelled for --attention-only (one layer's distributed attention)");
  BURST_CHECK_CONFIG(o.doc_lengths.empty() || s.attn.document || o.layout == "document",
                     "--doc-lengths is used by --mask document or --layout document only (here --mask ", o.mask,
                     o.layout.empty() ? "" : ", --layout " + o.layout, ")");
  if (!o.doc_lengths.empty()) s.attn.doc_lengths = parallel::parse_doc_lengths(o.doc_lengths, long(s.S));
  s.policy = o.policy;
  s.fused_loss = on_off(o.fused_loss, "--fused-loss");
  s.zero = o.zero;
  s.offload = on_off(o.offload, "--offload");
  if (o.attention_only) {
    const AttnProblem p{s.P, s.S, s.model.heads, s.model.kv_heads, s.model.head_dim};
    s.attn.bench_timing = true;  // as `burst bench attention` times the passes: a barrier, then forward and backward
    const AttnCost a = attention_cost(x.cl, s.attn, p);
    const double area =
        s.attn.document ? document_area(s.attn.doc_lengths) : visible_area(s.S, s.attn.causal, double(s.attn.window));
    const double gflops = 3.5 * 4 * area * double(p.n * p.d) / p.P / (a.fwd.time + a.bwd.time) / 1e9;
    std::printf("%s, %s tokens on %d x %s, heads %ld (kv %ld) x %ld: %s\n  fwd %.5f s (compute %.5f), bwd %.5f s (compute %.5f), "
                "%.3f GFLOP/s per rank (paper convention, visible area)\n",
                s.model.name.c_str(), seq_label(s.S).c_str(), s.P, x.cl.name.c_str(), p.n, p.nkv, p.d, a.describe.c_str(), a.fwd.time,
                a.fwd.compute, a.bwd.time, a.bwd.compute, gflops);
    if (a.fwd.collectives + a.bwd.collectives > 0)
      std::printf("  %d blocking collectives, waiting %.5f s for their members on shared cores (in fwd, bwd)\n",
                  a.fwd.collectives + a.bwd.collectives, a.fwd.sync + a.bwd.sync);
    if (!o.output.empty()) {
      io::H5Output f_out(o.output);
      io::H5File& f = f_out.file();
      mark_command_output(f, "simulate");
      f.set_attr("/", "cluster", x.cl.name);
      f.set_attr("/", "cluster_file", x.cl.file);
      f.create_group("attention");
      f.set_attr("attention", "method", s.attn.method);
      f.set_attr("attention", "hp", s.attn.hp);
      f.set_attr("attention", "inner", s.attn.inner);
      write_attention_inputs(f, "attention", s.attn);
      f.set_attr("attention", "model", s.model.name);
      f.set_attr("attention", "heads", std::int64_t(p.n));
      f.set_attr("attention", "kv_heads", std::int64_t(p.nkv));
      f.set_attr("attention", "head_dim", std::int64_t(p.d));
      f.set_attr("attention", "describe", a.describe);
      f.set_attr("attention", "seq", s.S);
      f.set_attr("attention", "gpus", s.P);
      f.set_attr("attention", "fwd_s", a.fwd.time);
      f.set_attr("attention", "bwd_s", a.bwd.time);
      f.set_attr("attention", "fwd_compute_s", a.fwd.compute);
      f.set_attr("attention", "bwd_compute_s", a.bwd.compute);
      f.set_attr("attention", "bytes_per_rank", a.fwd.bytes_intra + a.fwd.bytes_inter + a.bwd.bytes_intra + a.bwd.bytes_inter +
                                                    a.fwd.a2a_bytes + a.bwd.a2a_bytes);
      f.set_attr("attention", "gflops_per_rank", gflops);
      f.set_attr("attention", "host_cores", x.cl.host_cores);
      f.set_attr("attention", "collectives", std::int64_t(a.fwd.collectives + a.bwd.collectives));
      f.set_attr("attention", "collective_sync_s", a.fwd.sync + a.bwd.sync);
      f_out.publish();
      std::printf("wrote %s\n", o.output.c_str());
    }
    return 0;
  }
  const StepResult r = simulate_step(x.cl, x.k, s);
  print_result(s, r, x.cl);
  if (!o.output.empty()) {
    io::H5Output f_out(o.output);
    io::H5File& f = f_out.file();
    mark_command_output(f, "simulate");
    f.set_attr("/", "cluster", x.cl.name);
    f.set_attr("/", "cluster_file", x.cl.file);
    f.set_attr("/", "calibration_file", x.k.file);
    write_prediction(f, "run", s, r);
    f.set_attr("run", "host_cores", x.cl.host_cores);
    f_out.publish();
    std::printf("wrote %s\n", o.output.c_str());
  }
  return 0;
}

}  // namespace burst::cli

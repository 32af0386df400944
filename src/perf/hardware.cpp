#include "perf/hardware.hpp"

#include "burst_source_dir.hpp"

#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text_file.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace burst::perf {

double Cluster::attn_rate(double t) const {
  if (attn_pts_t.empty()) return attn_rate_inf * t / (t + attn_t0);
  if (t <= attn_pts_t.front()) return attn_pts_rate.front();
  for (size_t i = 1; i < attn_pts_t.size(); ++i)
    if (t <= attn_pts_t[i]) {
      const double x0 = std::log(attn_pts_t[i - 1]), x1 = std::log(attn_pts_t[i]), x = std::log(t);
      return attn_pts_rate[i - 1] + (attn_pts_rate[i] - attn_pts_rate[i - 1]) * (x - x0) / (x1 - x0);
    }
  return attn_pts_rate.back();
}
double Cluster::attn_rate_fwd(double t) const {
  // Combined rate R over 1 + 2.5 units of work: 3.5 / R = 1 / R_f + 2.5 / R_b with R_f = k R_b.
  const double k = attn_fwd_over_bwd, rb = (1.0 / k + 2.5) / 3.5;
  return attn_rate(t) * rb * k;
}
double Cluster::attn_rate_bwd(double t) const {
  const double k = attn_fwd_over_bwd, rb = (1.0 / k + 2.5) / 3.5;
  return attn_rate(t) * rb;
}
double Cluster::concurrency_efficiency(int P) const { return P <= 1 || concurrency.vals.empty() ? 1.0 : concurrency.at(P); }
double PerRanks::at(int P) const {
  if (vals.empty()) return 0.0;
  BURST_ASSERT(ranks.empty() || ranks.size() == vals.size(), "PerRanks: ", vals.size(), " values for ", ranks.size(), " rank counts");
  if (ranks.empty() || P <= ranks.front()) return vals.front();
  const double x = std::log2(double(P));
  for (size_t i = 1; i < ranks.size(); ++i)
    if (double(P) <= ranks[i]) {
      const double x0 = std::log2(ranks[i - 1]), x1 = std::log2(ranks[i]);
      return vals[i - 1] + (vals[i] - vals[i - 1]) * (x - x0) / (x1 - x0);
    }
  return vals.back();
}
Cluster Cluster::shared_by(int P) const {
  Cluster c = *this;
  double f = 1.0;
  if (host_cores > 0 && double(P) > host_cores) f = host_cores / double(P);
  if (host_cores > 0) f *= concurrency_efficiency(P);
  if (c.allgather_local_holds_follows()) c.allgather_local = c.allgather_local_at.at(P);
  if (f != 1.0) {
    c.gemm_fraction *= f, c.attn_rate_inf *= f, c.hbm_bw *= f, c.host_mem_bw *= f;
    for (double& r : c.attn_pts_rate) r *= f;
    c.layer_overhead /= f, c.step_overhead /= f, c.step_overhead_per_token /= f;
    c.a2a_local /= f, c.allgather_local /= f;
    c.ring_round_cpu /= f, c.ring_round_cpu_per_byte /= f;
    for (TileCosts* t : {&c.tile_fwd, &c.tile_bwd})
      for (double* x :
           {&t->mask, &t->partial_causal, &t->partial_window, &t->partial_document, &t->skip, &t->call, &t->row, &t->causal_diag})
        *x /= f;
  }
  return c;
}
double Cluster::off_core_ratio(int P) const {
  if (host_cores <= 0 || P <= 1) return 0.0;
  const double share = std::min(1.0, host_cores / double(P));
  return 1.0 / share - 1.0;
}
Link Cluster::ib_all_gpus() const {
  return {ib_latency, std::min(ib_hca_bw, hcas_per_node * ib_hca_bw / gpus_per_node) * link_efficiency};
}

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

toml::table parse_file(const std::string& path) {
  const std::string text = read_text_file("file", path, ErrorKind::Config);
  // toml++ 3.x misbehaves on some non-ASCII input outside strings (see core/config.cpp); our files are ASCII.
  for (size_t i = 0; i < text.size(); ++i)
    BURST_CHECK_CONFIG(static_cast<unsigned char>(text[i]) < 0x80, path, ": non-ASCII byte at offset ", i);
  // A template's placeholder (@NAME@ outside a comment) reads to toml++ as
  // "could not determine value type": say what it is and what fills it.
  for (size_t line = 1, at = 0; at < text.size(); ++line) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string body = text.substr(at, std::min(text.find('#', at), end) - at);
    at = end + 1;
    const size_t a = body.find('@'), b = a == std::string::npos ? a : body.find('@', a + 1);
    if (b == std::string::npos || b == a + 1) continue;
    const std::string name = body.substr(a, b - a + 1);
    if (name.find_first_not_of("@ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos) continue;
    BURST_FAIL(ErrorKind::Config, path, ":", line, ": ", name, " is an unfilled placeholder: this file is a template",
               name == "@ELEMENTWISE_PASSES@"
                   ? " (experiments/runners/calibrate_cpu.py fills it with the measured value and writes "
                     "experiments/results/calibration/cpu_calibration.toml: pass that file)"
                   : "; pass the file made from it");
  }
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {  // where, as core/config.cpp says it
    BURST_FAIL(ErrorKind::Config, "cannot parse ", path, ":", e.source().begin.line, ":", e.source().begin.column, ": ",
               std::string(e.description()));
  }
}

// A required number at "table.key"; the file must name it.
double num(const toml::table& t, const std::string& key, const std::string& file, double lo, double hi) {
  auto node = t.at_path(key);
  BURST_CHECK_CONFIG(node, file, ": required number '", key, "' is missing");
  BURST_CHECK_CONFIG(node.is_floating_point() || node.is_integer(), file, ": '", key, "' must be a number, got a TOML ",
                     node.type());
  const double v = node.is_integer() ? double(node.as_integer()->get()) : node.as_floating_point()->get();
  BURST_CHECK_CONFIG(v >= lo && v <= hi, file, ": ", key, " = ", v, " is out of range [", lo, ", ", hi, "]");
  return v;
}

// An optional array of whole rank counts, increasing from above `above`
// (empty when the file does not name it).
std::vector<double> rank_counts(const toml::table& t, const std::string& key, const std::string& file, double above) {
  std::vector<double> ranks;
  auto node = t.at_path(key);
  if (!node) return ranks;
  const toml::array* a = node.as_array();
  BURST_CHECK_CONFIG(a != nullptr && !a->empty(), file, ": ", key, " must be a non-empty array of rank counts");
  for (const auto& e : *a) {
    BURST_CHECK_CONFIG(e.is_integer(), file, ": ", key, " must hold whole rank counts");
    const double r = double(e.as_integer()->get());
    BURST_CHECK_CONFIG(r > (ranks.empty() ? above : ranks.back()), file, ": ", key, " must increase from above ", above, " (got ", r,
                       ")");
    ranks.push_back(r);
  }
  return ranks;
}

// A number at `key` (every P) or an array of one per rank count of `ranks`
// (read from `ranks_key`), each in [lo, hi], times `unit`. The file must name it.
PerRanks per_ranks(const toml::table& t, const std::string& key, const std::string& file, const std::vector<double>& ranks,
                   const std::string& ranks_key, double lo, double hi, double unit) {
  auto node = t.at_path(key);
  if (!node.is_array()) return num(t, key, file, lo, hi) * unit;
  const toml::array* a = node.as_array();
  BURST_CHECK_CONFIG(!ranks.empty(), file, ": ", key, " is an array, one value per rank count, but ", ranks_key, " is missing");
  BURST_CHECK_CONFIG(a->size() == ranks.size(), file, ": ", key, " has ", a->size(), " values for the ", ranks.size(),
                     " rank counts of ", ranks_key);
  PerRanks w;
  w.ranks = ranks;
  for (const auto& e : *a) {
    BURST_CHECK_CONFIG(e.is_integer() || e.is_floating_point(), file, ": ", key, " must be an array of numbers");
    const double v = e.is_integer() ? double(e.as_integer()->get()) : e.as_floating_point()->get();
    BURST_CHECK_CONFIG(v >= lo && v <= hi, file, ": ", key, "[", w.vals.size(), "] = ", v, " is out of range [", lo, ", ", hi, "]");
    w.vals.push_back(v * unit);
  }
  return w;
}

// A required whole number (a count: GPUs, HCAs).
int whole(const toml::table& t, const std::string& key, const std::string& file, int lo, int hi) {
  const double v = num(t, key, file, lo, hi);
  BURST_CHECK_CONFIG(v == std::floor(v), file, ": ", key, " = ", v, " must be a whole number");
  return int(v);
}

// Every key a cluster file may hold: load_cluster reads these and no
// others, so any other key (a misspelt one) would be ignored without a word.
const std::vector<std::string>& cluster_keys() {
  static const std::vector<std::string> keys = {
      "name", "node.gpus", "node.ib_hcas", "gpu.peak_bf16_tflops", "gpu.gemm_fraction", "gpu.hbm_tb_per_s", "gpu.memory_gib",
      "attention.rate_inf_tflops", "attention.t0_tokens", "attention.fwd_over_bwd", "attention.rate_points_tokens",
      "attention.rate_points_tflops", "attention.merge_in_epilogue", "links.efficiency", "links.nvlink_gb_per_s", "links.nvlink_latency_us",
      "links.ib_hca_gbit_per_s", "links.ib_latency_us", "links.pcie_gb_per_s", "links.pcie_latency_us",
      "host.memory_gb_per_s", "host.cores", "host.binding", "host.wait_ranks", "host.collective_wait_ms",
      "host.nap_wait_ms", "host.collective_wait_fit_ms", "host.collective_wait_follow_ms", "host.wait_work_ms",
      "host.element_bytes", "host.layer_overhead_ms", "host.step_overhead_ms", "host.a2a_local_ns_per_byte",
      "host.allgather_local_ranks", "host.allgather_local_ns_per_byte", "host.ring_round_cpu_us",
      "host.ring_round_cpu_ns_per_byte", "host.step_overhead_us_per_token", "host.tile_mask_us",
      "host.tile_partial_causal_us", "host.tile_partial_window_us", "host.tile_partial_document_us", "host.tile_skip_us",
      "host.call_us", "host.call_row_ns", "host.tile_causal_diag_us", "host.concurrency_ranks",
      "host.concurrency_efficiency"};
  return keys;
}

// Every key a calibration file may hold (load_calibration reads these).
const std::vector<std::string>& calibration_keys() {
  static const std::vector<std::string> keys = {
      "elementwise.passes", "elementwise.forward_share", "lm_head.fused_gemms", "lm_head.fused_bytes_per_logit",
      "lm_head.unfused_bytes_per_logit", "lm_head.unfused_memory_bytes_per_logit", "lm_head.inplace_ce_bytes_per_logit",
      "lm_head.inplace_ce_memory_bytes_per_logit", "lm_head.chunk_tokens", "optimizer.gpu_bytes_per_param",
      "optimizer.cpu_bytes_per_param", "optimizer.offload_pcie_bytes_per_param", "zero.prefetch_layers", "memory.allocator_slack"};
  return keys;
}

// Refuses a key (or a table) of the file that none of `keys` names.
void check_keys(const toml::table& t, const std::string& prefix, const std::string& file, const std::vector<std::string>& keys) {
  for (auto&& [k, node] : t) {
    const std::string name = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    const std::string where = file + ":" + std::to_string(node.source().begin.line);
    if (node.is_table()) {
      const bool known = std::any_of(keys.begin(), keys.end(), [&](const std::string& x) { return x.rfind(name + ".", 0) == 0; });
      if (!known) {  // the sections, for the suggestion
        std::vector<std::string> sections;
        for (const auto& x : keys)
          if (x.find('.') != std::string::npos) sections.push_back(x.substr(0, x.find('.')));
        BURST_FAIL(ErrorKind::Config, "unknown section [", name, "] at ", where, did_you_mean(name, sections));
      }
      check_keys(*node.as_table(), name, file, keys);
      continue;
    }
    BURST_CHECK_CONFIG(std::find(keys.begin(), keys.end(), name) != keys.end(), "unknown key '", name, "' at ", where,
                       did_you_mean(name, keys));
  }
}

}  // namespace

std::string default_data_dir() {
#ifdef BURST_SOURCE_DIR
  return std::string(BURST_SOURCE_DIR) + "/experiments";
#else
  return "experiments";
#endif
}

Cluster load_cluster(const std::string& name_or_path, const std::string& dir) {
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.size() > 5 &&
                                                                          name_or_path.substr(name_or_path.size() - 5) == ".toml";
  const std::string file = is_path ? name_or_path : dir + "/clusters/" + name_or_path + ".toml";
  if (!file_exists(file)) {
    std::string known;
    for (const char* k : {"a800", "h200"})
      if (file_exists(dir + "/clusters/" + k + ".toml")) known += (known.empty() ? "" : ", ") + std::string(k);
    BURST_FAIL(ErrorKind::Config, "unknown cluster '", name_or_path, "': no file ", file, " (known: ", known, ")");
  }
  const toml::table t = parse_file(file);
  check_keys(t, "", file, cluster_keys());
  Cluster c;
  c.file = file;
  BURST_CHECK_CONFIG(!t["name"] || t["name"].is_string(), file, ": 'name' must be a string, got a TOML ", t["name"].type());
  c.name = t["name"].value_or(name_or_path);
  c.gpus_per_node = whole(t, "node.gpus", file, 1, 64);
  c.hcas_per_node = whole(t, "node.ib_hcas", file, 0, 64);
  c.peak_flops = num(t, "gpu.peak_bf16_tflops", file, 1e-6, 1e5) * 1e12;
  c.gemm_fraction = num(t, "gpu.gemm_fraction", file, 0.01, 1);
  c.hbm_bw = num(t, "gpu.hbm_tb_per_s", file, 1e-6, 1e3) * 1e12;
  c.mem_capacity = num(t, "gpu.memory_gib", file, 1, 1e5) * 1073741824.0;
  c.attn_rate_inf = num(t, "attention.rate_inf_tflops", file, 1e-9, 1e5) * 1e12;
  c.attn_t0 = num(t, "attention.t0_tokens", file, 0, 1e9);
  c.attn_fwd_over_bwd = num(t, "attention.fwd_over_bwd", file, 0.1, 10);
  if (auto m = t.at_path("attention.merge_in_epilogue")) {
    BURST_CHECK_CONFIG(m.is_boolean(), file, ": attention.merge_in_epilogue must be true or false");
    c.attn_merge_in_epilogue = m.as_boolean()->get();
  }
  c.link_efficiency = num(t, "links.efficiency", file, 0.01, 1);
  c.nvlink_bw = num(t, "links.nvlink_gb_per_s", file, 0.1, 1e5) * 1e9;
  c.nvlink_latency = num(t, "links.nvlink_latency_us", file, 0, 1e6) * 1e-6;
  c.ib_hca_bw = num(t, "links.ib_hca_gbit_per_s", file, 0.1, 1e5) * 1e9 / 8;
  c.ib_latency = num(t, "links.ib_latency_us", file, 0, 1e6) * 1e-6;
  c.pcie_bw = num(t, "links.pcie_gb_per_s", file, 0.1, 1e5) * 1e9;
  c.pcie_latency = num(t, "links.pcie_latency_us", file, 0, 1e6) * 1e-6;
  c.host_mem_bw = num(t, "host.memory_gb_per_s", file, 0.1, 1e5) * 1e9;
  if (t.at_path("host.cores")) c.host_cores = c.machine_cores = num(t, "host.cores", file, 0.01, 1e6);
  if (t.at_path("host.binding")) {
    const auto b = t.at_path("host.binding").value<std::string>();
    BURST_CHECK_CONFIG(b && (*b == "core" || *b == "none"), file, ": host.binding must be \"core\" (rank r on core r mod ",
                       "host.cores) or \"none\"");
    c.ranks_bound = *b == "core";
  }
  {
    // The collective waits: each a number (every P) or an array, one value
    // per rank count of host.wait_ranks.
    const std::vector<double> wait_ranks = rank_counts(t, "host.wait_ranks", file, 1);
    auto wait = [&](const char* key, const PerRanks& fallback) {
      return t.at_path(key) ? per_ranks(t, key, file, wait_ranks, "host.wait_ranks", 0, 1e4, 1e-3) : fallback;
    };
    c.coll_wait_spin = wait("host.collective_wait_ms", PerRanks{});
    c.coll_wait_nap = wait("host.nap_wait_ms", PerRanks{});
    c.coll_wait_spin_fit = wait("host.collective_wait_fit_ms", c.coll_wait_spin);
    c.coll_wait_follow = wait("host.collective_wait_follow_ms", c.coll_wait_spin);
    c.wait_work = wait("host.wait_work_ms", PerRanks{});
  }
  if (t.at_path("host.element_bytes")) c.elem_bytes = num(t, "host.element_bytes", file, 1, 16);
  if (t.at_path("host.layer_overhead_ms")) c.layer_overhead = num(t, "host.layer_overhead_ms", file, 0, 1e6) * 1e-3;
  if (t.at_path("host.step_overhead_ms")) c.step_overhead = num(t, "host.step_overhead_ms", file, 0, 1e6) * 1e-3;
  if (t.at_path("host.a2a_local_ns_per_byte")) c.a2a_local = num(t, "host.a2a_local_ns_per_byte", file, 0, 1e6) * 1e-9;
  if (t.at_path("host.allgather_local_ns_per_byte")) {
    // one value per rank count of host.allgather_local_ranks (Cluster::allgather_local_at), or one number
    const std::vector<double> ranks = rank_counts(t, "host.allgather_local_ranks", file, 0);
    const PerRanks v = per_ranks(t, "host.allgather_local_ns_per_byte", file, ranks, "host.allgather_local_ranks", 0, 1e6, 1e-9);
    BURST_CHECK_CONFIG(!v.ranks.empty() || ranks.empty(), file,
                       ": host.allgather_local_ranks is given but host.allgather_local_ns_per_byte is one number (give one "
                       "value per rank count, or drop the ranks)");
    if (!v.ranks.empty()) c.allgather_local_at = v;
    c.allgather_local = v.vals.front();
  }
  if (t.at_path("host.ring_round_cpu_us")) c.ring_round_cpu = num(t, "host.ring_round_cpu_us", file, 0, 1e6) * 1e-6;
  if (t.at_path("host.ring_round_cpu_ns_per_byte"))
    c.ring_round_cpu_per_byte = num(t, "host.ring_round_cpu_ns_per_byte", file, 0, 1e6) * 1e-9;
  if (t.at_path("host.step_overhead_us_per_token"))
    c.step_overhead_per_token = num(t, "host.step_overhead_us_per_token", file, 0, 1e6) * 1e-6;
  {
    auto list = [&](const char* key) {
      std::vector<double> v;
      auto node = t.at_path(key);
      if (!node) return v;
      const toml::array* a = node.as_array();
      BURST_CHECK_CONFIG(a != nullptr, file, ": ", key, " must be an array of numbers");
      for (const auto& e : *a) {
        BURST_CHECK_CONFIG(e.is_integer() || e.is_floating_point(), file, ": ", key, " must be an array of numbers");
        v.push_back(e.is_integer() ? double(e.as_integer()->get()) : e.as_floating_point()->get());
      }
      return v;
    };
    c.attn_pts_t = list("attention.rate_points_tokens");
    c.attn_pts_rate = list("attention.rate_points_tflops");
    BURST_CHECK_CONFIG(c.attn_pts_t.size() == c.attn_pts_rate.size(), file,
                       ": attention.rate_points_tokens and attention.rate_points_tflops differ in length (",
                       c.attn_pts_t.size(), " vs ", c.attn_pts_rate.size(), ")");
    for (size_t i = 0; i < c.attn_pts_t.size(); ++i) {
      BURST_CHECK_CONFIG(c.attn_pts_t[i] > (i ? c.attn_pts_t[i - 1] : 0.0), file,
                         ": attention.rate_points_tokens must increase from above 0");
      BURST_CHECK_CONFIG(c.attn_pts_rate[i] > 0 && c.attn_pts_rate[i] < 1e5, file, ": attention.rate_points_tflops[", i,
                         "] = ", c.attn_pts_rate[i], " is out of range (0, 1e5)");
      c.attn_pts_rate[i] *= 1e12;
    }
    // [forward, backward] pairs of the tile costs (host.tile_*), in the unit their names say.
    auto pair = [&](const char* key, double unit, double Cluster::TileCosts::*field) {
      if (!t.at_path(key)) return;
      const std::vector<double> v = list(key);
      BURST_CHECK_CONFIG(v.size() == 2, file, ": ", key, " must be [forward, backward] (got ", v.size(), " numbers)");
      for (double x : v) BURST_CHECK_CONFIG(x >= 0 && x < 1e6, file, ": ", key, " = ", x, " is out of range [0, 1e6)");
      c.tile_fwd.*field = v[0] * unit, c.tile_bwd.*field = v[1] * unit;
    };
    pair("host.tile_mask_us", 1e-6, &Cluster::TileCosts::mask);
    pair("host.tile_partial_causal_us", 1e-6, &Cluster::TileCosts::partial_causal);
    pair("host.tile_partial_window_us", 1e-6, &Cluster::TileCosts::partial_window);
    pair("host.tile_partial_document_us", 1e-6, &Cluster::TileCosts::partial_document);
    pair("host.tile_skip_us", 1e-6, &Cluster::TileCosts::skip);
    pair("host.call_us", 1e-6, &Cluster::TileCosts::call);
    pair("host.call_row_ns", 1e-9, &Cluster::TileCosts::row);
    pair("host.tile_causal_diag_us", 1e-6, &Cluster::TileCosts::causal_diag);
    const std::vector<double> conc_ranks = list("host.concurrency_ranks"), conc_eff = list("host.concurrency_efficiency");
    BURST_CHECK_CONFIG(conc_ranks.size() == conc_eff.size(), file,
                       ": host.concurrency_ranks and host.concurrency_efficiency differ in length (", conc_ranks.size(), " vs ",
                       conc_eff.size(), ")");
    for (size_t i = 0; i < conc_ranks.size(); ++i) {
      BURST_CHECK_CONFIG(conc_ranks[i] > (i ? conc_ranks[i - 1] : 1.0), file, ": host.concurrency_ranks must increase from above 1");
      BURST_CHECK_CONFIG(conc_eff[i] > 0 && conc_eff[i] <= 2, file, ": host.concurrency_efficiency[", i, "] = ", conc_eff[i],
                         " is out of range (0, 2]");
    }
    if (!conc_ranks.empty()) {  // through (1, 1): one rank alone
      c.concurrency.ranks = {1.0}, c.concurrency.vals = {1.0};
      c.concurrency.ranks.insert(c.concurrency.ranks.end(), conc_ranks.begin(), conc_ranks.end());
      c.concurrency.vals.insert(c.concurrency.vals.end(), conc_eff.begin(), conc_eff.end());
    }
  }
  return c;
}

Calibration load_calibration(const std::string& file) {
  BURST_CHECK_CONFIG(file_exists(file), "calibration file ", file, " does not exist");
  const toml::table t = parse_file(file);
  check_keys(t, "", file, calibration_keys());  // as a cluster file's: a misspelt key is not ignored
  Calibration k;
  k.file = file;
  k.elem_passes = num(t, "elementwise.passes", file, 0, 1e4);
  k.elem_fwd_share = num(t, "elementwise.forward_share", file, 0, 1);
  k.lm_fused_gemms = num(t, "lm_head.fused_gemms", file, 3, 4);
  k.lm_fused_bytes_per_logit = num(t, "lm_head.fused_bytes_per_logit", file, 0, 1e3);
  k.lm_unfused_bytes_per_logit = num(t, "lm_head.unfused_bytes_per_logit", file, 0, 1e3);
  k.lm_unfused_mem_per_logit = num(t, "lm_head.unfused_memory_bytes_per_logit", file, 0, 1e3);
  k.lm_inplace_bytes_per_logit = num(t, "lm_head.inplace_ce_bytes_per_logit", file, 0, 1e3);
  k.lm_inplace_mem_per_logit = num(t, "lm_head.inplace_ce_memory_bytes_per_logit", file, 0, 1e3);
  k.lm_chunk_tokens = num(t, "lm_head.chunk_tokens", file, 1, 1e9);
  k.opt_gpu_bytes_per_param = num(t, "optimizer.gpu_bytes_per_param", file, 0, 1e3);
  k.opt_cpu_bytes_per_param = num(t, "optimizer.cpu_bytes_per_param", file, 0, 1e3);
  k.opt_offload_pcie_bytes_per_param = num(t, "optimizer.offload_pcie_bytes_per_param", file, 0, 1e3);
  k.zero_prefetch_layers = num(t, "zero.prefetch_layers", file, 1, 100);
  k.allocator_slack = num(t, "memory.allocator_slack", file, 1, 3);
  return k;
}

}  // namespace burst::perf

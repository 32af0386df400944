// burst import-hf / export-hf: Hugging Face checkpoints (config.json and
// .safetensors, one file or shards with model.safetensors.index.json) to and
// from our HDF5 weights (train/weights.hpp). Tensor names and shapes are
// the same on both sides, so the conversion is a copy with a dtype change.
#include "cli/commands.hpp"
#include "core/durable.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/safetensors.hpp"
#include "train/weights.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

namespace fs = std::filesystem;

namespace burst::cli {

namespace {
void require_one_rank(const Runtime& rt, const char* cmd) {
  BURST_CHECK_CONFIG(rt.size() == 1, "burst ", cmd, " runs on one process, not ", rt.size(), " ranks");
}

// A tensor of the checkpoint the model does not use: a rotary buffer that
// old transformers versions saved (recomputed from config.json here), or
// lm_head.weight beside tied embeddings (some exporters write the copy).
bool ignorable(const std::string& name, const ModelConfig& mc) {
  const std::string inv = "rotary_emb.inv_freq";
  if (name.size() >= inv.size() && name.compare(name.size() - inv.size(), inv.size(), inv) == 0) return true;
  return mc.tie_embeddings && name == "lm_head.weight";
}

// The first value of x that is not finite, or (when `max` > 0) whose magnitude
// is beyond `max`: its index, or -1 when there is none.
long first_unrepresentable(const std::vector<double>& x, double max) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]) || (max > 0 && std::fabs(x[i]) > max)) return long(i);
  return -1;
}

// The first value of x that is not finite or would be stored as inf in `dt`
// (F16 beyond 65504 after rounding, BF16 and F32 beyond theirs): its index, or -1.
long first_unwritable(const std::vector<double>& x, io::StDtype dt) {
  const double safe = dt == io::StDtype::F16 ? 65504.0 : dt == io::StDtype::BF16 ? 3.38e38
                      : dt == io::StDtype::F32 ? double(std::numeric_limits<float>::max()) : HUGE_VAL;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i]) && std::fabs(x[i]) <= safe) continue;
    if (!std::isfinite(x[i])) return long(i);
    const std::vector<std::uint8_t> e = io::st_encode(dt, &x[i], 1);
    double back;
    io::st_convert(dt, e.data(), 1, &back);
    if (!std::isfinite(back)) return long(i);
  }
  return -1;
}

// "index 37 ([1, 5])": a flat index and its place in `shape`.
std::string place(long i, const std::vector<long>& shape) {
  std::vector<long> at(shape.size());
  long r = i;
  for (std::size_t k = shape.size(); k-- > 0;) at[k] = shape[k] > 0 ? r % shape[k] : 0, r = shape[k] > 0 ? r / shape[k] : 0;
  std::string s = "index " + std::to_string(i) + " ([";
  for (std::size_t k = 0; k < at.size(); ++k) s += (k ? ", " : "") + std::to_string(at[k]);
  return s + "])";
}
}  // namespace

int cmd_import_hf(Runtime& rt, const ImportHfOptions& opt) {
  require_one_rank(rt, "import-hf");
  BURST_CHECK_CONFIG(opt.dtype == "auto" || opt.dtype == "float32" || opt.dtype == "float64", "--dtype '", opt.dtype,
                     "' must be auto, float32 or float64");
  const fs::path out_dir = fs::path(opt.output).parent_path();
  BURST_CHECK_INPUT(out_dir.empty() || fs::is_directory(out_dir), "--output '", opt.output, "': the directory '",
                    out_dir.string(), "' does not exist");
  check_output("--output", opt.output, /*weights_ok=*/true);
  BURST_CHECK_INPUT(fs::is_directory(opt.model_dir), "model directory '", opt.model_dir, "' does not exist",
                    fs::exists(opt.model_dir) ? " (it is a file; give the directory holding config.json)" : "");
  const std::string cfg_path = (fs::path(opt.model_dir) / "config.json").string();
  BURST_CHECK_INPUT(fs::is_regular_file(cfg_path), "model directory '", opt.model_dir, "' has no config.json");
  const ModelConfig mc = model_from_hf_file(cfg_path);
  const io::SafetensorsModel st(opt.model_dir);
  const std::vector<ParamInfo> table = llama_param_table(mc);
  std::set<std::string> wanted;
  bool any_f64 = false;
  for (const ParamInfo& p : table) {
    BURST_CHECK_INPUT(st.has(p.name), "the checkpoint in '", opt.model_dir, "' has no tensor '", p.name,
                      "', a parameter of the model in ", cfg_path, " (", mc.describe(), ")");
    const io::StTensor& t = st.tensor(p.name);
    const std::vector<std::uint64_t> want(p.shape.begin(), p.shape.end());
    BURST_CHECK_INPUT(t.shape == want, "tensor '", p.name, "' in '", st.file_of(p.name).path(), "' has shape ",
                      io::dims_string(t.shape), ", but ", cfg_path, " needs ", io::dims_string(want));
    any_f64 = any_f64 || t.dtype == io::StDtype::F64;
    wanted.insert(p.name);
  }
  long ignored = 0;
  for (const std::string& name : st.names()) {
    if (wanted.count(name)) continue;
    BURST_CHECK_INPUT(ignorable(name, mc), "tensor '", name, "' in '", st.file_of(name).path(),
                      "' is not a parameter of the model in ", cfg_path, " (", mc.describe(), ")");
    ++ignored;
  }
  const std::string dtype = opt.dtype != "auto" ? opt.dtype : any_f64 ? "float64" : "float32";
  // A NaN or infinite weight (a damaged or diverged checkpoint), or an F64 value
  // beyond float32 stored as float32 (it would become inf), is refused: it made
  // every logit NaN without a word.
  const double max = dtype == "float32" ? double(std::numeric_limits<float>::max()) : 0.0;
  save_weights(opt.output, mc, dtype, [&](const ParamInfo& p) {
    std::vector<double> x = st.read<double>(p.name);
    const long bad = first_unrepresentable(x, max);
    BURST_CHECK_INPUT(bad < 0, "tensor '", p.name, "' in '", st.file_of(p.name).path(), "' holds ", bad < 0 ? 0.0 : x[std::size_t(bad)],
                      " at ", place(bad, p.shape),
                      bad >= 0 && std::isfinite(x[std::size_t(bad)]) ? ", beyond the float32 range (import with --dtype float64)"
                                                                      : ": the weights must be finite (a damaged or diverged checkpoint?)");
    return x;
  }, "burst import-hf --model-dir " + opt.model_dir);
  std::printf("imported %zu tensors (%s) from %s (%zu file(s)%s) into %s as %s\n", table.size(),
              mc.describe().c_str(), opt.model_dir.c_str(), st.files().size(),
              ignored ? (", " + std::to_string(ignored) + " unused tensor(s) skipped").c_str() : "", opt.output.c_str(),
              dtype.c_str());
  return 0;
}

int cmd_export_hf(Runtime& rt, const ExportHfOptions& opt) {
  require_one_rank(rt, "export-hf");
  io::StDtype dt;
  const std::string upper = opt.dtype == "bf16" ? "BF16" : opt.dtype == "f16" ? "F16" : opt.dtype == "f32" ? "F32" : opt.dtype == "f64" ? "F64" : "";
  BURST_CHECK_CONFIG(io::st_dtype_from_name(upper, &dt), "--dtype '", opt.dtype, "' must be bf16, f16, f32 or f64");
  BURST_CHECK_CONFIG(opt.max_shard_mb >= 0, "--max-shard-mb ", opt.max_shard_mb, " must be >= 0 (0: one file)");
  BURST_CHECK_CONFIG(opt.max_shard_mb == 0 || opt.max_shard_mb * 1024 * 1024 >= 1, "--max-shard-mb ", opt.max_shard_mb,
                     " is less than a byte (0: one file)");
  const WeightsReader w(opt.weights);
  const ModelConfig& mc = w.config();
  const std::vector<ParamInfo> table = llama_param_table(mc);
  std::error_code ec;
  {  // the directory itself is made, not a missing parent (a mistyped path once made a tree from the root)
    fs::path dir = fs::path(opt.output).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // "out/": the directory out, in "." (its parent was taken to be out)
    const fs::path parent = dir.parent_path();
    BURST_CHECK_INPUT(parent.empty() || fs::is_directory(parent, ec), "--output '", opt.output, "': the directory '",
                      parent.string(), "' does not exist");
  }
  fs::create_directory(opt.output, ec);
  BURST_CHECK_INPUT(fs::is_directory(opt.output), "cannot create the output directory '", opt.output, "'",
                    ec ? ": " + ec.message() : std::string());
  // Shards in table order, each up to max_shard_mb (a larger tensor alone).
  const std::uint64_t limit = std::uint64_t(opt.max_shard_mb * 1024 * 1024);
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::uint64_t bytes = std::uint64_t(table[i].size) * io::st_dtype_size(dt);
    if (limit > 0 && in_shard > 0 && in_shard + bytes > limit) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(i);
    in_shard += bytes, total += bytes;
  }
  // Everything is written into a staging directory beside the outputs first;
  // only when every file is complete are an earlier export's model files
  // (which would mix with this one) removed and the new ones moved in, each
  // synced to the disk first and the directory after. A failure on the way
  // (a damaged checkpoint, a full disk, a directory named like a new file)
  // leaves the directory as it was, and the staging directory goes on every
  // way out but one: a move failing part way (the disk gone read-only) keeps
  // the files not moved there and names them (TempPath::publish).
  const fs::path out_dir(opt.output);
  TempPath stage = TempPath::staging_dir(opt.output, ".burst-export.tmp");
  const fs::path staged(stage.path());
  const std::size_t ns = shards.size();
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t s = 0; s < ns; ++s) {
    char name[64];
    if (ns == 1) std::snprintf(name, sizeof name, "model.safetensors");
    else std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, ns);
    std::vector<io::StTensorSpec> specs;
    for (std::size_t i : shards[s]) {
      specs.push_back({table[i].name, dt, std::vector<std::uint64_t>(table[i].shape.begin(), table[i].shape.end())});
      weight_map[table[i].name] = name;
    }
    io::write_safetensors((staged / name).string(), specs, {{"format", "pt"}}, [&](std::size_t k) {
      const ParamInfo& p = table[shards[s][k]];
      const std::vector<double> x = w.read(p);
      // A value the dtype cannot hold (beyond 65504 in F16, 3.39e38 in BF16) would be
      // written as inf, and a NaN or inf weight is no model: both refused, the
      // output directory unchanged (the staging directory goes).
      const long bad = first_unwritable(x, dt);
      if (bad >= 0) {
        const double v = x[std::size_t(bad)];
        BURST_FAIL(ErrorKind::Input, "weights file '", opt.weights, "': ", p.name, " holds ", v, " at ", place(bad, p.shape),
                   std::isfinite(v) ? str_cat(", beyond the range of ", upper, " (it would be written as inf): export with ",
                                              dt == io::StDtype::F16 ? "--dtype bf16 or f32" : "--dtype f64")
                                    : std::string(": the weights must be finite (a diverged run?)"));
      }
      return io::st_encode(dt, x.data(), x.size());
    });
  }
  if (ns > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    std::ofstream out((staged / "model.safetensors.index.json").string());
    out << index.dump(2) << "\n";
    out.close();  // the buffered text written now: a full disk shows here, not as an empty file
    BURST_CHECK_IO(!out.fail(), "cannot write the index in '", stage.path(), "'");
  }
  nlohmann::json cfg = nlohmann::json::parse(model_to_hf_json(mc));
  cfg["torch_dtype"] = dt == io::StDtype::BF16 ? "bfloat16" : dt == io::StDtype::F16 ? "float16" : dt == io::StDtype::F32 ? "float32" : "float64";
  {
    std::ofstream out((staged / "config.json").string());
    out << cfg.dump(2) << "\n";
    out.close();
    BURST_CHECK_IO(!out.fail(), "cannot write config.json in '", stage.path(), "'");
  }
  stage.check_publishable();  // an obstacle (a directory named like a new file) found before anything is removed
  long replaced = 0;
  ec.clear();
  for (fs::directory_iterator it(out_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n == "model.safetensors" || n == "model.safetensors.index.json" ||
        (n.rfind("model-", 0) == 0 && it->path().extension() == ".safetensors")) {
      std::error_code rm;
      fs::remove(it->path(), rm);
      BURST_CHECK_IO(!rm, "cannot remove the earlier export's '", it->path().string(), "': ", rm.message());
      ++replaced;
    }
  }
  stage.publish();  // the staged files into out_dir by name, the directory synced (the removals with them)
  if (replaced > 0)
    std::printf("replaced %ld model file(s) of an earlier export in %s (config.json rewritten)\n", replaced, opt.output.c_str());
  std::printf("exported %zu tensors (%s) from %s%s to %s: %zu file(s), %s, %llu bytes\n", table.size(), mc.describe().c_str(),
              opt.weights.c_str(), w.checksummed() ? " (checksums verified)" : " (a plain file: no checksums)",
              opt.output.c_str(), ns, upper.c_str(), static_cast<unsigned long long>(total));
  return 0;
}

}  // namespace burst::cli

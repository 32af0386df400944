// Model weights on their own, without a trainer: the params/ part of our
// HDF5 checkpoint (format 2: params/<Hugging Face name>, an fnv1a64
// checksum per dataset, the model_config attribute). `burst import-hf`
// writes such a file with no optimizer state (content = "weights");
// `burst forward` and `burst export-hf` read weights from it or from a
// whole training checkpoint.
//
// A plain HDF5 file (no format_version) is also read when it carries the
// model as a `config_json` attribute and params/<name> datasets, as h5py
// writes them (the golden fixture's layout); it has no checksums to check.
#pragma once

#include "model/config.hpp"
#include "model/params.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace burst {
namespace io {
class H5File;
}

// The checkpoint format this build writes and reads (the trainer's too).
constexpr std::int64_t kCheckpointFormatVersion = 2;

// An open weights file: its model, then its tensors one at a time.
class WeightsReader {
 public:
  // Error(Input) when the file is missing, not HDF5, of another format, or
  // without a model; Error(Config) when its model config is invalid.
  explicit WeightsReader(const std::string& path);
  ~WeightsReader();
  const ModelConfig& config() const { return config_; }
  bool checksummed() const { return checksummed_; }
  // "float32" or "float64": how the params are stored.
  const std::string& stored_dtype() const { return stored_dtype_; }
  // params/<p.name>, its shape checked against p; the checksum verified
  // (Error(IO) naming the dataset when it fails).
  std::vector<double> read(const ParamInfo& p) const;
  // Error(Input) unless the file holds the model `mc` (same config.json).
  void require_model(const ModelConfig& mc) const;
  // Error(Input) unless the file holds the weights of `mc`: the same config
  // but for how attention uses them (NoPE layers, sliding-window layers,
  // the log-length scale), which fine-tuning may change.
  void require_weights_of(const ModelConfig& mc) const;

 private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
  ModelConfig config_;
  bool checksummed_ = false;
  std::string stored_dtype_;
};

// Fills `params` (the table of the model `mc`) from the weights in `path`,
// refusing another model (WeightsReader::require_weights_of) or a damaged file. Every rank may call it.
template <class T, class Mem> void load_weights(const std::string& path, const ModelConfig& mc, FlatTensors<T, Mem>& params);
// The same weights as one flat host vector in the order of `table` (n
// elements), converted to A (the trainer's master weights).
template <class A>
std::vector<A> load_weights_flat(const std::string& path, const ModelConfig& mc, const std::vector<ParamInfo>& table, long n);

// Writes a params-only weights file (format 2, checksums, content =
// "weights") through "<path>.tmp", synced and renamed (core/durable.hpp). values(p) gives each
// tensor's values in table order; dtype "float32" or "float64".
void save_weights(const std::string& path, const ModelConfig& mc, const std::string& dtype,
                  const std::function<std::vector<double>(const ParamInfo&)>& values, const std::string& source);

// The root attribute that names the command whose result a file is
// (simulate, attn-check, forward; the benches' files carry `benchmark`):
// such a file may be replaced by the next run of a command.
inline constexpr const char* kCommandOutputAttr = "burst_output";
void mark_command_output(io::H5File& f, const std::string& command);
// `f` is a result a command of this engine wrote: kCommandOutputAttr, or the
// root attributes the results had before it (a bench's `benchmark`,
// simulate's `cluster_file`, attn-check's `max_rel_error_o`, forward's
// `model_config` with `tokens`).
bool is_command_output(const io::H5File& f);

// What is wrong with writing `path` as a command's output `what` ("" when
// nothing). A file already there is replaced only when it is an earlier
// result of a command (is_command_output), or a weights file when
// `weights_ok` (import-hf replacing an earlier import). Everything else is
// refused: this engine's checkpoints (root attribute format_version), run
// logs, any other HDF5 file (a token corpus, someone's data) and any file
// that is not HDF5 (a config, a safetensors file, the command's own input).
// A bench, simulate or forward pointed at such a file by mistake replaced it
// with its results.
std::string overwrite_problem(const std::string& what, const std::string& path, bool weights_ok = false);

// Both checks of a command's output file: core/output_path.hpp's (a
// writable directory, not a directory) first, then overwrite_problem.
std::string output_problem(const std::string& what, const std::string& path, bool weights_ok = false);
// output_problem raised as Error(Config) (bad input, status 2) on a one-process command.
void check_output(const std::string& what, const std::string& path, bool weights_ok = false);

}  // namespace burst

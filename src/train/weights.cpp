#include "train/weights.hpp"

#include "core/durable.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"
#include "core/text_file.hpp"
#include "io/h5.hpp"
#include "io/run_log.hpp"
#include "train/checkpoint_files.hpp"

#include <filesystem>

namespace burst {

struct WeightsReader::Impl {
  io::H5File f;
};

WeightsReader::WeightsReader(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  const std::string problem = input_file_problem("weights file", path);
  BURST_CHECK_INPUT(problem.empty(), problem);
  try {
    impl_->f = io::H5File::open(path);
  } catch (const Error& e) {
    BURST_FAIL(ErrorKind::Input, "weights file '", path, "' cannot be read: ", e.message());
  }
  io::H5File& f = impl_->f;
  std::string json;
  if (f.has_attr("/", "format_version")) {
    const std::int64_t v = f.attr_int("/", "format_version");
    BURST_CHECK_INPUT(v == kCheckpointFormatVersion, "weights file '", path, "' has format_version ", v, "; this build reads ",
                      kCheckpointFormatVersion);
    BURST_CHECK_INPUT(f.has_attr("/", "model_config"), "weights file '", path, "' has no model_config attribute");
    json = f.attr_string("/", "model_config");
    checksummed_ = true;
  } else {
    BURST_CHECK_INPUT(f.has_attr("/", "config_json"), "'", path,
                      "' is not a weights file: no format_version (a burst checkpoint) and no config_json attribute "
                      "(a plain params/ file)");
    json = f.attr_string("/", "config_json");
  }
  config_ = model_from_hf_json(json, "the model config of '" + path + "'");
  const std::string first = "params/" + llama_param_table(config_).front().name;
  BURST_CHECK_INPUT(f.exists(first), "weights file '", path, "' has no dataset '", first, "'");
  stored_dtype_ = f.dtype(first);
}

WeightsReader::~WeightsReader() = default;

void WeightsReader::require_model(const ModelConfig& mc) const {
  BURST_CHECK_INPUT(model_to_hf_json(config_) == model_to_hf_json(mc), "weights file '", path_, "' holds another model: ",
                    config_.describe(), "; expected ", mc.describe());
}

void WeightsReader::require_weights_of(const ModelConfig& mc) const {
  auto weights_only = [](ModelConfig c) {
    c.nope_layers.clear(), c.window_layers.clear(), c.sliding_window = 0, c.attn_log_scale = 0;
    return model_to_hf_json(c);
  };
  BURST_CHECK_INPUT(weights_only(config_) == weights_only(mc), "weights file '", path_, "' holds another model: ",
                    config_.describe(), "; expected ", mc.describe());
}

std::vector<double> WeightsReader::read(const ParamInfo& p) const {
  const io::H5File& f = impl_->f;
  const std::string name = "params/" + p.name;
  BURST_CHECK_IO(f.exists(name), "weights file '", path_, "' has no dataset '", name, "': the file is damaged");
  const io::Dims d = f.dims(name);
  const std::vector<long> shape(d.begin(), d.end());
  BURST_CHECK_INPUT(shape == p.shape, "weights file '", path_, "': ", name, " has shape ", io::dims_string(d),
                    ", the model needs ", io::dims_string(io::Dims(p.shape.begin(), p.shape.end())));
  if (checksummed_) return read_checked<double>(f, name);
  const std::string dt = f.dtype(name);
  BURST_CHECK_INPUT(dt == "float32" || dt == "float64", "weights file '", path_, "': ", name, " holds ", dt,
                    ", not float32/float64");
  return f.read<double>(name);
}

namespace {
// Every tensor of `table` from the weights in `path` (the model checked
// first): put(flat index, value) for each of its values.
template <class Put>
void read_weights(const std::string& path, const ModelConfig& mc, const std::vector<ParamInfo>& table, Put put) {
  WeightsReader r(path);
  r.require_weights_of(mc);
  for (const ParamInfo& p : table) {
    const std::vector<double> x = r.read(p);
    for (long i = 0; i < p.size; ++i) put(p.offset + i, x[size_t(i)]);
  }
}
}  // namespace

template <class A>
std::vector<A> load_weights_flat(const std::string& path, const ModelConfig& mc, const std::vector<ParamInfo>& table, long n) {
  std::vector<A> flat(static_cast<size_t>(n));
  read_weights(path, mc, table, [&](long i, double x) { flat[size_t(i)] = A(x); });
  return flat;
}
template std::vector<float> load_weights_flat<float>(const std::string&, const ModelConfig&, const std::vector<ParamInfo>&, long);
template std::vector<double> load_weights_flat<double>(const std::string&, const ModelConfig&, const std::vector<ParamInfo>&, long);

template <class T, class Mem> void load_weights(const std::string& path, const ModelConfig& mc, FlatTensors<T, Mem>& params) {
  auto h = Kokkos::create_mirror_view(params.flat());
  read_weights(path, mc, params.table(), [&](long i, double x) { h(i) = T(x); });
  Kokkos::deep_copy(params.flat(), h);
}

void save_weights(const std::string& path, const ModelConfig& mc, const std::string& dtype,
                  const std::function<std::vector<double>(const ParamInfo&)>& values, const std::string& source) {
  BURST_ASSERT(dtype == "float32" || dtype == "float64", "weights are stored as float32 or float64, not ", dtype);
  TempPath tmp(path, ".tmp", TempPath::Links::Follow);  // a failed write leaves the earlier file at `path` and no temporary
  io::H5File f = io::H5File::create(tmp.path());
  for (const ParamInfo& p : llama_param_table(mc)) {
    const std::vector<double> x = values(p);
    BURST_ASSERT(long(x.size()) == p.size, p.name, " has ", x.size(), " values, its shape needs ", p.size);
    const io::Dims dims(p.shape.begin(), p.shape.end());
    if (dtype == "float64") {
      write_checked(f, "params/" + p.name, x.data(), dims);
    } else {
      const std::vector<float> xf(x.begin(), x.end());
      write_checked(f, "params/" + p.name, xf.data(), dims);
    }
  }
  f.set_attr("/", "format_version", kCheckpointFormatVersion);
  f.set_attr("/", "content", std::string("weights"));  // params only: no optimizer state, no step
  f.set_attr("/", "dtype", dtype);
  f.set_attr("/", "model_config", model_to_hf_json(mc));
  f.set_attr("/", "source", source);
  f.close();      // incomplete (disk full): an error, and the earlier file at `path` stays
  tmp.publish();  // the data on the disk before the name: a crash leaves the old file or the new one
}

template void load_weights<float, DeviceMem>(const std::string&, const ModelConfig&, FlatTensors<float, DeviceMem>&);
template void load_weights<double, DeviceMem>(const std::string&, const ModelConfig&, FlatTensors<double, DeviceMem>&);

void mark_command_output(io::H5File& f, const std::string& command) { f.set_attr("/", kCommandOutputAttr, command); }

bool is_command_output(const io::H5File& f) {
  if (f.has_attr("/", "format_version")) return false;  // a checkpoint or weights file, whatever else it holds
  return f.has_attr("/", kCommandOutputAttr) || f.has_attr("/", "benchmark") || f.has_attr("/", "cluster_file") ||
         f.has_attr("/", "max_rel_error_o") || (f.has_attr("/", "model_config") && f.has_attr("/", "tokens"));
}

std::string overwrite_problem(const std::string& what, const std::string& path, bool weights_ok) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "";
  const std::string refuse = ": refusing to replace it (write the output elsewhere, or remove the file first)";
  if (!std::filesystem::is_regular_file(path, ec))
    return what + " = '" + path + "' exists and is not a regular file" + refuse;
  io::H5File f;
  try {
    f = io::H5File::open(path);
  } catch (const Error&) {
    return what + " = '" + path + "' exists and is not an HDF5 file (a config, a model or data file?)" + refuse;
  }
  if (f.has_attr("/", "format_version")) {
    const bool weights = f.has_attr("/", "content") && f.attr_string("/", "content") == "weights";
    if (weights && weights_ok) return "";
    return what + " = '" + path + "' is " + (weights ? "a weights file" : "a training checkpoint") + " of this engine" + refuse;
  }
  if (io::is_run_log(f)) return what + " = '" + path + "' is a training run log of this engine" + refuse;
  if (is_command_output(f)) return "";
  return what + " = '" + path + "' exists and is not a result this engine's commands wrote (no root attribute " +
         kCommandOutputAttr + " or benchmark: a data file?)" + refuse;
}

std::string output_problem(const std::string& what, const std::string& path, bool weights_ok) {
  const std::string p = output_path_problem(what, path);
  return p.empty() ? overwrite_problem(what, path, weights_ok) : p;
}

void check_output(const std::string& what, const std::string& path, bool weights_ok) {
  const std::string p = output_problem(what, path, weights_ok);
  BURST_CHECK_CONFIG(p.empty(), p);
}

}  // namespace burst

#include "train/checkpoint_files.hpp"

#include "core/durable.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"
#include "io/checksum.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

namespace fs = std::filesystem;

namespace burst {

namespace {
// "dir/ckpt.h5" -> ("dir/ckpt", ".h5"); a name without extension gets none.
std::pair<std::string, std::string> split_ext(const std::string& path) {
  const fs::path p(path);
  return {(p.parent_path() / p.stem()).string(), p.extension().string()};
}
constexpr int kStepDigits = 8;

// The step of a step file's name ("ckpt.step00000012.h5" of "dir/ckpt.h5":
// 12), or -1 when `name` is not one.
long step_of_name(const std::string& name, const fs::path& path) {
  const std::string prefix = path.stem().string() + ".step", ext = path.extension().string();
  if (name.size() != prefix.size() + kStepDigits + ext.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), kStepDigits);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stol(digits);
}
}  // namespace

std::string checkpoint_step_path(const std::string& path, long step) {
  auto [stem, ext] = split_ext(path);
  char num[32];
  std::snprintf(num, sizeof num, "%0*ld", kStepDigits, step);
  return stem + ".step" + num + ext;
}

long step_in_checkpoint_name(const std::string& file, const std::string& path) {
  return step_of_name(fs::path(file).filename().string(), fs::path(path));
}

std::vector<std::pair<long, std::string>> list_step_checkpoints(const std::string& path) {
  std::vector<std::pair<long, std::string>> out;
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const long step = step_of_name(name, p);
    if (step >= 0) out.push_back({step, (p.parent_path() / name).string()});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first > b.first; });
  return out;
}

std::vector<std::string> resume_candidates(const std::string& path) {
  std::vector<std::string> out;
  bool path_is_a_step_file = false;
  std::error_code ec;
  for (auto& [step, file] : list_step_checkpoints(path)) {
    out.push_back(file);
    if (fs::exists(path, ec) && fs::equivalent(file, path, ec)) path_is_a_step_file = true;
  }
  if (!path_is_a_step_file && fs::exists(path, ec)) out.push_back(path);
  return out;
}

void publish_checkpoint(const std::string& step_file, const std::string& path) {
  TempPath tmp(path);  // until the rename `path` names the previous checkpoint; a partial copy (disk full) goes
  std::error_code ec;
  fs::create_hard_link(step_file, tmp.path(), ec);
  if (ec) {  // another file system, or one without links: copy
    ec.clear();
    fs::copy_file(step_file, tmp.path(), fs::copy_options::overwrite_existing, ec);
    BURST_CHECK_IO(!ec, "cannot copy checkpoint '", step_file, "' to '", tmp.path(), "': ", ec.message());
  }
  tmp.publish();  // a copy's data on the disk before the name
}

void prune_checkpoints(const std::string& path, long keep_last, long step) {
  long kept = 0;
  for (auto& [s, file] : list_step_checkpoints(path)) {
    const bool keep = s <= step && kept < keep_last;
    if (keep) ++kept;
    else {
      std::error_code ec;
      fs::remove(file, ec);  // a file that cannot go is only wasted space
    }
  }
}

namespace {
// `file` is `path`, one of its step files, or one of their ".tmp" names.
bool is_checkpoint_file(const std::string& file, const std::string& path) {
  std::string f = file;
  if (f.size() > 4 && f.compare(f.size() - 4, 4, ".tmp") == 0) f.resize(f.size() - 4);
  if (same_file(f, path)) return true;
  std::error_code ec;
  const fs::path cf = fs::weakly_canonical(f, ec);
  if (ec) return false;
  const fs::path cp = fs::weakly_canonical(path, ec);
  return !ec && cf.parent_path() == cp.parent_path() && step_of_name(cf.filename().string(), cp) >= 0;
}
}  // namespace

std::string run_outputs_problem(const std::string& checkpoint, const std::string& run_log, bool resume, bool overwrite) {
  if (!checkpoint.empty() && !run_log.empty() && is_checkpoint_file(run_log, checkpoint))
    return "io.run_log = '" + run_log + "' is one of the checkpoint's files (io.checkpoint = '" + checkpoint +
           "', its step files <stem>.stepNNNNNNNN<ext> and their .tmp names): the run would overwrite one with the "
           "other; give the run log another name";
  if (resume || overwrite) return "";
  std::vector<std::string> existing;
  std::error_code ec;
  if (!run_log.empty() && fs::exists(run_log, ec)) existing.push_back("the run log '" + run_log + "'");
  if (!checkpoint.empty()) {
    if (fs::exists(checkpoint, ec)) existing.push_back("the checkpoint '" + checkpoint + "'");
    const auto steps = list_step_checkpoints(checkpoint);
    if (!steps.empty())
      existing.push_back(std::to_string(steps.size()) + " step checkpoint" + (steps.size() > 1 ? "s" : "") + " ('" +
                         steps.front().second + "'" + (steps.size() > 1 ? ", ..." : "") + ")");
  }
  if (existing.empty()) return "";
  std::string list;
  for (size_t i = 0; i < existing.size(); ++i) list += (i ? (i + 1 == existing.size() ? " and " : ", ") : "") + existing[i];
  return "a new run (no --resume) would replace " + list +
         " of an earlier run: continue that run with --resume, write to other paths (io.run_log, io.checkpoint), or set "
         "io.overwrite = true to replace them";
}

std::string outputs_replace_inputs_problem(const std::string& checkpoint, const std::string& run_log,
                                           const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [key, in] : inputs) {
    if (in.empty()) continue;
    if (same_file(run_log, in))
      return "io.run_log = '" + run_log + "' is the same file as " + key + " = '" + in +
             "': the run log would overwrite that input; write the run log elsewhere";
    if (!checkpoint.empty() && is_checkpoint_file(in, checkpoint))
      return key + " = '" + in + "' is one of the checkpoint's files (io.checkpoint = '" + checkpoint +
             "', its step files <stem>.stepNNNNNNNN<ext> and their .tmp names, which the run writes, replaces and "
             "removes): the run would overwrite that input; write the checkpoints elsewhere or copy the input first";
  }
  return "";
}

void remove_checkpoint_files(const std::string& path) {
  std::error_code ec;
  for (auto& [s, file] : list_step_checkpoints(path)) {
    fs::remove(file, ec);
    fs::remove(file + ".tmp", ec);
  }
  fs::remove(path, ec);
  fs::remove(path + ".tmp", ec);
}

template <class T> void write_checked(io::H5File& f, const std::string& name, const T* data, const io::Dims& dims) {
  const std::uint64_t n = std::accumulate(dims.begin(), dims.end(), std::uint64_t(1), std::multiplies<>());
  f.write(name, data, dims);
  f.set_attr(name, "fnv1a64", io::hex64(io::fnv1a64(data, n * sizeof(T))));
}

namespace {
template <class S> std::string stored_hash(const std::vector<S>& x) { return io::hex64(io::fnv1a64(x.data(), x.size() * sizeof(S))); }
}  // namespace

template <class T> std::vector<T> read_checked(const io::H5File& f, const std::string& name) {
  BURST_CHECK_IO(f.exists(name), "checkpoint '", f.path(), "' has no dataset '", name, "'");
  BURST_CHECK_IO(f.has_attr(name, "fnv1a64"), "dataset '", name, "' in checkpoint '", f.path(), "' has no checksum");
  const std::string want = f.attr_string(name, "fnv1a64"), stored = f.dtype(name);
  std::string got;
  std::vector<T> out;
  // The checksum covers the bytes as written, so read them in the stored
  // type before converting.
  if (stored == "float32") {
    std::vector<float> x = f.read<float>(name);
    got = stored_hash(x);
    out.assign(x.begin(), x.end());
  } else if (stored == "float64") {
    std::vector<double> x = f.read<double>(name);
    got = stored_hash(x);
    out.assign(x.begin(), x.end());
  } else {
    BURST_FAIL(ErrorKind::IO, "dataset '", name, "' in checkpoint '", f.path(), "' holds ", stored, ", not float32/float64");
  }
  BURST_CHECK_IO(got == want, "dataset '", name, "' in checkpoint '", f.path(), "' fails its checksum (fnv1a64 ", got,
                 ", stored ", want, "): the file is damaged");
  return out;
}

CheckpointVerify parse_checkpoint_verify(const std::string& s) {
  if (s == "structure") return CheckpointVerify::Structure;
  if (s == "checksum") return CheckpointVerify::Checksum;
  if (s == "off") return CheckpointVerify::Off;
  BURST_FAIL(ErrorKind::Config, "io.verify_checkpoint = '", s, "': expected structure, checksum or off");
}

namespace {
// The bytes HDF5 allocated in the file for `name`'s data and where they
// start (HADDR_UNDEF unless contiguous and allocated): metadata only.
std::pair<std::uint64_t, std::uint64_t> storage_of(const io::H5File& f, const std::string& name) {
  const hid_t d = H5Dopen2(hid_t(f.id()), name.c_str(), H5P_DEFAULT);
  BURST_CHECK_IO(d >= 0, "checkpoint '", f.path(), "': '", name, "' is not a dataset");
  const std::uint64_t bytes = H5Dget_storage_size(d);
  const std::uint64_t offset = H5Dget_offset(d);
  H5Dclose(d);
  return {bytes, offset};
}
}  // namespace

void verify_datasets(const io::H5File& f, const std::vector<DatasetSpec>& expected, CheckpointVerify how) {
  if (how == CheckpointVerify::Off) return;
  std::error_code ec;
  const std::uint64_t file_bytes = fs::file_size(f.path(), ec);
  BURST_CHECK_IO(!ec, "checkpoint '", f.path(), "': cannot read its size: ", ec.message());
  for (const DatasetSpec& e : expected) {
    const std::string& name = e.name;
    BURST_CHECK_IO(f.exists(name), "checkpoint '", f.path(), "' has no dataset '", name, "'");
    const io::Dims d = f.dims(name);
    BURST_CHECK_IO(d == e.dims, "checkpoint '", f.path(), "': dataset '", name, "' is ", io::dims_string(d), ", written as ",
                   io::dims_string(e.dims));
    const std::string dt = f.dtype(name);
    BURST_CHECK_IO(dt == e.dtype, "checkpoint '", f.path(), "': dataset '", name, "' holds ", dt, ", written as ", e.dtype);
    const std::uint64_t elem = e.dtype == "float64" ? 8 : e.dtype == "float32" ? 4 : 0;
    BURST_ASSERT(elem > 0, "checkpoint datasets are float32 or float64, not ", e.dtype);
    const std::uint64_t want = std::accumulate(e.dims.begin(), e.dims.end(), elem, std::multiplies<>());
    const auto [bytes, offset] = storage_of(f, name);
    BURST_CHECK_IO(bytes == want, "checkpoint '", f.path(), "': dataset '", name, "' has ", bytes,
                   " bytes stored in the file, its shape needs ", want, ": the file is incomplete");
    BURST_CHECK_IO(offset == HADDR_UNDEF || offset + bytes <= file_bytes, "checkpoint '", f.path(), "': dataset '", name,
                   "' ends at byte ", offset + bytes, ", past the end of the file (", file_bytes, " bytes): the file is truncated");
    BURST_CHECK_IO(f.has_attr(name, "fnv1a64") && f.attr_string(name, "fnv1a64").size() == 16, "dataset '", name,
                   "' in checkpoint '", f.path(), "' has no checksum");
    if (how == CheckpointVerify::Checksum) {
      if (e.dtype == "float32") read_checked<float>(f, name);
      else read_checked<double>(f, name);
    }
  }
}

template void write_checked<float>(io::H5File&, const std::string&, const float*, const io::Dims&);
template void write_checked<double>(io::H5File&, const std::string&, const double*, const io::Dims&);
template std::vector<float> read_checked<float>(const io::H5File&, const std::string&);
template std::vector<double> read_checked<double>(const io::H5File&, const std::string&);

}  // namespace burst

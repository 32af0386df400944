#include "io/run_log.hpp"

#include "core/error.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace burst::io {

namespace {
constexpr hsize_t kChunk = 256;
}

bool is_run_log(const H5File& f) {
  if (f.has_attr("/", "content")) return f.attr_string("/", "content") == kRunLogContent;
  return f.exists("log") && f.has_attr("log", "rows") && !f.has_attr("/", "format_version");
}

std::string resume_run_log_problem(const std::string& path, const std::string& key) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "";
  const std::string move_on = ": move it away or set " + key +
                              " to a new path (the resumed run then starts a new log at the checkpoint's step)";
  try {
    const H5File f = H5File::open(path);
    if (is_run_log(f)) return "";
    const bool checkpoint = f.has_attr("/", "format_version");
    return "the existing " + key + " = '" + path + "' is not a run log (" +
           (checkpoint ? std::string("it is a checkpoint or weights file of this engine") : "no content = \"run_log\" attribute, no log/rows") +
           "): --resume would append the log into it" + move_on;
  } catch (const Error& e) {
    return "the existing run log '" + path + "' (" + key + ") is not a readable HDF5 file (damaged? " + e.message() + ")" +
           move_on;
  }
}

RunLog::RunLog(H5File& file, const std::string& group) : file_(file), group_(group) {
  file_.create_group(group_);
  if (file_.has_attr(group_, "rows")) rows_ = static_cast<std::uint64_t>(file_.attr_int(group_, "rows"));
  else file_.set_attr(group_, "rows", std::int64_t(0));
  if (file_.has_attr(group_, "columns")) {
    std::string cols = file_.attr_string(group_, "columns");
    size_t start = 0;
    while (start < cols.size()) {
      size_t end = cols.find(',', start);
      if (end == std::string::npos) end = cols.size();
      if (end > start) columns_.push_back(cols.substr(start, end - start));
      start = end + 1;
    }
  }
}

void RunLog::add_column(const std::string& name) {
  BURST_CHECK_IO(!name.empty() && name.find('/') == std::string::npos && name.find(',') == std::string::npos,
                 "run-log column name '", name, "' must be non-empty without '/' or ','");
  const std::string path = group_ + "/" + name;
  hsize_t cur[1] = {rows_}, max[1] = {H5S_UNLIMITED}, chunk[1] = {kChunk};
  hid_t space = H5Screate_simple(1, cur, max);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, chunk);
  double nan = std::numeric_limits<double>::quiet_NaN();
  H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &nan);
  // Chunks allocated in the file when the column is created or extended,
  // not at the flush after their first write, so the flush's space
  // reservation covers them (a full disk is then found before the flush
  // grows the file), and never filled on allocation (that would write at
  // the extension, past the reservation): every row within the extent is
  // written by append, and the rows before a late column with NaN below.
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  hid_t d = H5Dcreate2(file_.id(), path.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (d >= 0 && rows_ > 0) {  // a column added after rows were logged: NaN there
    const std::vector<double> nans(rows_, nan);
    if (H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, nans.data()) < 0) {
      const std::string cause = hdf5_error_cause();
      H5Dclose(d);
      H5Pclose(dcpl);
      H5Sclose(space);
      file_.write_failed("cannot write the earlier rows of run-log column '" + path + "'", cause);
    }
  }
  const std::string cause = d < 0 ? hdf5_error_cause() : "";
  H5Pclose(dcpl);
  H5Sclose(space);
  if (d < 0) file_.write_failed("cannot create run-log column '" + path + "'", cause);
  H5Dclose(d);
  columns_.push_back(name);
  std::string all;
  for (auto& c : columns_) all += (all.empty() ? "" : ",") + c;
  file_.set_attr(group_, "columns", all);
}

void RunLog::append(const std::vector<std::pair<std::string, double>>& row) {
  for (auto& [name, _] : row)
    if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) add_column(name);
  const hsize_t n = rows_ + 1;
  for (auto& col : columns_) {
    const std::string path = group_ + "/" + col;
    double v = std::numeric_limits<double>::quiet_NaN();
    for (auto& [name, x] : row)
      if (name == col) v = x;
    hid_t d = H5Dopen2(file_.id(), path.c_str(), H5P_DEFAULT);
    BURST_CHECK_IO(d >= 0, "run-log column '", path, "' vanished from '", file_.path(), "'");
    hsize_t ext[1] = {n};
    herr_t ok = H5Dset_extent(d, ext);
    hid_t fs = H5Dget_space(d);
    hsize_t start[1] = {rows_}, count[1] = {1};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t ms = H5Screate_simple(1, count, nullptr);
    if (ok >= 0) ok = H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, &v);
    const std::string cause = ok < 0 ? hdf5_error_cause() : "";
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    if (ok < 0) file_.write_failed("cannot append row " + std::to_string(rows_) + " to run-log column '" + path + "'", cause);
  }
  rows_ = n;
  file_.set_attr(group_, "rows", static_cast<std::int64_t>(rows_));
  file_.flush();
}

void RunLog::truncate(std::uint64_t rows) {
  if (rows >= rows_) return;
  for (auto& col : columns_) {
    const std::string path = group_ + "/" + col;
    hid_t d = H5Dopen2(file_.id(), path.c_str(), H5P_DEFAULT);
    BURST_CHECK_IO(d >= 0, "run-log column '", path, "' vanished from '", file_.path(), "'");
    hsize_t ext[1] = {rows};
    herr_t ok = H5Dset_extent(d, ext);
    const std::string cause = ok < 0 ? hdf5_error_cause() : "";
    H5Dclose(d);
    if (ok < 0) file_.write_failed("cannot truncate run-log column '" + path + "' to " + std::to_string(rows) + " rows", cause);
  }
  rows_ = rows;
  file_.set_attr(group_, "rows", static_cast<std::int64_t>(rows_));
  file_.flush();
}

}  // namespace burst::io

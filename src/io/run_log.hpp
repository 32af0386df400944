// Append-only run log: one row per step, one extendable float64 dataset per
// column under a group ("log/loss", "log/lr", ...), flushed after every row
// so a killed run keeps what it logged. A column first seen at row k is
// filled with NaN for rows 0..k-1. Readable with h5py:
//   f["log/loss"][:]   f["log"].attrs["rows"]
#pragma once

#include "io/h5.hpp"

#include <string>
#include <utility>
#include <vector>

namespace burst::io {

// The root attribute that says a file is a run log (the trainer sets it):
// content = "run_log", as weights files carry content = "weights".
constexpr const char* kRunLogContent = "run_log";

// Whether `f` is a run log of this engine, to append to: content =
// "run_log" at the root, or (logs written before the attribute) a "log"
// group with its "rows" attribute and no checkpoint format_version.
bool is_run_log(const H5File& f);

// What is wrong with continuing (--resume) the run log at `path` ("" when
// nothing, or when there is no file yet): a file HDF5 cannot read (damaged,
// truncated) or one that is not a run log (a checkpoint copied there, any
// other file) is named, with what to do, instead of being appended to.
std::string resume_run_log_problem(const std::string& path, const std::string& key = "io.run_log");

class RunLog {
 public:
  // Opens (creating if needed) the group in an open file; continues after
  // any rows already there, so a resumed run appends to its old log.
  RunLog(H5File& file, const std::string& group = "log");

  void append(const std::vector<std::pair<std::string, double>>& row);
  // Drop the rows from `rows` on (a resumed run repeats the steps that ran
  // after its checkpoint, so their rows must not appear twice).
  void truncate(std::uint64_t rows);
  std::uint64_t rows() const { return rows_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void add_column(const std::string& name);
  H5File& file_;
  std::string group_;
  std::uint64_t rows_ = 0;
  std::vector<std::string> columns_;
};

}  // namespace burst::io

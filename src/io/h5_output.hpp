// A command's HDF5 output written beside its final name and renamed onto it
// when complete: a command that fails, is refused part way or is stopped
// (a signal, a time limit) leaves the earlier file at `path` as it was, or
// none, never a truncated or empty one that the next run would then refuse
// to replace. The temporary ("<path>.tmp") is removed when the command
// fails (an exception); one left by a signal that ends the process (SIGTERM,
// SIGINT, SIGKILL) is removed by the next run to `path`. A `path` that is a
// symbolic link is written where the link leads (the link stays).
//
//   io::H5Output out(path);       // creates "<path>.tmp"
//   out.file().write(...);        // as an H5File
//   out.publish();                // close (errors reported), fsync, rename
#pragma once

#include "core/durable.hpp"
#include "io/h5.hpp"

#include <string>

namespace burst::io {

class H5Output {
 public:
  explicit H5Output(const std::string& path)
      : given_(path), tmp_(path, ".tmp", TempPath::Links::Follow), file_(H5File::create(tmp_.path())) {}
  H5Output(const H5Output&) = delete;
  H5Output& operator=(const H5Output&) = delete;

  H5File& file() { return file_; }
  const std::string& path() const { return given_; }
  // Records the path as given (root attribute "output": a file's config
  // attribute holds the default bench.output when --output was given),
  // completes the file (an incomplete one, e.g. a full disk, is Error(IO) and
  // the earlier file stays), then puts it under its final name.
  void publish() {
    file_.set_attr("/", "output", given_);
    file_.close();
    tmp_.publish();
  }

 private:
  std::string given_;
  TempPath tmp_;  // declared before the file, so destroyed after it: the file is closed before it is removed
  H5File file_;
};

}  // namespace burst::io

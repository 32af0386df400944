// Small text inputs (a --config TOML, a model's config.json, a cluster or
// calibration file, a safetensors index) read whole: only a regular file of
// at most `max_bytes` is read. A directory, FIFO or device at such a path once
// ended in an uncaught std::ios_base::failure (a directory), a hang (a FIFO)
// or an unbounded read (/dev/zero grew to the machine's memory).
#pragma once

#include "core/error.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace burst {

inline constexpr long long kTextFileMaxBytes = 64ll << 20;

// What is wrong with reading `path` as a text input ("" when nothing).
inline std::string text_file_problem(const std::string& what, const std::string& path, long long max_bytes = kTextFileMaxBytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "cannot open " + what + " '" + path + "': " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return what + " '" + path + "' is a directory, not a file";
  if (!S_ISREG(st.st_mode)) return what + " '" + path + "' is not a regular file (a device, FIFO or socket)";
  if (st.st_size > max_bytes)
    return what + " '" + path + "' has " + std::to_string(static_cast<long long>(st.st_size)) + " bytes, more than the " +
           std::to_string(max_bytes) + " such a file may have (the wrong file?)";
  return "";
}

// What keeps `path` from being read as an input file of any size ("" when
// nothing): missing, a directory, or not a regular file (a FIFO would hang
// the reader). Named as such, not all as "does not exist".
inline std::string input_file_problem(const std::string& what, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? what + " '" + path + "' does not exist"
                                               : "cannot open " + what + " '" + path + "': " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return what + " '" + path + "' is a directory, not a file";
  if (!S_ISREG(st.st_mode)) return what + " '" + path + "' is not a regular file (a device, FIFO or socket)";
  return "";
}

// The file's bytes; Error(kind) naming `what` and the path on any problem.
inline std::string read_text_file(const std::string& what, const std::string& path, ErrorKind kind,
                                  long long max_bytes = kTextFileMaxBytes) {
  const std::string p = text_file_problem(what, path, max_bytes);
  if (!p.empty()) throw Error(kind, p);
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw Error(kind, "cannot open " + what + " '" + path + "': " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<long long>(text.size()) > max_bytes)  // grew while being read
      throw Error(kind, what + " '" + path + "' grew past " + std::to_string(max_bytes) + " bytes while being read");
  }
  if (in.bad()) throw Error(kind, "cannot read " + what + " '" + path + "': " + std::strerror(errno));
  return text;
}

}  // namespace burst

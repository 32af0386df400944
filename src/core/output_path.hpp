// Output files (the commands' `--output` and `bench.output`, the trainer's
// io.run_log and io.checkpoint): checked before any work, so that a run is not
// thrown away at the end, or at its first checkpoint, for a path that could
// never be written (bad input: status 2).
#pragma once

#include "core/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

namespace burst {

// The file a symbolic link `path` leads to, through every link of a chain
// (relative targets taken from the link's directory), whether it exists or
// not; `path` itself when it is no link, or when the chain does not end (a
// loop: 40 links, as the kernel's limit). Outputs are written where the link
// points (the temporary beside the target, renamed onto it), so that a link
// to a file on another disk stays a link.
inline std::string link_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = path;
  for (int i = 0; i < 40; ++i) {
    if (!fs::is_symlink(p, ec)) return p.string();
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) return path;
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  return path;
}

// What is wrong with `path` as a file to create ("" when nothing is): the
// directory must exist and be writable, and the path must not be a directory.
// A symbolic link is judged by the file it leads to.
inline std::string output_path_problem(const std::string& what, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return what + " is empty: give the file to write";
  if (fs::is_symlink(path, ec)) {
    const std::string target = link_target(path);
    if (target == path) return what + " = '" + path + "' is a symbolic link that leads nowhere (a loop?)";
    return output_path_problem(what + " (the link '" + path + "')", target);
  }
  if (fs::is_directory(path, ec)) return what + " = '" + path + "' is a directory, not a file";
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec))
    return what + " = '" + path + "': the directory '" + dir.string() + "' does not exist";
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    return what + " = '" + path + "': the file exists and is not writable";
  const std::string d = dir.empty() ? std::string(".") : dir.string();
  if (::access(d.c_str(), W_OK | X_OK) != 0) return what + " = '" + path + "': the directory '" + d + "' is not writable";
  // access() answers from the permission bits, and for root it says yes to
  // directories that refuse new files all the same (/proc, /sys, an NFS
  // export squashing root, a read-only or immutable attribute seen only on
  // create): the file (written as "<path>.tmp" and renamed) is created for
  // real only there, after the run. So a probe file is created and removed.
  static std::atomic<unsigned> probes{0};
  const std::string probe = (fs::path(d) / (".burst-probe-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(probes.fetch_add(1)))).string();
  int fd = -1;
  do fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno != EEXIST)
    return what + " = '" + path + "': the directory '" + d + "' does not take new files (creating a file there: " +
           std::strerror(errno) + ")";
  if (fd >= 0) ::close(fd), ::unlink(probe.c_str());
  return "";
}

// `a` and `b` name the same file: by identity (device and inode, so hard
// links and symlinks count) when both exist, else by their normalised
// absolute paths (an output not written yet). Empty paths name no file.
inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  if (a.empty() || b.empty()) return false;
  std::error_code e1, e2;
  if (fs::exists(a, e1) && fs::exists(b, e2)) {
    const bool eq = fs::equivalent(a, b, e1);
    if (!e1) return eq;
  }
  const fs::path ca = fs::weakly_canonical(a, e1), cb = fs::weakly_canonical(b, e2);
  if (!e1 && !e2) return ca == cb;
  return fs::absolute(a, e1).lexically_normal() == fs::absolute(b, e2).lexically_normal();
}

inline void check_output_path(const std::string& what, const std::string& path) {
  const std::string p = output_path_problem(what, path);
  BURST_CHECK_CONFIG(p.empty(), p);
}

}  // namespace burst

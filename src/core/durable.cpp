#include "core/durable.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace burst {

namespace {
// Opens `path` with `flags`, fsyncs and closes it; `what` names it in errors.
void fsync_path(const std::string& path, int flags, const char* what, bool directory) {
  int fd = -1;
  do fd = ::open(path.c_str(), flags | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) BURST_FAIL(ErrorKind::IO, "cannot open ", what, " '", path, "' to sync it to disk: ", std::strerror(errno));
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  const int err = rc != 0 ? errno : 0;
  ::close(fd);
  if (err == 0) return;
  if (directory && (err == EINVAL || err == ENOTSUP)) return;  // the file system cannot sync directories
  BURST_FAIL(ErrorKind::IO, "cannot sync ", what, " '", path, "' to disk (fsync): ", std::strerror(err));
}
}  // namespace

void fsync_file(const std::string& path) { fsync_path(path, O_RDONLY, "file", false); }

void fsync_dir(const std::string& dir) { fsync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY, "directory", true); }

void fsync_parent_dir(const std::string& path) { fsync_dir(std::filesystem::path(path).parent_path().string()); }

void rename_durably(const std::string& from, const std::string& to) {
  fsync_file(from);
  if (std::rename(from.c_str(), to.c_str()) != 0)
    BURST_FAIL(ErrorKind::IO, "cannot move '", from, "' to '", to, "': ", std::strerror(errno));
  fsync_parent_dir(to);
}

}  // namespace burst

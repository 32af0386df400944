// A directory that this process can write into but not read while the
// object lives: a rename into it works and syncing it (fsync_dir opens it
// for reading) fails with EACCES, the one failure of a directory sync after
// a rename that a test can cause. Root reads every directory, so as root
// the directory is given to nobody and the process runs as nobody
// (seteuid, every thread) until the object goes. ok() is false where
// neither works (the caller skips).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

namespace burst::test_tools {

class UnreadableDir {
 public:
  explicit UnreadableDir(std::string dir) : dir_(std::move(dir)) {
    if (::geteuid() == 0) {
      if (::chown(dir_.c_str(), 65534, 65534) != 0 || ::seteuid(65534) != 0) return;
      nobody_ = true;
    }
    if (::chmod(dir_.c_str(), 0300) != 0) return;
    const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) ::close(fd);
    else ok_ = errno == EACCES;
  }
  ~UnreadableDir() {
    ::chmod(dir_.c_str(), 0700);
    if (nobody_ && ::seteuid(0) != 0) std::abort();  // the tests after this one would run as nobody
  }
  UnreadableDir(const UnreadableDir&) = delete;
  UnreadableDir& operator=(const UnreadableDir&) = delete;
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool nobody_ = false, ok_ = false;
};

}  // namespace burst::test_tools

// A file size limit (RLIMIT_FSIZE) on this process for the scope of the
// object: writes past it fail with EFBIG, as writes to a full disk fail with
// ENOSPC, so the tests of failed writes run anywhere, without a small file
// system to fill or the privileges to mount one. SIGXFSZ is ignored meanwhile
// (by default it ends the process).
#pragma once

#include <sys/resource.h>

#include <csignal>

namespace burst::test_tools {

struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old);
    rlimit r = old;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
};

}  // namespace burst::test_tools

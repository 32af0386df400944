#include "core/durable.hpp"
#include "core/output_path.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

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

namespace {
void rename_file(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    BURST_FAIL(ErrorKind::IO, "cannot move '", from, "' to '", to, "': ", std::strerror(errno));
}

// fsync_dir after a rename into `dir`: a failure must not read as a failed
// write (the new file is there, and the old one gone), nor as durable.
// `what`: "'<file>' is in place under its final name"; `it`: "it", "they".
void sync_renamed(const std::string& dir, const std::string& what, const char* it = "it") {
  try {
    fsync_dir(dir);
  } catch (const Error& e) {
    BURST_FAIL(ErrorKind::IO, what, ", but ", e.message(), ": ", it, " may not survive a crash or power loss");
  }
}

std::string parent_of(const std::string& path) { return std::filesystem::path(path).parent_path().string(); }
}  // namespace

void rename_durably(const std::string& from, const std::string& to) {
  fsync_file(from);
  rename_file(from, to);
  sync_renamed(parent_of(to), "'" + to + "' is in place under its final name");
}

TempPath::TempPath(std::string final_path, std::string suffix, Links links)
    : TempPath(links == Links::Follow ? link_target(final_path) : final_path,
               (links == Links::Follow ? link_target(final_path) : final_path) + suffix, false) {}

TempPath TempPath::staging_dir(const std::string& dir, const std::string& name) {
  return TempPath(dir, (std::filesystem::path(dir) / name).string(), true);
}

TempPath::TempPath(std::string final_path, std::string path, bool directory)
    : final_(std::move(final_path)), path_(std::move(path)), directory_(directory) {
  std::error_code ec;
  if (!directory_) {
    std::filesystem::remove(path_, ec);
    return;
  }
  std::filesystem::remove_all(path_, ec);
  std::filesystem::create_directories(path_, ec);
  BURST_CHECK_IO(std::filesystem::is_directory(path_), "cannot create the staging directory '", path_, "'",
                 ec ? ": " + ec.message() : std::string());
}

TempPath::~TempPath() {
  if (!armed_) return;
  try {
    std::error_code ec;
    if (directory_) std::filesystem::remove_all(path_, ec);
    else std::filesystem::remove(path_, ec);  // a temporary that cannot go is only wasted space
  } catch (...) {  // bad_alloc in remove_all: nothing to do during unwinding
  }
}

void TempPath::publish() {
  BURST_ASSERT(armed_, "'", path_, "' is published once");
  if (!directory_) {
    fsync_file(path_);
    rename_file(path_, final_);
    armed_ = false, in_place_ = true;
    sync_renamed(parent_of(final_), "'" + final_ + "' is in place under its final name");
    return;
  }
  const std::vector<std::string> names = staged_names();
  for (const std::string& n : names) fsync_file((std::filesystem::path(path_) / n).string());  // data before names
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    try {
      rename_file((std::filesystem::path(path_) / n).string(), (std::filesystem::path(final_) / n).string());
    } catch (const Error& e) {
      // Part moved, part not: what was not moved stays in the staging
      // directory (the destructor keeps it), and the message says where.
      armed_ = false;
      std::string rest;
      for (std::size_t j = i; j < names.size(); ++j) rest += (rest.empty() ? "" : ", ") + names[j];
      BURST_FAIL(ErrorKind::IO, e.message(), "; moved into '", final_, "' before it: ", list.empty() ? "none" : list,
                 "; kept in '", path_, "': ", rest, " (move them into '", final_, "' to complete it)");
    }
    list += (list.empty() ? "" : ", ") + n;
  }
  in_place_ = true;
  std::error_code ec;
  std::filesystem::remove(path_, ec);  // empty now: its removal goes to the disk with the renames
  armed_ = bool(ec);                   // a failed removal is tried again by the destructor
  sync_renamed(final_, "the files moved into '" + final_ + "' (" + list + ") are in place under their final names",
               "they");
}

std::vector<std::string> TempPath::staged_names() const {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  BURST_CHECK_IO(!ec, "cannot list the staging directory '", path_, "': ", ec.message());
  std::sort(names.begin(), names.end());  // a fixed order, whatever the directory's
  return names;
}

void TempPath::check_publishable() const {
  BURST_ASSERT(directory_, "check_publishable is for a staging directory ('", path_, "')");
  namespace fs = std::filesystem;
  for (const std::string& n : staged_names()) {
    const fs::path to = fs::path(final_) / n;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(to, ec);
    BURST_CHECK_IO(!fs::is_directory(st), "'", to.string(), "' is a directory: the new '", n,
                   "' cannot replace it (nothing was moved or removed; move that directory away and run again)");
  }
}

}  // namespace burst

// The checkpoint path's pieces on their own: the fsync helpers every
// rename-into-place writer uses (core/durable.hpp).
#include "core/durable.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

using namespace burst;
namespace fs = std::filesystem;

namespace {
std::string tmp(const std::string& name) {
  return "/tmp/burst_test_checkpoint_" + std::to_string(getpid()) + "_" + name;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(Durable, SyncsFilesAndDirectoriesAndNamesWhatIsMissing) {
  const std::string dir = tmp("dir"), file = dir + "/f.bin", missing = dir + "/missing.bin";
  fs::create_directories(dir);
  std::ofstream(file) << "data";
  EXPECT_NO_THROW(fsync_file(file));
  EXPECT_NO_THROW(fsync_dir(dir));
  EXPECT_NO_THROW(fsync_parent_dir(file));
  EXPECT_NO_THROW(fsync_parent_dir("relative_name_in_the_current_directory"));  // its directory is "."
  auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IO);
      return e.message();
    }
    return "";
  };
  const std::string enoent = std::strerror(ENOENT);
  std::string err = error_of([&] { fsync_file(missing); });
  EXPECT_TRUE(has(err, "file '" + missing + "'") && has(err, enoent)) << err;
  err = error_of([&] { fsync_dir(dir + "/nodir"); });
  EXPECT_TRUE(has(err, "directory '" + dir + "/nodir'") && has(err, enoent)) << err;
  err = error_of([&] { fsync_dir(file); });  // a file is not a directory
  EXPECT_TRUE(has(err, "directory '" + file + "'") && has(err, std::strerror(ENOTDIR))) << err;
  // rename_durably: the new file in place, the temporary gone; a missing source named.
  const std::string target = dir + "/target.bin", tmpfile = target + ".tmp";
  std::ofstream(target) << "old";
  std::ofstream(tmpfile) << "new";
  EXPECT_NO_THROW(rename_durably(tmpfile, target));
  EXPECT_FALSE(fs::exists(tmpfile));
  std::ifstream in(target);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "new");
  err = error_of([&] { rename_durably(missing, target); });
  EXPECT_TRUE(has(err, "file '" + missing + "'") && has(err, enoent)) << err;
  EXPECT_TRUE(fs::exists(target));  // untouched
  fs::remove_all(dir);
}

// The checkpoint path's pieces on their own: the verification of a written
// checkpoint before it is renamed into place (io.verify_checkpoint), and the
// fsync helpers and the TempPath guard every rename-into-place writer uses
// (core/durable.hpp).
#include "core/durable.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "tools/corrupt.hpp"
#include "tools/unreadable_dir.hpp"
#include "train/checkpoint_files.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace burst;
namespace fs = std::filesystem;

namespace {
std::string tmp(const std::string& name) {
  return "/tmp/burst_test_checkpoint_" + std::to_string(getpid()) + "_" + name;
}

// A small checkpoint-like file (float32 and float64 datasets with their
// checksums, as write_checkpoint writes them) and what it must hold.
std::vector<DatasetSpec> write_sample(const std::string& file) {
  std::vector<float> a(24);
  std::iota(a.begin(), a.end(), 1.0f);
  const std::vector<double> b = {0.5, -1.5, 2.5, 3.25, 4.0};
  io::H5File f = io::H5File::create(file);
  write_checked(f, "params/a", a.data(), {4, 6});
  write_checked(f, "optim/m/b", b.data(), {5});
  f.close();
  return {{"params/a", {4, 6}, "float32"}, {"optim/m/b", {5}, "float64"}};
}

// verify_datasets on `file` (opened here: a file HDF5 cannot open fails the
// check as well): "" when it passes, else the Error(IO)'s message.
std::string verify(const std::string& file, const std::vector<DatasetSpec>& expected, CheckpointVerify how) {
  try {
    io::H5File f = io::H5File::open(file);
    verify_datasets(f, expected, how);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IO) << e.message();
    return e.message().empty() ? "(empty message)" : e.message();
  }
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(Checkpoint, VerifyModesParseAndRefuseOthers) {
  EXPECT_EQ(parse_checkpoint_verify("structure"), CheckpointVerify::Structure);
  EXPECT_EQ(parse_checkpoint_verify("checksum"), CheckpointVerify::Checksum);
  EXPECT_EQ(parse_checkpoint_verify("off"), CheckpointVerify::Off);
  try {
    parse_checkpoint_verify("full");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_TRUE(has(e.message(), "io.verify_checkpoint = 'full': expected structure, checksum or off")) << e.message();
  }
}

// The default check reads metadata only: a flipped data byte (which only the
// data can show) passes it, and io.verify_checkpoint = checksum finds it.
TEST(Checkpoint, StructureVerificationReadsNoDataChecksumVerificationDoes) {
  const std::string file = tmp("flipped.h5");
  const auto expected = write_sample(file);
  EXPECT_EQ(verify(file, expected, CheckpointVerify::Structure), "");
  EXPECT_EQ(verify(file, expected, CheckpointVerify::Checksum), "");
  ASSERT_EQ(test_tools::flip_dataset_byte(file, "params/a"), "");
  EXPECT_EQ(verify(file, expected, CheckpointVerify::Structure), "");
  EXPECT_EQ(verify(file, expected, CheckpointVerify::Off), "");
  const std::string err = verify(file, expected, CheckpointVerify::Checksum);
  EXPECT_TRUE(has(err, "dataset 'params/a' in checkpoint '" + file + "' fails its checksum")) << err;
  fs::remove(file);
}

TEST(Checkpoint, StructureVerificationFindsMissingMisshapenAndIncompleteDatasets) {
  const std::string file = tmp("structure.h5");
  const auto expected = write_sample(file);
  for (CheckpointVerify how : {CheckpointVerify::Structure, CheckpointVerify::Checksum}) {
    // a dataset missing
    auto more = expected;
    more.push_back({"optim/v/c", {3}, "float32"});
    EXPECT_TRUE(has(verify(file, more, how), "checkpoint '" + file + "' has no dataset 'optim/v/c'"));
    // another shape (as written short) or another type
    auto shape = expected;
    shape[0].dims = {4, 7};
    EXPECT_TRUE(has(verify(file, shape, how), "dataset 'params/a' is [4, 6], written as [4, 7]")) << verify(file, shape, how);
    auto type = expected;
    type[1].dtype = "float32";
    EXPECT_TRUE(has(verify(file, type, how), "dataset 'optim/m/b' holds float64, written as float32"));
  }
  // A dataset whose data never reached the file (created, nothing stored:
  // HDF5 allocates contiguous storage at the first write), though it has
  // its checksum attribute; and one without a checksum.
  {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hsize_t n = 8;
    hid_t s = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "unwritten", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d), H5Sclose(s), H5Fclose(f);
    io::H5File w = io::H5File::open(file, io::H5File::Mode::ReadWrite);
    w.set_attr("unwritten", "fnv1a64", std::string("0123456789abcdef"));
    w.write("unchecked", std::vector<float>{1, 2, 3}, {3});
    w.close();
  }
  auto unwritten = expected;
  unwritten.push_back({"unwritten", {8}, "float32"});
  const std::string err = verify(file, unwritten, CheckpointVerify::Structure);
  EXPECT_TRUE(has(err, "dataset 'unwritten' has 0 bytes stored in the file, its shape needs 32: the file is incomplete")) << err;
  auto unchecked = expected;
  unchecked.push_back({"unchecked", {3}, "float32"});
  EXPECT_TRUE(has(verify(file, unchecked, CheckpointVerify::Structure), "dataset 'unchecked' in checkpoint '" + file +
                                                                            "' has no checksum"));
  EXPECT_EQ(verify(file, expected, CheckpointVerify::Structure), "");  // the others are still whole
  // A truncated file (the end of the data lost; the file on disk may be
  // longer than HDF5's end, space reserved ahead: cut it to half).
  const std::string cut = tmp("truncated.h5");
  write_sample(cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  const std::string cut_err = verify(cut, expected, CheckpointVerify::Structure);
  EXPECT_TRUE(has(cut_err, cut)) << cut_err;
  fs::remove(file), fs::remove(cut);
}

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

namespace {
std::string contents(const std::string& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The names in `dir`, sorted.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

// A final path that is a symbolic link: by default the link itself is
// replaced (a checkpoint's "latest" link to a step file must not turn that
// step file into the new checkpoint); with Links::Follow (a command's
// --output) the file it leads to is, and the link stays.
TEST(Durable, TempPathFollowsLinksOnlyWhenAsked) {
  const std::string dir = tmp("templinks");
  fs::remove_all(dir);
  fs::create_directories(dir + "/elsewhere");
  std::ofstream(dir + "/ck.step00000002.h5") << "step 2";
  fs::create_symlink("ck.step00000002.h5", dir + "/ck.h5");
  {
    TempPath t(dir + "/ck.h5");
    EXPECT_EQ(t.path(), dir + "/ck.h5.tmp");
    std::ofstream(t.path()) << "step 4";
    t.publish();
  }
  EXPECT_FALSE(fs::is_symlink(dir + "/ck.h5"));
  EXPECT_EQ(contents(dir + "/ck.h5"), "step 4");
  EXPECT_EQ(contents(dir + "/ck.step00000002.h5"), "step 2");
  fs::create_symlink("elsewhere/out.h5", dir + "/out.h5");
  {
    TempPath t(dir + "/out.h5", ".tmp", TempPath::Links::Follow);
    EXPECT_EQ(t.final_path(), dir + "/elsewhere/out.h5");
    std::ofstream(t.path()) << "result";
    t.publish();
  }
  EXPECT_TRUE(fs::is_symlink(dir + "/out.h5"));
  EXPECT_EQ(contents(dir + "/elsewhere/out.h5"), "result");
  EXPECT_EQ(listing(dir + "/elsewhere"), std::vector<std::string>{"out.h5"});
}

// TempPath: the temporary goes on an exception, the new file is in place
// after publish, and nothing else is left; a leftover ".tmp" of a killed
// write is replaced.
TEST(Durable, TempPathRemovesTheTemporaryUnlessPublished) {
  const std::string dir = tmp("temppath"), target = dir + "/out.bin";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(target) << "old";
  try {
    TempPath t(target);
    EXPECT_EQ(t.path(), target + ".tmp");
    std::ofstream(t.path()) << "partial";
    throw std::runtime_error("the write failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(listing(dir), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(contents(target), "old");
  {
    TempPath t(target);  // unpublished, no exception: removed all the same
    std::ofstream(t.path()) << "unused";
  }
  EXPECT_EQ(listing(dir), std::vector<std::string>{"out.bin"});
  std::ofstream(target + ".tmp") << "leftover of a killed write";
  {
    TempPath t(target);
    EXPECT_FALSE(fs::exists(t.path()));
    std::ofstream(t.path()) << "new";
    EXPECT_FALSE(t.in_place());
    t.publish();
    EXPECT_TRUE(t.in_place());
  }
  EXPECT_EQ(listing(dir), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(contents(target), "new");
  // A rename that fails (the target is a non-empty directory): named, and the temporary still goes.
  fs::create_directories(dir + "/blocked/inside");
  try {
    TempPath t(dir + "/blocked");
    std::ofstream(t.path()) << "x";
    t.publish();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IO);
    EXPECT_TRUE(has(e.message(), "cannot move '" + dir + "/blocked.tmp' to '" + dir + "/blocked'")) << e.message();
  }
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"blocked", "out.bin"}));
  fs::remove_all(dir);
}

// A staging directory: removed with what it holds unless published; publish
// moves its files into the directory by name, replacing files of the same
// name, and leaves the other files there alone.
TEST(Durable, StagingDirectoryIsRemovedOrMovedIntoPlace) {
  const std::string dir = tmp("staging");
  fs::remove_all(dir);
  fs::create_directories(dir + "/.stage/leftover");  // of a killed run: replaced
  std::ofstream(dir + "/a.bin") << "old a";
  std::ofstream(dir + "/keep.txt") << "kept";
  try {
    TempPath s = TempPath::staging_dir(dir, ".stage");
    EXPECT_EQ(s.path(), dir + "/.stage");
    EXPECT_TRUE(listing(s.path()).empty());
    std::ofstream(s.path() + "/a.bin") << "new a";
    throw std::runtime_error("the export failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"a.bin", "keep.txt"}));
  EXPECT_EQ(contents(dir + "/a.bin"), "old a");
  {
    TempPath s = TempPath::staging_dir(dir, ".stage");
    std::ofstream(s.path() + "/a.bin") << "new a";
    std::ofstream(s.path() + "/b.bin") << "new b";
    s.publish();
    EXPECT_TRUE(s.in_place());
  }
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"a.bin", "b.bin", "keep.txt"}));
  EXPECT_EQ(contents(dir + "/a.bin"), "new a");
  EXPECT_EQ(contents(dir + "/b.bin"), "new b");
  EXPECT_EQ(contents(dir + "/keep.txt"), "kept");
  fs::remove_all(dir);
}

// A destination that is a directory: check_publishable refuses before
// anything changes; a rename failing part way through publish (the same
// obstacle, unchecked) keeps the files not moved in the staging directory
// and names them, the moved ones and where each set is.
TEST(Durable, AStagedMoveThatFailsPartWayKeepsWhatWasNotMoved) {
  const std::string dir = tmp("staging_obstacle");
  fs::remove_all(dir);
  fs::create_directories(dir + "/b.bin/inside");  // an obstacle: a non-empty directory named like a new file
  std::ofstream(dir + "/a.bin") << "old a";
  {
    TempPath s = TempPath::staging_dir(dir, ".stage");
    std::ofstream(s.path() + "/a.bin") << "new a";
    std::ofstream(s.path() + "/b.bin") << "new b";
    std::ofstream(s.path() + "/c.bin") << "new c";
    try {
      s.check_publishable();
      ADD_FAILURE() << "the obstacle was not found";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IO);
      EXPECT_TRUE(has(e.message(), "'" + dir + "/b.bin' is a directory: the new 'b.bin' cannot replace it")) << e.message();
    }
    EXPECT_EQ(contents(dir + "/a.bin"), "old a");  // nothing moved by the check
    try {
      s.publish();
      ADD_FAILURE() << "the move into a directory succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IO);
      EXPECT_TRUE(has(e.message(), "cannot move '" + dir + "/.stage/b.bin' to '" + dir + "/b.bin'")) << e.message();
      EXPECT_TRUE(has(e.message(), "moved into '" + dir + "' before it: a.bin; kept in '" + dir +
                                       "/.stage': b.bin, c.bin (move them into '" + dir + "' to complete it)"))
          << e.message();
    }
    EXPECT_FALSE(s.in_place());
  }
  EXPECT_EQ(contents(dir + "/a.bin"), "new a");
  EXPECT_EQ(listing(dir + "/.stage"), (std::vector<std::string>{"b.bin", "c.bin"}));  // kept past the destructor
  EXPECT_EQ(contents(dir + "/.stage/c.bin"), "new c");
  fs::remove_all(dir);
}

// The rename done, the directory sync failing: the message says that the
// new file is in place under its final name but may not survive a crash,
// and in_place() tells that failure from a failed write (the trainer then
// neither moves io.checkpoint nor prunes).
TEST(Durable, AFailedDirectorySyncAfterTheRenameSaysTheFileIsInPlace) {
  const std::string dir = tmp("unreadable"), target = dir + "/out.bin";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto fails = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IO);
      return e.message();
    }
    ADD_FAILURE() << "no error";
    return "";
  };
  auto said = [&](const std::string& err, const std::string& what) {
    const std::string cause = "cannot open directory '" + dir + "' to sync it to disk: " + std::strerror(EACCES);
    EXPECT_TRUE(has(err, what + ", but " + cause)) << err;
    EXPECT_TRUE(has(err, "may not survive a crash or power loss")) << err;
  };
  {
    test_tools::UnreadableDir unreadable(dir);
    if (!unreadable.ok()) GTEST_SKIP() << "cannot make a directory that this process cannot read";
    std::ofstream(target + ".tmp") << "one";
    said(fails([&] { rename_durably(target + ".tmp", target); }), "'" + target + "' is in place under its final name");
    EXPECT_EQ(contents(target), "one");
    EXPECT_FALSE(fs::exists(target + ".tmp"));
    {
      TempPath t(target);
      std::ofstream(t.path()) << "two";
      said(fails([&] { t.publish(); }), "'" + target + "' is in place under its final name");
      EXPECT_TRUE(t.in_place());
    }
    EXPECT_EQ(contents(target), "two");
    EXPECT_FALSE(fs::exists(target + ".tmp"));
    {
      TempPath s = TempPath::staging_dir(dir, ".stage");
      std::ofstream(s.path() + "/b.bin") << "b";
      std::ofstream(s.path() + "/a.bin") << "a";
      said(fails([&] { s.publish(); }),
           "the files moved into '" + dir + "' (a.bin, b.bin) are in place under their final names");
      EXPECT_TRUE(s.in_place());
    }
  }
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"a.bin", "b.bin", "out.bin"}));  // no temporary, no stage
  EXPECT_EQ(contents(dir + "/a.bin"), "a");
  EXPECT_EQ(contents(dir + "/b.bin"), "b");
  fs::remove_all(dir);
}

// The checkpoint path's pieces on their own: the verification of a written
// checkpoint before it is renamed into place (io.verify_checkpoint), and the
// fsync helpers every rename-into-place writer uses (core/durable.hpp).
#include "core/durable.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "tools/corrupt.hpp"
#include "train/checkpoint_files.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
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

// HDF5 layer and run log. Every rank works on its own file (HDF5's serial
// API), which also checks that ranks do not trip over each other.
#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/checksum.hpp"
#include "io/run_log.hpp"
#include "tools/file_size_limit.hpp"

#include <hdf5.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

using namespace burst;
using burst::io::H5File;

namespace {
std::string rank_path(const std::string& name) {
  const auto& rt = Runtime::current();
  return "/tmp/burst_test_h5_" + std::to_string(getppid()) + "_r" + std::to_string(rt.rank()) + "_" + name;
}
}  // namespace

TEST(H5, WritesAndReadsEveryType) {
  const std::string p = rank_path("types.h5");
  {
    H5File f = H5File::create(p);
    f.write("f32", std::vector<float>{1.5f, -2.0f, 3.25f, 0, 1, 2}, {2, 3});
    f.write("a/b/f64", std::vector<double>{M_PI, -1e300});
    f.write("i32", std::vector<std::int32_t>{-7, 1 << 30});
    f.write("i64", std::vector<std::int64_t>{-(1ll << 40), 5});
    f.write("u8", std::vector<std::uint8_t>{0, 255});
    f.write("u16", std::vector<std::uint16_t>{65535});
    f.write("bf", std::vector<bf16>{bf16(1.0f), bf16(-0.5f), bf16(3.0f)});
    f.write("empty", std::vector<float>{}, {0, 4});
    f.set_attr("/", "name", std::string("run-1"));
    f.set_attr("a/b/f64", "scale", 0.25);
    f.set_attr("a", "count", std::int64_t(42));
  }
  H5File f = H5File::open(p);
  io::Dims d;
  auto f32 = f.read<float>("f32", &d);
  EXPECT_EQ(d, (io::Dims{2, 3}));
  EXPECT_EQ(f32, (std::vector<float>{1.5f, -2.0f, 3.25f, 0, 1, 2}));
  EXPECT_EQ(f.read<double>("a/b/f64")[0], M_PI);
  EXPECT_EQ(f.read<std::int32_t>("i32")[1], 1 << 30);
  EXPECT_EQ(f.read<std::int64_t>("i64")[0], -(1ll << 40));
  EXPECT_EQ(f.read<std::uint8_t>("u8")[1], 255);
  EXPECT_EQ(f.read<std::uint16_t>("u16")[0], 65535);
  auto bf = f.read<bf16>("bf");
  EXPECT_EQ(float(bf[1]), -0.5f);
  EXPECT_EQ(f.dtype("bf"), "bfloat16");
  EXPECT_EQ(f.dtype("f32"), "float32");
  EXPECT_EQ(f.dtype("i64"), "int64");
  EXPECT_EQ(f.read<float>("empty", &d).size(), 0u);
  EXPECT_EQ(d, (io::Dims{0, 4}));
  // Numeric conversion on read: float32 data read as double.
  EXPECT_EQ(f.read<double>("f32")[2], 3.25);
  EXPECT_EQ(f.attr_string("/", "name"), "run-1");
  EXPECT_EQ(f.attr_double("a/b/f64", "scale"), 0.25);
  EXPECT_EQ(f.attr_int("a", "count"), 42);
  EXPECT_TRUE(f.exists("a/b"));
  EXPECT_FALSE(f.exists("a/c/d"));
  EXPECT_TRUE(f.is_dataset("a/b/f64"));
  EXPECT_FALSE(f.is_dataset("a/b"));  // a group
  EXPECT_FALSE(f.is_dataset("a/c/d"));
  EXPECT_FALSE(f.is_dataset(""));
  std::remove(p.c_str());
}

TEST(H5, ErrorsNameTheFileAndObject) {
  const std::string p = rank_path("errors.h5");
  {
    H5File f = H5File::create(p);
    f.write("x", std::vector<float>{1});
    f.write("bf", std::vector<bf16>{bf16(1.0f)});
  }
  H5File f = H5File::open(p);
  auto msg = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IO);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(msg([&] { f.read<float>("y"); }), "'" + p + "' has no dataset 'y'");
  EXPECT_EQ(msg([&] { f.read<float>("bf"); }),
            "dataset 'bf' in '" + p + "' holds bfloat16 (uint16 bits); read it as bf16 and convert");
  EXPECT_EQ(msg([&] { f.read<bf16>("x"); }), "dataset 'x' in '" + p + "' holds float32, not bfloat16");
  EXPECT_EQ(msg([&] { f.attr_string("x", "nope"); }), "'" + p + "': 'x' has no attribute 'nope'");
  EXPECT_EQ(msg([] { H5File::open("/nonexistent/dir/x.h5"); }),
            "'/nonexistent/dir/x.h5' is not an HDF5 file (missing, unreadable or another format)");
  EXPECT_EQ(msg([] { H5File::create("/nonexistent/dir/x.h5"); }),
            "cannot create HDF5 file '/nonexistent/dir/x.h5': No such file or directory (is the directory there and "
            "writable, with room?)");
  const std::string txt = rank_path("not_hdf5.txt");
  std::ofstream(txt) << "hello";
  EXPECT_EQ(msg([&] { H5File::open(txt); }), "'" + txt + "' is not an HDF5 file (missing, unreadable or another format)");
  std::remove(txt.c_str());
  std::remove(p.c_str());
}

// A dataset declaring more values than fit (a few bytes of a chunked file
// can declare [2^40]): Error(Input) naming the file, the dataset, the shape
// and the bytes, never std::bad_alloc naming nothing (or, for a product
// that overflows, a buffer too small for what HDF5 then writes into it).
TEST(H5, AHugeDeclaredShapeIsAnInputErrorNamingIt) {
  const std::string p = rank_path("huge.h5");
  auto declare = [&](const char* name, std::vector<hsize_t> dims) {
    H5File f = H5File::open(p, H5File::Mode::ReadWrite);
    std::vector<hsize_t> chunk(dims.size(), 1);
    hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, int(chunk.size()), chunk.data());
    hid_t d = H5Dcreate2(hid_t(f.id()), name, H5T_STD_I32LE, s, H5P_DEFAULT, pl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d), H5Pclose(pl), H5Sclose(s);
    f.close();
  };
  H5File::create(p).close();
  declare("tokens", {hsize_t(1) << 40});
  declare("square", {hsize_t(1) << 40, hsize_t(1) << 40});
  H5File f = H5File::open(p);
  auto input_error = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
      EXPECT_EQ(e.exit_code(), 2);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // 8 TiB: refused against the memory this process may use before any allocation (with overcommit an allocation of it
  // would not fail, zero-filling it would get the process killed).
  const std::string huge = input_error([&] { f.read<std::int64_t>("tokens"); });
  const std::string head = "dataset 'tokens' in '" + p + "' declares shape [1099511627776]: reading it needs "
                           "8796093022208 bytes (1099511627776 x int64), more than the ";
  EXPECT_EQ(huge.rfind(head, 0), 0u) << huge;
  EXPECT_NE(huge.find(" bytes of memory this process may use (a damaged or wrong file?)"), std::string::npos) << huge;
  EXPECT_NE(huge.find("more than the " + std::to_string(io::process_memory_limit()) + " bytes"), std::string::npos) << huge;
  EXPECT_EQ(input_error([&] { f.read<float>("square"); }),
            "dataset 'square' in '" + p + "' declares shape [1099511627776, 1099511627776]: more values than this process "
            "can address (a damaged or wrong file?)");
  EXPECT_EQ(f.dims("tokens"), (io::Dims{std::uint64_t(1) << 40}));  // the shape itself reads fine, for callers to check
  std::remove(p.c_str());
}

// The memory limit is measured once per process (a checkpoint's every
// dataset read asked the cgroup files and rlimits again): concurrent first
// calls agree, and the value is the machine's memory or less.
TEST(H5, ProcessMemoryLimitIsMeasuredOnce) {
  std::vector<std::uint64_t> seen(4);
  std::vector<std::thread> ts;
  for (std::size_t i = 0; i < seen.size(); ++i) ts.emplace_back([&seen, i] { seen[i] = io::process_memory_limit(); });
  for (auto& t : ts) t.join();
  for (std::uint64_t v : seen) EXPECT_EQ(v, seen[0]);
  EXPECT_EQ(io::process_memory_limit(), seen[0]);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) {
    EXPECT_GT(seen[0], 0u);
    EXPECT_LE(seen[0], std::uint64_t(pages) * std::uint64_t(page));
  }
}

TEST(H5, RunLogAppendsFillsNewColumnsAndResumes) {
  const std::string p = rank_path("log.h5");
  {
    H5File f = H5File::create(p);
    io::RunLog log(f);
    log.append({{"step", 0}, {"loss", 2.5}});
    log.append({{"step", 1}, {"loss", 2.0}, {"lr", 1e-3}});  // new column
    log.append({{"step", 2}, {"lr", 2e-3}});               // loss missing
    EXPECT_EQ(log.rows(), 3u);
  }
  {
    H5File f = H5File::open(p, H5File::Mode::ReadWrite);
    io::RunLog log(f);  // resumes after the rows already there
    EXPECT_EQ(log.rows(), 3u);
    EXPECT_EQ(log.columns(), (std::vector<std::string>{"step", "loss", "lr"}));
    log.append({{"step", 3}, {"loss", 1.0}, {"lr", 3e-3}});
  }
  H5File f = H5File::open(p);
  auto step = f.read<double>("log/step"), loss = f.read<double>("log/loss"), lr = f.read<double>("log/lr");
  EXPECT_EQ(step, (std::vector<double>{0, 1, 2, 3}));
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(loss[0], 2.5);
  EXPECT_TRUE(std::isnan(loss[2]));
  EXPECT_EQ(loss[3], 1.0);
  ASSERT_EQ(lr.size(), 4u);
  EXPECT_TRUE(std::isnan(lr[0]));
  EXPECT_EQ(lr[3], 3e-3);
  EXPECT_EQ(f.attr_int("log", "rows"), 4);
  std::remove(p.c_str());
}

// --resume appends to a run log only: one HDF5 cannot read (a damaged,
// truncated file) or one that is not a run log (a checkpoint copied there)
// is named with what to do (was: "cannot open ... for writing", read as a
// permissions problem, or the log silently appended into the checkpoint).
TEST(H5, RunLogIsRecognisedBeforeItIsContinued) {
  const std::string legacy = rank_path("legacy_log.h5"), marked = rank_path("marked_log.h5"), ck = rank_path("ck_as_log.h5"),
                    cut = rank_path("cut_log.h5");
  {
    H5File f = H5File::create(legacy);  // a log as written before the content attribute
    io::RunLog log(f);
    for (int i = 0; i < 50; ++i) log.append({{"step", double(i)}, {"loss", 1.0}});
    f.close();
  }
  {
    H5File f = H5File::create(marked);
    f.set_attr("/", "content", std::string(io::kRunLogContent));
    io::RunLog log(f);
    f.close();
  }
  {
    H5File f = H5File::create(ck);  // what a checkpoint holds
    f.write("params/w", std::vector<float>{1, 2});
    f.set_attr("/", "format_version", std::int64_t(2));
    f.close();
  }
  EXPECT_TRUE(io::is_run_log(H5File::open(legacy)));
  EXPECT_TRUE(io::is_run_log(H5File::open(marked)));
  EXPECT_FALSE(io::is_run_log(H5File::open(ck)));
  EXPECT_EQ(io::resume_run_log_problem(legacy), "");
  EXPECT_EQ(io::resume_run_log_problem(marked), "");
  EXPECT_EQ(io::resume_run_log_problem(rank_path("no_such_log.h5")), "");  // a new log
  EXPECT_NE(io::resume_run_log_problem(ck).find("the existing io.run_log = '" + ck +
                                                "' is not a run log (it is a checkpoint or weights file of this engine): "
                                                "--resume would append the log into it: move it away or set io.run_log"),
            std::string::npos)
      << io::resume_run_log_problem(ck);
  std::filesystem::copy_file(legacy, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) / 2);
  EXPECT_NE(io::resume_run_log_problem(cut).find("the existing run log '" + cut +
                                                 "' (io.run_log) is not a readable HDF5 file (damaged? "),
            std::string::npos)
      << io::resume_run_log_problem(cut);
  EXPECT_NE(io::resume_run_log_problem(cut).find("move it away or set io.run_log to a new path"), std::string::npos);
  for (const auto& p : {legacy, marked, ck, cut}) std::remove(p.c_str());
}

TEST(H5, RunLogTruncateDropsTheRowsAfterACheckpoint) {
  const std::string p = rank_path("log_trunc.h5");
  {
    H5File f = H5File::create(p);
    io::RunLog log(f);
    for (int i = 0; i < 5; ++i) log.append({{"step", double(i)}, {"loss", 10.0 - i}});
    log.truncate(3);  // a resume from the checkpoint after step 3 repeats steps 3 and 4
    log.truncate(7);  // more rows than there are: nothing to drop
    EXPECT_EQ(log.rows(), 3u);
  }
  {
    H5File f = H5File::open(p, H5File::Mode::ReadWrite);
    io::RunLog log(f);
    EXPECT_EQ(log.rows(), 3u);
    log.append({{"step", 3}, {"loss", 6.5}});
  }
  H5File f = H5File::open(p);
  EXPECT_EQ(f.read<double>("log/step"), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(f.read<double>("log/loss"), (std::vector<double>{10, 9, 8, 6.5}));
  std::remove(p.c_str());
}

TEST(Checksum, Fnv1a64MatchesTheReferenceValues) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(io::hex64(io::fnv1a64("", 0)), "cbf29ce484222325");
  EXPECT_EQ(io::hex64(io::fnv1a64("a", 1)), "af63dc4c8601ec8c");
  EXPECT_EQ(io::hex64(io::fnv1a64("foobar", 6)), "85944171f73967e8");
  // Running form: two pieces hash like the whole.
  EXPECT_EQ(io::fnv1a64("bar", 3, io::fnv1a64("foo", 3)), io::fnv1a64("foobar", 6));
}

// ------------------------------------------------------------ failed writes
// A write that cannot reach the disk is an error naming the file and the
// cause, never silence (HDF5 writes much of a file only at close) nor a
// crash at exit (HDF5 1.10 cannot close a file whose flush failed). A file
// size limit fails writes as a full disk does (EFBIG instead of ENOSPC);
// it also holds for the memory file a failed file's last writes are diverted
// to, so these take the last resort (the file abandoned to the OS, H5close
// skipped at exit), and the test binary's clean exit is part of the test.
// The diversion itself is tested on a real full disk by
// cli_checkpoint_disk_full_np* (where root may mount a tmpfs).
namespace {
using test_tools::FileSizeLimit;

std::string io_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IO) << e.what();
    return e.what();
  }
  return "(no error)";
}

// The library still writes and reads a file after a failed one.
void expect_hdf5_still_works(const std::string& p) {
  {
    H5File f = H5File::create(p);
    f.write("x", std::vector<double>{1, 2, 3});
    f.close();
  }
  EXPECT_EQ(H5File::open(p).read<double>("x"), (std::vector<double>{1, 2, 3}));
  std::remove(p.c_str());
}
}  // namespace

TEST(H5, CloseOfAFileThatDoesNotFitIsAnError) {
  const std::string p = rank_path("too_big.h5");
  std::string err;
  {
    FileSizeLimit limit(16 * 1024);
    H5File f = H5File::create(p);
    // Small datasets stay in HDF5's caches: every write succeeds, the disk is reached only at close.
    for (int i = 0; i < 8; ++i) f.write("d" + std::to_string(i), std::vector<float>(1024, float(i)));
    err = io_error([&] { f.close(); });
    EXPECT_FALSE(f.is_open());
    EXPECT_EQ(io_error([&] { f.close(); }), "(no error)");  // closed either way; a second close is a no-op
  }
  EXPECT_EQ(err, "cannot write HDF5 file '" + p + "': " + std::strerror(EFBIG) + " (the file is incomplete)");
  expect_hdf5_still_works(p);
}

TEST(H5, FailedDatasetWriteNamesTheCauseAndCloseReportsIt) {
  const std::string p = rank_path("too_big_write.h5");
  {
    FileSizeLimit limit(64 * 1024);
    H5File f = H5File::create(p);
    // A large dataset goes to the disk at once: the write itself fails.
    EXPECT_EQ(io_error([&] { f.write("big", std::vector<double>(100000, 1.0)); }),
              "cannot write dataset 'big' in '" + p + "': " + std::strerror(EFBIG));
    EXPECT_NE(io_error([&] { f.close(); }).find("cannot write HDF5 file '" + p + "': " + std::strerror(EFBIG)),
              std::string::npos);
  }
  {
    FileSizeLimit limit(64 * 1024);
    H5File f = H5File::create(p);
    EXPECT_THROW(f.write("big", std::vector<double>(100000, 1.0)), Error);
    // no close(): the destructor closes without throwing (a warning on stderr at most)
  }
  expect_hdf5_still_works(p);
}

// The columns' next chunk (row kChunk + 1) is allocated when the columns are
// extended, before the flush (H5D_ALLOC_TIME_EARLY): a full disk is found by
// the space reservation, and the rows flushed before stay readable.
TEST(H5, RunLogNextChunkThatDoesNotFitKeepsTheRowsBefore) {
  const std::string p = rank_path("log_next_chunk.h5");
  const int rows = 256;  // the run log's chunk (kChunk, src/io/run_log.cpp)
  {
    H5File f = H5File::create(p);
    io::RunLog log(f);
    for (int i = 0; i < rows; ++i) log.append({{"step", double(i)}, {"loss", 1.0 / (i + 1)}});
    FileSizeLimit limit(std::filesystem::file_size(p));
    const std::string err = io_error([&] { log.append({{"step", double(rows)}, {"loss", 0.5}}); });
    // Found by the reservation before the flush (chunks allocated at the extension), not by a failed flush
    // ("the file is incomplete").
    EXPECT_NE(err.find("'" + p + "': " + std::strerror(EFBIG) + " (the file keeps what was written before)"),
              std::string::npos)
        << err;
  }
  H5File f = H5File::open(p);
  const std::vector<double> step = f.read<double>("log/step");
  ASSERT_GE(step.size(), size_t(rows));
  for (int i = 0; i < rows; ++i) EXPECT_EQ(step[size_t(i)], double(i));
  std::remove(p.c_str());
  expect_hdf5_still_works(p);
}

TEST(H5, RunLogFlushThatDoesNotFitIsAnError) {
  const std::string p = rank_path("log_too_big.h5");
  {
    H5File f = H5File::create(p);
    io::RunLog log(f);
    log.append({{"step", 0}, {"loss", 2.5}});  // flushed: on disk before the limit
    {
      FileSizeLimit limit(std::filesystem::file_size(p));
      std::string err;
      for (int i = 1; i < 4 && err.empty(); ++i) {
        std::vector<std::pair<std::string, double>> row = {{"step", double(i)}};
        for (int c = 0; c < 40; ++c) row.push_back({"column_" + std::to_string(c), double(c)});  // new chunks: the file grows
        try {
          log.append(row);
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::IO);
          err = e.what();
        }
      }
      EXPECT_NE(err.find("'" + p + "': " + std::strerror(EFBIG)), std::string::npos) << err;
      EXPECT_NE(io_error([&] { f.close(); }), "(no error)");
    }
  }
  // What the last successful flush wrote is still there.
  H5File f = H5File::open(p);
  EXPECT_EQ(f.read<double>("log/step"), (std::vector<double>{0}));
  std::remove(p.c_str());
  expect_hdf5_still_works(p);
}

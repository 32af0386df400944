// Training end to end on the passkey task at every registered rank count
// (ranks are data-parallel replicas): the loss trace is the same whatever
// the rank count in double (the global batch is the same sequences), and a
// run stopped at a checkpoint and resumed reproduces the uninterrupted one
// bit for bit. Rank 0's checks run in `if (rt.rank() == 0) [&] { ... }();`:
// a failed ASSERT returns from the lambda, not from the test, so rank 0 still
// reaches the collectives after it (a return there would leave the other
// ranks waiting in them until comm.timeout_s).
#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "data/source.hpp"
#include "io/h5.hpp"
#include "model/config.hpp"
#include "tools/corrupt.hpp"
#include "tools/file_size_limit.hpp"
#include "tools/unreadable_dir.hpp"
#include "train/checkpoint_files.hpp"
#include "train/trainer.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <unistd.h>

using namespace burst;

namespace {
std::string tmp(const std::string& name) {
  // One name per test run, shared by the ranks (rank 0 writes).
  return "/tmp/burst_test_train_" + std::to_string(getppid()) + "_" + name;
}

Config config(const std::vector<std::string>& sets) {
  ConfigSchema s = train_schema();
  Config c = s.defaults();
  for (const char* kv : {"train.dtype=double", "train.steps=12", "train.seq_len=32", "train.batch=4", "data.digits=2",
                         "train.warmup=3", "train.eval_every=0", "train.eval_sequences=4", "train.log_every=1000",
                         // the tests reuse their temporary files run after run (NewRunKeepsAnEarlierRunsFiles: false)
                         "io.overwrite=true"})
    s.apply_override(c, kv);
  for (auto& kv : sets) s.apply_override(c, kv);
  s.validate(c);
  return c;
}

std::vector<double> losses(const std::string& log) {
  io::H5File f = io::H5File::open(log);
  return f.read<double>("log/loss");
}

// A checkpoint path and its step files.
void remove_checkpoints(const std::string& ck) {
  for (auto& [step, file] : list_step_checkpoints(ck)) std::remove(file.c_str());
  std::remove(ck.c_str());
}
}  // namespace

TEST(Train, ResumeContinuesBitForBit) {
  auto& rt = Runtime::current();
  const std::string full = tmp("full.h5"), part = tmp("part.h5"), ck = tmp("ckpt.h5");
  train(rt, config({"io.run_log=" + full}), false);
  train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.stop_after=5"}), false);
  TrainResult r = train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck}), true);
  EXPECT_EQ(r.steps_done, 12);
  if (rt.rank() == 0) [&] {
    std::vector<double> a = losses(full), b = losses(part);
    ASSERT_EQ(a.size(), 12u);
    ASSERT_EQ(b.size(), 12u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i;  // bit for bit
    EXPECT_LT(a.back(), a.front());  // and it learns something
    io::H5File f = io::H5File::open(ck);
    EXPECT_EQ(f.attr_int("/", "step"), 12);
    EXPECT_EQ(f.dims("params/model.layers.1.self_attn.k_proj.weight"), (io::Dims{32, 64}));
    std::remove(full.c_str());
    std::remove(part.c_str());
    remove_checkpoints(ck);
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, LossTraceIsTheSameAtEveryRankCount) {
  // The global batch (4 sequences) is the same set of sequences whatever the
  // rank count: the P-rank run must match a 1-rank run made here on rank 0
  // alone (MPI_COMM_SELF), up to summation order.
  auto& rt = Runtime::current();
  if (4 % rt.size() != 0) GTEST_SKIP() << "4 sequences do not divide over " << rt.size() << " ranks";
  const std::string one = tmp("one.h5"), many = tmp("many.h5");
  if (rt.rank() == 0) train(rt, config({"io.run_log=" + one}), false, MPI_COMM_SELF);
  train(rt, config({"io.run_log=" + many}), false);
  if (rt.rank() == 0) [&] {
    std::vector<double> a = losses(one), b = losses(many);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << "step " << i;
    std::remove(one.c_str());
    std::remove(many.c_str());
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, RefusesACheckpointOfAnotherModel) {
  auto& rt = Runtime::current();
  const std::string ck = tmp("other.h5");
  const std::string other = tmp("other_config.json");
  if (rt.rank() == 0) {
    FILE* f = std::fopen(other.c_str(), "w");
    std::fputs(R"({"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "intermediate_size": 48})", f);
    std::fclose(f);
  }
  train(rt, config({"io.checkpoint=" + ck, "train.steps=1"}), false);
  MPI_Barrier(rt.world());
  try {
    train(rt, config({"io.checkpoint=" + ck, "model.config=" + other}), true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("holds another model"), std::string::npos) << e.what();
  }
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) remove_checkpoints(ck), std::remove(other.c_str());
}

// A new run (no --resume) does not replace an earlier run's log, checkpoint
// or step files unless io.overwrite; the run log is never one of the
// checkpoint's files. (A forgotten --resume once wiped a run's log and its
// newer checkpoints: prune_checkpoints removes step files past the new
// run's step.)
TEST(Train, NewRunKeepsAnEarlierRunsFiles) {
  auto& rt = Runtime::current();
  const std::string ck = tmp("guard.h5"), log = tmp("guard_log.h5");
  if (rt.rank() == 0) remove_checkpoints(ck), std::remove(log.c_str());
  MPI_Barrier(rt.world());
  train(rt, config({"io.checkpoint=" + ck, "io.run_log=" + log, "train.steps=6", "io.checkpoint_every=2",
                    "io.overwrite=false"}), false);
  MPI_Barrier(rt.world());
  auto refused = [&](const std::vector<std::string>& sets, const std::string& says) {
    try {
      train(rt, config(sets), false);
      ADD_FAILURE() << "no error for " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  // the same paths again, no --resume: refused, nothing touched
  refused({"io.checkpoint=" + ck, "io.run_log=" + log, "train.steps=2", "io.overwrite=false"}, "--resume");
  refused({"io.checkpoint=" + ck, "train.steps=2", "io.overwrite=false"}, "the checkpoint '" + ck + "'");
  refused({"io.run_log=" + log, "train.steps=2", "io.overwrite=false"}, "the run log '" + log + "'");
  if (rt.rank() == 0) [&] {
    ASSERT_EQ(list_step_checkpoints(ck).size(), 2u);  // steps 6 and 4 (keep_last 2)
    EXPECT_EQ(list_step_checkpoints(ck)[0].first, 6);
    EXPECT_EQ(losses(log).size(), 6u);
  }();
  // the run log as one of the checkpoint's files: refused even with io.overwrite
  refused({"io.checkpoint=" + ck, "io.run_log=" + ck, "io.overwrite=true"}, "one of the checkpoint's files");
  refused({"io.checkpoint=" + ck, "io.run_log=" + checkpoint_step_path(ck, 2), "io.overwrite=true"},
          "one of the checkpoint's files");
  // --resume continues them; io.overwrite replaces them (the old step files go first)
  train(rt, config({"io.checkpoint=" + ck, "io.run_log=" + log, "train.steps=8", "io.overwrite=false"}), true);
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) EXPECT_EQ(losses(log).size(), 8u);
  train(rt, config({"io.checkpoint=" + ck, "io.run_log=" + log, "train.steps=2", "io.overwrite=true"}), false);
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) [&] {
    auto files = list_step_checkpoints(ck);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0].first, 2);
    EXPECT_EQ(losses(log).size(), 2u);
    remove_checkpoints(ck), std::remove(log.c_str());
  }();
}

TEST(Train, KeepsTheLastKCheckpointsAndPublishesTheNewest) {
  auto& rt = Runtime::current();
  const std::string ck = tmp("keep.h5");
  train(rt, config({"io.checkpoint=" + ck, "train.steps=6", "io.checkpoint_every=1", "io.keep_last=3"}), false);
  if (rt.rank() == 0) [&] {
    auto files = list_step_checkpoints(ck);
    ASSERT_EQ(files.size(), 3u);
    EXPECT_EQ(files[0].first, 6);
    EXPECT_EQ(files[2].first, 4);
    EXPECT_EQ(files[0].second, checkpoint_step_path(ck, 6));
    EXPECT_TRUE(std::filesystem::equivalent(ck, files[0].second));  // the configured path is the newest
    io::H5File f = io::H5File::open(ck);
    EXPECT_EQ(f.attr_int("/", "format_version"), 2);
    EXPECT_EQ(f.attr_string("params/model.norm.weight", "fnv1a64").size(), 16u);
    remove_checkpoints(ck);
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, ResumeFallsBackToThePreviousCheckpointWhenTheNewestIsDamaged) {
  auto& rt = Runtime::current();
  const std::string full = tmp("fb_full.h5"), part = tmp("fb_part.h5"), ck = tmp("fb_ckpt.h5");
  train(rt, config({"io.run_log=" + full, "train.steps=8"}), false);
  train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.steps=8", "train.stop_after=6",
                    "io.checkpoint_every=1"}), false);
  if (rt.rank() == 0) [&] {
    const std::string err = test_tools::flip_dataset_byte(checkpoint_step_path(ck, 6), "optim/v/model.layers.1.mlp.up_proj.weight");
    ASSERT_EQ(err, "");
  }();
  MPI_Barrier(rt.world());
  // Steps 5 and 6 run again (from the step-5 checkpoint) and their old log
  // rows are replaced: the trace is that of the uninterrupted run.
  TrainResult r = train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.steps=8"}), true);
  EXPECT_EQ(r.steps_done, 8);
  if (rt.rank() == 0) [&] {
    std::vector<double> a = losses(full), b = losses(part);
    ASSERT_EQ(b.size(), 8u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i;
  }();
  MPI_Barrier(rt.world());
  // With every checkpoint damaged the run stops, naming the dataset.
  if (rt.rank() == 0) {
    for (auto& [step, file] : list_step_checkpoints(ck)) test_tools::flip_dataset_byte(file, "params/model.norm.weight");
  }
  MPI_Barrier(rt.world());
  try {
    train(rt, config({"io.checkpoint=" + ck, "train.steps=9"}), true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(e.message().find("no usable checkpoint"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("dataset 'params/model.norm.weight'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("fails its checksum"), std::string::npos) << e.message();
  }
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) std::remove(full.c_str()), std::remove(part.c_str()), remove_checkpoints(ck);
  MPI_Barrier(rt.world());
}

// A checkpoint that cannot be written whole (a file size limit on the
// writing rank: writes fail with EFBIG as they fail with ENOSPC on a full
// disk) stops the run on every rank with Error(IO) naming the file and the
// cause; its temporary file goes, the earlier checkpoint and the published
// path stay as they were, and --resume goes on from them. (HDF5's failing
// close was ignored: the incomplete file was renamed into place, published,
// the good one rotated away, and the process crashed at exit.)
TEST(Train, ACheckpointThatCannotBeWrittenKeepsTheEarlierOnes) {
  auto& rt = Runtime::current();
  const std::string ck = tmp("nospace.h5"), step1 = checkpoint_step_path(ck, 1), step2 = checkpoint_step_path(ck, 2);
  const std::vector<std::string> sets = {"io.checkpoint=" + ck, "train.steps=3", "io.checkpoint_every=1", "io.keep_last=1"};
  if (rt.rank() == 0) remove_checkpoints(ck);
  MPI_Barrier(rt.world());
  auto with = [&](std::vector<std::string> s, const std::string& extra) { s.push_back(extra); return s; };
  train(rt, config(with(sets, "train.stop_after=1")), false);
  MPI_Barrier(rt.world());
  auto bytes = [](const std::string& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string good = rt.rank() == 0 ? bytes(step1) : "";
  {
    std::unique_ptr<test_tools::FileSizeLimit> limit;
    if (rt.rank() == 0) limit = std::make_unique<test_tools::FileSizeLimit>(good.size() / 2);
    try {
      train(rt, config(sets), true);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IO);
      EXPECT_EQ(e.exit_code(), 1);
      EXPECT_TRUE(e.collective());  // every rank stops with it; rank 0 says it
      if (rt.rank() == 0) {
        EXPECT_NE(e.message().find("the checkpoint of step 2 could not be written: cannot write HDF5 file '" + step2 +
                                   ".tmp': " + std::strerror(EFBIG)),
                  std::string::npos)
            << e.message();
        EXPECT_NE(e.message().find("the earlier checkpoints are kept (the newest: '" + step1 + "')"), std::string::npos)
            << e.message();
      }
    }
  }
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) [&] {
    auto files = list_step_checkpoints(ck);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0].second, step1);
    EXPECT_EQ(bytes(step1), good);
    EXPECT_TRUE(std::filesystem::equivalent(ck, step1));
    EXPECT_FALSE(std::filesystem::exists(step2 + ".tmp"));
  }();
  TrainResult r = train(rt, config(sets), true);
  EXPECT_EQ(r.steps_done, 3);
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) {
    EXPECT_EQ(list_step_checkpoints(ck).at(0).first, 3);
    remove_checkpoints(ck);
  }
  MPI_Barrier(rt.world());
}

// A checkpoint renamed into place whose directory cannot be synced after
// the rename (here: rank 0 cannot read the directory, tools/unreadable_dir.hpp):
// the run stops saying that the new step file is in place but may not
// survive a crash; io.checkpoint is not moved to it and no older checkpoint
// is pruned (io.keep_last = 1 would remove step 1's).
TEST(Train, ACheckpointWhoseDirectoryCannotBeSyncedPrunesNothing) {
  auto& rt = Runtime::current();
  const std::string dir = tmp("unsynced"), ck = dir + "/ck.h5", step1 = checkpoint_step_path(ck, 1),
                    step2 = checkpoint_step_path(ck, 2);
  const std::vector<std::string> sets = {"io.checkpoint=" + ck, "train.steps=3", "io.checkpoint_every=1", "io.keep_last=1"};
  if (rt.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  MPI_Barrier(rt.world());
  auto with = [&](std::vector<std::string> s, const std::string& extra) { s.push_back(extra); return s; };
  train(rt, config(with(sets, "train.stop_after=1")), false);
  MPI_Barrier(rt.world());
  int ok = 1;
  {
    // --resume finds the checkpoint through ck.h5 itself: rank 0 cannot list the step files now.
    std::unique_ptr<test_tools::UnreadableDir> unreadable;
    if (rt.rank() == 0) {
      unreadable = std::make_unique<test_tools::UnreadableDir>(dir);
      ok = unreadable->ok();
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, rt.world());
    if (ok) {
      try {
        train(rt, config(sets), true);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::IO);
        EXPECT_TRUE(e.collective());
        if (rt.rank() == 0) {
          const std::string cause = "cannot open directory '" + dir + "' to sync it to disk: " + std::strerror(EACCES);
          EXPECT_NE(e.message().find("the checkpoint of step 2: '" + step2 + "' is in place under its final name, but " +
                                     cause + ": it may not survive a crash or power loss; '" + ck +
                                     "' is not moved to it and the older checkpoints are kept (none removed)"),
                    std::string::npos)
              << e.message();
        }
      }
    }
  }
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) {
    if (ok) {
      EXPECT_EQ(list_step_checkpoints(ck).size(), 2u);
      EXPECT_TRUE(std::filesystem::exists(step1) && std::filesystem::exists(step2));
      EXPECT_TRUE(std::filesystem::equivalent(ck, step1));
      EXPECT_FALSE(std::filesystem::exists(step2 + ".tmp"));
    }
    std::filesystem::remove_all(dir);
  }
  MPI_Barrier(rt.world());
  if (!ok) GTEST_SKIP() << "cannot make a directory that rank 0 cannot read";
}

// io.verify_checkpoint: every mode writes, checks and publishes the
// checkpoints (the checks themselves: test_checkpoint.cpp); another value
// is bad input naming the allowed ones.
TEST(Train, EveryCheckpointVerificationPublishesTheCheckpoints) {
  auto& rt = Runtime::current();
  for (const char* how : {"structure", "checksum", "off"}) {
    const std::string ck = tmp(std::string("verify_") + how + ".h5");
    TrainResult r = train(rt, config({"io.checkpoint=" + ck, "train.steps=2", "io.checkpoint_every=1",
                                      std::string("io.verify_checkpoint=") + how}), false);
    EXPECT_EQ(r.steps_done, 2);
    MPI_Barrier(rt.world());
    if (rt.rank() == 0) [&] {
      const auto files = list_step_checkpoints(ck);
      ASSERT_EQ(files.size(), 2u) << how;
      EXPECT_TRUE(std::filesystem::equivalent(ck, files[0].second)) << how;
      EXPECT_FALSE(std::filesystem::exists(files[0].second + ".tmp")) << how;
      remove_checkpoints(ck);
    }();
    MPI_Barrier(rt.world());
  }
  try {
    config({"io.verify_checkpoint=full"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(e.message().find("io.verify_checkpoint = \"full\" at --set is not allowed: must be one of structure, checksum, off"),
              std::string::npos)
        << e.message();
  }
}

// A whole checkpoint that a rank refuses after reading it (a tensor of
// another shape: Error(Input)) ends the run on every rank with the same
// collective error, agreed before anyone throws: one message and status 2.
// (Each rank threw its own at once; ranks that reached it more than 10 s
// apart, after long reads, missed the exit's agreement and aborted the job
// with a line each. When only one rank refused it, the others waited in the
// checkpoint agreement until comm.timeout_s and aborted.)
TEST(Train, ACheckpointTheRanksRefuseEndsTheRunWithOneAgreedError) {
  auto& rt = Runtime::current();
  const std::string good = tmp("refuse_good.h5"), bad = tmp("refuse_bad.h5");
  train(rt, config({"io.checkpoint=" + good, "train.steps=1"}), false);
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) {
    std::filesystem::copy_file(good, bad, std::filesystem::copy_options::overwrite_existing);
    io::H5File f = io::H5File::open(bad, io::H5File::Mode::ReadWrite);
    f.write("params/model.norm.weight", std::vector<double>{1, 2, 3}, {3});
    f.close();
  }
  MPI_Barrier(rt.world());
  auto refused = [&](const std::string& ck) -> Error {
    try {
      train(rt, config({"io.checkpoint=" + ck, "train.steps=2", "comm.timeout_s=60"}), true);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error(ErrorKind::Internal, "");
  };
  // Every rank reads the bad file.
  Error e = refused(bad);
  EXPECT_EQ(e.kind(), ErrorKind::Input);
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_TRUE(e.collective());
  const std::string want = "checkpoint '" + bad + "': params/model.norm.weight is [3], expected [";
  EXPECT_EQ(e.message().rfind(want, 0), 0u) << e.message();
  // Only the last rank is pointed at the bad file (the others at the good
  // one): every rank tries rank 0's candidates (the ranks could list
  // different files on node-local storage), so all resume from the good
  // checkpoint at its step, and none from the bad one. (This was the last
  // rank alone refusing the file; a rank that alone cannot read one of rank
  // 0's candidates fails that attempt, which the ranks agree on as above.)
  const int last = rt.size() - 1;
  if (last > 0) {
    try {
      const TrainResult r = train(
          rt, config({"io.checkpoint=" + std::string(rt.rank() == last ? bad : good), "train.steps=2", "comm.timeout_s=60"}),
          true);
      EXPECT_EQ(r.steps_done, 2);
    } catch (const Error& x) {
      ADD_FAILURE() << "rank " << rt.rank() << ": " << x.message();
    }
  }
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) remove_checkpoints(good), std::remove(bad.c_str());
  MPI_Barrier(rt.world());
}

TEST(Train, NonFiniteSkipDropsTheStepWithoutAnUpdate) {
  auto& rt = Runtime::current();
  const std::string log = tmp("skip_log.h5"), a = tmp("skip_a.h5"), b = tmp("skip_b.h5");
  // Run a: steps 0..2. Run b: steps 0..3 with a NaN in a gradient at step 3,
  // skipped: its parameters must be those of run a, bit for bit.
  train(rt, config({"io.checkpoint=" + a, "train.stop_after=3"}), false);
  TrainResult r = train(rt, config({"io.checkpoint=" + b, "io.run_log=" + log, "train.stop_after=4",
                                    "debug.inject_nan_step=3", "train.on_nonfinite=skip"}), false);
  EXPECT_EQ(r.skipped_steps, 1);
  EXPECT_EQ(r.steps_done, 4);
  if (rt.rank() == 0) {
    io::H5File fa = io::H5File::open(a), fb = io::H5File::open(b), fl = io::H5File::open(log);
    EXPECT_EQ(fl.read<double>("log/skipped"), (std::vector<double>{0, 0, 0, 1}));
    EXPECT_TRUE(std::isnan(fl.read<double>("log/grad_norm")[3]));
    for (const char* t : {"params/model.layers.0.self_attn.q_proj.weight", "params/model.norm.weight", "optim/m/lm_head.weight"})
      EXPECT_EQ(fa.read<double>(t), fb.read<double>(t)) << t;
    std::remove(log.c_str()), remove_checkpoints(a), remove_checkpoints(b);
  }
  MPI_Barrier(rt.world());
}

TEST(Train, NonFiniteAbortNamesTheStepAndTensorAndCheckpoints) {
  auto& rt = Runtime::current();
  const std::string ck = tmp("abort.h5");
  try {
    train(rt, config({"io.checkpoint=" + ck, "debug.inject_nan_step=2",
                      "debug.inject_nan_tensor=model.layers.1.mlp.down_proj.weight"}), false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Numeric);
    EXPECT_EQ(e.exit_code(), 3);
    EXPECT_TRUE(e.collective());  // found after a global reduction: every rank stops together
    EXPECT_NE(e.message().find("step 2: the gradient of model.layers.1.mlp.down_proj.weight is not finite"), std::string::npos)
        << e.message();
  }
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) {
    io::H5File f = io::H5File::open(ck);
    EXPECT_EQ(f.attr_int("/", "step"), 2);  // the state before the faulty step
    remove_checkpoints(ck);
  }
  MPI_Barrier(rt.world());
}

TEST(Train, SequenceParallelPoliciesAndFusedLossKeepTheLossTrace) {
  // The same 12 steps under sequence parallelism (cp = all ranks, and
  // dp = 2 x cp = 2 at 4 ranks), every activation policy and the fused LM
  // head: the loss trace equals a 1-rank run with every activation kept and
  // the plain head (double precision, 1e-9).
  auto& rt = Runtime::current();
  const int P = rt.size();
  const std::string one = tmp("sp_one.h5"), many = tmp("sp_many.h5");
  if (rt.rank() == 0) train(rt, config({"io.run_log=" + one}), false, MPI_COMM_SELF);
  MPI_Barrier(rt.world());
  std::vector<std::vector<std::string>> runs = {
      {"parallel.cp=" + std::to_string(P), "parallel.method=burst"},
      {"parallel.cp=" + std::to_string(P), "parallel.method=burst", "train.activation=whole", "train.loss_chunk=8"},
      {"parallel.cp=" + std::to_string(P), "parallel.method=ring", "train.activation=full", "train.loss_chunk=5"},
      {"parallel.cp=" + std::to_string(P), "parallel.method=burst", "train.activation=half"},
      {"parallel.cp=1", "train.activation=half", "train.loss_chunk=3"},
  };
  if (P == 4) runs.push_back({"parallel.cp=2", "parallel.method=burst", "train.activation=whole", "train.loss_chunk=7"});
  // ZeRO over all ranks, each stage, with and without the host AdamW.
  runs.push_back({"train.zero=1"});
  runs.push_back({"train.zero=2", "parallel.cp=" + std::to_string(P), "train.activation=whole"});
  runs.push_back({"train.zero=3", "parallel.cp=" + std::to_string(P), "train.activation=full", "train.loss_chunk=6"});
  runs.push_back({"train.zero=3", "train.offload=true"});
  runs.push_back({"train.zero=2", "train.offload=true", "train.activation=half"});
  for (auto sets : runs) {
    std::string what;
    for (auto& s : sets) what += s + " ";
    sets.push_back("io.run_log=" + many);
    train(rt, config(sets), false);
    if (rt.rank() == 0) [&] {
      std::vector<double> a = losses(one), b = losses(many);
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << what << "step " << i;
      io::H5File f = io::H5File::open(many);
      EXPECT_EQ(f.attr_string("/", "activation"), config(sets).get_string("train.activation"));
    }();
    MPI_Barrier(rt.world());
  }
  if (rt.rank() == 0) std::remove(one.c_str()), std::remove(many.c_str());
  MPI_Barrier(rt.world());
}

TEST(Train, SequenceParallelSizeMustDivideTheRanks) {
  auto& rt = Runtime::current();
  try {
    train(rt, config({"parallel.cp=" + std::to_string(rt.size() + 1)}), false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("parallel.cp"), std::string::npos) << e.what();
  }
}

TEST(Train, ResumesAtAnotherRankCountAndZeroStage) {
  // Checkpoints hold whole tensors: a run stopped at step 5 under ZeRO-3 and
  // sequence parallelism over every rank continues on one rank without ZeRO
  // (and the other way round) with the loss trace of an uninterrupted run.
  auto& rt = Runtime::current();
  const int P = rt.size();
  const std::string full = tmp("rz_full.h5"), part = tmp("rz_part.h5"), ck = tmp("rz_ckpt.h5");
  if (rt.rank() == 0) train(rt, config({"io.run_log=" + full}), false, MPI_COMM_SELF);
  const std::string cp = "parallel.cp=" + std::to_string(P);
  train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.stop_after=5", "train.zero=3", cp}), false);
  if (rt.rank() == 0) train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.stop_after=4"}), true, MPI_COMM_SELF);
  MPI_Barrier(rt.world());
  train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.zero=2", cp, "train.activation=whole"}), true);
  if (rt.rank() == 0) [&] {
    std::vector<double> a = losses(full), b = losses(part);
    ASSERT_EQ(a.size(), 12u);
    ASSERT_EQ(b.size(), 12u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << "step " << i;
    std::remove(full.c_str());
    std::remove(part.c_str());
    remove_checkpoints(ck);
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, CurriculumTrainsShortFirstAndEvaluatesAtEveryLength) {
  // The first 4 steps on 32-token sequences, then 64 (under sequence
  // parallelism over every rank): those 4 steps equal a plain 32-token run,
  // and the held-out evaluation is logged at each length.
  auto& rt = Runtime::current();
  const int P = rt.size();
  const std::string shortrun = tmp("cur_short.h5"), cur = tmp("cur.h5");
  const std::string cp = "parallel.cp=" + std::to_string(P);
  train(rt, config({"io.run_log=" + shortrun, "train.seq_len=32", "train.steps=4", cp}), false);
  const TrainResult r = train(rt, config({"io.run_log=" + cur, "train.seq_len=64", "train.short_steps=4", "train.short_seq_len=32",
                                          "train.steps=6", "train.eval_seq_lens=[32,64]", cp}), false);
  if (rt.rank() == 0) [&] {
    const std::vector<double> a = losses(shortrun), b = losses(cur);
    ASSERT_EQ(b.size(), 6u);
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(a[i], b[i], 1e-12 * std::fabs(a[i])) << "step " << i;  // the schedule differs at step 3+
    io::H5File f = io::H5File::open(cur);
    const std::vector<double> acc32 = f.read<double>("log/eval_accuracy_32"), acc64 = f.read<double>("log/eval_accuracy_64");
    ASSERT_EQ(acc32.size(), 6u);
    EXPECT_TRUE(std::isfinite(acc32.back()) && std::isfinite(acc64.back()));
    EXPECT_EQ(r.eval_accuracy, std::min(acc32.back(), acc64.back()));
    std::remove(shortrun.c_str());
    std::remove(cur.c_str());
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, PackedDocumentsUnderSequenceParallelismKeepTheLossTrace) {
  // A token file with an end-of-document id: sequences hold several
  // documents, so under cp = P every sequence gets the document layout and
  // mask of its own document lengths; the loss trace equals one rank's
  // (document-causal local attention).
  auto& rt = Runtime::current();
  const int P = rt.size();
  const std::string bin = tmp("docs.bin"), one = tmp("docs_one.h5"), many = tmp("docs_many.h5");
  if (rt.rank() == 0) {
    std::vector<std::uint16_t> ids;
    unsigned x = 12345;
    for (int i = 0; i < 4000; ++i) {
      x = x * 1103515245u + 12345u;
      ids.push_back((x >> 16) % 9 == 0 ? 63 : std::uint16_t((x >> 8) % 60));
    }
    FILE* f = std::fopen(bin.c_str(), "wb");
    std::fwrite(ids.data(), sizeof(std::uint16_t), ids.size(), f);
    std::fclose(f);
  }
  MPI_Barrier(rt.world());
  const std::vector<std::string> data = {"data.task=bin", "data.path=\"" + bin + "\"", "data.eos=63", "train.steps=6"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), data.begin(), data.end());
    return config(extra);
  };
  if (rt.rank() == 0) train(rt, with({"io.run_log=" + one}), false, MPI_COMM_SELF);
  train(rt, with({"io.run_log=" + many, "parallel.cp=" + std::to_string(P), "parallel.method=burst", "train.activation=whole"}),
        false);
  if (rt.rank() == 0) [&] {
    std::vector<double> a = losses(one), b = losses(many);
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(b.size(), 6u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << "step " << i;
    std::remove(one.c_str()), std::remove(many.c_str()), std::remove(bin.c_str());
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, StartsFromGivenWeights) {
  // model.init_from: the weights of a trained checkpoint, not a random start.
  // With lr = 0 nothing moves, so the first step's loss is that of the
  // trained weights (below the random start's) and the next is the same
  // sequence set's loss under the same weights again (step 1 differs only in
  // data, so compare with the trained run's own evaluation instead).
  auto& rt = Runtime::current();
  const std::string ck = tmp("init_ck.h5"), fresh = tmp("init_fresh.h5"), from = tmp("init_from.h5");
  train(rt, config({"io.checkpoint=" + ck, "io.run_log=" + fresh, "train.steps=30", "train.lr=3e-3"}), false);
  const TrainResult r = train(rt, config({"io.run_log=" + from, "model.init_from=" + ck, "train.steps=1", "train.lr=0",
                                          "train.min_lr=0"}), false);
  const TrainResult again = train(rt, config({"model.init_from=" + ck, "train.steps=1", "train.lr=0", "train.min_lr=0"}), false);
  EXPECT_EQ(r.eval_loss, again.eval_loss);  // deterministic
  // The same weights under another use of attention (fine-tuning with the
  // log-length scale, a NoPE layer): accepted, and the loss changes; another
  // shape (one more layer): refused by name.
  const TrainResult scaled = train(rt, config({"model.init_from=" + ck, "train.steps=1", "train.lr=0", "train.min_lr=0",
                                               "model.attn_log_scale=4", "model.nope_layers=[1]"}), false);
  EXPECT_NE(scaled.eval_loss, r.eval_loss);
  try {
    ModelConfig deeper = model_preset("tiny");
    deeper.layers = 3;
    const std::string json = tmp("deeper.json");
    if (rt.rank() == 0) {
      std::FILE* f = std::fopen(json.c_str(), "w");
      std::fputs(model_to_hf_json(deeper).c_str(), f);
      std::fclose(f);
    }
    MPI_Barrier(rt.world());
    train(rt, config({"model.init_from=" + ck, "model.config=" + json, "train.steps=1"}), false);
    ADD_FAILURE() << "weights of another model were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds another model"), std::string::npos) << e.what();
  }
  MPI_Barrier(rt.world());  // every rank has read the file before rank 0 removes it
  if (rt.rank() == 0) {
    const std::vector<double> a = losses(fresh), b = losses(from);
    EXPECT_LT(b[0], a[0]);  // the trained weights, not a random start
    std::remove(fresh.c_str()), std::remove(from.c_str());
    remove_checkpoints(ck);
  }
  MPI_Barrier(rt.world());
  EXPECT_ANY_THROW(train(rt, config({"model.init_from=/nonexistent/weights.h5"}), false));
}

// No output replaces an input, io.overwrite or not (it replaces an earlier
// run's outputs): io.run_log or io.checkpoint (its step files included) the
// same file as model.init_from, data.path or model.config is refused before
// anything runs, naming both keys and the path, and the input is untouched.
// The same file under another name (a hard link, a symlink, "./") counts.
// (The weights file became a run log, status 0.)
TEST(Train, OutputsNeverReplaceInputs) {
  auto& rt = Runtime::current();
  const std::string w = tmp("in_weights.h5"), tokens = tmp("in_tokens.h5"), link = tmp("in_weights_link.h5");
  train(rt, config({"io.checkpoint=" + w, "train.steps=1"}), false);  // w: a checkpoint, and weights to start from
  if (rt.rank() == 0) {
    std::vector<std::int32_t> ids(400);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t(i % 60);
    io::H5File f = io::H5File::create(tokens);
    f.write("tokens", ids);
    f.close();
    std::remove(link.c_str());
    std::filesystem::create_symlink(w, link);
  }
  MPI_Barrier(rt.world());
  auto bytes = [](const std::string& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string w_before = rt.rank() == 0 ? bytes(w) : "", tokens_before = rt.rank() == 0 ? bytes(tokens) : "";
  auto refused = [&](const std::vector<std::string>& sets, const std::string& says) {
    try {
      train(rt, config(sets), false);
      ADD_FAILURE() << "no error for " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Config);
      EXPECT_NE(e.message().find(says), std::string::npos) << e.message();
    }
  };
  refused({"model.init_from=" + w, "io.run_log=" + w}, "io.run_log = '" + w + "' is the same file as model.init_from = '" + w + "'");
  refused({"model.init_from=" + link, "io.run_log=" + w}, "is the same file as model.init_from = '" + link + "'");
  refused({"data.task=h5", "data.path=" + tokens, "io.run_log=" + tokens},
          "io.run_log = '" + tokens + "' is the same file as data.path = '" + tokens + "'");
  refused({"model.init_from=" + w, "io.checkpoint=" + w},
          "model.init_from = '" + w + "' is one of the checkpoint's files (io.checkpoint = '" + w + "'");
  refused({"model.init_from=" + checkpoint_step_path(w, 1), "io.checkpoint=" + w}, "is one of the checkpoint's files");
  refused({"model.init_from=" + w, "io.checkpoint=" + w}, "the run would overwrite that input");
  refused({"model.config=" + tokens, "io.run_log=" + tokens}, "is the same file as model.config");
  MPI_Barrier(rt.world());
  if (rt.rank() == 0) {
    EXPECT_EQ(bytes(w), w_before);
    EXPECT_EQ(bytes(tokens), tokens_before);
    remove_checkpoints(w), std::remove(tokens.c_str()), std::remove(link.c_str());
  }
  MPI_Barrier(rt.world());
}

TEST(Train, NoPEAndSlidingWindowLayersKeepTheLossTraceUnderSequenceParallelism) {
  // Layer 0 a sliding window of 5 tokens with RoPE, layer 1 global with no
  // rotary embedding (NoPE): under cp = all ranks, burst and ring, each
  // layout, whole and half, the loss trace equals the 1-rank run (1e-9), and
  // differs from the model without them (the options act).
  auto& rt = Runtime::current();
  const int P = rt.size();
  const std::string one = tmp("irope_one.h5"), many = tmp("irope_many.h5"), plain = tmp("irope_plain.h5");
  const std::vector<std::string> arch = {"model.window_layers=[0]", "model.sliding_window=5", "model.nope_layers=[1]"};
  auto with = [&](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  if (rt.rank() == 0) {
    train(rt, config(with(arch, {"io.run_log=" + one})), false, MPI_COMM_SELF);
    train(rt, config({"io.run_log=" + plain}), false, MPI_COMM_SELF);
    std::vector<double> a = losses(one), b = losses(plain);
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
    EXPECT_GT(diff, 1e-4) << "the NoPE / window layers change nothing";
  }
  MPI_Barrier(rt.world());
  const std::string cp = "parallel.cp=" + std::to_string(P);
  std::vector<std::vector<std::string>> runs = {
      {cp, "parallel.method=burst"},
      {cp, "parallel.method=ring", "parallel.layout=contiguous", "train.activation=whole"},
  };
  if (32 % (2 * P) == 0) runs.push_back({cp, "parallel.method=burst", "train.activation=half", "train.loss_chunk=8"});
  // With the log-length attention scale too: its own 1-rank reference.
  const std::string one_log = tmp("irope_one_log.h5");
  if (rt.rank() == 0) train(rt, config(with(arch, {"model.attn_log_scale=4", "io.run_log=" + one_log})), false, MPI_COMM_SELF);
  MPI_Barrier(rt.world());
  for (auto sets : std::vector<std::vector<std::string>>{{cp, "parallel.method=burst", "train.activation=whole"},
                                                        {cp, "parallel.method=ring", "parallel.layout=striped"}}) {
    sets = with(with(sets, arch), {"model.attn_log_scale=4", "io.run_log=" + many});
    train(rt, config(sets), false);
    if (rt.rank() == 0) [&] {
      std::vector<double> a = losses(one_log), b = losses(many), c = losses(one);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << "log scale, step " << i;
      EXPECT_GT(std::fabs(a.back() - c.back()), 1e-6) << "the log-length scale changes nothing";
    }();
    MPI_Barrier(rt.world());
  }
  if (rt.rank() == 0) std::remove(one_log.c_str());
  for (auto sets : runs) {
    std::string what;
    for (auto& s : sets) what += s + " ";
    sets = with(with(sets, arch), {"io.run_log=" + many});
    train(rt, config(sets), false);
    if (rt.rank() == 0) [&] {
      std::vector<double> a = losses(one), b = losses(many);
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << what << "step " << i;
    }();
    MPI_Barrier(rt.world());
  }
  if (rt.rank() == 0) std::remove(one.c_str()), std::remove(many.c_str()), std::remove(plain.c_str());
  MPI_Barrier(rt.world());
}

TEST(Train, RandomPositionsChangeTrainingPositionsOnly) {
  // data.random_positions: training sequences get sorted distinct positions
  // below the range (deterministic), held-out ones keep 0..n-1, the tokens
  // stay the inner task's; a range below the length is refused by name.
  Config c = config({"data.random_positions=1000"});
  auto src = data::make_source(c, 64, 32);
  auto base = data::make_source(config({}), 64, 32);
  for (std::uint64_t i = 0; i < 20; ++i) {
    data::Sequence s = src->make(7, 0, i), t = src->make(7, 0, i), b = base->make(7, 0, i), h = src->make(7, 1, i);
    EXPECT_EQ(s.tokens, b.tokens);
    EXPECT_EQ(s.positions, t.positions);
    for (size_t j = 1; j < s.positions.size(); ++j) EXPECT_LT(s.positions[j - 1], s.positions[j]);
    EXPECT_GE(s.positions.front(), 0);
    EXPECT_LT(s.positions.back(), 1000);
    EXPECT_NE(s.positions, b.positions);
    for (size_t j = 0; j < h.positions.size(); ++j) EXPECT_EQ(h.positions[j], long(j));
  }
  // PoSE: 3 chunks of consecutive positions, increasing, at most 2 skips.
  auto pose = data::make_source(config({"data.random_positions=1000", "data.position_chunks=3"}), 64, 32);
  long skipped = 0;
  for (std::uint64_t i = 0; i < 20; ++i) {
    data::Sequence s = pose->make(7, 0, i), h = pose->make(7, 1, i);
    long gaps = 0;
    for (size_t j = 1; j < s.positions.size(); ++j) {
      EXPECT_LT(s.positions[j - 1], s.positions[j]);
      gaps += s.positions[j] - s.positions[j - 1] != 1;
    }
    EXPECT_LE(gaps, 2);
    skipped += gaps;
    EXPECT_LT(s.positions.back(), 1000);
    for (size_t j = 0; j < h.positions.size(); ++j) EXPECT_EQ(h.positions[j], long(j));
  }
  EXPECT_GT(skipped, 20);
  try {
    data::make_source(config({"data.random_positions=16"}), 64, 32);
    ADD_FAILURE() << "a range shorter than the sequence was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.random_positions = 16"), std::string::npos) << e.what();
  }
}

namespace {
// bf16 and float loss traces of the same run: the same sequences, the same
// start (the bf16 run's initial weights are the float ones rounded), so the
// traces differ by rounding only.
void expect_tracks(const std::vector<double>& bf, const std::vector<double>& fl, const std::string& what) {
  ASSERT_EQ(bf.size(), fl.size()) << what;
  for (size_t i = 0; i < bf.size(); ++i) EXPECT_NEAR(bf[i], fl[i], 0.03 * std::fabs(fl[i])) << what << ", step " << i;
}
}  // namespace

TEST(Train, Bf16TrainsOnFp32MastersAndResumesBitForBit) {
  // train.dtype = bf16: bf16 weights and activations, fp32 gradients,
  // moments and master weights (ZeRO-2 over every rank here). A run stopped
  // at step 5 and resumed reproduces the uninterrupted one bit for bit (the
  // checkpoint holds the fp32 masters, the bf16 copy is rounded from them),
  // and the trace follows the float run's.
  auto& rt = Runtime::current();
  const std::string full = tmp("bf_full.h5"), part = tmp("bf_part.h5"), ck = tmp("bf_ckpt.h5"), fl = tmp("bf_float.h5");
  const std::vector<std::string> bf = {"train.dtype=bf16", "train.zero=2"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  train(rt, config(with(bf, {"io.run_log=" + full})), false);
  train(rt, config(with(bf, {"io.run_log=" + part, "io.checkpoint=" + ck, "train.stop_after=5"})), false);
  const TrainResult r = train(rt, config(with(bf, {"io.run_log=" + part, "io.checkpoint=" + ck})), true);
  EXPECT_EQ(r.steps_done, 12);
  train(rt, config({"train.dtype=float", "train.zero=2", "io.run_log=" + fl}), false);
  if (rt.rank() == 0) [&] {
    const std::vector<double> a = losses(full), b = losses(part);
    ASSERT_EQ(a.size(), 12u);
    ASSERT_EQ(b.size(), 12u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i;  // bit for bit
    EXPECT_LT(a.back(), a.front());
    expect_tracks(a, losses(fl), "bf16 against float");
    // The checkpoint's params are the fp32 masters: after 12 updates most of
    // them are not bf16 numbers.
    io::H5File f = io::H5File::open(ck);
    EXPECT_EQ(f.attr_string("/", "train_dtype"), "bfloat16");
    const std::vector<float> w = f.read<float>("params/model.layers.0.mlp.up_proj.weight");
    long off_grid = 0;
    for (float x : w) off_grid += float(bf16(x)) != x ? 1 : 0;
    EXPECT_GT(off_grid, long(w.size()) / 2) << "the checkpoint holds bf16-rounded weights, not the masters";
    for (auto* p : {&full, &part, &fl}) std::remove(p->c_str());
    remove_checkpoints(ck);
  }();
  MPI_Barrier(rt.world());
}

TEST(Train, Bf16UnderZero3OffloadAndSequenceParallelismTracksFloat) {
  // The masters sharded (ZeRO-3, the bf16 copy all-gathered a layer at a
  // time), or in host memory with the update there (offload), with burst
  // attention over every rank in bf16: each trace follows the float run of
  // the same configuration.
  auto& rt = Runtime::current();
  const int P = rt.size();
  const std::string cp = "parallel.cp=" + std::to_string(P);
  const std::string a = tmp("bz_bf.h5"), b = tmp("bz_fl.h5"), c = tmp("bz_off.h5"), d = tmp("bz_offfl.h5");
  train(rt, config({"train.dtype=bf16", "train.zero=3", cp, "train.activation=whole", "io.run_log=" + a}), false);
  train(rt, config({"train.dtype=float", "train.zero=3", cp, "train.activation=whole", "io.run_log=" + b}), false);
  train(rt, config({"train.dtype=bf16", "train.zero=1", "train.offload=true", "io.run_log=" + c}), false);
  train(rt, config({"train.dtype=float", "train.zero=1", "train.offload=true", "io.run_log=" + d}), false);
  if (rt.rank() == 0) {
    expect_tracks(losses(a), losses(b), "ZeRO-3 + sequence parallel");
    expect_tracks(losses(c), losses(d), "ZeRO-1 offload");
    for (auto* p : {&a, &b, &c, &d}) std::remove(p->c_str());
  }
  MPI_Barrier(rt.world());
}

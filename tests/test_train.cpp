// Training end to end on the passkey task at every registered rank count
// (ranks are data-parallel replicas): the loss trace is the same whatever
// the rank count in double (the global batch is the same sequences), and a
// run stopped at a checkpoint and resumed reproduces the uninterrupted one
// bit for bit.
#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "train/trainer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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
                         "train.warmup=3", "train.eval_every=0", "train.eval_sequences=4", "train.log_every=1000"})
    s.apply_override(c, kv);
  for (auto& kv : sets) s.apply_override(c, kv);
  s.validate(c);
  return c;
}

std::vector<double> losses(const std::string& log) {
  io::H5File f = io::H5File::open(log);
  return f.read<double>("log/loss");
}
}  // namespace

TEST(Train, ResumeContinuesBitForBit) {
  auto& rt = Runtime::current();
  const std::string full = tmp("full.h5"), part = tmp("part.h5"), ck = tmp("ckpt.h5");
  train(rt, config({"io.run_log=" + full}), false);
  train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck, "train.stop_after=5"}), false);
  TrainResult r = train(rt, config({"io.run_log=" + part, "io.checkpoint=" + ck}), true);
  EXPECT_EQ(r.steps_done, 12);
  if (rt.rank() == 0) {
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
    std::remove(ck.c_str());
  }
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
  if (rt.rank() == 0) {
    std::vector<double> a = losses(one), b = losses(many);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * std::fabs(a[i])) << "step " << i;
    std::remove(one.c_str());
    std::remove(many.c_str());
  }
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
  if (rt.rank() == 0) std::remove(ck.c_str()), std::remove(other.c_str());
}

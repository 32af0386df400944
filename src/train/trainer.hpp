// The training loop: data -> forward/backward -> gradient all-reduce over
// data-parallel replicas -> clip -> AdamW -> log, eval, checkpoint.
// Sequence parallelism (the distributed attention methods) plugs in through
// the model's AttentionOp; today every rank is a data-parallel replica.
#pragma once

#include "comm/runtime.hpp"
#include "core/config.hpp"

#include <string>

namespace burst {

ConfigSchema train_schema();

struct TrainResult {
  long steps_done = 0;
  double last_loss = 0;
  double eval_loss = 0, eval_accuracy = 0;
  long skipped_steps = 0;          // non-finite steps dropped (train.on_nonfinite = skip)
  bool stopped_by_signal = false;  // SIGINT/SIGTERM: stopped after a checkpoint
};

// Runs `burst train` over the data-parallel ranks of `comm` (default: the
// world). resume: continue from the newest whole checkpoint of io.checkpoint
// if there is one.
TrainResult train(Runtime& rt, const Config& cfg, bool resume, MPI_Comm comm = MPI_COMM_NULL);

}  // namespace burst

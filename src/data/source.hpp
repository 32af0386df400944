// Where training sequences come from: one interface over the synthetic
// tasks and the token files, chosen by data.task.
//
//   passkey  synthetic: a random key far back, asked for at the end
//   recall   synthetic: multi-query associative recall
//   text     byte-level text (a file, or every file of a directory)
//   bin      raw uint16/uint32 token ids (data.dtype; data.eos splits documents)
//   h5       an HDF5 integer dataset (data.dataset) with optional document
//            start offsets (data.offsets)
//
// A sequence is a function of (seed, stream, index): stream 0 trains,
// stream 1 is held out. Labels are already shifted (label[t] is the token
// at t+1), kernels::kIgnoreIndex where there is no loss: the last token of
// each document, and everything but the answers on synthetic tasks.
#pragma once

#include "core/config.hpp"
#include "data/synthetic.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace burst::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const = 0;
  // One line for logs: the task or file and its size.
  virtual std::string describe() const = 0;
  // The loss of a uniform guess at each labelled token (synthetic tasks:
  // ln of the answer alphabet), or NaN where that means nothing (text).
  virtual double chance_loss() const;
  // Whether evaluations (stream != 0) draw from data kept out of training:
  // synthetic tasks draw fresh sequences; a corpus with data.heldout_fraction
  // = 0 evaluates on its training part (the logs then say so).
  virtual bool heldout() const { return true; }
  long seq_len = 0;
  long vocab_needed = 0;  // the smallest vocabulary that holds every token id
};

// Declares data.* keys (task, files, task parameters, held-out split,
// positions) with their ranges, choices and help, and their rules.
void add_data_schema(ConfigSchema& s);

// The source for `cfg`'s data.* keys, for a model of `vocab` tokens and
// sequences of seq_len tokens. Opens and checks the files: Error(Input)
// names the file and the offending offset, Error(Config) the key.
std::unique_ptr<TokenSource> make_source(const Config& cfg, long vocab, long seq_len);

}  // namespace burst::data

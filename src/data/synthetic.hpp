// Synthetic long-range tasks that no n-gram statistic can solve: the answer
// is random and appears once, far back in the sequence.
//
// passkey: filler ... KEY d1..dk filler ... QUERY d1..dk
//   Labels (already shifted: label[t] is the token at t+1) only where the
//   next token is an answer digit, so the loss is over the k answer digits;
//   chance is ln(10) per digit.
// Token ids: digits 0..9, KEY = 10, QUERY = 11, filler 12..vocab-1.
// Deterministic: a sequence is a function of (seed, stream, index) only.
#pragma once

#include <cstdint>
#include <vector>

namespace burst::data {

constexpr std::int32_t kKeyToken = 10, kQueryToken = 11, kFirstFiller = 12;

struct Sequence {
  std::vector<std::int32_t> tokens, labels;  // labels: kIgnoreIndex except answer targets
  std::vector<long> positions;
  long key_position = 0;  // index of the KEY token
};

struct PasskeyTask {
  long seq_len = 128;
  long digits = 4;
  long vocab = 64;
  // Throws Error(Config) when the sequence cannot hold the task or the vocabulary is too small.
  void validate() const;
  // stream 0: training; stream 1: held-out evaluation (disjoint generator streams).
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const;
};

}  // namespace burst::data

// Synthetic long-range tasks that no n-gram statistic can solve: the answer
// is random and appears once, far back in the sequence.
//
// passkey: filler ... KEY d1..dk filler ... QUERY d1..dk
//   Labels (already shifted: label[t] is the token at t+1) only where the
//   next token is an answer digit, so the loss is over the k answer digits;
//   chance is ln(10) per digit.
// Token ids: digits 0..9, KEY = 10, QUERY = 11, filler 12..vocab-1.
//
// recall (multi-query associative recall): `pairs` key-value pairs at
// random places among filler, then queries "QUERY key value" at the end;
// the loss is on each queried value. Keys are distinct within a sequence
// and each value is drawn afresh for every sequence, so only looking back
// at the pair answers (chance is ln(values)).
// Token ids: values 0..V-1, QUERY = V, keys V+1..V+K with K =
// (vocab - V - 1) / 2, filler after them.
//
// Deterministic: a sequence is a function of (seed, stream, index) only.
#pragma once

#include <cstdint>
#include <vector>

namespace burst::data {

constexpr std::int32_t kKeyToken = 10, kQueryToken = 11, kFirstFiller = 12;

struct Sequence {
  std::vector<std::int32_t> tokens, labels;  // labels: kIgnoreIndex except answer targets
  std::vector<long> positions;
  long key_position = 0;  // index of the KEY token (passkey), of the first pair (recall)
  // Document of each token, counted from 0 within the sequence; empty when
  // the whole sequence is one document.
  std::vector<int> doc_ids;
};

// The generator seed of sequence (seed, stream, index): splitmix-style
// mixing, so neighbouring indices and streams are unrelated.
inline std::uint64_t sequence_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (stream + 1) * 0xBF58476D1CE4E5B9ull ^ (index + 1) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}

struct PasskeyTask {
  long seq_len = 128;
  long digits = 4;
  long vocab = 64;
  // Throws Error(Config) when the sequence cannot hold the task or the vocabulary is too small.
  void validate() const;
  // stream 0: training; stream 1: held-out evaluation (disjoint generator streams).
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const;
};

struct RecallTask {
  long seq_len = 128;
  long pairs = 8;    // key-value pairs per sequence
  long values = 10;  // value alphabet (chance loss ln(values))
  long queries = 0;  // queries per sequence, 0 = one per pair
  long vocab = 64;
  long query_token() const { return values; }
  long first_key() const { return values + 1; }
  long key_count() const { return (vocab - values - 1) / 2; }
  long first_filler() const { return first_key() + key_count(); }
  long query_count() const { return queries > 0 ? queries : pairs; }
  // Throws Error(Config) when the sequence or the vocabulary cannot hold the task.
  void validate() const;
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const;
};

}  // namespace burst::data

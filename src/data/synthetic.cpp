#include "data/synthetic.hpp"

#include "core/error.hpp"
#include "kernels/cross_entropy.hpp"

#include <random>

namespace burst::data {

void PasskeyTask::validate() const {
  BURST_CHECK_CONFIG(digits >= 1 && digits <= 64, "passkey digits = ", digits, " must be in [1, 64]");
  BURST_CHECK_CONFIG(vocab > kFirstFiller + 1, "passkey needs a vocabulary of at least ", kFirstFiller + 2,
                     " tokens (digits, KEY, QUERY, filler), the model has ", vocab);
  BURST_CHECK_CONFIG(seq_len >= 2 * digits + 4, "passkey seq_len = ", seq_len, " cannot hold a key of ", digits,
                     " digits twice: needs at least ", 2 * digits + 4);
}

Sequence PasskeyTask::make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const {
  // splitmix-style mixing of (seed, stream, index) into the generator seed.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (stream + 1) * 0xBF58476D1CE4E5B9ull ^ (index + 1) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  std::mt19937_64 g(z);
  Sequence s;
  const long n = seq_len;
  s.tokens.resize(n);
  for (long t = 0; t < n; ++t) s.tokens[t] = std::int32_t(kFirstFiller + long(g() % std::uint64_t(vocab - kFirstFiller)));
  std::vector<std::int32_t> key(digits);
  for (auto& d : key) d = std::int32_t(g() % 10);
  // The query sits at the end; the key anywhere before it.
  const long q = n - digits - 1;
  const long kp = long(g() % std::uint64_t(q - digits));
  s.key_position = kp;
  s.tokens[kp] = kKeyToken;
  for (long j = 0; j < digits; ++j) s.tokens[kp + 1 + j] = key[j];
  s.tokens[q] = kQueryToken;
  for (long j = 0; j < digits; ++j) s.tokens[q + 1 + j] = key[j];
  s.labels.assign(n, kernels::kIgnoreIndex);
  for (long j = 0; j < digits; ++j) s.labels[q + j] = key[j];  // predict digit j from the token before it
  s.positions.resize(n);
  for (long t = 0; t < n; ++t) s.positions[t] = t;
  return s;
}

}  // namespace burst::data

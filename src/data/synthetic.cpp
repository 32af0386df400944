#include "data/synthetic.hpp"

#include "core/error.hpp"
#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <random>
#include <set>

namespace burst::data {

void PasskeyTask::validate() const {
  BURST_CHECK_CONFIG(digits >= 1 && digits <= 64, "passkey digits = ", digits, " must be in [1, 64]");
  BURST_CHECK_CONFIG(vocab > kFirstFiller + 1, "passkey needs a vocabulary of at least ", kFirstFiller + 2,
                     " tokens (digits, KEY, QUERY, filler), the model has ", vocab);
  BURST_CHECK_CONFIG(seq_len >= 2 * digits + 4, "passkey seq_len = ", seq_len, " cannot hold a key of ", digits,
                     " digits twice: needs at least ", 2 * digits + 4);
}

Sequence PasskeyTask::make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const {
  std::mt19937_64 g(sequence_seed(seed, stream, index));
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

void RecallTask::validate() const {
  BURST_CHECK_CONFIG(values >= 2, "recall values = ", values, " must be >= 2");
  BURST_CHECK_CONFIG(pairs >= 1, "recall pairs = ", pairs, " must be >= 1");
  BURST_CHECK_CONFIG(queries >= 0 && queries <= pairs, "recall queries = ", queries, " must be in [0, pairs = ", pairs, "]");
  BURST_CHECK_CONFIG(key_count() >= pairs && vocab - first_filler() >= 1, "recall with ", pairs, " pairs and ", values,
                     " values needs a vocabulary of at least ", values + 1 + 2 * pairs + 1,
                     " tokens (values, QUERY, distinct keys, filler), the model has ", vocab);
  BURST_CHECK_CONFIG(seq_len >= 2 * pairs + 3 * query_count() + 1, "recall seq_len = ", seq_len, " cannot hold ", pairs,
                     " pairs and ", query_count(), " queries: needs at least ", 2 * pairs + 3 * query_count() + 1);
}

Sequence RecallTask::make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const {
  std::mt19937_64 g(sequence_seed(seed, stream, index));
  const long n = seq_len, nq = query_count();
  Sequence s;
  s.tokens.resize(n);
  const std::uint64_t nfill = std::uint64_t(vocab - first_filler());
  for (auto& t : s.tokens) t = std::int32_t(first_filler() + long(g() % nfill));
  // Pairs in distinct 2-token cells before the queries; distinct keys.
  const long q0 = n - 3 * nq, cells = q0 / 2;
  std::set<long> cell, keys;
  while (long(cell.size()) < pairs) cell.insert(long(g() % std::uint64_t(cells)));
  std::vector<std::int32_t> key, val;
  while (long(keys.size()) < pairs) {
    const long k = first_key() + long(g() % std::uint64_t(key_count()));
    if (keys.insert(k).second) key.push_back(std::int32_t(k));
  }
  long j = 0;
  for (long c : cell) {
    val.push_back(std::int32_t(g() % std::uint64_t(values)));
    s.tokens[2 * c] = key[j], s.tokens[2 * c + 1] = val[j];
    ++j;
  }
  s.key_position = 2 * *cell.begin();
  // Queries: the first nq pairs of a random order.
  std::vector<long> order(pairs);
  for (long i = 0; i < pairs; ++i) order[i] = i;
  for (long i = pairs - 1; i > 0; --i) std::swap(order[i], order[long(g() % std::uint64_t(i + 1))]);
  s.labels.assign(n, kernels::kIgnoreIndex);
  for (long i = 0; i < nq; ++i) {
    const long at = q0 + 3 * i, p = order[i];
    s.tokens[at] = std::int32_t(query_token());
    s.tokens[at + 1] = key[p];
    s.tokens[at + 2] = val[p];
    s.labels[at + 1] = val[p];  // the value, predicted from the queried key
  }
  s.positions.resize(n);
  for (long t = 0; t < n; ++t) s.positions[t] = t;
  return s;
}

}  // namespace burst::data

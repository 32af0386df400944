#include "data/source.hpp"

#include "core/error.hpp"
#include "data/h5_tokens.hpp"
#include "data/token_files.hpp"
#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <limits>

namespace burst::data {

static_assert(kIgnoreLabel == kernels::kIgnoreIndex, "the data's ignore label is the loss kernel's ignore index");

double TokenSource::chance_loss() const { return std::numeric_limits<double>::quiet_NaN(); }

void add_data_schema(ConfigSchema& s) {
  s.string("data.task", "passkey", {"passkey", "recall", "text", "bin", "h5"},
           "training data: passkey | recall (synthetic long-range tasks), text (bytes of a file or directory), "
           "bin (raw uint16/uint32 token ids), h5 (an HDF5 token dataset)")
      .integer("data.digits", 4, 1, 64, "passkey: digits of the key")
      .integer("data.recall_pairs", 8, 1, 1 << 20, "recall: key-value pairs per sequence")
      .integer("data.recall_values", 10, 2, 1 << 20, "recall: size of the value alphabet (chance loss ln of it)")
      .integer("data.recall_queries", 0, 0, 1 << 20, "recall: queries per sequence (0 = one per pair)")
      .string("data.path", "", {}, "text: a file or a directory; bin: the token file; h5: the HDF5 file")
      .string("data.dtype", "uint16", {"uint16", "uint32"}, "bin: width of a token id")
      .integer("data.eos", -1, -1, (1ll << 32) - 1, "bin: the token id that ends a document (-1 = none: one document)")
      .string("data.dataset", "tokens", {}, "h5: the 1-D integer dataset of token ids")
      .string("data.offsets", "doc_offsets", {},
              "h5: the 1-D dataset of document start offsets ('' or absent = one document)")
      .real("data.heldout_fraction", 0.05, 0, 0.5,
            "text, bin, h5: the last fraction of the tokens held out for evaluation (0 = evaluate on the training tokens)")
      .boolean("data.restart_positions", false, "text, bin, h5: RoPE positions restart at 0 at each document")
      .integer("data.random_positions", 0, 0, 1ll << 40,
               "randomized positions (Ruoss et al. 2023): each training sequence's RoPE positions are a sorted random "
               "sample of distinct values in [0, this), so short sequences show the distances of long ones; held-out "
               "sequences keep 0, 1, 2, ... (0 = off)")
      .integer("data.position_chunks", 0, 0, 1 << 20,
               "with data.random_positions: 0 = every position drawn (Ruoss et al.); c >= 1 = PoSE (Zhu et al. 2023): "
               "the sequence cut at c - 1 random points into chunks of consecutive positions, each chunk shifted by a "
               "sorted random skip, so neighbours stay neighbours and the chunks lie far apart");
  s.rule([](const Config& c) -> std::string {
    const std::string task = c.get_string("data.task");
    if ((task == "text" || task == "bin" || task == "h5") && c.get_string("data.path").empty())
      return "data.task = " + task + " needs data.path (the file to read)";
    return "";
  });
  s.rule([](const Config& c) -> std::string {
    const long r = c.get_int("data.random_positions");
    if (r > 0 && c.get_bool("data.restart_positions"))
      return "data.random_positions and data.restart_positions cannot be combined";
    if (r == 0 && c.get_int("data.position_chunks") > 0)
      return "data.position_chunks = " + std::to_string(c.get_int("data.position_chunks")) +
             " has no effect without data.random_positions (the range its chunks are placed in)";
    return "";
  });
  s.rule([](const Config& c) -> std::string {
    if (c.get_int("data.recall_queries") > c.get_int("data.recall_pairs"))
      return "data.recall_queries = " + std::to_string(c.get_int("data.recall_queries")) + " exceeds data.recall_pairs = " +
             std::to_string(c.get_int("data.recall_pairs"));
    return "";
  });
}

namespace {
class PasskeySource : public TokenSource {
 public:
  explicit PasskeySource(const PasskeyTask& t) : task_(t) {
    task_.validate();
    seq_len = t.seq_len, vocab_needed = kFirstFiller + 2;
  }
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const override {
    return task_.make(seed, stream, index);
  }
  std::string describe() const override {
    return str_cat("passkey: ", task_.seq_len, " tokens, ", task_.digits, " digits (chance loss ln 10 = ", chance_loss(), ")");
  }
  double chance_loss() const override { return std::log(10.0); }

 private:
  PasskeyTask task_;
};

class RecallSource : public TokenSource {
 public:
  explicit RecallSource(const RecallTask& t) : task_(t) {
    task_.validate();
    seq_len = t.seq_len, vocab_needed = t.values + 1 + 2 * t.pairs + 1;
  }
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const override {
    return task_.make(seed, stream, index);
  }
  std::string describe() const override {
    return str_cat("recall: ", task_.seq_len, " tokens, ", task_.pairs, " pairs, ", task_.query_count(), " queries, ",
                   task_.values, " values (chance loss ln ", task_.values, " = ", chance_loss(), ")");
  }
  double chance_loss() const override { return std::log(double(task_.values)); }

 private:
  RecallTask task_;
};

class CorpusSource : public TokenSource {
 public:
  CorpusSource(TokenCorpus c, long len, double heldout, bool restart)
      : sampler_(std::make_shared<const TokenCorpus>(std::move(c)), len, heldout, restart) {
    seq_len = len;
    vocab_needed = sampler_.corpus().max_token() + 1;
  }
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const override {
    return sampler_.make(seed, stream, index);
  }
  std::string describe() const override {
    const TokenCorpus& c = sampler_.corpus();
    return str_cat(c.source(), ": ", c.size(), " tokens in ", c.doc_starts().size(), " document(s), ", sampler_.train_tokens(),
                   " for training", sampler_.has_heldout() ? "" : " (no held-out part: evaluations use training data)",
                   "; random windows of ", seq_len, " tokens");
  }
  bool heldout() const override { return sampler_.has_heldout(); }

 private:
  CorpusSampler sampler_;
};

// Training sequences (stream 0) of the inner source get positions drawn as a
// sorted sample of distinct values in [0, range): Floyd's algorithm, from a
// generator of its own, so the tokens are those of the inner source.
class RandomPositions : public TokenSource {
 public:
  RandomPositions(std::unique_ptr<TokenSource> inner, long range, long chunks)
      : inner_(std::move(inner)), range_(range), chunks_(chunks) {
    seq_len = inner_->seq_len, vocab_needed = inner_->vocab_needed;
    BURST_CHECK_CONFIG(range_ >= seq_len, "data.random_positions = ", range_, " must be at least the sequence length ",
                       seq_len, " (positions are distinct)");
  }
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const override {
    Sequence s = inner_->make(seed, stream, index);
    if (stream != 0) return s;
    BURST_CHECK(s.doc_ids.empty(), ErrorKind::Config, "data.random_positions needs sequences of one document");
    std::mt19937_64 g(sequence_seed(seed ^ 0x5851F42D4C957F2Dull, stream + 7, index));
    const long n = long(s.positions.size());
    if (chunks_ > 0) {
      // Cut points (distinct, in (0, n)), then one skip per chunk: a sorted
      // sample, with repetition, of [0, range - n].
      std::set<long> cuts;
      const long c = std::min(chunks_, n);
      while (long(cuts.size()) < c - 1) cuts.insert(1 + long(g() % std::uint64_t(n - 1)));
      std::vector<long> skip(static_cast<size_t>(c), 0L);
      for (auto& u : skip) u = long(g() % std::uint64_t(range_ - n + 1));
      std::sort(skip.begin(), skip.end());
      long chunk = 0;
      for (long t = 0; t < n; ++t) {
        if (cuts.count(t)) ++chunk;
        s.positions[size_t(t)] = t + skip[size_t(chunk)];
      }
      return s;
    }
    std::set<long> pick;
    for (long j = range_ - n; j < range_; ++j) {
      const long t = long(g() % std::uint64_t(j + 1));
      if (!pick.insert(t).second) pick.insert(j);
    }
    long i = 0;
    for (long p : pick) s.positions[size_t(i++)] = p;
    return s;
  }
  std::string describe() const override {
    if (chunks_ > 0)
      return str_cat(inner_->describe(), "; training positions: ", chunks_, " chunks with random skips in [0, ", range_, ")");
    return str_cat(inner_->describe(), "; training positions: sorted random samples of [0, ", range_, ")");
  }
  double chance_loss() const override { return inner_->chance_loss(); }
  bool heldout() const override { return inner_->heldout(); }

 private:
  std::unique_ptr<TokenSource> inner_;
  long range_, chunks_;
};

std::unique_ptr<TokenSource> make_inner_source(const Config& cfg, long vocab, long seq_len);
}  // namespace

std::unique_ptr<TokenSource> make_source(const Config& cfg, long vocab, long seq_len) {
  auto s = make_inner_source(cfg, vocab, seq_len);
  const long range = cfg.get_int("data.random_positions");
  if (range > 0) return std::make_unique<RandomPositions>(std::move(s), range, cfg.get_int("data.position_chunks"));
  return s;
}

namespace {

std::unique_ptr<TokenSource> make_inner_source(const Config& cfg, long vocab, long seq_len) {
  const std::string task = cfg.get_string("data.task");
  BURST_CHECK_CONFIG(seq_len >= 1, "seq_len = ", seq_len, " must be >= 1");
  if (task == "passkey") {
    PasskeyTask t;
    t.seq_len = seq_len, t.digits = cfg.get_int("data.digits"), t.vocab = vocab;
    return std::make_unique<PasskeySource>(t);
  }
  if (task == "recall") {
    RecallTask t;
    t.seq_len = seq_len, t.vocab = vocab;
    t.pairs = cfg.get_int("data.recall_pairs"), t.values = cfg.get_int("data.recall_values");
    t.queries = cfg.get_int("data.recall_queries");
    return std::make_unique<RecallSource>(t);
  }
  const std::string path = cfg.get_string("data.path");
  BURST_CHECK_CONFIG(!path.empty(), "data.task = ", task, " needs data.path (the file to read)");
  const double heldout = cfg.get_real("data.heldout_fraction");
  const bool restart = cfg.get_bool("data.restart_positions");
  TokenCorpus c;
  if (task == "text") c = TokenCorpus::open_text(path, vocab);
  else if (task == "bin") {
    BURST_CHECK_CONFIG(cfg.get_int("data.eos") < vocab, "data.eos = ", cfg.get_int("data.eos"),
                       " is not a token of the model's vocabulary of ", vocab, " (-1: no end-of-document id)");
    c = TokenCorpus::open_bin(path, cfg.get_string("data.dtype") == "uint16" ? 2 : 4, vocab, cfg.get_int("data.eos"));
  } else if (task == "h5")
    c = open_h5_tokens(path, cfg.get_string("data.dataset"), cfg.get_string("data.offsets"),
                       cfg.origin("data.offsets") != "default", vocab);
  else BURST_FAIL(ErrorKind::Config, "unknown data.task '", task, "'");
  return std::make_unique<CorpusSource>(std::move(c), seq_len, heldout, restart);
}
}  // namespace

}  // namespace burst::data

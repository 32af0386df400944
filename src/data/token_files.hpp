// Token corpora read from files, and the packing of training sequences out
// of them. Free of Kokkos and HDF5 (the fuzz harness builds it alone; HDF5
// token datasets are read in h5_tokens.cpp into a corpus of this kind).
//
//   bin   raw little-endian uint16 or uint32 token ids (data.dtype); an
//         optional end-of-document id (data.eos) splits documents
//   text  bytes of a file, or of every file of a directory (sorted by name),
//         one document each, each followed by kTextEndOfDocument
//
// A corpus is checked whole when it is opened: a missing, empty or truncated
// file, a size that is not a multiple of the token width, a token id beyond
// the model's vocabulary are refused with Error(Input) naming the file and
// the token index and byte offset.
#pragma once

#include "data/synthetic.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace burst::data {

constexpr std::int32_t kIgnoreLabel = -100;  // kernels::kIgnoreIndex (checked where both are seen)
constexpr std::int32_t kTextEndOfDocument = 256;
constexpr long kTextVocab = 257;  // bytes + end of document

class TokenCorpus {
 public:
  TokenCorpus() = default;
  ~TokenCorpus();
  TokenCorpus(TokenCorpus&&) noexcept;
  TokenCorpus& operator=(TokenCorpus&&) noexcept;
  TokenCorpus(const TokenCorpus&) = delete;
  TokenCorpus& operator=(const TokenCorpus&) = delete;

  // bytes_per_token 2 (uint16) or 4 (uint32); eos < 0: one document.
  static TokenCorpus open_bin(const std::string& path, int bytes_per_token, long vocab, long eos);
  static TokenCorpus open_text(const std::string& path, long vocab);
  // Tokens already in memory (HDF5 datasets, tests). doc_starts: ascending
  // document starts beginning with 0 (empty: one document). Checked like a
  // file; `source` names it in messages ("HDF5 tokens file 'x.h5'").
  static TokenCorpus from_tokens(std::vector<std::uint32_t> tokens, std::vector<long> doc_starts, long vocab,
                                 const std::string& source);

  long size() const { return n_; }
  std::uint32_t operator[](long i) const {
    if (width_ == 2) return std::uint32_t(base_[2 * i] | base_[2 * i + 1] << 8);
    return std::uint32_t(base_[4 * i]) | std::uint32_t(base_[4 * i + 1]) << 8 | std::uint32_t(base_[4 * i + 2]) << 16 |
           std::uint32_t(base_[4 * i + 3]) << 24;
  }
  const std::vector<long>& doc_starts() const { return doc_starts_; }  // ascending, [0] == 0
  long document_of(long i) const;                                      // index into doc_starts()
  const std::string& source() const { return source_; }  // "token file 'x.bin'", for messages
  long max_token() const { return max_token_; }

 private:
  void check_and_index(long vocab, long eos);
  std::string source_;
  const unsigned char* base_ = nullptr;
  long n_ = 0;
  int width_ = 4;
  void* map_ = nullptr;  // mmap of a bin file
  std::size_t map_len_ = 0;
  std::vector<std::uint32_t> owned_;
  std::vector<long> doc_starts_;
  long max_token_ = -1;
};

// Tokens [begin, begin + seq_len] of the corpus as one training sequence:
// labels shifted (label[t] = token[t+1]) except at the last token of a
// document (kIgnoreLabel: the next document is not its continuation);
// doc_ids counted from 0 within the sequence (empty: one document);
// positions count within each document when restart_positions, else
// 0..seq_len-1.
Sequence pack_sequence(const TokenCorpus& c, long begin, long seq_len, bool restart_positions);

// Random windows of a corpus for (seed, stream, index): stream 0 draws from
// the first (1 - heldout_fraction) of the tokens, other streams from the
// rest (or from everything when heldout_fraction is 0). Error(Input) when a
// part is shorter than seq_len + 1 tokens.
class CorpusSampler {
 public:
  CorpusSampler(std::shared_ptr<const TokenCorpus> corpus, long seq_len, double heldout_fraction, bool restart_positions);
  Sequence make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const;
  const TokenCorpus& corpus() const { return *corpus_; }
  long train_tokens() const { return split_; }
  bool has_heldout() const { return heldout_; }

 private:
  std::shared_ptr<const TokenCorpus> corpus_;
  long seq_len_, split_;
  bool heldout_, restart_;
};

}  // namespace burst::data

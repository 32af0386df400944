#include "data/token_files.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace burst::data {

TokenCorpus::~TokenCorpus() {
  if (map_) munmap(map_, map_len_);
}

TokenCorpus::TokenCorpus(TokenCorpus&& o) noexcept { *this = std::move(o); }

TokenCorpus& TokenCorpus::operator=(TokenCorpus&& o) noexcept {
  if (this == &o) return *this;
  if (map_) munmap(map_, map_len_);
  source_ = std::move(o.source_);
  owned_ = std::move(o.owned_);
  doc_starts_ = std::move(o.doc_starts_);
  base_ = o.map_ ? o.base_ : reinterpret_cast<const unsigned char*>(owned_.data());
  n_ = o.n_, width_ = o.width_, map_ = o.map_, map_len_ = o.map_len_, max_token_ = o.max_token_;
  o.map_ = nullptr, o.base_ = nullptr, o.n_ = 0;
  return *this;
}

void TokenCorpus::check_and_index(long vocab, long eos) {
  doc_starts_.assign(1, 0);
  for (long i = 0; i < n_; ++i) {
    const std::uint32_t t = (*this)[i];
    if (long(t) >= vocab) {
      const std::string where = map_ ? str_cat(" (byte offset ", i * width_, ")") : std::string();
      BURST_FAIL(ErrorKind::Input, source_, ": token id ", t, " at index ", i, where,
                 " is not below the model's vocabulary size ", vocab, " (another tokenizer, or the wrong data.dtype?)");
    }
    max_token_ = std::max(max_token_, long(t));
    if (eos >= 0 && long(t) == eos && i + 1 < n_) doc_starts_.push_back(i + 1);
  }
}

TokenCorpus TokenCorpus::open_bin(const std::string& path, int bytes_per_token, long vocab, long eos) {
  BURST_ASSERT(bytes_per_token == 2 || bytes_per_token == 4, "token width 2 or 4, not ", bytes_per_token);
  const char* dtype = bytes_per_token == 2 ? "uint16" : "uint32";
  TokenCorpus c;
  c.source_ = "token file '" + path + "'";
  {  // before open(): opening a FIFO would wait for a writer
    struct stat pst {};
    BURST_CHECK_INPUT(::stat(path.c_str(), &pst) == 0, "cannot open token file '", path, "': ", std::strerror(errno));
    BURST_CHECK_INPUT(S_ISREG(pst.st_mode), "token file '", path, "' is not a regular file (a device, FIFO or socket)");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  BURST_CHECK_INPUT(fd >= 0, "cannot open token file '", path, "': ", std::strerror(errno));
  struct stat st {};
  const bool ok = fstat(fd, &st) == 0;
  if (!ok || !S_ISREG(st.st_mode)) {
    ::close(fd);
    BURST_FAIL(ErrorKind::Input, "token file '", path, "' is not a regular file");
  }
  const std::uint64_t size = std::uint64_t(st.st_size);
  if (size == 0 || size % std::uint64_t(bytes_per_token) != 0) {
    ::close(fd);
    BURST_CHECK_INPUT(size != 0, "token file '", path, "' is empty");
    BURST_FAIL(ErrorKind::Input, "token file '", path, "' has ", size, " bytes, not a multiple of ", bytes_per_token,
               " (data.dtype = ", dtype, "): truncated after token ", size / std::uint64_t(bytes_per_token),
               " (byte offset ", size - size % std::uint64_t(bytes_per_token), "), or written with another dtype");
  }
  void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  BURST_CHECK_IO(m != MAP_FAILED, "cannot map token file '", path, "' (", size, " bytes): ", std::strerror(errno));
  c.map_ = m, c.map_len_ = size;
  c.base_ = static_cast<const unsigned char*>(m);
  c.width_ = bytes_per_token;
  c.n_ = long(size / std::uint64_t(bytes_per_token));
  c.check_and_index(vocab, eos);
  return c;
}

TokenCorpus TokenCorpus::open_text(const std::string& path, long vocab) {
  BURST_CHECK_CONFIG(vocab >= kTextVocab, "byte-level text needs a vocabulary of at least ", kTextVocab,
                     " tokens (256 bytes + end of document); the model has ", vocab);
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) files.push_back(it->path().string());
    std::sort(files.begin(), files.end());
    BURST_CHECK_INPUT(!files.empty(), "text directory '", path, "' holds no files");
  } else {
    BURST_CHECK_INPUT(fs::exists(path, ec), "cannot open text file '", path, "': no such file or directory");
    BURST_CHECK_INPUT(fs::is_regular_file(path, ec), "text file '", path,
                      "' is not a regular file or a directory (a device, FIFO or socket)");
    files.push_back(path);
  }
  TokenCorpus c;
  c.source_ = (files.size() == 1 ? "text file '" : "text directory '") + path + "'";
  std::vector<long> starts;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    BURST_CHECK_INPUT(in.good() && !fs::is_directory(f, ec), "cannot open text file '", f, "': ", std::strerror(errno));
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty()) continue;  // no document
    starts.push_back(long(c.owned_.size()));
    for (unsigned char b : bytes) c.owned_.push_back(b);
    c.owned_.push_back(std::uint32_t(kTextEndOfDocument));
  }
  BURST_CHECK_INPUT(!c.owned_.empty(), files.size() == 1 ? "text file '" : "every file of text directory '", path,
                    files.size() == 1 ? "' is empty" : "' is empty");
  c.base_ = reinterpret_cast<const unsigned char*>(c.owned_.data());
  c.width_ = 4;
  c.n_ = long(c.owned_.size());
  c.check_and_index(vocab, -1);
  c.doc_starts_ = starts;
  return c;
}

TokenCorpus TokenCorpus::from_tokens(std::vector<std::uint32_t> tokens, std::vector<long> doc_starts, long vocab,
                                     const std::string& source) {
  TokenCorpus c;
  c.source_ = source;
  c.owned_ = std::move(tokens);
  c.base_ = reinterpret_cast<const unsigned char*>(c.owned_.data());
  c.width_ = 4;
  c.n_ = long(c.owned_.size());
  BURST_CHECK_INPUT(c.n_ > 0, source, " holds no tokens");
  c.check_and_index(vocab, -1);
  if (doc_starts.empty()) doc_starts.push_back(0);
  BURST_CHECK_INPUT(doc_starts[0] == 0, source, ": the first document offset is ", doc_starts[0], ", not 0");
  for (size_t i = 1; i < doc_starts.size(); ++i)
    BURST_CHECK_INPUT(doc_starts[i] > doc_starts[i - 1] && doc_starts[i] <= c.n_, source, ": document offset ",
                      doc_starts[i], " at index ", i, " must exceed the previous one (", doc_starts[i - 1],
                      ") and not pass the ", c.n_, " tokens");
  if (doc_starts.back() == c.n_) doc_starts.pop_back();  // offsets given with the end
  c.doc_starts_ = std::move(doc_starts);
  return c;
}

long TokenCorpus::document_of(long i) const {
  return long(std::upper_bound(doc_starts_.begin(), doc_starts_.end(), i) - doc_starts_.begin()) - 1;
}

Sequence pack_sequence(const TokenCorpus& c, long begin, long seq_len, bool restart_positions) {
  BURST_ASSERT(begin >= 0 && begin + seq_len < c.size(), "window [", begin, ", ", begin + seq_len, "] inside ", c.size(), " tokens");
  Sequence s;
  s.tokens.resize(seq_len);
  s.labels.resize(seq_len);
  s.positions.resize(seq_len);
  std::vector<int> doc(seq_len + 1);
  long d = c.document_of(begin);
  const long first = d;
  const auto& starts = c.doc_starts();
  for (long t = 0; t <= seq_len; ++t) {
    while (d + 1 < long(starts.size()) && starts[d + 1] <= begin + t) ++d;
    doc[t] = int(d - first);
  }
  // Labels come from the corpus order, before any layout permutes tokens.
  for (long t = 0; t < seq_len; ++t) {
    s.tokens[t] = std::int32_t(c[begin + t]);
    s.labels[t] = doc[t] == doc[t + 1] ? std::int32_t(c[begin + t + 1]) : kIgnoreLabel;
    s.positions[t] = restart_positions ? begin + t - starts[first + doc[t]] : t;
  }
  if (doc[seq_len - 1] != 0) s.doc_ids.assign(doc.begin(), doc.begin() + seq_len);
  return s;
}

CorpusSampler::CorpusSampler(std::shared_ptr<const TokenCorpus> corpus, long seq_len, double heldout_fraction,
                             bool restart_positions)
    : corpus_(std::move(corpus)), seq_len_(seq_len), heldout_(heldout_fraction > 0), restart_(restart_positions) {
  const long n = corpus_->size(), need = seq_len + 1;
  split_ = heldout_ ? n - long(std::llround(double(n) * heldout_fraction)) : n;
  BURST_CHECK_INPUT(split_ >= need, corpus_->source(), " holds ", n, " tokens; ",
                    heldout_ ? str_cat("its training part (the first ", split_, ", data.heldout_fraction = ", heldout_fraction, ")")
                             : std::string("that"),
                    " is shorter than one sequence of seq_len + 1 = ", need, " tokens");
  BURST_CHECK_INPUT(!heldout_ || n - split_ >= need, corpus_->source(), " holds ", n, " tokens; its held-out part (the last ",
                    n - split_, ", data.heldout_fraction = ", heldout_fraction, ") is shorter than one sequence of seq_len + 1 = ",
                    need, " tokens");
}

Sequence CorpusSampler::make(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) const {
  const long lo = stream == 0 || !heldout_ ? 0 : split_, hi = stream == 0 ? split_ : corpus_->size();
  const std::uint64_t starts = std::uint64_t(hi - lo - seq_len_);  // windows of seq_len + 1 tokens
  const long begin = lo + long(sequence_seed(seed, stream, index) % starts);
  return pack_sequence(*corpus_, begin, seq_len_, restart_);
}

}  // namespace burst::data

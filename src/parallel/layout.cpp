#include "parallel/layout.hpp"

#include "core/error.hpp"

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace burst::parallel {

LayoutKind parse_layout(const std::string& n) {
  if (n == "contiguous") return LayoutKind::Contiguous;
  if (n == "zigzag") return LayoutKind::Zigzag;
  if (n == "striped") return LayoutKind::Striped;
  if (n == "document") return LayoutKind::Document;
  BURST_FAIL(ErrorKind::Config, "unknown layout '", n, "' (known: contiguous, zigzag, striped, document)");
}
const char* layout_name(LayoutKind k) {
  switch (k) {
    case LayoutKind::Contiguous: return "contiguous";
    case LayoutKind::Zigzag: return "zigzag";
    case LayoutKind::Striped: return "striped";
    case LayoutKind::Document: return "document";
  }
  return "?";
}
MaskType parse_mask(const std::string& n) {
  if (n == "full" || n == "none") return MaskType::Full;
  if (n == "causal") return MaskType::Causal;
  if (n == "window" || n == "sliding_window") return MaskType::Window;
  if (n == "document") return MaskType::Document;
  BURST_FAIL(ErrorKind::Config, "unknown mask '", n, "' (known: full, causal, window, document)");
}
const char* mask_name(MaskType m) {
  switch (m) {
    case MaskType::Full: return "full";
    case MaskType::Causal: return "causal";
    case MaskType::Window: return "window";
    case MaskType::Document: return "document";
  }
  return "?";
}

std::vector<long> SeqLayout::mask_positions() const {
  std::vector<long> p(slot.size());
  for (size_t i = 0; i < slot.size(); ++i) p[i] = slot[i] >= 0 ? slot[i] : 0;
  return p;
}
std::vector<int> SeqLayout::mask_docs() const {
  std::vector<int> d(slot.size());
  for (size_t i = 0; i < slot.size(); ++i) d[i] = slot[i] >= 0 ? doc[size_t(slot[i])] : -1;
  return d;
}

std::vector<double> SeqLayout::work_per_block(const MaskSpec& mask) const {
  std::vector<long> doc_start(size_t(seq), 0);
  for (long t = 1; t < seq; ++t) doc_start[size_t(t)] = doc[size_t(t)] == doc[size_t(t - 1)] ? doc_start[size_t(t - 1)] : t;
  std::vector<double> w(size_t(blocks), 0.0);
  for (int b = 0; b < blocks; ++b)
    for (long i = 0; i < local; ++i) {
      const long t = natural(b, i);
      if (t < 0) continue;
      double keys = 0;
      switch (mask.type) {
        case MaskType::Full: keys = double(seq); break;
        case MaskType::Causal: keys = double(t + 1); break;
        case MaskType::Window: keys = double(std::min(mask.window, t + 1)); break;
        case MaskType::Document: keys = double(t - doc_start[size_t(t)] + 1); break;
      }
      w[size_t(b)] += keys;
    }
  return w;
}
double SeqLayout::imbalance(const MaskSpec& mask) const {
  const auto w = work_per_block(mask);
  const double mean = std::accumulate(w.begin(), w.end(), 0.0) / double(w.size());
  return mean > 0 ? *std::max_element(w.begin(), w.end()) / mean : 1.0;
}

namespace {

long round_up(long x, long m) { return (x + m - 1) / m * m; }

std::vector<int> doc_ids(long seq, const std::vector<long>& lengths) {
  std::vector<int> d(size_t(seq), 0);
  if (lengths.empty()) return d;
  long t = 0;
  for (size_t i = 0; i < lengths.size(); ++i)
    for (long j = 0; j < lengths[i]; ++j) d[size_t(t++)] = int(i);
  return d;
}

// Block b's two zigzag chunks of the span [start, start + len) padded to
// `padded` (a multiple of 2P), appended to `out` (-1 past the span's end).
void zigzag_chunks(long start, long len, long padded, int P, int b, std::vector<long>& out) {
  const long c = padded / (2 * P);
  for (long chunk : {long(b), long(2 * P - 1 - b)})
    for (long j = 0; j < c; ++j) {
      const long off = chunk * c + j;
      out.push_back(off < len ? start + off : -1);
    }
}

// Block lists -> slots, each block padded to `local`.
void fill_slots(SeqLayout& l, const std::vector<std::vector<long>>& lists, long align) {
  long longest = 0;
  for (const auto& x : lists) longest = std::max(longest, long(x.size()));
  l.local = round_up(std::max(longest, 1L), align);
  l.slot.assign(size_t(l.blocks) * size_t(l.local), -1);
  for (int b = 0; b < l.blocks; ++b)
    std::copy(lists[size_t(b)].begin(), lists[size_t(b)].end(), l.slot.begin() + long(b) * l.local);
}

}  // namespace

SeqLayout make_layout(LayoutKind kind, long S, int P, const std::vector<long>& doc_lengths, long align) {
  BURST_CHECK_CONFIG(S >= 1, "layout: sequence length ", S, " must be >= 1");
  BURST_CHECK_CONFIG(P >= 1, "layout: ", P, " blocks; need >= 1");
  BURST_CHECK_CONFIG(align >= 1, "layout: align ", align, " must be >= 1");
  if (!doc_lengths.empty()) {
    long sum = 0;
    for (long x : doc_lengths) {
      BURST_CHECK_CONFIG(x >= 1, "layout: document length ", x, " must be >= 1");
      sum += x;
    }
    BURST_CHECK_CONFIG(sum == S, "layout: document lengths sum to ", sum, ", not the sequence length ", S);
  }
  SeqLayout l;
  l.kind = kind;
  l.seq = S;
  l.blocks = P;
  l.doc = doc_ids(S, doc_lengths);
  std::vector<std::vector<long>> lists(static_cast<size_t>(P));
  switch (kind) {
    case LayoutKind::Contiguous: {
      const long s = (S + P - 1) / P;
      for (int b = 0; b < P; ++b)
        for (long i = 0; i < s; ++i) lists[size_t(b)].push_back(b * s + i < S ? b * s + i : -1);
      break;
    }
    case LayoutKind::Zigzag:
      for (int b = 0; b < P; ++b) zigzag_chunks(0, S, round_up(S, 2L * P), P, b, lists[size_t(b)]);
      break;
    case LayoutKind::Striped: {
      const long s = (S + P - 1) / P;
      for (int b = 0; b < P; ++b)
        for (long i = 0; i < s; ++i) lists[size_t(b)].push_back(i * P + b < S ? i * P + b : -1);
      break;
    }
    case LayoutKind::Document: {
      const std::vector<long> lens = doc_lengths.empty() ? std::vector<long>{S} : doc_lengths;
      // Split a document when its causal work is more than an eighth of a
      // block's share: greedy packing leaves max - mean below the largest
      // item placed whole, so the small items keep max/mean near 1.
      double total = 0;
      for (long x : lens) total += 0.5 * double(x) * double(x + 1);
      const double threshold = total / P / 8.0;
      std::vector<long> starts(lens.size(), 0);
      for (size_t i = 1; i < lens.size(); ++i) starts[i] = starts[i - 1] + lens[i - 1];
      std::vector<size_t> whole;
      for (size_t i = 0; i < lens.size(); ++i) {
        const bool split = lens[i] >= 2L * P && 0.5 * double(lens[i]) * double(lens[i] + 1) > threshold;
        if (!split) {
          whole.push_back(i);
          continue;
        }
        for (int b = 0; b < P; ++b) zigzag_chunks(starts[i], lens[i], round_up(lens[i], 2L * P), P, b, lists[size_t(b)]);
      }
      l.travel = long(lists[0].size());
      // Greedy: the largest work first, onto the block with the least work
      // among those with room under a token budget (so padding stays small).
      std::sort(whole.begin(), whole.end(), [&](size_t a, size_t b) { return lens[a] > lens[b]; });
      long short_tokens = 0;
      for (size_t i : whole) short_tokens += lens[i];
      const long budget = l.travel + (short_tokens + P - 1) / P + (whole.empty() ? 0 : lens[whole.front()]) / 2;
      std::vector<double> work(size_t(P), 0.0);
      for (int b = 0; b < P; ++b) {
        // the split part's work on this block: each chunk token sees its
        // offset in the document + 1 (its document's start from `starts`:
        // walking back to it was O(S^2), 90 s for one 1M document on 32 blocks)
        for (long t : lists[size_t(b)])
          if (t >= 0) work[size_t(b)] += double(t - starts[size_t(l.doc[size_t(t)])] + 1);
      }
      for (size_t i : whole) {
        int best = -1;
        for (int b = 0; b < P; ++b) {
          if (long(lists[size_t(b)].size()) + lens[i] > budget) continue;
          if (best < 0 || work[size_t(b)] < work[size_t(best)]) best = b;
        }
        if (best < 0) {  // nothing has room: the emptiest block
          best = 0;
          for (int b = 1; b < P; ++b)
            if (lists[size_t(b)].size() < lists[size_t(best)].size()) best = b;
        }
        for (long j = 0; j < lens[i]; ++j) lists[size_t(best)].push_back(starts[i] + j);
        work[size_t(best)] += 0.5 * double(lens[i]) * double(lens[i] + 1);
      }
      break;
    }
  }
  fill_slots(l, lists, align);
  if (kind != LayoutKind::Document) l.travel = l.local;
  return l;
}

SeqLayout split_blocks(const SeqLayout& in, int parts) {
  BURST_CHECK_CONFIG(parts >= 1 && in.local % parts == 0, "layout: ", in.local, " slots per block do not split into ",
                     parts, " parts");
  SeqLayout l = in;
  l.blocks = in.blocks * parts;
  l.local = in.local / parts;
  l.travel = l.local;
  return l;  // slots keep their order: piece p of block b is block b * parts + p
}

std::vector<long> log_uniform_documents(long seq, long lo, long hi, unsigned long long seed) {
  BURST_CHECK_CONFIG(lo >= 1 && hi >= lo, "documents: lengths in [", lo, ", ", hi, "] are not a valid range");
  std::vector<long> out;
  unsigned long long x = seed;
  auto next = [&]() {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    unsigned long long z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return double((z ^ (z >> 31)) >> 11) / double(1ull << 53);
  };
  long left = seq;
  while (left > 0) {
    const long len = std::lround(std::exp(std::log(double(lo)) + next() * (std::log(double(hi)) - std::log(double(lo)))));
    out.push_back(std::min(std::max(len, 1L), left));
    left -= out.back();
  }
  return out;
}

std::vector<long> parse_doc_lengths(const std::string& csv, long seq) {
  std::vector<long> out;
  // getline drops one empty field at the end: "256," would read as "256".
  BURST_CHECK_CONFIG(csv.empty() || csv.back() != ',', "--doc-lengths: '", csv, "' ends with a comma");
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    BURST_CHECK_CONFIG(!item.empty() && end && *end == '\0' && v >= 1 && errno != ERANGE, "--doc-lengths: '", item,
                       "' is not a positive integer");
    BURST_CHECK_CONFIG(v <= seq, "--doc-lengths: '", item, "' is longer than --seq ", seq);
    out.push_back(v);
  }
  BURST_CHECK_CONFIG(!out.empty(), "--doc-lengths: no lengths given");
  long sum = 0;
  for (long v : out) sum += v;
  BURST_CHECK_CONFIG(sum == seq, "--doc-lengths sum to ", sum, ", not --seq ", seq);
  return out;
}

}  // namespace burst::parallel

// Sequence layouts: where each token of one sequence of S tokens lives on P
// blocks (ranks of a sequence-parallel group), ALGORITHMS.md section 6.
//
//   contiguous  block b holds tokens [b s, (b+1) s)
//   zigzag      2P chunks; block b holds chunks b and 2P-1-b (causal balance)
//   striped     block b holds tokens b, b+P, b+2P, ...
//   document    documents long enough to matter are zigzag-split over all
//               blocks (each padded to a multiple of 2P); the others are
//               placed whole by greedy bin packing on their causal work and
//               sit after the split part of each block, so their K,V never
//               travel (`travel` = the split part's length).
//
// Every block has the same number of slots (`local`); a slot that holds no
// token is padding (natural index -1): masked out of attention, ignored by
// the loss. The layout permutes token ids, positions, labels and document
// ids together (to_block) and maps results back (to_natural).
#pragma once

#include <climits>
#include <string>
#include <vector>

namespace burst::parallel {

enum class LayoutKind { Contiguous, Zigzag, Striped, Document };
LayoutKind parse_layout(const std::string& name);  // Error(Config) naming the known ones
const char* layout_name(LayoutKind k);

// Attention masks over global positions (what attn-check and the model ask for).
enum class MaskType { Full, Causal, Window, Document };
MaskType parse_mask(const std::string& name);
const char* mask_name(MaskType m);
struct MaskSpec {
  MaskType type = MaskType::Causal;
  long window = 0;  // Window: a query sees keys in (pos - window, pos]
};

struct SeqLayout {
  LayoutKind kind = LayoutKind::Contiguous;
  long seq = 0;           // S real tokens
  int blocks = 1;         // P
  long local = 0;         // slots per block
  long travel = 0;        // leading slots of each block that other blocks may attend to
  std::vector<long> slot; // [P * local]: natural index, or -1 for padding
  std::vector<int> doc;   // [S]: document id of each natural token (0 for one document)

  long padding() const { return long(blocks) * local - seq; }
  long natural(int b, long i) const { return slot[size_t(b) * size_t(local) + size_t(i)]; }

  // Per slot, for the attention mask: global position (natural index) and
  // document id, -1 for padding.
  std::vector<long> mask_positions() const;
  std::vector<int> mask_docs() const;

  // Permute a natural-order array [S * width] into block b's slots
  // [local * width], padding with `pad`.
  template <class T> std::vector<T> to_block(int b, const std::vector<T>& natural_order, long width, T pad) const {
    std::vector<T> out(size_t(local) * size_t(width), pad);
    for (long i = 0; i < local; ++i) {
      const long t = natural(b, i);
      if (t >= 0)
        for (long w = 0; w < width; ++w) out[size_t(i * width + w)] = natural_order[size_t(t * width + w)];
    }
    return out;
  }
  // Scatter block b's slots back into natural order (padding dropped).
  template <class T> void to_natural(int b, const std::vector<T>& block, long width, std::vector<T>& natural_order) const {
    for (long i = 0; i < local; ++i) {
      const long t = natural(b, i);
      if (t >= 0)
        for (long w = 0; w < width; ++w) natural_order[size_t(t * width + w)] = block[size_t(i * width + w)];
    }
  }

  // Query-key pairs each block's queries compute under `mask` (the work
  // balance measure), and max/mean over blocks.
  std::vector<double> work_per_block(const MaskSpec& mask) const;
  double imbalance(const MaskSpec& mask) const;
};

// `doc_lengths` (summing to S) give document ids for any layout; the document
// layout needs them. `align`: `local` is rounded up to a multiple of it (USP
// splits each block over its head-parallel ranks).
SeqLayout make_layout(LayoutKind kind, long seq, int blocks, const std::vector<long>& doc_lengths = {}, long align = 1);

// Split each block into `parts` equal consecutive pieces (USP: the hp ranks
// of a cp block). Piece p of block b becomes block b * parts + p of the
// result; travel is not kept (the pieces are re-assembled before any ring).
SeqLayout split_blocks(const SeqLayout& l, int parts);

// Document lengths drawn log-uniform in [lo, hi] until they fill S (the last
// one cut to fit), from a seed: the balance benchmark of section 6.
std::vector<long> log_uniform_documents(long seq, long lo, long hi, unsigned long long seed);
std::vector<long> parse_doc_lengths(const std::string& csv, long seq);  // "a,b,c" summing to seq

}  // namespace burst::parallel

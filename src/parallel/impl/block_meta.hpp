// Positions and document ids of every slot of a layout, on the device for
// the kernels' masks and summarised on the host per block, so a method can
// skip a block pair that the mask hides without asking the device.
#pragma once

#include "kernels/attention.hpp"
#include "parallel/layout.hpp"

#include <algorithm>
#include <vector>

namespace burst::parallel::impl {

using RowSummary = kernels::SpanBounds;  // the non-padding rows' position and document ranges

class BlockMeta {
 public:
  using Mask = kernels::AttnMask<DeviceMem>;
  BlockMeta() = default;
  BlockMeta(const SeqLayout& l, const MaskSpec& m) : blocks_(l.blocks), local_(l.local), travel_(l.travel), mask_(m) {
    const auto pos = l.mask_positions();
    const auto doc = l.mask_docs();
    pos_ = View1<long>("work/attn_positions", pos.size());
    doc_ = View1<int>("work/attn_docs", doc.size());
    Kokkos::deep_copy(pos_, HUnmanaged1<const long>(pos.data(), pos.size()));
    Kokkos::deep_copy(doc_, HUnmanaged1<const int>(doc.data(), doc.size()));
    for (int b = 0; b < blocks_; ++b) {
      full_.push_back(summarise(pos, doc, long(b) * local_, local_));
      trav_.push_back(summarise(pos, doc, long(b) * local_, travel_));
    }
  }
  int blocks() const { return blocks_; }
  long local() const { return local_; }
  long travel() const { return travel_; }

  // Mask for query slots [q0, q0 + nq) against key slots [k0, k0 + nk) (slot
  // offsets over the whole layout).
  Mask mask_rows(long q0, long nq, long k0, long nk) const {
    using UL = Kokkos::View<const long*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    using UI = Kokkos::View<const int*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const bool causal = mask_.type != MaskType::Full;
    const long window = mask_.type == MaskType::Window ? mask_.window : 0;
    return Mask::general(causal, window, mask_.type == MaskType::Document, UI(doc_.data() + q0, size_t(nq)),
                         UI(doc_.data() + k0, size_t(nk)), UL(pos_.data() + q0, size_t(nq)), UL(pos_.data() + k0, size_t(nk)));
  }
  // Block qb's first `nq` rows against block kb's first `nk` rows.
  Mask mask(int qb, long nq, int kb, long nk) const { return mask_rows(long(qb) * local_, nq, long(kb) * local_, nk); }

  // Could the queries of block qb (all rows, or the travelling ones) see
  // any key of block kb (all rows, or the travelling ones)?
  bool visible(int qb, bool q_travel, int kb, bool k_travel) const {
    const RowSummary& q = q_travel ? trav_[size_t(qb)] : full_[size_t(qb)];
    const RowSummary& k = k_travel ? trav_[size_t(kb)] : full_[size_t(kb)];
    // The kernels' tile rule on whole blocks (kernels/attention_tiles.hpp).
    return kernels::spans_may_see(q, k, mask_.type != MaskType::Full, mask_.type == MaskType::Window ? mask_.window : 0,
                                  mask_.type == MaskType::Document);
  }

 private:
  static RowSummary summarise(const std::vector<long>& pos, const std::vector<int>& doc, long off, long n) {
    RowSummary s;
    for (long i = off; i < off + n; ++i) s.add(pos[size_t(i)], doc[size_t(i)]);
    return s;
  }
  int blocks_ = 0;
  long local_ = 0, travel_ = 0;
  MaskSpec mask_;
  View1<long> pos_;
  View1<int> doc_;
  std::vector<RowSummary> full_, trav_;
};

// Elementwise helpers on flat spans of packets and views (bf16 widens to float).
template <class Dst, class Src> void add_into(const Dst& dst, const Src& src, long n) {
  using D = typename Dst::non_const_value_type;
  using S = typename Src::non_const_value_type;
  Kokkos::parallel_for(
      "burst::ring_add_partial", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const long i) { dst(i) = D(accum_t<D>(dst(i)) + accum_t<S>(src(i))); });
}
template <class Dst, class Src> void convert_into(const Dst& dst, const Src& src, long n) {
  using D = typename Dst::non_const_value_type;
  using S = typename Src::non_const_value_type;
  Kokkos::parallel_for(
      "burst::ring_convert", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const long i) { dst(i) = D(accum_t<S>(src(i))); });
}

}  // namespace burst::parallel::impl

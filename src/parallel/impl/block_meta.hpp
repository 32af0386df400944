// Positions and document ids of every slot of a layout, on the device for
// the kernels' masks and summarised on the host per block, so a method can
// skip a block pair that the mask hides without asking the device.
#pragma once

#include "kernels/attention.hpp"
#include "parallel/layout.hpp"

#include <algorithm>
#include <vector>

namespace burst::parallel::impl {

struct RowSummary {
  bool any = false;  // any non-padding row
  long pmin = 0, pmax = 0;
  int dmin = 0, dmax = 0;
};

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
    if (!q.any || !k.any) return false;
    if (mask_.type != MaskType::Full && k.pmin > q.pmax) return false;
    if (mask_.type == MaskType::Window && q.pmin - k.pmax >= mask_.window) return false;
    if (mask_.type == MaskType::Document && std::max(q.dmin, k.dmin) > std::min(q.dmax, k.dmax)) return false;
    return true;
  }

 private:
  static RowSummary summarise(const std::vector<long>& pos, const std::vector<int>& doc, long off, long n) {
    RowSummary s;
    for (long i = off; i < off + n; ++i) {
      if (doc[size_t(i)] < 0) continue;
      const long p = pos[size_t(i)];
      const int d = doc[size_t(i)];
      if (!s.any) s.pmin = s.pmax = p, s.dmin = s.dmax = d, s.any = true;
      s.pmin = std::min(s.pmin, p), s.pmax = std::max(s.pmax, p), s.dmin = std::min(s.dmin, d), s.dmax = std::max(s.dmax, d);
    }
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

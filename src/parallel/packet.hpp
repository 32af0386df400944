// A packet: the fields one ring transfer carries (K and V; or Q, dO, lse, D;
// or partial sums), in one device byte buffer so that a hop is one transfer.
// Fields start at 64-byte offsets; the last 8 bytes hold the id of the block
// the payload belongs to, so the executed schedule can be checked.
#pragma once

#include "comm/communicator.hpp"
#include "core/error.hpp"

#include <string>
#include <vector>

namespace burst::parallel {

class Packet {
 public:
  template <class T> using U1 = Kokkos::View<T*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  template <class T> using U2 = Kokkos::View<T**, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  template <class T> using U3 = Kokkos::View<T***, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  Packet() = default;
  // The packet's size(field_bytes) bytes inside `arena` from `offset` (a
  // multiple of 64): packets of passes that never run at once (a ring's
  // forward and backward) share one allocation. The packet holds the arena.
  Packet(const std::vector<size_t>& field_bytes, const ByteView& arena, size_t offset)
      : bytes_(field_bytes), arena_(arena) {
    size_t off = 0;
    for (size_t b : bytes_) offsets_.push_back(off), off += pad64(b);
    header_ = off;
    BURST_ASSERT(offset % 64 == 0 && offset + header_ + 8 <= arena.extent(0), "packet of ", header_ + 8, " bytes at ",
                 offset, " in an arena of ", arena.extent(0));
    buf_ = ByteView(arena.data() + offset, header_ + 8);
  }
  // n rounded up to the 64 bytes every field (and every piece of an arena) starts at.
  static size_t pad64(size_t n) { return (n + 63) / 64 * 64; }
  // Bytes of a packet with these fields: each at a 64-byte offset, then the 8-byte block id.
  static size_t size(const std::vector<size_t>& field_bytes) {
    size_t off = 0;
    for (size_t b : field_bytes) off += pad64(b);
    return off + 8;
  }
  bool empty() const { return buf_.extent(0) == 0; }
  ByteView bytes() const { return buf_; }
  std::vector<size_t> spec() const { return bytes_; }

  template <class T> U1<T> field1(int i, size_t n) const { return U1<T>(ptr<T>(i, n), n); }
  template <class T> U2<T> field2(int i, size_t a, size_t b) const { return U2<T>(ptr<T>(i, a * b), a, b); }
  template <class T> U3<T> field3(int i, size_t a, size_t b, size_t c) const { return U3<T>(ptr<T>(i, a * b * c), a, b, c); }

  // On the execution space's stream (no host wait: transfers are ordered
  // against that stream by the communicator).
  void set_origin(long id) const { Kokkos::deep_copy(ExecSpace(), origin_view(), id); }
  long origin() const {
    long id = -1;
    Kokkos::deep_copy(Kokkos::View<long, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(&id), origin_view());
    return id;
  }
  void copy_from(const Packet& o) const { Kokkos::deep_copy(ExecSpace(), buf_, o.buf_); }

 private:
  template <class T> T* ptr(int i, size_t n) const {
    BURST_ASSERT(i >= 0 && size_t(i) < offsets_.size() && n * sizeof(T) <= bytes_[size_t(i)], "packet field ", i, " of ",
                 n * sizeof(T), " bytes");
    return reinterpret_cast<T*>(buf_.data() + offsets_[size_t(i)]);
  }
  Kokkos::View<long, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> origin_view() const {
    return Kokkos::View<long, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(reinterpret_cast<long*>(buf_.data() + header_));
  }
  std::vector<size_t> bytes_, offsets_;
  size_t header_ = 0;
  ByteView buf_, arena_;  // buf_: a range of arena_
};

}  // namespace burst::parallel

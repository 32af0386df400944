// Communicator: the one interface the distributed algorithms talk to.
//
//   auto c = Communicator::create(comm, "intra");  // a group, named for the byte counters
//   Request r = c->isend(view, peer);              // nonblocking point-to-point
//   c->all_to_all(send, recv); c->all_gather(...); c->reduce_scatter_sum(...)
//
// Every call hands its buffer to the transport in exactly one place
// (Communicator::transport_*), which adds the bytes to CommStats under
// (group, operation): a test of an algorithm's volume reads what the
// transport saw, never the algorithm's own bookkeeping.
//
// Backends: MPI (host views directly; device views through host staging, so
// several ranks can share one GPU, which NCCL refuses) and, on CUDA builds
// with BURST_ENABLE_NCCL, NCCL (comm/nccl_communicator.hpp). create() picks:
// NCCL when built with it, every rank has a GPU of its own and BURST_COMM is
// not "mpi"; MPI otherwise. BURST_COMM=nccl insists on NCCL (an error when it
// cannot serve the group).
#pragma once

#include "core/views.hpp"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace burst {

// Bytes this process handed to a transport, by group and operation, and the
// time it spent blocked in waits and blocking collectives (the exposed
// communication time; on NCCL the compute stream's stalls).
class CommStats {
 public:
  static CommStats& get();
  void add_bytes(const std::string& group, const std::string& op, std::int64_t bytes);
  void add_calls(const std::string& group, const std::string& op, std::int64_t calls = 1);
  void add_wait(const std::string& group, double seconds);
  // A wait whose length is known later (a GPU stream stalled on a transfer:
  // the NCCL backend times it with events); settle() asks every deferred
  // one for its seconds and adds them. The readers below settle first.
  void defer_wait(const std::string& group, std::function<double()> seconds);
  void settle() const;
  std::int64_t bytes(const std::string& group, const std::string& op) const;
  std::int64_t bytes_group(const std::string& group) const;  // every op of a group
  std::int64_t calls(const std::string& group, const std::string& op) const;
  std::int64_t total_bytes() const;
  double wait_seconds() const;
  double wait_seconds(const std::string& group) const;
  void reset();
  // "group/op" -> bytes, for logs.
  std::map<std::string, std::int64_t> table() const;

 private:
  std::map<std::pair<std::string, std::string>, std::int64_t> bytes_, calls_;
  mutable std::map<std::string, double> wait_;
  mutable std::vector<std::pair<std::string, std::function<double()>>> deferred_;
};

// A transfer in flight. wait() completes it (and copies staged data into the
// destination); destruction without wait() waits.
class Request {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
  };
  Request() = default;
  explicit Request(std::unique_ptr<Impl> impl, std::string group) : impl_(std::move(impl)), group_(std::move(group)) {}
  Request(Request&&) = default;
  Request& operator=(Request&& o) noexcept;
  ~Request();
  void wait();
  bool test();  // true when complete (or empty)
  bool active() const { return bool(impl_); }

 private:
  std::unique_ptr<Impl> impl_;
  std::string group_;
};

void wait_all(std::vector<Request>& rs);

using ByteView = Kokkos::View<unsigned char*, Layout, DeviceMem>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& group() const { return group_; }
  virtual MPI_Comm mpi_comm() const = 0;  // for set-up and process management
  virtual const char* backend() const = 0;  // "mpi", "mpi-staging" (device views via host) or "nccl"

  // The backend create() picks for `comm` (collective; the same on every
  // rank): see the top of this file. The caller keeps its own comm.
  static std::unique_ptr<Communicator> create(MPI_Comm comm, const std::string& group);
  // MPI backend over a duplicate of `comm` (the caller keeps its own).
  static std::unique_ptr<Communicator> mpi(MPI_Comm comm, const std::string& group);
  // A transport that moves and counts nothing (transfers complete at once,
  // buffers untouched), with comm's ranks: a method run on it does exactly
  // its computation, for benchmarks (`burst bench attention`'s compute time).
  static std::unique_ptr<Communicator> null(MPI_Comm comm, const std::string& group);
  // Split this group (collective): members with the same color form a new
  // group, ordered by key; the same backend as this one.
  virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& group) const = 0;

  // Point-to-point on device byte buffers (any Kokkos view of the default
  // memory space can be viewed as bytes with as_bytes()). Tag distinguishes
  // concurrent transfers between the same pair.
  virtual Request isend(ByteView buf, int peer, int tag) = 0;
  virtual Request irecv(ByteView buf, int peer, int tag) = 0;

  // Collectives on equal-sized chunks: send/recv hold size() chunks.
  virtual void all_to_all(ByteView send, ByteView recv) = 0;
  virtual void all_gather(ByteView send_chunk, ByteView recv) = 0;
  // Sums (float or double elements).
  virtual void reduce_scatter_sum(Kokkos::View<const float*, Layout, DeviceMem> send, Kokkos::View<float*, Layout, DeviceMem> recv) = 0;
  virtual void reduce_scatter_sum(Kokkos::View<const double*, Layout, DeviceMem> send, Kokkos::View<double*, Layout, DeviceMem> recv) = 0;
  virtual void all_reduce_sum(Kokkos::View<float*, Layout, DeviceMem> buf) = 0;
  virtual void all_reduce_sum(Kokkos::View<double*, Layout, DeviceMem> buf) = 0;
  virtual void barrier() = 0;
  // The host waits until every transfer this communicator started is
  // complete, at most comm_timeout() seconds (then Error(Comm) naming
  // `what`). MPI: nothing is left in flight after wait(); NCCL: the streams.
  virtual void synchronize(const char* what) { (void)what; }

 protected:
  Communicator(int rank, int size, std::string group) : rank_(rank), size_(size), group_(std::move(group)) {}
  // Every backend reports its transport calls here.
  void count(const char* op, std::int64_t bytes) const;
  int rank_ = 0, size_ = 1;
  std::string group_;
};

// Reinterpret a contiguous view of the default memory space as bytes.
template <class V> ByteView as_bytes(const V& v) {
  static_assert(std::is_same<typename V::memory_space, DeviceMem>::value, "as_bytes: device views only");
  using U = Kokkos::View<unsigned char*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  return U(reinterpret_cast<unsigned char*>(const_cast<typename V::non_const_value_type*>(v.data())),
           v.span() * sizeof(typename V::value_type));
}

}  // namespace burst

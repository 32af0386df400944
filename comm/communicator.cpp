#include "comm/communicator.hpp"

#include "comm/collectives.hpp"
#include "core/error.hpp"

#if defined(BURST_HAVE_NCCL) || defined(BURST_SIM_NCCL)
#include "comm/nccl_communicator.hpp"
#endif

#include <chrono>
#include <climits>
#include <cstdlib>

namespace burst {

// ------------------------------------------------------------------ stats
CommStats& CommStats::get() {
  static CommStats s;
  return s;
}
void CommStats::add_bytes(const std::string& g, const std::string& op, std::int64_t b) { bytes_[{g, op}] += b; }
void CommStats::add_calls(const std::string& g, const std::string& op, std::int64_t c) { calls_[{g, op}] += c; }
void CommStats::add_wait(const std::string& g, double s) { wait_[g] += s; }
void CommStats::defer_wait(const std::string& g, std::function<double()> s) { deferred_.emplace_back(g, std::move(s)); }
void CommStats::settle() const {
  auto d = std::move(deferred_);
  deferred_.clear();
  for (auto& x : d) wait_[x.first] += x.second();
}
std::int64_t CommStats::bytes(const std::string& g, const std::string& op) const {
  auto it = bytes_.find({g, op});
  return it == bytes_.end() ? 0 : it->second;
}
std::int64_t CommStats::bytes_group(const std::string& g) const {
  std::int64_t t = 0;
  for (const auto& kv : bytes_)
    if (kv.first.first == g) t += kv.second;
  return t;
}
std::int64_t CommStats::calls(const std::string& g, const std::string& op) const {
  auto it = calls_.find({g, op});
  return it == calls_.end() ? 0 : it->second;
}
std::int64_t CommStats::total_bytes() const {
  std::int64_t t = 0;
  for (const auto& kv : bytes_) t += kv.second;
  return t;
}
double CommStats::wait_seconds() const {
  settle();
  double t = 0;
  for (const auto& kv : wait_) t += kv.second;
  return t;
}
double CommStats::wait_seconds(const std::string& g) const {
  settle();
  auto it = wait_.find(g);
  return it == wait_.end() ? 0.0 : it->second;
}
void CommStats::reset() {
  settle();  // the deferred waits' events are released
  bytes_.clear();
  calls_.clear();
  wait_.clear();
}
std::map<std::string, std::int64_t> CommStats::table() const {
  std::map<std::string, std::int64_t> t;
  for (const auto& kv : bytes_) t[kv.first.first + "/" + kv.first.second] = kv.second;
  return t;
}

// ---------------------------------------------------------------- request
Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (impl_) {
      try {
        wait();
      } catch (...) {
      }
    }
    impl_ = std::move(o.impl_);
    group_ = std::move(o.group_);
  }
  return *this;
}
Request::~Request() {
  if (impl_) {
    try {
      wait();
    } catch (...) {
    }
  }
}
void Request::wait() {
  if (!impl_) return;
  const auto t0 = std::chrono::steady_clock::now();
  impl_->wait();
  CommStats::get().add_wait(group_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  impl_.reset();
}
bool Request::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  impl_->wait();
  impl_.reset();
  return true;
}
void wait_all(std::vector<Request>& rs) {
  for (auto& r : rs) r.wait();
  rs.clear();
}

void Communicator::count(const char* op, std::int64_t bytes) const {
  CommStats::get().add_bytes(group_, op, bytes);
  CommStats::get().add_calls(group_, op, 1);
}

// ------------------------------------------------------------ MPI backend
namespace {

constexpr bool kDeviceIsHost = Kokkos::SpaceAccessibility<Kokkos::HostSpace, DeviceMem>::accessible;
using HostBytes = Kokkos::View<unsigned char*, Layout, HostMem>;
// MPI counts are int: large messages go as several, in order (MPI does not
// let messages with the same tag between one pair overtake each other).
constexpr std::int64_t kMaxMsg = std::int64_t(1) << 30;

template <class F> void for_chunks(std::int64_t n, F f) {
  for (std::int64_t off = 0; off < n; off += kMaxMsg) f(off, std::min(kMaxMsg, n - off));
}

// A communicator of ours owns its MPI_Comm: rank and size are read off it,
// a split makes another of the same backend, and it is freed at the end
// (unless MPI is already finalized).
template <class C> std::unique_ptr<Communicator> adopt(MPI_Comm c, const std::string& group) {
  int r, s;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &s);
  return std::make_unique<C>(c, r, s, group);
}
template <class C> std::unique_ptr<Communicator> split_as(MPI_Comm comm, int color, int key, const std::string& group) {
  MPI_Comm c;
  MPI_Comm_split(comm, color, key, &c);
  return adopt<C>(c, group);
}
template <class C> std::unique_ptr<Communicator> dup_as(MPI_Comm comm, const std::string& group) {
  MPI_Comm c;
  MPI_Comm_dup(comm, &c);
  return adopt<C>(c, group);
}
void free_comm(MPI_Comm& c) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

struct MpiRequest : Request::Impl {
  std::vector<MPI_Request> reqs;
  HostBytes staging;  // device builds: the host copy
  ByteView dest;      // receive into device memory at wait()
  bool recv = false;
  std::int64_t bytes = 0;
  const char* what = "point-to-point transfer";
  void wait() override {
    // Bounded by comm.timeout_s like every collective: a peer that died or
    // stalls mid-ring ends the job with a message instead of a hang.
    wait_all_bounded(reqs.data(), int(reqs.size()), what, bytes);
    reqs.clear();
    if (recv && staging.extent(0) > 0) {
      Kokkos::deep_copy(dest, staging);
      recv = false;
    }
  }
  bool test() override {
    int done = 1;
    if (!reqs.empty()) MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    return done != 0;
  }
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, std::string group)
      : Communicator(rank, size, std::move(group)), comm_(comm) {}
  ~MpiCommunicator() override { free_comm(comm_); }
  MPI_Comm mpi_comm() const override { return comm_; }
  const char* backend() const override { return kDeviceIsHost ? "mpi" : "mpi-staging"; }

  std::unique_ptr<Communicator> split(int color, int key, const std::string& group) const override {
    return split_as<MpiCommunicator>(comm_, color, key, group);
  }

  Request isend(ByteView buf, int peer, int tag) override {
    check_peer(peer, "isend");
    const std::int64_t n = std::int64_t(buf.extent(0));
    count("send", n);
    auto r = std::make_unique<MpiRequest>();
    r->bytes = n, r->what = "point-to-point send";
    const unsigned char* p = buf.data();
    if (!kDeviceIsHost) {
      r->staging = HostBytes(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/staging_send"), n);
      Kokkos::deep_copy(r->staging, buf);
      p = r->staging.data();
    } else {
      Kokkos::fence();  // the producer kernel must be done with the buffer
    }
    for_chunks(n, [&](std::int64_t off, std::int64_t c) {
      r->reqs.emplace_back();
      MPI_Isend(p + off, int(c), MPI_BYTE, peer, tag, comm_, &r->reqs.back());
    });
    return Request(std::move(r), group_);
  }

  Request irecv(ByteView buf, int peer, int tag) override {
    check_peer(peer, "irecv");
    const std::int64_t n = std::int64_t(buf.extent(0));
    auto r = std::make_unique<MpiRequest>();
    r->bytes = n, r->what = "point-to-point receive";
    unsigned char* p = buf.data();
    if (!kDeviceIsHost) {
      r->staging = HostBytes(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/staging_recv"), n);
      r->dest = buf;
      r->recv = true;
      p = r->staging.data();
    }
    for_chunks(n, [&](std::int64_t off, std::int64_t c) {
      r->reqs.emplace_back();
      MPI_Irecv(p + off, int(c), MPI_BYTE, peer, tag, comm_, &r->reqs.back());
    });
    return Request(std::move(r), group_);
  }

  void all_to_all(ByteView send, ByteView recv) override {
    const std::int64_t chunk = chunk_of(send, recv, "all_to_all");
    count("all_to_all", chunk * (size_ - 1));
    collective(send, recv, named("all-to-all").c_str(), chunk * size_, [&](const void* s, void* r, MPI_Request* q) {
      MPI_Ialltoall(s, int(chunk), MPI_BYTE, r, int(chunk), MPI_BYTE, comm_, q);
    });
  }

  void all_gather(ByteView send_chunk, ByteView recv) override {
    const std::int64_t chunk = std::int64_t(send_chunk.extent(0));
    BURST_ASSERT(std::int64_t(recv.extent(0)) == chunk * size_, "all_gather: receive buffer has ", recv.extent(0),
                " bytes, expected ", chunk * size_);
    // In the widest words that divide the chunk: MPI's int count then reaches
    // 2^31 of them (ZeRO's chunk of one unit is bf16 or fp32, up to 16 GiB).
    const int w = chunk % 8 == 0 ? 8 : chunk % 4 == 0 ? 4 : chunk % 2 == 0 ? 2 : 1;
    const MPI_Datatype word = w == 8 ? MPI_UINT64_T : w == 4 ? MPI_UINT32_T : w == 2 ? MPI_UINT16_T : MPI_BYTE;
    BURST_ASSERT(chunk / w <= INT_MAX, "all_gather: chunk of ", chunk, " bytes exceeds MPI's int count of ", w, "-byte words");
    count("all_gather", chunk * (size_ - 1));
    collective(send_chunk, recv, named("all-gather").c_str(), chunk * size_, [&](const void* s, void* r, MPI_Request* q) {
      MPI_Iallgather(s, int(chunk / w), word, r, int(chunk / w), word, comm_, q);
    });
  }

  void reduce_scatter_sum(Kokkos::View<const float*, Layout, DeviceMem> s, Kokkos::View<float*, Layout, DeviceMem> r) override {
    reduce_scatter_impl(s, r, MPI_FLOAT);
  }
  void reduce_scatter_sum(Kokkos::View<const double*, Layout, DeviceMem> s, Kokkos::View<double*, Layout, DeviceMem> r) override {
    reduce_scatter_impl(s, r, MPI_DOUBLE);
  }
  void all_reduce_sum(Kokkos::View<float*, Layout, DeviceMem> b) override { all_reduce_impl(b, MPI_FLOAT); }
  void all_reduce_sum(Kokkos::View<double*, Layout, DeviceMem> b) override { all_reduce_impl(b, MPI_DOUBLE); }
  void barrier() override { barrier_bounded(comm_, "barrier"); }

 private:
  // "all-reduce on group 'zero'": what a timed-out collective names.
  std::string named(const char* op) const { return std::string(op) + " on group '" + group_ + "'"; }
  void check_peer(int peer, const char* what) const {
    BURST_ASSERT(peer >= 0 && peer < size_, what, ": peer ", peer, " outside group '", group_, "' of ", size_, " ranks");
  }
  std::int64_t chunk_of(ByteView send, ByteView recv, const char* what) const {
    BURST_ASSERT(send.extent(0) == recv.extent(0) && send.extent(0) % size_t(size_) == 0, what, ": buffers of ",
                send.extent(0), " and ", recv.extent(0), " bytes do not split into ", size_, " equal chunks");
    const std::int64_t chunk = std::int64_t(send.extent(0)) / size_;
    BURST_ASSERT(chunk <= INT_MAX, what, ": chunk of ", chunk, " bytes exceeds MPI's int count");
    return chunk;
  }
  // A blocking collective is exposed communication from start to end
  // (staging included): its time goes to CommStats as wait time.
  struct Exposed {
    const std::string& group;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    explicit Exposed(const std::string& g) : group(g) {}
    ~Exposed() { CommStats::get().add_wait(group, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
  };
  // Run an MPI collective on host pointers, staging device buffers: `post`
  // starts it non-blocking, and wait_bounded completes it (bounded by
  // comm.timeout_s, and waiting as wait_mode() says: MPI's blocking
  // collectives busy-poll, which on shared cores keeps the core from the
  // rank being waited for).
  template <class F> void collective(ByteView send, ByteView recv, const char* what, std::int64_t bytes, F post) {
    Exposed timed(group_);
    auto run = [&](const void* s, void* r) {
      MPI_Request q;
      post(s, r, &q);
      wait_bounded(q, what, bytes);
    };
    if (kDeviceIsHost) {
      Kokkos::fence();
      run(send.data(), recv.data());
      return;
    }
    auto hs = Kokkos::create_mirror_view_and_copy(HostMem(), send);
    HostBytes hr(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/staging_recv"), recv.extent(0));
    run(hs.data(), hr.data());
    Kokkos::deep_copy(recv, hr);
  }
  template <class T>
  void reduce_scatter_impl(Kokkos::View<const T*, Layout, DeviceMem> s, Kokkos::View<T*, Layout, DeviceMem> r, MPI_Datatype type) {
    BURST_ASSERT(s.extent(0) == r.extent(0) * size_t(size_), "reduce_scatter: send has ", s.extent(0),
                " elements, expected ", size_, " x ", r.extent(0));
    BURST_ASSERT(r.extent(0) <= size_t(INT_MAX), "reduce_scatter: chunk exceeds MPI's int count");
    count("reduce_scatter", std::int64_t(r.extent(0) * sizeof(T)) * (size_ - 1));
    Exposed timed(group_);
    const std::int64_t bytes = std::int64_t(s.extent(0) * sizeof(T));
    auto run = [&](const T* sp, T* rp) {
      MPI_Request q;
      MPI_Ireduce_scatter_block(sp, rp, int(r.extent(0)), type, MPI_SUM, comm_, &q);
      wait_bounded(q, named("reduce-scatter").c_str(), bytes);
    };
    if (kDeviceIsHost) {
      Kokkos::fence();
      run(s.data(), r.data());
      return;
    }
    auto hs = Kokkos::create_mirror_view_and_copy(HostMem(), s);
    auto hr = Kokkos::create_mirror_view(r);
    run(hs.data(), hr.data());
    Kokkos::deep_copy(r, hr);
  }
  template <class T> void all_reduce_impl(Kokkos::View<T*, Layout, DeviceMem> b, MPI_Datatype type) {
    const std::int64_t n = std::int64_t(b.extent(0));
    // What a ring all-reduce puts on the wire per rank.
    count("all_reduce", size_ > 1 ? 2 * (size_ - 1) * n * std::int64_t(sizeof(T)) / size_ : 0);
    Exposed timed(group_);
    auto run = [&](T* p) {
      for (std::int64_t off = 0; off < n; off += kMaxMsg) {
        MPI_Request q;
        MPI_Iallreduce(MPI_IN_PLACE, p + off, int(std::min(kMaxMsg, n - off)), type, MPI_SUM, comm_, &q);
        wait_bounded(q, named("all-reduce").c_str(), std::int64_t(std::min(kMaxMsg, n - off)) * std::int64_t(sizeof(T)));
      }
    };
    if (kDeviceIsHost) {
      Kokkos::fence();
      run(b.data());
      return;
    }
    auto h = Kokkos::create_mirror_view_and_copy(HostMem(), b);
    run(h.data());
    Kokkos::deep_copy(b, h);
  }
  MPI_Comm comm_;
};

// ----------------------------------------------------------- null backend
class NullCommunicator final : public Communicator {
 public:
  NullCommunicator(MPI_Comm comm, int rank, int size, std::string group)
      : Communicator(rank, size, std::move(group)), comm_(comm) {}
  ~NullCommunicator() override { free_comm(comm_); }
  MPI_Comm mpi_comm() const override { return comm_; }
  const char* backend() const override { return "null"; }
  std::unique_ptr<Communicator> split(int color, int key, const std::string& group) const override {
    return split_as<NullCommunicator>(comm_, color, key, group);
  }
  Request isend(ByteView, int, int) override { return Request(); }
  Request irecv(ByteView, int, int) override { return Request(); }
  void all_to_all(ByteView, ByteView) override {}
  void all_gather(ByteView, ByteView) override {}
  void reduce_scatter_sum(Kokkos::View<const float*, Layout, DeviceMem>, Kokkos::View<float*, Layout, DeviceMem>) override {}
  void reduce_scatter_sum(Kokkos::View<const double*, Layout, DeviceMem>, Kokkos::View<double*, Layout, DeviceMem>) override {}
  void all_reduce_sum(Kokkos::View<float*, Layout, DeviceMem>) override {}
  void all_reduce_sum(Kokkos::View<double*, Layout, DeviceMem>) override {}
  void barrier() override {}

 private:
  MPI_Comm comm_;
};

}  // namespace

std::unique_ptr<Communicator> Communicator::null(MPI_Comm comm, const std::string& group) {
  return dup_as<NullCommunicator>(comm, group);
}

std::unique_ptr<Communicator> Communicator::mpi(MPI_Comm comm, const std::string& group) {
  return dup_as<MpiCommunicator>(comm, group);
}

std::unique_ptr<Communicator> Communicator::create(MPI_Comm comm, const std::string& group) {
  const char* env = std::getenv("BURST_COMM");
  const std::string want = env && *env ? env : "auto";  // empty: unset, as every BURST_* switch
  // Every rank of the group agrees before any throws (the environment may
  // differ between ranks: one that stopped alone left the others waiting).
  // nccl-sim: the NCCL backend over the simulated NCCL of host builds
  // (comm/sim/), for its tests at several ranks without GPUs.
  const int code = want == "auto" ? 0 : want == "mpi" ? 1 : want == "nccl" ? 2 : want == "nccl-sim" ? 3 : 4;
  int lo = code, hi = code;
  MPI_Allreduce(&code, &lo, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(&code, &hi, 1, MPI_INT, MPI_MAX, comm);
  BURST_CHECK_CONFIG(code != 4, "BURST_COMM='", want, "': expected auto, mpi or nccl (or nccl-sim, the simulated NCCL of host builds)");
  BURST_CHECK_CONFIG(hi != 4, "BURST_COMM is not auto, mpi or nccl on another rank of group '", group, "'");
  BURST_CHECK_CONFIG(lo == hi, "BURST_COMM differs between the ranks of group '", group, "' (this rank: ", want,
                     "): set it the same on every rank");
  if (want == "mpi") return mpi(comm, group);
#if defined(BURST_SIM_NCCL)
  BURST_CHECK_CONFIG(want != "nccl", "BURST_COMM=nccl but this build has no NCCL (configure a CUDA build with "
                     "-DBURST_ENABLE_NCCL=ON; BURST_COMM=nccl-sim runs the NCCL backend over a simulated NCCL, for tests)");
  if (want == "auto") return mpi(comm, group);
  std::string why;
  if (nccl_usable(comm, &why)) return make_nccl_communicator(comm, group);
  BURST_FAIL(ErrorKind::Config, "BURST_COMM=nccl-sim but the simulated NCCL cannot serve group '", group, "': ", why);
#elif defined(BURST_HAVE_NCCL)
  BURST_CHECK_CONFIG(want != "nccl-sim", "BURST_COMM=nccl-sim: the simulated NCCL is part of host builds only; this build has "
                     "NCCL itself (BURST_COMM=nccl)");
  std::string why;
  if (nccl_usable(comm, &why)) return make_nccl_communicator(comm, group);
  BURST_CHECK_CONFIG(want != "nccl", "BURST_COMM=nccl but NCCL cannot serve group '", group, "': ", why);
#else
  BURST_CHECK_CONFIG(want != "nccl" && want != "nccl-sim", "BURST_COMM=", want, " but this build has no NCCL (configure with "
                     "-DBURST_ENABLE_NCCL=ON; nccl-sim: a host build with -DBURST_SIM_NCCL=ON)");
#endif
  return mpi(comm, group);
}

}  // namespace burst

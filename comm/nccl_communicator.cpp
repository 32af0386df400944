#include "comm/nccl_communicator.hpp"

#include "comm/collectives.hpp"
#include "core/error.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace burst {

namespace {

#define BURST_CUDA(call)                                                                                     \
  do {                                                                                                       \
    const cudaError_t burst_e_ = (call);                                                                     \
    BURST_CHECK(burst_e_ == cudaSuccess, ::burst::ErrorKind::Comm, #call, ": ", cudaGetErrorString(burst_e_)); \
  } while (0)

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// The stream Kokkos runs the engine's kernels on (the legacy default stream
// on Kokkos 3.4, the instance's own stream on 4.x; in the simulation of host
// builds, the host itself).
#ifdef BURST_SIM_NCCL
cudaStream_t compute_stream() { return burst_sim::compute_stream(); }
#else
cudaStream_t compute_stream() { return Kokkos::Cuda().cuda_stream(); }
#endif

// A high-priority stream that does not synchronise with the legacy stream.
cudaStream_t make_stream() {
  int least = 0, greatest = 0;
  BURST_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s;
  BURST_CUDA(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  return s;
}

cudaEvent_t make_event(bool timing = false) {
  cudaEvent_t e;
  BURST_CUDA(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

// `to` waits (on the device) for everything issued on `from` so far.
void stream_after(cudaStream_t to, cudaStream_t from, cudaEvent_t ev) {
  BURST_CUDA(cudaEventRecord(ev, from));
  BURST_CUDA(cudaStreamWaitEvent(to, ev, 0));
}

// The compute stream waits on `done`; two timing events around the stall
// measure how long it waited, added to CommStats as `group`'s wait time when
// the stats are next read (no host wait here on a GPU; in the simulated NCCL
// of host builds the compute stream is the host, which waits, bounded).
// Throws Error(Comm) naming `what` if the wait cannot be made.
void wait_timed(cudaEvent_t done, const std::string& group, const std::string& what) {
  cudaEvent_t before = make_event(true), after = make_event(true);
  BURST_CUDA(cudaEventRecord(before, compute_stream()));
  const cudaError_t e = cudaStreamWaitEvent(compute_stream(), done, 0);
  if (e != cudaSuccess) {
    cudaEventDestroy(before);
    cudaEventDestroy(after);
    BURST_FAIL(ErrorKind::Comm, what, " on group '", group, "' on rank ", world_rank(), ": ", cudaGetErrorString(e));
  }
  BURST_CUDA(cudaEventRecord(after, compute_stream()));
  CommStats::get().defer_wait(group, [before, after] {
    float ms = 0;
    cudaEventSynchronize(after);
    cudaEventElapsedTime(&ms, before, after);
    cudaEventDestroy(before);
    cudaEventDestroy(after);
    return double(ms) * 1e-3;
  });
}

// Polls `done` until it is true, failing with a message naming `what` after
// `limit` seconds (default comm_timeout(); 0: unbounded). `on_timeout` runs
// first (aborts).
template <class Done, class Abort>
void poll_bounded(Done done, Abort on_timeout, const std::string& what, double limit = comm_timeout()) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::chrono::microseconds nap(0);
  for (long polls = 0;; ++polls) {
    if (done()) return;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (limit > 0 && waited > limit) {
      on_timeout();
      BURST_FAIL(ErrorKind::Comm, what, " on rank ", world_rank(), " waited ", limit,
                 " s (", comm_timeout_name(), ") for the other ranks: one of them died, stalls or took another path; "
                 "the NCCL communicators were aborted");
    }
    // As wait_bounded: spin first, then nap up to 1 ms (ranks may share cores).
    if (polls > 200) nap = std::min(std::chrono::microseconds(1000), nap * 2 + std::chrono::microseconds(10));
    if (nap.count() > 0) std::this_thread::sleep_for(nap);
  }
}

// One NCCL communicator with its stream. Created non-blocking: every call
// may return ncclInProgress, and settle() waits (bounded) until it is done.
struct NcclLink {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;  // compute -> this stream
  bool aborted = false;

  // A fresh communicator over `mpi` (collective): rank 0 makes the unique id,
  // MPI hands it out.
  void init(MPI_Comm mpi, const std::string& what) {
    int rank = 0, size = 1;
    MPI_Comm_rank(mpi, &rank);
    MPI_Comm_size(mpi, &size);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank == 0) check(ncclGetUniqueId(&id), what + ": ncclGetUniqueId");
    MPI_Request req;
    MPI_Ibcast(&id, int(sizeof id), MPI_BYTE, 0, mpi, &req);
    wait_bounded(req, (what + ": handing out the NCCL unique id").c_str(), std::int64_t(sizeof id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
    if (r != ncclInProgress) check(r, what + ": ncclCommInitRankConfig");
    settle(what + ": ncclCommInitRankConfig");
    stream = make_stream();
    ready = make_event();
  }
  void check(ncclResult_t r, const std::string& what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const char* last = ncclGetLastError(comm);  // its argument is unused and may be null (NCCL >= 2.13)
    BURST_FAIL(ErrorKind::Comm, what, ": ", ncclGetErrorString(r), last && *last ? std::string(" (") + last + ")" : "");
  }
  // Wait (bounded) until the last call on this communicator is done with
  // its host part; throw on an asynchronous error.
  void settle(const std::string& what, double limit = comm_timeout()) {
    ncclResult_t state = ncclSuccess;
    poll_bounded(
        [&] {
          ncclCommGetAsyncError(comm, &state);
          return state != ncclInProgress;
        },
        [&] { abort(); }, what, limit);
    if (state != ncclSuccess) {
      const std::string msg = std::string(ncclGetErrorString(state));
      abort();
      BURST_FAIL(ErrorKind::Comm, what, ": ", msg);
    }
  }
  ncclResult_t async_error() {
    ncclResult_t state = ncclSuccess;
    if (comm && !aborted) ncclCommGetAsyncError(comm, &state);
    return state;
  }
  void abort() {
    if (comm && !aborted) ncclCommAbort(comm);
    aborted = true;
  }
  void destroy() {
    if (comm && !aborted) {
      // Finalize flushes what is in flight; if that cannot finish in time
      // (comm.timeout_s, at most 60 s even when unbounded), abort instead: a
      // destructor must not hang or throw.
      ncclCommFinalize(comm);
      try {
        const double t = comm_timeout();
        settle("destroying the NCCL communicator", t > 0 && t < 60 ? t : 60);
        ncclCommDestroy(comm);
      } catch (...) {
      }
    }
    comm = nullptr;
    if (stream) cudaStreamDestroy(stream);
    if (ready) cudaEventDestroy(ready);
    stream = nullptr, ready = nullptr;
  }
};

// One point-to-point operation waiting for its lane's group.
struct P2POp {
  bool send;
  void* ptr;
  size_t bytes;
  int peer;
};

// The completion event of one launched group, shared by its requests.
struct GroupEvent {
  cudaEvent_t done = nullptr;
  ~GroupEvent() {
    if (done) cudaEventDestroy(done);
  }
};

struct Lane;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm mpi, int rank, int size, std::string group);
  ~NcclCommunicator() override;
  MPI_Comm mpi_comm() const override { return mpi_; }
#ifdef BURST_SIM_NCCL
  const char* backend() const override { return "nccl-sim"; }
#else
  const char* backend() const override { return "nccl"; }
#endif

  std::unique_ptr<Communicator> split(int color, int key, const std::string& group) const override {
    MPI_Comm c;
    MPI_Comm_split(mpi_, color, key, &c);
    int r, s;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &s);
    return std::make_unique<NcclCommunicator>(c, r, s, group);
  }

  Request isend(ByteView buf, int peer, int tag) override;
  Request irecv(ByteView buf, int peer, int tag) override;

  void all_to_all(ByteView send, ByteView recv) override {
    const size_t n = send.extent(0);
    BURST_ASSERT(n == recv.extent(0) && n % size_t(size_) == 0, "all_to_all: buffers of ", send.extent(0), " and ",
                 recv.extent(0), " bytes do not split into ", size_, " equal chunks");
    const size_t chunk = n / size_t(size_);
    count("all_to_all", std::int64_t(chunk) * (size_ - 1));
    collective("all_to_all", [&] {
      base_.check(ncclGroupStart(), "all_to_all: ncclGroupStart");
      for (int p = 0; p < size_; ++p) {
        base_.check(ncclSend(send.data() + chunk * size_t(p), chunk, ncclInt8, p, base_.comm, base_.stream), "all_to_all: ncclSend");
        base_.check(ncclRecv(recv.data() + chunk * size_t(p), chunk, ncclInt8, p, base_.comm, base_.stream), "all_to_all: ncclRecv");
      }
      return ncclGroupEnd();
    });
  }

  void all_gather(ByteView send_chunk, ByteView recv) override {
    const size_t chunk = send_chunk.extent(0);
    BURST_ASSERT(recv.extent(0) == chunk * size_t(size_), "all_gather: receive buffer has ", recv.extent(0),
                 " bytes, expected ", chunk * size_t(size_));
    count("all_gather", std::int64_t(chunk) * (size_ - 1));
    collective("all_gather", [&] {
      return ncclAllGather(send_chunk.data(), recv.data(), chunk, ncclInt8, base_.comm, base_.stream);
    });
  }

  void reduce_scatter_sum(Kokkos::View<const float*, Layout, DeviceMem> s, Kokkos::View<float*, Layout, DeviceMem> r) override {
    reduce_scatter_impl(s, r, ncclFloat32);
  }
  void reduce_scatter_sum(Kokkos::View<const double*, Layout, DeviceMem> s, Kokkos::View<double*, Layout, DeviceMem> r) override {
    reduce_scatter_impl(s, r, ncclFloat64);
  }
  void all_reduce_sum(Kokkos::View<float*, Layout, DeviceMem> b) override { all_reduce_impl(b, ncclFloat32); }
  void all_reduce_sum(Kokkos::View<double*, Layout, DeviceMem> b) override { all_reduce_impl(b, ncclFloat64); }

  // A one-element all-reduce, then the host waits for it (bounded): no byte
  // count, as the MPI backend's MPI_Barrier has none.
  void barrier() override {
    collective("barrier", [&] { return ncclAllReduce(token_.data(), token_.data(), 1, ncclFloat32, ncclSum, base_.comm, base_.stream); });
    synchronize("barrier");
  }
  void synchronize(const char* what) override;

  // Launch a lane's pending operations as one NCCL group.
  void launch(Lane& lane, const char* what);
  void abort_all();
  Lane& lane(int tag);

 private:
  template <class F> void collective(const char* what, F call) {
    flush_all(what);
    stream_after(base_.stream, compute_stream(), base_.ready);
    base_.check(call(), std::string(what) + " on group '" + group_ + "'");
    base_.settle(std::string(what) + " on group '" + group_ + "'");
    BURST_CUDA(cudaEventRecord(done_, base_.stream));
    try {
      wait_timed(done_, group_, what);
    } catch (...) {
      abort_all();  // as a timed-out host wait does: the group's state is unknown
      throw;
    }
  }
  template <class T>
  void reduce_scatter_impl(Kokkos::View<const T*, Layout, DeviceMem> s, Kokkos::View<T*, Layout, DeviceMem> r, ncclDataType_t type) {
    BURST_ASSERT(s.extent(0) == r.extent(0) * size_t(size_), "reduce_scatter: send has ", s.extent(0), " elements, expected ",
                 size_, " x ", r.extent(0));
    count("reduce_scatter", std::int64_t(r.extent(0) * sizeof(T)) * (size_ - 1));
    collective("reduce_scatter", [&] {
      return ncclReduceScatter(s.data(), r.data(), r.extent(0), type, ncclSum, base_.comm, base_.stream);
    });
  }
  template <class T> void all_reduce_impl(Kokkos::View<T*, Layout, DeviceMem> b, ncclDataType_t type) {
    const std::int64_t n = std::int64_t(b.extent(0));
    count("all_reduce", size_ > 1 ? 2 * (size_ - 1) * n * std::int64_t(sizeof(T)) / size_ : 0);
    collective("all_reduce", [&] { return ncclAllReduce(b.data(), b.data(), size_t(n), type, ncclSum, base_.comm, base_.stream); });
  }
  void flush_all(const char* what);

  MPI_Comm mpi_;
  NcclLink base_;
  cudaEvent_t done_ = nullptr;
  Kokkos::View<float*, Layout, DeviceMem> token_;
  std::map<int, std::unique_ptr<Lane>> lanes_;
};

// A tag's own NCCL communicator and its operations not yet launched.
struct Lane {
  NcclLink link;
  std::vector<P2POp> pending;
  std::shared_ptr<GroupEvent> pending_event;  // the event the pending group will record
  int sends = 0, recvs = 0;
};

struct NcclRequest : Request::Impl {
  NcclCommunicator* owner;
  Lane* lane;
  std::shared_ptr<GroupEvent> ev;
  std::string group;
  NcclRequest(NcclCommunicator* o, Lane* l, std::shared_ptr<GroupEvent> e, std::string g)
      : owner(o), lane(l), ev(std::move(e)), group(std::move(g)) {}
  bool launched() const { return lane->pending_event != ev; }
  void wait() override {
    if (!launched()) owner->launch(*lane, "a wait on a transfer");
    try {
      wait_timed(ev->done, group, "a wait on a transfer");
    } catch (...) {
      owner->abort_all();
      throw;
    }
  }
  bool test() override {
    if (!launched()) owner->launch(*lane, "a test of a transfer");
    const cudaError_t e = cudaEventQuery(ev->done);
    if (e == cudaErrorNotReady) {
      if (lane->link.async_error() != ncclSuccess) lane->link.settle("a test of a transfer on group '" + group + "'");
      return false;
    }
    BURST_CUDA(e);
    return true;
  }
};

NcclCommunicator::NcclCommunicator(MPI_Comm mpi, int rank, int size, std::string group)
    : Communicator(rank, size, std::move(group)), mpi_(mpi) {
  base_.init(mpi_, "NCCL communicator for group '" + group_ + "'");
  done_ = make_event();
  token_ = Kokkos::View<float*, Layout, DeviceMem>("comm/nccl_barrier", 1);
}

NcclCommunicator::~NcclCommunicator() {
  for (auto& kv : lanes_) kv.second->link.destroy();
  base_.destroy();
  if (done_) cudaEventDestroy(done_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
}

Lane& NcclCommunicator::lane(int tag) {
  auto it = lanes_.find(tag);
  if (it != lanes_.end()) return *it->second;
  auto l = std::make_unique<Lane>();
  // Collective over the group: every rank first uses this tag at the same
  // point of its program (ring programs are the same on every rank).
  l->link.init(mpi_, "NCCL lane for tag " + std::to_string(tag) + " of group '" + group_ + "'");
  return *lanes_.emplace(tag, std::move(l)).first->second;
}

Request NcclCommunicator::isend(ByteView buf, int peer, int tag) {
  BURST_ASSERT(peer >= 0 && peer < size_, "isend: peer ", peer, " outside group '", group_, "' of ", size_, " ranks");
  Lane& l = lane(tag);
  if (!l.pending_event) l.pending_event = std::make_shared<GroupEvent>();
  l.pending.push_back({true, buf.data(), buf.extent(0), peer});
  l.sends++;
  auto r = std::make_unique<NcclRequest>(this, &l, l.pending_event, group_);
  if (l.sends == l.recvs) launch(l, "isend");
  return Request(std::move(r), group_);
}

Request NcclCommunicator::irecv(ByteView buf, int peer, int tag) {
  BURST_ASSERT(peer >= 0 && peer < size_, "irecv: peer ", peer, " outside group '", group_, "' of ", size_, " ranks");
  Lane& l = lane(tag);
  if (!l.pending_event) l.pending_event = std::make_shared<GroupEvent>();
  l.pending.push_back({false, buf.data(), buf.extent(0), peer});
  l.recvs++;
  auto r = std::make_unique<NcclRequest>(this, &l, l.pending_event, group_);
  if (l.sends == l.recvs) launch(l, "irecv");
  return Request(std::move(r), group_);
}

void NcclCommunicator::launch(Lane& l, const char* what) {
  if (l.pending.empty()) return;
  const std::string where = std::string(what) + " (send/recv group on group '" + group_ + "')";
  // The lane's stream starts when the kernels issued so far (producers of
  // the send buffers, last readers of the receive buffers) are done.
  stream_after(l.link.stream, compute_stream(), l.link.ready);
  l.link.check(ncclGroupStart(), where);
  for (const P2POp& op : l.pending) {
    if (op.send) {
      count("send", std::int64_t(op.bytes));
      l.link.check(ncclSend(op.ptr, op.bytes, ncclInt8, op.peer, l.link.comm, l.link.stream), where + ": ncclSend");
    } else
      l.link.check(ncclRecv(op.ptr, op.bytes, ncclInt8, op.peer, l.link.comm, l.link.stream), where + ": ncclRecv");
  }
  l.link.check(ncclGroupEnd(), where + ": ncclGroupEnd");
  l.link.settle(where);
  l.pending_event->done = make_event();
  BURST_CUDA(cudaEventRecord(l.pending_event->done, l.link.stream));
  l.pending.clear();
  l.pending_event.reset();
  l.sends = l.recvs = 0;
}

void NcclCommunicator::flush_all(const char* what) {
  for (auto& kv : lanes_) launch(*kv.second, what);
}

void NcclCommunicator::abort_all() {
  for (auto& kv : lanes_) kv.second->link.abort();
  base_.abort();
}

void NcclCommunicator::synchronize(const char* what) {
  flush_all(what);
  std::vector<NcclLink*> links{&base_};
  for (auto& kv : lanes_) links.push_back(&kv.second->link);
  const std::string msg = std::string(what) + " on group '" + group_ + "'";
  for (NcclLink* k : links) {
    cudaEvent_t ev = k->ready;  // reuse: recorded now, at the end of the stream's work
    BURST_CUDA(cudaEventRecord(ev, k->stream));
    poll_bounded(
        [&] {
          if (k->async_error() != ncclSuccess) k->settle(msg);  // throws with NCCL's message
          const cudaError_t e = cudaEventQuery(ev);
          if (e == cudaErrorNotReady) return false;
          BURST_CUDA(e);
          return true;
        },
        [&] { abort_all(); }, msg);
  }
}

}  // namespace

bool nccl_usable(MPI_Comm comm, std::string* why) {
  // Local facts first, then agree: every rank must take the same backend.
  int ok = 1;
  std::string reason;
  int dev = -1;
  char bus[32] = {0};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, int(sizeof bus) - 1, dev) != cudaSuccess) {
    ok = 0;
    reason = "a rank has no CUDA device";
  }
  // Ranks of one node must hold distinct GPUs.
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int nsize = 1;
  MPI_Comm_size(node, &nsize);
  std::vector<char> all(size_t(nsize) * sizeof bus);
  MPI_Allgather(bus, int(sizeof bus), MPI_CHAR, all.data(), int(sizeof bus), MPI_CHAR, node);
  MPI_Comm_free(&node);
  std::vector<std::string> ids;
  for (int i = 0; i < nsize; ++i) ids.emplace_back(all.data() + size_t(i) * sizeof bus);
  std::sort(ids.begin(), ids.end());
  if (ok && std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    ok = 0;
    reason = "ranks of one node share a GPU (NCCL refuses that; the MPI backend stages through the host)";
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (why) *why = all_ok ? "" : (ok ? "another rank: no GPU of its own" : reason);
  return all_ok != 0;
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, const std::string& group) {
  MPI_Comm c;
  MPI_Comm_dup(comm, &c);
  int r, s;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &s);
  return std::make_unique<NcclCommunicator>(c, r, s, group);
}

}  // namespace burst

// The simulated CUDA streams and NCCL of host builds (see nccl.h and
// cuda_runtime.h beside this file for what is kept of their semantics).
//
// One "GPU" per process. Its streams are queues of items (an NCCL group, or a
// wait for an event of another stream) that a progress thread runs in order:
// a group is posted as receives and MPI_Issend on MPI_COMM_WORLD under the
// tag of its communicator (a receive as MPI_Improbe then MPI_Imrecv, its size
// checked first), and the stream moves to its next item only when
// every transfer of the group is complete. The compute stream is the host
// itself (Kokkos' host kernels are synchronous): an event recorded on it is
// complete at once, and making it wait for an event blocks the caller,
// bounded by comm.timeout_s, since a GPU stream that waits forever is the
// deadlock the simulation exists to show.
//
// A communicator is created from a unique id that names its creator (the
// group's rank 0) and a counter: the members send their world ranks to the
// creator and receive the whole table, non-blocking, so that creation is
// bounded like the rest (ncclInProgress until done). Its traffic uses its
// own tag, so two communicators over the same ranks never mix messages;
// MPI's order between two ranks on one tag is NCCL's order on one
// communicator.
#include "comm/sim/sim_nccl.hpp"

#include "comm/collectives.hpp"
#include "comm/sim/cuda_runtime.h"
#include "comm/sim/nccl.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace burst_sim {

namespace {

using Clock = std::chrono::steady_clock;
double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Tags on MPI_COMM_WORLD (which the engine itself only duplicates): the
// communicators' transfers in [ub/4, ub/2), the creation handshakes in
// [ub/2, 3 ub/4), ub = MPI_TAG_UB (2^28 - 1 on MPICH, 2^23 - 1 on Open MPI
// with UCX); each creating rank gets a slice of both, per_creator wide, and
// its communicators take the slice's tags in turn (wrapping after that many).
struct Tags {
  long base_traffic = 0, base_handshake = 0, per_creator = 0;
};
Tags& tags() {
  static Tags t;
  return t;
}
// Under the lock, before the first communicator: false when the MPI has too
// few tags for this many ranks.
bool set_up_tags(int world) {
  Tags& t = tags();
  if (t.per_creator > 0) return true;
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  const long top = flag && ub ? long(*ub) : 32767;  // the standard's minimum
  t.base_traffic = top / 4, t.base_handshake = top / 2;
  t.per_creator = std::min(4096L, (top / 4) / std::max(1, world));
  return t.per_creator >= 16;
}
constexpr size_t kMaxMessage = size_t(1) << 30;  // one MPI message at most (int counts): larger transfers go in pieces
constexpr char kMagic[8] = {'b', 'u', 'r', 's', 't', 's', 'i', 'm'};

thread_local std::string t_last_error;   // the message of this thread's last simulated failure
thread_local cudaError_t t_last_code = cudaSuccess;  // the CUDA code it was returned with

// The bound of a host wait: comm.timeout_s, or BURST_SIM_NCCL_TIMEOUT
// (default 120 s) where that is unbounded: a simulated deadlock must end.
double wait_limit() {
  const double t = burst::comm_timeout();
  if (t > 0) return t;
  const char* e = std::getenv("BURST_SIM_NCCL_TIMEOUT");
  const double v = e && *e ? std::atof(e) : 0;
  return v > 0 ? v : 120;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

struct Comm;
// Under the lock: advances a communicator's creation; true if it moved.
bool progress_creation(Comm& c);

// A transfer of one group: `peer` is a rank of `comm`.
struct Xfer {
  bool send;
  char* ptr;
  size_t bytes;
  int peer;
  Comm* comm;
};

struct Item {
  bool is_wait = false;
  // A group: its transfers, then `finish` (a collective's sums) once all are done.
  std::vector<Xfer> xfers;
  std::vector<MPI_Request> reqs;
  std::vector<size_t> req_bytes;  // expected bytes of each request (receives are checked)
  std::vector<int> req_is_recv;
  // A receive is matched (MPI_Improbe) before it is received (MPI_Imrecv), so
  // that a message of another size is seen, not truncated: MPI's truncation
  // error is fatal (MPI_COMM_WORLD's handler). Unmatched: req_got < 0.
  std::vector<long long> req_got;
  std::vector<char*> req_ptr;
  std::vector<int> req_peer, req_tag;
  std::vector<std::vector<char>> drain;  // messages larger than their receive
  std::vector<int> req_xfer;
  std::vector<std::vector<char>> scratch;
  std::function<void()> finish;
  std::string what;
  bool posted = false;
  // A wait: for `stream` to have completed `seq` items.
  Stream* stream = nullptr;
  long long seq = 0;
};

struct Stream {
  bool sync = false;  // the compute stream: the host
  std::deque<std::unique_ptr<Item>> queue;
  long long enqueued = 0, completed = 0;
  bool destroyed = false;
};

struct Event {
  Stream* stream = nullptr;  // null: complete (never recorded, or recorded on the compute stream)
  long long seq = 0;
  double t = 0;  // when it was recorded (compute stream) or first seen complete
};

enum class CommState { Creating, Ready, Aborted, Destroyed };

struct Comm {
  int rank = 0, size = 1;
  int creator = 0, counter = 0;
  std::vector<int> world;  // world rank of each rank of the communicator
  CommState state = CommState::Creating;
  ncclResult_t async = ncclInProgress;
  std::string last;
  int inflight = 0;  // queued groups that use it
  bool finalizing = false;
  // The creation handshake.
  std::vector<MPI_Request> hs;
  std::vector<int> hs_in;    // creator: (rank, world rank) of every member; member: the table
  int hs_out[2] = {0, 0};
  int traffic_tag() const { return int(tags().base_traffic + creator * tags().per_creator + counter % tags().per_creator); }
  int handshake_tag() const { return int(tags().base_handshake + creator * tags().per_creator + counter % tags().per_creator); }
};

namespace {

struct Sim {
  std::mutex mu;
  std::condition_variable work, done;
  std::thread thread;
  bool running = false, stopping = false;
  std::vector<Stream*> streams;
  std::vector<Comm*> creating;
  Stream compute;
  int created = 0;  // ids this rank has made
  Sim() { compute.sync = true; }
};

Sim& sim() {
  static Sim* s = new Sim;  // never destroyed: a stream may be touched by a late destructor
  return *s;
}

bool complete(const Event* e) { return !e->stream || e->stream->completed >= e->seq; }

std::string describe_queues() {
  // Under the lock: what each stream still holds (for a deadlock's message).
  std::ostringstream o;
  int n = 0;
  for (Stream* s : sim().streams) {
    if (s->queue.empty()) continue;
    const Item& head = *s->queue.front();
    o << (n++ ? "; " : "") << "a stream holds " << s->queue.size() << " item(s), the first ";
    if (head.is_wait) o << "a wait for another stream";
    else o << (head.posted ? "posted" : "not posted") << ": " << head.what;
  }
  return n ? o.str() : "no stream holds work";
}

// Posts a group's transfers (pieces of at most kMaxMessage bytes).
void post(Item& it) {
  for (size_t x = 0; x < it.xfers.size(); ++x) {
    const Xfer& t = it.xfers[x];
    const int peer = t.comm->world[size_t(t.peer)], tag = t.comm->traffic_tag();
    size_t off = 0;
    do {
      const size_t n = std::min(kMaxMessage, t.bytes - off);
      MPI_Request r = MPI_REQUEST_NULL;
      if (t.send) MPI_Issend(t.ptr + off, int(n), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);  // a receive: matched in pass()
      it.reqs.push_back(r);
      it.req_bytes.push_back(n);
      it.req_got.push_back(t.send ? (long long)n : -1);
      it.req_ptr.push_back(t.ptr + off);
      it.req_peer.push_back(peer);
      it.req_tag.push_back(tag);
      it.req_is_recv.push_back(t.send ? 0 : 1);
      it.req_xfer.push_back(int(x));
      off += n;
    } while (off < t.bytes);
  }
  it.posted = true;
}

// Cancels what a group posted (its communicator was aborted).
void cancel(Item& it) {
  for (size_t k = 0; k < it.reqs.size(); ++k) {
    MPI_Request& r = it.reqs[k];
    if (r == MPI_REQUEST_NULL) continue;
    if (!it.req_is_recv[k]) MPI_Cancel(&r);  // a receive with a request is matched (MPI_Imrecv): not cancellable
    MPI_Request_free(&r);
  }
}

bool aborted(const Item& it) {
  for (const Xfer& t : it.xfers)
    if (t.comm->state == CommState::Aborted) return true;
  return false;
}

void retire(Stream& s, Item& it) {
  for (const Xfer& t : it.xfers) t.comm->inflight--;  // as counted by enqueue()
  s.queue.pop_front();
  s.completed++;
}

// One pass over the creations and the streams, under the lock. True if
// anything moved.
bool pass() {
  Sim& S = sim();
  bool moved = false;
  for (size_t i = 0; i < S.creating.size();) {
    Comm* c = S.creating[i];
    if (progress_creation(*c)) moved = true;
    if (c->state != CommState::Creating) S.creating.erase(S.creating.begin() + long(i));
    else ++i;
  }
  for (Stream* s : S.streams) {
    while (!s->queue.empty()) {
      Item& it = *s->queue.front();
      if (it.is_wait) {
        if (it.stream->completed < it.seq) break;
        s->queue.pop_front();
        s->completed++;
        moved = true;
        continue;
      }
      if (aborted(it)) {
        cancel(it);
        retire(*s, it);
        moved = true;
        continue;
      }
      if (!it.posted) {
        post(it);
        moved = true;
      }
      // Match the receives, each after the earlier ones from the same peer
      // on the same tag (MPI's order is then NCCL's), and check the size.
      bool matched = true;
      for (size_t k = 0; k < it.reqs.size(); ++k) {
        if (it.req_got[k] >= 0) continue;
        bool earlier = false;
        for (size_t j = 0; j < k && !earlier; ++j)
          earlier = it.req_got[j] < 0 && it.req_peer[j] == it.req_peer[k] && it.req_tag[j] == it.req_tag[k];
        int found = 0;
        MPI_Message msg;
        MPI_Status st;
        if (!earlier) MPI_Improbe(it.req_peer[k], it.req_tag[k], MPI_COMM_WORLD, &found, &msg, &st);
        if (!found) {
          matched = false;
          continue;
        }
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        it.req_got[k] = got;
        char* into = it.req_ptr[k];
        if (size_t(got) > it.req_bytes[k]) {  // not into the receive: it would overflow (NCCL: undefined)
          it.drain.emplace_back(size_t(got));
          into = it.drain.back().data();
        }
        MPI_Imrecv(into, got, MPI_BYTE, &msg, &it.reqs[k]);
        moved = true;
      }
      if (!matched) break;
      int flag = 0;
      MPI_Testall(int(it.reqs.size()), it.reqs.data(), &flag, MPI_STATUSES_IGNORE);
      if (!flag) break;
      for (size_t k = 0; k < it.reqs.size(); ++k) {
        if (!it.req_is_recv[k] || size_t(it.req_got[k]) == it.req_bytes[k]) continue;
        const Xfer& t = it.xfers[size_t(it.req_xfer[k])];
        t.comm->async = ncclInvalidUsage;
        t.comm->last = "simulated NCCL: rank " + std::to_string(t.comm->rank) + " received " + std::to_string(it.req_got[k]) +
                       " bytes from rank " + std::to_string(t.peer) + " into a receive of " + std::to_string(it.req_bytes[k]) +
                       " (" + it.what + "; on NCCL a size mismatch is undefined behaviour)";
      }
      if (it.finish) it.finish();
      retire(*s, it);
      moved = true;
    }
  }
  return moved;
}

bool busy() {
  Sim& S = sim();
  if (!S.creating.empty()) return true;
  for (Stream* s : S.streams)
    if (!s->queue.empty()) return true;
  return false;
}

void run() {
  Sim& S = sim();
  std::unique_lock<std::mutex> lk(S.mu);
  std::chrono::microseconds nap(0);
  while (!S.stopping) {
    if (pass()) {
      S.done.notify_all();
      nap = std::chrono::microseconds(0);
      continue;
    }
    if (!busy()) {
      S.work.wait_for(lk, std::chrono::milliseconds(20));
      continue;
    }
    nap = std::min(std::chrono::microseconds(1000), nap * 2 + std::chrono::microseconds(20));
    lk.unlock();
    std::this_thread::sleep_for(nap);
    lk.lock();
  }
}

// Under the lock: starts the progress thread (MPI must allow it).
ncclResult_t start(std::string& why) {
  Sim& S = sim();
  if (S.running) return ncclSuccess;
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE) {
    why = "simulated NCCL: MPI was started without MPI_THREAD_MULTIPLE (the simulated GPU's progress thread calls MPI); "
          "set BURST_COMM=nccl-sim in the environment before the process starts";
    return ncclInvalidUsage;
  }
  S.stopping = false;
  S.thread = std::thread(run);
  S.running = true;
  return ncclSuccess;
}

// Blocks the caller until `ready()` (under the lock), bounded by
// comm_timeout(). False on timeout, with t_last_error set.
template <class Ready> bool block_until(std::unique_lock<std::mutex>& lk, Ready ready, const char* what) {
  const double limit = wait_limit();
  const double t0 = now_s();
  while (!ready()) {
    sim().done.wait_for(lk, std::chrono::milliseconds(2));
    if (now_s() - t0 > limit) {
      t_last_code = cudaErrorLaunchTimeout;
      t_last_error = std::string("simulated NCCL: ") + what + " waited " + std::to_string(int(limit)) + " s (" +
                     (burst::comm_timeout() > 0 ? burst::comm_timeout_name() : "BURST_SIM_NCCL_TIMEOUT") +
                     ") for transfers that did not complete: under NCCL's ordering this program deadlocks here, or a peer "
                     "stopped (" + describe_queues() + ")";
      return false;
    }
  }
  return true;
}

void enqueue(Stream* s, std::unique_ptr<Item> it) {
  for (const Xfer& t : it->xfers) t.comm->inflight++;
  s->queue.push_back(std::move(it));
  s->enqueued++;
  sim().work.notify_all();
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return 1;
    case ncclUint8: return 1;
    case ncclInt32: return 4;
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
  }
  return 0;
}

// The group being built by ncclGroupStart ... ncclGroupEnd on this thread.
struct Pending {
  Stream* stream;
  std::unique_ptr<Item> item;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_group;

// Adds an item's transfers to the open group (or enqueues it alone).
ncclResult_t submit(cudaStream_t s, std::unique_ptr<Item> it) {
  if (!s || s->sync) {
    t_last_error = "simulated NCCL: an operation on the compute stream (the engine gives NCCL streams of its own)";
    return ncclInvalidUsage;
  }
  std::lock_guard<std::mutex> g(sim().mu);
  for (const Xfer& t : it->xfers) {
    if (t.comm->state != CommState::Ready) {
      t_last_error = "simulated NCCL: " + it->what + " on a communicator that is " +
                     (t.comm->state == CommState::Creating ? "still being created" : "aborted or destroyed");
      return ncclInvalidUsage;
    }
    if (t.peer < 0 || t.peer >= t.comm->size) {
      t_last_error = "simulated NCCL: " + it->what + " with peer " + std::to_string(t.peer) + " outside " +
                     std::to_string(t.comm->size) + " ranks";
      return ncclInvalidArgument;
    }
  }
  if (t_group_depth > 0) {
    for (Pending& p : t_group)
      if (p.stream == s && !p.item->finish && !it->finish) {  // point-to-point on one stream: one group
        for (Xfer& x : it->xfers) p.item->xfers.push_back(x);
        p.item->what += ", " + it->what;
        return ncclSuccess;
      }
    t_group.push_back({s, std::move(it)});
    return ncclSuccess;
  }
  enqueue(s, std::move(it));
  return ncclSuccess;
}

std::unique_ptr<Item> group_item(const std::string& what) {
  auto it = std::make_unique<Item>();
  it->what = what;
  return it;
}

}  // namespace

bool progress_creation(Comm& c) {
  if (c.state != CommState::Creating || c.hs.empty()) return false;
  int flag = 0;
  MPI_Testall(int(c.hs.size()), c.hs.data(), &flag, MPI_STATUSES_IGNORE);
  if (!flag) return false;
  c.hs.clear();
  if (c.rank == 0) {
    if (c.world.empty()) {  // the members' ranks are in: check them, send the table
      std::vector<int> table(size_t(c.size), -1);
      table[0] = world_rank();
      for (int m = 0; m + 1 < c.size; ++m) {
        const int r = c.hs_in[size_t(2 * m)], w = c.hs_in[size_t(2 * m + 1)];
        if (r <= 0 || r >= c.size || table[size_t(r)] != -1) {
          c.state = CommState::Aborted;
          c.async = ncclInvalidUsage;
          c.last = "simulated NCCL: rank " + std::to_string(r) + " joined a communicator of " + std::to_string(c.size) +
                   " ranks twice or out of range";
          return true;
        }
        table[size_t(r)] = w;
      }
      c.world = table;
      c.hs.resize(size_t(c.size - 1));
      for (int r = 1; r < c.size; ++r)
        MPI_Isend(c.world.data(), c.size, MPI_INT, c.world[size_t(r)], c.handshake_tag(), MPI_COMM_WORLD, &c.hs[size_t(r - 1)]);
      return true;
    }
  } else {
    c.world = c.hs_in;
  }
  c.state = CommState::Ready;
  c.async = ncclSuccess;
  return true;
}

cudaStream_t compute_stream() { return &sim().compute; }

bool requested() {
  const char* e = std::getenv("BURST_COMM");
  return e && std::string(e) == "nccl-sim";
}

void shutdown() {
  Sim& S = sim();
  std::unique_lock<std::mutex> lk(S.mu);
  if (!S.running) return;
  S.stopping = true;
  S.work.notify_all();
  lk.unlock();
  S.thread.join();
  lk.lock();
  S.running = false;
}

}  // namespace burst_sim

using namespace burst_sim;

// ---- CUDA runtime -------------------------------------------------------------------------------------------

const char* cudaGetErrorString(cudaError_t e) {
  if (e == t_last_code && !t_last_error.empty()) return t_last_error.c_str();
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (simulated CUDA)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (simulated CUDA: set BURST_COMM=nccl-sim)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchTimeout: return "the simulated stream timed out";
  }
  return "unknown error (simulated CUDA)";
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0, *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) {
  std::lock_guard<std::mutex> g(sim().mu);
  *s = new Stream;
  sim().streams.push_back(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || s->sync) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> g(sim().mu);
  s->destroyed = true;  // its queue still runs (as CUDA's); the object stays for events that name it
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = new Event;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> g(sim().mu);
  if (!s || s->sync) {
    e->stream = nullptr;
    e->t = now_s();
  } else {
    e->stream = s;
    e->seq = s->enqueued;
    e->t = 0;
  }
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  std::lock_guard<std::mutex> g(sim().mu);
  if (!complete(e)) return cudaErrorNotReady;
  if (e->t == 0) e->t = now_s();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  std::unique_lock<std::mutex> lk(sim().mu);
  if (!block_until(lk, [&] { return complete(e); }, "cudaEventSynchronize")) return cudaErrorLaunchTimeout;
  if (e->t == 0) e->t = now_s();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard<std::mutex> g(sim().mu);
  if (!complete(start) || !complete(end)) return cudaErrorNotReady;
  *ms = float((end->t - start->t) * 1e3);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  if (!e) return cudaErrorInvalidValue;
  std::unique_lock<std::mutex> lk(sim().mu);
  if (complete(e)) return cudaSuccess;
  if (!s || s->sync) {
    // The host is the compute stream: what follows may not run before the event.
    if (!block_until(lk, [&] { return complete(e); }, "the compute stream (cudaStreamWaitEvent)")) return cudaErrorLaunchTimeout;
    if (e->t == 0) e->t = now_s();
    return cudaSuccess;
  }
  auto it = std::make_unique<Item>();
  it->is_wait = true;
  it->stream = e->stream;
  it->seq = e->seq;
  s->queue.push_back(std::move(it));
  s->enqueued++;
  sim().work.notify_all();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!requested()) return cudaErrorNoDevice;
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int) {
  // One simulated GPU per process; BURST_SIM_NCCL_SHARED_GPU=1 gives every
  // rank the same one (the check that refuses two ranks on one GPU).
  const char* shared = std::getenv("BURST_SIM_NCCL_SHARED_GPU");
  const int id = shared && std::string(shared) == "1" ? 0 : world_rank();
  std::snprintf(bus, size_t(len), "sim:%08x", id);
  return cudaSuccess;
}

// ---- NCCL ------------------------------------------------------------------------------------------------------

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (simulated NCCL)";
    case ncclSystemError: return "unhandled system error (simulated NCCL)";
    case ncclInternalError: return "internal error (simulated NCCL)";
    case ncclInvalidArgument: return "invalid argument (simulated NCCL)";
    case ncclInvalidUsage: return "invalid usage (simulated NCCL)";
    case ncclRemoteError: return "remote process exited or there was a network error (simulated NCCL)";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result (simulated NCCL)";
}

const char* ncclGetLastError(ncclComm_t comm) {
  static thread_local std::string copy;
  {
    std::lock_guard<std::mutex> g(sim().mu);
    copy = comm && !comm->last.empty() ? comm->last : t_last_error;
  }
  return copy.c_str();
}

ncclResult_t ncclGetVersion(int* version) {
  *version = 0;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  const int me = world_rank();
  int counter;
  {
    std::lock_guard<std::mutex> g(sim().mu);
    counter = sim().created++;
  }
  std::memcpy(id->internal + 8, &me, sizeof me);
  std::memcpy(id->internal + 12, &counter, sizeof counter);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t*) {
  *out = nullptr;
  t_last_error.clear();
  if (std::memcmp(id.internal, kMagic, sizeof kMagic) != 0) {
    t_last_error = "simulated NCCL: the unique id was not made by ncclGetUniqueId";
    return ncclInvalidArgument;
  }
  int wsize = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (nranks < 1 || rank < 0 || rank >= nranks || nranks > wsize) {
    t_last_error = "simulated NCCL: rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " ranks in a world of " +
                   std::to_string(wsize);
    return ncclInvalidArgument;
  }
  auto* c = new Comm;
  c->rank = rank, c->size = nranks;
  std::memcpy(&c->creator, id.internal + 8, sizeof c->creator);
  std::memcpy(&c->counter, id.internal + 12, sizeof c->counter);
  Sim& S = sim();
  std::lock_guard<std::mutex> g(S.mu);
  std::string why;
  if (start(why) != ncclSuccess) {
    t_last_error = why;
    delete c;
    return ncclInvalidUsage;
  }
  if (!set_up_tags(wsize)) {
    t_last_error = "simulated NCCL: this MPI's MPI_TAG_UB leaves fewer than 16 tags per rank for " + std::to_string(wsize) + " ranks";
    delete c;
    return ncclInvalidUsage;
  }
  if (rank == 0 && c->creator != world_rank()) {
    t_last_error = "simulated NCCL: rank 0 of a communicator must make its unique id";
    delete c;
    return ncclInvalidUsage;
  }
  if (nranks == 1) {
    c->world = {world_rank()};
    c->state = CommState::Ready;
    c->async = ncclSuccess;
  } else if (rank == 0) {
    c->hs_in.resize(size_t(2 * (nranks - 1)));
    c->hs.resize(size_t(nranks - 1));
    for (int m = 0; m + 1 < nranks; ++m)
      MPI_Irecv(&c->hs_in[size_t(2 * m)], 2, MPI_INT, MPI_ANY_SOURCE, c->handshake_tag(), MPI_COMM_WORLD, &c->hs[size_t(m)]);
    S.creating.push_back(c);
  } else {
    c->hs_out[0] = rank, c->hs_out[1] = world_rank();
    c->hs_in.resize(size_t(nranks));
    c->hs.resize(2);
    MPI_Isend(c->hs_out, 2, MPI_INT, c->creator, c->handshake_tag(), MPI_COMM_WORLD, &c->hs[0]);
    MPI_Irecv(c->hs_in.data(), nranks, MPI_INT, c->creator, c->handshake_tag(), MPI_COMM_WORLD, &c->hs[1]);
    S.creating.push_back(c);
  }
  S.work.notify_all();
  *out = c;
  return c->state == CommState::Ready ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (!comm) return ncclInvalidArgument;
  std::lock_guard<std::mutex> g(sim().mu);
  if (comm->finalizing && comm->async == ncclInProgress && comm->inflight == 0) comm->async = ncclSuccess;
  *state = comm->async;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  std::lock_guard<std::mutex> g(sim().mu);
  if (comm->state != CommState::Ready) return ncclSuccess;
  comm->finalizing = true;
  if (comm->async == ncclSuccess && comm->inflight > 0) comm->async = ncclInProgress;
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  std::lock_guard<std::mutex> g(sim().mu);
  comm->state = CommState::Destroyed;  // kept: a queued item may still name it
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  std::lock_guard<std::mutex> g(sim().mu);
  if (comm->state == CommState::Creating) {
    for (MPI_Request& r : comm->hs) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
    comm->hs.clear();
    auto& v = sim().creating;
    v.erase(std::remove(v.begin(), v.end(), comm), v.end());
  }
  comm->state = CommState::Aborted;
  if (comm->async == ncclInProgress || comm->async == ncclSuccess) comm->async = ncclRemoteError;
  if (comm->last.empty()) comm->last = "simulated NCCL: the communicator was aborted";
  sim().work.notify_all();
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth <= 0) {
    t_last_error = "simulated NCCL: ncclGroupEnd without ncclGroupStart";
    return ncclInvalidUsage;
  }
  if (--t_group_depth > 0) return ncclSuccess;
  std::lock_guard<std::mutex> g(sim().mu);
  for (Pending& p : t_group) enqueue(p.stream, std::move(p.item));
  t_group.clear();
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  auto it = group_item("ncclSend of " + std::to_string(count * type_size(type)) + " bytes to rank " + std::to_string(peer));
  it->xfers.push_back({true, static_cast<char*>(const_cast<void*>(buf)), count * type_size(type), peer, comm});
  return submit(stream, std::move(it));
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  auto it = group_item("ncclRecv of " + std::to_string(count * type_size(type)) + " bytes from rank " + std::to_string(peer));
  it->xfers.push_back({false, static_cast<char*>(buf), count * type_size(type), peer, comm});
  return submit(stream, std::move(it));
}

namespace {
// Sums `parts` (one pointer per rank, in rank order) element by element into `out`.
template <class T> void sum_into(void* out, const std::vector<const char*>& parts, size_t count) {
  std::vector<T> acc(count, T(0));
  for (const char* p : parts) {
    const T* x = reinterpret_cast<const T*>(p);
    for (size_t i = 0; i < count; ++i) acc[i] += x[i];
  }
  std::memcpy(out, acc.data(), count * sizeof(T));
}
bool summable(ncclDataType_t t) { return t == ncclFloat32 || t == ncclFloat64 || t == ncclInt32; }
void sum_typed(ncclDataType_t t, void* out, const std::vector<const char*>& parts, size_t count) {
  if (t == ncclFloat32) sum_into<float>(out, parts, count);
  else if (t == ncclFloat64) sum_into<double>(out, parts, count);
  else sum_into<int>(out, parts, count);
}
}  // namespace

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t bytes = count * type_size(type);
  auto it = group_item("ncclAllGather of " + std::to_string(bytes) + " bytes per rank");
  char* out = static_cast<char*>(recv);
  const char* in = static_cast<const char*>(send);
  const int me = comm->rank, P = comm->size;
  for (int p = 0; p < P; ++p) {
    if (p == me) continue;
    it->xfers.push_back({true, const_cast<char*>(in), bytes, p, comm});
    it->xfers.push_back({false, out + size_t(p) * bytes, bytes, p, comm});
  }
  it->finish = [in, out, me, bytes] {
    if (in != out + size_t(me) * bytes) std::memmove(out + size_t(me) * bytes, in, bytes);
  };
  return submit(stream, std::move(it));
}

namespace {
// A summing collective: every other rank's `part(p)` bytes arrive in scratch
// and this rank's go to it; once all are in, `out` = the parts summed in rank
// order (this rank's own part read from `own(me)`). Reduce-scatter sends the
// chunk of each peer; all-reduce the whole buffer.
template <class PartOf>
ncclResult_t summing(const char* name, const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                     cudaStream_t stream, PartOf part_for) {
  if (!comm) return ncclInvalidArgument;
  if (!summable(type)) {
    t_last_error = std::string("simulated NCCL: ") + name + " of a type it does not sum";
    return ncclInvalidArgument;
  }
  const size_t bytes = count * type_size(type);
  auto it = group_item(std::string(name) + " of " + std::to_string(bytes) + " bytes");
  const int me = comm->rank, P = comm->size;
  const char* in = static_cast<const char*>(send);
  it->scratch.resize(size_t(P));
  for (int p = 0; p < P; ++p) {
    if (p == me) continue;
    it->scratch[size_t(p)].resize(bytes);
    it->xfers.push_back({true, const_cast<char*>(in) + part_for(p), bytes, p, comm});
    it->xfers.push_back({false, it->scratch[size_t(p)].data(), bytes, p, comm});
  }
  Item* self = it.get();
  const size_t own = part_for(me);
  it->finish = [self, in, recv, me, P, count, type, own] {
    std::vector<const char*> parts(static_cast<size_t>(P));
    for (int p = 0; p < P; ++p) parts[size_t(p)] = p == me ? in + own : self->scratch[size_t(p)].data();
    sum_typed(type, recv, parts, count);
  };
  return submit(stream, std::move(it));
}
}  // namespace

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, ncclComm_t comm,
                               cudaStream_t stream) {
  const size_t bytes = count * type_size(type);
  return summing("ncclReduceScatter", send, recv, count, type, comm, stream, [bytes](int p) { return size_t(p) * bytes; });
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, ncclComm_t comm,
                           cudaStream_t stream) {
  return summing("ncclAllReduce", send, recv, count, type, comm, stream, [](int) { return size_t(0); });
}

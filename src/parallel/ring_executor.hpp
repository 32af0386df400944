// Runs a ring program (schedule.hpp) on communicators: the executor only
// follows the program's orders; what a computation does is the client's.
// `mirror` runs the ring the other way round (rank r receives from r+1):
// the program of the mirrored rank, with peers and blocks mapped back.
#pragma once

#include "parallel/packet.hpp"
#include "core/timer.hpp"
#include "parallel/schedule.hpp"

#include <array>
#include <chrono>
#include <vector>

namespace burst::parallel {

struct RingClient {
  virtual ~RingClient() = default;
  // Round op.round on block op.origin held in `read`; a visiting block's
  // contribution overwrites `partial` (nullptr: none travels).
  virtual void compute(const RingOp& op, const Packet& read, const Packet* partial) = 0;
  virtual void add(const Packet& from, const Packet& to) = 0;  // partial sums
  virtual void deliver(const Packet& own) = 0;                 // this rank's block's partial, complete
};

struct RingTrace {
  std::vector<std::array<long, 3>> entries;  // round, block expected, block the payload carried
  long mismatches = 0;
};

// Per-round timers of a rank's ring programs (debug option: the
// environment variable BURST_RING_TIMERS; off by default, and then the
// executor reads no clock). Seconds summed over every run of the program,
// indexed by the round of the last Compute op before the op (0 before the
// first): compute (the client's math: kernels, merges), wait (Wait ops: the
// wall time blocked in a transfer's completion), wait_cpu (this thread's
// CPU time during those waits: polling, progress, the receive's staging
// copy), other (posting sends and receives, copies, adds, delivers).
struct RingTimes {
  std::vector<double> compute, wait, wait_cpu, other;
  long runs = 0;
  void add(std::vector<double>& v, int round, double s) {
    if (v.size() <= size_t(round)) v.resize(size_t(round) + 1, 0.0);
    v[size_t(round)] += s;
  }
};

struct RingLinks {
  Communicator* intra = nullptr;  // the L ranks of the node (the whole group on a flat ring)
  Communicator* inter = nullptr;  // the N ranks with the same local index
};

inline void run_ring_program(const RingProgram& prog, const RingLinks& links, bool mirror, std::vector<Packet>& read,
                             std::vector<Packet>& partial, RingClient& client, RingTrace* trace, RingTimes* times = nullptr) {
  const int N = prog.geometry.nodes, L = prog.geometry.local, W = N * L;
  auto peer = [&](const RingOp& op) {
    if (!mirror) return op.peer;
    return op.link == Link::Intra ? L - 1 - op.peer : N - 1 - op.peer;
  };
  auto block = [&](int b) { return mirror ? W - 1 - b : b; };
  std::vector<Request> reqs(size_t(prog.requests));
  auto buf = [&](const RingOp& op, int i) -> Packet& { return op.buf_kind == BufKind::Read ? read[size_t(i)] : partial[size_t(i)]; };
  using clock = std::chrono::steady_clock;
  int round = 0;
  clock::time_point t0;
  double c0 = 0;
  if (times) times->runs++;
  for (const RingOp& op : prog.ops) {
    if (times) {
      if (op.kind == RingOp::Compute) round = op.round;
      if (op.kind == RingOp::Wait) c0 = thread_cpu_seconds();
      t0 = clock::now();
    }
    switch (op.kind) {
      case RingOp::Send:
      case RingOp::Recv: {
        Communicator* c = (op.link == Link::Intra || N == 1) ? links.intra : links.inter;
        BURST_ASSERT(c != nullptr, "ring link missing");
        // Offset the tags by the kind so read and partial transfers never meet.
        const int tag = op.tag * 2 + int(op.buf_kind);
        reqs[size_t(op.req)] = op.kind == RingOp::Send ? c->isend(buf(op, op.buf).bytes(), peer(op), tag)
                                                       : c->irecv(buf(op, op.buf).bytes(), peer(op), tag);
        break;
      }
      case RingOp::Wait: reqs[size_t(op.req)].wait(); break;
      case RingOp::Copy: buf(op, op.buf2).copy_from(buf(op, op.buf)); break;
      case RingOp::Compute: {
        RingOp o = op;
        o.origin = block(op.origin);
        const Packet& r = read[size_t(op.buf)];
        if (trace) {
          const long got = r.origin();
          trace->entries.push_back({long(op.round), long(o.origin), got});
          if (got != o.origin) trace->mismatches++;
        }
        client.compute(o, r, op.buf2 >= 0 ? &partial[size_t(op.buf2)] : nullptr);
        if (op.buf2 >= 0) partial[size_t(op.buf2)].set_origin(o.origin);
        break;
      }
      case RingOp::Add: client.add(partial[size_t(op.buf)], partial[size_t(op.buf2)]); break;
      case RingOp::Deliver: {
        const Packet& p = partial[size_t(op.buf)];
        if (trace) {
          const long me = block(prog.rank), got = p.origin();
          trace->entries.push_back({-1, me, got});
          if (got != me) trace->mismatches++;
        }
        client.deliver(p);
        break;
      }
    }
    if (times) {
      const double dt = std::chrono::duration<double>(clock::now() - t0).count();
      if (op.kind == RingOp::Compute) times->add(times->compute, round, dt);
      else if (op.kind == RingOp::Wait) times->add(times->wait, round, dt), times->add(times->wait_cpu, round, thread_cpu_seconds() - c0);
      else times->add(times->other, round, dt);
    }
  }
}

}  // namespace burst::parallel

// Runs a ring program (schedule.hpp) on communicators: the executor only
// follows the program's orders; what a computation does is the client's.
// `mirror` runs the ring the other way round (rank r receives from r+1):
// the program of the mirrored rank, with peers and blocks mapped back.
#pragma once

#include "parallel/packet.hpp"
#include "parallel/schedule.hpp"

#include <array>
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

struct RingLinks {
  Communicator* intra = nullptr;  // the L ranks of the node (the whole group on a flat ring)
  Communicator* inter = nullptr;  // the N ranks with the same local index
};

inline void run_ring_program(const RingProgram& prog, const RingLinks& links, bool mirror, std::vector<Packet>& read,
                             std::vector<Packet>& partial, RingClient& client, RingTrace* trace) {
  const int N = prog.geometry.nodes, L = prog.geometry.local, W = N * L;
  auto peer = [&](const RingOp& op) {
    if (!mirror) return op.peer;
    return op.link == Link::Intra ? L - 1 - op.peer : N - 1 - op.peer;
  };
  auto block = [&](int b) { return mirror ? W - 1 - b : b; };
  std::vector<Request> reqs(size_t(prog.requests));
  auto buf = [&](const RingOp& op, int i) -> Packet& { return op.buf_kind == BufKind::Read ? read[size_t(i)] : partial[size_t(i)]; };
  for (const RingOp& op : prog.ops) {
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
  }
}

}  // namespace burst::parallel

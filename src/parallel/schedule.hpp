// Ring schedules as programs. A program is the list of transfers, waits and
// computations one rank performs; ring_program() writes it for the flat ring
// and the topology-aware double ring (ALGORITHMS.md section 4), with or
// without a travelling partial sum (burst's dQ, ring's dK/dV). The engine's
// executor (ring_executor.hpp) runs exactly these programs on communicators,
// and simulate_programs() runs all ranks' programs in one process against a
// transport model, checking that every send meets its receive, that no buffer
// is touched while in flight, that every rank computes on every block once,
// and that every partial reaches its home with every contribution once.
#pragma once

#include <string>
#include <vector>

namespace burst::parallel {

// Group = N nodes x L ranks, group rank = node * L + local. A flat ring is
// N = 1, L = P.
struct RingGeometry {
  int nodes = 1;  // N
  int local = 1;  // L
  int size() const { return nodes * local; }
};

// The block (group rank of its origin) that rank `rank` computes on in round
// r = 0 .. P-1: node (n - floor(r/L)) mod N, local (l - r mod L) mod L.
int ring_block_at(const RingGeometry& g, int rank, int round);

// Rounds and direction of one ring pass (RingFamily::plan; the performance
// model costs the same rounds). A flat ring stops after the last round in
// which any rank sees anything (sliding window on the contiguous layout),
// running the way round that needs fewer rounds (mirror: block (r + t) mod W
// reaches rank r in round t instead of (r - t) mod W); a double ring runs all
// rounds. visible(r, b): rank r has work with block b's travelling rows.
struct RingRounds {
  int rounds = 1;
  bool mirror = false;
};
template <class Visible> RingRounds plan_ring_rounds(const RingGeometry& g, const Visible& visible) {
  const int W = g.size();
  RingRounds p;
  p.rounds = W;
  if (g.nodes != 1) return p;
  int best[2] = {1, 1};
  for (int m = 0; m < 2; ++m)
    for (int r = 0; r < W; ++r)
      for (int t = 1; t < W; ++t) {
        const int b = m ? (r + t) % W : (r - t + W) % W;
        if (visible(r, b)) best[m] = best[m] > t + 1 ? best[m] : t + 1;
      }
  p.mirror = best[1] < best[0];
  p.rounds = best[p.mirror ? 1 : 0];
  return p;
}
// The rounds a flat ring of W runs for a layer: the more of its forward's
// and its backward's plans (what travels may differ between them). `auto`
// picks a flat ring when this is below W (parallel/methods.cpp pick_shape;
// the performance model's ring_cost alike).
template <class Fwd, class Bwd> int flat_ring_rounds(int W, const Fwd& fwd_visible, const Bwd& bwd_visible) {
  const RingGeometry flat{1, W};
  const int f = plan_ring_rounds(flat, fwd_visible).rounds, b = plan_ring_rounds(flat, bwd_visible).rounds;
  return f > b ? f : b;
}

enum class Link { Intra, Inter };  // flat rings use Intra for every transfer
enum class BufKind { Read, Partial };

struct RingOp {
  enum Kind {
    Send,     // post a send of buf to peer over link (request id `req`)
    Recv,     // post a receive into buf from peer over link
    Wait,     // complete request `req`
    Copy,     // buf -> buf2 (same kind)
    Compute,  // round, origin block in read buffer `buf`; partial contribution
              // overwrites partial buffer `buf2` (-1: none; home: only home accumulators)
    Add,      // partial buf2 += partial buf
    Deliver,  // partial buf is this rank's own block, complete: add into home
  } kind;
  BufKind buf_kind = BufKind::Read;
  int buf = -1, buf2 = -1;
  Link link = Link::Intra;
  int peer = -1;  // rank within the link's group
  int tag = 0;
  int req = -1;
  int round = -1, origin = -1;
  bool home = false;
};

struct RingProgram {
  RingGeometry geometry;
  int rank = 0, rounds = 0;
  bool partial = false;
  int read_buffers = 0, partial_buffers = 0, requests = 0;
  std::vector<RingOp> ops;
  std::string describe() const;  // one line per op, for debugging
};

// Program of one rank. `rounds` (<= P) ends a flat ring early (the blocks
// after it are masked for every rank: sliding window, contiguous layout);
// a double ring (N > 1) needs all P rounds. Buffer 0 of the read set holds
// the rank's own block at the start.
RingProgram ring_program(const RingGeometry& g, int rank, int rounds, bool partial);

// Transfers each kind makes per rank, read off a program (what tests and
// the analytic byte counts use).
struct RingCounts {
  int read_intra = 0, read_inter = 0, partial_intra = 0, partial_inter = 0;
};
RingCounts count_transfers(const RingProgram& p);

// Run every rank's program in one process. Returns "" when all checks pass,
// else what went wrong (the first failure).
std::string simulate_programs(const std::vector<RingProgram>& programs);

}  // namespace burst::parallel

#include "parallel/schedule.hpp"

#include "core/error.hpp"

#include <deque>
#include <map>
#include <sstream>
#include <tuple>

namespace burst::parallel {

int ring_block_at(const RingGeometry& g, int rank, int round) {
  const int N = g.nodes, L = g.local, n = rank / L, l = rank % L;
  const int node = ((n - round / L) % N + N) % N;
  const int loc = ((l - round % L) % L + L) % L;
  return node * L + loc;
}

namespace {

enum Tag { kReadIntra = 1, kReadInter = 2, kPartialIntra = 3, kPartialInter = 4, kHomeInter = 5, kHomeIntra = 6 };

// Builds one rank's program; the buffer bookkeeping (which physical buffer
// holds what) happens here, once, so the executor only follows orders.
class ProgramWriter {
 public:
  ProgramWriter(const RingGeometry& g, int rank, int rounds, bool partial) {
    p_.geometry = g;
    p_.rank = rank;
    p_.rounds = rounds;
    p_.partial = partial;
  }
  int send(BufKind k, int buf, Link link, int peer, int tag) { return post(RingOp::Send, k, buf, link, peer, tag); }
  int recv(BufKind k, int buf, Link link, int peer, int tag) { return post(RingOp::Recv, k, buf, link, peer, tag); }
  void wait(int& req) {
    if (req < 0) return;
    RingOp op{RingOp::Wait};
    op.req = req;
    p_.ops.push_back(op);
    req = -1;
  }
  void copy(BufKind k, int from, int to) {
    RingOp op{RingOp::Copy};
    op.buf_kind = k;
    op.buf = from;
    op.buf2 = to;
    p_.ops.push_back(op);
  }
  void compute(int round, int origin, int read, int partial, bool home) {
    RingOp op{RingOp::Compute};
    op.round = round;
    op.origin = origin;
    op.buf = read;
    op.buf2 = partial;
    op.home = home;
    p_.ops.push_back(op);
  }
  void add(int from, int to) {
    RingOp op{RingOp::Add};
    op.buf_kind = BufKind::Partial;
    op.buf = from;
    op.buf2 = to;
    p_.ops.push_back(op);
  }
  void deliver(int buf) {
    RingOp op{RingOp::Deliver};
    op.buf_kind = BufKind::Partial;
    op.buf = buf;
    p_.ops.push_back(op);
  }
  RingProgram finish(int read_buffers, int partial_buffers) {
    p_.read_buffers = read_buffers;
    p_.partial_buffers = p_.partial ? partial_buffers : 0;
    p_.requests = next_req_;
    return std::move(p_);
  }

 private:
  int post(RingOp::Kind kind, BufKind k, int buf, Link link, int peer, int tag) {
    RingOp op{kind};
    op.buf_kind = k;
    op.buf = buf;
    op.link = link;
    op.peer = peer;
    op.tag = tag;
    op.req = next_req_++;
    p_.ops.push_back(op);
    return op.req;
  }
  RingProgram p_;
  int next_req_ = 0;
};

}  // namespace

RingProgram ring_program(const RingGeometry& g, int rank, int rounds, bool partial) {
  const int N = g.nodes, L = g.local, W = g.size();
  BURST_ASSERT(N >= 1 && L >= 1 && rank >= 0 && rank < W, "ring geometry ", N, " x ", L, ", rank ", rank);
  BURST_ASSERT(rounds >= 1 && rounds <= W, "rounds ", rounds, " of ", W);
  BURST_ASSERT(N == 1 || rounds == W, "a double ring runs all ", W, " rounds");
  const int n = rank / L, l = rank % L;
  const int intra_next = (l + 1) % L, intra_prev = (l + L - 1) % L;
  const int inter_next = (n + 1) % N, inter_prev = (n + N - 1) % N;
  ProgramWriter w(g, rank, rounds, partial);

  // Read set: cur/nxt rotate inside the node; xs/xr carry the cycle's block
  // to and from the neighbouring nodes.
  int cur = 0, nxt = 1, xs = 2, xr = 3;
  int r_is = -1, r_ir = -1, r_xs = -1, r_xr = -1;
  // Partials: two alternate inside the node (one in flight while the next
  // accumulates), pt takes a contribution while the incoming partial is
  // still on the way, pio/pii cross nodes, ph/pf bring the block home.
  const int pt = 2, pio = 3, pii = 4, ph = 5, pf = 6;
  int alt[2] = {0, 1}, flip = 0;
  int psend[7] = {-1, -1, -1, -1, -1, -1, -1};
  int r_pir = -1;
  auto exists_at_cycle_end = [&](int c) { return c > 0 || L > 1; };  // cycle 0 of L = 1 is the home round alone

  for (int r = 0; r < rounds; ++r) {
    const int c = r / L, k = r % L;
    const bool last = (k == L - 1) || (r == rounds - 1);
    const int origin = ring_block_at(g, rank, r);
    const bool home = r == 0;
    if (k == 0 && c < N - 1) {  // this cycle's block goes to the next node while the node works on it
      w.copy(BufKind::Read, cur, xs);
      r_xs = w.send(BufKind::Read, xs, Link::Inter, inter_next, kReadInter);
      r_xr = w.recv(BufKind::Read, xr, Link::Inter, inter_prev, kReadInter);
    }
    if (!last) {  // prefetch the next round's block from the previous rank of the node
      r_is = w.send(BufKind::Read, cur, Link::Intra, intra_next, kReadIntra);
      r_ir = w.recv(BufKind::Read, nxt, Link::Intra, intra_prev, kReadIntra);
    }
    if (!partial || home) {
      w.compute(r, origin, cur, -1, home);
    } else {
      const int X = alt[flip];
      w.wait(psend[X]);
      const bool incoming = k > 0 && r > 1;  // the previous rank computed this block in round r-1, not as its home
      if (incoming) {
        int rp = w.recv(BufKind::Partial, X, Link::Intra, intra_prev, kPartialIntra);
        w.compute(r, origin, cur, pt, false);
        w.wait(rp);
        w.add(pt, X);
      } else {
        w.compute(r, origin, cur, X, false);
      }
      if (!last) {
        psend[X] = w.send(BufKind::Partial, X, Link::Intra, intra_next, kPartialIntra);
        flip ^= 1;
      } else {
        if (c > 0 && exists_at_cycle_end(c - 1)) {
          w.wait(r_pir);
          w.add(pii, X);
        }
        if (c < N - 1) {
          w.wait(psend[pio]);
          w.copy(BufKind::Partial, X, pio);
          psend[pio] = w.send(BufKind::Partial, pio, Link::Inter, inter_next, kPartialInter);
          r_pir = w.recv(BufKind::Partial, pii, Link::Inter, inter_prev, kPartialInter);
        } else if (N == 1) {  // straight to the block's home (one hop on a full ring)
          const int src = (l + rounds - 1) % L;
          int rs = w.send(BufKind::Partial, X, Link::Intra, origin, kHomeIntra);
          int rr = w.recv(BufKind::Partial, pf, Link::Intra, src, kHomeIntra);
          w.wait(rr);
          w.deliver(pf);
          w.wait(rs);
        } else {  // one hop to the next node, one inside it (section 4)
          int rs = w.send(BufKind::Partial, X, Link::Inter, inter_next, kHomeInter);
          int rr = w.recv(BufKind::Partial, ph, Link::Inter, inter_prev, kHomeInter);
          w.wait(rr);
          w.wait(rs);
          if (L > 1) {
            int rs2 = w.send(BufKind::Partial, ph, Link::Intra, intra_next, kHomeIntra);
            int rr2 = w.recv(BufKind::Partial, pf, Link::Intra, intra_prev, kHomeIntra);
            w.wait(rr2);
            w.deliver(pf);
            w.wait(rs2);
          } else {
            w.deliver(ph);
          }
        }
      }
    }
    if (!last) {
      w.wait(r_is);
      w.wait(r_ir);
      std::swap(cur, nxt);
    } else if (c < N - 1) {
      w.wait(r_xs);
      w.wait(r_xr);
      std::swap(cur, xr);
    }
  }
  for (int& s : psend) w.wait(s);
  w.wait(r_pir);
  return w.finish(N > 1 ? 4 : 2, 7);
}

RingCounts count_transfers(const RingProgram& p) {
  RingCounts c;
  for (const auto& op : p.ops) {
    if (op.kind != RingOp::Send) continue;
    const bool inter = op.link == Link::Inter && p.geometry.nodes > 1;
    if (op.buf_kind == BufKind::Read) (inter ? c.read_inter : c.read_intra)++;
    else (inter ? c.partial_inter : c.partial_intra)++;
  }
  return c;
}

std::string RingProgram::describe() const {
  std::ostringstream os;
  static const char* names[] = {"send", "recv", "wait", "copy", "compute", "add", "deliver"};
  for (const auto& op : ops) {
    os << names[op.kind] << (op.buf_kind == BufKind::Read ? " R" : " P") << op.buf;
    if (op.buf2 >= 0) os << "->" << op.buf2;
    if (op.kind == RingOp::Send || op.kind == RingOp::Recv)
      os << (op.link == Link::Intra ? " intra " : " inter ") << op.peer << " tag " << op.tag;
    if (op.req >= 0) os << " req " << op.req;
    if (op.kind == RingOp::Compute) os << " round " << op.round << " block " << op.origin << (op.home ? " home" : "");
    os << "\n";
  }
  return os.str();
}

// ---------------------------------------------------------------- simulator
namespace {

struct Content {
  int origin = -1;
  std::map<int, int> contributors;  // partials: rank -> times it contributed
};

struct SimRank {
  const RingProgram* prog;
  size_t ip = 0;
  std::vector<Content> read, part;
  std::vector<int> read_busy, part_busy;  // pending sends (>0) or a pending receive (-1)
  struct Pending {
    bool active = false, is_send = false;
    BufKind kind;
    int buf;
    std::tuple<int, int, int, int> key;  // src, dst, link, tag
  };
  std::vector<Pending> reqs;
  std::map<int, int> seen;  // block -> rounds computed on it
  int delivered = 0;
};

}  // namespace

std::string simulate_programs(const std::vector<RingProgram>& progs) {
  if (progs.empty()) return "";
  const RingGeometry g = progs[0].geometry;
  const int W = g.size(), L = g.local;
  if (int(progs.size()) != W) return "expected one program per rank";
  std::vector<SimRank> rk(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    auto& s = rk[size_t(r)];
    s.prog = &progs[size_t(r)];
    s.read.resize(size_t(s.prog->read_buffers));
    s.part.resize(size_t(s.prog->partial_buffers));
    s.read_busy.assign(s.read.size(), 0);
    s.part_busy.assign(s.part.size(), 0);
    s.reqs.resize(size_t(s.prog->requests));
    s.read[0].origin = r;  // buffer 0 holds the rank's own block
  }
  std::map<std::tuple<int, int, int, int>, std::deque<Content>> channels;
  std::map<int, std::map<int, int>> computed_by;  // block -> rank -> non-home computes
  auto global = [&](int me, Link link, int peer) {
    return link == Link::Intra ? (me / L) * L + peer : peer * L + me % L;
  };
  std::ostringstream err;
  auto fail = [&](int r, size_t ip, const std::string& what) {
    err << "rank " << r << " op " << ip << ": " << what;
    return false;
  };
  // Execute one op of rank r; false = blocked (err set on a real failure).
  auto step = [&](int r) -> bool {
    auto& s = rk[size_t(r)];
    const RingOp& op = s.prog->ops[s.ip];
    auto& bufs = op.buf_kind == BufKind::Read ? s.read : s.part;
    auto& busy = op.buf_kind == BufKind::Read ? s.read_busy : s.part_busy;
    auto check_index = [&](int b) { return b >= 0 && b < int(bufs.size()); };
    switch (op.kind) {
      case RingOp::Send: {
        if (!check_index(op.buf)) return fail(r, s.ip, "send from a buffer that does not exist");
        if (busy[size_t(op.buf)] < 0) return fail(r, s.ip, "send from a buffer still receiving");
        const int dst = global(r, op.link, op.peer);
        auto key = std::make_tuple(r, dst, int(op.link), op.tag * 2 + int(op.buf_kind));
        channels[key].push_back(bufs[size_t(op.buf)]);
        busy[size_t(op.buf)]++;
        s.reqs[size_t(op.req)] = {true, true, op.buf_kind, op.buf, key};
        break;
      }
      case RingOp::Recv: {
        if (!check_index(op.buf)) return fail(r, s.ip, "receive into a buffer that does not exist");
        if (busy[size_t(op.buf)] != 0) return fail(r, s.ip, "receive into a buffer that is in flight");
        const int src = global(r, op.link, op.peer);
        busy[size_t(op.buf)] = -1;
        s.reqs[size_t(op.req)] = {true, false, op.buf_kind, op.buf, std::make_tuple(src, r, int(op.link), op.tag * 2 + int(op.buf_kind))};
        break;
      }
      case RingOp::Wait: {
        auto& q = s.reqs[size_t(op.req)];
        if (!q.active) return fail(r, s.ip, "wait on a request that is not active");
        auto& qb = q.kind == BufKind::Read ? s.read : s.part;
        auto& qbusy = q.kind == BufKind::Read ? s.read_busy : s.part_busy;
        if (q.is_send) {
          qbusy[size_t(q.buf)]--;
        } else {
          auto it = channels.find(q.key);
          if (it == channels.end() || it->second.empty()) return false;  // blocked
          qb[size_t(q.buf)] = it->second.front();
          it->second.pop_front();
          qbusy[size_t(q.buf)] = 0;
        }
        q.active = false;
        break;
      }
      case RingOp::Copy:
        if (!check_index(op.buf) || !check_index(op.buf2)) return fail(r, s.ip, "copy between missing buffers");
        if (busy[size_t(op.buf)] < 0) return fail(r, s.ip, "copy from a buffer still receiving");
        if (busy[size_t(op.buf2)] != 0) return fail(r, s.ip, "copy into a buffer in flight");
        bufs[size_t(op.buf2)] = bufs[size_t(op.buf)];
        break;
      case RingOp::Compute: {
        if (op.buf < 0 || op.buf >= int(s.read.size())) return fail(r, s.ip, "compute on a missing read buffer");
        if (s.read_busy[size_t(op.buf)] < 0) return fail(r, s.ip, "compute on a read buffer still receiving");
        if (s.read[size_t(op.buf)].origin != op.origin)
          return fail(r, s.ip, "round " + std::to_string(op.round) + " expects block " + std::to_string(op.origin) +
                                   " but its buffer holds block " + std::to_string(s.read[size_t(op.buf)].origin));
        if (op.home != (op.origin == r)) return fail(r, s.ip, "home flag disagrees with the block");
        s.seen[op.origin]++;
        if (!op.home) computed_by[op.origin][r]++;
        if (op.buf2 >= 0) {
          if (op.buf2 >= int(s.part.size())) return fail(r, s.ip, "compute into a missing partial buffer");
          if (s.part_busy[size_t(op.buf2)] != 0) return fail(r, s.ip, "compute into a partial buffer in flight");
          s.part[size_t(op.buf2)] = Content{op.origin, {{r, 1}}};
        } else if (s.prog->partial && !op.home) {
          return fail(r, s.ip, "a visiting block's contribution goes nowhere");
        }
        break;
      }
      case RingOp::Add: {
        if (!check_index(op.buf) || !check_index(op.buf2)) return fail(r, s.ip, "add between missing buffers");
        if (busy[size_t(op.buf)] < 0 || busy[size_t(op.buf2)] != 0) return fail(r, s.ip, "add touches a buffer in flight");
        auto& a = bufs[size_t(op.buf)];
        auto& b = bufs[size_t(op.buf2)];
        if (a.origin != b.origin)
          return fail(r, s.ip, "adds the partial of block " + std::to_string(a.origin) + " into block " + std::to_string(b.origin));
        for (const auto& kv : a.contributors) b.contributors[kv.first] += kv.second;
        break;
      }
      case RingOp::Deliver: {
        if (!check_index(op.buf) || busy[size_t(op.buf)] != 0) return fail(r, s.ip, "deliver from a buffer in flight");
        const auto& c = bufs[size_t(op.buf)];
        if (c.origin != r) return fail(r, s.ip, "receives the final partial of block " + std::to_string(c.origin));
        s.delivered++;
        s.part.push_back(c);  // keep for the final check (beyond the program's buffers)
        s.part_busy.push_back(0);
        break;
      }
    }
    s.ip++;
    return true;
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < W; ++r) {
      auto& s = rk[size_t(r)];
      while (s.ip < s.prog->ops.size()) {
        if (!step(r)) {
          if (!err.str().empty()) return err.str();
          break;
        }
        progress = true;
      }
    }
  }
  for (int r = 0; r < W; ++r) {
    const auto& s = rk[size_t(r)];
    if (s.ip < s.prog->ops.size()) return "deadlock: rank " + std::to_string(r) + " waits forever at op " + std::to_string(s.ip);
    for (const auto& q : s.reqs)
      if (q.active) return "rank " + std::to_string(r) + " leaves a request unfinished";
    const int rounds = s.prog->rounds;
    if (int(s.seen.size()) != rounds) return "rank " + std::to_string(r) + " sees " + std::to_string(s.seen.size()) + " distinct blocks in " + std::to_string(rounds) + " rounds";
    for (int t = 0; t < rounds; ++t) {
      auto it = s.seen.find(ring_block_at(g, r, t));
      if (it == s.seen.end() || it->second != 1) return "rank " + std::to_string(r) + " does not see block " + std::to_string(ring_block_at(g, r, t)) + " exactly once";
    }
    if (s.prog->partial && rounds > 1) {
      if (s.delivered != 1) return "rank " + std::to_string(r) + " receives its block's partial " + std::to_string(s.delivered) + " times";
      const auto& final_partial = s.part.back();
      if (final_partial.contributors != computed_by[r])
        return "the partial delivered to rank " + std::to_string(r) + " misses or repeats a contribution";
    }
  }
  for (const auto& kv : channels)
    if (!kv.second.empty()) return "a message was sent and never received";
  return "";
}

}  // namespace burst::parallel

// Ring schedules: every program of the flat and double rings, for all
// N, L <= 8, run through the in-process transport simulator; transfer counts
// against the counts the schedule implies; the simulator catches broken programs.
#include "core/error.hpp"
#include "parallel/attention_method.hpp"
#include "parallel/layout.hpp"
#include "parallel/schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

using namespace burst::parallel;

static std::vector<RingProgram> programs(int N, int L, int rounds, bool partial) {
  std::vector<RingProgram> ps;
  for (int r = 0; r < N * L; ++r) ps.push_back(ring_program({N, L}, r, rounds, partial));
  return ps;
}

TEST(Schedule, BlockFormulaVisitsEveryBlockOnce) {
  for (int N = 1; N <= 8; ++N)
    for (int L = 1; L <= 8; ++L)
      for (int r = 0; r < N * L; ++r) {
        std::vector<int> seen(size_t(N * L), 0);
        for (int t = 0; t < N * L; ++t) seen[size_t(ring_block_at({N, L}, r, t))]++;
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << N << "x" << L << " rank " << r;
        EXPECT_EQ(ring_block_at({N, L}, r, 0), r);
      }
}

TEST(Schedule, SimulatorAcceptsEveryDoubleRing) {
  for (int N = 1; N <= 8; ++N)
    for (int L = 1; L <= 8; ++L)
      for (bool partial : {false, true}) {
        const auto err = simulate_programs(programs(N, L, N * L, partial));
        EXPECT_EQ(err, "") << N << " nodes x " << L << (partial ? " with partials" : "");
      }
}

TEST(Schedule, SimulatorAcceptsTruncatedFlatRings) {
  for (int W = 1; W <= 8; ++W)
    for (int R = 1; R <= W; ++R)
      for (bool partial : {false, true}) EXPECT_EQ(simulate_programs(programs(1, W, R, partial)), "") << W << " ranks, " << R << " rounds";
}

// The NCCL backend's grouping rule (comm/nccl_communicator.cpp), applied to
// the programs as the executor posts them: each (link, tag) is a lane; a
// lane's posted sends and receives launch as one group when it holds as many
// receives as sends. Returns "" when every request is launched by that rule
// before anything waits on it, nothing is left pending, and group k of every
// lane on every rank meets group k of its peers (each send's receive sits in
// the peer's group of the same index): then NCCL's in-order queue per lane
// cannot deadlock on these programs.
static std::string check_nccl_lanes(const std::vector<RingProgram>& ps) {
  using Key = std::pair<int, int>;  // link, tag
  struct Msg {
    int from, to;
    bool operator<(const Msg& o) const { return from != o.from ? from < o.from : to < o.to; }
    bool operator==(const Msg& o) const { return from == o.from && to == o.to; }
  };
  // lane -> group index -> the sends and receives posted in it (global ranks)
  std::map<Key, std::map<size_t, std::multiset<Msg>>> sends, recvs;
  for (const RingProgram& p : ps) {
    const int N = p.geometry.nodes, L = p.geometry.local, n = p.rank / L, l = p.rank % L;
    struct Lane {
      int s = 0, r = 0;
      std::vector<int> reqs;
      size_t groups = 0;
    };
    std::map<Key, Lane> lanes;
    std::set<int> launched;
    for (const RingOp& op : p.ops) {
      const bool inter = op.link == Link::Inter && N > 1;
      const Key key{inter ? 1 : 0, op.tag * 2 + int(op.buf_kind)};  // the executor's tag
      if (op.kind == RingOp::Send || op.kind == RingOp::Recv) {
        Lane& ln = lanes[key];
        const int peer = inter ? op.peer * L + l : n * L + op.peer;
        if (op.kind == RingOp::Send) ln.s++, sends[key][ln.groups].insert({p.rank, peer});
        else ln.r++, recvs[key][ln.groups].insert({peer, p.rank});
        ln.reqs.push_back(op.req);
        if (ln.s == ln.r) {
          launched.insert(ln.reqs.begin(), ln.reqs.end());
          ln.reqs.clear();
          ln.s = ln.r = 0;
          ln.groups++;
        }
      } else if (op.kind == RingOp::Wait && !launched.count(op.req)) {
        return "rank " + std::to_string(p.rank) + " waits on request " + std::to_string(op.req) +
               " while its lane is unbalanced";
      }
    }
    for (auto& kv : lanes)
      if (!kv.second.reqs.empty()) return "rank " + std::to_string(p.rank) + " ends with a lane pending";
  }
  for (auto& kv : sends)
    for (auto& g : kv.second)
      if (recvs[kv.first][g.first] != g.second)
        return "lane (" + std::to_string(kv.first.first) + ", tag " + std::to_string(kv.first.second) + ") group " +
               std::to_string(g.first) + ": sends and receives of different groups meet";
  for (auto& kv : recvs)
    for (auto& g : kv.second)
      if (sends[kv.first][g.first] != g.second) return "a receive without its send in the same group";
  return "";
}

TEST(Schedule, NcclLaneGroupsMatchOnEveryRing) {
  for (int N = 1; N <= 8; ++N)
    for (int L = 1; L <= 8; ++L)
      for (bool partial : {false, true})
        EXPECT_EQ(check_nccl_lanes(programs(N, L, N * L, partial)), "") << N << " nodes x " << L << (partial ? " with partials" : "");
  for (int W = 1; W <= 8; ++W)
    for (int R = 1; R <= W; ++R)
      for (bool partial : {false, true}) EXPECT_EQ(check_nccl_lanes(programs(1, W, R, partial)), "") << W << " ranks, " << R << " rounds";
  // The check has teeth: without each rank's first receive, a wait meets a
  // lane holding an unmatched send.
  auto broken = programs(1, 3, 3, false);
  for (auto& p : broken) {
    auto it = std::find_if(p.ops.begin(), p.ops.end(), [](const RingOp& o) { return o.kind == RingOp::Recv; });
    p.ops.erase(it);  // the first receive never posted: the lane stays unbalanced until a wait
  }
  EXPECT_NE(check_nccl_lanes(broken), "");
}

// Per rank: the read set crosses nodes N-1 times and moves inside a node
// N (L-1) times; partials (one hop fewer than the read set inside a node in
// the first cycle, since the home rank's own contribution never leaves it,
// plus the trip home) move N (L-1) times inside nodes and N times between
// them (N-1 when L = 1: the first cycle has nothing to send).
TEST(Schedule, TransferCountsFollowTheSchedule) {
  for (int N = 1; N <= 8; ++N)
    for (int L = 1; L <= 8; ++L) {
      const auto ps = programs(N, L, N * L, true);
      for (const auto& p : ps) {
        const RingCounts c = count_transfers(p);
        EXPECT_EQ(c.read_inter, N - 1);
        EXPECT_EQ(c.read_intra, N * (L - 1));
        EXPECT_EQ(c.partial_intra, N * L > 1 ? N * (L - 1) : 0) << N << "x" << L;
        EXPECT_EQ(c.partial_inter, N == 1 ? 0 : (L > 1 ? N : N - 1)) << N << "x" << L;
      }
    }
}

TEST(Schedule, SimulatorCatchesBrokenPrograms) {
  // Drop a wait: the receive buffer is then read while in flight (or a request stays open).
  auto ps = programs(2, 3, 6, true);
  auto& ops = ps[1].ops;
  auto it = std::find_if(ops.begin(), ops.end(), [](const RingOp& o) { return o.kind == RingOp::Wait; });
  ASSERT_NE(it, ops.end());
  ops.erase(it);
  EXPECT_NE(simulate_programs(ps), "");
  // Send to the wrong peer: a message that is never received, or a deadlock.
  ps = programs(1, 4, 4, false);
  for (auto& o : ps[2].ops)
    if (o.kind == RingOp::Send) {
      o.peer = 0;
      break;
    }
  EXPECT_NE(simulate_programs(ps), "");
  // Compute on the wrong buffer.
  ps = programs(2, 2, 4, false);
  for (auto& o : ps[3].ops)
    if (o.kind == RingOp::Compute && !o.home) {
      o.origin = 3;
      break;
    }
  EXPECT_NE(simulate_programs(ps), "");
}

// ------------------------------------------------------------------ layouts
TEST(Layout, ZigzagStripedContiguousHoldEveryTokenOnce) {
  for (auto kind : {LayoutKind::Contiguous, LayoutKind::Zigzag, LayoutKind::Striped})
    for (int P : {1, 2, 3, 4, 8})
      for (long S : {16L, 61L, 64L}) {
        const SeqLayout l = make_layout(kind, S, P);
        std::vector<int> seen(size_t(S), 0);
        for (long x : l.slot)
          if (x >= 0) seen[size_t(x)]++;
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
        EXPECT_EQ(l.padding(), long(P) * l.local - S);
        EXPECT_GE(l.padding(), 0);
      }
  const SeqLayout z = make_layout(LayoutKind::Zigzag, 16, 2);  // chunks of 4: rank 0 holds 0 and 3, rank 1 holds 1 and 2
  EXPECT_EQ(z.slot, (std::vector<long>{0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 8, 9, 10, 11}));
  const SeqLayout s = make_layout(LayoutKind::Striped, 6, 3);
  EXPECT_EQ(s.slot, (std::vector<long>{0, 3, 1, 4, 2, 5}));
  const SeqLayout p = make_layout(LayoutKind::Zigzag, 10, 2);  // padded to 12
  EXPECT_EQ(p.padding(), 2);
  EXPECT_EQ(p.slot, (std::vector<long>{0, 1, 2, 9, -1, -1, 3, 4, 5, 6, 7, 8}));
}

TEST(Layout, PermutesAndRestores) {
  const SeqLayout l = make_layout(LayoutKind::Zigzag, 13, 3);
  std::vector<int> tokens(13);
  std::iota(tokens.begin(), tokens.end(), 100);
  std::vector<int> back(13, 0);
  for (int b = 0; b < 3; ++b) {
    const auto blk = l.to_block(b, tokens, 1, -1);
    for (long i = 0; i < l.local; ++i) EXPECT_EQ(blk[size_t(i)], l.natural(b, i) >= 0 ? 100 + l.natural(b, i) : -1);
    l.to_natural(b, blk, 1, back);
  }
  EXPECT_EQ(back, tokens);
}

TEST(Layout, ZigzagBalancesCausalWork) {
  for (int P : {2, 4, 8}) {
    EXPECT_LT(make_layout(LayoutKind::Zigzag, 4096, P).imbalance({MaskType::Causal, 0}), 1.01);
    EXPECT_GT(make_layout(LayoutKind::Contiguous, 4096, P).imbalance({MaskType::Causal, 0}), 1.3);
  }
}

// Section 6: documents log-uniform in [64, S]; max/mean causal work <= 1.1,
// and the documents placed whole never travel (they sit after `travel`).
TEST(Layout, DocumentLayoutBalancesLogUniformDocuments) {
  for (int P : {2, 4, 8})
    for (unsigned long long seed = 1; seed <= 10; ++seed) {
      const long S = 65536;
      const auto docs = log_uniform_documents(S, 64, S, seed);
      const SeqLayout l = make_layout(LayoutKind::Document, S, P, docs);
      const double imb = l.imbalance({MaskType::Document, 0});
      EXPECT_LE(imb, 1.1) << "P=" << P << " seed " << seed << " docs " << docs.size();
      // Tokens past `travel` belong to documents held whole by that block.
      std::vector<std::set<int>> blocks_of(docs.size());
      for (int b = 0; b < P; ++b)
        for (long i = 0; i < l.local; ++i)
          if (l.natural(b, i) >= 0) blocks_of[size_t(l.doc[size_t(l.natural(b, i))])].insert(b);
      for (int b = 0; b < P; ++b)
        for (long i = l.travel; i < l.local; ++i)
          if (l.natural(b, i) >= 0) ASSERT_EQ(blocks_of[size_t(l.doc[size_t(l.natural(b, i))])].size(), 1u);
      // Padding (the blocks' token counts differ after packing) stays bounded.
      EXPECT_LT(double(l.padding()) / double(S), 0.5) << "P=" << P << " seed " << seed;
    }
}

// The document layout's slots, pinned (an FNV-1a hash of every slot and of
// travel and local) on log-uniform documents, one document and a mix: the
// placement reads each split token's offset in its document from the
// documents' starts, where it walked back token by token (O(S^2): 90 s for
// one 1M document on 32 blocks); the hashes are the walking version's.
TEST(Layout, DocumentLayoutPlacementPinned) {
  auto hash = [](const SeqLayout& l) {
    unsigned long long h = 1469598103934665603ull;
    auto mix = [&](long v) {
      for (int i = 0; i < 8; ++i) h = (h ^ ((unsigned long long)v >> (8 * i) & 0xff)) * 1099511628211ull;
    };
    for (long v : l.slot) mix(v);
    mix(l.travel), mix(l.local);
    return h;
  };
  std::vector<unsigned long long> got;
  for (int P : {3, 8, 32})
    for (unsigned long long seed = 1; seed <= 3; ++seed) {
      const long S = 65536;
      got.push_back(hash(make_layout(LayoutKind::Document, S, P, log_uniform_documents(S, 16, S / 2, seed))));
    }
  got.push_back(hash(make_layout(LayoutKind::Document, 4096, 32, {4096})));
  got.push_back(hash(make_layout(LayoutKind::Document, 4096, 8, {})));
  got.push_back(hash(make_layout(LayoutKind::Document, 10000, 4, {3000, 17, 2500, 1, 4000, 482}, 2)));
  const std::vector<unsigned long long> want = {
      0xe12604c6c2971514ull, 0xded64a3d018956cull,  0xe501cacc62240857ull, 0xc016d2f9bbc32116ull,
      0xb745259737929008ull, 0x9f31a23857745e59ull, 0xdf0d44071caa82cfull, 0x9624209550a8e4a7ull,
      0xc194d04f9f8d0c25ull, 0xf4bc4b8bb91c6c43ull, 0x1fcb2c53fabb4d03ull, 0x707a3c8ba2d8bdc3ull};
  EXPECT_EQ(got, want);
}

TEST(Layout, BadInputIsRefused) {
  EXPECT_THROW(make_layout(LayoutKind::Document, 10, 2, {3, 3}), burst::Error);
  EXPECT_THROW(parse_layout("diagonal"), burst::Error);
  EXPECT_THROW(parse_doc_lengths("3,x", 6), burst::Error);
  EXPECT_THROW(parse_doc_lengths("3,2", 6), burst::Error);
  EXPECT_THROW(parse_doc_lengths("3,3,", 6), burst::Error);  // getline alone would read "3,3"
  EXPECT_THROW(parse_doc_lengths(",3,3", 6), burst::Error);
  EXPECT_EQ(parse_doc_lengths("3,3", 6), (std::vector<long>{3, 3}));
}

// The defaults of USP's head-parallel size and LoongTrain's inner ring come
// from the GROUP's ranks per node (a cp group is a contiguous run of ranks):
// a 4-rank group on 8-rank nodes is one node's all-to-all, not hp = 1 (a
// plain ring, as before), as the model (perf/attention.cpp) takes min(G, P).
TEST(Schedule, HeadParallelDefaultsFollowTheGroupsRanksPerNode) {
  const auto r = [](const char* method, int P, int L) {
    AttnOptions o;
    o.method = method;
    const AttnOptions x = resolve_options(o, P, L);
    return std::make_pair(x.hp, x.inner);
  };
  EXPECT_EQ(r("usp", 4, 8).first, 4);       // the group fits in a node
  EXPECT_EQ(r("usp", 16, 8).first, 8);      // two whole nodes: the node's ranks
  EXPECT_EQ(r("usp", 6, 4).first, 1);       // nodes that do not tile the group: a ring
  EXPECT_EQ(r("ulysses", 6, 4).first, 6);   // Ulysses: every rank
  EXPECT_EQ(r("loongtrain", 4, 8).second, 4);
  EXPECT_EQ(r("loongtrain", 16, 8).second, 8);
  EXPECT_EQ(r("loongtrain", 6, 4).second, 6);
  AttnOptions given;
  given.method = "usp", given.hp = 2, given.inner = 2;  // given values are kept
  EXPECT_EQ(resolve_options(given, 4, 8).hp, 2);
  EXPECT_EQ(resolve_options(given, 4, 8).inner, 2);
}

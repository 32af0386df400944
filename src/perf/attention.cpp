#include "perf/attention.hpp"

#include "core/error.hpp"
#include "parallel/layout.hpp"
#include "perf/shape.hpp"
#include "kernels/attention_tiles.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

namespace burst::perf {

using parallel::BufKind;
using parallel::RingGeometry;
using parallel::RingOp;

PassCost ring_pass(const RingPassSpec& s) {
  const parallel::RingProgram prog = parallel::ring_program(s.g, 0, s.rounds, s.partial);
  PassCost out;
  out.counts = parallel::count_transfers(prog);
  double now = 0, link_free[2] = {0, 0};
  std::vector<double> req_end(size_t(prog.requests), 0.0), recv_bytes(size_t(prog.requests), 0.0);
  bool round_paid = false;  // the fixed part of a round's transfer CPU charged since the last Compute
  // Rank 0's neighbours run the same program in step, so a receive completes
  // when rank 0's own matching send (same kind, link, tag) last completed.
  std::map<std::tuple<int, int, int>, double> last_send;
  auto bytes_of = [&](BufKind k) { return k == BufKind::Read ? s.read_bytes : s.partial_bytes; };
  for (const RingOp& op : prog.ops) {
    const int li = op.link == parallel::Link::Inter && s.g.nodes > 1 ? 1 : 0;
    const Link& link = li ? s.inter : s.intra;
    switch (op.kind) {
      case RingOp::Send: {
        const double b = bytes_of(op.buf_kind), start = std::max(now, link_free[li]), end = start + link.time(b);
        link_free[li] = end;
        req_end[size_t(op.req)] = end;
        recv_bytes[size_t(op.req)] = 0;
        last_send[{int(op.buf_kind), li, op.tag}] = end;
        (li ? out.bytes_inter : out.bytes_intra) += b;
        break;
      }
      case RingOp::Recv: {
        auto it = last_send.find({int(op.buf_kind), li, op.tag});
        req_end[size_t(op.req)] = it == last_send.end() ? now : it->second;
        recv_bytes[size_t(op.req)] = bytes_of(op.buf_kind);
        break;
      }
      case RingOp::Wait: {
        now = std::max(now, req_end[size_t(op.req)]);
        // On shared cores a transfer is CPU work no compute hides (zero on
        // GPUs): its bytes, and once per round the fixed part (the wait's
        // polling before it naps; a round's second transfer has arrived by
        // then: the ring timers' wait CPU per round grows only by the bytes
        // from one transfer per round to two).
        const double b = recv_bytes[size_t(op.req)];
        if (b > 0 && (s.round_cpu > 0 || s.round_cpu_per_byte > 0)) {
          const double t = (round_paid ? 0.0 : s.round_cpu) + s.round_cpu_per_byte * b;
          round_paid = true;
          now += t, out.compute += t;
        }
        break;
      }
      case RingOp::Copy: {
        const double t = 2 * bytes_of(op.buf_kind) / s.hbm_bw;
        now += t, out.compute += t;
        break;
      }
      case RingOp::Compute: {
        round_paid = false;
        const double t = !s.t_by_round.empty() ? s.t_by_round[size_t(op.round)] : op.home ? s.t_home : s.t_round;
        now += t, out.compute += t;
        break;
      }
      case RingOp::Add:
      case RingOp::Deliver: {
        const double t = 3 * s.partial_bytes / s.hbm_bw;
        now += t, out.compute += t;
        break;
      }
    }
  }
  out.time = now;
  return out;
}

double window_block_area(double dist, double s, double w) {
  if (dist < 0) return 0;
  // u = x - y over [0, s)^2 has density s - |u| on (-s, s); the pair is
  // visible when 0 <= dist s + u < w.
  auto F = [s](double a) {
    a = std::min(std::max(a, -s), s);
    return a <= 0 ? (a + s) * (a + s) / 2 : s * s - (s - a) * (s - a) / 2;
  };
  return std::max(0.0, F(w - dist * s) - F(-dist * s));
}

namespace {

// Nodes x ranks-per-node of a group of world ranks when uniform, else {1, P}.
RingGeometry geometry_of(const std::vector<int>& world, int G, bool* uniform) {
  std::vector<int> counts;
  std::set<int> distinct;
  for (size_t i = 0; i < world.size(); ++i) {
    const int node = world[i] / G;
    if (i == 0 || node != world[i - 1] / G) counts.push_back(0);
    counts.back()++;
    distinct.insert(node);
  }
  *uniform = distinct.size() == counts.size() && std::set<int>(counts.begin(), counts.end()).size() == 1;
  if (!*uniform) return {1, int(world.size())};
  return {int(counts.size()), counts[0]};
}

int nodes_spanned(const std::vector<int>& world, int G) {
  std::set<int> s;
  for (int w : world) s.insert(w / G);
  return int(s.size());
}

// What the engine's kernels compute for one (rank, visiting block) pair of a
// layout: whether the ring calls the kernel for it at all (the rings skip a
// block pair by the kernels' tile rule applied to the whole blocks,
// parallel::impl::BlockMeta::visible; the home pair is always called), and
// the area (query rows x key rows) of the tiles the kernel computes: it
// tiles the query and key spans it is given from their first slot at the
// kernels' tile size (kernels::AttnTiles), skips a tile the rule
// (kernels::spans_may_see) rejects and computes every other tile in full.
struct BlockWork {
  bool called = false;
  double area = 0;
  // The call's tiles by kind (kernels/attention_host.hpp: whole tiles run
  // without the element mask, partly visible ones with it, skipped ones
  // only have their bound checked) and its rows: what the host kernel pays
  // beyond the area's arithmetic (Cluster::TileCosts). Per head.
  double whole = 0, partial = 0, skipped = 0, rows = 0;
};
struct LayoutWork {
  // [rank][visiting block]. fwd: the rank's queries (all slots) against the
  // visiting keys (travelling slots); the forward and the K,V-travel
  // backward. qtravel: the visiting queries (travelling slots) against the
  // rank's keys (all slots); burst's backward. Home [r][r]: all against all.
  std::vector<std::vector<BlockWork>> fwd, qtravel;
  // The same tiling on one causal block of `local` tokens: the calibration's
  // kernel call (the attention rate is per causal pair of such a block).
  double causal_area = 0;
  parallel::MaskType type = parallel::MaskType::Causal;  // which rule cuts the partly visible tiles
};

// What a host kernel call costs beyond its tiles' arithmetic (the cluster's
// tile costs, zero on GPU clusters): every computed tile's checks, the
// element mask of the partly visible ones, the skipped tiles' bound checks,
// the call itself and its rows' loads and stores; per head of the call.
double tile_overhead(const Cluster::TileCosts& tc, const BlockWork& w, parallel::MaskType type, double heads) {
  if (!w.called) return 0.0;
  const double part = type == parallel::MaskType::Window     ? tc.partial_window
                      : type == parallel::MaskType::Document ? tc.partial_document
                                                             : tc.partial_causal;
  return tc.call + heads * ((w.whole + w.partial) * tc.mask + w.partial * part + w.skipped * tc.skip + w.rows * tc.row);
}

// One ring over `members` (world ranks, ring order) with t tokens per rank
// and nh/nkvh heads: forward and backward passes, and the buffers alive.
struct RingSetup {
  std::vector<int> members;
  // General layout / mask: what the kernels compute for every (rank,
  // visiting block) pair and the slots that travel; no blocks: the analytic cases.
  LayoutWork work;
  bool from_layout = false;
  double travel = 0;
  std::string shape = "auto";      // flat | double | auto
  RingGeometry fixed{0, 0};        // loongtrain: N x inner given
  bool kv_backward = false;
  bool partial_bf16 = false;
  bool causal = true;
  double window = 0;
  double t = 0;
  long nh = 0, nkvh = 0, d = 0;
};

struct RingResult {
  PassCost fwd, bwd, half_fwd;
  double buffers = 0;
  std::string describe;
};

// Bounds of each tile of slots [off, off + len) of the layout's slot arrays.
std::vector<kernels::SpanBounds> tile_bounds(const std::vector<long>& pos, const std::vector<int>& doc, long off, long len,
                                             long tile) {
  std::vector<kernels::SpanBounds> b;
  for (long i0 = 0; i0 < len; i0 += tile) {
    kernels::SpanBounds s;
    for (long i = i0; i < std::min(len, i0 + tile); ++i) s.add(pos[size_t(off + i)], doc[size_t(off + i)]);
    b.push_back(s);
  }
  return b;
}

// Tile by tile: every (query tile, key tile) pair through the kernels' rule.
BlockWork computed_work_pairs(const std::vector<kernels::SpanBounds>& qt, long nq, const std::vector<kernels::SpanBounds>& kt,
                              long nk, bool causal, long window, bool same_doc) {
  const kernels::AttnTiles tiles;
  BlockWork w;
  w.called = true, w.rows = double(nq + nk);
  for (size_t i = 0; i < qt.size(); ++i)
    for (size_t j = 0; j < kt.size(); ++j) {
      if (!kernels::spans_may_see(qt[i], kt[j], causal, window, same_doc)) {
        w.skipped += 1;
        continue;
      }
      (kernels::spans_all_see(qt[i], kt[j], causal, window, same_doc) ? w.whole : w.partial) += 1;
      w.area += double(std::min(tiles.br, nq - long(i) * tiles.br)) * double(std::min(tiles.bc, nk - long(j) * tiles.bc));
    }
  return w;
}

// The same counts without a window or documents, query tile by query tile:
// spans_may_see is then k.pmin <= q.pmax (causal; full: any key) and
// spans_all_see, for a query tile without padding, k.pmax <= q.pmin on a key
// tile without padding, so the key tiles sorted by pmin (with their
// columns' running sum) and by pmax answer each query tile by binary search.
// Pair by pair was (S / 32)^2 / P checks per block pair: 40 s for one 4M
// document on 32 GPUs (the document layout under the causal mask). Every
// count and area is a whole number below 2^53, so the sums are exact and
// equal to the pair-by-pair ones in any order.
BlockWork computed_work_sorted(const std::vector<kernels::SpanBounds>& qt, long nq, const std::vector<kernels::SpanBounds>& kt,
                               long nk, bool causal) {
  const kernels::AttnTiles tiles;
  std::vector<std::pair<long, long>> by_min;  // (pmin, columns) of the key tiles with a token
  std::vector<long> max_clean;                // pmax of the key tiles without padding
  for (size_t j = 0; j < kt.size(); ++j) {
    if (!kt[j].any) continue;
    by_min.emplace_back(kt[j].pmin, std::min(tiles.bc, nk - long(j) * tiles.bc));
    if (!kt[j].pad) max_clean.push_back(kt[j].pmax);
  }
  std::sort(by_min.begin(), by_min.end());
  std::sort(max_clean.begin(), max_clean.end());
  std::vector<long> pmins(by_min.size()), cols(by_min.size() + 1, 0);
  for (size_t j = 0; j < by_min.size(); ++j) pmins[j] = by_min[j].first, cols[j + 1] = cols[j] + by_min[j].second;
  BlockWork w;
  w.called = true, w.rows = double(nq + nk);
  const double nkt = double(kt.size());
  for (size_t i = 0; i < qt.size(); ++i) {
    const kernels::SpanBounds& q = qt[i];
    if (!q.any) {
      w.skipped += nkt;
      continue;
    }
    const size_t seen = causal ? size_t(std::upper_bound(pmins.begin(), pmins.end(), q.pmax) - pmins.begin()) : pmins.size();
    const size_t whole = q.pad ? 0
                         : causal ? size_t(std::upper_bound(max_clean.begin(), max_clean.end(), q.pmin) - max_clean.begin())
                                  : max_clean.size();
    w.skipped += nkt - double(seen), w.whole += double(whole), w.partial += double(seen - whole);
    w.area += double(std::min(tiles.br, nq - long(i) * tiles.br)) * double(cols[seen]);
  }
  return w;
}

// The same counts under the document mask (no window), by counting instead
// of visiting pairs. spans_may_see is then k.dmax >= q.dmin and k.dmin <=
// q.dmax (documents), and k.pmin <= q.pmax (causal). Where a key tile that
// starts at or before a query tile's last position never starts in a later
// document than the query tile's last (checked below over the tiles; it
// holds whenever document ids grow with position, as the layouts make
// them), the causal condition implies the second document one, so both
// cases are a two-sided count: key tiles with a <= X (a = pmin, X = pmax
// when causal; a = dmin, X = dmax otherwise) and dmax >= q.dmin, answered
// for the query tiles in order of X with a Fenwick tree over the key tiles'
// dmax (counts and columns). spans_all_see needs both tiles clean and in
// one document, the same one (and k.pmax <= q.pmin when causal): per
// document, the clean one-document key tiles' pmax sorted. Returns false
// (nothing counted) where the check fails; the caller counts pair by pair.
// `--mask document` at 4M tokens on 32 GPUs took ~52 s pair by pair.
bool computed_work_docs(const std::vector<kernels::SpanBounds>& qt, long nq, const std::vector<kernels::SpanBounds>& kt, long nk,
                        bool causal, BlockWork& w) {
  const kernels::AttnTiles tiles;
  struct Key {
    long a;
    int dmax;
    long cols;
  };
  std::vector<Key> keys;
  std::map<int, std::vector<long>> clean_pmax;  // document -> pmax of its clean one-document key tiles
  for (size_t j = 0; j < kt.size(); ++j) {
    const kernels::SpanBounds& k = kt[j];
    if (!k.any) continue;
    keys.push_back({causal ? k.pmin : long(k.dmin), k.dmax, std::min(tiles.bc, nk - long(j) * tiles.bc)});
    if (!k.pad && k.dmin == k.dmax) clean_pmax[k.dmin].push_back(k.pmax);
  }
  for (auto& kv : clean_pmax) std::sort(kv.second.begin(), kv.second.end());
  if (causal) {  // the check: min pmin over the key tiles with dmin > D must exceed pmax of every query tile ending in D
    std::vector<std::pair<int, long>> by_dmin;
    for (const kernels::SpanBounds& k : kt)
      if (k.any) by_dmin.emplace_back(k.dmin, k.pmin);
    std::sort(by_dmin.begin(), by_dmin.end());
    std::vector<long> suffix_min(by_dmin.size() + 1, std::numeric_limits<long>::max());
    for (size_t j = by_dmin.size(); j-- > 0;) suffix_min[j] = std::min(suffix_min[j + 1], by_dmin[j].second);
    for (const kernels::SpanBounds& q : qt) {
      if (!q.any) continue;
      const size_t first_later = size_t(std::upper_bound(by_dmin.begin(), by_dmin.end(), std::make_pair(q.dmax, std::numeric_limits<long>::max())) -
                                        by_dmin.begin());
      if (suffix_min[first_later] <= q.pmax) return false;
    }
  }
  std::sort(keys.begin(), keys.end(), [](const Key& x, const Key& y) { return x.a < y.a; });
  std::vector<int> dvals;
  for (const Key& k : keys) dvals.push_back(k.dmax);
  std::sort(dvals.begin(), dvals.end());
  dvals.erase(std::unique(dvals.begin(), dvals.end()), dvals.end());
  const size_t nd = dvals.size();
  std::vector<double> fen_n(nd + 1, 0), fen_c(nd + 1, 0);  // over dmax rank, reversed: prefix = dmax >= value
  auto rank_rev = [&](int d) { return nd - size_t(std::lower_bound(dvals.begin(), dvals.end(), d) - dvals.begin()); };  // 1..nd
  auto add = [&](size_t i, double c) {
    for (; i <= nd; i += i & (~i + 1)) fen_n[i] += 1, fen_c[i] += c;
  };
  auto prefix = [&](size_t i, double& n, double& c) {
    n = 0, c = 0;
    for (; i > 0; i -= i & (~i + 1)) n += fen_n[i], c += fen_c[i];
  };
  std::vector<size_t> order;
  for (size_t i = 0; i < qt.size(); ++i)
    if (qt[i].any) order.push_back(i);
  auto X = [&](size_t i) { return causal ? qt[i].pmax : long(qt[i].dmax); };
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return X(x) < X(y); });
  const double nkt = double(kt.size());
  w.called = true, w.rows = double(nq + nk);
  for (size_t i = 0; i < qt.size(); ++i)
    if (!qt[i].any) w.skipped += nkt;
  size_t next = 0;
  for (size_t i : order) {
    const kernels::SpanBounds& q = qt[i];
    for (; next < keys.size() && keys[next].a <= X(i); ++next) add(rank_rev(keys[next].dmax), double(keys[next].cols));
    // dmax >= q.dmin: the ranks of the values >= q.dmin, reversed, are 1 .. (number of values >= q.dmin).
    const size_t upto = nd - size_t(std::lower_bound(dvals.begin(), dvals.end(), q.dmin) - dvals.begin());
    double seen = 0, cols = 0;
    prefix(upto, seen, cols);
    double whole = 0;
    if (!q.pad && q.dmin == q.dmax) {
      const auto it = clean_pmax.find(q.dmin);
      if (it != clean_pmax.end())
        whole = causal ? double(std::upper_bound(it->second.begin(), it->second.end(), q.pmin) - it->second.begin())
                       : double(it->second.size());
    }
    w.skipped += nkt - seen, w.whole += whole, w.partial += seen - whole;
    w.area += double(std::min(tiles.br, nq - long(i) * tiles.br)) * cols;
  }
  return true;
}

BlockWork computed_work(const std::vector<kernels::SpanBounds>& qt, long nq, const std::vector<kernels::SpanBounds>& kt, long nk,
                        bool causal, long window, bool same_doc) {
  if (window <= 0 && !same_doc) return computed_work_sorted(qt, nq, kt, nk, causal);
  if (window <= 0) {
    BlockWork w;
    if (computed_work_docs(qt, nq, kt, nk, causal, w)) return w;
  }
  return computed_work_pairs(qt, nq, kt, nk, causal, window, same_doc);
}

// The calibration's kernel call, one causal block of `local` tokens in
// order: the area its tiles compute (the diagonal tiles in full).
double causal_block_area(long local) {
  const kernels::AttnTiles tiles;
  std::vector<long> pos(static_cast<size_t>(local));
  for (long i = 0; i < local; ++i) pos[size_t(i)] = i;
  const std::vector<int> doc(static_cast<size_t>(local), 0);
  return computed_work(tile_bounds(pos, doc, 0, local, tiles.br), local, tile_bounds(pos, doc, 0, local, tiles.bc), local, true, 0,
                       false)
      .area;
}

// The calibration's causal block of t tokens (nd = heads x head dim), forward
// and backward, less its diagonal tiles' element mask (TileCosts::causal_diag;
// t / tile of them per head): the price of its whole-tile area
// (causal_block_area), to which each call adds its own tiles' costs
// (tile_overhead).
struct BlockTimes {
  double fwd = 0, bwd = 0;
};
BlockTimes whole_tile_block(const Cluster& c, double t, double nd, double heads) {
  const double diag_tiles = std::ceil(t / double(kernels::AttnTiles{}.br)) * heads;
  return {std::max(0.0, 4 * (t * t / 2) * nd / c.attn_rate_fwd(t) - diag_tiles * c.tile_fwd.causal_diag),
          std::max(0.0, 2.5 * 4 * (t * t / 2) * nd / c.attn_rate_bwd(t) - diag_tiles * c.tile_bwd.causal_diag)};
}

LayoutWork layout_work(const parallel::SeqLayout& L, parallel::MaskType type, long window) {
  const kernels::AttnTiles tiles;
  const int P = L.blocks;
  const std::vector<long> pos = L.mask_positions();
  const std::vector<int> doc = L.mask_docs();
  const bool causal = type != parallel::MaskType::Full, same_doc = type == parallel::MaskType::Document;
  const long w = type == parallel::MaskType::Window ? window : 0;
  std::vector<std::vector<kernels::SpanBounds>> q_all, q_tr, k_all, k_tr;
  std::vector<kernels::SpanBounds> all, tr;  // whole blocks
  for (int b = 0; b < P; ++b) {
    const long off = long(b) * L.local;
    q_all.push_back(tile_bounds(pos, doc, off, L.local, tiles.br));
    q_tr.push_back(tile_bounds(pos, doc, off, L.travel, tiles.br));
    k_all.push_back(tile_bounds(pos, doc, off, L.local, tiles.bc));
    k_tr.push_back(tile_bounds(pos, doc, off, L.travel, tiles.bc));
    all.push_back(tile_bounds(pos, doc, off, L.local, L.local).at(0));
    tr.push_back(L.travel > 0 ? tile_bounds(pos, doc, off, L.travel, L.travel).at(0) : kernels::SpanBounds{});
  }
  LayoutWork out;
  out.type = type;
  out.fwd.assign(size_t(P), std::vector<BlockWork>(size_t(P)));
  out.qtravel = out.fwd;
  for (int r = 0; r < P; ++r)
    for (int b = 0; b < P; ++b) {
      BlockWork& f = out.fwd[size_t(r)][size_t(b)];
      BlockWork& q = out.qtravel[size_t(r)][size_t(b)];
      if (r == b) {
        f = q = computed_work(q_all[size_t(r)], L.local, k_all[size_t(r)], L.local, causal, w, same_doc);
        continue;
      }
      if (kernels::spans_may_see(all[size_t(r)], tr[size_t(b)], causal, w, same_doc))
        f = computed_work(q_all[size_t(r)], L.local, k_tr[size_t(b)], L.travel, causal, w, same_doc);
      if (kernels::spans_may_see(tr[size_t(b)], all[size_t(r)], causal, w, same_doc))
        q = computed_work(q_tr[size_t(b)], L.travel, k_all[size_t(r)], L.local, causal, w, same_doc);
    }
  out.causal_area = causal_block_area(L.local);
  return out;
}

// The rounds the engine runs (parallel::plan_ring_rounds over the block
// pairs it calls the kernel for, as RingFamily::plan) and each round's
// time from every rank's time in it, cost(rank, block, round). A round
// lasts as long as its busiest rank (one GPU each). On a host whose ranks
// share fewer cores than ranks (share = cores / P < 1; the rates are
// already scaled by it), a rank with less to do waits (yielding, then
// napping: comm/collectives.hpp) and frees its core:
// - ranks bound to cores (core_of: the core of each ring position; empty:
//   unbound), only to the ranks of its own core: the round costs its busiest
//   core, the sum of its ranks' times there, each at the whole core's rate
//   (x share, the cost being at `share` of one: a run's CPU below its cores
//   is its ranks' idle waits, other processes' load being retaken);
// - unbound, given the cores available (host.cores, --host-cores), the
//   ranks' mean time spread over the cores but no less than the busiest rank
//   alone on a whole core, max(mean, max x share); given the CPU the run
//   actually got (--host-cpu: CPU seconds per wall second, which already
//   leaves out the ranks' idle waits), the mean.
template <class Cost>
std::vector<double> ring_round_times(const std::vector<std::vector<BlockWork>>& work, const RingGeometry& g, double share,
                                     bool cpu_used, const std::vector<int>& core_of, const Cost& cost) {
  const int W = g.size();
  const parallel::RingRounds rr =
      parallel::plan_ring_rounds(g, [&](int r, int b) { return work[size_t(r)][size_t(b)].called; });
  std::vector<double> time;
  const int cores = core_of.empty() ? 0 : 1 + *std::max_element(core_of.begin(), core_of.end());
  std::vector<double> core(size_t(std::max(1, cores)), 0.0);
  BURST_ASSERT(core_of.empty() || int(core_of.size()) == W, "ring_round_times: a core for each of the ", W, " ranks");
  for (int k = 0; k < rr.rounds; ++k) {
    double mx = 0, sum = 0;
    std::fill(core.begin(), core.end(), 0.0);
    for (int r = 0; r < W; ++r) {
      const int b = g.nodes == 1 ? (rr.mirror ? (r + k) % W : (r - k + W) % W) : parallel::ring_block_at(g, r, k);
      const double t = cost(r, b, k);
      mx = std::max(mx, t);
      sum += t;
      if (cores > 0) core[size_t(core_of[size_t(r)])] += t;
    }
    if (share >= 1) time.push_back(mx);
    else if (cores > 0) time.push_back(*std::max_element(core.begin(), core.end()) * share);
    else time.push_back(cpu_used ? sum / W : std::max(sum / W, mx * share));
  }
  return time;
}

RingResult ring_cost(const Cluster& c, const RingSetup& r) {
  const int P = int(r.members.size()), G = c.gpus_per_node;
  bool uniform = false;
  RingGeometry nodes = geometry_of(r.members, G, &uniform);
  // `auto` as the engine picks it (parallel/methods.cpp pick_shape): the
  // double ring over whole nodes, unless a flat ring stops early (a sliding
  // window on the contiguous layout).
  int flat_rounds = P;
  if (r.from_layout) {
    const auto& bw = r.kv_backward ? r.work.fwd : r.work.qtravel;
    flat_rounds = parallel::flat_ring_rounds(
        P, [&](int q, int b) { return r.work.fwd[size_t(q)][size_t(b)].called; },
        [&](int q, int b) { return bw[size_t(q)][size_t(b)].called; });
  } else if (r.window > 0) {
    flat_rounds = std::min(P, 1 + int(std::ceil((r.window - 1) / r.t)));
  }
  RingGeometry g{1, P};
  if (r.fixed.nodes > 0) g = r.fixed;
  else if (r.shape == "double" || (r.shape == "auto" && uniform && flat_rounds >= P)) g = nodes;
  // Links: the intra ring is on NVLink when each intra group sits in one node;
  // a ring that crosses nodes is paced by its node-crossing hop (one HCA).
  bool intra_local = true;
  for (int i = 0; i < P; i += g.local)
    intra_local = intra_local && nodes_spanned(std::vector<int>(r.members.begin() + i, r.members.begin() + i + g.local), G) == 1;
  const Link intra = intra_local ? c.nvlink() : c.ib_one_flow();
  const Link inter = nodes_spanned(r.members, G) > 1 ? c.ib_all_gpus() : c.nvlink();

  const double t = r.t, nd = double(r.nh) * double(r.d), kvd = double(r.nkvh) * double(r.d), pb = r.partial_bf16 ? 2 : 4;
  const double area = r.causal ? t * t / 2 : t * t;  // zigzag: every round costs half a block under causal
  const double f_fwd = 4 * area * nd, f_bwd = 2.5 * f_fwd;
  // A visiting block's merge into the running (O, lse), fp32: a separate
  // pass reads O, O_b and writes O (the block's O_b write is in its kernel
  // rate); merged in the forward's epilogue, the kernel reads the running O
  // and lse where it would have written O_b (measured on an H100: the 2K
  // block's step 10.7 us over the plain forward, the 33.6 MB read's floor
  // 10.0 us, NOTES "v3 CUDA: the ring forward's merge").
  // The engine merges in the epilogue where its CUDA flash kernels run (head
  // dims 64 and 128); elsewhere it falls back to the pass.
  const bool fused_merge = c.attn_merge_in_epilogue && (r.d == 64 || r.d == 128);
  const double merge = fused_merge ? (4 * t * nd + 4 * t * double(r.nh)) / c.hbm_bw  // the reads; lse' replaces lse_b's write
                                   : (3 * 4 * t * nd + 3 * 4 * t * double(r.nh)) / c.hbm_bw;

  RingPassSpec f;
  f.g = g, f.rounds = P, f.partial = false, f.hbm_bw = c.hbm_bw, f.intra = intra, f.inter = inter;
  f.round_cpu = c.ring_round_cpu, f.round_cpu_per_byte = c.ring_round_cpu_per_byte;
  // Sliding window on the contiguous layout: a flat ring stops after the last
  // round anyone sees anything; a double ring runs every round, computing
  // only visible blocks. A round costs what its busiest rank computes.
  std::vector<double> round_area, fwd_times, bwd_times;
  if (r.from_layout) {
    // Each rank's kernel time in a round from the area of the tiles it
    // computes, at the rate of the calibration's causal block of t tokens
    // (per causal pair, t^2 / 2 of them, while its kernel computes
    // causal_area of tile area): per tile area (t^2 / 2) / causal_area of a
    // pair's time. A forward round that calls the kernel also merges.
    // On a host with tile costs, the calibration's block first sheds its
    // diagonal tiles' element mask (TileCosts::causal_diag; t / tile of them
    // per head), so that tile area prices whole tiles only; every call then
    // adds what its own tiles cost beyond that (tile_overhead).
    const double share = c.host_cores > 0 ? std::min(1.0, c.host_cores / double(P)) : 1.0;
    // Bound ranks: world rank m on core m mod the machine's cores.
    std::vector<int> bound;
    if (c.ranks_bound && c.machine_cores >= 1)
      for (int m : r.members) bound.push_back(m % int(c.machine_cores));
    const BlockTimes block = whole_tile_block(c, t, nd, double(r.nh));
    fwd_times = ring_round_times(r.work.fwd, g, share, c.host_cpu_used, bound, [&](int q, int b, int k) {
      const BlockWork& w = r.work.fwd[size_t(q)][size_t(b)];
      return w.area / r.work.causal_area * block.fwd + (k > 0 && w.called ? merge : 0.0) +
             tile_overhead(c.tile_fwd, w, r.work.type, double(r.nh));
    });
    const auto& bw = r.kv_backward ? r.work.fwd : r.work.qtravel;
    bwd_times = ring_round_times(bw, g, share, c.host_cpu_used, bound, [&](int q, int b, int) {
      const BlockWork& w = bw[size_t(q)][size_t(b)];
      return w.area / r.work.causal_area * block.bwd + tile_overhead(c.tile_bwd, w, r.work.type, double(r.nh));
    });
    f.rounds = int(fwd_times.size());
  } else if (r.window > 0) {
    if (g.nodes == 1) f.rounds = flat_rounds;
    for (int k = 0; k < f.rounds; ++k) {
      double a = 0;
      for (int i = 0; i < P; ++i) a = std::max(a, window_block_area(double(i - parallel::ring_block_at(g, i, k)), t, r.window));
      round_area.push_back(a);
    }
  }
  const double tr = r.travel > 0 ? r.travel : t;  // slots that travel (the document layout keeps some home)
  const double e = c.elem_bytes;  // the engine's element (bf16 on GPUs; float on the host build)
  f.read_bytes = 2 * tr * kvd * e;
  f.t_home = f_fwd / c.attn_rate_fwd(t);
  f.t_round = f.t_home + merge;
  f.t_by_round = fwd_times;
  for (size_t k = 0; k < round_area.size(); ++k)
    f.t_by_round.push_back(4 * round_area[k] * nd / c.attn_rate_fwd(t) + (k > 0 && round_area[k] > 0 ? merge : 0.0));
  RingPassSpec b = f;
  b.partial = true;
  b.t_home = f_bwd / c.attn_rate_bwd(t);
  b.t_round = b.t_home;
  b.t_by_round = bwd_times;
  if (r.from_layout) b.rounds = int(bwd_times.size());
  for (double a : round_area) b.t_by_round.push_back(2.5 * 4 * a * nd / c.attn_rate_bwd(t));
  if (r.kv_backward) {
    b.read_bytes = 2 * tr * kvd * e;
    b.partial_bytes = 2 * tr * kvd * pb;
  } else {
    b.read_bytes = 2 * tr * nd * e + 2 * tr * double(r.nh) * 4;
    b.partial_bytes = tr * nd * pb;
  }
  // `half`: first-half queries against first-half keys, K,V of half size.
  RingPassSpec h = f;
  h.read_bytes = f.read_bytes / 2;
  h.t_home = (f_fwd / 4) / c.attn_rate_fwd(t / 2);
  h.t_round = h.t_home + merge / 2;

  RingResult out;
  out.fwd = ring_pass(f);
  out.bwd = ring_pass(b);
  const double D = (t * nd * 4 + t * double(r.nh) * 4) / c.hbm_bw;  // D = rowsum(dO * O)
  out.bwd.time += D, out.bwd.compute += D;
  if (r.window <= 0 && !r.from_layout) out.half_fwd = ring_pass(h);  // `half`: the causal mask on zigzag only
  // Buffers the engine allocates: the read buffers its program names, the
  // partial buffers, fp32 outputs and gradient accumulators.
  const parallel::RingProgram pf = parallel::ring_program(g, 0, f.rounds, false), pbw = parallel::ring_program(g, 0, b.rounds, true);
  std::set<int> reads, parts;
  for (const auto& op : pbw.ops) {
    if (op.kind == RingOp::Compute) {
      reads.insert(op.buf);
      if (op.buf2 >= 0) parts.insert(op.buf2);
    } else if (op.buf >= 0) {
      (op.buf_kind == BufKind::Read ? reads : parts).insert(op.buf);
      if (op.buf2 >= 0) (op.buf_kind == BufKind::Read ? reads : parts).insert(op.buf2);
    }
  }
  const double bwd_buffers = double(reads.size()) * b.read_bytes + double(parts.size()) * b.partial_bytes +
                             t * double(r.nh) * 4 + t * (nd + 2 * kvd) * 4;
  const double fwd_buffers = double(pf.read_buffers) * f.read_bytes + 2 * (t * nd * 4 + t * double(r.nh) * 4);
  out.buffers = std::max(bwd_buffers, fwd_buffers);
  std::ostringstream os;
  os << (g.nodes > 1 ? "double ring " : "flat ring ") << g.nodes << "x" << g.local << (intra_local ? "" : " (crosses nodes)")
     << ", backward " << (r.kv_backward ? "K,V,dK,dV travel" : "Q,dO,lse,D + dQ travel") << ", partials "
     << (r.partial_bf16 ? "bf16" : "fp32");
  if (f.rounds < P) os << ", " << f.rounds << " of " << P << (!r.from_layout ? " rounds (window)" : " rounds");
  if (r.from_layout && b.rounds != f.rounds) os << " (backward " << b.rounds << ")";
  if (r.from_layout) os << ", rounds costed from the kernels' computed tiles on the layout";
  out.describe = os.str();
  return out;
}

// All-to-all of `bytes` (this rank's whole tensor) over `members`: each peer
// gets bytes / |members|; on-node and off-node peers in parallel.
double a2a_time(const Cluster& c, const std::vector<int>& members, int me_world, double bytes) {
  const int G = c.gpus_per_node;
  int on = 0, off = 0;
  for (int w : members) {
    if (w == me_world) continue;
    (w / G == me_world / G ? on : off)++;
  }
  const double per = bytes / double(members.size());
  double t = 0;
  if (on) t = std::max(t, c.nvlink().time(on * per));
  if (off) t = std::max(t, c.ib_all_gpus().time(off * per));
  return t;
}

}  // namespace

BlockingCollectives blocking_collectives(const std::string& method, int group, double s, long n, long nkv, long d, double elem,
                                         double acc) {
  BlockingCollectives b;
  if (group <= 1) return b;
  const double nh = double(n) / group * double(d), kh = double(nkv) / group * double(d);
  using K = Collective;
  if (method == "ulysses" || method == "usp") {
    // seq_to_heads / heads_to_seq: a peer's chunk is s rows of its head shard.
    // forward: q, k, v back to back; the attention; o, lse back to back.
    b.fwd = {{K::AllToAll, s * nh * elem, false}, {K::AllToAll, s * kh * elem, true}, {K::AllToAll, s * kh * elem, true},
             {K::AllToAll, s * nh * acc, false, true}, {K::AllToAll, s * double(n) / group * acc, true}};
    // a rebuild: q, k, v, o, lse, then at once the backward's dO (UspAttention::backward).
    b.rebuild = b.fwd;
    for (Collective& c : b.rebuild) c.follows = true;
    // backward: dO; the attention's backward; dq, dk, dv back to back.
    b.bwd = {{K::AllToAll, s * nh * elem, false}, {K::AllToAll, s * nh * acc, false, true}, {K::AllToAll, s * kh * acc, true},
             {K::AllToAll, s * kh * acc, true}};
  }
  if (method == "allgather") {
    const double gathered = group * s * double(nkv) * double(d) * elem, partial = group * s * double(nkv) * double(d) * acc;
    // K then V back to back; in the backward the kernel between the gathers and the reduce-scatters.
    b.fwd = {{K::AllGather, gathered, false}, {K::AllGather, gathered, true}};
    b.bwd = {{K::AllGather, gathered, false}, {K::AllGather, gathered, true}, {K::ReduceScatter, partial, false, true},
             {K::ReduceScatter, partial, true}};
  }
  return b;
}

int mpi_collective_rounds(const Collective& c, int P) {
  if (P <= 1) return 0;
  int lg = 0;
  while ((1 << lg) < P) ++lg;  // ceil(log2 P)
  const bool pof2 = (1 << lg) == P;
  switch (c.kind) {
    case Collective::AllToAll:
      // MPIR_Alltoall_intra_auto: Bruck for chunks <= ALLTOALL_SHORT_MSG_SIZE
      // (256) at >= 8 ranks; all isend/irecv at once (one round) up to
      // ALLTOALL_MEDIUM_MSG_SIZE (32768); else pairwise exchange.
      if (c.bytes <= 256 && P >= 8) return lg;
      if (c.bytes <= 32768) return 1;
      return P - 1;
    case Collective::AllGather:
      // MPIR_Allgather_intra_auto: recursive doubling below
      // ALLGATHER_LONG_MSG_SIZE (524288) for a power of two, Bruck below
      // ALLGATHER_SHORT_MSG_SIZE (81920), else a ring.
      if (c.bytes < 524288 && pof2) return lg;
      if (c.bytes < 81920) return lg;
      return P - 1;
    case Collective::ReduceScatter:
      // MPIR_Reduce_scatter_block_intra_auto, commutative op: recursive
      // halving below REDSCAT_COMMUTATIVE_LONG_MSG_SIZE (524288; two more
      // rounds off a power of two), else pairwise exchange.
      if (c.bytes < 524288) return pof2 ? lg : lg - 1 + 2;
      return P - 1;
  }
  return 0;
}

namespace {

// The scheduling wait of a pass's blocking collectives over `group` of the
// P ranks sharing the host: per dependent round of each call; a call that
// follows another of its group waits nothing when the group fits on the
// host's cores (its members are still on them) or when the pass's local work
// holds it (work.follows_in_local: the all-gather method's local term
// measured per rank count), and the follow wait otherwise. The others wait the whole wait times the share
// Cluster::wait_fraction of the compute since the members last met: the
// kernel's for a call after it (work.kernel), else the caller's before the
// pass (work.start; CPU seconds per rank).
struct PassWork {
  double start = std::numeric_limits<double>::infinity(), kernel = 0;
  bool follows_in_local = false;  // a follow's wait is in the pass's local work (Cluster::allgather_local_holds_follows)
};
void add_collective_waits(PassCost& pass, const std::vector<Collective>& calls, int P, int group, const Cluster& cl, PassWork work) {
  const double wait_per_round = cl.spin_collective_wait(P, group), follow_per_round = cl.follow_collective_wait(P);
  const bool group_fits = cl.group_fits_cores(group);
  for (const Collective& c : calls) {
    pass.collectives += 1;
    const double W = c.after_kernel ? work.kernel : work.start;
    // No compute since the members met (the bench's barrier, the previous
    // pass's last call): as a call right after another.
    const bool follows = c.follows || W <= 0;
    if (follows && (group_fits || work.follows_in_local)) continue;
    const double per_round = follows ? follow_per_round : wait_per_round * cl.wait_fraction(P, W);
    const double w = mpi_collective_rounds(c, group) * per_round;
    pass.sync += w, pass.time += w;
  }
}
// The compute of a pass in CPU seconds per rank: its time at the rank's
// share of a core (Cluster::off_core_ratio: 1/s - 1).
double cpu_seconds(const Cluster& c, int P, double t) { return t / (1.0 + c.off_core_ratio(P)); }
// The compute before a pass's calls: its kernel (kernel_t, seconds at the
// share) for the call after it; for the pass's opening calls, in a training
// step the layer's projections (saturated: infinity), under bench_timing
// nothing for the forward (the bench's barrier) and, for the backward
// (fwd_kernel_t >= 0), the forward's kernel unless the forward's own last
// call came after it (Ulysses' o, lse: the members met there).
PassWork pass_work(const Cluster& c, const AttnConfig& a, int P, const BlockingCollectives& bc, double kernel_t, double fwd_kernel_t) {
  PassWork w;
  w.kernel = cpu_seconds(c, P, kernel_t);
  if (a.bench_timing) {
    bool fwd_meets_after = false;
    for (const Collective& x : bc.fwd) fwd_meets_after = fwd_meets_after || x.after_kernel;
    w.start = fwd_kernel_t < 0 || fwd_meets_after ? 0.0 : cpu_seconds(c, P, fwd_kernel_t);
  }
  return w;
}

// CPU work of a pass beside its kernels (not communication: not exposed comm).
void add_local_work(PassCost& pass, double t) { pass.time += t, pass.compute += t; }

}  // namespace

TileCounts tile_counts(const std::vector<long>& pos, const std::vector<int>& doc, long q_off, long nq, long k_off, long nk,
                       bool causal, long window, bool same_doc, bool pair_by_pair) {
  const kernels::AttnTiles tiles;
  const auto qt = tile_bounds(pos, doc, q_off, nq, tiles.br), kt = tile_bounds(pos, doc, k_off, nk, tiles.bc);
  const BlockWork w = pair_by_pair ? computed_work_pairs(qt, nq, kt, nk, causal, window, same_doc)
                                   : computed_work(qt, nq, kt, nk, causal, window, same_doc);
  return {w.area, w.whole, w.partial, w.skipped};
}

void validate_attention(const AttnConfig& a, const AttnProblem& p, int G) {
  static const std::set<std::string> methods = {"ring", "burst", "loongtrain", "ulysses", "usp", "allgather"};
  BURST_CHECK_CONFIG(methods.count(a.method), "unknown method '", a.method, "' (known: allgather, burst, loongtrain, ring, ulysses, usp)");
  BURST_CHECK_CONFIG(a.ring == "flat" || a.ring == "double" || a.ring == "auto", "--ring '", a.ring, "': expected flat, double or auto");
  BURST_CHECK_CONFIG(a.backward == "burst" || a.backward == "kv" || a.backward == "auto", "--backward '", a.backward,
                     "': expected burst, kv or auto");
  BURST_CHECK_CONFIG(a.placement == "head-first" || a.placement == "ring-first", "--placement '", a.placement,
                     "': expected head-first or ring-first");
  BURST_CHECK_CONFIG(a.usp_inner == "ring" || a.usp_inner == "burst", "--usp-inner '", a.usp_inner, "': expected ring or burst");
  BURST_CHECK_CONFIG(p.P >= 1 && p.P <= kMaxGpus, "--gpus ", p.P, " is out of range: must be in [1, ", kMaxGpus, "]");
  BURST_CHECK_CONFIG(a.window >= 0, "--window ", a.window, " must be >= 0");
  BURST_CHECK_CONFIG(a.window == 0 || a.causal, "a sliding window is causal");
  if (!a.layout.empty() || a.document) {
    BURST_CHECK_CONFIG(a.method == "ring" || a.method == "burst" || a.method == "loongtrain", a.method,
                       ": only the ring methods are modelled on a chosen layout or the document mask (--layout, --mask document)");
    if (!a.layout.empty()) parallel::parse_layout(a.layout);  // Error(Config) naming the known ones
    BURST_CHECK_CONFIG(p.S <= kMaxLayoutSeq, "--seq ", static_cast<long long>(p.S), " tokens with --layout / --mask document: the layout is costed tile by "
                       "tile (memory ~ S, time ~ (S / 64)^2), up to ", kMaxLayoutSeq, " tokens (4M)");
    BURST_CHECK_CONFIG(!a.document || (a.causal && a.window == 0), "the document mask is causal, without a window");
    if (a.document || a.layout == "document") {
      double sum = 0;
      for (long l : a.doc_lengths) {
        BURST_CHECK_CONFIG(l >= 1, "document lengths must be >= 1 (got ", l, ")");
        sum += double(l);
      }
      BURST_CHECK_CONFIG(!a.doc_lengths.empty() && sum == p.S, "the document mask / layout needs --doc-lengths summing to the ",
                         static_cast<long long>(p.S), " tokens (they sum to ", static_cast<long long>(sum), ")");
    }
  }
  BURST_CHECK_CONFIG(p.n >= 1 && p.nkv >= 1 && p.n % p.nkv == 0, p.n, " query heads are not a multiple of ", p.nkv, " kv heads");
  BURST_CHECK_CONFIG(p.S >= 2.0 * p.P, "sequence of ", static_cast<long long>(p.S), " tokens on ", p.P, " GPUs: need at least 2 tokens per GPU (zigzag)");
  BURST_CHECK_CONFIG(p.P <= G || p.P % G == 0, p.P, " GPUs is not a multiple of the node size ", G);
  // --ring double within one node is the engine's one-node ring (pick_shape:
  // the node geometry 1 x P), and methods without a ring do not read it: no
  // rule beyond the whole nodes above (the model refused what the engine ran).
  if (a.method == "ulysses" || a.method == "usp") {
    const int hp = a.method == "ulysses" ? p.P : (a.hp > 0 ? a.hp : std::min(G, p.P));
    BURST_CHECK_CONFIG(p.P % hp == 0, a.method, ": head-parallel size ", hp, " does not divide the ", p.P, " GPUs");
    BURST_CHECK_CONFIG(p.n % hp == 0 && (p.nkv % hp == 0 || hp % p.nkv == 0), a.method, ": head-parallel size ", hp,
                       " must divide the query heads (", p.n, ") and divide or be a multiple of the kv heads (", p.nkv,
                       "; fewer kv heads than ranks are replicated)");
  }
  if (a.method == "loongtrain") {
    const int inner = a.inner > 0 ? a.inner : std::min(G, p.P);
    BURST_CHECK_CONFIG(p.P % inner == 0, "loongtrain: inner ring of ", inner, " ranks does not divide the ", p.P, " GPUs");
  }
}

AttnCost attention_cost(const Cluster& cluster, const AttnConfig& a, const AttnProblem& p) {
  validate_attention(a, p, cluster.gpus_per_node);
  BURST_CHECK_CONFIG(p.P <= cluster.gpus_per_node || cluster.hcas_per_node > 0, cluster.file, ": node.ib_hcas = 0, but ", p.P,
                     " GPUs span more than one node of ", cluster.gpus_per_node, " (no links between nodes)");
  const Cluster c = cluster.shared_by(p.P);
  const int P = p.P, G = c.gpus_per_node;
  const double s = p.S / P, nd = double(p.n) * double(p.d), kvd = double(p.nkv) * double(p.d);
  std::vector<int> world(static_cast<size_t>(P), 0);
  for (int i = 0; i < P; ++i) world[size_t(i)] = i;
  AttnCost out;
  if (a.method == "ring" || a.method == "burst" || a.method == "loongtrain") {
    RingSetup r;
    r.members = world;
    r.shape = a.method == "ring" && a.ring == "auto" ? "flat" : a.ring;  // as the engine's pick_shape
    if (a.method == "loongtrain") {
      const int inner = a.inner > 0 ? a.inner : std::min(G, P);
      r.fixed = {P / inner, inner};
    }
    r.kv_backward = a.method != "burst" || a.backward == "kv" || (a.backward == "auto" && p.n != p.nkv);
    r.partial_bf16 = a.partial_bf16, r.causal = a.causal, r.window = double(a.window), r.t = s, r.nh = p.n, r.nkvh = p.nkv, r.d = p.d;
    if (!a.layout.empty() || a.document) {  // round by round from the engine's layout
      const parallel::LayoutKind kind =
          parallel::parse_layout(!a.layout.empty() ? a.layout : a.window > 0 ? "contiguous" : "zigzag");
      parallel::SeqLayout L = parallel::make_layout(kind, long(p.S), P, a.doc_lengths);
      const parallel::MaskType type = a.document  ? parallel::MaskType::Document
                                      : !a.causal ? parallel::MaskType::Full
                                      : a.window > 0 ? parallel::MaskType::Window
                                                     : parallel::MaskType::Causal;
      if (type != parallel::MaskType::Document) L.travel = L.local;  // whole blocks travel (as plan_layouts)
      r.work = layout_work(L, type, a.window), r.from_layout = true;
      r.travel = double(L.travel), r.t = double(L.local);
    }
    RingResult rr = ring_cost(c, r);
    out.fwd = rr.fwd, out.bwd = rr.bwd, out.half_fwd = rr.half_fwd, out.buffer_bytes = rr.buffers;
    out.describe = a.method + ": " + rr.describe;
    return out;
  }
  if (a.method == "allgather") {
    // Gather K,V (elements) from every rank; local queries against all keys; the
    // backward gathers again and reduce-scatters dK,dV (fp32).
    const double chunk = 2 * s * kvd * c.elem_bytes, Pm1 = P - 1, off = P > G ? double(P - G) : 0.0;
    auto coll = [&](double ch) {
      double t = c.nvlink().time(Pm1 * ch);
      if (off > 0) t = std::max(t, Link{c.ib_latency, c.ib_node_bw()}.time(off * ch));
      return t;
    };
    const double area = visible_area(p.S, a.causal, double(a.window)) / P, f = 4 * area * nd;
    double fwd_k = f / c.attn_rate_fwd(s), bwd_k = 2.5 * f / c.attn_rate_bwd(s);
    // CPU hosts with tile costs: the one kernel call per pass (the rank's
    // queries against all S keys, slots in layout order: zigzag, or
    // contiguous under a window, as the engine's default layouts; the model
    // takes no --layout for this method) priced by its tiles,
    // as the ring rounds of a layout are: whole-tile area at the
    // calibration's causal block rate less that block's diagonal element
    // mask, plus the call's own tile costs. The call has the block's diagonal
    // tiles over P times its area, so its share of masked tiles is smaller.
    if (c.tile_fwd.any() && a.causal && p.S <= kAllGatherTileSeq) {
      const parallel::SeqLayout L =
          parallel::make_layout(a.window > 0 ? parallel::LayoutKind::Contiguous : parallel::LayoutKind::Zigzag, long(p.S), P, {});
      const parallel::MaskType type = a.window > 0 ? parallel::MaskType::Window : parallel::MaskType::Causal;
      const kernels::AttnTiles tiles;
      const std::vector<long> pos = L.mask_positions();
      const std::vector<int> doc = L.mask_docs();
      const auto keys = tile_bounds(pos, doc, 0, long(p.S), tiles.bc);
      const double causal_area = causal_block_area(L.local);
      const BlockTimes block = whole_tile_block(c, double(L.local), nd, double(p.n));
      double tf = 0, tb = 0;  // the busiest rank's call
      for (int r = 0; r < P; ++r) {
        const BlockWork w = computed_work(tile_bounds(pos, doc, long(r) * L.local, L.local, tiles.br), L.local, keys, long(p.S), true,
                                          long(a.window), false);
        tf = std::max(tf, w.area / causal_area * block.fwd + tile_overhead(c.tile_fwd, w, type, double(p.n)));
        tb = std::max(tb, w.area / causal_area * block.bwd + tile_overhead(c.tile_bwd, w, type, double(p.n)));
      }
      fwd_k = tf, bwd_k = tb;
    }
    const double gk = coll(chunk), rs = coll(2 * s * kvd * 4);
    out.fwd.time = gk + fwd_k, out.fwd.compute = fwd_k, out.fwd.a2a_bytes = Pm1 * chunk;
    out.bwd.time = gk + bwd_k + rs, out.bwd.compute = bwd_k, out.bwd.a2a_bytes = Pm1 * (chunk + 2 * s * kvd * 4);
    const double hf = (f / 4) / c.attn_rate_fwd(s / 2) * fwd_k / (f / c.attn_rate_fwd(s));  // as the full pass priced it
    out.half_fwd.time = coll(chunk / 2) + hf, out.half_fwd.compute = hf;
    const double e = c.elem_bytes;
    // CPU hosts: the local memory work around the collectives (fresh gathered
    // K,V; zero-filled dK,dV accumulators), per byte of those buffers.
    if (c.allgather_local > 0) {
      const double gathered = 2 * p.S * kvd * e, acc = 2 * p.S * kvd * 4;
      add_local_work(out.fwd, c.allgather_local * gathered);
      add_local_work(out.bwd, c.allgather_local * (gathered + acc));
      add_local_work(out.half_fwd, c.allgather_local * gathered / 2);
    }
    const BlockingCollectives bc = blocking_collectives(a.method, P, s, p.n, p.nkv, p.d, e);
    // Measured per rank count, the local term holds the follows' waits (the comm-only run it comes from).
    const bool in_local = c.allgather_local_holds_follows();
    PassWork wf = pass_work(c, a, P, bc, fwd_k, -1), wb = pass_work(c, a, P, bc, bwd_k, fwd_k);
    wf.follows_in_local = wb.follows_in_local = in_local;
    add_collective_waits(out.fwd, bc.fwd, P, P, c, wf);
    add_collective_waits(out.bwd, bc.bwd, P, P, c, wb);
    add_collective_waits(out.half_fwd, blocking_collectives(a.method, P, s / 2, p.n, p.nkv, p.d, e).fwd, P, P, c,
                         {std::numeric_limits<double>::infinity(), cpu_seconds(c, P, hf), in_local});
    out.buffer_bytes = 2 * p.S * kvd * e + 2 * p.S * kvd * 4;  // the gathered K,V in the engine's element, the dK,dV accumulators in fp32
    out.describe = "allgather: K,V gathered from " + std::to_string(P) + " ranks, dK,dV reduce-scattered";
    return out;
  }
  // ulysses / usp: all-to-all over hp ranks, then a ring over the cp groups.
  // Fewer kv heads than hp: the engine replicates each kv head to hp / nkv
  // ranks (seq_to_heads with rep, the replicas' gradients summed), i.e. the
  // cost of hp kv heads.
  {
    const int hp = a.method == "ulysses" ? P : (a.hp > 0 ? a.hp : std::min(G, P));
    if (p.nkv < hp) {
      AttnProblem pe = p;
      pe.nkv = hp;
      return attention_cost(cluster, a, pe);
    }
  }
  const int hp = a.method == "ulysses" ? P : (a.hp > 0 ? a.hp : std::min(G, P)), cp = P / hp;
  const bool head_first = a.placement == "head-first";
  std::vector<int> hp_group, cp_group;  // of world rank 0 (h = 0, c = 0)
  for (int h = 0; h < hp; ++h) hp_group.push_back(head_first ? h : h * cp);
  for (int cc = 0; cc < cp; ++cc) cp_group.push_back(head_first ? cc * hp : cc);
  // --ring double as the engine's pick_shape takes it (parallel/methods.cpp):
  // every cp group must hold the same number of ranks on each of its nodes,
  // else its ranks refuse (the model took a flat ring across the nodes).
  if (a.ring == "double" && cp > 1)
    for (int h = 0; h < hp; ++h) {
      std::vector<int> group;
      for (int cc = 0; cc < cp; ++cc) group.push_back(head_first ? cc * hp + h : h * cp + cc);
      bool uniform = false;
      geometry_of(group, G, &uniform);
      BURST_CHECK_CONFIG(uniform, a.method, ": a double ring needs the same number of ranks on every node of the group");
    }
  // q, k, v, O, dO and dQ, dK, dV in the cluster's element (bf16 on the GPU
  // clusters, as the paper's systems send them; the host build's float, as
  // the engine sends q, k, v, dO in its element and O, dQ, dK, dV in fp32,
  // which are the same four bytes there), lse in fp32.
  const double e = c.elem_bytes;
  const double qkv = s * (nd + 2 * kvd) * e, o = s * nd * e + s * double(p.n) * 4;
  const double a2a_fwd = a2a_time(c, hp_group, 0, qkv) + a2a_time(c, hp_group, 0, o);
  const double a2a_bwd = a2a_time(c, hp_group, 0, s * nd * e) + a2a_time(c, hp_group, 0, qkv);
  const double frac = double(hp - 1) / hp;
  RingSetup r;
  r.members = cp_group;
  r.shape = a.ring;
  r.kv_backward = a.usp_inner == "ring" || a.backward == "kv" || (a.backward == "auto" && p.n != p.nkv);
  r.partial_bf16 = a.partial_bf16, r.causal = a.causal, r.window = double(a.window), r.t = s * hp, r.nh = p.n / hp,
  r.nkvh = p.nkv / hp, r.d = p.d;
  RingResult rr;
  if (cp > 1) {
    rr = ring_cost(c, r);
  } else {  // one local attention over the whole sequence with n/P heads
    const double f = 4 * visible_area(p.S, a.causal, double(a.window)) * double(r.nh) * double(p.d);
    rr.fwd.time = rr.fwd.compute = f / c.attn_rate_fwd(p.S);
    rr.bwd.time = rr.bwd.compute = 2.5 * f / c.attn_rate_bwd(p.S);
    rr.half_fwd.time = rr.half_fwd.compute = (f / 4) / c.attn_rate_fwd(p.S / 2);
    rr.buffers = p.S * double(r.nh) * double(p.d) * 4 * 4;  // fp32 o, dq, dk, dv of the head shard
    rr.describe = "local attention over all " + std::to_string(long(p.S)) + " tokens";
  }
  out.fwd = rr.fwd, out.bwd = rr.bwd, out.half_fwd = rr.half_fwd;
  out.fwd.time += a2a_fwd, out.fwd.a2a_bytes = frac * (qkv + o);
  out.bwd.time += a2a_bwd, out.bwd.a2a_bytes = frac * (s * nd * e + qkv);
  out.half_fwd.time += a2a_fwd / 2;
  out.rebuild.time = a2a_fwd, out.rebuild.a2a_bytes = frac * (qkv + o);
  // CPU hosts: the local memory work of seq_to_heads / heads_to_seq (fresh
  // buffers, pack / unpack, MPI's shared-memory copies, the head-layout
  // state), per byte of the local tensors they convert: q, k, v (elements),
  // o, lse (fp32) forward and in a rebuild; dO (element), dq, dk, dv (fp32)
  // backward.
  if (c.a2a_local > 0) {
    const double fwd_b = s * (nd + 2 * kvd) * e + s * nd * 4 + s * double(p.n) * 4, bwd_b = s * nd * e + s * (nd + 2 * kvd) * 4;
    add_local_work(out.fwd, c.a2a_local * fwd_b);
    add_local_work(out.rebuild, c.a2a_local * fwd_b);
    add_local_work(out.bwd, c.a2a_local * bwd_b);
    add_local_work(out.half_fwd, c.a2a_local * fwd_b / 2);
  }
  const BlockingCollectives bc = blocking_collectives(a.method, hp, s, p.n, p.nkv, p.d, e);
  // (USP's head-parallel pairs fit on 2 cores; Ulysses' group of 4 does not)
  add_collective_waits(out.fwd, bc.fwd, P, hp, c, pass_work(c, a, P, bc, rr.fwd.compute, -1));
  add_collective_waits(out.bwd, bc.bwd, P, hp, c, pass_work(c, a, P, bc, rr.bwd.compute, rr.fwd.compute));
  add_collective_waits(out.rebuild, bc.rebuild, P, hp, c, {});
  add_collective_waits(out.half_fwd, blocking_collectives(a.method, hp, s / 2, p.n, p.nkv, p.d, e).fwd, P, hp, c,
                       {std::numeric_limits<double>::infinity(), cpu_seconds(c, P, rr.half_fwd.compute)});
  // Head-layout copies of q, k, v (elements), o and lse (fp32), and one pair of
  // all-to-all send/receive buffers of the largest tensor.
  out.buffer_bytes = rr.buffers + qkv + s * nd * 4 + s * double(p.n) * 4 + 2 * s * nd * 4;
  std::ostringstream os;
  os << a.method << ": all-to-all over " << hp << " (" << a.placement << "), " << (cp > 1 ? "cp " + std::to_string(cp) + ": " : "")
     << rr.describe;
  out.describe = os.str();
  return out;
}

}  // namespace burst::perf

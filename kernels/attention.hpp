// Flash attention on one block pair (portable Kokkos), forward and backward,
// tiled in team scratch with an online softmax. This is the kernel every
// distributed attention method calls once per round.
//
//   Q [sq, n, d], K and V [sk, n_kv, d] (GQA: query head h reads kv head
//   h / (n / n_kv), as Hugging Face's repeat_kv), a mask, a softmax scale.
//   forward  -> O [sq, n, d] and lse [sq, n] in accum_t<T> (fp32 for bf16/
//               float, double for double). A row with no visible key gets
//               lse = -inf and O = 0.
//   backward takes dO, lse and D = rowsum(dO * O) from outside (what
//               BurstAttention moves between ranks) and writes or adds dQ,
//               dK, dV.
// Tiles the mask hides completely are skipped, not computed; both passes
// return how many (query tile, key tile, head) triples they computed.
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"
#include "kernels/attention_tiles.hpp"  // AttnTiles, the tile size, the tile-skipping rule

#include <algorithm>
#include <limits>
#include <type_traits>

namespace burst::kernels {

enum class MaskKind : int {
  None = 0,      // every key visible
  Causal = 1,    // on local indices: key j visible to query i iff j <= i + diag_offset (strictly lower: -1)
  Window = 2,    // on global positions: visible iff 0 <= qpos - kpos < window (causal sliding window)
  Document = 3,  // on global positions and document ids: same document and kpos <= qpos
  General = 4,   // what the distributed methods use, on global positions and document ids:
                 // tokens with document id < 0 are padding (never seen, see nothing);
                 // optional causality (kpos <= qpos), window (qpos - kpos < window) and same-document rules
};

const char* mask_kind_name(MaskKind k);

template <class Mem = DeviceMem> struct AttnMask {
  MaskKind kind = MaskKind::None;
  long diag_offset = 0;
  long window = 0;        // Window: required; General: 0 = no window
  bool is_causal = false; // General only
  bool same_doc = false;  // General only
  Kokkos::View<const long*, Mem> q_pos, k_pos;
  Kokkos::View<const int*, Mem> q_doc, k_doc;

  static AttnMask none() { return AttnMask(); }
  static AttnMask causal(long diag_offset = 0) {
    AttnMask m;
    m.kind = MaskKind::Causal;
    m.diag_offset = diag_offset;
    return m;
  }
  static AttnMask strictly_lower() { return causal(-1); }
  static AttnMask sliding_window(long window, Kokkos::View<const long*, Mem> qp, Kokkos::View<const long*, Mem> kp) {
    AttnMask m;
    m.kind = MaskKind::Window;
    m.window = window;
    m.q_pos = qp;
    m.k_pos = kp;
    return m;
  }
  static AttnMask document(Kokkos::View<const int*, Mem> qd, Kokkos::View<const int*, Mem> kd,
                           Kokkos::View<const long*, Mem> qp, Kokkos::View<const long*, Mem> kp) {
    AttnMask m;
    m.kind = MaskKind::Document;
    m.q_doc = qd;
    m.k_doc = kd;
    m.q_pos = qp;
    m.k_pos = kp;
    return m;
  }

  static AttnMask general(bool causal, long window, bool same_doc, Kokkos::View<const int*, Mem> qd,
                          Kokkos::View<const int*, Mem> kd, Kokkos::View<const long*, Mem> qp,
                          Kokkos::View<const long*, Mem> kp) {
    AttnMask m = document(qd, kd, qp, kp);
    m.kind = MaskKind::General;
    m.is_causal = causal;
    m.window = window;
    m.same_doc = same_doc;
    return m;
  }

  KOKKOS_INLINE_FUNCTION bool visible(long i, long j) const {
    switch (kind) {
      case MaskKind::None: return true;
      case MaskKind::Causal: return j <= i + diag_offset;
      case MaskKind::Window: {
        const long dist = q_pos(i) - k_pos(j);
        return dist >= 0 && dist < window;
      }
      case MaskKind::Document: return q_doc(i) == k_doc(j) && k_pos(j) <= q_pos(i);
      case MaskKind::General: {
        const int qd = q_doc(i), kd = k_doc(j);
        if (qd < 0 || kd < 0 || (same_doc && qd != kd)) return false;
        const long dist = q_pos(i) - k_pos(j);
        return (!is_causal || dist >= 0) && (window <= 0 || dist < window);
      }
    }
    return true;
  }

  // The range of query positions in [i0, i1) and key positions in [j0, j1).
  KOKKOS_INLINE_FUNCTION void pos_bounds(long i0, long i1, long j0, long j1, long& qmin, long& qmax, long& kmin,
                                         long& kmax) const {
    qmin = qmax = q_pos(i0), kmin = kmax = k_pos(j0);
    for (long i = i0 + 1; i < i1; ++i) qmin = q_pos(i) < qmin ? q_pos(i) : qmin, qmax = q_pos(i) > qmax ? q_pos(i) : qmax;
    for (long j = j0 + 1; j < j1; ++j) kmin = k_pos(j) < kmin ? k_pos(j) : kmin, kmax = k_pos(j) > kmax ? k_pos(j) : kmax;
  }

  // Could any query in [i0, i1) see any key in [j0, j1)? Exact for None and
  // Causal; for the position masks a bound from each tile's min/max (a tile
  // it lets through may still be empty; one it rejects is empty for sure).
  KOKKOS_INLINE_FUNCTION bool tile_visible(long i0, long i1, long j0, long j1) const {
    switch (kind) {
      case MaskKind::None: return true;
      case MaskKind::Causal: return j0 <= (i1 - 1) + diag_offset;
      case MaskKind::Window:
      case MaskKind::Document: {
        long qmin, qmax, kmin, kmax;
        pos_bounds(i0, i1, j0, j1, qmin, qmax, kmin, kmax);
        if (kmin > qmax) return false;  // every key after every query
        if (kind == MaskKind::Window) return qmin - kmax < window;
        int qd0 = q_doc(i0), qd1 = q_doc(i0), kd0 = k_doc(j0), kd1 = k_doc(j0);
        for (long i = i0 + 1; i < i1; ++i) qd0 = q_doc(i) < qd0 ? q_doc(i) : qd0, qd1 = q_doc(i) > qd1 ? q_doc(i) : qd1;
        for (long j = j0 + 1; j < j1; ++j) kd0 = k_doc(j) < kd0 ? k_doc(j) : kd0, kd1 = k_doc(j) > kd1 ? k_doc(j) : kd1;
        return (qd0 > kd0 ? qd0 : kd0) <= (qd1 < kd1 ? qd1 : kd1);  // document-id ranges overlap
      }
      case MaskKind::General: return general_tile_visible(i0, i1, j0, j1);
    }
    return true;
  }

  // Does every query in [i0, i1) see every key in [j0, j1)? Exact (true only
  // when it holds), so a kernel may skip the per-element mask on such tiles.
  KOKKOS_INLINE_FUNCTION bool tile_all_visible(long i0, long i1, long j0, long j1) const {
    switch (kind) {
      case MaskKind::None: return true;
      case MaskKind::Causal: return (j1 - 1) <= i0 + diag_offset;
      case MaskKind::General: {  // the rule the performance model counts with (kernels/attention_tiles.hpp)
        SpanBounds qb, kb;
        for (long i = i0; i < i1; ++i) qb.add(q_pos(i), q_doc(i));
        for (long j = j0; j < j1; ++j) kb.add(k_pos(j), k_doc(j));
        return spans_all_see(qb, kb, is_causal, window, same_doc);
      }
      default: break;
    }
    long qmin, qmax, kmin, kmax;
    pos_bounds(i0, i1, j0, j1, qmin, qmax, kmin, kmax);
    if (kind == MaskKind::Window) return kmax <= qmin && qmax - kmin < window;
    // Document: one document id on both sides. General: no padding (ids >= 0)
    // and, under same_doc, one id.
    const bool one_doc = kind == MaskKind::Document || same_doc;
    const int doc = q_doc(i0);
    for (long i = i0; i < i1; ++i)
      if (q_doc(i) < 0 || (one_doc && q_doc(i) != doc)) return false;
    for (long j = j0; j < j1; ++j)
      if (k_doc(j) < 0 || (one_doc && k_doc(j) != doc)) return false;
    if (kind == MaskKind::Document) return kmax <= qmin;
    return (!is_causal || kmax <= qmin) && (window <= 0 || qmax - kmin < window);
  }

  // Bounds over the non-padding tokens of each tile, then the rule the rings
  // and the performance model share (kernels/attention_tiles.hpp).
  KOKKOS_INLINE_FUNCTION bool general_tile_visible(long i0, long i1, long j0, long j1) const {
    SpanBounds qb, kb;
    for (long i = i0; i < i1; ++i) qb.add(q_pos(i), q_doc(i));
    if (!qb.any) return false;
    for (long j = j0; j < j1; ++j) kb.add(k_pos(j), k_doc(j));
    return spans_may_see(qb, kb, is_causal, window, same_doc);
  }
};

// Which backward outputs are added into rather than overwritten. A plain bool
// means both.
struct BackwardAccumulate {
  bool dq = false, dkdv = false;
  BackwardAccumulate() = default;
  BackwardAccumulate(bool both) : dq(both), dkdv(both) {}  // NOLINT: implicit on purpose
  BackwardAccumulate(bool q, bool kv) : dq(q), dkdv(kv) {}
};

namespace impl {

template <class Acc> KOKKOS_INLINE_FUNCTION Acc neg_inf() { return -std::numeric_limits<Acc>::infinity(); }

// Scratch level: level 0 (fast, small on GPUs) when it fits, else level 1.
inline int scratch_level(size_t bytes, bool host) { return (host || bytes <= 48 * 1024) ? 0 : 1; }

template <class Acc, class Exec> using Scratch = Kokkos::View<Acc*, typename Exec::scratch_memory_space, Kokkos::MemoryUnmanaged>;

// Copy rows [row0, row0 + rows) of head `head` of two [s, heads, d] views
// into two team-scratch tiles, converting to the accumulation type.
template <class Member, class S, class V>
KOKKOS_INLINE_FUNCTION void load_tiles(const Member& t, const S& a, const V& va, const S& b, const V& vb, long row0,
                                       long rows, long head, long d) {
  using Acc = typename S::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows * d), [&](const long x) {
    a(x) = Acc(va(row0 + x / d, head, x % d));
    b(x) = Acc(vb(row0 + x / d, head, x % d));
  });
}

// The backward's per-pair weights for query row r and key row c of the
// tiles: p = exp(scale q.k - lse) and ds = p (dO.v - D).
template <class S, class Acc>
KOKKOS_INLINE_FUNCTION void backward_pair(const S& Qs, const S& dOs, long r, const S& Ks, const S& Vs, long c, long d,
                                          Acc scale, Acc lse_r, Acc D_r, Acc& p, Acc& ds) {
  Acc s = 0, dp = 0;
  for (long e = 0; e < d; ++e) s += Qs(r * d + e) * Ks(c * d + e), dp += dOs(r * d + e) * Vs(c * d + e);
  p = kx::exp(s * scale - lse_r);
  ds = p * (dp - D_r);
}

template <class QV, class KV, class MaskT>
void check_attention_shapes(const QV& q, const KV& k, const KV& v, const MaskT& mask) {
  BURST_CHECK_INPUT(q.extent(2) == k.extent(2) && k.extent(2) == v.extent(2), "attention: head dims differ: Q ",
                    q.extent(2), ", K ", k.extent(2), ", V ", v.extent(2));
  BURST_CHECK_INPUT(k.extent(0) == v.extent(0) && k.extent(1) == v.extent(1), "attention: K is [", k.extent(0), ", ",
                    k.extent(1), ", d] but V is [", v.extent(0), ", ", v.extent(1), ", d]");
  BURST_CHECK_INPUT(k.extent(1) >= 1 && q.extent(1) % k.extent(1) == 0, "attention: ", q.extent(1),
                    " query heads are not a multiple of ", k.extent(1), " key/value heads");
  if (mask.kind == MaskKind::Window) BURST_CHECK_INPUT(mask.window >= 1, "attention: window = ", mask.window, " must be >= 1");
  if (mask.kind == MaskKind::Window || mask.kind == MaskKind::Document || mask.kind == MaskKind::General) {
    BURST_CHECK_INPUT(mask.q_pos.extent(0) == q.extent(0) && mask.k_pos.extent(0) == k.extent(0),
                      "attention: mask positions have ", mask.q_pos.extent(0), " query and ", mask.k_pos.extent(0),
                      " key entries, expected ", q.extent(0), " and ", k.extent(0));
  }
  if (mask.kind == MaskKind::Document || mask.kind == MaskKind::General) {
    BURST_CHECK_INPUT(mask.q_doc.extent(0) == q.extent(0) && mask.k_doc.extent(0) == k.extent(0),
                      "attention: document ids have ", mask.q_doc.extent(0), " query and ", mask.k_doc.extent(0),
                      " key entries, expected ", q.extent(0), " and ", k.extent(0));
  }
}

// ---------------------------------------------------------------- forward
template <class T, class Acc, class Exec, class Mem> struct FlashForward {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;
  using S = Scratch<Acc, Exec>;
  Kokkos::View<const T***, Layout, Mem> q, k, v;
  Kokkos::View<Acc***, Layout, Mem> o;
  Kokkos::View<Acc**, Layout, Mem> lse;
  AttnMask<Mem> mask;
  Acc scale;
  long sq, sk, n, d, br, bc, group, qtiles;
  int level;

  static size_t scratch_bytes(long br, long bc, long d) {
    return S::shmem_size(br * d) * 2 + S::shmem_size(bc * d) * 2 + S::shmem_size(br * bc) + S::shmem_size(br) * 2;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& t, long& computed) const {
    const long h = t.league_rank() % n, tile = t.league_rank() / n, hk = h / group;
    const long i0 = tile * br, i1 = (i0 + br < sq) ? i0 + br : sq, rows = i1 - i0;
    S Qs(t.team_scratch(level), br * d), Os(t.team_scratch(level), br * d), Ks(t.team_scratch(level), bc * d),
        Vs(t.team_scratch(level), bc * d), Ss(t.team_scratch(level), br * bc), m(t.team_scratch(level), br),
        l(t.team_scratch(level), br);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows * d), [&](const long x) {
      Qs(x) = Acc(q(i0 + x / d, h, x % d));
      Os(x) = 0;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](const long r) {
      m(r) = neg_inf<Acc>();
      l(r) = 0;
    });
    for (long j0 = 0; j0 < sk; j0 += bc) {
      const long j1 = (j0 + bc < sk) ? j0 + bc : sk, cols = j1 - j0;
      if (!mask.tile_visible(i0, i1, j0, j1)) continue;  // the same answer on every thread of the team
      if (t.team_rank() == 0) computed += 1;
      t.team_barrier();
      load_tiles(t, Ks, k, Vs, v, j0, cols, hk, d);
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](const long r) {
        const long i = i0 + r;
        Acc mx = neg_inf<Acc>();
        for (long c = 0; c < cols; ++c) {
          Acc s = neg_inf<Acc>();
          if (mask.visible(i, j0 + c)) {
            Acc dot = 0;
            for (long e = 0; e < d; ++e) dot += Qs(r * d + e) * Ks(c * d + e);
            s = dot * scale;
          }
          Ss(r * bc + c) = s;
          mx = s > mx ? s : mx;
        }
        if (mx == neg_inf<Acc>()) return;  // nothing visible in this tile for this row
        const Acc mold = m(r), mnew = mold > mx ? mold : mx;
        const Acc alpha = kx::exp(mold - mnew);  // 0 when mold = -inf
        Acc lsum = 0;
        for (long c = 0; c < cols; ++c) {
          const Acc p = kx::exp(Ss(r * bc + c) - mnew);
          Ss(r * bc + c) = p;
          lsum += p;
        }
        l(r) = l(r) * alpha + lsum;
        m(r) = mnew;
        for (long e = 0; e < d; ++e) {
          Acc acc = Os(r * d + e) * alpha;
          for (long c = 0; c < cols; ++c) acc += Ss(r * bc + c) * Vs(c * d + e);
          Os(r * d + e) = acc;
        }
      });
    }
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](const long r) {
      const long i = i0 + r;
      const bool empty = l(r) == Acc(0);
      lse(i, h) = empty ? neg_inf<Acc>() : m(r) + kx::log(l(r));
      const Acc inv = empty ? Acc(0) : Acc(1) / l(r);
      for (long e = 0; e < d; ++e) o(i, h, e) = Os(r * d + e) * inv;
    });
  }
};

// --------------------------------------------------------- backward: dK, dV
// One team per (key tile, kv head); loops over the query heads of its group
// and over query tiles, so dK and dV need no atomics.
template <class T, class Acc, class Exec, class Mem> struct FlashBackwardKV {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;
  using S = Scratch<Acc, Exec>;
  Kokkos::View<const T***, Layout, Mem> q, k, v, dout;
  Kokkos::View<const Acc**, Layout, Mem> lse, D;
  Kokkos::View<Acc***, Layout, Mem> dk, dv;
  AttnMask<Mem> mask;
  Acc scale;
  long sq, sk, n, nkv, d, br, bc, group;
  bool accumulate;
  int level;

  static size_t scratch_bytes(long br, long bc, long d) {
    return S::shmem_size(bc * d) * 4 + S::shmem_size(br * d) * 2 + S::shmem_size(br) * 2;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& t, long& computed) const {
    const long hk = t.league_rank() % nkv, tile = t.league_rank() / nkv;
    const long j0 = tile * bc, j1 = (j0 + bc < sk) ? j0 + bc : sk, cols = j1 - j0;
    S Ks(t.team_scratch(level), bc * d), Vs(t.team_scratch(level), bc * d), dKs(t.team_scratch(level), bc * d),
        dVs(t.team_scratch(level), bc * d), Qs(t.team_scratch(level), br * d), dOs(t.team_scratch(level), br * d),
        Ls(t.team_scratch(level), br), Ds(t.team_scratch(level), br);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, cols * d), [&](const long x) {
      Ks(x) = Acc(k(j0 + x / d, hk, x % d));
      Vs(x) = Acc(v(j0 + x / d, hk, x % d));
      dKs(x) = 0;
      dVs(x) = 0;
    });
    for (long g = 0; g < group; ++g) {
      const long h = hk * group + g;
      for (long i0 = 0; i0 < sq; i0 += br) {
        const long i1 = (i0 + br < sq) ? i0 + br : sq, rows = i1 - i0;
        if (!mask.tile_visible(i0, i1, j0, j1)) continue;
        if (t.team_rank() == 0) computed += 1;
        t.team_barrier();
        load_tiles(t, Qs, q, dOs, dout, i0, rows, h, d);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](const long r) {
          Ls(r) = lse(i0 + r, h);
          Ds(r) = D(i0 + r, h);
        });
        t.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, cols), [&](const long c) {
          const long j = j0 + c;
          for (long r = 0; r < rows; ++r) {
            if (!mask.visible(i0 + r, j) || Ls(r) == neg_inf<Acc>()) continue;
            Acc p, ds;
            backward_pair(Qs, dOs, r, Ks, Vs, c, d, scale, Ls(r), Ds(r), p, ds);
            for (long e = 0; e < d; ++e) {
              dVs(c * d + e) += p * dOs(r * d + e);
              dKs(c * d + e) += scale * ds * Qs(r * d + e);
            }
          }
        });
      }
    }
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, cols * d), [&](const long x) {
      const long j = j0 + x / d, e = x % d;
      if (accumulate) {
        dk(j, hk, e) += dKs(x);
        dv(j, hk, e) += dVs(x);
      } else {
        dk(j, hk, e) = dKs(x);
        dv(j, hk, e) = dVs(x);
      }
    });
  }
};

// ------------------------------------------------------------ backward: dQ
template <class T, class Acc, class Exec, class Mem> struct FlashBackwardQ {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;
  using S = Scratch<Acc, Exec>;
  Kokkos::View<const T***, Layout, Mem> q, k, v, dout;
  Kokkos::View<const Acc**, Layout, Mem> lse, D;
  Kokkos::View<Acc***, Layout, Mem> dq;
  AttnMask<Mem> mask;
  Acc scale;
  long sq, sk, n, d, br, bc, group;
  bool accumulate;
  int level;

  static size_t scratch_bytes(long br, long bc, long d) {
    return S::shmem_size(br * d) * 3 + S::shmem_size(bc * d) * 2 + S::shmem_size(br) * 2;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& t, long& computed) const {
    const long h = t.league_rank() % n, tile = t.league_rank() / n, hk = h / group;
    const long i0 = tile * br, i1 = (i0 + br < sq) ? i0 + br : sq, rows = i1 - i0;
    S Qs(t.team_scratch(level), br * d), dOs(t.team_scratch(level), br * d), dQs(t.team_scratch(level), br * d),
        Ks(t.team_scratch(level), bc * d), Vs(t.team_scratch(level), bc * d), Ls(t.team_scratch(level), br),
        Ds(t.team_scratch(level), br);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows * d), [&](const long x) {
      Qs(x) = Acc(q(i0 + x / d, h, x % d));
      dOs(x) = Acc(dout(i0 + x / d, h, x % d));
      dQs(x) = 0;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](const long r) {
      Ls(r) = lse(i0 + r, h);
      Ds(r) = D(i0 + r, h);
    });
    for (long j0 = 0; j0 < sk; j0 += bc) {
      const long j1 = (j0 + bc < sk) ? j0 + bc : sk, cols = j1 - j0;
      if (!mask.tile_visible(i0, i1, j0, j1)) continue;
      if (t.team_rank() == 0) computed += 1;
      t.team_barrier();
      load_tiles(t, Ks, k, Vs, v, j0, cols, hk, d);
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](const long r) {
        const long i = i0 + r;
        if (Ls(r) == neg_inf<Acc>()) return;
        for (long c = 0; c < cols; ++c) {
          if (!mask.visible(i, j0 + c)) continue;
          Acc p, ds;
          backward_pair(Qs, dOs, r, Ks, Vs, c, d, scale, Ls(r), Ds(r), p, ds);
          for (long e = 0; e < d; ++e) dQs(r * d + e) += scale * ds * Ks(c * d + e);
        }
      });
    }
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows * d), [&](const long x) {
      const long i = i0 + x / d, e = x % d;
      if (accumulate) dq(i, h, e) += dQs(x);
      else dq(i, h, e) = dQs(x);
    });
  }
};

template <class Functor, class Exec> long launch_tiles(const char* name, Functor f, long league, long team, size_t bytes) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  long computed = 0;
  Kokkos::parallel_reduce(name, Policy(league, team).set_scratch_size(f.level, Kokkos::PerTeam(bytes)), f, computed);
  return computed;
}

// The number of (query tile, key tile, head) triples the portable kernel
// computes with `tiles`: n x the tile pairs tile_visible lets through. None
// and Causal in closed form on the host (no device work, no wait); the
// position masks read positions and document ids, so they take a reduction
// on Exec and wait for it (as the portable kernel's own count does). The CUDA
// path returns this, so both backends report the same work for the same call.
template <class Exec, class Mem>
long count_visible_tiles(const AttnMask<Mem>& mask, long sq, long sk, long n, AttnTiles tiles);

// Its reduction as a named functor (an ordinary type, the same in every
// translation unit) rather than a KOKKOS_LAMBDA. On the CUDA build this is
// instantiated in several translation units (the model, the rings, the
// benchmarks) and, at run time, reached only by the bf16 tensor-core dispatch
// with a position mask; with the lambda, bf16 distributed attention at head
// dim 64 (the rings' masks are all position masks) jumped to address 0 on
// the host (2026-12-04, experiments/peers/diag_bf16_dist.sh) while the
// one-TU kernel test passed: the lambda is the suspect, see NOTES.md.
template <class Mem> struct CountVisibleTiles {
  AttnMask<Mem> m;
  long sq, sk, br, bc, kt;
  KOKKOS_INLINE_FUNCTION void operator()(const long x, long& acc) const {
    const long i0 = (x / kt) * br, j0 = (x % kt) * bc;
    const long i1 = i0 + br < sq ? i0 + br : sq, j1 = j0 + bc < sk ? j0 + bc : sk;
    if (m.tile_visible(i0, i1, j0, j1)) acc += 1;
  }
};

template <class Exec, class Mem>
long count_visible_tiles(const AttnMask<Mem>& mask, long sq, long sk, long n, AttnTiles tiles) {
  if (sq <= 0 || sk <= 0 || n <= 0) return 0;
  const long br = tiles.br, bc = tiles.bc, qt = (sq + br - 1) / br, kt = (sk + bc - 1) / bc;
  if (mask.kind == MaskKind::None) return qt * kt * n;
  if (mask.kind == MaskKind::Causal) {
    long pairs = 0;
    for (long t = 0; t < qt; ++t) {
      const long last = std::min((t + 1) * br, sq) - 1 + mask.diag_offset;  // the last key the tile's rows may see
      if (last >= 0) pairs += std::min(kt, last / bc + 1);
    }
    return pairs * n;
  }
  long pairs = 0;
  Kokkos::parallel_reduce("burst::attention_count_tiles", Kokkos::RangePolicy<Exec>(0, qt * kt),
                          CountVisibleTiles<Mem>{mask, sq, sk, br, bc, kt}, pairs);
  return pairs * n;
}

}  // namespace impl

}  // namespace burst::kernels

#include "kernels/attention_host.hpp"  // the CPU versions (impl::Host*)

#ifdef BURST_HAVE_CUDA
#define BURST_ATTENTION_HPP_INCLUDES_CUDA
#include "kernels/cuda/attention_cuda.hpp"  // the CUDA kernels for bf16 device views (the tpl layer)
#undef BURST_ATTENTION_HPP_INCLUDES_CUDA
#endif

namespace burst::kernels {

// Forward. Returns the number of (query tile, key tile, head) triples computed.
// On CUDA builds, bf16 views in CUDA memory with head dim 64 or 128 go to the
// tensor-core kernels of kernels/cuda/ (asynchronous on the default
// execution space's stream; the count is then the portable kernel's for the
// same call, see impl::count_visible_tiles, or -1 when tiles.count is false:
// AttnTiles::uncounted(), so that a position mask's count does not make the
// host wait); everything else runs the portable kernel below, which stays
// the reference.
template <class T, class Mem>
long flash_attention_forward(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                             Kokkos::View<const T***, Layout, Mem> v, const AttnMask<Mem>& mask, accum_t<T> scale,
                             Kokkos::View<accum_t<T>***, Layout, Mem> o, Kokkos::View<accum_t<T>**, Layout, Mem> lse,
                             AttnTiles tiles = {}) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<Acc***, Layout, Mem>::execution_space;
  impl::check_attention_shapes(q, k, v, mask);
  BURST_CHECK_INPUT(o.extent(0) == q.extent(0) && o.extent(1) == q.extent(1) && o.extent(2) == q.extent(2),
                    "attention forward: O is [", o.extent(0), ", ", o.extent(1), ", ", o.extent(2), "], expected Q's shape [",
                    q.extent(0), ", ", q.extent(1), ", ", q.extent(2), "]");
  BURST_CHECK_INPUT(lse.extent(0) == q.extent(0) && lse.extent(1) == q.extent(1), "attention forward: lse is [",
                    lse.extent(0), ", ", lse.extent(1), "], expected [", q.extent(0), ", ", q.extent(1), "]");
  BURST_CHECK_INPUT(tiles.br >= 1 && tiles.bc >= 1, "attention: tile sizes must be >= 1");
  const long sq = q.extent(0), n = q.extent(1), d = q.extent(2), sk = k.extent(0), nkv = k.extent(1);
  if (sq == 0 || n == 0) return 0;
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::dispatches<T, Mem>()) {
    if (cuda::flash_usable(q, k, v, scale, o, lse)) return cuda::flash_forward(q, k, v, mask, scale, o, lse, tiles);
  }
#endif
  constexpr bool host = is_host_exec<Exec>();
  if constexpr (host) {
    const long group = n / nkv;
    return impl::host_launch<impl::HostFlashForward, T, Acc, Exec, Mem>(
        "burst::flash_attention_forward_host", d, ((sq + tiles.br - 1) / tiles.br) * n, tiles.br, tiles.bc, [&](auto f) {
          f.q = q, f.k = k, f.v = v, f.o = o, f.lse = lse, f.mask = mask, f.scale = scale;
          f.sq = sq, f.sk = sk, f.n = n, f.d = d, f.br = tiles.br, f.bc = tiles.bc, f.group = group;
          return f;
        });
  }
  using F = impl::FlashForward<T, Acc, Exec, Mem>;
  const size_t bytes = F::scratch_bytes(tiles.br, tiles.bc, d);
  const long qtiles = (sq + tiles.br - 1) / tiles.br;
  F f{q, k, v, o, lse, mask, scale, sq, sk, n, d, tiles.br, tiles.bc, n / nkv, qtiles, impl::scratch_level(bytes, host)};
  return impl::launch_tiles<F, Exec>("burst::flash_attention_forward", f, qtiles * n, host ? 1 : tiles.br, bytes);
}

// Backward. dq [sq, n, d], dk and dv [sk, n_kv, d] in Acc; `accumulate`
// adds into them instead of overwriting (BackwardAccumulate sets dQ and
// dK/dV apart: the rings add into one and overwrite the other). Returns the triples computed by the
// dK/dV pass (the dQ pass visits the same set). The CUDA kernels (same
// dispatch as the forward) add dQ with fp32 atomics, so their dQ is not
// bitwise deterministic run to run; dK and dV are.
template <class T, class Mem>
long flash_attention_backward(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                              Kokkos::View<const T***, Layout, Mem> v, Kokkos::View<const T***, Layout, Mem> dout,
                              Kokkos::View<const accum_t<T>**, Layout, Mem> lse, Kokkos::View<const accum_t<T>**, Layout, Mem> D,
                              const AttnMask<Mem>& mask, accum_t<T> scale, Kokkos::View<accum_t<T>***, Layout, Mem> dq,
                              Kokkos::View<accum_t<T>***, Layout, Mem> dk, Kokkos::View<accum_t<T>***, Layout, Mem> dv,
                              BackwardAccumulate accumulate = {}, AttnTiles tiles = {}) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<Acc***, Layout, Mem>::execution_space;
  impl::check_attention_shapes(q, k, v, mask);
  const long sq = q.extent(0), n = q.extent(1), d = q.extent(2), sk = k.extent(0), nkv = k.extent(1);
  BURST_CHECK_INPUT(dout.extent(0) == size_t(sq) && dout.extent(1) == size_t(n) && dout.extent(2) == size_t(d),
                    "attention backward: dO must have Q's shape");
  BURST_CHECK_INPUT(lse.extent(0) == size_t(sq) && lse.extent(1) == size_t(n) && D.extent(0) == size_t(sq) &&
                        D.extent(1) == size_t(n),
                    "attention backward: lse and D must be [", sq, ", ", n, "]");
  BURST_CHECK_INPUT(dq.extent(0) == size_t(sq) && dq.extent(1) == size_t(n) && dq.extent(2) == size_t(d),
                    "attention backward: dQ must have Q's shape");
  BURST_CHECK_INPUT(dk.extent(0) == size_t(sk) && dk.extent(1) == size_t(nkv) && dk.extent(2) == size_t(d) &&
                        dv.extent(0) == size_t(sk) && dv.extent(1) == size_t(nkv) && dv.extent(2) == size_t(d),
                    "attention backward: dK and dV must have K's shape");
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::dispatches<T, Mem>()) {
    if (cuda::flash_usable(q, k, v, scale, dq, dk, dv, dout, lse, D))
      return cuda::flash_backward(q, k, v, dout, lse, D, mask, scale, dq, dk, dv, accumulate, tiles);
  }
#endif
  constexpr bool host = is_host_exec<Exec>();
  long computed = 0;
  if constexpr (host) {
    const long group = n / nkv;
    if (sk > 0 && nkv > 0)
      computed = impl::host_launch<impl::HostFlashBackwardKV, T, Acc, Exec, Mem>(
          "burst::flash_attention_backward_dkdv_host", d, ((sk + tiles.bc - 1) / tiles.bc) * nkv, tiles.br, tiles.bc,
          [&](auto f) {
            f.q = q, f.k = k, f.v = v, f.dout = dout, f.lse = lse, f.D = D, f.dk = dk, f.dv = dv, f.mask = mask;
            f.scale = scale, f.sq = sq, f.sk = sk, f.n = n, f.nkv = nkv, f.d = d, f.br = tiles.br, f.bc = tiles.bc;
            f.group = group, f.accumulate = accumulate.dkdv;
            return f;
          });
    if (sq > 0 && n > 0)
      impl::host_launch<impl::HostFlashBackwardQ, T, Acc, Exec, Mem>(
          "burst::flash_attention_backward_dq_host", d, ((sq + tiles.br - 1) / tiles.br) * n, tiles.br, tiles.bc,
          [&](auto f) {
            f.q = q, f.k = k, f.v = v, f.dout = dout, f.lse = lse, f.D = D, f.dq = dq, f.mask = mask, f.scale = scale;
            f.sq = sq, f.sk = sk, f.n = n, f.d = d, f.br = tiles.br, f.bc = tiles.bc, f.group = group;
            f.accumulate = accumulate.dq;
            return f;
          });
    return computed;
  }
  if (sk > 0 && nkv > 0) {
    using F = impl::FlashBackwardKV<T, Acc, Exec, Mem>;
    const size_t bytes = F::scratch_bytes(tiles.br, tiles.bc, d);
    F f{q, k, v, dout, lse, D, dk, dv, mask, scale, sq, sk, n, nkv, d, tiles.br, tiles.bc, n / nkv, accumulate.dkdv,
        impl::scratch_level(bytes, host)};
    computed = impl::launch_tiles<F, Exec>("burst::flash_attention_backward_dkdv", f, ((sk + tiles.bc - 1) / tiles.bc) * nkv,
                                           host ? 1 : tiles.bc, bytes);
  }
  if (sq > 0 && n > 0) {
    using F = impl::FlashBackwardQ<T, Acc, Exec, Mem>;
    const size_t bytes = F::scratch_bytes(tiles.br, tiles.bc, d);
    F f{q, k, v, dout, lse, D, dq, mask, scale, sq, sk, n, d, tiles.br, tiles.bc, n / nkv, accumulate.dq,
        impl::scratch_level(bytes, host)};
    impl::launch_tiles<F, Exec>("burst::flash_attention_backward_dq", f, ((sq + tiles.br - 1) / tiles.br) * n,
                                host ? 1 : tiles.br, bytes);
  }
  return computed;
}

// D = rowsum(dO * O) per (row, head), in Acc: what the backward needs from
// the forward's output, computed once locally. O in the accumulation type or
// in the storage type TO = T (the layers hold O in T: bf16 for bf16, as
// FlashAttention computes D from its own bf16 O).
namespace impl {
template <class X> struct no_deduce { using type = X; };  // (std::type_identity, C++20)
}
template <class T, class Mem, class TO = accum_t<T>>
void attention_backward_rowsum(Kokkos::View<const T***, Layout, Mem> dout,
                               Kokkos::View<const typename impl::no_deduce<TO>::type***, Layout, Mem> o,
                               Kokkos::View<accum_t<T>**, Layout, Mem> D) {
  using Acc = accum_t<T>;
  static_assert(std::is_same<TO, T>::value || std::is_same<TO, Acc>::value,
                "attention rowsum: O in the storage or the accumulation type");
  using Exec = typename Kokkos::View<Acc**, Layout, Mem>::execution_space;
  BURST_CHECK_INPUT(dout.extent(0) == o.extent(0) && dout.extent(1) == o.extent(1) && dout.extent(2) == o.extent(2) &&
                        D.extent(0) == o.extent(0) && D.extent(1) == o.extent(1),
                    "attention rowsum: dO, O and D shapes disagree");
  const long n = o.extent(1), d = o.extent(2);
#ifdef BURST_HAVE_CUDA
  // bf16 dO, fp32 or bf16 O and fp32 D in CUDA memory: one warp per (row,
  // head) row (coalesced), not the portable thread per row striding by d.
  if constexpr (cuda::dispatches<T, Mem>()) {
    // (It reads pairs: d even, dO 4-byte and O 4-byte (bf16) or 8-byte (fp32) aligned.)
    if (d % 2 == 0 && cuda::contiguous_aligned(dout, 4) && cuda::contiguous_aligned(o, 2 * sizeof(TO)) &&
        D.span_is_contiguous() && cuda::fits_int(long(o.extent(0)) * n) && cuda::fits_int(d)) {
      const auto* op = [&] {
        if constexpr (std::is_same<TO, Acc>::value) return o.data();
        else return cuda::nv(o.data());
      }();
      cuda::check(fa::flash_rowsum(int(o.extent(0)), int(n), int(d), cuda::nv(dout.data()), op, D.data(),
                                   Kokkos::Cuda().cuda_stream()),
                  "attention rowsum (kernels/cuda)");
      return;
    }
  }
#endif
  Kokkos::parallel_for(
      "burst::attention_backward_rowsum", Kokkos::RangePolicy<Exec>(0, long(o.extent(0)) * n), KOKKOS_LAMBDA(const long x) {
        const long i = x / n, h = x % n;
        Acc s = 0;
        for (long e = 0; e < d; ++e) s += Acc(dout(i, h, e)) * Acc(o(i, h, e));
        D(i, h) = s;
      });
}

namespace impl {
// lse_merge's portable kernel: a thread per (row, head) walking its d values.
template <class Acc, class Mem>
void lse_merge_portable(Kokkos::View<Acc***, Layout, Mem> o, Kokkos::View<Acc**, Layout, Mem> lse,
                        Kokkos::View<const Acc***, Layout, Mem> ob, Kokkos::View<const Acc**, Layout, Mem> lseb) {
  using Exec = typename Kokkos::View<Acc**, Layout, Mem>::execution_space;
  const long n = o.extent(1), d = o.extent(2);
  Kokkos::parallel_for(
      "burst::lse_merge", Kokkos::RangePolicy<Exec>(0, long(o.extent(0)) * n), KOKKOS_LAMBDA(const long x) {
        const long i = x / n, h = x % n;
        const Acc a = lse(i, h), b = lseb(i, h);
        if (b == impl::neg_inf<Acc>()) return;  // nothing new
        if (a == impl::neg_inf<Acc>()) {        // nothing yet: take the block's result
          lse(i, h) = b;
          for (long e = 0; e < d; ++e) o(i, h, e) = ob(i, h, e);
          return;
        }
        const Acc mx = a > b ? a : b, mn = a > b ? b : a;
        const Acc lnew = mx + kx::log1p(kx::exp(mn - mx));
        const Acc wa = kx::exp(a - lnew), wb = kx::exp(b - lnew);
        for (long e = 0; e < d; ++e) o(i, h, e) = wa * o(i, h, e) + wb * ob(i, h, e);
        lse(i, h) = lnew;
      });
}
}  // namespace impl

// Merge a partial result (O_b, lse_b) into the running (O, lse), in place
// (ALGORITHMS.md section 1). Exact with -inf rows on either or both sides:
// a side that saw no key contributes nothing, and if neither did the row
// stays (0, -inf). The ring's forward calls it once per visiting block.
// fp32 views in CUDA memory go to a warp-per-row CUDA kernel (coalesced
// 16-byte accesses); the portable kernel's thread per row strides by d
// across a warp.
template <class Acc, class Mem>
void lse_merge(Kokkos::View<Acc***, Layout, Mem> o, Kokkos::View<Acc**, Layout, Mem> lse,
               Kokkos::View<const Acc***, Layout, Mem> ob, Kokkos::View<const Acc**, Layout, Mem> lseb) {
  BURST_CHECK_INPUT(o.extent(0) == ob.extent(0) && o.extent(1) == ob.extent(1) && o.extent(2) == ob.extent(2) &&
                        lse.extent(0) == lseb.extent(0) && lse.extent(1) == lseb.extent(1) &&
                        lse.extent(0) == o.extent(0) && lse.extent(1) == o.extent(1),
                    "lse_merge: shapes of (O, lse) and (O_b, lse_b) disagree");
#ifdef BURST_HAVE_CUDA
  if constexpr (std::is_same<Acc, float>::value && cuda::in_cuda_mem<Mem>()) {
    if (o.span_is_contiguous() && ob.span_is_contiguous() && lse.span_is_contiguous() && lseb.span_is_contiguous() &&
        o.extent(2) > 0 && cuda::fits_int(long(o.extent(2)))) {
      cuda::check(fa::flash_lse_merge((long long)(o.extent(0) * o.extent(1)), int(o.extent(2)), o.data(), lse.data(),
                                      ob.data(), lseb.data(), Kokkos::Cuda().cuda_stream()),
                  "lse_merge (kernels/cuda)");
      return;
    }
  }
#endif
  impl::lse_merge_portable<Acc, Mem>(o, lse, ob, lseb);
}

namespace impl {
// flash_attention_forward_merge without the merging kernel: the block's
// partial (ob, lseb), then lse_merge.
template <class T, class Mem>
long forward_then_merge(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                        Kokkos::View<const T***, Layout, Mem> v, const AttnMask<Mem>& mask, accum_t<T> scale,
                        Kokkos::View<accum_t<T>***, Layout, Mem> o, Kokkos::View<accum_t<T>**, Layout, Mem> lse,
                        Kokkos::View<accum_t<T>***, Layout, Mem> ob, Kokkos::View<accum_t<T>**, Layout, Mem> lseb,
                        AttnTiles tiles) {
  using Acc = accum_t<T>;
  const long t = flash_attention_forward<T, Mem>(q, k, v, mask, scale, ob, lseb, tiles);
  lse_merge<Acc, Mem>(o, lse, ob, lseb);
  return t;
}
}  // namespace impl

// The forward over one more block of keys, merged into a running result
// (o, lse) in place: before, attention over other keys (a row that saw none
// has lse = -inf, O = 0); after, over those and these together (ALGORITHMS.md
// section 1), a row that sees none of these keys left as it is. The ring
// forward's step for every visiting block. The CUDA kernels (bf16 in CUDA
// memory, flash_usable) merge in their epilogue: the block's O is never in
// memory, and no second pass reads and writes O (at 2K keys per block the
// merge pass costs about a quarter of the block's compute; BURST_FA_MERGE=0
// turns the epilogue merge off). Elsewhere the block's partial goes to
// (ob, lseb), shaped as (o, lse), then lse_merge.
template <class T, class Mem>
long flash_attention_forward_merge(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                                   Kokkos::View<const T***, Layout, Mem> v, const AttnMask<Mem>& mask, accum_t<T> scale,
                                   Kokkos::View<accum_t<T>***, Layout, Mem> o, Kokkos::View<accum_t<T>**, Layout, Mem> lse,
                                   Kokkos::View<accum_t<T>***, Layout, Mem> ob,
                                   Kokkos::View<accum_t<T>**, Layout, Mem> lseb, AttnTiles tiles = {}) {
  impl::check_attention_shapes(q, k, v, mask);
  BURST_CHECK_INPUT(o.extent(0) == q.extent(0) && o.extent(1) == q.extent(1) && o.extent(2) == q.extent(2) &&
                        lse.extent(0) == q.extent(0) && lse.extent(1) == q.extent(1),
                    "attention forward (merge): O is [", o.extent(0), ", ", o.extent(1), ", ", o.extent(2), "] and lse [",
                    lse.extent(0), ", ", lse.extent(1), "], expected Q's shape [", q.extent(0), ", ", q.extent(1), ", ",
                    q.extent(2), "] and its first two");
  BURST_CHECK_INPUT(ob.extent(0) == o.extent(0) && ob.extent(1) == o.extent(1) && ob.extent(2) == o.extent(2) &&
                        lseb.extent(0) == lse.extent(0) && lseb.extent(1) == lse.extent(1),
                    "attention forward (merge): the scratch (O_b, lse_b) must be shaped as (O, lse)");
  BURST_CHECK_INPUT(tiles.br >= 1 && tiles.bc >= 1, "attention: tile sizes must be >= 1");
  if (q.extent(0) == 0 || q.extent(1) == 0) return 0;
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::dispatches<T, Mem>()) {
    if (cuda::forward_merge_enabled() && cuda::flash_usable(q, k, v, scale, o, lse))
      return cuda::flash_forward_merge(q, k, v, mask, scale, o, lse, tiles);
  }
#endif
  return impl::forward_then_merge<T, Mem>(q, k, v, mask, scale, o, lse, ob, lseb, tiles);
}

inline const char* mask_kind_name(MaskKind k) {
  switch (k) {
    case MaskKind::None: return "none";
    case MaskKind::Causal: return "causal";
    case MaskKind::Window: return "window";
    case MaskKind::Document: return "document";
    case MaskKind::General: return "general";
  }
  return "?";
}

}  // namespace burst::kernels

#include "parallel/impl/ring_family.hpp"

#include "core/env.hpp"
#include "kernels/attention.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace burst::parallel::impl {

namespace {

template <class X> using CU3 = Kokkos::View<const X***, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class X> using CU2 = Kokkos::View<const X**, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class X> using MU1 = Kokkos::View<X*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// The first `rows` rows of a [s, a, b] view as an unmanaged view (contiguous: row-major).
template <class V> auto leading_rows(const V& v, long rows) {
  using E = typename V::value_type;
  return Kokkos::View<E***, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), size_t(rows), v.extent(1), v.extent(2));
}
template <class V> auto leading_rows2(const V& v, long rows) {
  using E = typename V::value_type;
  return Kokkos::View<E**, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), size_t(rows), v.extent(1));
}
template <class V> auto flat(const V& v, long n) {
  using E = typename V::value_type;
  return Kokkos::View<E*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), size_t(n));
}

}  // namespace

template <class T>
RingFamily<T>::RingFamily(const RingConfig& cfg, const SeqLayout& base, const MaskSpec& mask, Communicator& group,
                          long heads, long kv_heads, long head_dim, double scale)
    : cfg_(cfg), meta_(base, mask), n_(heads), nkv_(kv_heads), d_(head_dim), scale_(Acc(scale)), me_(group.rank()) {
  const RingGeometry& g = cfg_.geometry;
  BURST_ASSERT(g.size() == group.size() && base.blocks == group.size(), "ring of ", g.size(), " ranks on a group of ",
               group.size(), " and ", base.blocks, " blocks");
  const int n = me_ / g.local, l = me_ % g.local;
  if (g.nodes == 1) {
    intra_ = group.split(0, me_, cfg_.group_name);
  } else {
    intra_ = group.split(n, l, cfg_.group_name + "_intra");
    inter_ = group.split(l, n, cfg_.group_name + "_inter");
  }
  plan(fwd_, false, false);
  plan(bwd_, true, !cfg_.kv_backward);
  timers_ = env_switch("BURST_RING_TIMERS", false, "1 (time each round) or 0");
  backend_ = group.backend();
  // One arena holds what each pass uses, its packets and its scratch; the
  // two passes never run at once (each run_ring_program waits for all its
  // transfers), so the backward's share the forward's bytes: the arena is the
  // larger pass, not their sum (as perf/attention.cpp prices the buffers).
  const long s = base.local, tr = base.travel;
  const size_t A = sizeof(Acc), W = cfg_.partial_bf16 ? sizeof(bf16) : A;
  const size_t kv = size_t(tr * nkv_ * d_), qd = size_t(tr * n_ * d_), rows = size_t(tr * n_);
  Carve fc, bc;
  lay_out(fwd_, {kv * sizeof(T), kv * sizeof(T)}, {}, fc);
  const size_t ob_at = fc.take(size_t(s * n_ * d_) * A), lseb_at = fc.take(size_t(s * n_) * A);
  size_t tmp_a_at = 0, tmp_b_at = 0;
  if (cfg_.kv_backward) {
    lay_out(bwd_, {kv * sizeof(T), kv * sizeof(T)}, {kv * W, kv * W}, bc);
    if (cfg_.partial_bf16) tmp_a_at = bc.take(kv * A), tmp_b_at = bc.take(kv * A);
  } else {
    lay_out(bwd_, {qd * sizeof(T), qd * sizeof(T), rows * sizeof(Acc), rows * sizeof(Acc)}, {qd * W}, bc);
    if (cfg_.partial_bf16) tmp_a_at = bc.take(qd * A);
  }
  const size_t D_at = bc.take(size_t(s * n_) * A);
  arena_ = ByteView(Kokkos::view_alloc("comm/attn_arena"), std::max(fc.end, bc.end));
  planned_comm_ = std::int64_t(arena_.extent(0));
  place(fwd_), place(bwd_);
  auto at = [&](size_t off) { return reinterpret_cast<Acc*>(arena_.data() + off); };
  ob_ = AV3(at(ob_at), size_t(s), size_t(n_), size_t(d_));
  lseb_ = AV2(at(lseb_at), size_t(s), size_t(n_));
  D_ = AV2(at(D_at), size_t(s), size_t(n_));
  if (cfg_.partial_bf16) {
    const size_t heads = cfg_.kv_backward ? size_t(nkv_) : size_t(n_);
    tmp_a_ = AV3(at(tmp_a_at), size_t(tr), heads, size_t(d_));
    if (cfg_.kv_backward) tmp_b_ = AV3(at(tmp_b_at), size_t(tr), heads, size_t(d_));
  }
}

// BURST_RING_TIMERS: one line per pass and rank, per round and run (ms):
// compute / wait (wall) / wait's CPU / other.
template <class T> RingFamily<T>::~RingFamily() {
  if (!timers_) return;
  for (const auto* p : {&fwd_, &bwd_}) {
    const RingTimes& t = p->times;
    if (t.runs == 0) continue;
    std::ostringstream os;
    os << "ring timers " << cfg_.name << (cfg_.comm_only ? " comm-only" : "") << " " << backend_ << " rank " << me_ << " "
       << (p == &fwd_ ? "fwd" : "bwd") << " runs " << t.runs << " ms/run by round (compute wait wait_cpu other):";
    const size_t R = std::max({t.compute.size(), t.wait.size(), t.other.size()});
    auto at = [&](const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] * 1e3 / double(t.runs) : 0.0; };
    char buf[160];
    for (size_t i = 0; i < R; ++i) {
      std::snprintf(buf, sizeof buf, " [%zu] %.3f %.3f %.3f %.3f", i, at(t.compute, i), at(t.wait, i), at(t.wait_cpu, i), at(t.other, i));
      os << buf;
    }
    std::fprintf(stderr, "%s\n", os.str().c_str());
  }
}

// Rounds and direction of one pass: parallel::plan_ring_rounds over the
// block pairs the mask leaves visible (queries travel in burst's backward).
template <class T> void RingFamily<T>::plan(Pass& p, bool partial, bool queries_travel) {
  const RingGeometry& g = cfg_.geometry;
  const RingRounds rr = plan_ring_rounds(g, [&](int r, int b) {
    return queries_travel ? meta_.visible(b, true, r, false) : meta_.visible(r, false, b, true);
  });
  p.mirror = rr.mirror;
  p.rounds = rr.rounds;
  p.program = ring_program(g, rr.mirror ? g.size() - 1 - me_ : me_, rr.rounds, partial);
}

// Where a pass's packets go in its share of the arena: only the buffers the
// program names (a flat ring uses 2 of the 4 read buffers).
template <class T>
void RingFamily<T>::lay_out(Pass& p, const std::vector<size_t>& read_spec, const std::vector<size_t>& partial_spec,
                            Carve& c) {
  std::vector<bool> rd(size_t(p.program.read_buffers), false), pt(size_t(p.program.partial_buffers), false);
  rd[0] = true;
  for (const auto& op : p.program.ops) {
    auto& used = op.buf_kind == BufKind::Read || op.kind == RingOp::Compute ? rd : pt;
    if (op.kind == RingOp::Compute) {
      rd[size_t(op.buf)] = true;
      if (op.buf2 >= 0) pt[size_t(op.buf2)] = true;
      continue;
    }
    if (op.buf >= 0) used[size_t(op.buf)] = true;
    if (op.buf2 >= 0) used[size_t(op.buf2)] = true;
  }
  p.read_spec = read_spec, p.partial_spec = partial_spec;
  p.read_at.assign(rd.size(), -1), p.partial_at.assign(pt.size(), -1);
  for (size_t i = 0; i < rd.size(); ++i)
    if (rd[i]) p.read_at[i] = long(c.take(Packet::size(read_spec)));
  for (size_t i = 0; i < pt.size(); ++i)
    if (pt[i]) p.partial_at[i] = long(c.take(Packet::size(partial_spec)));
}

template <class T> void RingFamily<T>::place(Pass& p) {
  p.read.assign(p.read_at.size(), Packet());
  p.partial.assign(p.partial_at.size(), Packet());
  for (size_t i = 0; i < p.read_at.size(); ++i)
    if (p.read_at[i] >= 0) p.read[i] = Packet(p.read_spec, arena_, size_t(p.read_at[i]));
  for (size_t i = 0; i < p.partial_at.size(); ++i)
    if (p.partial_at[i] >= 0) p.partial[i] = Packet(p.partial_spec, arena_, size_t(p.partial_at[i]));
}

// ------------------------------------------------------------------ forward
namespace {

template <class T> struct ForwardClient : RingClient {
  using Acc = accum_t<T>;
  const BlockMeta& meta;
  Kokkos::View<const T***, Layout, DeviceMem> q, k, v;
  Kokkos::View<Acc***, Layout, DeviceMem> o, ob;
  Kokkos::View<Acc**, Layout, DeviceMem> lse, lseb;
  Acc scale;
  int me;
  long nkv, d;
  ForwardClient(const BlockMeta& m) : meta(m) {}

  void compute(const RingOp& op, const Packet& read, const Packet*) override {
    const long s = meta.local(), tr = meta.travel();
    if (op.home) {
      kernels::flash_attention_forward<T, DeviceMem>(q, k, v, meta.mask(me, s, me, s), scale, o, lse, kernels::AttnTiles::uncounted());
      return;
    }
    if (!meta.visible(me, false, op.origin, true)) return;
    CU3<T> kp = read.field3<T>(0, size_t(tr), size_t(nkv), size_t(d)), vp = read.field3<T>(1, size_t(tr), size_t(nkv), size_t(d));
    kernels::flash_attention_forward_merge<T, DeviceMem>(q, kp, vp, meta.mask(me, s, op.origin, tr), scale, o, lse, ob, lseb,
                                                         kernels::AttnTiles::uncounted());
  }
  void add(const Packet&, const Packet&) override {}
  void deliver(const Packet&) override {}
};

// Communication only (benchmarks): the program's transfers and copies, no math.
struct CommOnlyClient : RingClient {
  void compute(const RingOp&, const Packet&, const Packet*) override {}
  void add(const Packet&, const Packet&) override {}
  void deliver(const Packet&) override {}
};

// Backward, burst: the visiting queries' (Q, dO, lse, D) against local K, V.
template <class T, class W> struct BurstBackwardClient : RingClient {
  using Acc = accum_t<T>;
  const BlockMeta& meta;
  Kokkos::View<const T***, Layout, DeviceMem> q, k, v, dout;
  Kokkos::View<const Acc**, Layout, DeviceMem> lse, D;
  Kokkos::View<Acc***, Layout, DeviceMem> dq, dk, dv, tmp;
  Acc scale;
  int me;
  long n, d;
  BurstBackwardClient(const BlockMeta& m) : meta(m) {}

  void compute(const RingOp& op, const Packet& read, const Packet* partial) override {
    const long s = meta.local(), tr = meta.travel();
    if (op.home) {
      kernels::flash_attention_backward<T, DeviceMem>(q, k, v, dout, lse, D, meta.mask(me, s, me, s), scale, dq, dk, dv,
                                                      kernels::BackwardAccumulate(false, false), kernels::AttnTiles::uncounted());
      return;
    }
    const size_t cnt = size_t(tr * n * d);
    if (!meta.visible(op.origin, true, me, false)) {
      Kokkos::deep_copy(ExecSpace(), partial->field1<W>(0, cnt), W(0));
      return;
    }
    CU3<T> qp = read.field3<T>(0, size_t(tr), size_t(n), size_t(d)), dop = read.field3<T>(1, size_t(tr), size_t(n), size_t(d));
    CU2<Acc> lp = read.field2<Acc>(2, size_t(tr), size_t(n)), Dp = read.field2<Acc>(3, size_t(tr), size_t(n));
    Kokkos::View<Acc***, Layout, DeviceMem> target =
        std::is_same<W, Acc>::value ? Kokkos::View<Acc***, Layout, DeviceMem>(partial->field3<Acc>(0, size_t(tr), size_t(n), size_t(d))) : tmp;
    kernels::flash_attention_backward<T, DeviceMem>(qp, k, v, dop, lp, Dp, meta.mask(op.origin, tr, me, s), scale, target, dk,
                                                    dv, kernels::BackwardAccumulate(false, true), kernels::AttnTiles::uncounted());
    if (!std::is_same<W, Acc>::value) convert_into(partial->field1<W>(0, cnt), flat(tmp, long(cnt)), long(cnt));
  }
  void add(const Packet& from, const Packet& to) override {
    const size_t cnt = size_t(meta.travel() * n * d);
    add_into(to.field1<W>(0, cnt), from.field1<W>(0, cnt), long(cnt));
  }
  void deliver(const Packet& own) override {
    const size_t cnt = size_t(meta.travel() * n * d);
    add_into(flat(dq, long(cnt)), own.field1<W>(0, cnt), long(cnt));
  }
};

// Backward, ring: local (Q, dO, lse, D) against the visiting K, V; their
// dK, dV partials travel with them.
template <class T, class W> struct KVBackwardClient : RingClient {
  using Acc = accum_t<T>;
  const BlockMeta& meta;
  Kokkos::View<const T***, Layout, DeviceMem> q, k, v, dout;
  Kokkos::View<const Acc**, Layout, DeviceMem> lse, D;
  Kokkos::View<Acc***, Layout, DeviceMem> dq, dk, dv, tmp_k, tmp_v;
  Acc scale;
  int me;
  long nkv, d;
  KVBackwardClient(const BlockMeta& m) : meta(m) {}

  void compute(const RingOp& op, const Packet& read, const Packet* partial) override {
    const long s = meta.local(), tr = meta.travel();
    if (op.home) {
      kernels::flash_attention_backward<T, DeviceMem>(q, k, v, dout, lse, D, meta.mask(me, s, me, s), scale, dq, dk, dv,
                                                      kernels::BackwardAccumulate(false, false), kernels::AttnTiles::uncounted());
      return;
    }
    const size_t cnt = size_t(tr * nkv * d);
    if (!meta.visible(me, false, op.origin, true)) {
      Kokkos::deep_copy(ExecSpace(), partial->field1<W>(0, cnt), W(0));
      Kokkos::deep_copy(ExecSpace(), partial->field1<W>(1, cnt), W(0));
      return;
    }
    CU3<T> kp = read.field3<T>(0, size_t(tr), size_t(nkv), size_t(d)), vp = read.field3<T>(1, size_t(tr), size_t(nkv), size_t(d));
    using AV = Kokkos::View<Acc***, Layout, DeviceMem>;
    const bool direct = std::is_same<W, Acc>::value;
    AV tk = direct ? AV(partial->field3<Acc>(0, size_t(tr), size_t(nkv), size_t(d))) : tmp_k;
    AV tv = direct ? AV(partial->field3<Acc>(1, size_t(tr), size_t(nkv), size_t(d))) : tmp_v;
    kernels::flash_attention_backward<T, DeviceMem>(q, kp, vp, dout, lse, D, meta.mask(me, s, op.origin, tr), scale, dq, tk,
                                                    tv, kernels::BackwardAccumulate(true, false), kernels::AttnTiles::uncounted());
    if (!direct) {
      convert_into(partial->field1<W>(0, cnt), flat(tmp_k, long(cnt)), long(cnt));
      convert_into(partial->field1<W>(1, cnt), flat(tmp_v, long(cnt)), long(cnt));
    }
  }
  void add(const Packet& from, const Packet& to) override {
    const size_t cnt = size_t(meta.travel() * nkv * d);
    add_into(to.field1<W>(0, cnt), from.field1<W>(0, cnt), long(cnt));
    add_into(to.field1<W>(1, cnt), from.field1<W>(1, cnt), long(cnt));
  }
  void deliver(const Packet& own) override {
    const size_t cnt = size_t(meta.travel() * nkv * d);
    add_into(flat(dk, long(cnt)), own.field1<W>(0, cnt), long(cnt));
    add_into(flat(dv, long(cnt)), own.field1<W>(1, cnt), long(cnt));
  }
};

}  // namespace

template <class T> void RingFamily<T>::forward(int, CV3 q, CV3 k, CV3 v, AV3 o, AV2 lse) {
  const long s = meta_.local(), tr = meta_.travel();
  BURST_CHECK_INPUT(long(q.extent(0)) == s && long(k.extent(0)) == s && long(q.extent(1)) == n_ && long(k.extent(1)) == nkv_ &&
                        long(q.extent(2)) == d_,
                    cfg_.name, " attention: q is [", q.extent(0), ", ", q.extent(1), ", ", q.extent(2), "], k is [", k.extent(0),
                    ", ", k.extent(1), ", ", k.extent(2), "]; the layout and heads need [", s, ", ", n_, ", ", d_, "] and [", s,
                    ", ", nkv_, ", ", d_, "]");
  Packet& own = fwd_.read[0];
  Kokkos::deep_copy(ExecSpace(), own.field3<T>(0, size_t(tr), size_t(nkv_), size_t(d_)), leading_rows(k, tr));
  Kokkos::deep_copy(ExecSpace(), own.field3<T>(1, size_t(tr), size_t(nkv_), size_t(d_)), leading_rows(v, tr));
  own.set_origin(me_);
  if (cfg_.comm_only) {
    CommOnlyClient c;
    run_ring_program(fwd_.program, {intra_.get(), inter_.get()}, fwd_.mirror, fwd_.read, fwd_.partial, c, nullptr,
                     timers_ ? &fwd_.times : nullptr);
    return;
  }
  ForwardClient<T> c(meta_);
  c.q = q, c.k = k, c.v = v, c.o = o, c.lse = lse, c.ob = ob_, c.lseb = lseb_, c.scale = scale_, c.me = me_, c.nkv = nkv_,
  c.d = d_;
  run_ring_program(fwd_.program, {intra_.get(), inter_.get()}, fwd_.mirror, fwd_.read, fwd_.partial, c,
                   cfg_.trace ? &this->trace_ : nullptr, timers_ ? &fwd_.times : nullptr);
}

template <class T>
void RingFamily<T>::backward(int, CV3 q, CV3 k, CV3 v, CV3 o, CAV2 lse, CV3 dout, AV3 dq, AV3 dk, AV3 dv) {
  const long tr = meta_.travel();
  if (!cfg_.comm_only) kernels::attention_backward_rowsum<T, DeviceMem, T>(dout, o, D_);
  Packet& own = bwd_.read[0];
  auto run = [&](RingClient& client) {
    own.set_origin(me_);
    CommOnlyClient none;
    RingClient& c = cfg_.comm_only ? static_cast<RingClient&>(none) : client;
    run_ring_program(bwd_.program, {intra_.get(), inter_.get()}, bwd_.mirror, bwd_.read, bwd_.partial, c,
                     cfg_.trace && !cfg_.comm_only ? &this->trace_ : nullptr, timers_ ? &bwd_.times : nullptr);
  };
  if (cfg_.kv_backward) {
    Kokkos::deep_copy(ExecSpace(), own.field3<T>(0, size_t(tr), size_t(nkv_), size_t(d_)), leading_rows(k, tr));
    Kokkos::deep_copy(ExecSpace(), own.field3<T>(1, size_t(tr), size_t(nkv_), size_t(d_)), leading_rows(v, tr));
    auto go = [&](auto w) {
      using W = decltype(w);
      KVBackwardClient<T, W> c(meta_);
      c.q = q, c.k = k, c.v = v, c.dout = dout, c.lse = lse, c.D = D_, c.dq = dq, c.dk = dk, c.dv = dv, c.tmp_k = tmp_a_,
      c.tmp_v = tmp_b_, c.scale = scale_, c.me = me_, c.nkv = nkv_, c.d = d_;
      run(c);
    };
    cfg_.partial_bf16 ? go(bf16()) : go(Acc());
  } else {
    Kokkos::deep_copy(ExecSpace(), own.field3<T>(0, size_t(tr), size_t(n_), size_t(d_)), leading_rows(q, tr));
    Kokkos::deep_copy(ExecSpace(), own.field3<T>(1, size_t(tr), size_t(n_), size_t(d_)), leading_rows(dout, tr));
    Kokkos::deep_copy(ExecSpace(), own.field2<Acc>(2, size_t(tr), size_t(n_)), leading_rows2(lse, tr));
    Kokkos::deep_copy(ExecSpace(), own.field2<Acc>(3, size_t(tr), size_t(n_)), leading_rows2(D_, tr));
    auto go = [&](auto w) {
      using W = decltype(w);
      BurstBackwardClient<T, W> c(meta_);
      c.q = q, c.k = k, c.v = v, c.dout = dout, c.lse = lse, c.D = D_, c.dq = dq, c.dk = dk, c.dv = dv, c.tmp = tmp_a_,
      c.scale = scale_, c.me = me_, c.n = n_, c.d = d_;
      run(c);
    };
    cfg_.partial_bf16 ? go(bf16()) : go(Acc());
  }
}

template <class T> std::int64_t RingFamily<T>::analytic_bytes() const {
  std::int64_t total = 0;
  for (const Pass* p : {&fwd_, &bwd_}) {
    std::int64_t rb = 0, pb = 0;
    for (const auto& x : p->read) rb = std::max<std::int64_t>(rb, std::int64_t(x.bytes().extent(0)));
    for (const auto& x : p->partial) pb = std::max<std::int64_t>(pb, std::int64_t(x.bytes().extent(0)));
    for (const auto& op : p->program.ops)
      if (op.kind == RingOp::Send) total += op.buf_kind == BufKind::Read ? rb : pb;
  }
  return total;
}

template <class T> std::string RingFamily<T>::describe() const {
  std::ostringstream os;
  const RingGeometry& g = cfg_.geometry;
  os << cfg_.name << ": " << (g.nodes > 1 ? "double ring " : "flat ring ") << g.nodes << " x " << g.local << ", forward "
     << fwd_.rounds << " rounds" << (fwd_.mirror ? " (reversed)" : "") << ", backward " << bwd_.rounds << " rounds"
     << (bwd_.mirror ? " (reversed)" : "") << ", " << (cfg_.kv_backward ? "K,V,dK,dV travel" : "Q,dO,lse,D and dQ travel")
     << ", partials " << (cfg_.partial_bf16 ? "bf16" : scalar_name<Acc>());
  return os.str();
}

template class RingFamily<float>;
template class RingFamily<double>;
template class RingFamily<bf16>;

}  // namespace burst::parallel::impl

// The non-ring methods (Ulysses/USP, all-gather), option checks, layouts,
// and the registry that picks a method by name.
#include "parallel/attention_method.hpp"

#include "core/error.hpp"
#include "kernels/activations.hpp"
#include "kernels/attention.hpp"
#include "parallel/impl/ring_family.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace burst::parallel {

using impl::BlockMeta;
using impl::RingConfig;
using impl::RingFamily;

namespace {

template <class X> using U3 = Kokkos::View<X***, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// [s, H, d] sequence shard -> [P s, H'/P, d] head shard, H' = H rep: chunk p
// of the send buffer holds heads [p H'/P, (p+1) H'/P) of every local row,
// and what arrives from rank p is its rows of this rank's heads, in block
// order. rep > 1 (kv heads fewer than the head-parallel ranks, rep = P / H):
// head j of the expanded set is input head j / rep, so each of the rep
// ranks whose query heads share a kv head receives a copy of it (as
// DeepSpeed-Ulysses replicates kv heads).
template <class E>
void seq_to_heads(Communicator& c, Kokkos::View<const E***, Layout, DeviceMem> in, Kokkos::View<E***, Layout, DeviceMem> out,
                  long rep = 1) {
  const long P = c.size(), s = long(in.extent(0)), H = long(in.extent(1)) * rep, d = long(in.extent(2)), hp = H / P;
  Kokkos::View<E****, Layout, DeviceMem> send(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/a2a_send"), size_t(P),
                                              size_t(s), size_t(hp), size_t(d));
  Kokkos::parallel_for(
      "burst::a2a_pack_heads", Kokkos::RangePolicy<ExecSpace>(0, P * s * hp * d), KOKKOS_LAMBDA(const long x) {
        const long e = x % d, h = (x / d) % hp, i = (x / (d * hp)) % s, p = x / (d * hp * s);
        send(p, i, h, e) = in(i, (p * hp + h) / rep, e);
      });
  c.all_to_all(as_bytes(send), as_bytes(out));
}

// The inverse: [P s, H'/P, d] -> [s, H, d], H' = H rep; with rep > 1 the rep
// copies of a head (gradients of a replicated kv head) are summed.
template <class E>
void heads_to_seq(Communicator& c, Kokkos::View<const E***, Layout, DeviceMem> in, Kokkos::View<E***, Layout, DeviceMem> out,
                  long rep = 1) {
  const long P = c.size(), s = long(out.extent(0)), H = long(out.extent(1)), d = long(out.extent(2)), hp = H * rep / P;
  Kokkos::View<E****, Layout, DeviceMem> recv(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/a2a_recv"), size_t(P),
                                              size_t(s), size_t(hp), size_t(d));
  c.all_to_all(as_bytes(in), as_bytes(recv));
  Kokkos::parallel_for(
      "burst::a2a_unpack_heads", Kokkos::RangePolicy<ExecSpace>(0, s * H * d), KOKKOS_LAMBDA(const long x) {
        const long e = x % d, g = (x / d) % H, i = x / (d * H);
        E sum = recv((g * rep) / hp, i, (g * rep) % hp, e);
        for (long r = 1; r < rep; ++r) sum += recv((g * rep + r) / hp, i, (g * rep + r) % hp, e);
        out(i, g, e) = sum;
      });
}

template <class X> Kokkos::View<X***, Layout, DeviceMem> as3(const Kokkos::View<X**, Layout, DeviceMem>& v) {
  return U3<X>(v.data(), v.extent(0), v.extent(1), 1);
}
template <class X> Kokkos::View<const X***, Layout, DeviceMem> as3c(const Kokkos::View<const X**, Layout, DeviceMem>& v) {
  return Kokkos::View<const X***, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), v.extent(0), v.extent(1), 1);
}

// ---------------------------------------------------------- Ulysses / USP
// Ulysses over the hp ranks of a cp block, then a ring over the cp blocks
// (Ulysses alone: cp = 1, the "ring" is the local attention).
template <class T> class UspAttention : public AttentionMethod<T> {
 public:
  using typename AttentionMethod<T>::Acc;
  using typename AttentionMethod<T>::CV3;
  using typename AttentionMethod<T>::AV3;
  using typename AttentionMethod<T>::AV2;
  using typename AttentionMethod<T>::CAV3;
  using typename AttentionMethod<T>::CAV2;

  UspAttention(std::string name, std::unique_ptr<Communicator> hp, std::unique_ptr<Communicator> cp, const RingConfig& inner,
               const SeqLayout& base, const MaskSpec& mask, long n, long nkv, long d, double scale)
      : name_(std::move(name)), hp_(std::move(hp)), cp_(std::move(cp)), n_(n), nkv_(nkv), d_(d), s_(base.local / hp_->size()),
        rep_(nkv < hp_->size() ? hp_->size() / nkv : 1) {
    ring_ = std::make_unique<RingFamily<T>>(inner, base, mask, *cp_, n / hp_->size(), kv_shard(), d, scale);
  }
  std::string name() const override { return name_; }
  const RingTrace& trace() const override { return ring_->trace(); }
  std::int64_t analytic_bytes() const override {
    const std::int64_t hp = hp_->size(), s = s_, d = d_, nh = n_ / hp, kh = kv_shard(), t = sizeof(T), a = sizeof(Acc);
    const std::int64_t fwd = s * (nh * d * t + 2 * kh * d * t + nh * d * a + nh * a);
    const std::int64_t bwd = s * (nh * d * t + nh * d * a + 2 * kh * d * a);
    return (hp - 1) * (fwd + bwd) + ring_->analytic_bytes();
  }
  // The ring's packets, and one all-to-all buffer at a time: the largest is
  // a local [s, n, d] tensor in Acc (o in forward, dq in backward).
  CommBuffers comm_buffers() const override {
    return {ring_->comm_buffers().persistent,
            std::max<std::int64_t>(ring_->comm_buffers().transient,
                                   s_ * n_ * d_ * std::int64_t(std::max(sizeof(T), sizeof(Acc))))};
  }
  std::string describe() const override {
    return name_ + ": all-to-all over " + std::to_string(hp_->size()) + " ranks" +
           (rep_ > 1 ? " (each kv head replicated to " + std::to_string(rep_) + " ranks)" : "") + ", then " + ring_->describe();
  }

  void forward(int slot, CV3 q, CV3 k, CV3 v, AV3 o, AV2 lse) override {
    const long hp = hp_->size(), s = long(q.extent(0));
    State& st = state_[slot];
    allocate(st, hp * s);
    seq_to_heads<T>(*hp_, q, st.q);
    seq_to_heads<T>(*hp_, k, st.k, rep_);
    seq_to_heads<T>(*hp_, v, st.v, rep_);
    AV3 oh("act/usp_o", size_t(hp * s), size_t(n_ / hp), size_t(d_));
    ring_->forward(slot, st.q, st.k, st.v, oh, st.lse);
    heads_to_seq<Acc>(*hp_, oh, o);
    heads_to_seq<Acc>(*hp_, as3<Acc>(st.lse), as3<Acc>(lse));
    // The backward reads O in the storage type (float / double: this view).
    st.o = kernels::storage_copy<T, DeviceMem>(oh, "act/usp_o_storage");
  }

  void release(int slot) override { state_.erase(slot); }

  void backward(int slot, CV3 q, CV3 k, CV3 v, CV3 o, CAV2 lse, CV3 dout, AV3 dq, AV3 dk, AV3 dv) override {
    const long hp = hp_->size(), s = long(dout.extent(0));
    auto it = state_.find(slot);
    if (it == state_.end()) {
      // Released after its forward (an activation policy that recomputes or
      // caches): the head-sharded inputs are rebuilt from the arguments, with
      // all-to-alls but no ring traffic.
      State& st = state_[slot];
      allocate(st, hp * s);
      seq_to_heads<T>(*hp_, q, st.q);
      seq_to_heads<T>(*hp_, k, st.k, rep_);
      seq_to_heads<T>(*hp_, v, st.v, rep_);
      st.o = Kokkos::View<T***, Layout, DeviceMem>("act/usp_o", size_t(hp * s), size_t(n_ / hp), size_t(d_));
      seq_to_heads<T>(*hp_, o, st.o);
      seq_to_heads<Acc>(*hp_, as3c<Acc>(lse), as3<Acc>(st.lse));
      it = state_.find(slot);
    }
    State& st = it->second;
    Kokkos::View<T***, Layout, DeviceMem> doh("act/usp_do", size_t(hp * s), size_t(n_ / hp), size_t(d_));
    AV3 dqh("work/usp_dq", size_t(hp * s), size_t(n_ / hp), size_t(d_));
    AV3 dkh("work/usp_dk", size_t(hp * s), size_t(kv_shard()), size_t(d_));
    AV3 dvh("work/usp_dv", size_t(hp * s), size_t(kv_shard()), size_t(d_));
    seq_to_heads<T>(*hp_, dout, doh);
    ring_->backward(slot, st.q, st.k, st.v, st.o, st.lse, doh, dqh, dkh, dvh);
    heads_to_seq<Acc>(*hp_, dqh, dq);
    heads_to_seq<Acc>(*hp_, dkh, dk, rep_);  // the replicas' gradients summed
    heads_to_seq<Acc>(*hp_, dvh, dv, rep_);
    state_.erase(it);
  }

 private:
  struct State {
    Kokkos::View<T***, Layout, DeviceMem> q, k, v, o;  // o: the forward's O, head-sharded, in the storage type
    AV2 lse;
  };
  void allocate(State& st, long rows) const {
    const size_t r = size_t(rows), nh = size_t(n_ / hp_->size()), kh = size_t(kv_shard()), d = size_t(d_);
    st.q = Kokkos::View<T***, Layout, DeviceMem>("act/usp_q", r, nh, d);
    st.k = Kokkos::View<T***, Layout, DeviceMem>("act/usp_k", r, kh, d);
    st.v = Kokkos::View<T***, Layout, DeviceMem>("act/usp_v", r, kh, d);
    st.lse = AV2("act/usp_lse", r, nh);
  }
  std::string name_;
  std::unique_ptr<Communicator> hp_, cp_;
  // kv heads per rank after the all-to-all (1 when they are replicated).
  long kv_shard() const { return nkv_ * rep_ / hp_->size(); }
  std::unique_ptr<RingFamily<T>> ring_;
  long n_, nkv_, d_, s_, rep_;
  std::map<int, State> state_;
};

// ----------------------------------------------------------- all-gather
template <class T> class AllGatherAttention : public AttentionMethod<T> {
 public:
  using typename AttentionMethod<T>::Acc;
  using typename AttentionMethod<T>::CV3;
  using typename AttentionMethod<T>::AV3;
  using typename AttentionMethod<T>::AV2;
  using typename AttentionMethod<T>::CAV3;
  using typename AttentionMethod<T>::CAV2;

  AllGatherAttention(std::unique_ptr<Communicator> c, const SeqLayout& base, const MaskSpec& mask, long nkv, long d, double scale,
                     bool comm_only)
      : c_(std::move(c)), meta_(base, mask), nkv_(nkv), d_(d), scale_(Acc(scale)), comm_only_(comm_only) {}
  std::string name() const override { return "allgather"; }
  std::int64_t analytic_bytes() const override {
    const std::int64_t P = c_->size(), chunk = meta_.local() * nkv_ * d_;
    return (P - 1) * chunk * std::int64_t(4 * sizeof(T) + 2 * sizeof(Acc));
  }
  // Gathered K and V, [S, n_kv, d] each, alive together.
  CommBuffers comm_buffers() const override {
    return {0, 2 * meta_.local() * c_->size() * nkv_ * d_ * std::int64_t(sizeof(T))};
  }
  std::string describe() const override { return "allgather: K,V gathered from " + std::to_string(c_->size()) + " ranks, dK,dV reduce-scattered"; }

  void forward(int, CV3 q, CV3 k, CV3 v, AV3 o, AV2 lse) override {
    auto kv = gather(k, v);
    if (comm_only_) return;
    const long s = meta_.local(), me = c_->rank();
    kernels::flash_attention_forward<T, DeviceMem>(q, kv.first, kv.second, meta_.mask_rows(me * s, s, 0, s * c_->size()), scale_, o, lse,
                                                   kernels::AttnTiles::uncounted());
  }
  void backward(int, CV3 q, CV3 k, CV3 v, CV3 o, CAV2 lse, CV3 dout, AV3 dq, AV3 dk, AV3 dv) override {
    auto kv = gather(k, v);
    const long s = meta_.local(), me = c_->rank(), S = s * c_->size();
    AV3 dka("work/ag_dk", size_t(S), size_t(nkv_), size_t(d_)), dva("work/ag_dv", size_t(S), size_t(nkv_), size_t(d_));
    AV2 D("work/ag_D", size_t(s), q.extent(1));
    if (!comm_only_) kernels::attention_backward_rowsum<T, DeviceMem, T>(dout, o, D);
    if (!comm_only_) kernels::flash_attention_backward<T, DeviceMem>(q, kv.first, kv.second, dout, lse, D, meta_.mask_rows(me * s, s, 0, S), scale_,
                                                    dq, dka, dva, false, kernels::AttnTiles::uncounted());
    using F = Kokkos::View<Acc*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    c_->reduce_scatter_sum(F(dka.data(), dka.span()), F(dk.data(), dk.span()));
    c_->reduce_scatter_sum(F(dva.data(), dva.span()), F(dv.data(), dv.span()));
  }

 private:
  std::pair<Kokkos::View<T***, Layout, DeviceMem>, Kokkos::View<T***, Layout, DeviceMem>> gather(CV3 k, CV3 v) {
    const long S = meta_.local() * c_->size();
    Kokkos::View<T***, Layout, DeviceMem> ka(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/ag_k"), size_t(S), size_t(nkv_), size_t(d_));
    Kokkos::View<T***, Layout, DeviceMem> va(Kokkos::view_alloc(Kokkos::WithoutInitializing, "comm/ag_v"), size_t(S), size_t(nkv_), size_t(d_));
    c_->all_gather(as_bytes(k), as_bytes(ka));
    c_->all_gather(as_bytes(v), as_bytes(va));
    return {ka, va};
  }
  std::unique_ptr<Communicator> c_;
  BlockMeta meta_;
  long nkv_, d_;
  Acc scale_;
  bool comm_only_;
};

const std::set<std::string> kMethods = {"ring", "burst", "loongtrain", "ulysses", "usp", "allgather"};

std::string known_methods() {
  std::string s;
  for (const auto& m : kMethods) s += (s.empty() ? "" : ", ") + m;
  return s;
}

}  // namespace

// ----------------------------------------------------------------- checks
void validate_attention(const AttnOptions& opt, const AttnProblem& pb, int P, int L) {
  BURST_CHECK_CONFIG(kMethods.count(opt.method), "unknown attention method '", opt.method, "' (known: ", known_methods(), ")");
  BURST_CHECK_CONFIG(opt.ring == "flat" || opt.ring == "double" || opt.ring == "auto", "--ring '", opt.ring,
                     "': expected flat, double or auto");
  BURST_CHECK_CONFIG(opt.backward == "burst" || opt.backward == "kv" || opt.backward == "auto", "--backward '", opt.backward,
                     "': expected burst, kv or auto");
  BURST_CHECK_CONFIG(opt.placement == "head-first" || opt.placement == "ring-first", "--placement '", opt.placement,
                     "': expected head-first or ring-first");
  BURST_CHECK_CONFIG(opt.usp_inner == "ring" || opt.usp_inner == "burst", "--usp-inner '", opt.usp_inner, "': expected ring or burst");
  BURST_CHECK_CONFIG(pb.heads >= 1 && pb.kv_heads >= 1 && pb.head_dim >= 1, "heads ", pb.heads, ", kv heads ", pb.kv_heads,
                     ", head dim ", pb.head_dim, ": each must be >= 1");
  BURST_CHECK_CONFIG(pb.heads % pb.kv_heads == 0, pb.heads, " query heads are not a multiple of ", pb.kv_heads, " kv heads");
  BURST_CHECK_CONFIG(pb.seq >= P, "sequence of ", pb.seq, " tokens on ", P, " ranks: need at least one token per rank");
  if (pb.mask.type == MaskType::Window)
  {
    BURST_CHECK_CONFIG(pb.mask.window >= 1, "--window ", pb.mask.window, " must be >= 1 for the window mask");
    // As train.attention_window against train.seq_len: a longer window is the causal mask under another name.
    BURST_CHECK_CONFIG(pb.mask.window <= pb.seq, "--window ", pb.mask.window, " exceeds the sequence of ", pb.seq,
                       " tokens (a window covering the whole sequence is the causal mask: use --mask causal)");
  } else
    BURST_CHECK_CONFIG(pb.mask.window == 0, "--window ", pb.mask.window, " is only meaningful with --mask window");
  if (pb.layout == LayoutKind::Document || pb.mask.type == MaskType::Document)
    BURST_CHECK_CONFIG(!pb.doc_lengths.empty() || pb.mask.type != MaskType::Document,
                       "the document mask needs --doc-lengths");
  const int hp = resolve_options(opt, P, L).hp;
  if (opt.method == "ulysses" || opt.method == "usp") {
    BURST_CHECK_CONFIG(hp >= 1 && P % hp == 0, opt.method, ": head-parallel size ", hp, " does not divide the ", P, " ranks");
    BURST_CHECK_CONFIG(pb.heads % hp == 0 && (pb.kv_heads % hp == 0 || hp % pb.kv_heads == 0), opt.method,
                       ": head-parallel size ", hp, " must divide the query heads (", pb.heads,
                       ") and divide or be a multiple of the kv heads (", pb.kv_heads,
                       "; fewer kv heads than ranks are replicated)");
  }
  if (opt.method == "loongtrain") {
    const int inner = resolve_options(opt, P, L).inner;
    BURST_CHECK_CONFIG(P % inner == 0, "loongtrain: inner ring of ", inner, " ranks does not divide the ", P, " ranks");
  }
}

AttnOptions resolve_options(const AttnOptions& in, int P, int L) {
  AttnOptions opt = in;
  if (opt.method == "ulysses") opt.hp = P;
  // The group's members per node: a group is a contiguous run of ranks (the
  // mesh's cp groups), so a group smaller than a node has all P on one
  // (before, the node's L was taken: a 4-rank group on 8-rank nodes got
  // hp = 1, a plain ring, where the model, perf/attention.cpp, takes min(G, P)).
  const int Lg = std::min(L, P);
  if (opt.hp <= 0) opt.hp = (Lg >= 1 && P % Lg == 0) ? Lg : 1;
  if (opt.inner <= 0) opt.inner = (Lg >= 1 && P % Lg == 0) ? Lg : P;
  return opt;
}

AttnLayouts plan_layouts(const AttnOptions& opt, const AttnProblem& pb, int P) {
  AttnLayouts out;
  if (opt.method != "ulysses" && opt.method != "usp") {
    out.base = make_layout(pb.layout, pb.seq, P, pb.doc_lengths);
    // Whole documents stay home only when queries cannot look past their own document.
    if (pb.mask.type != MaskType::Document) out.base.travel = out.base.local;
    out.shards = out.base;
    return out;
  }
  const int hp = opt.method == "ulysses" ? P : opt.hp, cp = P / hp;
  BURST_ASSERT(hp >= 1 && P % hp == 0, "plan_layouts needs resolved options");
  if (cp > 1) {
    out.base = make_layout(pb.layout, pb.seq, cp, pb.doc_lengths, hp);
    if (pb.mask.type != MaskType::Document) out.base.travel = out.base.local;
  } else {  // one cp block holding every block of the layout, in order
    out.base = make_layout(pb.layout, pb.seq, P, pb.doc_lengths);
    out.base.local *= P;
    out.base.blocks = 1;
    out.base.travel = out.base.local;
  }
  SeqLayout split = split_blocks(out.base, hp);  // block c * hp + h
  out.shards = split;
  if (opt.placement == "ring-first") {  // group rank w = h * cp + c
    for (int w = 0; w < P; ++w) {
      const int h = w / cp, c = w % cp, b = c * hp + h;
      std::copy(split.slot.begin() + long(b) * split.local, split.slot.begin() + long(b + 1) * split.local,
                out.shards.slot.begin() + long(w) * split.local);
    }
  }
  return out;
}

// --------------------------------------------------------------- registry
namespace {

// N x L of a group from its members' nodes, when they are node-contiguous
// with the same count per node; else {1, P} (flat only).
RingGeometry group_geometry(const Topology& topo, const std::vector<int>& world_ranks, bool* uniform) {
  std::vector<int> nodes;
  for (int w : world_ranks) nodes.push_back(w / topo.ranks_per_node);
  std::vector<int> counts;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i == 0 || nodes[i] != nodes[i - 1]) counts.push_back(0);
    counts.back()++;
  }
  std::set<int> distinct(nodes.begin(), nodes.end());
  *uniform = distinct.size() == counts.size() && std::set<int>(counts.begin(), counts.end()).size() == 1;
  if (!*uniform) return {1, int(world_ranks.size())};
  return {int(counts.size()), counts[0]};
}

// The ring's shape. `auto`: the plain ring method runs RingAttention's flat
// ring (ALGORITHMS.md section 2; the double ring is what burst adds); burst
// and USP's inner ring run the double ring when the group spans whole nodes
// alike, unless a flat ring stops early: when the mask leaves every rank
// nothing to see beyond some round (a sliding window on the contiguous
// layout), the flat ring runs only those rounds and every rank computes in
// the same ones, where a double ring runs all P rounds and its ranks reach
// their visible blocks in different rounds (the model: 14B, 1M tokens, 32
// A800s, windows of 64K-512K, flat 1.5-2.3x the double ring's TFLOP/s; NOTES).
// flat_rounds: the rounds a flat ring of P would run (plan_ring_rounds).
RingGeometry pick_shape(const std::string& ring, const RingGeometry& nodes, bool uniform, int P, const std::string& who,
                        int flat_rounds) {
  if (ring == "flat") return {1, P};
  if (ring == "double") {
    BURST_CHECK_CONFIG(uniform, who, ": a double ring needs the same number of ranks on every node of the group");
    return nodes;
  }
  if (who == "ring" || !uniform || flat_rounds < P) return {1, P};  // auto
  return nodes;
}

// The rounds a flat ring over the layout's blocks runs for the mask: the
// forward's (K,V travel) and the backward's (queries travel in burst's).
int layer_flat_rounds(const SeqLayout& base, const MaskSpec& mask, bool queries_travel_bwd) {
  const BlockMeta meta(base, mask);
  return flat_ring_rounds(
      base.blocks, [&](int r, int b) { return meta.visible(r, false, b, true); },
      [&](int r, int b) { return queries_travel_bwd ? meta.visible(b, true, r, false) : meta.visible(r, false, b, true); });
}

}  // namespace

template <class T>
std::unique_ptr<AttentionMethod<T>> make_attention(const AttnOptions& opt_in, const AttnProblem& pb, Communicator& group,
                                                   const Topology& topo, const std::vector<int>& group_world_ranks) {
  const int P = group.size();
  validate_attention(opt_in, pb, P, topo.ranks_per_node);
  const AttnOptions opt = resolve_options(opt_in, P, topo.ranks_per_node);
  const double scale = pb.scale > 0 ? pb.scale : 1.0 / std::sqrt(double(pb.head_dim));
  const AttnLayouts lay = plan_layouts(opt, pb, P);
  bool uniform = false;
  const RingGeometry nodes = group_geometry(topo, group_world_ranks, &uniform);
  RingConfig rc;
  rc.partial_bf16 = opt.partial_bf16;
  rc.trace = opt.trace;
  rc.comm_only = opt.comm_only;
  const bool gqa = pb.heads != pb.kv_heads;
  if (opt.method == "ring" || opt.method == "burst") {
    rc.name = opt.method;
    rc.kv_backward = opt.method == "ring" || opt.backward == "kv" || (opt.backward == "auto" && gqa);
    rc.geometry = pick_shape(opt.ring, nodes, uniform, P, opt.method, layer_flat_rounds(lay.base, pb.mask, !rc.kv_backward));
    return std::make_unique<RingFamily<T>>(rc, lay.base, pb.mask, group, pb.heads, pb.kv_heads, pb.head_dim, scale);
  }
  if (opt.method == "loongtrain") {
    rc.name = "loongtrain";
    rc.geometry = {P / opt.inner, opt.inner};
    rc.kv_backward = true;
    return std::make_unique<RingFamily<T>>(rc, lay.base, pb.mask, group, pb.heads, pb.kv_heads, pb.head_dim, scale);
  }
  if (opt.method == "allgather")
    return std::make_unique<AllGatherAttention<T>>(group.split(0, group.rank(), "allgather"), lay.base, pb.mask, pb.kv_heads,
                                                   pb.head_dim, scale, opt.comm_only);
  // ulysses / usp: group rank w <-> (h, c)
  const int hp = opt.method == "ulysses" ? P : opt.hp, cp = P / hp, w = group.rank();
  const bool head_first = opt.placement == "head-first";
  const int h = head_first ? w % hp : w / cp, c = head_first ? w / hp : w % cp;
  auto hp_comm = group.split(c, h, "hp");
  auto cp_comm = group.split(h, c, "cp");
  std::vector<int> cp_world;
  for (int cc = 0; cc < cp; ++cc) cp_world.push_back(group_world_ranks[size_t(head_first ? cc * hp + h : h * cp + cc)]);
  bool cp_uniform = false;
  const RingGeometry cp_nodes = group_geometry(topo, cp_world, &cp_uniform);
  rc.name = opt.method == "ulysses" ? "ulysses-local" : "usp-" + opt.usp_inner;
  // GQA inside the inner ring: its ranks hold n/hp query heads and
  // max(nkv, hp)/hp kv heads (kv heads replicated when fewer than hp).
  const bool gqa_inner = pb.heads != std::max<long>(pb.kv_heads, hp);
  rc.kv_backward = opt.usp_inner == "ring" || opt.backward == "kv" || (opt.backward == "auto" && gqa_inner);
  rc.geometry = pick_shape(opt.ring, cp_nodes, cp_uniform, cp, opt.method,
                           cp > 1 ? layer_flat_rounds(lay.base, pb.mask, !rc.kv_backward) : cp);
  rc.group_name = "cp";
  return std::make_unique<UspAttention<T>>(opt.method, std::move(hp_comm), std::move(cp_comm), rc, lay.base, pb.mask,
                                           pb.heads, pb.kv_heads, pb.head_dim, scale);
}

template std::unique_ptr<AttentionMethod<float>> make_attention<float>(const AttnOptions&, const AttnProblem&, Communicator&,
                                                                       const Topology&, const std::vector<int>&);
template std::unique_ptr<AttentionMethod<double>> make_attention<double>(const AttnOptions&, const AttnProblem&, Communicator&,
                                                                         const Topology&, const std::vector<int>&);
template std::unique_ptr<AttentionMethod<bf16>> make_attention<bf16>(const AttnOptions&, const AttnProblem&, Communicator&,
                                                                     const Topology&, const std::vector<int>&);

}  // namespace burst::parallel

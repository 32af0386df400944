#include "train/zero.hpp"

#include "comm/collectives.hpp"
#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "kernels/activations.hpp"

#include <cmath>
#include <limits>

namespace burst {

namespace {

template <class T> using U1 = Kokkos::View<T*, Layout, DeviceMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T> U1<T> sub(const Kokkos::View<T*, Layout, DeviceMem>& v, long off, long n) {
  return U1<T>(v.data() + off, size_t(n));
}

template <class T> using HU1 = Kokkos::View<T*, Layout, HostMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T> HU1<T> hsub(const Kokkos::View<T*, Layout, HostMem>& v, long off, long n) { return HU1<T>(v.data() + off, size_t(n)); }

// dst = src widened, through kernels::convert (flat device views as [n, 1]).
template <class T, class A> void widen(const U1<A>& dst, const U1<T>& src) {
  kernels::convert<T, A, DeviceMem>(Kokkos::View<const T**, Layout, DeviceMem>(src.data(), src.extent(0), 1),
                                    Kokkos::View<A**, Layout, DeviceMem>(dst.data(), dst.extent(0), 1));
}

}  // namespace

template <class T>
ZeroState<T>::ZeroState(LlamaModel<T, Mem>& model, int stage, bool offload, MPI_Comm comm)
    : model_(model), stage_(stage), offload_(offload), comm_(comm) {
  BURST_CHECK_CONFIG(stage >= 0 && stage <= 3, "train.zero = ", stage, " is not a ZeRO stage (0, 1, 2, 3)");
  coll_ = Communicator::create(comm, "zero");  // collective: every rank of comm makes its ZeroState here
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  for (const UnitInfo& u : model.params().units()) {
    Chunk c;
    c.begin = u.begin, c.len = u.size;
    c.chunk = (u.size + size_ - 1) / size_;
    c.shard_off = shard_;
    shard_ += c.chunk;
    units_.push_back(c);
  }
  p_held_.assign(units_.size(), 0);
  g_held_.assign(units_.size(), 0);
  const long n = stage_ == 0 ? model.params().size() : shard_;
  if (offload_) {
    hm_ = HA(mem_label(MemCategory::Optimizer, "adam.m_host"), size_t(n));
    hv_ = HA(mem_label(MemCategory::Optimizer, "adam.v_host"), size_t(n));
  } else {
    m_ = VA(mem_label(MemCategory::Optimizer, "adam.m"), size_t(n));
    v_ = VA(mem_label(MemCategory::Optimizer, "adam.v"), size_t(n));
  }
  const auto flat = model.params().flat();
  if (stage_ >= 3) {  // the parameters of this rank's chunks
    p_shard_ = V1(mem_label(MemCategory::Params, "zero_shard"), size_t(shard_));
    for (size_t u = 0; u < units_.size(); ++u) {
      const long lo = own_lo(int(u)), hi = own_hi(int(u));
      if (hi > lo) Kokkos::deep_copy(sub(p_shard_, units_[u].shard_off, hi - lo), sub(flat, units_[u].begin + lo, hi - lo));
    }
  }
  if constexpr (kMixed) {  // the masters: the parameters widened (stage 0: whole; else this rank's chunks, padding 0)
    VA mst(mem_label(MemCategory::Optimizer, offload_ ? "master_staging" : "master"), size_t(n));
    if (stage_ == 0) {
      widen<T, A>(sub(mst, 0, n), sub(flat, 0, n));
    } else if (stage_ >= 3) {
      widen<T, A>(sub(mst, 0, n), sub(p_shard_, 0, n));
    } else {
      for (size_t u = 0; u < units_.size(); ++u) {
        const long lo = own_lo(int(u)), hi = own_hi(int(u));
        if (hi > lo) widen<T, A>(sub(mst, units_[u].shard_off, hi - lo), sub(flat, units_[u].begin + lo, hi - lo));
      }
    }
    if (offload_) {
      hmaster_ = HA(mem_label(MemCategory::Optimizer, "master_host"), size_t(n));
      Kokkos::deep_copy(hmaster_, mst);
    } else {
      master_ = mst;
    }
  }
  if (stage_ >= 2) g_shard_ = VA(mem_label(MemCategory::Grads, "zero_shard"), size_t(shard_));
  if (stage_ >= 2) model.use_param_hooks(this, stage_ >= 3, true);
}

template <class T> ZeroState<T>::~ZeroState() {
  if (stage_ >= 2) model_.use_param_hooks(nullptr, false, false);
}

template <class T> typename ZeroState<T>::V1 ZeroState<T>::shard_view(const V1& shard, int u) const {
  return sub(shard, units_[size_t(u)].shard_off, units_[size_t(u)].chunk);
}

// f(tensor, global offset, count, shard position) for every piece of a
// tensor that lies in this rank's chunks.
template <class T> template <class F> void ZeroState<T>::for_each_owned_tensor(F f) const {
  for (const ParamInfo& p : model_.params().table()) {
    const Chunk& c = units_[size_t(p.unit)];
    const long lo = c.begin + own_lo(p.unit), hi = c.begin + own_hi(p.unit);
    const long a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.size);
    if (b > a) f(p, a, b - a, c.shard_off + (a - lo));
  }
}

template <class T> void ZeroState<T>::all_gather_unit(int u, const V1& chunk, const V1& out) {
  const Chunk& c = units_[size_t(u)];
  coll_->all_gather(as_bytes(V1(chunk.data(), size_t(c.chunk))), as_bytes(V1(out.data(), size_t(c.chunk * size_))));
}

template <class T> void ZeroState<T>::acquire_params(int u) {
  if (stage_ < 3 || p_held_[size_t(u)]++ > 0) return;
  // Every rank's chunk in rank order is the unit itself (padding at its end).
  V1 buf(Kokkos::view_alloc(Kokkos::WithoutInitializing, mem_label(MemCategory::Params, "unit")),
         size_t(units_[size_t(u)].chunk * size_));
  all_gather_unit(u, shard_view(p_shard_, u), buf);
  model_.params().set_unit(u, buf);
}

template <class T> void ZeroState<T>::release_params(int u) {
  if (stage_ < 3) return;
  BURST_CHECK(p_held_[size_t(u)] > 0, ErrorKind::Internal, "ZeRO: parameters of unit ", u, " released twice");
  if (--p_held_[size_t(u)] == 0) model_.params().drop_unit(u);
}

template <class T> void ZeroState<T>::acquire_grads(int u) {
  if (stage_ < 2 || g_held_[size_t(u)]++ > 0) return;
  model_.grads().set_unit(u, VA(mem_label(MemCategory::Grads, "unit"), size_t(units_[size_t(u)].chunk * size_)));
}

template <class T> void ZeroState<T>::release_grads(int u) {
  if (stage_ < 2) return;
  BURST_CHECK(g_held_[size_t(u)] > 0, ErrorKind::Internal, "ZeRO: gradients of unit ", u, " released twice");
  if (--g_held_[size_t(u)] > 0) return;
  const Chunk& c = units_[size_t(u)];
  VA mine(Kokkos::view_alloc(Kokkos::WithoutInitializing, mem_label(MemCategory::Comm, "zero_reduce")), size_t(c.chunk));
  const VA buf = model_.grads().unit(u);
  coll_->reduce_scatter_sum(Kokkos::View<const A*, Layout, DeviceMem>(buf), mine);
  model_.grads().drop_unit(u);
  const auto acc = sub(g_shard_, c.shard_off, c.chunk);
  Kokkos::parallel_for(
      "burst::zero_accumulate", Kokkos::RangePolicy<ExecSpace>(0, c.chunk), KOKKOS_LAMBDA(const long i) { acc(i) += mine(i); });
}

template <class T> void ZeroState<T>::zero_grads() {
  if (stage_ >= 2)
    Kokkos::deep_copy(g_shard_, A(0));
  else
    Kokkos::deep_copy(model_.grads().flat(), A(0));
}

template <class T> void ZeroState<T>::finish_grads() {
  if (stage_ >= 2) return;
  coll_->all_reduce_sum(model_.grads().flat());
}

template <class T> double ZeroState<T>::grad_norm() {
  if (stage_ < 2) return std::sqrt(kernels::sum_squares<A, Mem>(model_.grads().flat()));
  return std::sqrt(allreduce_sum(kernels::sum_squares<A, Mem>(g_shard_), comm_, "ZeRO gradient-norm all-reduce"));
}

template <class T> std::string ZeroState<T>::first_nonfinite() {
  const auto& table = model_.params().table();
  long first = long(table.size());
  if (stage_ < 2) {
    for (size_t k = 0; k < table.size() && first == long(table.size()); ++k)
      if (!std::isfinite(kernels::sum_squares<A, Mem>(model_.grads().vec(table[k].name)))) first = long(k);
  } else {
    long k = 0;
    for_each_owned_tensor([&](const ParamInfo& p, long, long n, long pos) {
      while (table[size_t(k)].name != p.name) ++k;
      if (k < first && !std::isfinite(kernels::sum_squares<A, Mem>(sub(g_shard_, pos, n)))) first = k;
    });
    first = allreduce_min(first, comm_, "ZeRO non-finite search");
  }
  return first < long(table.size()) ? "the gradient of " + table[size_t(first)].name : "the loss";
}

template <class T> void ZeroState<T>::inject_nan(const std::string& name) {
  const ParamInfo& p = model_.params().info(name);
  const A nan = std::numeric_limits<A>::quiet_NaN();
  if (stage_ < 2) {
    if (rank_ == 0) Kokkos::deep_copy(sub(model_.grads().flat(), p.offset, 1), nan);
    return;
  }
  const Chunk& c = units_[size_t(p.unit)];
  const long idx = p.offset - c.begin;
  if (idx / c.chunk == rank_) Kokkos::deep_copy(sub(g_shard_, c.shard_off + idx % c.chunk, 1), nan);
}

template <class T> void ZeroState<T>::step(const kernels::AdamWParams& hp, long t, double clip) {
  auto& params = model_.params();
  auto& grads = model_.grads();
  // AdamW on n elements: P the parameters the model reads (T), G their
  // gradient, `at` the position in the master / moment buffers. The clip
  // factor scales G inside the update (no pass of its own over the
  // gradients; they are not read again before the next step zeroes them).
  auto update = [&](const U1<T>& P, const U1<A>& G, long at, long n, double decay) {
    if (offload_) {  // on the host, over the shard
      auto hg = Kokkos::create_mirror_view_and_copy(HostMem(), G);
      if constexpr (kMixed) {
        auto hpv = Kokkos::create_mirror_view(P);
        kernels::adamw_step_copy<A, T, HostMem>(hsub(hmaster_, at, n), hg, hsub(hm_, at, n), hsub(hv_, at, n), hp, t, hpv,
                                                clip, decay);
        Kokkos::deep_copy(P, hpv);
      } else {
        auto hpv = Kokkos::create_mirror_view_and_copy(HostMem(), P);
        kernels::adamw_step<T, HostMem>(hpv, hg, hsub(hm_, at, n), hsub(hv_, at, n), hp, t, decay, clip);
        Kokkos::deep_copy(P, hpv);
      }
    } else if constexpr (kMixed) {
      kernels::adamw_step_copy<A, T, Mem>(sub(master_, at, n), G, sub(m_, at, n), sub(v_, at, n), hp, t, P, clip, decay);
    } else {
      kernels::adamw_step<T, Mem>(P, G, sub(m_, at, n), sub(v_, at, n), hp, t, decay, clip);
    }
  };
  if (stage_ == 0) {
    for (const ParamInfo& p : params.table())
      update(sub(params.flat(), p.offset, p.size), sub(grads.flat(), p.offset, p.size), p.offset, p.size,
             p.is_norm ? 0.0 : 1.0);
    return;
  }
  for_each_owned_tensor([&](const ParamInfo& p, long off, long n, long pos) {
    const U1<T> P = stage_ >= 3 ? sub(p_shard_, pos, n) : sub(params.flat(), off, n);
    const U1<A> G = stage_ == 1 ? sub(grads.flat(), off, n) : sub(g_shard_, pos, n);
    update(P, G, pos, n, p.is_norm ? 0.0 : 1.0);
  });
  if (stage_ >= 3) return;
  // Stages 1 and 2: every rank's whole copy gets the updated chunks.
  for (size_t u = 0; u < units_.size(); ++u) {
    const Chunk& c = units_[u];
    V1 mine(mem_label(MemCategory::Comm, "zero_gather_send"), size_t(c.chunk));
    V1 all(Kokkos::view_alloc(Kokkos::WithoutInitializing, mem_label(MemCategory::Comm, "zero_gather")), size_t(c.chunk * size_));
    const long lo = own_lo(int(u)), hi = own_hi(int(u));
    if (hi > lo) Kokkos::deep_copy(sub(mine, 0, hi - lo), sub(params.flat(), c.begin + lo, hi - lo));
    all_gather_unit(int(u), mine, all);
    Kokkos::deep_copy(sub(params.flat(), c.begin, c.len), sub(all, 0, c.len));
  }
}

template <class T> std::vector<typename ZeroState<T>::A> ZeroState<T>::gather_full(const std::string& what) {
  const long N = model_.params().size();
  const bool params = what == "params";
  BURST_CHECK(params || what == "optim/m" || what == "optim/v", ErrorKind::Internal, "ZeRO: gather of '", what, "'");
  std::vector<A> full;
  auto whole = [&](const auto& v) {  // a whole copy on this rank
    auto h = Kokkos::create_mirror_view_and_copy(HostMem(), v);
    if (rank_ == 0) full.assign(h.data(), h.data() + N);
  };
  auto host_shard = [&](const auto& v) {  // this rank's chunks, on the host
    auto h = Kokkos::create_mirror_view_and_copy(HostMem(), v);
    return std::vector<A>(h.data(), h.data() + shard_);
  };
  std::vector<A> shard;
  if (params) {
    if constexpr (kMixed) {
      if (stage_ == 0) {
        if (offload_) whole(hmaster_);
        else whole(master_);
        return full;
      }
      shard = offload_ ? host_shard(hmaster_) : host_shard(master_);
    } else {
      if (stage_ < 3) {
        whole(model_.params().flat());
        return full;
      }
      shard = host_shard(p_shard_);
    }
  } else {
    const bool m = what == "optim/m";
    if (stage_ == 0) {
      if (offload_) whole(m ? hm_ : hv_);
      else whole(m ? m_ : v_);
      return full;
    }
    shard = offload_ ? host_shard(m ? hm_ : hv_) : host_shard(m ? m_ : v_);
  }
  // Sharded: gathered unit by unit to rank 0.
  if (rank_ == 0) full.assign(size_t(N), A(0));
  for (const Chunk& c : units_) {
    std::vector<A> all(rank_ == 0 ? size_t(c.chunk * size_) : 0);
    gather_host(shard.data() + c.shard_off, all.data(), c.chunk, comm_, "ZeRO checkpoint gather");
    if (rank_ == 0) std::copy(all.begin(), all.begin() + c.len, full.begin() + c.begin);
  }
  return full;
}

template <class T> void ZeroState<T>::scatter_full(const std::string& what, const std::vector<A>& full) {
  const bool params = what == "params";
  BURST_CHECK(long(full.size()) == model_.params().size(), ErrorKind::Internal, "ZeRO: scatter of ", full.size(), " values");
  // dst[dst_off, +n) = full[src_off, +n), rounded to dst's type.
  auto put = [&](const auto& dst, long dst_off, long src_off, long n) {
    using D = std::decay_t<decltype(dst)>;
    using E = typename D::non_const_value_type;
    Kokkos::View<E*, Layout, typename D::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> d(dst.data() + dst_off, size_t(n));
    if constexpr (std::is_same<E, A>::value) {
      Kokkos::deep_copy(d, HUnmanaged1<const A>(full.data() + src_off, size_t(n)));
    } else {
      std::vector<E> r(static_cast<size_t>(n));
      for (long i = 0; i < n; ++i) r[size_t(i)] = E(full[size_t(src_off + i)]);
      Kokkos::deep_copy(d, HUnmanaged1<const E>(r.data(), size_t(n)));
    }
  };
  auto own = [&](const auto& dst) {  // this rank's chunks
    for (size_t u = 0; u < units_.size(); ++u) {
      const long lo = own_lo(int(u)), hi = own_hi(int(u));
      if (hi > lo) put(dst, units_[u].shard_off, units_[u].begin + lo, hi - lo);
    }
  };
  auto whole_or_own = [&](const auto& dst) {
    if (stage_ == 0) put(dst, 0, 0, long(full.size()));
    else own(dst);
  };
  if (params) {
    if (stage_ < 3) put(model_.params().flat(), 0, 0, long(full.size()));
    else own(p_shard_);
    if constexpr (kMixed) {
      if (offload_) whole_or_own(hmaster_);
      else whole_or_own(master_);
    }
    return;
  }
  const bool m = what == "optim/m";
  if (offload_) whole_or_own(m ? hm_ : hv_);
  else whole_or_own(m ? m_ : v_);
}

template class ZeroState<float>;
template class ZeroState<double>;
template class ZeroState<bf16>;

}  // namespace burst

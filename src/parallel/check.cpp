#include "parallel/check.hpp"

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "kernels/activations.hpp"
#include "kernels/attention.hpp"

#include <chrono>
#include <cmath>
#include <random>

namespace burst::parallel {


Tensors make_inputs(const AttnProblem& pb, const std::string& input, unsigned long long seed) {
  Tensors t;
  const long S = pb.seq, n = pb.heads, m = pb.kv_heads, d = pb.head_dim;
  if (!input.empty()) {
    io::H5File f;
    try {
      f = io::H5File::open(input);
    } catch (const Error& e) {  // bad input, not an I/O fault: status 2 on every rank
      BURST_FAIL(ErrorKind::Input, "--input '", input, "' cannot be read: ", e.message());
    }
    auto load = [&](const char* name, long heads) {
      BURST_CHECK_INPUT(f.exists(name), "--input ", input, ": no dataset '", name, "'");
      // The shape before the values: a file declaring [2^34, 4, 16] in a few bytes is refused, not allocated.
      const io::Dims dims = f.dims(name);
      BURST_CHECK_INPUT(dims == io::Dims({std::uint64_t(S), std::uint64_t(heads), std::uint64_t(d)}), "--input ", input,
                        ": dataset '", name, "' is ", io::dims_string(dims), ", not [", S, ", ", heads, ", ", d,
                        "] (--seq, heads, --head-dim)");
      auto x = f.read<double>(name);
      // A NaN or inf input makes every output non-finite: nothing to check.
      for (size_t i = 0; i < x.size(); ++i)
        BURST_CHECK_INPUT(std::isfinite(x[i]), "--input ", input, ": dataset '", name, "' holds ", x[i], " at index ", i,
                          " [", long(i) / (heads * d), ", ", long(i) / d % heads, ", ", long(i) % d,
                          "] (the first non-finite value; q, k, v and do must be finite)");
      return x;
    };
    t.q = load("q", n), t.k = load("k", m), t.v = load("v", m), t.dout = load("do", n);
    return t;
  }
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto fill = [&](long heads) {
    std::vector<double> x(size_t(S * heads * d));
    for (auto& e : x) e = nd(g);
    return x;
  };
  t.q = fill(n), t.k = fill(m), t.v = fill(m), t.dout = fill(n);
  return t;
}

namespace {

template <class T> View3<T> to_device(const std::vector<double>& x, long a, long b, long c, const char* label) {
  View3<T> v{std::string(label), size_t(a), size_t(b), size_t(c)};
  auto h = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < x.size(); ++i) h.data()[i] = T(x[i]);
  Kokkos::deep_copy(v, h);
  return v;
}
template <class V> std::vector<double> to_host(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> x(h.span());
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(h.data()[i]);
  return x;
}

}  // namespace

// The reference: the block kernel on the whole natural-order sequence, in double.
Outputs reference(const AttnProblem& pb, const SeqLayout& base, const Tensors& in) {
  const MaskSpec& mask = pb.mask;
  const long S = pb.seq, n = pb.heads, m = pb.kv_heads, d = pb.head_dim;
  SeqLayout nat = make_layout(LayoutKind::Contiguous, S, 1, {}, 1);
  nat.doc = base.doc;
  std::vector<long> pos(static_cast<size_t>(S));
  for (long i = 0; i < S; ++i) pos[size_t(i)] = i;
  View1<long> p("work/ref_pos", size_t(S));
  View1<int> dc("work/ref_doc", size_t(S));
  Kokkos::deep_copy(p, HUnmanaged1<const long>(pos.data(), pos.size()));
  Kokkos::deep_copy(dc, HUnmanaged1<const int>(nat.doc.data(), nat.doc.size()));
  auto km = kernels::AttnMask<DeviceMem>::general(mask.type != MaskType::Full, mask.type == MaskType::Window ? mask.window : 0,
                                                  mask.type == MaskType::Document, dc, dc, p, p);
  auto q = to_device<double>(in.q, S, n, d, "work/ref_q"), k = to_device<double>(in.k, S, m, d, "work/ref_k"),
       v = to_device<double>(in.v, S, m, d, "work/ref_v"), dout = to_device<double>(in.dout, S, n, d, "work/ref_do");
  View3<double> o("work/ref_o", S, n, d), dq("work/ref_dq", S, n, d), dk("work/ref_dk", S, m, d), dv("work/ref_dv", S, m, d);
  View2<double> lse("work/ref_lse", S, n), D("work/ref_D", S, n);
  const double scale = 1.0 / std::sqrt(double(d));
  kernels::flash_attention_forward<double, DeviceMem>(q, k, v, km, scale, o, lse);
  kernels::attention_backward_rowsum<double, DeviceMem>(dout, o, D);
  kernels::flash_attention_backward<double, DeviceMem>(q, k, v, dout, lse, D, km, scale, dq, dk, dv, false);
  return {to_host(o), to_host(lse), to_host(dq), to_host(dk), to_host(dv)};
}

double rel_error(const std::vector<double>& x, const std::vector<double>& ref, double floor) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(ref[i]) && x[i] == ref[i]) continue;
    // std::max drops a NaN (every comparison with it is false): a NaN or an
    // inf anywhere else is the answer itself, never folded away.
    const double d = std::fabs(x[i] - ref[i]);
    if (std::isnan(x[i]) || std::isnan(ref[i]) || std::isnan(d)) return NAN;
    if (std::isinf(d)) return INFINITY;
    diff = std::max(diff, d);
    scale = std::max(scale, std::fabs(ref[i]));
  }
  scale = std::max(scale, floor);
  return scale > 0 ? diff / scale : diff;
}

namespace {

// Gather every rank's shard [local * width] onto rank 0, in natural order.
std::vector<double> gather_natural(MPI_Comm comm, const SeqLayout& shards, const std::vector<double>& mine, long width) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<double> all(rank == 0 ? mine.size() * size_t(size) : 0);
  MPI_Gather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE, 0, comm);
  std::vector<double> nat(rank == 0 ? size_t(shards.seq * width) : 0, 0.0);
  if (rank == 0)
    for (int b = 0; b < size; ++b)
      shards.to_natural(b, std::vector<double>(all.begin() + long(b) * long(mine.size()), all.begin() + long(b + 1) * long(mine.size())),
                        width, nat);
  return nat;
}


}  // namespace

template <class T>
CheckResult check_attention(const AttnOptions& ao, const AttnProblem& pb, MPI_Comm comm, const Topology& topo, const Tensors& in) {
  using Acc = accum_t<T>;
  int P = 1, me = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &me);
  validate_attention(ao, pb, P, topo.ranks_per_node);
  const AttnOptions ro = resolve_options(ao, P, topo.ranks_per_node);
  const AttnLayouts lay = plan_layouts(ro, pb, P);
  const SeqLayout& sh = lay.shards;
  const long s = sh.local, n = pb.heads, m = pb.kv_heads, d = pb.head_dim;
  auto q = to_device<T>(sh.to_block(me, in.q, n * d, 0.0), s, n, d, "act/q");
  auto k = to_device<T>(sh.to_block(me, in.k, m * d, 0.0), s, m, d, "act/k");
  auto v = to_device<T>(sh.to_block(me, in.v, m * d, 0.0), s, m, d, "act/v");
  auto dout = to_device<T>(sh.to_block(me, in.dout, n * d, 0.0), s, n, d, "act/do");

  auto world = Communicator::create(comm, "world");
  std::vector<int> members(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) members[size_t(i)] = i;
  auto method = make_attention<T>(ao, pb, *world, topo, members);
  View3<Acc> o("act/o", s, n, d), dq("grads/dq", s, n, d), dk("grads/dk", s, m, d), dv("grads/dv", s, m, d);
  View2<Acc> lse("act/lse", s, n);

  MPI_Barrier(comm);
  CommStats::get().reset();
  const auto t0 = std::chrono::steady_clock::now();
  method->forward(0, q, k, v, o, lse);
  Kokkos::fence();
  const auto t1 = std::chrono::steady_clock::now();
  // The backward reads O in the storage type, as the model keeps it (bf16: a
  // rounded copy; float / double: o itself), made outside the timed passes.
  const auto ob = kernels::storage_copy<T, DeviceMem>(o, "act/o_storage");
  Kokkos::fence();
  if (ao.release_before_backward) method->release(0);
  const auto t1b = std::chrono::steady_clock::now();
  method->backward(0, q, k, v, ob, lse, dout, dq, dk, dv);
  Kokkos::fence();
  const auto t2 = std::chrono::steady_clock::now();
  CheckResult r;
  r.description = method->describe();
  r.forward_s = std::chrono::duration<double>(t1 - t0).count();
  r.backward_s = std::chrono::duration<double>(t2 - t1b).count();
  r.bytes = CommStats::get().total_bytes();
  r.analytic = method->analytic_bytes();
  r.by_group = CommStats::get().table();
  r.exposed_s = CommStats::get().wait_seconds();
  r.mismatches = method->trace().mismatches;
  r.checked = long(method->trace().entries.size());
  r.padding = sh.padding(), r.travel = lay.base.travel, r.local = lay.base.local;
  r.natural = {gather_natural(comm, sh, to_host(o), n * d), gather_natural(comm, sh, to_host(lse), n),
               gather_natural(comm, sh, to_host(dq), n * d), gather_natural(comm, sh, to_host(dk), m * d),
               gather_natural(comm, sh, to_host(dv), m * d)};
  if (me == 0) {
    const Outputs ref = reference(pb, lay.base, in);
    const std::vector<double>* gv[] = {&r.natural.o, &r.natural.lse, &r.natural.dq, &r.natural.dk, &r.natural.dv};
    const std::vector<double>* rv[] = {&ref.o, &ref.lse, &ref.dq, &ref.dk, &ref.dv};
    double grads = 0;  // the largest gradient's scale (finite entries)
    for (int i = 2; i < 5; ++i)
      for (double x : *rv[i])
        if (std::isfinite(x)) grads = std::max(grads, std::fabs(x));
    for (int i = 0; i < 5; ++i) r.err[i] = rel_error(*gv[i], *rv[i], i >= 2 ? kGradientFloor * grads : 0.0);
  }
  MPI_Bcast(r.err, 5, MPI_DOUBLE, 0, comm);
  return r;
}

template CheckResult check_attention<float>(const AttnOptions&, const AttnProblem&, MPI_Comm, const Topology&, const Tensors&);
template CheckResult check_attention<double>(const AttnOptions&, const AttnProblem&, MPI_Comm, const Topology&, const Tensors&);
template CheckResult check_attention<bf16>(const AttnOptions&, const AttnProblem&, MPI_Comm, const Topology&, const Tensors&);

}  // namespace burst::parallel

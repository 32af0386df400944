// The NCCL backend (CUDA builds with BURST_ENABLE_NCCL), written for any
// number of ranks with a GPU each; ctest registers it at
// BURST_NCCL_TEST_RANKS (default 1: one H200). Every operation is checked
// against expected values, and its byte count against the count the MPI
// backend reports for the same call (the counters must not depend on the
// transport). Host builds run the same tests at 1-4 ranks over the simulated
// NCCL (comm/sim/, BURST_COMM=nccl-sim), which no GPU can: one GPU holds one
// NCCL rank.
#include "comm/collectives.hpp"
#include "comm/communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "comm/topology.hpp"
#include "core/error.hpp"
#include "parallel/check.hpp"

#include "tools/mpi_world.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <vector>

using namespace burst;

namespace {

// The value of BURST_COMM that asks for this build's NCCL, and the backend it gives.
#ifdef BURST_SIM_NCCL
constexpr const char* kNccl = "nccl-sim";
#else
constexpr const char* kNccl = "nccl";
#endif

// Back to how the run started (the simulated NCCL is chosen by BURST_COMM,
// the real one by default).
void restore_comm_env() {
#ifdef BURST_SIM_NCCL
  setenv("BURST_COMM", kNccl, 1);
#else
  unsetenv("BURST_COMM");
#endif
}

using test_tools::world_rank;
using test_tools::world_size;

template <class T> View1<T> device(const std::vector<T>& x, const char* label) {
  View1<T> v(std::string(label), x.size());
  Kokkos::deep_copy(v, HUnmanaged1<const T>(x.data(), x.size()));
  return v;
}
template <class V> std::vector<typename V::non_const_value_type> host(const V& v) {
  std::vector<typename V::non_const_value_type> x(v.extent(0));
  Kokkos::deep_copy(HUnmanaged1<typename V::non_const_value_type>(x.data(), x.size()), v);
  return x;
}

// NCCL must serve this run: a single rank with a GPU always can; several
// ranks need a GPU each (on one GPU the factory picks MPI, tested below).
std::unique_ptr<Communicator> nccl_or_skip(const std::string& group) {
  std::string why;
  const bool ok = nccl_usable(MPI_COMM_WORLD, &why);
  if (world_size() == 1) EXPECT_TRUE(ok) << "one rank with a GPU: " << why;
  if (!ok) return nullptr;
  auto c = Communicator::create(MPI_COMM_WORLD, group);
  EXPECT_STREQ(c->backend(), kNccl);
  return c;
}

#define NCCL_OR_SKIP(var, group)                                       \
  auto var = nccl_or_skip(group);                                      \
  if (!var) GTEST_SKIP() << "NCCL cannot serve this run (shared GPUs)"

}  // namespace

TEST(Nccl, FactoryPicksTheBackend) {
  std::string why;
  const bool ok = nccl_usable(MPI_COMM_WORLD, &why);
  auto c = Communicator::create(MPI_COMM_WORLD, "factory");
  EXPECT_STREQ(c->backend(), ok ? kNccl : "mpi-staging") << why;
  setenv("BURST_COMM", "mpi", 1);
  auto m = Communicator::create(MPI_COMM_WORLD, "factory_mpi");
#ifdef BURST_SIM_NCCL
  EXPECT_STREQ(m->backend(), "mpi");
#else
  EXPECT_STREQ(m->backend(), "mpi-staging");
#endif
  setenv("BURST_COMM", kNccl, 1);
  if (ok) {
    EXPECT_STREQ(Communicator::create(MPI_COMM_WORLD, "factory_nccl")->backend(), kNccl);
  } else {
    EXPECT_THROW(Communicator::create(MPI_COMM_WORLD, "factory_nccl"), Error);
  }
  restore_comm_env();
}

// A ring hop (to the next rank, from the previous; at one rank, to itself)
// on two tags at once, plus the pattern of burst's dQ lane: a send at the
// end of one round that meets the receive the next rank posts a round later.
TEST(Nccl, RingSendRecvOnSeveralLanes) {
  NCCL_OR_SKIP(c, "nccl_ring");
  const int P = c->size(), me = c->rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  const size_t n = 1000003;  // odd, not a multiple of any chunking
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) a[i] = float(me * 10 + 1) + float(i % 97), b[i] = -float(me) - float(i % 13);
  auto sa = device(a, "comm/sa"), sb = device(b, "comm/sb");
  View1<float> ra("comm/ra", n), rb("comm/rb", n);
  CommStats::get().reset();
  {
    Request s1 = c->isend(as_bytes(sa), next, 3);
    Request s2 = c->isend(as_bytes(sb), next, 5);
    Request r1 = c->irecv(as_bytes(ra), prev, 3);
    Request r2 = c->irecv(as_bytes(rb), prev, 5);
    r1.wait(), r2.wait(), s1.wait(), s2.wait();
  }
  const auto ha = host(ra), hb = host(rb);
  for (size_t i = 0; i < n; i += 7919) {
    ASSERT_EQ(ha[i], float(prev * 10 + 1) + float(i % 97)) << i;
    ASSERT_EQ(hb[i], -float(prev) - float(i % 13)) << i;
  }
  EXPECT_EQ(ha[n - 1], float(prev * 10 + 1) + float((n - 1) % 97));
  EXPECT_EQ(CommStats::get().bytes("nccl_ring", "send"), std::int64_t(2 * n * sizeof(float)));
  EXPECT_EQ(CommStats::get().calls("nccl_ring", "send"), 2);

  // Rounds: send at the end of round t, receive (from prev) in round t+1.
  View1<float> partial("comm/partial", 4096), incoming("comm/incoming", 4096);
  Request pending_send;
  for (int t = 0; t < 4; ++t) {
    if (t > 0) {
      Request r = c->irecv(as_bytes(incoming), prev, 9);
      r.wait();
      const auto h = host(incoming);
      EXPECT_EQ(h[0], float(prev * 100 + t - 1)) << "round " << t;
      EXPECT_EQ(h[4095], float(prev * 100 + t - 1)) << "round " << t;
    }
    pending_send.wait();
    Kokkos::deep_copy(partial, float(me * 100 + t));
    if (t < 3) pending_send = c->isend(as_bytes(partial), next, 9);
  }
  pending_send.wait();
  c->synchronize("ring test");
  EXPECT_EQ(CommStats::get().bytes("nccl_ring", "send"), std::int64_t(2 * n * sizeof(float) + 3 * 4096 * sizeof(float)));
}

TEST(Nccl, TestTellsWhenATransferIsDone) {
  NCCL_OR_SKIP(c, "nccl_test");
  const int P = c->size(), me = c->rank();
  View1<double> s("comm/s", 1 << 20), r("comm/r", 1 << 20);
  Kokkos::deep_copy(s, double(me));
  Request rs = c->isend(as_bytes(s), (me + 1) % P, 1);
  Request rr = c->irecv(as_bytes(r), (me + P - 1) % P, 1);
  c->synchronize("test of test()");
  EXPECT_TRUE(rr.test());
  EXPECT_TRUE(rs.test());
  EXPECT_FALSE(rr.active());
  EXPECT_EQ(host(r)[12345], double((me + P - 1) % P));
}

// Each collective on NCCL and on MPI (staging) with the same inputs: the
// same results, the expected values, and the same byte counts.
TEST(Nccl, CollectivesMatchExpectedValuesAndMpiByteCounts) {
  NCCL_OR_SKIP(c, "coll");
  const int P = c->size(), me = c->rank();
  setenv("BURST_COMM", "mpi", 1);
  auto m = Communicator::create(MPI_COMM_WORLD, "coll_mpi");
  restore_comm_env();
#ifdef BURST_SIM_NCCL
  ASSERT_STREQ(m->backend(), "mpi");
#else
  ASSERT_STREQ(m->backend(), "mpi-staging");
#endif
  CommStats::get().reset();
  const size_t k = 333;  // elements per chunk

  for (Communicator* x : {c.get(), m.get()}) {
    // all_to_all: chunk p of rank r holds r * 1000 + p * 10 + i%7.
    std::vector<float> a(k * size_t(P));
    for (int p = 0; p < P; ++p)
      for (size_t i = 0; i < k; ++i) a[size_t(p) * k + i] = float(me * 1000 + p * 10) + float(i % 7);
    auto sa = device(a, "comm/a2a_s");
    View1<float> ra("comm/a2a_r", a.size());
    x->all_to_all(as_bytes(sa), as_bytes(ra));
    const auto h = host(ra);
    for (int p = 0; p < P; ++p)
      for (size_t i = 0; i < k; i += 11) ASSERT_EQ(h[size_t(p) * k + i], float(p * 1000 + me * 10) + float(i % 7)) << x->backend();

    // all_gather: chunk p = p + i/1000.
    std::vector<double> g(k);
    for (size_t i = 0; i < k; ++i) g[i] = me + double(i) / 1000;
    auto sg = device(g, "comm/ag_s");
    View1<double> rg("comm/ag_r", k * size_t(P));
    x->all_gather(as_bytes(sg), as_bytes(rg));
    const auto hg = host(rg);
    for (int p = 0; p < P; ++p) ASSERT_EQ(hg[size_t(p) * k + 5], p + 5.0 / 1000) << x->backend();

    // reduce_scatter: element j of the send buffer on rank r is r + j; chunk q sums to sum_r (r + q k + i).
    std::vector<float> rs(k * size_t(P));
    std::vector<double> rsd(k * size_t(P));
    for (size_t j = 0; j < rs.size(); ++j) rs[j] = float(me + int(j)), rsd[j] = me + double(j) + 0.5;
    auto srs = device(rs, "comm/rs_s");
    auto srsd = device(rsd, "comm/rsd_s");
    View1<float> rrs("comm/rs_r", k);
    View1<double> rrsd("comm/rsd_r", k);
    x->reduce_scatter_sum(srs, rrs);
    x->reduce_scatter_sum(srsd, rrsd);
    const auto hrs = host(rrs);
    const auto hrsd = host(rrsd);
    const double ranks = double(P) * (P - 1) / 2;
    for (size_t i = 0; i < k; i += 17) {
      ASSERT_EQ(double(hrs[i]), ranks + double(P) * double(size_t(me) * k + i)) << x->backend();
      ASSERT_EQ(hrsd[i], ranks + double(P) * (double(size_t(me) * k + i) + 0.5)) << x->backend();
    }

    // all_reduce in place: sum_r (r + 1) * (i % 5).
    std::vector<float> ar(k);
    std::vector<double> ard(k);
    for (size_t i = 0; i < k; ++i) ar[i] = float((me + 1) * int(i % 5)), ard[i] = (me + 1) * double(i % 5) * 0.25;
    auto sar = device(ar, "comm/ar");
    auto sard = device(ard, "comm/ard");
    x->all_reduce_sum(sar);
    x->all_reduce_sum(sard);
    const auto har = host(sar);
    const auto hard = host(sard);
    const double tri = double(P) * (P + 1) / 2;
    for (size_t i = 0; i < k; ++i) {
      ASSERT_EQ(double(har[i]), tri * double(i % 5)) << x->backend();
      ASSERT_EQ(hard[i], tri * double(i % 5) * 0.25) << x->backend();
    }
    x->barrier();
  }
  // Byte counts: the formulas of the MPI backend, and equal between the two.
  const std::int64_t chunkf = std::int64_t(k * sizeof(float)), chunkd = std::int64_t(k * sizeof(double));
  auto& st = CommStats::get();
  for (const char* op : {"all_to_all", "all_gather", "reduce_scatter", "all_reduce"}) {
    EXPECT_EQ(st.bytes("coll", op), st.bytes("coll_mpi", op)) << op;
    EXPECT_EQ(st.calls("coll", op), st.calls("coll_mpi", op)) << op;
  }
  EXPECT_EQ(st.bytes("coll", "all_to_all"), chunkf * (P - 1));
  EXPECT_EQ(st.bytes("coll", "all_gather"), chunkd * (P - 1));
  EXPECT_EQ(st.bytes("coll", "reduce_scatter"), (chunkf + chunkd) * (P - 1));
  EXPECT_EQ(st.bytes("coll", "all_reduce"), 2 * (P - 1) * chunkf / P + 2 * (P - 1) * chunkd / P);  // one call each
  EXPECT_EQ(st.calls("coll", "reduce_scatter"), 2);
}

TEST(Nccl, SplitGivesNcclGroups) {
  NCCL_OR_SKIP(c, "nccl_world");
  const int P = c->size(), me = c->rank();
  auto half = c->split(me % 2, me, "nccl_half");
  EXPECT_STREQ(half->backend(), kNccl);
  EXPECT_EQ(half->size(), (P + 1 - me % 2) / 2);
  EXPECT_EQ(half->rank(), me / 2);
  View1<double> v("comm/v", 3);
  Kokkos::deep_copy(v, double(me));
  half->all_reduce_sum(v);
  double expect = 0;
  for (int r = me % 2; r < P; r += 2) expect += r;
  EXPECT_EQ(host(v)[2], expect);
}

// A rank that never joins: the bounded wait aborts NCCL and names the
// operation. Needs two ranks (rank 1 skips the barrier).
TEST(Nccl, BarrierIsBoundedByTheTimeout) {
  NCCL_OR_SKIP(c, "nccl_bounded");
  if (c->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const double old = comm_timeout();
  set_comm_timeout(2);
  if (c->rank() == 0) {
    try {
      c->barrier();
      ADD_FAILURE() << "barrier returned while rank 1 stayed away";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("barrier on group 'nccl_bounded'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("comm.timeout_s"), std::string::npos) << e.what();
    }
  }
  set_comm_timeout(old);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The distributed attention through the factory on NCCL: the reference's
// answer and the schedule's byte count (burst, zigzag, causal).
TEST(Nccl, BurstAttentionThroughNccl) {
  std::string why;
  if (!nccl_usable(MPI_COMM_WORLD, &why)) GTEST_SKIP() << why;
  using namespace burst::parallel;
  AttnOptions o;
  o.method = "burst";
  o.trace = true;
  AttnProblem pb;
  pb.layout = LayoutKind::Zigzag;
  pb.mask.type = MaskType::Causal;
  pb.seq = 64L * world_size(), pb.heads = 4, pb.kv_heads = 4, pb.head_dim = 16;
  const Topology topo = Topology::from_sizes(world_size(), world_rank(), world_size(), false, "test");
  const Tensors in = make_inputs(pb, "", 3);
  const CheckResult r = check_attention<double>(o, pb, MPI_COMM_WORLD, topo, in);
  for (int i = 0; i < 5; ++i) EXPECT_LT(r.err[i], 1e-10) << i;
  EXPECT_EQ(r.bytes, r.analytic);
  EXPECT_EQ(r.mismatches, 0);
}

// Topology at every registered rank count: the arithmetic, detection on the
// real world, BURST_GPUS_PER_NODE emulation, and the intra/inter rings.
#include "comm/collectives.hpp"
#include "comm/communicator.hpp"
#include "comm/runtime.hpp"
#include "comm/topology.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <cstdlib>
#include <set>

using namespace burst;

TEST(Topology, FromSizesIsBlockPlacement) {
  for (int world : {1, 2, 4, 6, 8, 16})
    for (int g = 1; g <= world; ++g) {
      if (world % g) continue;
      std::set<std::pair<int, int>> seen;
      for (int r = 0; r < world; ++r) {
        Topology t = Topology::from_sizes(world, r, g, true, "test");
        EXPECT_EQ(t.nodes * t.ranks_per_node, world);
        EXPECT_EQ(t.rank_of(t.node, t.local), r);
        seen.insert({t.node, t.local});
      }
      EXPECT_EQ(int(seen.size()), world);
    }
}

TEST(Topology, RejectsUnevenNodes) {
  try {
    Topology::from_sizes(4, 0, 3, true, "BURST_GPUS_PER_NODE");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_STREQ(e.what(),
                 "ranks per node = 3 (BURST_GPUS_PER_NODE) does not divide the 4 ranks: every node must hold the same "
                 "number of ranks");
  }
  EXPECT_THROW(Topology::detect(Runtime::current().world(), "0"), Error);
  EXPECT_THROW(Topology::detect(Runtime::current().world(), "two"), Error);
}

TEST(Topology, DetectsTheRealWorld) {
  auto& rt = Runtime::current();
  int size = 0, rank = 0;
  MPI_Comm_size(rt.world(), &size);
  MPI_Comm_rank(rt.world(), &rank);
  Topology t = Topology::detect(rt.world(), nullptr);
  EXPECT_EQ(t.world_size, size);
  EXPECT_EQ(t.rank, rank);
  // One host here: every rank shares memory with every other.
  EXPECT_EQ(t.nodes, 1);
  EXPECT_EQ(t.local, rank);
  EXPECT_FALSE(t.emulated);
  EXPECT_EQ(rt.hw_local_size(), size);
}

TEST(Topology, EmulatedNodesFormIntraAndInterRings) {
  auto& rt = Runtime::current();
  const int size = rt.size();
  for (int g = 1; g <= size; ++g) {
    if (size % g) continue;
    Topology t = Topology::detect(rt.world(), std::to_string(g).c_str());
    ASSERT_EQ(t.ranks_per_node, g);
    ASSERT_EQ(t.nodes, size / g);
    // Intra-node group: same node; inter-node group: same local index.
    MPI_Comm intra, inter;
    MPI_Comm_split(rt.world(), t.node, t.local, &intra);
    MPI_Comm_split(rt.world(), t.local, t.node, &inter);
    int isz = 0, irk = 0, osz = 0, ork = 0;
    MPI_Comm_size(intra, &isz);
    MPI_Comm_rank(intra, &irk);
    MPI_Comm_size(inter, &osz);
    MPI_Comm_rank(inter, &ork);
    EXPECT_EQ(isz, g);
    EXPECT_EQ(irk, t.local);
    EXPECT_EQ(osz, size / g);
    EXPECT_EQ(ork, t.node);
    // Sum of world ranks over the intra ring = node's ranks node*g .. node*g+g-1.
    int mine = t.rank, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, intra);
    EXPECT_EQ(sum, t.node * g * g + g * (g - 1) / 2);
    MPI_Comm_free(&intra);
    MPI_Comm_free(&inter);
  }
}

// Waits spin when every rank of the node has a core, and yield when ranks
// share cores: the cores are the union of the node's ranks' CPU affinities.
TEST(Topology, WaitModeFollowsTheCoresTheRanksHave) {
  auto& rt = Runtime::current();
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_GE(rt.node_cores(), CPU_COUNT(&mine));  // the union holds this rank's own CPUs
  const char* env = std::getenv("BURST_WAIT");
  if (env == nullptr || std::string(env) == "auto")
    EXPECT_EQ(wait_mode(), rt.hw_local_size() > rt.node_cores() ? WaitMode::Yield : WaitMode::Spin)
        << rt.hw_local_size() << " ranks, " << rt.node_cores() << " cores";
  // The override, and a value it refuses (collective: every rank sees the same environment).
  const WaitMode before = wait_mode();
  setenv("BURST_WAIT", "nap", 1);
  EXPECT_EQ(configure_wait_mode(rt.world()), rt.node_cores());
  EXPECT_EQ(wait_mode(), WaitMode::Nap);
  setenv("BURST_WAIT", "spin", 1);
  configure_wait_mode(rt.world());
  EXPECT_EQ(wait_mode(), WaitMode::Spin);
  setenv("BURST_WAIT", "yield", 1);
  configure_wait_mode(rt.world());
  EXPECT_EQ(wait_mode(), WaitMode::Yield);
  EXPECT_STREQ(wait_mode_name(WaitMode::Yield), "yield");
  setenv("BURST_WAIT", "fast", 1);
  try {
    configure_wait_mode(rt.world());
    ADD_FAILURE() << "BURST_WAIT=fast was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_STREQ(e.what(), "BURST_WAIT='fast': expected spin, yield, nap or auto");
  }
  if (env) setenv("BURST_WAIT", env, 1);
  else unsetenv("BURST_WAIT");
  set_wait_mode(before);
}

// The communicator's collectives (non-blocking, completed by the bounded
// wait) give the same results in every wait mode, at every rank count.
TEST(Topology, CollectivesCompleteInEveryWaitMode) {
  auto& rt = Runtime::current();
  const WaitMode before = wait_mode();
  auto c = Communicator::create(rt.world(), "wait_modes");
  const int P = c->size(), me = c->rank();
  const size_t chunk = 3;
  for (WaitMode m : {WaitMode::Spin, WaitMode::Yield, WaitMode::Nap}) {
    set_wait_mode(m);
    SCOPED_TRACE(wait_mode_name(m));
    ByteView send("send", chunk * size_t(P)), recv("recv", chunk * size_t(P));
    auto hs = Kokkos::create_mirror_view(send);
    for (int j = 0; j < P; ++j)
      for (size_t b = 0; b < chunk; ++b) hs(size_t(j) * chunk + b) = static_cast<unsigned char>(me * 16 + j);
    Kokkos::deep_copy(send, hs);
    c->all_to_all(send, recv);
    auto hr = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), recv);
    for (int j = 0; j < P; ++j) EXPECT_EQ(int(hr(size_t(j) * chunk + chunk - 1)), j * 16 + me) << "all-to-all from " << j;

    ByteView one("one", chunk), all("all", chunk * size_t(P));
    Kokkos::deep_copy(one, static_cast<unsigned char>(me + 1));
    c->all_gather(one, all);
    auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), all);
    for (int j = 0; j < P; ++j) EXPECT_EQ(int(ha(size_t(j) * chunk)), j + 1) << "all-gather from " << j;
    // Chunks of 2-, 4- and 8-byte words (the MPI backend gathers them as such): every byte in place.
    for (size_t wide : {2, 12, 24}) {
      ByteView o("o", wide), a("a", wide * size_t(P));
      auto ho = Kokkos::create_mirror_view(o);
      for (size_t b = 0; b < wide; ++b) ho(b) = static_cast<unsigned char>(me * 32 + int(b));
      Kokkos::deep_copy(o, ho);
      c->all_gather(o, a);
      auto hg = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
      for (int j = 0; j < P; ++j)
        for (size_t b = 0; b < wide; ++b)
          ASSERT_EQ(int(hg(size_t(j) * wide + b)), (j * 32 + int(b)) % 256) << "all-gather of " << wide << " bytes from " << j;
    }

    Kokkos::View<float*, Layout, DeviceMem> rs("rs", 2 * size_t(P)), rr("rr", 2);
    auto hrs = Kokkos::create_mirror_view(rs);
    for (int i = 0; i < 2 * P; ++i) hrs(size_t(i)) = float(me + i);
    Kokkos::deep_copy(rs, hrs);
    c->reduce_scatter_sum(rs, rr);
    auto hrr = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), rr);
    for (int k = 0; k < 2; ++k) EXPECT_EQ(hrr(size_t(k)), float(P * (2 * me + k) + P * (P - 1) / 2)) << "reduce-scatter " << k;

    Kokkos::View<double*, Layout, DeviceMem> ar("ar", 5);
    Kokkos::deep_copy(ar, double(me + 1));
    c->all_reduce_sum(ar);
    auto har = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ar);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(har(size_t(i)), double(P * (P + 1) / 2)) << "all-reduce";
    c->barrier();
  }
  set_wait_mode(before);
}

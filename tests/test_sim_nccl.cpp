// The simulated NCCL of host builds (comm/sim/) against the semantics it
// claims to keep, so that the NCCL backend's tests over it mean something:
// a rank that sends in one group before receiving in a later one, while its
// peer does the same, deadlocks on NCCL's in-order streams and must deadlock
// here (reported, not hung); one group with both completes; transfers between
// two ranks of a communicator arrive in order; a receive of another size is
// an error; two ranks on one GPU are refused. Runs under BURST_COMM=nccl-sim.
#include "comm/collectives.hpp"
#include "comm/nccl_communicator.hpp"
#include "comm/sim/nccl.h"
#include "core/error.hpp"

#include "tools/mpi_world.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using test_tools::world_rank;
using test_tools::world_size;

// A communicator over `comm` (collective), as the backend makes one.
ncclComm_t make_comm(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm);
  ncclComm_t c = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&c, size, id, rank, &config);
  EXPECT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r) << ": " << ncclGetLastError(nullptr);
  ncclResult_t state = ncclInProgress;
  const auto t0 = std::chrono::steady_clock::now();
  while (state == ncclInProgress && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    ncclCommGetAsyncError(c, &state);
  EXPECT_EQ(state, ncclSuccess) << ncclGetLastError(c);
  return c;
}

cudaStream_t make_stream() {
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, 0), cudaSuccess);
  return s;
}

// The host waits (bounded) for everything issued on `s` so far: "" when it
// completed, else the simulation's message.
std::string finish(cudaStream_t s) {
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  cudaEventRecord(e, s);
  const cudaError_t r = cudaEventSynchronize(e);
  cudaEventDestroy(e);
  return r == cudaSuccess ? "" : cudaGetErrorString(r);
}

// The pairs (0, 1), (2, 3), ...; an odd last rank has no partner (-1).
int partner() {
  const int me = world_rank(), p = me ^ 1;
  return p < world_size() ? p : -1;
}

}  // namespace

TEST(SimNccl, SendThenReceiveInTwoGroupsDeadlocksAsOnNccl) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ncclComm_t c = make_comm(MPI_COMM_WORLD);
  cudaStream_t s = make_stream();
  const int peer = partner();
  if (peer >= 0) {
    std::vector<float> out(1000, float(world_rank())), in(1000, -1.f);
    burst::set_comm_timeout(2);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(out.data(), out.size(), ncclFloat32, peer, c, s), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclRecv(in.data(), in.size(), ncclFloat32, peer, c, s), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, s);
    EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
    const auto t0 = std::chrono::steady_clock::now();
    const cudaError_t r = cudaEventSynchronize(e);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r, cudaErrorLaunchTimeout);
    EXPECT_NE(std::string(cudaGetErrorString(r)).find("deadlocks"), std::string::npos) << cudaGetErrorString(r);
    EXPECT_NE(std::string(cudaGetErrorString(r)).find("comm.timeout_s"), std::string::npos) << cudaGetErrorString(r);
    EXPECT_GE(waited, 1.9);
    EXPECT_LT(waited, 10.0);
    EXPECT_EQ(in[0], -1.f);  // nothing arrived
    burst::set_comm_timeout(0);
    ncclCommAbort(c);
    cudaEventDestroy(e);
  } else {
    ncclCommAbort(c);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SimNccl, SendAndReceiveInOneGroupComplete) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ncclComm_t c = make_comm(MPI_COMM_WORLD);
  cudaStream_t s = make_stream();
  const int P = world_size(), me = world_rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  std::vector<double> out(777, me + 0.5), in(777, -1);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(out.data(), out.size(), ncclFloat64, next, c, s), ncclSuccess);
  ASSERT_EQ(ncclRecv(in.data(), in.size(), ncclFloat64, prev, c, s), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  cudaEventRecord(e, s);
  // The compute stream (the host) waits for it, as the backend's Request::wait does.
  ASSERT_EQ(cudaStreamWaitEvent(burst_sim::compute_stream(), e, 0), cudaSuccess);
  EXPECT_EQ(in[0], prev + 0.5);
  EXPECT_EQ(in[776], prev + 0.5);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  cudaEventDestroy(e);
  ncclCommFinalize(c);
  ncclCommDestroy(c);
}

TEST(SimNccl, TransfersBetweenTwoRanksArriveInOrder) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ncclComm_t c = make_comm(MPI_COMM_WORLD);
  cudaStream_t s = make_stream();
  const int peer = partner();
  std::vector<std::vector<int>> bufs(3, std::vector<int>(100, -1));
  if (peer >= 0) {
    if (world_rank() % 2 == 0) {  // three groups of one send each
      for (int k = 0; k < 3; ++k) {
        std::fill(bufs[size_t(k)].begin(), bufs[size_t(k)].end(), 10 * k + 1);
        ASSERT_EQ(ncclGroupStart(), ncclSuccess);
        ASSERT_EQ(ncclSend(bufs[size_t(k)].data(), 100, ncclInt32, peer, c, s), ncclSuccess);
        ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      }
    } else {  // one group of three receives
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int k = 0; k < 3; ++k) ASSERT_EQ(ncclRecv(bufs[size_t(k)].data(), 100, ncclInt32, peer, c, s), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    }
    ASSERT_EQ(finish(s), "");
    for (int k = 0; k < 3; ++k) EXPECT_EQ(bufs[size_t(k)][99], 10 * k + 1) << k;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Both ways round: a receive smaller or larger than its send is the
// communicator's error, with both sizes named (MPI's truncation of a larger
// message is not fatal: receives are matched and sized first).
TEST(SimNccl, AReceiveOfAnotherSizeIsAnError) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const auto& sizes : {std::pair<size_t, size_t>{100, 200}, std::pair<size_t, size_t>{200, 100}}) {
    const size_t sent = sizes.first, posted = sizes.second;
    SCOPED_TRACE("send " + std::to_string(sent) + " bytes into a receive of " + std::to_string(posted));
    ncclComm_t c = make_comm(MPI_COMM_WORLD);
    cudaStream_t s = make_stream();
    const int peer = partner();
    std::vector<char> buf(200, 0);
    if (peer >= 0) {
      const bool sender = world_rank() % 2 == 0;
      if (sender) ASSERT_EQ(ncclSend(buf.data(), sent, ncclInt8, peer, c, s), ncclSuccess);
      else ASSERT_EQ(ncclRecv(buf.data(), posted, ncclInt8, peer, c, s), ncclSuccess);
      ASSERT_EQ(finish(s), "");
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(c, &state);
      if (sender) {
        EXPECT_EQ(state, ncclSuccess);
      } else {
        const std::string last = ncclGetLastError(c);
        EXPECT_EQ(state, ncclInvalidUsage);
        EXPECT_NE(last.find("received " + std::to_string(sent) + " bytes"), std::string::npos) << last;
        EXPECT_NE(last.find("a receive of " + std::to_string(posted)), std::string::npos) << last;
      }
    }
    ncclCommAbort(c);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST(SimNccl, CollectivesSumInRankOrder) {
  ncclComm_t c = make_comm(MPI_COMM_WORLD);
  cudaStream_t s = make_stream();
  const int P = world_size(), me = world_rank();
  // all_reduce in place, reduce_scatter out of place, all_gather in place.
  std::vector<float> a(5, float(me + 1));
  ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, c, s), ncclSuccess);
  std::vector<double> rs(size_t(P) * 3), out(3, -1);
  for (size_t j = 0; j < rs.size(); ++j) rs[j] = me * 100 + double(j);
  ASSERT_EQ(ncclReduceScatter(rs.data(), out.data(), 3, ncclFloat64, ncclSum, c, s), ncclSuccess);
  std::vector<int> g(size_t(P) * 2, -1);
  g[size_t(me) * 2] = me, g[size_t(me) * 2 + 1] = -me;
  ASSERT_EQ(ncclAllGather(g.data() + size_t(me) * 2, g.data(), 2, ncclInt32, c, s), ncclSuccess);
  ASSERT_EQ(finish(s), "");
  EXPECT_EQ(a[4], float(P * (P + 1) / 2));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[size_t(i)], 100.0 * P * (P - 1) / 2 + P * double(me * 3 + i)) << i;
  for (int p = 0; p < P; ++p) EXPECT_EQ(g[size_t(p) * 2 + 1], -p) << p;
  // A reduction of a type it does not sum is refused, not summed as bytes.
  EXPECT_EQ(ncclAllReduce(g.data(), g.data(), 1, ncclInt8, ncclSum, c, s), ncclInvalidArgument);
  ncclCommFinalize(c);
  ncclCommDestroy(c);
}

TEST(SimNccl, TwoRanksOnOneGpuAreRefused) {
  setenv("BURST_SIM_NCCL_SHARED_GPU", "1", 1);
  std::string why;
  const bool ok = burst::nccl_usable(MPI_COMM_WORLD, &why);
  unsetenv("BURST_SIM_NCCL_SHARED_GPU");
  if (world_size() == 1) {
    EXPECT_TRUE(ok) << why;
  } else {
    EXPECT_FALSE(ok);
    EXPECT_NE(why.find("share a GPU"), std::string::npos) << why;
  }
  EXPECT_TRUE(burst::nccl_usable(MPI_COMM_WORLD, &why)) << why;
}

// Collectives on Kokkos views over MPI. Device views go through a host
// staging copy unless the MPI is CUDA-aware (the NCCL backend replaces this
// on GPU builds). Bytes are counted at the transport call.
//
// Every collective here is bounded in time: it is started non-blocking and
// polled until it completes or comm_timeout() seconds pass, and then throws
// Error(Comm) naming the collective. A rank that died or stalls (SIGSTOP, a
// hung device) would otherwise leave the others blocked inside MPI forever.
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace burst {

// The MPI type of an element. Types MPI has no arithmetic for (bf16) move as
// same-sized unsigned integers: fine for (all-)gathers, and the sums below
// refuse them at compile time (a count of elements sent as MPI_BYTE would
// move half of a bf16 buffer). Any other type is a compile error.
template <class T> MPI_Datatype mpi_type() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same<U, float>::value) return MPI_FLOAT;
  else if constexpr (std::is_same<U, double>::value) return MPI_DOUBLE;
  else if constexpr (std::is_integral<U>::value && std::is_signed<U>::value && sizeof(U) == 8) return MPI_INT64_T;
  else if constexpr (std::is_integral<U>::value && std::is_signed<U>::value && sizeof(U) == 4) return MPI_INT32_T;
  else if constexpr (std::is_integral<U>::value && std::is_unsigned<U>::value && sizeof(U) == 8) return MPI_UINT64_T;
  else if constexpr (std::is_integral<U>::value && std::is_unsigned<U>::value && sizeof(U) == 4) return MPI_UINT32_T;
  else if constexpr (sizeof(U) == 2) return MPI_UINT16_T;  // bf16, int16, uint16: moved, never summed
  else if constexpr (sizeof(U) == 1) return MPI_BYTE;
  else static_assert(sizeof(U) == 0, "mpi_type: no MPI type for this element");
}
template <class T> constexpr bool mpi_summable() { return std::is_arithmetic<T>::value && sizeof(T) >= 4; }

// Bytes handed to MPI by this process, all collectives together.
std::int64_t& mpi_bytes_sent();

// The longest a collective waits for the other ranks, in seconds (0 = no
// bound). The trainer sets it from comm.timeout_s; one value per process.
void set_comm_timeout(double seconds);
double comm_timeout();
// The name a timed-out collective gives its bound ("comm.timeout_s").
const char* comm_timeout_name();

// Within its scope the collectives of this process wait at most `seconds`
// (0 = no bound), and a timeout names `name` as the bound: the checkpoint
// barrier, where the other ranks wait for rank 0's write
// (io.checkpoint_timeout_s), not for a step.
class CommTimeoutScope {
 public:
  CommTimeoutScope(double seconds, const char* name);
  ~CommTimeoutScope();
  CommTimeoutScope(const CommTimeoutScope&) = delete;
  CommTimeoutScope& operator=(const CommTimeoutScope&) = delete;

 private:
  double seconds_;
  const char* name_;
};

// How a rank waits for a transfer or collective to complete (MPI_Testall
// drives MPI's progress in every mode):
// - Spin: poll; for ranks that each have a core.
// - Yield: poll, calling sched_yield() between polls, so that a rank sharing
//   the core runs instead (the rank this one waits for, often), and nap (as
//   below) once the wait passes 5 ms (the partner is busy, not off its core);
//   for ranks that share cores. Measured at 4 ranks on 2 cores (NOTES, "Waits
//   that fit the cores, pinned ranks"): a 4-rank all-reduce after 10 ms of compute cost 10.2-12.1 ms per
//   iteration against 18.0-21.5 ms napping, and a 1K-token burst training
//   step 0.073-0.077 s against 0.095 s.
// - Nap: spin briefly, then sleep with a growing nap of at most 1 ms (the
//   engine's only mode before; kept for comparison). A nap only delays the
//   completion: MPICH's non-blocking all-reduce advances one step per poll on
//   each side, and 1 ms naps stretched a 1.4 MB gradient all-reduce between 2
//   ranks on 2 cores from 0.77 to 5.4 ms.
// Chosen per process at start-up (Runtime): Yield when this node has more
// ranks than CPUs in the union of their affinities, else Spin. BURST_WAIT =
// spin | yield | nap | auto overrides it. Spinning naps past 100 ms of
// waiting (a long wait for a stalled or checkpointing rank need not burn a core).
enum class WaitMode { Spin, Yield, Nap };
void set_wait_mode(WaitMode m);
WaitMode wait_mode();
const char* wait_mode_name(WaitMode m);
// Decides the mode for the ranks of `world` (collective over it): BURST_WAIT
// when set (anything but the four is Error(Config)), else from the node's
// ranks and cores as above. Returns the CPUs the node's ranks have.
int configure_wait_mode(MPI_Comm world);

// Completes `req`, or after comm_timeout() seconds ends the job with
// Error(Comm)'s message and MPI_Abort (exit_on_error), without unwinding:
// the request cannot be cancelled and MPI may still write into its buffers.
// `what` names the collective in the message ("gradient all-reduce");
// `why`, when given, says what the wait most likely means instead of the
// generic "one of them died, stalls or took another path" (the ranks that
// wait for rank 0 to write a checkpoint).
void wait_bounded(MPI_Request& req, const char* what, std::int64_t bytes, const char* why = nullptr);
// The same for n requests at once (point-to-point transfers of a ring).
void wait_all_bounded(MPI_Request* reqs, int n, const char* what, std::int64_t bytes, const char* why = nullptr);

void barrier_bounded(MPI_Comm comm, const char* what = "barrier");

// An output file of rank 0 of `comm` (the rank that writes it), checked there
// before any work as core/output_path.hpp's output_path_problem does, and the
// verdict given to every rank: all raise the same Error(Config) (bad input,
// status 2) or none does. A check on every rank could fail on some only
// (node-local paths) and leave the others waiting in the next collective.
void check_output_path_on_root(MPI_Comm comm, const std::string& what, const std::string& path);

// The same for any check made on rank 0: `problem` ("" = none) as rank 0
// found it (the other ranks' argument is ignored) raises Error(Config) on
// every rank of `comm`, or on none.
void check_problem_on_root(MPI_Comm comm, const std::string& problem);

// In-place sum over comm.
template <class T, class... P>
void allreduce_sum(const Kokkos::View<T*, P...>& v, MPI_Comm comm, const char* what = "all-reduce") {
  static_assert(mpi_summable<std::remove_const_t<T>>(), "allreduce_sum: MPI cannot sum this element type");
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1 || v.extent(0) == 0) return;
  using V = Kokkos::View<T*, P...>;
  mpi_bytes_sent() += std::int64_t(v.extent(0) * sizeof(T));
  // MPI counts are int: go in chunks of 2^30 elements.
  auto reduce = [&](T* p, std::int64_t n) {
    for (std::int64_t off = 0; off < n; off += (std::int64_t(1) << 30)) {
      const std::int64_t c = std::min<std::int64_t>(n - off, std::int64_t(1) << 30);
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, p + off, int(c), mpi_type<T>(), MPI_SUM, comm, &req);
      wait_bounded(req, what, c * std::int64_t(sizeof(T)));
    }
  };
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename V::memory_space>::accessible) {
    Kokkos::fence();
    reduce(v.data(), std::int64_t(v.extent(0)));
  } else {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    reduce(h.data(), std::int64_t(h.extent(0)));
    Kokkos::deep_copy(v, h);
  }
}

// Host pointers, equal chunks of `count` elements; bounded like the others.
// all-gather: recv holds size x count, in rank order. reduce-scatter (sum):
// send holds size x count, recv this rank's summed chunk.
template <class T> void allgather_host(const T* send, T* recv, std::int64_t count, MPI_Comm comm, const char* what) {
  BURST_CHECK(count < (std::int64_t(1) << 31), ErrorKind::Internal, what, ": ", count, " elements per rank is over MPI's int");
  mpi_bytes_sent() += count * std::int64_t(sizeof(T));
  MPI_Request req;
  MPI_Iallgather(send, int(count), mpi_type<T>(), recv, int(count), mpi_type<T>(), comm, &req);
  wait_bounded(req, what, count * std::int64_t(sizeof(T)));
}
template <class T> void reduce_scatter_sum_host(const T* send, T* recv, std::int64_t count, MPI_Comm comm, const char* what) {
  static_assert(mpi_summable<T>(), "reduce_scatter_sum_host: MPI cannot sum this element type");
  BURST_CHECK(count < (std::int64_t(1) << 31), ErrorKind::Internal, what, ": ", count, " elements per rank is over MPI's int");
  int size = 1;
  MPI_Comm_size(comm, &size);
  mpi_bytes_sent() += count * std::int64_t(size) * std::int64_t(sizeof(T));
  MPI_Request req;
  MPI_Ireduce_scatter_block(send, recv, int(count), mpi_type<T>(), MPI_SUM, comm, &req);
  wait_bounded(req, what, count * std::int64_t(size) * std::int64_t(sizeof(T)));
}
// Gather of equal chunks to rank 0 (recv: size x count there, unused elsewhere).
template <class T> void gather_host(const T* send, T* recv, std::int64_t count, MPI_Comm comm, const char* what) {
  BURST_CHECK(count < (std::int64_t(1) << 31), ErrorKind::Internal, what, ": ", count, " elements per rank is over MPI's int");
  mpi_bytes_sent() += count * std::int64_t(sizeof(T));
  MPI_Request req;
  MPI_Igather(send, int(count), mpi_type<T>(), recv, int(count), mpi_type<T>(), 0, comm, &req);
  wait_bounded(req, what, count * std::int64_t(sizeof(T)));
}

template <class T> T allreduce_op(T x, MPI_Op op, MPI_Comm comm, const char* what, const char* why = nullptr) {
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, &x, 1, mpi_type<T>(), op, comm, &req);
  wait_bounded(req, what, std::int64_t(sizeof(T)), why);
  return x;
}

template <class T> T allreduce_sum(T x, MPI_Comm comm, const char* what = "all-reduce") {
  return allreduce_op(x, MPI_SUM, comm, what);
}
template <class T> T allreduce_max(T x, MPI_Comm comm, const char* what = "all-reduce") {
  return allreduce_op(x, MPI_MAX, comm, what);
}
template <class T> T allreduce_min(T x, MPI_Comm comm, const char* what = "all-reduce") {
  return allreduce_op(x, MPI_MIN, comm, what);
}

}  // namespace burst

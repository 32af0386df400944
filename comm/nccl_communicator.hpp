// The NCCL backend of Communicator (CUDA builds with BURST_ENABLE_NCCL).
//
// MPI starts the processes and hands out each communicator's ncclUniqueId
// (rank 0 of the group creates it, MPI_Bcast). The communicator owns
// high-priority non-blocking CUDA streams; work is ordered against the
// Kokkos execution space's stream by events in both directions
// (cudaEventRecord on one stream, cudaStreamWaitEvent on the other), so the
// host never waits inside a ring:
//
//   isend / irecv   ncclSend / ncclRecv on the stream of their tag's lane.
//                   A lane is an NCCL communicator of its own (created on the
//                   first use of a tag, collectively: every rank of the group
//                   first uses its tags in the same order, as ring programs
//                   do), so a lane's transfers never queue behind another's.
//                   Inside a lane, posted operations wait until the lane
//                   holds as many receives as sends and then go as one NCCL
//                   group: a ring's "send to next, receive from previous"
//                   (also a send at the end of round t with the receive of
//                   round t+1) cannot deadlock on NCCL's in-order queue.
//                   A wait or test on a request still pending launches its
//                   lane's group as it is.
//   Request::wait   the compute stream waits on the transfer's event (no
//                   host wait); the stall is timed with two events and
//                   added to CommStats as wait time at the next settle.
//   Request::test   cudaEventQuery.
//   collectives     on the group's own stream: all_to_all as grouped
//                   send/recv, all_gather, reduce_scatter, all_reduce;
//                   the caller's next kernel waits on their event (the
//                   stall timed as for Request::wait).
//   barrier / synchronize   the only host waits: bounded by comm_timeout()
//                   (comm.timeout_s), polling cudaEventQuery and
//                   ncclCommGetAsyncError; on timeout every NCCL
//                   communicator of this object is aborted (ncclCommAbort)
//                   and Error(Comm) names the operation.
//
// NCCL communicators are created non-blocking (ncclConfig_t::blocking = 0),
// so creation and group launches are bounded the same way.
//
// Bytes are counted in exactly the places the MPI backend counts them, with
// the same values (a test compares the two).
#pragma once

#include "comm/communicator.hpp"

#include <memory>
#include <string>

namespace burst {

// Can NCCL serve `comm`? It needs a CUDA device per rank, not shared with
// another rank of the same node (NCCL refuses two ranks on one GPU; the
// devices are compared by PCI bus id, so CUDA_VISIBLE_DEVICES tricks are
// seen through). Collective over comm; the same answer on every rank.
// `why` (may be null) says what failed.
bool nccl_usable(MPI_Comm comm, std::string* why);

// An NCCL communicator over a duplicate of `comm` (collective).
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, const std::string& group);

}  // namespace burst

// Process start-up and shutdown: MPI, the node topology, the GPU each rank
// binds to (by node-local rank), Kokkos, and the memory tracker.
//
//   burst::Runtime rt(&argc, &argv);   // MPI_Init, topology, device, Kokkos
//   rt.world(); rt.topology(); rt.device_id();
//
// The world communicator is MPI_COMM_WORLD reordered so that the ranks of one
// node are contiguous (rank = node * L + local), whatever placement the
// launcher used.
#pragma once

#include "comm/topology.hpp"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>

namespace burst {

class Runtime {
 public:
  // command_digest: this process's command line and the files it names
  // (cli::command_digest); the ranks compare theirs first thing, and a
  // difference is bad input (status 2) on every rank. Every rank passing 0
  // (the test binaries) compares nothing.
  Runtime(int* argc, char*** argv, std::uint64_t command_digest = 0);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  static Runtime& current();  // the live runtime; error if none

  MPI_Comm world() const { return world_; }
  int rank() const { return topo_.rank; }
  int size() const { return topo_.world_size; }
  const Topology& topology() const { return topo_; }
  // Hardware node-local rank and size (the shared-memory split), which pick
  // the GPU, independent of any BURST_GPUS_PER_NODE emulation.
  int hw_local_rank() const { return hw_local_rank_; }
  int hw_local_size() const { return hw_local_size_; }
  int device_id() const { return device_id_; }      // -1 on host builds
  int device_count() const { return device_count_; }  // 0 on host builds
  // CPUs in the union of this node's ranks' affinities (collectives.hpp,
  // configure_wait_mode: more ranks than these share cores and yield in waits).
  int node_cores() const { return node_cores_; }
  std::string hostname() const;

 private:
  MPI_Comm world_ = MPI_COMM_NULL;
  Topology topo_;
  int hw_local_rank_ = 0, hw_local_size_ = 1;
  int device_id_ = -1, device_count_ = 0;
  int node_cores_ = 0;
};

// The launcher's rank before MPI is up (PMI_RANK, OMPI_COMM_WORLD_RANK,
// SLURM_PROCID, PMIX_RANK), or 0. Used to print CLI errors once.
int launcher_rank();
// The number of processes the launcher started (PMI_SIZE,
// OMPI_COMM_WORLD_SIZE, SLURM_STEP_NUM_TASKS), or 1.
int launcher_size();

// An error found before the runtime (a CLI11 parse error, an unknown
// subcommand), with `message` its text and `report` what rank 0 prints for
// it when every rank has it (CLI11's own wording): returns the exit status.
// Alone (launcher_size() 1) it only reports on launcher rank 0, as the error
// is the same everywhere. Under a launcher of several processes it starts
// MPI and takes part in the runtime's start-up handshake (the first
// collective of every process): when every rank failed, rank 0 reports and
// all return `code`; when only some did, each of those prints
// "burst: error (rank N): message" and every rank ends with `code` (or 2),
// so the others never wait for a rank that is gone.
int startup_error(int* argc, char*** argv, std::uint64_t command_digest, int code, const std::string& message,
                  const std::function<void()>& report);

// Print an error and leave: a collective error (bad input, the same on every
// rank, status 2; or a fault every rank found at once, Error::collective) is
// reported by rank 0 and ends with its status on every rank; any other error
// is reported by the rank that hit it and aborts the job. Whether a
// collective error really was found by every rank is agreed first (an
// MPI_Ibarrier of the failing ranks, at most 10 s, or comm.timeout_s when
// shorter): a rank whose peers do not all arrive (bad input on one rank only:
// its environment, a file it alone read) reports it as its own and aborts.
[[noreturn]] void exit_on_error(const std::exception& e);
// MPI_Abort(MPI_COMM_WORLD, code) after a pause of 0.3 s, so that the
// launcher forwards what this rank wrote to stdout / stderr first. The
// process ends with `code` without running static destructors (MPI_Abort
// ends it by exit(), which once freed Kokkos under a main thread still
// computing: a segfault instead of the status), from any thread.
[[noreturn]] void abort_job(int code);

}  // namespace burst

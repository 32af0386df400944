// The NCCL calls comm/nccl_communicator.cpp makes, simulated over MPI on the
// host (see cuda_runtime.h beside this file and sim_nccl.cpp). What is kept
// of NCCL's semantics, so that the backend's ordering is tested as NCCL
// would run it:
// - every operation runs on its stream, in issue order: a stream's next
//   group starts only when the one before it is complete;
// - the operations of one group run together; a send completes only once
//   its receiver has posted the matching receive (MPI_Issend), so a rank
//   that sends in one group before receiving in a later one, while its peer
//   does the same, deadlocks here as it does on NCCL;
// - between two ranks of one communicator, sends and receives match in
//   order; a receive of another size than the send is an error (NCCL: the
//   hang or garbage of undefined behaviour);
// - creation and group launches are non-blocking (ncclInProgress until
//   ncclCommGetAsyncError says otherwise), as with ncclConfig_t::blocking = 0.
// Collectives are exchanges of whole chunks followed by sums in rank order.
#pragma once

#include <cstddef>

#include "cuda_runtime.h"

namespace burst_sim {
struct Comm;
}

typedef burst_sim::Comm* ncclComm_t;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum { ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclFloat32 = 7, ncclFloat64 = 8 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct {
  int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1}

const char* ncclGetErrorString(ncclResult_t r);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);

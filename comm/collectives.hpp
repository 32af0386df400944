// Collectives on Kokkos views over MPI. Device views go through a host
// staging copy unless the MPI is CUDA-aware (the NCCL backend replaces this
// on GPU builds). Bytes are counted at the transport call.
#pragma once

#include "core/views.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace burst {

template <class T> MPI_Datatype mpi_type() {
  if (std::is_same<T, float>::value) return MPI_FLOAT;
  if (std::is_same<T, double>::value) return MPI_DOUBLE;
  if (std::is_same<T, std::int64_t>::value || std::is_same<T, long>::value) return MPI_INT64_T;
  if (std::is_same<T, std::int32_t>::value) return MPI_INT32_T;
  return MPI_BYTE;
}

// Bytes handed to MPI by this process, all collectives together.
std::int64_t& mpi_bytes_sent();

// In-place sum over comm.
template <class T, class... P> void allreduce_sum(const Kokkos::View<T*, P...>& v, MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1 || v.extent(0) == 0) return;
  using V = Kokkos::View<T*, P...>;
  mpi_bytes_sent() += std::int64_t(v.extent(0) * sizeof(T));
  // MPI counts are int: go in chunks of 2^30 elements.
  auto reduce = [&](T* p, std::int64_t n) {
    for (std::int64_t off = 0; off < n; off += (std::int64_t(1) << 30)) {
      const std::int64_t c = std::min<std::int64_t>(n - off, std::int64_t(1) << 30);
      MPI_Allreduce(MPI_IN_PLACE, p + off, int(c), mpi_type<T>(), MPI_SUM, comm);
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

template <class T> T allreduce_sum(T x, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, mpi_type<T>(), MPI_SUM, comm);
  return x;
}

}  // namespace burst

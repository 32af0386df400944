// View aliases used across the engine. Device = the default execution
// space's memory (CUDA on GPU builds, host otherwise); Host = HostSpace.
#pragma once

#include "core/bf16.hpp"
#include "core/kokkos_compat.hpp"

namespace burst {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using DeviceMem = ExecSpace::memory_space;
using HostExec = Kokkos::DefaultHostExecutionSpace;
using HostMem = Kokkos::HostSpace;
using Layout = Kokkos::LayoutRight;  // row-major, as the tensors of the model

template <class T, class Mem = DeviceMem> using View1 = Kokkos::View<T*, Layout, Mem>;
template <class T, class Mem = DeviceMem> using View2 = Kokkos::View<T**, Layout, Mem>;
template <class T, class Mem = DeviceMem> using View3 = Kokkos::View<T***, Layout, Mem>;
template <class T, class Mem = DeviceMem> using View4 = Kokkos::View<T****, Layout, Mem>;

template <class T> using HView1 = View1<T, HostMem>;
template <class T> using HView2 = View2<T, HostMem>;
template <class T> using HView3 = View3<T, HostMem>;

// Unmanaged host view over caller memory (HDF5 buffers, MPI payloads).
template <class T> using HUnmanaged1 = Kokkos::View<T*, Layout, HostMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace burst

// View aliases used across the engine. Device = the default execution
// space's memory (CUDA on GPU builds, host otherwise); Host = HostSpace.
#pragma once

#include "core/bf16.hpp"
#include "core/kokkos_compat.hpp"

#include <limits>
#include <string>
#include <type_traits>

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

// BURST_POISON=1 in the environment (the test suite sets it): buffers made
// by uninit_view are filled with NaN (integers: -1), so a kernel that reads
// an element nobody wrote shows in the results instead of reading zeros.
bool poison_uninitialized();  // defined in core/memory.cpp

// Whether an execution space runs on the host's cores (the kernels that
// loop differently there: attention's team sizes, the elementwise kernels'
// rows, RMSNorm's column blocks).
template <class Exec> constexpr bool is_host_exec() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;
}

template <class T> T poison_value() {
  if constexpr (std::numeric_limits<T>::has_quiet_NaN) return std::numeric_limits<T>::quiet_NaN();
  else if constexpr (std::is_same<T, bf16>::value) return bf16(std::numeric_limits<float>::quiet_NaN());
  else return T(-1);
}

// A view allocated without initialisation (no fill kernel): for buffers the
// next kernel overwrites whole. Poisoned under BURST_POISON=1.
template <class V, class... Dims> V uninit_view(const std::string& label, Dims... dims) {
  V v(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), dims...);
  if (poison_uninitialized()) Kokkos::deep_copy(v, poison_value<typename V::non_const_value_type>());
  return v;
}

}  // namespace burst

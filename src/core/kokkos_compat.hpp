// The one place where Kokkos spellings that differ between 3.4 and 4.x live.
// Everything else in the engine includes this instead of naming versioned APIs.
#pragma once

#include <Kokkos_Core.hpp>

#include <string>

#ifndef KOKKOS_VERSION
#error "Kokkos_Core.hpp did not define KOKKOS_VERSION"
#endif

namespace burst::kx {

// Math functions moved from Kokkos::Experimental to Kokkos in 3.7.
#if KOKKOS_VERSION >= 30700
using Kokkos::erf;
using Kokkos::exp;
using Kokkos::expm1;
using Kokkos::fabs;
using Kokkos::fmax;
using Kokkos::fmin;
using Kokkos::isfinite;
using Kokkos::isinf;
using Kokkos::isnan;
using Kokkos::log;
using Kokkos::log1p;
using Kokkos::pow;
using Kokkos::sqrt;
using Kokkos::tanh;
using Kokkos::cos;
using Kokkos::sin;
#else
using Kokkos::Experimental::erf;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::expm1;
using Kokkos::Experimental::fabs;
using Kokkos::Experimental::fmax;
using Kokkos::Experimental::fmin;
using Kokkos::Experimental::isfinite;
using Kokkos::Experimental::isinf;
using Kokkos::Experimental::isnan;
using Kokkos::Experimental::log;
using Kokkos::Experimental::log1p;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
using Kokkos::Experimental::cos;
using Kokkos::Experimental::sin;
#endif

// Kokkos::initialize: InitArguments (3.x) vs InitializationSettings (4.x).
inline void initialize(int num_threads, int device_id) {
#if KOKKOS_VERSION >= 40000
  Kokkos::InitializationSettings s;
  if (num_threads > 0) s.set_num_threads(num_threads);
  if (device_id >= 0) s.set_device_id(device_id);
  Kokkos::initialize(s);
#else
  Kokkos::InitArguments a;
  a.num_threads = num_threads > 0 ? num_threads : -1;
  a.device_id = device_id;
  a.disable_warnings = true;
  Kokkos::initialize(a);
#endif
}

// Named profiling regions (Kokkos Tools).
inline void push_region(const std::string& name) { Kokkos::Tools::pushRegion(name); }
inline void pop_region() { Kokkos::Tools::popRegion(); }

// Allocation callbacks of the Kokkos Tools interface.
using SpaceHandle = Kokkos::Tools::SpaceHandle;
using AllocateFn = Kokkos_Profiling_allocateDataFunction;  // the C typedefs exist in 3.x and 4.x
using DeallocateFn = Kokkos_Profiling_deallocateDataFunction;
struct AllocCallbacks {
  AllocateFn allocate = nullptr;
  DeallocateFn deallocate = nullptr;
};
inline AllocCallbacks current_alloc_callbacks() {
  auto cb = Kokkos::Tools::Experimental::get_callbacks();
  return {cb.allocate_data, cb.deallocate_data};
}
inline void set_alloc_callbacks(AllocCallbacks c) {
  Kokkos::Tools::Experimental::set_allocate_data_callback(c.allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(c.deallocate);
}

inline std::string version_string() {
  const int patch = KOKKOS_VERSION % 100;  // Kokkos writes 3.4.01
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string((KOKKOS_VERSION / 100) % 100) + "." +
         (patch < 10 ? "0" : "") + std::to_string(patch);
}

}  // namespace burst::kx

#include "core/timer.hpp"

#include "core/kokkos_compat.hpp"

#ifdef BURST_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace burst {

void region_push(const std::string& name) {
  kx::push_region(name);
#ifdef BURST_HAVE_NVTX
  nvtxRangePushA(name.c_str());
#endif
}

void region_pop() {
#ifdef BURST_HAVE_NVTX
  nvtxRangePop();
#endif
  kx::pop_region();
}

Phase::Phase(const std::string& name, PhaseTimes* times, bool fence) : name_(name), times_(times), fence_(fence) {
  if (fence_) Kokkos::fence();
  region_push(name_);
  timer_.reset();
}

Phase::~Phase() {
  if (fence_) Kokkos::fence();
  double s = timer_.seconds();
  region_pop();
  if (times_) times_->add(name_, s);
}

}  // namespace burst

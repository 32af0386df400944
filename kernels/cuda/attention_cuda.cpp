// Host side of the CUDA attention bridge (kernels/cuda/attention_cuda.hpp):
// error translation, the kept workspace, the dispatch counter.
#include "kernels/attention.hpp"

#include <Kokkos_Core.hpp>

namespace burst::kernels::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    BURST_FAIL(ErrorKind::Internal, what, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

namespace {
struct Workspace {
  Kokkos::View<unsigned char*, Kokkos::CudaSpace> buf;
  bool hooked = false;
};
Workspace& ws_state() {
  static Workspace w;
  return w;
}
}  // namespace

void* workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  Workspace& w = ws_state();
  if (!w.hooked) {  // a device view must not outlive Kokkos
    Kokkos::push_finalize_hook([] { ws_state().buf = Kokkos::View<unsigned char*, Kokkos::CudaSpace>(); });
    w.hooked = true;
  }
  if (w.buf.extent(0) < bytes) {
    // The old buffer may still be read by kernels queued on the stream.
    Kokkos::fence();
    w.buf = Kokkos::View<unsigned char*, Kokkos::CudaSpace>();
    w.buf = Kokkos::View<unsigned char*, Kokkos::CudaSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "work/attention_cuda_ws"),
                                                           bytes < 4096 ? 4096 : 2 * bytes);
  }
  return w.buf.data();
}

long& dispatch_count() {
  static long count = 0;
  return count;
}

}  // namespace burst::kernels::cuda

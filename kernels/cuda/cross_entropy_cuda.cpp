// Host side of the CUDA cross-entropy bridge (kernels/cuda/cross_entropy_cuda.hpp).
#include "kernels/cross_entropy.hpp"

#include <Kokkos_Core.hpp>

namespace burst::kernels::cuda {

namespace {
Kokkos::View<ce::CeAccum*, Kokkos::CudaSpace>& accum_view() {
  static Kokkos::View<ce::CeAccum*, Kokkos::CudaSpace> v;
  return v;
}
}  // namespace

ce::CeAccum* ce_accum() {
  auto& v = accum_view();
  if (v.extent(0) == 0) {
    v = Kokkos::View<ce::CeAccum*, Kokkos::CudaSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "work/ce_accum"), 1);
    Kokkos::push_finalize_hook([] { accum_view() = Kokkos::View<ce::CeAccum*, Kokkos::CudaSpace>(); });
  }
  return v.data();
}

void ce_check(cudaError_t e) {
  if (e != cudaSuccess)
    BURST_FAIL(ErrorKind::Internal, "cross-entropy (kernels/cuda) failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

void ce_finish(ce::CeAccum* acc, long V, double& sum, long& valid) {
  ce::CeAccum h{};
  const cudaStream_t st = Kokkos::Cuda().cuda_stream();
  ce_check(cudaMemcpyAsync(&h, acc, sizeof h, cudaMemcpyDeviceToHost, st));
  ce_check(cudaStreamSynchronize(st));
  const long bad = h.bad_row == ~0ull ? -1 : long(h.bad_row) - 1;
  BURST_CHECK_INPUT(bad < 0, "cross_entropy: target at row ", bad, " is outside [0, ", V, ") and is not the ignore index ",
                    kIgnoreIndex);
  sum = h.loss_sum;
  valid = long(h.valid);
}

}  // namespace burst::kernels::cuda

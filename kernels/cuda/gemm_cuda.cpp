// Host side of the CUDA GEMM bridge (kernels/cuda/gemm_cuda.hpp): the
// finalize hook that frees cuBLASLt's handle and workspace, error messages.
#include "kernels/gemm.hpp"

#include <Kokkos_Core.hpp>

namespace burst::kernels::cuda {

void gemm_lt_finalize_hook() {
  static bool hooked = false;
  if (hooked) return;
  Kokkos::push_finalize_hook([] { lt::release(); });  // before Kokkos tears the CUDA context down
  hooked = true;
}

void gemm_lt_fail(const char* msg, const lt::Gemm& g) {
  static const char* names[] = {"fp32", "bf16", "fp64"};
  BURST_FAIL(ErrorKind::Internal, "gemm (cuBLASLt, kernels/cuda): ", msg, " for ", g.ta, g.tb, " m=", g.m, " n=", g.n,
             " k=", g.k, " lda=", g.lda, " ldb=", g.ldb, " ldc=", g.ldc, " types ", names[g.a_type], " x ",
             names[g.b_type], " -> ", names[g.c_type]);
}

}  // namespace burst::kernels::cuda

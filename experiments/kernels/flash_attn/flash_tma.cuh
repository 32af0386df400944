// Host side of the TMA kernels (forward variant 7, backward variant 7):
// cuTensorMapEncodeTiled through the runtime's driver entry point, so no
// -lcuda link is needed (cudaGetDriverEntryPoint is deprecated in CUDA 13:
// the ByVersion form). nullptr when the driver does not provide it; callers
// then return cudaErrorNotSupported.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums only
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace burst_fa {
namespace dev {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace dev
}  // namespace burst_fa

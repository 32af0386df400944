// The engine's TMA forward kinds and their tiles, one table for the plain
// forward (flash_fwd_wgmma_d*.cu, MERGE = false) and the ring's merging one
// (flash_fwd_wgmma_merge_d*.cu, MERGE = true), so that both run the same
// kernel for a kind. Head dim 128: kWgTma176 lab variant 17, kWgTma12
// variant 12, kWgTma variant 10; head dim 64: kWgTma12 variant 9 with 12's
// changes, kWgTma variant 9. Another kind: cudaErrorInvalidValue.
#pragma once

#include "flash_api.cuh"
#include "flash_fwd_tma_ws.cuh"

namespace burst {
namespace fa {
namespace dev {

template <int D, bool MERGE> cudaError_t launch_fwd_tma_kind(const FwdParams& p, int kind, cudaStream_t st) {
  static_assert(D == 64 || D == 128, "the TMA forward is built for head dims 64 and 128");
  if constexpr (D == 128) {
    if (kind == kWgTma12) return launch_fwd_tma_ws<128, 128, 3, 2 | kFwdDiet, MERGE>(p, st);  // lab variant 12
    if (kind == kWgTma176) return launch_fwd_tma_ws<128, 176, 2, 2 | kFwdDiet, MERGE>(p, st);  // lab variant 17
    if (kind == kWgTma) return launch_fwd_tma_ws<128, 128, 3, 2, MERGE>(p, st);  // lab variant 10
  } else {
    if (kind == kWgTma12) return launch_fwd_tma_ws<64, 128, 2, 2 | kFwdDiet, MERGE>(p, st);  // variant 9 + 12's changes
    if (kind == kWgTma) return launch_fwd_tma_ws<64, 128, 2, 2, MERGE>(p, st);  // lab variant 9
  }
  return cudaErrorInvalidValue;
}

}  // namespace dev
}  // namespace fa
}  // namespace burst

// The CUDA backend of kernels/attention.hpp (the tpl layer of the
// kokkos-kernels spec / impl / tpl split, as kernels/gemm.hpp describes):
// flash_attention_forward / flash_attention_backward hand bf16 views in CUDA
// memory to the tensor-core kernels of kernels/cuda/flash_attn.h when
// flash_usable() says the call fits them (head dim 64 or 128, both sides
// non-empty, contiguous views aligned as the kernels read them, scale > 0);
// every other call runs the portable kernel. Included by
// kernels/attention.hpp only, on CUDA builds.
//
// What the bridge does per call: AttnMask -> fa::Mask (device pointers of the
// position and document-id views), BackwardAccumulate -> accumulate_dq /
// accumulate_dkdv, a workspace for the position masks' chunk bounds (a
// device buffer kept between calls, grown when needed), and the default
// Kokkos::Cuda instance's stream. The kernels are launched asynchronously
// on that stream; only the tile count of a position mask waits (see
// impl::count_visible_tiles). Every CUDA return code is checked and turned
// into a burst::Error naming the call.
#pragma once

#ifndef BURST_ATTENTION_HPP_INCLUDES_CUDA
#error "include kernels/attention.hpp, not kernels/cuda/attention_cuda.hpp"
#endif

#include "core/env.hpp"
#include "kernels/cuda/flash_attn.h"
#include "kernels/cuda/tpl_common.hpp"

#include <cstdint>
#include <limits>
#include <type_traits>

namespace burst::kernels::cuda {

// burst::bf16 views are handed to the kernels as __nv_bfloat16: same size,
// alignment and bit layout (IEEE bfloat16 in 16 bits: sign, 8 exponent, 7
// mantissa bits, the upper half of a float).
static_assert(sizeof(bf16) == sizeof(__nv_bfloat16) && alignof(bf16) == alignof(__nv_bfloat16),
              "burst::bf16 must be layout-compatible with __nv_bfloat16");
static_assert(std::is_trivially_copyable<bf16>::value && std::is_standard_layout<bf16>::value,
              "burst::bf16 must be a plain 16-bit value");
// AttnMask positions are `long`, the kernels' `long long`.
static_assert(sizeof(long) == sizeof(long long), "positions: long must be 64 bits");

// How many forward + backward calls went to the CUDA kernels (tests check
// that the dispatch happened).
long& dispatch_count();

template <class T, class Mem> constexpr bool dispatches() { return is_bf16<T>() && in_cuda_mem<Mem>(); }

template <class V> bool contiguous_aligned(const V& v, size_t align) {
  return v.span_is_contiguous() && reinterpret_cast<std::uintptr_t>(v.data()) % align == 0;
}

inline bool fits_int(long x) { return x >= 0 && x <= long(std::numeric_limits<int>::max()); }

// Does this call fit the CUDA kernels? (Shapes were checked by the caller.)
// The kernels read Q, K, V, dO with 16-byte copies, write fp32 outputs as
// float2 and read lse / D 4 bytes at a time.
template <class QV, class KV> bool inputs_usable(const QV& q, const KV& k, const KV& v, float scale) {
  const long sq = q.extent(0), n = q.extent(1), d = q.extent(2), sk = k.extent(0), nkv = k.extent(1);
  if (!(d == 64 || d == 128) || sq <= 0 || sk <= 0 || n <= 0 || nkv <= 0) return false;
  if (!fits_int(sq) || !fits_int(sk) || n > 65535 || !(scale > 0.0f) || !(scale < std::numeric_limits<float>::infinity()))
    return false;
  return contiguous_aligned(q, 16) && contiguous_aligned(k, 16) && contiguous_aligned(v, 16);
}

// Forward: O and lse.
template <class QV, class KV, class OV, class LV>
bool flash_usable(const QV& q, const KV& k, const KV& v, float scale, const OV& o, const LV& lse) {
  return inputs_usable(q, k, v, scale) && contiguous_aligned(o, 8) && contiguous_aligned(lse, 4);
}

// Backward: dQ, dK, dV, dO, lse, D.
template <class QV, class KV, class GV, class LV>
bool flash_usable(const QV& q, const KV& k, const KV& v, float scale, const GV& dq, const GV& dk, const GV& dv,
                  const QV& dout, const LV& lse, const LV& D) {
  return inputs_usable(q, k, v, scale) && contiguous_aligned(dq, 8) && contiguous_aligned(dk, 8) &&
         contiguous_aligned(dv, 8) && contiguous_aligned(dout, 16) && contiguous_aligned(lse, 4) &&
         contiguous_aligned(D, 4);
}

template <class Mem> fa::Mask to_fa_mask(const AttnMask<Mem>& m, long sq, long sk) {
  fa::Mask r;
  const auto pos = [](const Kokkos::View<const long*, Mem>& p) { return reinterpret_cast<const long long*>(p.data()); };
  switch (m.kind) {
    case MaskKind::None: return fa::Mask::none();
    case MaskKind::Causal: return fa::Mask::causal(m.diag_offset);
    case MaskKind::Window: r = fa::Mask::sliding_window(m.window, pos(m.q_pos), pos(m.k_pos)); break;
    case MaskKind::Document: r = fa::Mask::document(m.q_doc.data(), m.k_doc.data(), pos(m.q_pos), pos(m.k_pos)); break;
    case MaskKind::General:
      r = fa::Mask::general(m.is_causal, m.window, m.same_doc, m.q_doc.data(), m.k_doc.data(), pos(m.q_pos),
                            pos(m.k_pos));
      break;
  }
  BURST_CHECK_INPUT(m.q_pos.span_is_contiguous() && m.k_pos.span_is_contiguous() && long(m.q_pos.extent(0)) == sq &&
                        long(m.k_pos.extent(0)) == sk,
                    "attention (CUDA): mask positions must be contiguous views of ", sq, " and ", sk, " entries");
  if (m.kind != MaskKind::Window)
    BURST_CHECK_INPUT(m.q_doc.span_is_contiguous() && m.k_doc.span_is_contiguous() && long(m.q_doc.extent(0)) == sq &&
                          long(m.k_doc.extent(0)) == sk,
                      "attention (CUDA): document ids must be contiguous views of ", sq, " and ", sk, " entries");
  return r;
}

inline const __nv_bfloat16* nv(const bf16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }

inline fa::AttnShape shape_of(long sq, long sk, long n, long nkv, long d) {
  fa::AttnShape s;
  s.sq = int(sq), s.sk = int(sk), s.n = int(n), s.n_kv = int(nkv), s.d = int(d);
  return s;
}

template <class T, class Mem>
long flash_forward(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                   Kokkos::View<const T***, Layout, Mem> v, const AttnMask<Mem>& mask, float scale,
                   Kokkos::View<float***, Layout, Mem> o, Kokkos::View<float**, Layout, Mem> lse, AttnTiles tiles) {
  const long sq = q.extent(0), n = q.extent(1), d = q.extent(2), sk = k.extent(0), nkv = k.extent(1);
  const fa::AttnShape s = shape_of(sq, sk, n, nkv, d);
  const fa::Mask m = to_fa_mask(mask, sq, sk);
  void* ws = workspace(fa::flash_workspace_bytes(s, m));
  const cudaStream_t st = Kokkos::Cuda().cuda_stream();
  check(fa::flash_forward(s, nv(q.data()), nv(k.data()), nv(v.data()), m, scale, o.data(), nullptr, lse.data(), ws, st),
        "flash attention forward (kernels/cuda)");
  ++dispatch_count();
  return tiles.count ? impl::count_visible_tiles<Kokkos::Cuda>(mask, sq, sk, n, tiles) : -1;
}

// The forward merged into the running (o, lse) in the kernel's epilogue
// (fa::flash_forward_merge), on by default; BURST_FA_MERGE=0 turns it off
// (flash_attention_forward_merge then writes a partial and merges it in a
// second kernel). Read once.
inline bool forward_merge_enabled() {
  static const bool on = fa_merge_switch();  // core/env.hpp
  return on;
}

template <class T, class Mem>
long flash_forward_merge(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                         Kokkos::View<const T***, Layout, Mem> v, const AttnMask<Mem>& mask, float scale,
                         Kokkos::View<float***, Layout, Mem> o, Kokkos::View<float**, Layout, Mem> lse, AttnTiles tiles) {
  const long sq = q.extent(0), n = q.extent(1), d = q.extent(2), sk = k.extent(0), nkv = k.extent(1);
  const fa::AttnShape s = shape_of(sq, sk, n, nkv, d);
  const fa::Mask m = to_fa_mask(mask, sq, sk);
  void* ws = workspace(fa::flash_workspace_bytes(s, m));
  const cudaStream_t st = Kokkos::Cuda().cuda_stream();
  check(fa::flash_forward_merge(s, nv(q.data()), nv(k.data()), nv(v.data()), m, scale, o.data(), lse.data(), ws, st),
        "flash attention forward, merged (kernels/cuda)");
  ++dispatch_count();
  return tiles.count ? impl::count_visible_tiles<Kokkos::Cuda>(mask, sq, sk, n, tiles) : -1;
}

template <class T, class Mem>
long flash_backward(Kokkos::View<const T***, Layout, Mem> q, Kokkos::View<const T***, Layout, Mem> k,
                    Kokkos::View<const T***, Layout, Mem> v, Kokkos::View<const T***, Layout, Mem> dout,
                    Kokkos::View<const float**, Layout, Mem> lse, Kokkos::View<const float**, Layout, Mem> D,
                    const AttnMask<Mem>& mask, float scale, Kokkos::View<float***, Layout, Mem> dq,
                    Kokkos::View<float***, Layout, Mem> dk, Kokkos::View<float***, Layout, Mem> dv,
                    BackwardAccumulate accumulate, AttnTiles tiles) {
  const long sq = q.extent(0), n = q.extent(1), d = q.extent(2), sk = k.extent(0), nkv = k.extent(1);
  const fa::AttnShape s = shape_of(sq, sk, n, nkv, d);
  const fa::Mask m = to_fa_mask(mask, sq, sk);
  void* ws = workspace(fa::flash_workspace_bytes(s, m));
  const cudaStream_t st = Kokkos::Cuda().cuda_stream();
  check(fa::flash_backward(s, nv(q.data()), nv(k.data()), nv(v.data()), nv(dout.data()), lse.data(), D.data(), m, scale,
                           dq.data(), dk.data(), dv.data(), accumulate.dq, accumulate.dkdv, ws, st),
        "flash attention backward (kernels/cuda)");
  ++dispatch_count();
  return tiles.count ? impl::count_visible_tiles<Kokkos::Cuda>(mask, sq, sk, n, tiles) : -1;
}

}  // namespace burst::kernels::cuda

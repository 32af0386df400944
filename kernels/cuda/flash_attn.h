// bf16 flash attention on tensor cores (mma.sync m16n8k16, sm_80+
// instructions, built for sm_90): the CUDA kernels behind
// burst::kernels::flash_attention_forward / flash_attention_backward for bf16
// device views (kernels/cuda/attention_cuda.hpp dispatches here;
// kernels/attention.hpp has the portable contract this one copies). Moved
// from the lab (experiments/kernels/flash_attn/, its NOTES.md has the design
// and the H200 measurements) with only the variants measured fastest there:
// forward BR128 BC64 4 warps x 2 row tiles, backward BR64 BC128 8 warps with
// 32x32 dQ warp tiles. No Kokkos here: plain CUDA C++ built by nvcc.
//
//
//   Q [sq, n, d], K and V [sk, n_kv, d], bf16, row-major, n_kv | n (GQA: query
//   head h reads kv head h / (n / n_kv)). d = 64 or 128.
//   forward  -> O [sq, n, d] in fp32 and/or bf16 (either pointer may be null),
//               lse [sq, n] fp32 (natural log). A row with no visible key
//               gets lse = -inf and O = 0.
//   backward takes dO (bf16), lse and D = rowsum(dO * O) (fp32, [sq, n]) from
//               outside and writes (or adds into) dQ [sq, n, d] fp32 and
//               dK, dV [sk, n_kv, d] fp32.
//   Tiles the mask hides completely are skipped (not loaded, not computed).
//
// scale must be > 0. All pointers are device pointers (Q, K, V, dO 16-byte
// aligned, fp32 outputs 8-byte aligned, else cudaErrorMisalignedAddress);
// every call is asynchronous on `stream` and returns the cudaError_t of its
// launches.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace burst {
namespace fa {

enum MaskKind : int {
  kMaskNone = 0,      // every key visible
  kMaskCausal = 1,    // local indices: key j visible to query i iff j <= i + diag_offset (strictly lower: -1)
  kMaskWindow = 2,    // global positions: visible iff 0 <= qpos - kpos < window
  kMaskDocument = 3,  // global positions + document ids: same document and kpos <= qpos
  kMaskGeneral = 4,   // doc id < 0 = padding (sees nothing, never seen); optional causal, window (0 = none), same_doc
};

struct Mask {
  int kind = kMaskNone;
  long long diag_offset = 0;
  long long window = 0;
  int is_causal = 0;  // General only
  int same_doc = 0;   // General only
  const long long* q_pos = nullptr;  // [sq], device (Window, Document, General)
  const long long* k_pos = nullptr;  // [sk]
  const int* q_doc = nullptr;        // [sq] (Document, General)
  const int* k_doc = nullptr;        // [sk]

  static Mask none() { return Mask(); }
  static Mask causal(long long off = 0) { Mask m; m.kind = kMaskCausal; m.diag_offset = off; return m; }
  static Mask strictly_lower() { return causal(-1); }
  static Mask sliding_window(long long w, const long long* qp, const long long* kp) {
    Mask m; m.kind = kMaskWindow; m.window = w; m.q_pos = qp; m.k_pos = kp; return m;
  }
  static Mask document(const int* qd, const int* kd, const long long* qp, const long long* kp) {
    Mask m; m.kind = kMaskDocument; m.q_doc = qd; m.k_doc = kd; m.q_pos = qp; m.k_pos = kp; return m;
  }
  static Mask general(bool causal, long long w, bool same_doc, const int* qd, const int* kd, const long long* qp,
                      const long long* kp) {
    Mask m = document(qd, kd, qp, kp); m.kind = kMaskGeneral; m.is_causal = causal; m.window = w; m.same_doc = same_doc;
    return m;
  }
};

struct AttnShape {
  int sq = 0, sk = 0, n = 0, n_kv = 0, d = 0;
};

// Per-64-row chunk bounds of positions / document ids, needed by the position
// masks for tile skipping. The caller provides scratch of
// flash_workspace_bytes(shape) bytes (0 for None / Causal: pass nullptr).
size_t flash_workspace_bytes(const AttnShape& s, const Mask& m);

cudaError_t flash_forward(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                          const Mask& mask, float scale, float* o_f32, __nv_bfloat16* o_bf16, float* lse,
                          void* workspace, cudaStream_t stream);

// The forward of one more block of keys merged into a running result in
// place (the ring forward's step, without a partial (O_b, lse_b) in memory
// and a merge pass over it): o_f32 and lse hold attention over other keys
// (lse = -inf and O = 0 for a row that saw none); afterwards they hold it
// over those keys and these together (ALGORITHMS.md section 1: lse' =
// log(e^lse + e^lse_b), O' = e^(lse - lse') O + e^(lse_b - lse') O_b). A row
// that sees no key of this block is left as it is. Same kernels, variants
// and requirements as flash_forward, fp32 O only.
cudaError_t flash_forward_merge(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                const __nv_bfloat16* v, const Mask& mask, float scale, float* o_f32, float* lse,
                                void* workspace, cudaStream_t stream);

// The lab's forward variant flash_forward runs for this shape and mask under
// BURST_FA_FORWARD (compute capability 9.0; elsewhere the mma.sync kernel):
// 17 (d128, 128 x 176 tiles), 10 (d128, 128 x 128), 9 (d64), 12 (tma12),
// 4 (the cp.async wgmma kernels) or -1 (mma.sync).
int flash_forward_variant(const AttnShape& s, const Mask& mask);

// accumulate_dq / accumulate_dkdv: add into the outputs instead of overwriting
// (dQ is accumulated with fp32 atomics across key tiles either way; when not
// accumulating it is zeroed first on `stream`). dQ is therefore not bitwise
// deterministic from run to run (fp32 addition order); dK and dV are.
cudaError_t flash_backward(const AttnShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                           const __nv_bfloat16* dout, const float* lse, const float* D, const Mask& mask, float scale,
                           float* dq, float* dk, float* dv, bool accumulate_dq, bool accumulate_dkdv, void* workspace,
                           cudaStream_t stream);

// D = rowsum(dO * O) per (row, head), fp32: what the backward needs from the
// forward's output, computed once locally (ALGORITHMS.md section 3). O in
// fp32, or in bf16 (the engine's: its layers hold O in the storage type, and
// FlashAttention too computes D from its bf16 O). d even; dO and a bf16 O
// 4-byte aligned, an fp32 O 8-byte aligned.
cudaError_t flash_rowsum(int sq, int n, int d, const __nv_bfloat16* dout, const float* o, float* D, cudaStream_t stream);
cudaError_t flash_rowsum(int sq, int n, int d, const __nv_bfloat16* dout, const __nv_bfloat16* o, float* D,
                         cudaStream_t stream);

// A ring step's partial result (ob, lseb) merged into the running (o, lse) in
// place (ALGORITHMS.md section 1), fp32, `rows` rows (tokens x heads) of d
// contiguous values: lse' = log(e^lse + e^lseb), o' = e^(lse - lse') o +
// e^(lseb - lse') ob. A row whose lseb is -inf is left as it is; one whose
// lse is -inf takes (ob, lseb). One warp per row, coalesced (16-byte vectors
// when d % 4 == 0 and o, ob are 16-byte aligned).
cudaError_t flash_lse_merge(long long rows, int d, float* o, float* lse, const float* ob, const float* lseb,
                            cudaStream_t stream);

}  // namespace fa
}  // namespace burst

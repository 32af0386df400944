// Shared device helpers for the flash attention lab kernels: PTX wrappers
// (cp.async, ldmatrix, mma.sync m16n8k16 bf16 -> fp32), the swizzled shared
// memory layout, and the mask (tile classification + per-element test).
#pragma once

#include "flash_attn.h"

#include <cstdint>
#include <climits>

namespace burst_fa {
namespace dev {

constexpr int kChunk = 64;  // granularity of the position/document bounds

struct ChunkBounds {
  long long pmin, pmax;  // over valid tokens
  int dmin, dmax;
  int nvalid, pad_;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: zero-fill the 16 bytes
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// C += A * B, A 16x16 (row), B 16x8 (col), bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Swizzled row-major bf16 tile with COLS columns (COLS/8 16-byte chunks per
// row, COLS >= 64): chunk c of row r lives at chunk c ^ (r & 7). ldmatrix
// reads of 8 consecutive rows at one logical chunk hit 8 distinct bank groups.
template <int COLS> __device__ __forceinline__ int swz(int r, int c) {
  return r * COLS + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}

// Copy rows [row0, row0+ROWS) of a [rows_total, heads, D] bf16 tensor (head
// `head`) into a swizzled smem tile; rows past rows_total are zero-filled.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* smem, const __nv_bfloat16* g, int row0, int rows_total,
                                                int heads, int head, int tid) {
  constexpr int CH = D / 8;
  constexpr int TOTAL = ROWS * CH;
  static_assert(TOTAL % NT == 0, "tile chunks must divide by the thread count");
#pragma unroll
  for (int it = 0; it < TOTAL / NT; ++it) {
    const int c = tid + it * NT;
    const int r = c / CH, ch = c % CH;
    const int row = row0 + r;
    const bool valid = row < rows_total;
    const __nv_bfloat16* src = g + ((size_t)(valid ? row : 0) * heads + head) * D + ch * 8;
    cp_async16(smem_u32(smem + swz<D>(r, ch * 8)), src, valid);
  }
}

// ------------------------------------------------------------------ masks
struct MaskDev {
  int kind;
  long long diag_offset, window;
  int is_causal, same_doc;
  const long long *q_pos, *k_pos;
  const int *q_doc, *k_doc;
  const ChunkBounds *qb, *kb;  // per-64-row chunk bounds (position masks only)
  int sq, sk;
};

inline MaskDev make_mask_dev(const Mask& m, void* ws, int sq, int sk) {
  MaskDev d;
  d.kind = m.kind;
  d.diag_offset = m.diag_offset;
  d.window = m.window;
  d.is_causal = m.is_causal;
  d.same_doc = m.same_doc;
  d.q_pos = m.q_pos;
  d.k_pos = m.k_pos;
  d.q_doc = m.q_doc;
  d.k_doc = m.k_doc;
  d.qb = static_cast<const ChunkBounds*>(ws);
  d.kb = ws ? static_cast<const ChunkBounds*>(ws) + (sq + kChunk - 1) / kChunk : nullptr;
  d.sq = sq;
  d.sk = sk;
  return d;
}

// The launch order of the TMA kernels' (tile, head) grid (forward: query
// tiles x query heads; backward: key tiles x kv heads; dim3(nt, nh)). Blocks
// start roughly in linear index order, and under a causal mask a tile's work
// grows with its distance from the diagonal: head by head (sect = 1, the
// order before 2026-12-07) the last head's longest tiles start last and run
// on while the other SMs idle (list scheduling of 132 SMs: 0.88 of the ideal
// at 4K tokens x 32 heads, 0.77 at 2K, 0.78 at 4K x 16 heads). In sections
// of `sect` heads, tile-major inside (every head of the section at its
// longest tile first), the tail is the short tiles: 0.99 / 0.97 / 0.99.
// `sect` keeps a section's streamed operand (K, V forward; Q, dO backward)
// within L2 (FlashAttention-3's persistent scheduler swizzles heads alike).
// rank: 0 = the tile with the most work (the caller maps it to its tile).
__device__ __forceinline__ void launch_tile_head(int nt, int nh, int sect, int& rank, int& h) {
  const int lin = blockIdx.x + gridDim.x * blockIdx.y;
  const int s0 = lin / (sect * nt) * sect;  // the section's first head
  const int gs = min(sect, nh - s0);       // heads in this section (the last may have fewer)
  const int r = lin - s0 * nt;
  rank = r / gs;
  h = s0 + (r - rank * gs);
}
// Host: the section for nh heads of nt tiles whose streamed operand is
// bytes_per_head each: 1 (head by head) unless the mask is causal (tiles
// differ in work) and the grid is at most 16 waves of the device's SMs (from
// there the tail is under 0.5% of the kernel in the simulation, and an H100
// A/B at 16K-32K could not tell the orders apart: +-2% run to run); balanced
// sections of at most 32 MB.
inline int causal_head_section(const MaskDev& m, int nt, int nh, long long bytes_per_head) {
  const bool causal = m.kind == kMaskCausal || (m.kind >= kMaskWindow && m.is_causal);
  if (!causal || nh <= 1) return 1;
  static const int sms = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      v = 132;
    return v > 0 ? v : 132;
  }();
  if ((long long)nt * nh > 16ll * sms) return 1;
  long long g = bytes_per_head > 0 ? (32ll << 20) / bytes_per_head : nh;
  g = g < 1 ? 1 : (g > nh ? nh : g);
  const long long sections = (nh + g - 1) / g;
  return int((nh + sections - 1) / sections);
}

// Host: the grid of the cp.async / mma.sync kernels in the same order,
// dim3(heads per section, tiles, sections): blocks start in linear index
// order (x fastest), so tile-major inside each section of heads, and the
// kernel reads head = z * gridDim.x + x, tile = tile0 + y (forward: tile0 +
// gridDim.y - 1 - y, the longest first) straight from the block index, which
// ptxas rematerialises: launch_tile_head's arithmetic stayed live across
// the main loop instead (the mma.sync forward's spills on sm_90a: 4 / 64
// bytes -> 160 / 288). Blocks past the last head (sections of sect heads
// need not fill the last one) return at once. At most 65535 tiles a launch
// (gridDim.y): more are launched in several grids, longest tiles first
// (`descending`: the forward's are the last tiles). launch(grid, tile0)
// launches one grid and returns its error.
template <class Launch>
cudaError_t launch_tile_sections(int nt, int nh, int sect, bool descending, Launch&& launch) {
  if (nt <= 0 || nh <= 0) return cudaSuccess;
  const int gs = sect < 1 ? 1 : (sect > nh ? nh : sect);
  const int nsec = (nh + gs - 1) / gs;
  constexpr int kMaxTiles = 65535;
  for (int done = 0; done < nt;) {
    const int ny = nt - done < kMaxTiles ? nt - done : kMaxTiles;
    const cudaError_t e = launch(dim3(gs, ny, nsec), descending ? nt - done - ny : done);
    if (e != cudaSuccess) return e;
    done += ny;
  }
  return cudaSuccess;
}

// 0: nothing visible (skip), 1: partial (test every element), 2: all visible.
// Rows [i0, i1) and columns [j0, j1) are the tile's extent clamped to sq, sk;
// `col_edge` says the tile runs past sk (its out-of-range columns need masking).
__device__ __forceinline__ int classify_tile(const MaskDev& m, int i0, int i1, int j0, int j1, bool col_edge) {
  int cls = 2;
  if (m.kind == kMaskCausal) {
    if ((long long)j0 > (long long)(i1 - 1) + m.diag_offset) return 0;
    cls = ((long long)(j1 - 1) <= (long long)i0 + m.diag_offset) ? 2 : 1;
  } else if (m.kind != kMaskNone) {
    long long qmin = LLONG_MAX, qmax = LLONG_MIN, kmin = LLONG_MAX, kmax = LLONG_MIN;
    int qd0 = INT_MAX, qd1 = INT_MIN, kd0 = INT_MAX, kd1 = INT_MIN, qn = 0, kn = 0;
    for (int c = i0 / kChunk; c <= (i1 - 1) / kChunk; ++c) {
      const ChunkBounds b = m.qb[c];
      qmin = min(qmin, b.pmin), qmax = max(qmax, b.pmax), qd0 = min(qd0, b.dmin), qd1 = max(qd1, b.dmax), qn += b.nvalid;
    }
    for (int c = j0 / kChunk; c <= (j1 - 1) / kChunk; ++c) {
      const ChunkBounds b = m.kb[c];
      kmin = min(kmin, b.pmin), kmax = max(kmax, b.pmax), kd0 = min(kd0, b.dmin), kd1 = max(kd1, b.dmax), kn += b.nvalid;
    }
    // Bounds over the chunks the tile touches: a superset of the tile when the
    // tile is smaller than a chunk, so skip / full answers stay conservative.
    const bool disjoint_docs = max(qd0, kd0) > min(qd1, kd1);
    const bool one_doc = qd0 == qd1 && kd0 == kd1 && qd0 == kd0;
    if (m.kind == kMaskWindow) {
      if (kmin > qmax || qmin - kmax >= m.window) return 0;
      cls = (qmin - kmax >= 0 && qmax - kmin < m.window) ? 2 : 1;
    } else if (m.kind == kMaskDocument) {
      if (kmin > qmax || disjoint_docs) return 0;
      cls = (one_doc && kmax <= qmin) ? 2 : 1;
    } else {  // General
      if (qn == 0 || kn == 0) return 0;
      if (m.is_causal && kmin > qmax) return 0;
      if (m.window > 0 && qmin - kmax >= m.window) return 0;
      if (m.same_doc && disjoint_docs) return 0;
      // every token of the chunks the tile touches is valid (chunks may be larger than the tile)
      const int qrows = min(m.sq, ((i1 - 1) / kChunk + 1) * kChunk) - (i0 / kChunk) * kChunk;
      const int krows = min(m.sk, ((j1 - 1) / kChunk + 1) * kChunk) - (j0 / kChunk) * kChunk;
      const bool full = qn == qrows && kn == krows && (!m.is_causal || kmax <= qmin) &&
                        (m.window <= 0 || qmax - kmin < m.window) && (!m.same_doc || one_doc);
      cls = full ? 2 : 1;
    }
  }
  if (cls == 2 && col_edge) cls = 1;
  return cls;
}

// Backward, one key tile starting at key j0: the first query tile (of BR rows, nqt in all) that the causal
// mask lets see key j0; 0 for every other mask kind (their tiles are classified one by one).
__device__ __forceinline__ int causal_first_query_tile(const MaskDev& m, int j0, int BR, int nqt) {
  if (m.kind != kMaskCausal) return 0;
  const long long first = (long long)j0 - m.diag_offset;  // first query row that may see key j0
  return first <= 0 ? 0 : (int)(first / BR < nqt ? first / BR : nqt);
}

// Per-row values the element test needs (loaded once per row).
struct RowInfo {
  long long pos;
  int doc;
};
__device__ __forceinline__ RowInfo row_info(const MaskDev& m, int i, bool is_q) {
  RowInfo r{0, 0};
  if (m.kind >= kMaskWindow) {
    const long long* p = is_q ? m.q_pos : m.k_pos;
    r.pos = p[i];
    if (m.kind != kMaskWindow) r.doc = (is_q ? m.q_doc : m.k_doc)[i];
  }
  return r;
}

__device__ __forceinline__ bool elem_visible(const MaskDev& m, int i, int j, const RowInfo& qi, const RowInfo& kj) {
  switch (m.kind) {
    case kMaskNone: return true;
    case kMaskCausal: return (long long)j <= (long long)i + m.diag_offset;
    case kMaskWindow: {
      const long long dist = qi.pos - kj.pos;
      return dist >= 0 && dist < m.window;
    }
    case kMaskDocument: return qi.doc == kj.doc && kj.pos <= qi.pos;
    default: {
      if (qi.doc < 0 || kj.doc < 0 || (m.same_doc && qi.doc != kj.doc)) return false;
      const long long dist = qi.pos - kj.pos;
      return (!m.is_causal || dist >= 0) && (m.window <= 0 || dist < m.window);
    }
  }
}

// Compile-time split of the mask kinds: POS = false serves None and Causal
// (no per-row data, no registers held for it); POS = true the position masks.
template <bool POS> __device__ __forceinline__ RowInfo row_info_t(const MaskDev& m, int i, bool is_q) {
  if constexpr (POS) return row_info(m, i, is_q);
  else return RowInfo{0, 0};
}
template <bool POS>
__device__ __forceinline__ bool elem_visible_t(const MaskDev& m, int i, int j, const RowInfo& qi, const RowInfo& kj) {
  if constexpr (POS) return elem_visible(m, i, j, qi, kj);
  else return m.kind != kMaskCausal || (long long)j <= (long long)i + m.diag_offset;
}

__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

}  // namespace dev
}  // namespace burst_fa

// The attention kernels' tiling and their tile-skipping rule for the
// position masks, without Kokkos: the kernels (kernels/attention.hpp), the
// rings' block-pair skipping (parallel/impl/block_meta.hpp) and the
// performance model (src/perf, a host-only library) all use these, so the
// model counts the work the kernels do with the kernels' own numbers.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define BURST_TILES_HD __host__ __device__
#else
#define BURST_TILES_HD
#endif

namespace burst::kernels {

// Query rows and key rows per tile of the flash attention kernels (portable
// and host) when the caller passes no AttnTiles: every engine call does.
inline constexpr long kAttnTileRows = 32;
inline constexpr long kAttnTileCols = 32;

struct AttnTiles {
  long br = kAttnTileRows;  // query rows per tile
  long bc = kAttnTileCols;  // key rows per tile
  // Whether a tensor-core (CUDA) call returns the portable kernel's tile
  // count for the same call. Under a position mask (every ring method's,
  // documents, sliding windows) that count is a device reduction the host
  // waits for: a stall between a ring's steps, which stops the host from
  // queueing the next step's work. The engine's own calls pass uncounted()
  // and get -1 from the CUDA path; the portable kernels count as they go
  // and return it either way.
  bool count = true;
  static AttnTiles uncounted() {
    AttnTiles t;
    t.count = false;
    return t;
  }
};

// Positions and document ids of the non-padding tokens of a span of slots
// (a tile, or a whole block): their ranges.
struct SpanBounds {
  bool any = false;  // any non-padding token
  bool pad = false;  // any padding token
  long pmin = 0, pmax = 0;
  int dmin = 0, dmax = 0;
  BURST_TILES_HD void add(long p, int d) {
    if (d < 0) {  // padding
      pad = true;
      return;
    }
    if (!any) pmin = pmax = p, dmin = dmax = d, any = true;
    pmin = p < pmin ? p : pmin, pmax = p > pmax ? p : pmax, dmin = d < dmin ? d : dmin, dmax = d > dmax ? d : dmax;
  }
};

// Could a query of span q see a key of span k under the general position
// mask (causal: key position <= query position; window > 0: query - key <
// window; same_doc: one document)? A bound from the ranges: false means no
// pair is visible; true means some may be. The kernels skip a tile, and the
// rings a whole block pair, when this is false, and compute it in full
// otherwise (masking per element where it is not all visible).
BURST_TILES_HD inline bool spans_may_see(const SpanBounds& q, const SpanBounds& k, bool causal, long window, bool same_doc) {
  if (!q.any || !k.any) return false;
  if (causal && k.pmin > q.pmax) return false;
  if (window > 0 && q.pmin - k.pmax >= window) return false;
  if (same_doc && (q.dmin > k.dmin ? q.dmin : k.dmin) > (q.dmax < k.dmax ? q.dmax : k.dmax)) return false;
  return true;
}

// Does every query of span q see every key of span k under the same mask?
// Exact from the ranges (no padding on either side; one document on both
// under same_doc; every key at or before every query when causal; the
// farthest pair inside the window). The kernels mask element by element
// only the tiles this rejects among those spans_may_see lets through
// (AttnMask::tile_all_visible, general mask), and the performance model
// counts those partly visible tiles with it.
BURST_TILES_HD inline bool spans_all_see(const SpanBounds& q, const SpanBounds& k, bool causal, long window, bool same_doc) {
  if (!q.any || !k.any || q.pad || k.pad) return false;
  if (same_doc && !(q.dmin == q.dmax && k.dmin == k.dmax && q.dmin == k.dmin)) return false;
  if (causal && k.pmax > q.pmin) return false;
  if (window > 0 && q.pmax - k.pmin >= window) return false;
  return true;
}

}  // namespace burst::kernels

// Backward variant 8 (sm_90a only): backward variant 7 (flash_bwd_wgmma.cuh,
// EARLY_DV + DQ_TMA: same contract, masks, GQA, external D, accumulate flags,
// launch order, tile shapes BR = 64 queries x BC = 128 keys, smem layouts and
// wgmma descriptors) with the loads moved off the math warps, FlashAttention-3
// backward style.
//
// One block = 3 warpgroups (384 threads) per (key tile, kv head):
//   warpgroup 0: producer, setmaxnreg.dec to kBwdProducerRegs. Warps 2, 3
//     leave at once.
//     warp 0 (loader): K and V of the block's key tile once by TMA
//       (cp.async.bulk.tensor.3d, boxes of 64 columns x 128 rows, 128B
//       swizzle, rows past sk zero-filled) on bar_kv; then per visible query
//       item n (the same item list the consumers walk) into stage n % NST:
//       lane 0: Q and dO by TMA (boxes of 64 columns x 64 rows; rows past sq
//       zero-filled) on full[st] with arrive.expect_tx of the full box bytes;
//       all 32 lanes: lse and D (64 fp32 each, stride n in global memory, so
//       no TMA box: 4-byte cp.async, rows past sq zero-filled as in variant 7)
//       completed on the same barrier by cp.async.mbarrier.arrive.noinc.
//       full[st] therefore expects 1 + 32 arrivals plus the TMA bytes.
//       Before refilling a stage the whole warp waits empty[st].
//     warp 1, lane 0 (dQ writer): per item n waits dq_full[n & 1] (the two
//       consumer warpgroups staged their scaled fp32 dQ partials, variant 7's
//       staging layout), issues variant 7's four
//       cp.reduce.async.bulk.tensor.3d .add into dQ, commits, waits for the
//       group to have read the staging (.read) and arrives on dq_empty[n & 1].
//       It waits for all its groups before exiting.
//   warpgroups 1, 2: consumers, setmaxnreg.inc to kBwdConsumerRegs; consumer
//     c owns keys [64 c, 64 c + 64) of the tile (variant 7's warpgroup c).
//     Per item n: wait full[st]; S^T, dP^T, P^T, dV (early), dS^T -> smem
//     buffer n & 1, dK (variant 7's code); named barrier (the two consumers,
//     256 threads): dS^T of both in smem; dQ = dS K; wait all wgmmas; every
//     consumer thread arrives on empty[st] (count 256: its reads of Q, dO,
//     lse, D are over); dQ staging: wait dq_empty[n & 1], write, fence the
//     async proxy, arrive on dq_full[n & 1] (count 256).
//   No block-wide barrier after the mbarrier init. dS is double-buffered, so
//   the buffer written at item n was last read by the dQ wgmmas of item n - 2,
//   which both consumers retired before the named barrier of item n - 1.
// Phases: stage st = n % NST, full parity (n / NST) & 1, the producer waits
// empty with the opposite parity (a fresh barrier passes parity 1 at once);
// dQ buffer b = n & 1, dq_full parity (n >> 1) & 1, consumers wait dq_empty
// with the opposite parity. Every mbarrier wait is bounded (mbar_wait_fault:
// an illegal-address fault after 2^28 failed polls, never a hang).
// Padded query rows (past sq): Q = dO = 0 (TMA zero fill), lse = D = 0
// (cp.async zero fill), so P = 1 but dS = P (0 - 0) = 0 and dO = 0: nothing
// reaches dK / dV; their dQ rows are clipped by the reduce-add's tensor map.
// Blocks with no visible item load nothing, reduce nothing and write dK = dV
// = 0 (or leave them, accumulating), as variant 7.
#pragma once

#include "flash_bwd_wgmma.cuh"
#include "flash_fwd_tma_ws.cuh"

namespace burst_fa {
namespace dev {

// The two bf16 of pack_bf16(lo, hi) back as floats (exact).
__device__ __forceinline__ float2 unpack_bf16(uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xFFFF0000u));
}
// mbar_wait_fault (the bounded wait without a trap): flash_fwd_tma_ws.cuh.
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// BR_ = 80 (variant 13, MODE bit kBwdQ80): FlashAttention-3's full-mask d128 tile, 80 queries x 128 keys, with
// one dQ staging buffer (NDQ) so that it fits: 64 KB K, V + 80 KB Q, dO (2 stages) + 40 KB dS^T (2) + 40 KB dQ.
template <int D, int BR_ = 64> struct BwdTmaWsTraits {
  static constexpr int BR = BR_, BC = 128, NT = 384, NST = 2;
  static constexpr int NDQ = BR_ == 64 ? 2 : 1;               // dQ staging buffers
  static constexpr uint32_t KV_BYTES = BC * D * 2;            // one of K, V
  static constexpr uint32_t Q_BYTES = BR * D * 2;             // one of Q, dO (one stage)
  static constexpr uint32_t DS_BYTES = BC * BR * 2;           // one dS^T buffer
  static constexpr uint32_t DQ_WG_BYTES = BR * 64 * 4;        // one warpgroup's staged dQ partial
  static constexpr uint32_t OFF_K = 0, OFF_V = KV_BYTES, OFF_Q = 2 * KV_BYTES;
  static constexpr uint32_t OFF_DO = OFF_Q + NST * Q_BYTES;
  static constexpr uint32_t OFF_DS = OFF_DO + NST * Q_BYTES;  // [2]
  static constexpr uint32_t OFF_DQ = OFF_DS + 2 * DS_BYTES;   // [NDQ buffers][2 warpgroups][2 boxes of BR x 32 fp32]
  static constexpr uint32_t OFF_L = OFF_DQ + NDQ * 2 * DQ_WG_BYTES;  // lse [NST][BR]
  static constexpr uint32_t OFF_D = OFF_L + NST * BR * 4;          // D [NST][BR]
  static constexpr uint32_t OFF_BAR = OFF_D + NST * BR * 4;
  // full[NST], empty[NST], kv, dq_full[2], dq_empty[2]
  static constexpr int NBAR = 2 * NST + 1 + 4;
  static constexpr size_t smem_bytes = size_t(OFF_BAR) + 8 * NBAR + 1024;  // + 1 KB to align the base (128B swizzle)
  static_assert(D == 64 || D == 128, "head dim");
  static_assert(BR == 64 || (BR == 80 && D == 128), "query tile: 64, or 80 for head dim 128");
  static_assert(OFF_DQ % 1024 == 0 && OFF_DS % 1024 == 0 && OFF_Q % 1024 == 0 && OFF_DO % 1024 == 0, "sw128 alignment");
  static_assert(smem_bytes <= 232448, "shared memory (227 KB per block)");
};

constexpr int kBwdProducerRegs = 24, kBwdConsumerRegs = 240;  // 24 x 128 + 240 x 256 = 168 x 384
constexpr int kBarDsReady = 1;                                // named barrier of the two consumers (0 = __syncthreads)

// MODE bits (variant 8 = 0, 9 = 1, 10 = 3, 11 = 7, 12 = 15; NOTES "v8 backward: the instruction diet"):
//   1 (kBwdDiet): fewer instructions per item on the consumers' path. The loader writes lse in log2 units
//     with -inf as +inf (so P = exp2(S c - L) is one FFMA + EX2, no per-element test), and D, by plain loads
//     and shared stores followed by an mbarrier arrive (release) instead of cp.async; the wgmma descriptors
//     are a per-item base plus a constant per k-step (uniform adds instead of rebuilding each descriptor
//     in vector registers); the per-element mask runs only on partial tiles, in its own branch.
//   2 (kBwdDqFirst): FlashAttention-3's order at the end of an item: dQ = dS K is issued before dK += dS^T Q,
//     and the dQ partial is staged for the bulk reduce while dK is still on the tensor cores.
//   4 (kBwdDqSwz): the dQ staging stores without bank conflicts. A 64-bit shared store runs as two 16-lane
//     phases; with every lane storing column x, the 8 (g, t >> 1) pairs of a phase hit only 4 of the 8
//     16-byte chunks of their rows (chunk = (2 (x & 3) + (t >> 1)) ^ g), two wavefronts per phase. Lanes of
//     odd g store column x ^ 2 instead (same box), which makes the 8 chunks distinct: one wavefront
//     (tools/dq_staging_banks.py checks both layouts). The values are picked by selects, not a
//     lane-dependent register index.
//   8 (kBwdSleep): the loader's wait for a free stage and the dQ writer's wait for a staged dQ sleep in the
//     barrier (mbar_wait_sleep: try_wait with a suspend-time hint) instead of polling. Variant 11's profile
//     (H100, 16K full): the dQ writer polled 21.2 M times for 1.05 M waits and the loader 6.0 M times, ~10
//     instructions a poll: ~270 M instructions (5% of the kernel's), in the issue slots of the schedulers of
//     SMSP 1 and 0, which also run consumer warps (a warpgroup's products wait for its slowest warp).
//     cuDNN's backward sleeps in these loops (NANOSLEEP.SYNCS 0x989680 in its SASS).
//   16 (kBwdQ80, variant 13 = 12 | 16, head dim 128 only): FlashAttention-3's full-mask tile for d128
//     (hopper/flash_bwd_launch_template.h, run_mha_bwd_hdim128: 80 x 128 with dQ_swapAB). 80 query rows per
//     item instead of 64, so each K / V tile's dK / dV accumulators get 1.25x the GEMM work per item for the
//     same per-item fixed cost (barriers, waits, the lse / D loads, the dQ hand-off). An 80-row dQ is not a
//     wgmma M (64 per warpgroup), so dQ is computed transposed: dQ^T = K^T dS^T, M = the consumer's 64
//     head-dim columns (A = K, MN-major, the transpose flag), N = 80 queries (B = dS stored query-major, the
//     keys contiguous: K-major). dS therefore goes to shared memory as [80 queries][64 keys] per consumer key
//     block, by stmatrix .trans (store_ds_q), and the dQ^T partial is staged transposed by 4-byte stores
//     (stage_dq_t), both conflict-free. One dQ staging buffer (NDQ = 1), to fit 227 KB.
//   32 (kBwdLseEarly; variant 14 = 13 | 32, variant 15 = 12 | 32): the loader issues item n's lse and D loads
//     (all of them at once, into registers) before it waits for stage n % NST to be free, so their latency
//     runs under that wait. Variant 13's profile (H100, 16K full) had the consumers waiting at full[st] 5.5x
//     as often as variant 12's (8.1% of stall samples on that wait's branch): the loader's three 32-row steps
//     of lse / D loads each waited for their loads (long scoreboard) before the next was issued, and that
//     happened after the stage had been released, on the consumers' critical path.
constexpr int kBwdDiet = 1, kBwdDqFirst = 2, kBwdDqSwz = 4, kBwdSleep = 8, kBwdQ80 = 16, kBwdLseEarly = 32;
// stmatrix (sm_90): four 8 x 8 b16 matrices from this warp's registers (r_i: matrix i, the mma fragment
// layout), each stored transposed; lane L gives the address of row L & 7 of matrix L >> 3.
__device__ __forceinline__ void stsm_x4_t(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
// Variant 13: dS (the bf16 A fragments sf of this warp's 16 keys x BR queries, dS^T's register layout) into
// the dQ^T product's B operand: this consumer's key block blk (shared address), [BR queries][64 keys] in the
// 128-byte swizzle, keys contiguous (K-major). Matrix i of step kk holds keys 16 warp + 8 (i & 1) and queries
// 16 kk + 8 (i >> 1); stored transposed, its row r is query q = 16 kk + 8 (i >> 1) + r (q & 7 == r) with its
// 8 keys in chunk 2 warp + (i & 1). Conflict-free: a matrix's 8 rows put that chunk at 8 distinct positions.
template <int NF>
__device__ __forceinline__ void store_ds_q(uint32_t blk, const uint32_t (&sf)[NF][4], int warp, int lane) {
  const int i = lane >> 3, r = lane & 7;
  const uint32_t row = blk + (uint32_t)((8 * (i >> 1) + r) * 128 + (((2 * warp + (i & 1)) ^ r) << 4));
#pragma unroll
  for (int kk = 0; kk < NF; ++kk) stsm_x4_t(row + kk * 16 * 128, sf[kk][0], sf[kk][1], sf[kk][2], sf[kk][3]);
}
// Variant 13: one consumer's 64 x BR dQ^T partial (the accumulator of dQ^T = K^T dS^T: this thread's head-dim
// rows 16 w + g (+ 8), queries 8 x + 2 t (+ 1)), scaled, into its staging tile in stage_dq's layout (box w >> 1
// of BR query rows x 32 fp32 columns, 128B swizzle) by 4-byte stores. Conflict-free: at each step the 32 lanes
// store word g & 3 of chunk (4 (w & 1) + 2 hf + (g >> 2)) ^ (2 t + e): 8 distinct chunks x 4 words.
template <int BR>
__device__ __forceinline__ void stage_dq_t(unsigned char* stg, const float (&dq)[BR / 2], float scale, int wtid, int g,
                                           int t) {
  const int w = wtid / 32;
  unsigned char* box = stg + (w >> 1) * (BR * 128);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int c = 16 * (w & 1) + 8 * hf + g;  // column in the box
#pragma unroll
    for (int x = 0; x < BR / 8; ++x) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 8 * x + 2 * t + e;
        *reinterpret_cast<float*>(box + r * 128 + (((c >> 2) ^ (r & 7)) << 4) + (c & 3) * 4) = scale * dq[x * 4 + hf * 2 + e];
      }
    }
  }
}
template <int D, bool POS, int MODE>
__global__ void __launch_bounds__(384, 1)
    flash_bwd_tma_ws_kernel(const __grid_constant__ BwdParams p, const __grid_constant__ CUtensorMap dq_map,
                            const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_do,
                            const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v) {
  constexpr bool Q80 = (MODE & kBwdQ80) != 0;
  constexpr bool LSE_EARLY = (MODE & kBwdLseEarly) != 0;
  static_assert(!LSE_EARLY || (MODE & kBwdDiet) != 0, "kBwdLseEarly builds on the diet's plain lse / D loads");
  static_assert(!Q80 || (MODE & (kBwdDiet | kBwdDqFirst)) == (kBwdDiet | kBwdDqFirst), "kBwdQ80 builds on the diet and dQ first");
  using Tr = BwdTmaWsTraits<D, Q80 ? 80 : 64>;
  constexpr int BR = Tr::BR, BC = Tr::BC, NST = Tr::NST;
  constexpr int NSX = BR / 8;  // n8 column groups of S^T per thread
  constexpr int NKX = D / 8;   // n8 column groups of dK / dV
  extern __shared__ __align__(1024) unsigned char bw_smem_raw[];
  const uint32_t raw_u32 = smem_u32(bw_smem_raw);
  unsigned char* base = bw_smem_raw + (((raw_u32 + 1023u) & ~1023u) - raw_u32);
  const uint32_t sb = smem_u32(base);
  const uint32_t bar0 = sb + Tr::OFF_BAR;
  auto bar_full = [&](int s) { return bar0 + 8u * s; };
  auto bar_empty = [&](int s) { return bar0 + 8u * (NST + s); };
  const uint32_t bar_kv = bar0 + 8u * (2 * NST);
  auto bar_dq_full = [&](int b) { return bar0 + 8u * (2 * NST + 1 + b); };
  auto bar_dq_empty = [&](int b) { return bar0 + 8u * (2 * NST + 3 + b); };

  int kt, hk;  // rank 0 = key tile 0, the most query tiles under a causal mask
  launch_tile_head(gridDim.x, p.nkv, p.head_sect, kt, hk);
  const int tid = threadIdx.x, wg = tid / 128;
  const int j0 = kt * BC, j1 = min(j0 + BC, p.sk);
  const bool col_edge = j0 + BC > p.sk;
  const MaskDev& mask = p.mask;

  const int nqt = (p.sq + BR - 1) / BR;
  const int qt_begin = causal_first_query_tile(mask, j0, BR, nqt);
  // The visible items (query head hg of the group, query tile qt) in order; every role walks the same list,
  // by (hg, qt) steps (no integer division per item). cls: the tile's class (0 = none left).
  struct Item {
    int hg, qt, cls;
  };
  auto first_from = [&](int hg, int qt) -> Item {  // the first visible item at or after (hg, qt)
    while (hg < p.group) {
      if (qt < qt_begin) qt = qt_begin;
      if (qt >= nqt) {
        ++hg, qt = 0;
        continue;
      }
      const int i0 = qt * BR;
      const int c = classify_tile(mask, i0, min(i0 + BR, p.sq), j0, j1, col_edge);
      if (c != 0) return Item{hg, qt, c};
      ++qt;
    }
    return Item{hg, qt, 0};
  };
  auto next_item = [&](const Item& it) { return first_from(it.hg, it.qt + 1); };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < NST; ++s) {
      mbar_init(bar_full(s), 1 + 32);  // the loader's arrive.expect_tx + 32 lanes' cp.async (lse, D) arrivals
      mbar_init(bar_empty(s), 256);    // every consumer thread
    }
    mbar_init(bar_kv, 1);
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      mbar_init(bar_dq_full(b), 256);  // every consumer thread, after its staging writes
      mbar_init(bar_dq_empty(b), 1);   // the dQ writer, once the bulk reduce has read the buffer
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the only block-wide barrier

  if (wg == 0) {
    // ------------------------------------------------------------ producer warpgroup
    setmaxnreg_dec<kBwdProducerRegs>();
    const int warp = tid / 32, lane = tid % 32;
    if (warp == 0) {
      // ---- loader
      Item cur = first_from(0, 0);
      if (cur.cls != 0) {
        if (lane == 0) {
          tma_prefetch_desc(&tm_q);
          tma_prefetch_desc(&tm_do);
          tma_prefetch_desc(&tm_k);
          tma_prefetch_desc(&tm_v);
          mbar_arrive_expect_tx(bar_kv, 2 * Tr::KV_BYTES);
#pragma unroll
          for (int b = 0; b < D / 64; ++b) {
            tma_load_3d(sb + Tr::OFF_K + b * BC * 128, &tm_k, bar_kv, b * 64, hk, j0);
            tma_load_3d(sb + Tr::OFF_V + b * BC * 128, &tm_v, bar_kv, b * 64, hk, j0);
          }
        }
        int n = 0;
        for (; cur.cls != 0; cur = next_item(cur), ++n) {
          const int st = n % NST;
          const uint32_t ph = (uint32_t)(n / NST) & 1u;
          constexpr int NRL = (BR + 31) / 32;  // 32-row steps of lse / D
          float lv[NRL], dv2[NRL];
          if constexpr (LSE_EARLY) {  // this item's lse and D, all loads in flight before the wait below
            const int h = hk * p.group + cur.hg, i0 = cur.qt * BR;
#pragma unroll
            for (int r2 = 0; r2 < NRL; ++r2) {
              const int r = lane + 32 * r2, i = i0 + r;
              const bool ok = (BR % 32 == 0 || r < BR) && i < p.sq;  // rows past sq: 0 and 0, as below
              const size_t off = (size_t)(ok ? i : 0) * p.n + h;
              lv[r2] = ok ? __ldg(p.lse + off) : 0.f;
              dv2[r2] = ok ? __ldg(p.D + off) : 0.f;
            }
          }
          // the first round passes (fresh barrier)
          mbar_wait_idle<(MODE & kBwdSleep) != 0>(bar_empty(st), ph ^ 1u);
          const int h = hk * p.group + cur.hg, i0 = cur.qt * BR;
          if constexpr ((MODE & kBwdDiet) == 0) {
#pragma unroll
            for (int r2 = 0; r2 < BR / 32; ++r2) {
              const int r = lane + 32 * r2, i = i0 + r;
              const bool valid = i < p.sq;  // rows past sq: lse = D = 0 (with Q = dO = 0: nothing added)
              const size_t off = (size_t)(valid ? i : 0) * p.n + h;
              cp_async4(sb + Tr::OFF_L + (st * BR + r) * 4, p.lse + off, valid);
              cp_async4(sb + Tr::OFF_D + (st * BR + r) * 4, p.D + off, valid);
            }
            cp_async_mbar_arrive_noinc(bar_full(st));  // this lane's arrival once its cp.asyncs landed
          }
          if (lane == 0) {
            mbar_arrive_expect_tx(bar_full(st), 2 * Tr::Q_BYTES);  // full boxes, also for rows past sq
#pragma unroll
            for (int b = 0; b < D / 64; ++b) {
              tma_load_3d(sb + Tr::OFF_Q + st * Tr::Q_BYTES + b * BR * 128, &tm_q, bar_full(st), b * 64, h, i0);
              tma_load_3d(sb + Tr::OFF_DO + st * Tr::Q_BYTES + b * BR * 128, &tm_do, bar_full(st), b * 64, h, i0);
            }
          }
          if constexpr ((MODE & kBwdDiet) != 0) {
            // lse in log2 units (a row with no visible key, lse = -inf, as +inf: P = exp2(-inf) = 0 with no
            // test on the consumers' path) and D, by plain loads; rows past sq: 0 and 0 (with Q = dO = 0
            // nothing is added). The arrive (release) orders these shared stores before the phase flips.
            float* Ls = reinterpret_cast<float*>(base + Tr::OFF_L) + st * BR;
            float* Ds = reinterpret_cast<float*>(base + Tr::OFF_D) + st * BR;
            if constexpr (LSE_EARLY) {
#pragma unroll
              for (int r2 = 0; r2 < NRL; ++r2) {
                const int r = lane + 32 * r2;
                if (BR % 32 == 0 || r < BR) {
                  const float l = lv[r2];
                  Ls[r] = l == -INFINITY ? INFINITY : l * 1.4426950408889634f, Ds[r] = dv2[r2];
                }
              }
            } else {
#pragma unroll
              for (int r2 = 0; r2 < (BR + 31) / 32; ++r2) {
                const int r = lane + 32 * r2, i = i0 + r;
                if (BR % 32 != 0 && r >= BR) break;
                float l = 0.f, dd = 0.f;
                if (i < p.sq) {
                  const size_t off = (size_t)i * p.n + h;
                  l = __ldg(p.lse + off), dd = __ldg(p.D + off);
                  l = l == -INFINITY ? INFINITY : l * 1.4426950408889634f;
                }
                Ls[r] = l, Ds[r] = dd;
              }
            }
            mbar_arrive(bar_full(st));
          }
        }
        // Tail: the last NST items released by the consumers, so no cp.async of this warp is still in flight
        // when it exits (CUTLASS's producer tail; consumers wait for every load anyway).
        for (int k = n > NST ? n - NST : 0; k < n; ++k) mbar_wait_fault(bar_empty(k % NST), (uint32_t)(k / NST) & 1u);
      }
    } else if (warp == 1 && lane == 0 && !p.diag_no_dq) {
      // ---- dQ writer
      Item cur = first_from(0, 0);
      if (cur.cls != 0) prefetch_tensormap(&dq_map);
      for (int n = 0; cur.cls != 0; cur = next_item(cur), ++n) {
        const int b = Tr::NDQ == 2 ? n & 1 : 0;
        mbar_wait_idle<(MODE & kBwdSleep) != 0>(bar_dq_full(b), (uint32_t)(Tr::NDQ == 2 ? n >> 1 : n) & 1u);
        const uint32_t src = sb + Tr::OFF_DQ + b * 2 * Tr::DQ_WG_BYTES;
        const int h = hk * p.group + cur.hg, i0 = cur.qt * BR;
#pragma unroll
        for (int w = 0; w < 2; ++w) {  // consumer w's columns (D = 64: both add all 64 columns)
          const int c0 = D == 128 ? w * 64 : 0;
          tma_reduce_add_3d(&dq_map, src + w * Tr::DQ_WG_BYTES, c0, h, i0);  // rows past sq: clipped
          tma_reduce_add_3d(&dq_map, src + w * Tr::DQ_WG_BYTES + BR * 128, c0 + 32, h, i0);
        }
        bulk_commit();
        bulk_wait_read<0>();          // the staging buffer has been read
        mbar_arrive(bar_dq_empty(b));  // consumers may write it again (item n + NDQ)
      }
      bulk_wait<0>();  // the reduce-adds performed before the block's shared memory goes away
    }
    return;
  }

  // -------------------------------------------------------------- consumers
  setmaxnreg_inc<kBwdConsumerRegs>();
  // consumer 0 / 1 = variant 7's warpgroup 0 / 1; through a shuffle so the compiler knows it is warp-uniform
  // (the descriptor arithmetic below then stays in uniform registers)
  const int cw = __shfl_sync(0xffffffffu, wg - 1, 0);
  const int wtid = tid % 128;
  const int lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int wrow = cw * 64 + (wtid / 32) * 16;  // this warp's first key row in the tile

  // The key rows of this thread's accumulator fragments (fixed for the block).
  int jrow[2];
  RowInfo kinfo[POS ? 2 : 1];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    jrow[hf] = j0 + wrow + g + hf * 8;
    if constexpr (POS) kinfo[hf] = row_info(mask, min(jrow[hf], p.sk - 1), false);
  }

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x) dk[x] = dv[x] = 0.f;

  const uint32_t k_base = sb + Tr::OFF_K, v_base = sb + Tr::OFF_V;
  // dQ: which n-block of 64 columns (D = 128) or which 64 keys (D = 64) this consumer does
  constexpr int NKQ = D == 128 ? BC / 16 : BC / 32;  // k16 steps of the dQ product per consumer
  const int kq0 = D == 128 ? 0 : cw * (BC / 32);     // first k16 step (keys / 16)
  const uint32_t kq_base = k_base + (D == 128 ? cw * BC * 128 : 0);

  Item cur = first_from(0, 0);
  if (cur.cls != 0) mbar_wait_fault(bar_kv, 0);
  for (int n = 0; cur.cls != 0; ++n) {
    const Item nxt = next_item(cur);
    const int st = n % NST;
    mbar_wait_fault(bar_full(st), (uint32_t)(n / NST) & 1u);  // Q, dO (TMA bytes) and lse, D (cp.async arrivals) landed
    const int i0 = cur.qt * BR;
    const int cls = cur.cls;
    uint32_t q_st = sb + Tr::OFF_Q + st * Tr::Q_BYTES, do_st = sb + Tr::OFF_DO + st * Tr::Q_BYTES;
    uint32_t ds_base = sb + Tr::OFF_DS + (n & 1) * Tr::DS_BYTES;
    // Variant 8: operand bases through an opaque copy, so the descriptors are rebuilt per item, not hoisted
    // into registers. The diet: one base descriptor per operand and item, plus a constant per k-step.
    if constexpr ((MODE & kBwdDiet) == 0) asm volatile("" : "+r"(q_st), "+r"(do_st), "+r"(ds_base));
    const float* Lb = reinterpret_cast<const float*>(base + Tr::OFF_L) + st * BR;
    const float* Db = reinterpret_cast<const float*>(base + Tr::OFF_D) + st * BR;
    __nv_bfloat16* dSs = reinterpret_cast<__nv_bfloat16*>(base + Tr::OFF_DS + (n & 1) * Tr::DS_BYTES);

    // ---- S^T = K Q^T, dP^T = V dO^T (this consumer's 64 keys x BR queries)
    float s[BR / 2], dp[BR / 2];
    // desc(base + off) = desc(base) + off / 16 for these offsets (the 14-bit address field cannot carry:
    // every operand lies inside the block's 227 KB of shared memory)
    auto dsc = [&](uint32_t b, uint32_t off, uint32_t lbo, uint32_t sbo) -> uint64_t {
      if constexpr ((MODE & kBwdDiet) != 0) return sw128_desc(b, lbo, sbo) + (off >> 4);
      else return sw128_desc(b + off, lbo, sbo);
    };
    const uint32_t kw_base = k_base + cw * 64 * 128, vw_base = v_base + cw * 64 * 128;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t koff = (ks / 4) * BC * 128 + (ks % 4) * 32;
      const uint32_t qoff = (ks / 4) * BR * 128 + (ks % 4) * 32;
      wgmma_ss<BR>(s, dsc(kw_base, koff, 16, 1024), dsc(q_st, qoff, 16, 1024), ks > 0 ? 1 : 0);
    }
    wgmma_commit();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t koff = (ks / 4) * BC * 128 + (ks % 4) * 32;
      const uint32_t qoff = (ks / 4) * BR * 128 + (ks % 4) * 32;
      wgmma_ss<BR>(dp, dsc(vw_base, koff, 16, 1024), dsc(do_st, qoff, 16, 1024), ks > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait<1>();  // S^T done; dP^T may still run
    reg_fence(s);

    // ---- P^T (in place of S^T), masked on partial tiles
    if constexpr ((MODE & kBwdDiet) == 0) {
      bwd_p_from_s<POS>(s, Lb, t, i0, cls, p, mask, jrow, kinfo);  // variant 8: variant 7's per-tile softmax
    } else {
      // Lb holds lse log2 e (+inf for an empty row, set by the loader): P = exp2(S c - L), one FFMA + EX2.
#pragma unroll
      for (int x = 0; x < NSX; ++x) {
        const float2 l2 = *reinterpret_cast<const float2*>(Lb + x * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[x * 4 + e] = fast_exp2(fmaf(s[x * 4 + e], p.scale_log2, -((e & 1) ? l2.y : l2.x)));
      }
      if (cls == 1) {  // partial tile: the per-element test, only here
#pragma unroll
        for (int x = 0; x < NSX; ++x) {
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const int i = i0 + x * 8 + 2 * t + e1;
            RowInfo qinfo{0, 0};
            if constexpr (POS) qinfo = row_info(mask, min(i, p.sq - 1), true);
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int j = jrow[hf];
              if (j >= p.sk || !elem_visible_t<POS>(mask, i, j, qinfo, kinfo[POS ? hf : 0])) s[x * 4 + hf * 2 + e1] = 0.f;
            }
          }
        }
      }
    }
    // ---- dV += P^T dO (register A, dO MN-major with the transpose flag), issued before the dP^T wait
    uint32_t pf[BR / 16][4], sf[BR / 16][4];
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int x = 2 * kk + (e >> 1), hf = e & 1;
        pf[kk][e] = pack_bf16(s[x * 4 + hf * 2], s[x * 4 + hf * 2 + 1]);
      }
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) wgmma_rs_tb<D>(dv, pf[kk], dsc(do_st, kk * 16 * 128, BR * 128, 1024), 1);
    wgmma_commit();
    wgmma_wait<1>();  // dP^T done (groups retire in order); dV may still run
    reg_fence(dp);
    // ---- dS^T = P^T (dP^T - D) (in place of dP^T), with P^T from its bf16 A fragments (pf, live anyway
    // until dV retires), so the fp32 P^T (32 registers) dies at the pack: variant 7's schedule does not fit
    // the consumers' 240 registers otherwise (NOTES, v7 backward with a TMA producer warp).
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int x = 2 * kk + (e >> 1), hf = e & 1;
        const float2 d2 = *reinterpret_cast<const float2*>(Db + x * 8 + 2 * t);
        const float2 p2 = unpack_bf16(pf[kk][e]);
        dp[x * 4 + hf * 2] = p2.x * (dp[x * 4 + hf * 2] - d2.x);
        dp[x * 4 + hf * 2 + 1] = p2.y * (dp[x * 4 + hf * 2 + 1] - d2.y);
      }
    }
    pack_ds_frags(sf, dp);
    if constexpr (Q80) store_ds_q(ds_base + cw * BR * 128, sf, wtid / 32, lane);  // dS, query-major, for dQ^T
    else store_ds_t<BC>(dSs, sf, wrow, g, t);  // dS^T to shared memory (buffer n & 1) for the dQ product
    fence_proxy_async_smem();

    // ---- dK += dS^T Q (register A, Q MN-major with the transpose flag)
    auto issue_dk = [&] {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BR / 16; ++kk) wgmma_rs_tb<D>(dk, sf[kk], dsc(q_st, kk * 16 * 128, BR * 128, 1024), 1);
      wgmma_commit();
    };
    if constexpr ((MODE & kBwdDqFirst) == 0) issue_dk();

    named_bar_sync(kBarDsReady, 256);  // dS^T of both consumers is in shared memory

    // ---- dQ (BR x 64 per consumer) = dS K; variant 13: dQ^T (this consumer's 64 head-dim rows x BR) = K^T dS^T
    float dq[Q80 ? BR / 2 : 32];
    wgmma_fence();
    if constexpr (Q80) {
#pragma unroll
      for (int kg = 0; kg < BC / 16; ++kg) {  // k16 step over the tile's keys
        const uint64_t da = dsc(kq_base, kg * 16 * 128, BC * 128, 1024);
        const uint64_t db = dsc(ds_base, (kg / 4) * BR * 128 + (kg % 4) * 32, 16, 1024);
        wgmma_ss_m64n80_ta(dq, da, db, kg > 0 ? 1 : 0);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < NKQ; ++kk) {
        const int kg = kq0 + kk;  // k16 step over the tile's keys
        const uint64_t db = dsc(kq_base, kg * 16 * 128, BC * 128, 1024);
        const uint64_t da = dsc(ds_base, kg * 16 * 128, BC * 128, 1024);
        wgmma_ss_m64n64_ta_tb(dq, da, db, kk > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
    if constexpr ((MODE & kBwdDqFirst) != 0) {
      issue_dk();       // dK after dQ: the dQ staging below runs while dK is on the tensor cores
      wgmma_wait<1>();  // dV and dQ retired (groups retire in order); dK may still run
      reg_fence(dq);
      reg_fence(dv);
      reg_fence(pf);
    } else {
      wgmma_wait<0>();
      reg_fence(dq);
      reg_fence(dk);
      reg_fence(dv);
      reg_fence(pf);
      reg_fence(sf);
      mbar_arrive(bar_empty(st));  // this thread's reads of stage st (wgmma operands, lse, D) are over
    }

    if (!p.diag_no_dq) {
      // This consumer's staging tile in buffer b (stage_dq's layout; variant 11 without bank conflicts).
      const int b = Tr::NDQ == 2 ? n & 1 : 0;
      // the reduce of item n - NDQ has read it
      mbar_wait_fault(bar_dq_empty(b), ((uint32_t)(Tr::NDQ == 2 ? n >> 1 : n) & 1u) ^ 1u);
      if constexpr (Q80) stage_dq_t<BR>(base + Tr::OFF_DQ + (b * 2 + cw) * Tr::DQ_WG_BYTES, dq, p.scale, wtid, g, t);
      else stage_dq<BR, (MODE & kBwdDqSwz) != 0>(base + Tr::OFF_DQ + (b * 2 + cw) * Tr::DQ_WG_BYTES, dq, p.scale, wtid, g, t);
      fence_proxy_async_smem();  // these generic-proxy writes, visible to the copy engine after the arrival below
      mbar_arrive(bar_dq_full(b));
    }
    if constexpr ((MODE & kBwdDqFirst) != 0) {
      wgmma_wait<0>();  // dK retired: its operands (Q of stage st, sf) are free
      reg_fence(dk);
      reg_fence(sf);
      mbar_arrive(bar_empty(st));  // this thread's reads of stage st (wgmma operands, lse, D) are over
    }
    cur = nxt;
  }

  // ---- write dK (scaled), dV; every key tile writes (zeros where nothing was visible)
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int j = jrow[hf];
    if (j >= p.sk) continue;
    const size_t rb = ((size_t)j * p.nkv + hk) * D + 2 * t;
#pragma unroll
    for (int x = 0; x < NKX; ++x) {
      float2 kv = make_float2(p.scale * dk[x * 4 + hf * 2], p.scale * dk[x * 4 + hf * 2 + 1]);
      float2 vv = make_float2(dv[x * 4 + hf * 2], dv[x * 4 + hf * 2 + 1]);
      float2* pk = reinterpret_cast<float2*>(p.dk + rb + x * 8);
      float2* pv = reinterpret_cast<float2*>(p.dv + rb + x * 8);
      if (p.acc_dkdv) {
        const float2 ok = *pk, ov = *pv;
        kv.x += ok.x, kv.y += ok.y, vv.x += ov.x, vv.y += ov.y;
      }
      *pk = kv;
      *pv = vv;
    }
  }
}

template <int D, bool POS, int MODE>
cudaError_t launch_bwd_tma_ws_t(const BwdParams& p, const CUtensorMap& dq_map, const CUtensorMap& tq,
                                const CUtensorMap& tdo, const CUtensorMap& tk, const CUtensorMap& tv, cudaStream_t st) {
  using Tr = BwdTmaWsTraits<D, (MODE & kBwdQ80) != 0 ? 80 : 64>;
  auto kern = flash_bwd_tma_ws_kernel<D, POS, MODE>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.sk + Tr::BC - 1) / Tr::BC, p.nkv);
  BwdParams pk = p;  // the launch order: bwd_head_section, launch_tile_head
  pk.head_sect = bwd_head_section<D>(p, (int)grid.x);
  kern<<<grid, Tr::NT, Tr::smem_bytes, st>>>(pk, dq_map, tq, tdo, tk, tv);
  return cudaGetLastError();
}

// Variants 8 (MODE 0), 9 (1), 10 (3), 11 (7), 12 (15), 13 (31, head dim 128), 14 (63, head dim 128), 15 (47). dQ must be 16-byte aligned for the copy engine (the API promises 8):
// otherwise variant 6 runs.
template <int D, int MODE = 0>
cudaError_t launch_bwd_tma_ws(const BwdParams& p, cudaStream_t st) {
  if (reinterpret_cast<uintptr_t>(p.dq) % 16 != 0) return launch_bwd_wgmma<D, false, true, false>(p, st);
  CUtensorMap mdq, tq, tdo, tk, tv;
  std::memset(&mdq, 0, sizeof mdq), std::memset(&tq, 0, sizeof tq), std::memset(&tdo, 0, sizeof tdo);
  std::memset(&tk, 0, sizeof tk), std::memset(&tv, 0, sizeof tv);
  if (p.sq > 0) {  // sq == 0: no item in any block, nothing is loaded (maps unused); sk > 0 here (flash_backward)
    using Tr = BwdTmaWsTraits<D, (MODE & kBwdQ80) != 0 ? 80 : 64>;
    cudaError_t e = make_dq_tensor_map(&mdq, p.dq, p.sq, p.n, D, Tr::BR);
    if (e == cudaSuccess) e = make_tile_map(&tq, p.q, p.sq, p.n, D, Tr::BR);
    if (e == cudaSuccess) e = make_tile_map(&tdo, p.dout, p.sq, p.n, D, Tr::BR);
    if (e == cudaSuccess) e = make_tile_map(&tk, p.k, p.sk, p.nkv, D, Tr::BC);
    if (e == cudaSuccess) e = make_tile_map(&tv, p.v, p.sk, p.nkv, D, Tr::BC);
    if (e != cudaSuccess) return e;
  }
  return p.mask.kind >= kMaskWindow ? launch_bwd_tma_ws_t<D, true, MODE>(p, mdq, tq, tdo, tk, tv, st)
                                    : launch_bwd_tma_ws_t<D, false, MODE>(p, mdq, tq, tdo, tk, tv, st);
}

}  // namespace dev
}  // namespace burst_fa

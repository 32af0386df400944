// Forward variant 7 (sm_90a only): FlashAttention-3's structure on top of the
// v3 wgmma forward (flash_fwd_wgmma.cuh: same contract, masks, launch order,
// tile shapes BR = 128, BC = 128, same smem layout and wgmma descriptors).
//
// One block = 3 warpgroups (384 threads) per (query head, 128 query rows):
//   warpgroup 0: producer. setmaxnreg.dec to 56 registers; one thread issues
//     every load by TMA (cp.async.bulk.tensor.3d, 128-byte swizzle, boxes of
//     64 columns x ROWS rows, so the smem tile is exactly sw128<ROWS>): Q once,
//     then K_c and V_c of every visible key tile c into a ring of NST stages.
//     Each stage has a full barrier per tensor (arrive.expect_tx by the
//     producer + the TMA's complete_tx bytes) and an empty barrier per tensor
//     (one arrival per consumer warpgroup once the wgmma that read it retired).
//   warpgroups 1, 2: consumers, setmaxnreg.inc to 224; consumer w owns query
//     rows [64 w, 64 w + 64) of the tile. Per key tile c:
//       wait K_c full; named barrier "my turn" (bar.sync id, 256);
//       issue S_c = Q K_c^T (SS wgmma); bar.arrive "your turn" for the other
//       consumer; wait for S_c; release K_c; mask + online softmax of S_c
//       (the other consumer's S GEMM runs meanwhile); O *= alpha; pack P_c to
//       bf16 A fragments; wait V_c full; O += P_c V_c (RS wgmma); wait;
//       release V_c.
//     The scheduling barriers order the *issue* of the two consumers' S GEMMs
//     (strict alternation, FA3's inter-warpgroup ping-pong), so one consumer's
//     softmax runs while the other's GEMMs occupy the tensor cores, with no
//     block-wide barrier after the start.
// Modes (template MODE; lab variants 7, 8, 9, and 10 / 12 with 3 stages):
// 0 = the schedule above with
// __trap() in the bounded waits; 1 = the same with trap-free waits
// (mbar_wait_fault); 2 = trap-free waits plus FA3's intra-warpgroup overlap
// (S_c and P_{c-1} V_{c-1} issued together, the softmax of S_c while the
// product runs; producer 24 / consumers 240 registers). Why the trap matters:
// with a trap reachable from both branches ptxas allocated the consumer
// region within the 168-register entry budget despite setmaxnreg.inc (mode 0:
// 28-36 B of spills at d128; the overlapped schedule spilled ~600 B and
// serialised every wgmma, NOTES v5); without it modes 1 and 2 have no spills
// and no serialisation (lab run 6: mode 1 +2-7%, mode 2 +0-9% over mode 0).
// Ping-pong balance: consumer 0 syncs on barrier kBarSched0 once per tile and
// arrives on kBarSched1 once per tile; consumer 1 syncs on kBarSched1 once per
// tile and arrives on kBarSched0 once at the start (to let consumer 0 go first)
// and once per tile except its last. Both consumers walk the same tile list
// (the tile classification is per block), so every sync meets exactly one
// arrival of the other warpgroup and no arrival is left pending at exit; a
// block with no visible tile skips all of it (and loads nothing).
// Every mbarrier wait is bounded (a trap, or in modes 1-2 a store to address 0,
// after 2^28 failed polls: a fault, never a hang, if an arrival were ever lost).
#pragma once

#include "flash_fwd_wgmma.cuh"
#include "flash_tma.cuh"

#include <cstring>

namespace burst_fa {
namespace dev {

// ------------------------------------------------------------ PTX wrappers
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// Wait for the phase with the given parity to complete. Bounded: a lost
// arrival (a bug) traps after 2^28 failed polls (each try_wait suspends for a
// while before it fails: seconds in all) instead of hanging.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t n = 0;
  while (!mbar_try_wait(bar, parity))
    if (++n == (1u << 28)) __trap();
}
// Bounded mbarrier wait without a trap instruction: after 2^28 failed polls
// the thread stores to address 0 (an opaque null, so the compiler cannot fold
// it), i.e. the kernel dies with cudaErrorIllegalAddress (a fault, never a
// hang), and keeps polling until the fault takes the grid down. Why not
// __trap() (mbar_wait): with a trap reachable from both the producer and the
// consumer branch, ptxas (13.0) allocates the consumer branch as if it had the
// 168-register entry budget, not setmaxnreg's: spills and "wgmma serialized
// due to insufficient register resources" (NOTES, v7 backward with a TMA
// producer warp; forward variant 8).
// The fault of the bounded waits: a store of v to address 0 (an opaque null).
__device__ __forceinline__ void store_to_null(uint32_t v) {
  uint64_t a = 0;
  asm volatile("" : "+l"(a));
  asm volatile("st.global.u32 [%0], %1;\n" ::"l"(a), "r"(v) : "memory");
}
__device__ __forceinline__ void mbar_wait_fault(uint32_t bar, uint32_t parity) {
  uint32_t n = 0;
  while (!mbar_try_wait(bar, parity))
    if (++n == (1u << 28)) {
      store_to_null(n);
      n = 0;
    }
}
// The producer's wait for a free stage in forward variant 12: try_wait with a
// suspend-time hint, so the thread sleeps in the barrier unit until the phase
// completes (or the hint's 10 ms pass) instead of polling. Variant 10's
// producer polled ~38 times per wait (20 M polls of 8 instructions at 16K,
// in the issue slots of the scheduler that also runs two consumer warps);
// cuDNN's forward waits this way (NANOSLEEP.SYNCS 0x989680 in its SASS).
// Bounded by time, not polls (a poll may now take up to the hint): after
// 30 s without the phase, the same store to address 0 as mbar_wait_fault.
// Wall time counts time the context is not running (a debugger's pause, a
// time slice given to another process), hence the 30 s, not the few
// seconds the poll-count bound of mbar_wait_fault amounts to; the elapsed
// time is compared signed, so a timer step backwards cannot fault.
__device__ __forceinline__ bool mbar_try_wait_hint(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity), "n"(10000000)
      : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mbar_wait_sleep(uint32_t bar, uint32_t parity) {
  uint64_t t0 = 0;
  while (!mbar_try_wait_hint(bar, parity)) {
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
    if (t0 == 0) {
      t0 = now;
    } else if ((long long)(now - t0) > 30000000000ll) {
      store_to_null(parity);
      t0 = now;
    }
  }
}
template <bool TRAP> __device__ __forceinline__ void mbar_wait_t(uint32_t bar, uint32_t parity) {
  if constexpr (TRAP)
    mbar_wait(bar, parity);
  else
    mbar_wait_fault(bar, parity);
}
// The wait of a thread with nothing else to do meanwhile (a producer's wait
// for a free stage, the dQ writer's for a staged dQ): asleep in the barrier
// (SLEEP: forward variants 12, 13, backward variant 12), else mbar_wait_t's.
template <bool SLEEP, bool TRAP = false> __device__ __forceinline__ void mbar_wait_idle(uint32_t bar, uint32_t parity) {
  if constexpr (SLEEP)
    mbar_wait_sleep(bar, parity);
  else
    mbar_wait_t<TRAP>(bar, parity);
}
// 3-d tensor tile (coordinates innermost first) into shared memory, completing
// its bytes on the mbarrier.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int nthreads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <int D, int BC, int NST> struct TmaWsTraits {
  static constexpr int BR = 128, NT = 384;
  static constexpr uint32_t Q_BYTES = BR * D * 2, KV_BYTES = BC * D * 2;
  // Q, K[NST], V[NST] (each a multiple of 1024 bytes), then the mbarriers,
  // plus 1 KB to align the base to 1024 bytes (128B swizzle).
  static constexpr int NBAR = 1 + 4 * NST;
  static constexpr size_t smem_bytes = size_t(Q_BYTES) + 2 * NST * size_t(KV_BYTES) + 8 * NBAR + 1024;
  static_assert(D == 64 || D == 128, "head dim");
  // 176 (variants 17, 18: FlashAttention-3's d128 key tile for full masks) fits
  // two stages only: 32 KB of Q + 2 x 2 x 44 KB of K / V.
  static_assert(BC == 64 || BC == 128 || (BC == 176 && D == 128), "key tile (wgmma N): 64, 128, or 176 at d128");
  static_assert(NST >= 2 && NST <= 4, "stages");
  static_assert(smem_bytes <= 227 * 1024, "shared memory");
};

constexpr int kBarSched0 = 1, kBarSched1 = 2;  // named barriers (0 is __syncthreads)

// The consumer's per-tile math (tile_mask, softmax_step, pack_p, rescale_o, issue_qk, issue_pv) is in
// flash_fwd_wgmma.cuh, shared with variant 4.

// MODE 0: variant 7 (trap in the bounded waits, producer 56 / consumers 224
// registers, no intra-warpgroup overlap). MODE 1: variant 8, the same
// schedule with the trap-free waits (mbar_wait_fault). MODE 2: variant 9,
// trap-free waits, producer 24 / consumers 240 registers, and FA3's
// intra-warpgroup overlap: in turn c the consumer issues S_c = Q K_c^T and
// O += P_{c-1} V_{c-1} back to back, then runs the mask + softmax of S_c
// while P_{c-1} V_{c-1} (and the other consumer's GEMMs) occupy the tensor
// cores; O is rescaled by alpha_c once that product retired; the last tile's
// P V is issued after the loop. Turn count and the ping-pong arrivals are
// those of variant 7 (one turn per visible tile).
// MODE bit 4 (kFwdDiet; variant 12 = MODE 2 | 4 with 3 stages): variant 10
// with the descriptor diet of issue_qk / issue_pv and the producer's waits
// for a free stage asleep in the barrier (mbar_wait_sleep).
constexpr int kFwdDiet = 4;
// MODE bit 8 (kFwdSoftIL; variant 14 = MODE 2 | 4 | 8 with 3 stages): variant
// 12 with softmax_step_il (both rows' softmax interleaved).
constexpr int kFwdSoftIL = 8;
// MODE bit 16 (kFwdPolyExp; variant 15 = MODE 2 | 4 | 8 | 16 with 3 stages):
// variant 14 with a quarter of the exponentials on the FMA pipe (exp2_poly).
constexpr int kFwdPolyExp = 16;
// MODE bit 32 (kFwdNoPingPong; variant 16 = MODE 2 | 4 | 32 with 3 stages):
// variant 12 without the scheduling barriers: both consumers issue their
// GEMMs as soon as their operands are in (free-running, as cuDNN's forward
// appears to, by its 64-row tile per consumer warpgroup), the warp
// schedulers and the tensor-core queue interleaving them instead of FA3's
// strict alternation.
constexpr int kFwdNoPingPong = 32;
template <int MODE> struct FwdTmaWsRegs {
  static constexpr int producer = (MODE & 3) == 2 ? 24 : 56, consumer = (MODE & 3) == 2 ? 240 : 224;
};

template <int D, int BC, int NST, bool POS, int MODE, bool MERGE = false>
__global__ void __launch_bounds__(384, 1)
    flash_fwd_tma_ws_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ CUtensorMap tm_q,
                            const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v) {
  using Tr = TmaWsTraits<D, BC, NST>;
  constexpr bool TRAP = MODE == 0;
  constexpr bool DIET = (MODE & kFwdDiet) != 0;
  constexpr bool SIL = (MODE & kFwdSoftIL) != 0;
  constexpr int POLY = (MODE & kFwdPolyExp) != 0 ? 4 : 0;
  constexpr bool PP = (MODE & kFwdNoPingPong) == 0;  // the inter-warpgroup ping-pong
  constexpr int BR = Tr::BR;
  extern __shared__ __align__(1024) unsigned char tw_smem_raw[];
  const uint32_t raw_u32 = smem_u32(tw_smem_raw);
  const uint32_t sbase = (raw_u32 + 1023u) & ~1023u;
  const uint32_t q_s = sbase;                                // [BR x D] sw128
  const uint32_t k_s = q_s + Tr::Q_BYTES;                    // [NST][BC x D]
  const uint32_t v_s = k_s + NST * Tr::KV_BYTES;             // [NST][BC x D]
  const uint32_t bar0 = v_s + NST * Tr::KV_BYTES;            // mbarriers, 8 bytes each
  const uint32_t bar_q = bar0;
  auto bar_full_k = [&](int s) { return bar0 + 8u * (1 + s); };
  auto bar_full_v = [&](int s) { return bar0 + 8u * (1 + NST + s); };
  auto bar_empty_k = [&](int s) { return bar0 + 8u * (1 + 2 * NST + s); };
  auto bar_empty_v = [&](int s) { return bar0 + 8u * (1 + 3 * NST + s); };

  int qrank, h;
  launch_tile_head(gridDim.x, p.n, p.head_sect, qrank, h);
  const int qt = gridDim.x - 1 - qrank;  // the longest (causal) tiles first
  const int hk = h / p.group;
  const int tid = threadIdx.x, wg = tid / 128;
  const int i0 = qt * BR, i1 = min(i0 + BR, p.sq);
  const MaskDev& mask = p.mask;

  const int nkt = (p.sk + BC - 1) / BC;
  int kt_end = nkt;
  if (mask.kind == kMaskCausal) {
    const long long last = (long long)(i1 - 1) + mask.diag_offset;
    kt_end = last < 0 ? 0 : (int)(last / BC + 1 < nkt ? last / BC + 1 : nkt);
  }
  auto tile_cls = [&](int kt) {
    const int j0 = kt * BC;
    return classify_tile(mask, i0, i1, j0, min(j0 + BC, p.sk), j0 + BC > p.sk);
  };
  auto next_tile = [&](int kt) {
    while (kt < kt_end && tile_cls(kt) == 0) ++kt;
    return kt;
  };
  const int first = next_tile(0);

  if (tid == 0) {
    mbar_init(bar_q, 1);
#pragma unroll
    for (int s = 0; s < NST; ++s) {
      mbar_init(bar_full_k(s), 1);
      mbar_init(bar_full_v(s), 1);
      mbar_init(bar_empty_k(s), 2);  // one arrival per consumer warpgroup
      mbar_init(bar_empty_v(s), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the only block-wide barrier

  if (wg == 0) {
    // ------------------------------------------------------------ producer
    setmaxnreg_dec<FwdTmaWsRegs<MODE>::producer>();
    if (tid == 0 && first < kt_end) {
      tma_prefetch_desc(&tm_q);
      tma_prefetch_desc(&tm_k);
      tma_prefetch_desc(&tm_v);
      mbar_arrive_expect_tx(bar_q, Tr::Q_BYTES);
#pragma unroll
      for (int b = 0; b < D / 64; ++b) tma_load_3d(q_s + b * BR * 128, &tm_q, bar_q, b * 64, h, i0);
      int c = 0;
      for (int kt = first; kt < kt_end; kt = next_tile(kt + 1), ++c) {
        const int st = c % NST;
        const uint32_t ph = (uint32_t)(c / NST) & 1u;
        // the first round passes (fresh barrier: the "previous" phase is complete)
        mbar_wait_idle<DIET, TRAP>(bar_empty_k(st), ph ^ 1u);
        mbar_arrive_expect_tx(bar_full_k(st), Tr::KV_BYTES);
#pragma unroll
        for (int b = 0; b < D / 64; ++b)
          tma_load_3d(k_s + st * Tr::KV_BYTES + b * BC * 128, &tm_k, bar_full_k(st), b * 64, hk, kt * BC);
        mbar_wait_idle<DIET, TRAP>(bar_empty_v(st), ph ^ 1u);
        mbar_arrive_expect_tx(bar_full_v(st), Tr::KV_BYTES);
#pragma unroll
        for (int b = 0; b < D / 64; ++b)
          tma_load_3d(v_s + st * Tr::KV_BYTES + b * BC * 128, &tm_v, bar_full_v(st), b * 64, hk, kt * BC);
      }
    }
    return;
  }

  // -------------------------------------------------------------- consumers
  setmaxnreg_inc<FwdTmaWsRegs<MODE>::consumer>();
  const int cw = wg - 1;  // consumer index 0 / 1
  const int wtid = tid % 128;
  const int lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int wrow = cw * 64 + (wtid / 32) * 16;  // this warp's first row in the block's tile
  const int row0 = i0 + wrow + g;               // this thread's rows: row0, row0 + 8
  const int my_bar = cw == 0 ? kBarSched0 : kBarSched1, other_bar = cw == 0 ? kBarSched1 : kBarSched0;

  RowInfo qinfo[POS ? 2 : 1];
  if constexpr (POS) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) qinfo[hf] = row_info(mask, min(row0 + hf * 8, p.sq - 1), true);
  }

  float o[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x) o[x] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  const uint32_t q_base = q_s + cw * 64 * 128;

  if (first < kt_end) {
    if (PP && cw == 1) named_bar_arrive(kBarSched0, 256);  // consumer 0 goes first
    mbar_wait_t<TRAP>(bar_q, 0);
  }
  if constexpr ((MODE & 3) < 2) {
    int c = 0;  // visible-tile counter: K_c, V_c live in stage c % NST, phase (c / NST) & 1
    for (int cur = first; cur < kt_end; ++c) {
      const int nxt = next_tile(cur + 1);
      const bool last = nxt >= kt_end;
      const int st = c % NST;
      const uint32_t ph = (uint32_t)(c / NST) & 1u;
      mbar_wait_t<TRAP>(bar_full_k(st), ph);
      // Operand bases through an opaque copy, so that the 2 x D/16 + BC/16
      // descriptors are rebuilt per tile instead of hoisted into ~40 registers.
      uint32_t qa = q_base, ka = k_s + st * Tr::KV_BYTES, va = v_s + st * Tr::KV_BYTES;
      asm volatile("" : "+r"(qa), "+r"(ka), "+r"(va));
      if (PP) named_bar_sync(my_bar, 256);  // my turn on the tensor cores

      float s[BC / 2];
      wgmma_fence();
      issue_qk<D, BC, BR, DIET>(s, qa, ka);
      wgmma_commit();
      // The other consumer's turn (consumer 1's last arrival would have no sync to meet).
      if (PP && (cw == 0 || !last)) named_bar_arrive(other_bar, 256);
      wgmma_wait<0>();
      reg_fence(s);
      if (wtid == 0) mbar_arrive(bar_empty_k(st));  // K_c fully read

      if (tile_cls(cur) == 1) tile_mask<BC, POS>(s, mask, p.sk, row0, cur * BC, t, qinfo);
      float alpha[2];  // softmax while the other consumer's GEMMs run
      if constexpr (SIL) softmax_step_il<BC, POLY>(s, m, l, alpha, p.scale_log2);
      else softmax_step<BC>(s, m, l, alpha, p.scale_log2);
      uint32_t pf[BC / 16][4];
      pack_p<BC>(s, pf);
      rescale_o<D>(o, alpha);
      mbar_wait_t<TRAP>(bar_full_v(st), ph);
      wgmma_fence();
      issue_pv<D, BC, DIET>(o, pf, va);
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(o);
      if (wtid == 0) mbar_arrive(bar_empty_v(st));  // V_c fully read
      cur = nxt;
    }
  } else if (first < kt_end) {
    // Turn 0 (no product in flight yet) peeled, so that the loop's waits are
    // unconditional: with `if (c > 0)` around them ptxas could not pair the
    // wait_group 1 with the S product and serialised every wgmma (C7514).
    float s[BC / 2];
    uint32_t pf[BC / 16][4];  // P_{c-1}, the A operand of the product in flight
    float alpha[2];
    int cur = first, nxt = next_tile(first + 1);
    {
      mbar_wait_t<false>(bar_full_k(0), 0);
      uint32_t qa = q_base, ka = k_s;
      asm volatile("" : "+r"(qa), "+r"(ka));
      if (PP) named_bar_sync(my_bar, 256);
      wgmma_fence();
      issue_qk<D, BC, BR, DIET>(s, qa, ka);
      wgmma_commit();
      if (PP && (cw == 0 || nxt < kt_end)) named_bar_arrive(other_bar, 256);
      wgmma_wait<0>();
      reg_fence(s);
      if (wtid == 0) mbar_arrive(bar_empty_k(0));
      if (tile_cls(cur) == 1) tile_mask<BC, POS>(s, mask, p.sk, row0, cur * BC, t, qinfo);
      if constexpr (SIL) softmax_step_il<BC, POLY>(s, m, l, alpha, p.scale_log2);  // O = 0: no rescale
      else softmax_step<BC>(s, m, l, alpha, p.scale_log2);
      pack_p<BC>(s, pf);
    }
    int c = 1;
    for (; nxt < kt_end; ++c) {
      cur = nxt;
      nxt = next_tile(cur + 1);
      const bool last = nxt >= kt_end;
      const int st = c % NST, pst = (c - 1) % NST;
      const uint32_t ph = (uint32_t)(c / NST) & 1u, pph = (uint32_t)((c - 1) / NST) & 1u;
      mbar_wait_t<false>(bar_full_k(st), ph);
      mbar_wait_t<false>(bar_full_v(pst), pph);
      uint32_t qa = q_base, ka = k_s + st * Tr::KV_BYTES, va = v_s + pst * Tr::KV_BYTES;
      asm volatile("" : "+r"(qa), "+r"(ka), "+r"(va));
      if (PP) named_bar_sync(my_bar, 256);  // my turn on the tensor cores
      wgmma_fence();
      issue_qk<D, BC, BR, DIET>(s, qa, ka);
      wgmma_commit();
      issue_pv<D, BC, DIET>(o, pf, va);
      wgmma_commit();
      if (PP && (cw == 0 || !last)) named_bar_arrive(other_bar, 256);
      wgmma_wait<1>();  // S_c done; P_{c-1} V_{c-1} may still run
      reg_fence(s);
      if (wtid == 0) mbar_arrive(bar_empty_k(st));  // K_c fully read
      if (tile_cls(cur) == 1) tile_mask<BC, POS>(s, mask, p.sk, row0, cur * BC, t, qinfo);
      if constexpr (SIL) softmax_step_il<BC, POLY>(s, m, l, alpha, p.scale_log2);
      else softmax_step<BC>(s, m, l, alpha, p.scale_log2);
      wgmma_wait<0>();
      reg_fence(o);
      reg_fence(pf);
      if (wtid == 0) mbar_arrive(bar_empty_v(pst));  // V_{c-1} fully read
      rescale_o<D>(o, alpha);
      pack_p<BC>(s, pf);
    }
    --c;  // the last tile's index
    // the last tile's P V
    const int st = c % NST;
    const uint32_t ph = (uint32_t)(c / NST) & 1u;
    mbar_wait_t<false>(bar_full_v(st), ph);
    uint32_t va = v_s + st * Tr::KV_BYTES;
    asm volatile("" : "+r"(va));
    wgmma_fence();
    issue_pv<D, BC, DIET>(o, pf, va);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(o);
    if (wtid == 0) mbar_arrive(bar_empty_v(st));
  }

  // ---- epilogue: O / l, lse = (m + log2 l) ln 2
  write_o_lse<D, MERGE>(p, o, m, l, row0, h, t);
}

// ------------------------------------------------------------ host side
// [rows, heads, D] bf16 as a 3-d tensor (D, heads, rows), boxes of 64 columns x
// 1 head x box_rows rows, 128-byte swizzle; out-of-range rows read as zeros.
inline cudaError_t make_tile_map(CUtensorMap* map, const __nv_bfloat16* ptr, int rows, int heads, int D, int box_rows) {
  auto enc = tensor_map_encoder();
  if (!enc) return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)heads, (cuuint64_t)rows};
  const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)heads * D * 2};
  const cuuint32_t box[3] = {64, 1, (cuuint32_t)box_rows};
  const cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<__nv_bfloat16*>(ptr), dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <int D, int BC, int NST, bool POS, int MODE, bool MERGE>
cudaError_t launch_fwd_tma_ws_t(const FwdParams& p, cudaStream_t st) {
  using Tr = TmaWsTraits<D, BC, NST>;
  if (p.merge && !MERGE) return cudaErrorInvalidValue;  // this instantiation has no merging epilogue
  auto kern = flash_fwd_tma_ws_kernel<D, BC, NST, POS, MODE, MERGE>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tr::smem_bytes);
  if (attr != cudaSuccess) return attr;
  CUtensorMap tq, tk, tv;
  std::memset(&tq, 0, sizeof tq), std::memset(&tk, 0, sizeof tk), std::memset(&tv, 0, sizeof tv);
  cudaError_t e = make_tile_map(&tq, p.q, p.sq, p.n, D, Tr::BR);
  if (e == cudaSuccess && p.sk > 0) e = make_tile_map(&tk, p.k, p.sk, p.nkv, D, BC);
  if (e == cudaSuccess && p.sk > 0) e = make_tile_map(&tv, p.v, p.sk, p.nkv, D, BC);
  // sk == 0: no key tile, so the kernel loads nothing (K/V maps unused).
  if (e != cudaSuccess) return e;
  const dim3 grid((p.sq + Tr::BR - 1) / Tr::BR, p.n);
  FwdParams pk = p;  // the launch order: fwd_head_section, launch_tile_head
  pk.head_sect = fwd_head_section<D>(p, (int)grid.x);
  kern<<<grid, Tr::NT, Tr::smem_bytes, st>>>(pk, tq, tk, tv);
  return cudaGetLastError();
}

// MODE: 0 = variant 7, 1 = variant 8 (trap-free waits), 2 = variant 9 (+ intra-warpgroup overlap);
// 2 | kFwdDiet with NST = 3 = variant 12; 2 | kFwdDiet | kFwdSoftIL with NST = 3 = variant 14; | kFwdPolyExp = 15;
// 2 | kFwdDiet | kFwdNoPingPong with NST = 3 = variant 16; BC = 176, NST = 2, 2 | kFwdDiet = variant 17,
// | kFwdNoPingPong = variant 18. MERGE: the epilogue that merges into a
// running (O, lse) when p.merge is set (the engine's ring forward,
// flash_forward_merge); without it the launch refuses p.merge.
template <int D, int BC, int NST, int MODE = 0, bool MERGE = false>
cudaError_t launch_fwd_tma_ws(const FwdParams& p, cudaStream_t st) {
  return p.mask.kind >= kMaskWindow ? launch_fwd_tma_ws_t<D, BC, NST, true, MODE, MERGE>(p, st)
                                    : launch_fwd_tma_ws_t<D, BC, NST, false, MODE, MERGE>(p, st);
}

}  // namespace dev
}  // namespace burst_fa

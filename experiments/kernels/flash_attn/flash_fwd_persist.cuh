// Forward variant 11 (sm_90a only, lab): variant 10 (flash_fwd_tma_ws.cuh,
// MODE 2, 3 K/V stages) on a persistent grid.
//
// Why (NOTES run 7): variant 10 is 0.95-0.96x cuDNN at 32K and 0.87-0.90x on
// the rectangular ring blocks (4K x 8K, 8K x 4K, 16K x 8K), and a deeper K/V
// pipeline did not move the latter, which leaves the per-block costs: one
// block per (head, 128 query rows) means barrier set-up, the Q load and the
// pipeline fill before the first product, and the epilogue's O stores after
// the last, with the tensor cores of that SM idle, once per 32-64 key tiles.
// cuDNN's forward runs a persistent grid (132 blocks on the H200).
//
// What changes against variant 10:
// - grid = min(tiles, SMs) blocks (one per SM: 225 KB of smem); block b walks
//   the (head, query tile) items b, b + G, b + 2G, ... of a head-major list
//   (each head's query tiles from the last), in snake order: in odd rounds the
//   blocks take the round's items in reverse, so a block that took a longer
//   item in one round takes a shorter one in the next (causal balance);
// - the K/V ring's stage counter runs on across items (no refill from stage 0);
// - Q has an empty barrier too (2 arrivals: each consumer warpgroup once its
//   last S product of the item retired), so the producer loads the next item's
//   Q, and its first K/V tiles, while the consumers run the epilogue;
// - per item the consumers reset O, m, l and the mask's row info, and keep
//   variant 10's ping-pong turn protocol, which is balanced per item (see
//   flash_fwd_tma_ws.cuh), so it repeats across items;
// - an item with no visible key tile loads nothing and writes the empty
//   rows' O = 0, lse = -inf, as variant 10's block does.
// Status: written 2026-12-05; checked (96 of 96) and timed on the H200 the same
// day (lab NOTES, run 10): +2.5-4% on causal 4K / 16K, -1.5..-7.7% elsewhere,
// so the engine keeps variant 10.
// Variant 13 (DIET = true; written 2026-12-05 18:30): this kernel with forward
// variant 12's descriptor diet (issue_qk / issue_pv DIET) and its producer
// asleep in every wait (mbar_wait_sleep), Q's empty barrier included. Why: the
// profile of variant 12 (lab NOTES, "Run 11 and profile 4") shows the
// non-persistent kernel is not issue-bound and its gap to cuDNN's persistent
// forward is tensor-pipe occupancy (69.6% against 75.7%); variant 11's
// per-tile cost was the consumers' integer work at their register cap, which
// is what the diet removes.
#pragma once

#include "flash_fwd_tma_ws.cuh"

namespace burst_fa {
namespace dev {

// Item t of the list: head t / nqt, query tile nqt - 1 - t % nqt (head-major,
// each head's tiles longest first). The first order tried (2026-12-05 run 9,
// H100) was longest first over all heads (head t % n, tile nqt - 1 - t / n):
// the 132 items in flight then span every head, so their K/V (32 heads x 8 MB
// at 16K) cannot stay in the 50 MB L2, and the kernel took 7.82 ms against
// variant 10's 6.63 ms at 16K full (ncu). Head-major keeps the blocks in
// flight on one or two heads, as variant 10's grid (query tile fastest) does;
// the causal balance comes from the rotation instead: with G blocks and nqt
// tiles per head, block b's tile in round r is (r G + b) mod nqt, which walks
// every tile length over the rounds (plus the snake order).
struct PersistItem {
  int h, qt;
};
__device__ __forceinline__ PersistItem persist_item(int t, int n, int nqt) {
  (void)n;
  return {t / nqt, nqt - 1 - t % nqt};
}
// The block's r-th item in snake order: round r covers items [r G, r G + G).
__device__ __forceinline__ int persist_index(int r, int b, int G) { return r * G + ((r & 1) ? G - 1 - b : b); }
// An item's rows and key tiles, as the producer and the consumers both walk
// them: query rows [i0, i1) of head h, visible key tiles among [0, kt_end)
// (the causal bound), next() skipping the invisible ones (cls() == 0).
template <int BR, int BC> struct ItemTiles {
  const FwdParams* p;
  int h, i0, i1, kt_end;
  __device__ __forceinline__ int cls(int kt) const {
    const int j0 = kt * BC;
    return classify_tile(p->mask, i0, i1, j0, min(j0 + BC, p->sk), j0 + BC > p->sk);
  }
  __device__ __forceinline__ int next(int kt) const {
    while (kt < kt_end && cls(kt) == 0) ++kt;
    return kt;
  }
};
template <int BR, int BC> __device__ __forceinline__ ItemTiles<BR, BC> item_tiles(const FwdParams& p, int t, int nqt) {
  const PersistItem it = persist_item(t, p.n, nqt);
  const int i0 = it.qt * BR, i1 = min(i0 + BR, p.sq), nkt = (p.sk + BC - 1) / BC;
  int e = nkt;
  if (p.mask.kind == kMaskCausal) {
    const long long last = (long long)(i1 - 1) + p.mask.diag_offset;
    e = last < 0 ? 0 : (int)(last / BC + 1 < nkt ? last / BC + 1 : nkt);
  }
  return {&p, it.h, i0, i1, e};
}

template <int D, int BC, int NST, bool POS, bool DIET = false>
__global__ void __launch_bounds__(384, 1)
    flash_fwd_persist_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ CUtensorMap tm_q,
                             const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v) {
  using Tr = TmaWsTraits<D, BC, NST>;
  constexpr int BR = Tr::BR;
  extern __shared__ __align__(1024) unsigned char tw_smem_raw[];
  const uint32_t raw_u32 = smem_u32(tw_smem_raw);
  const uint32_t sbase = (raw_u32 + 1023u) & ~1023u;
  const uint32_t q_s = sbase;
  const uint32_t k_s = q_s + Tr::Q_BYTES;
  const uint32_t v_s = k_s + NST * Tr::KV_BYTES;
  const uint32_t bar0 = v_s + NST * Tr::KV_BYTES;  // TmaWsTraits reserves 1 + 4 NST barriers; +1 below (smem_bytes has slack)
  const uint32_t bar_q = bar0;
  auto bar_full_k = [&](int s) { return bar0 + 8u * (1 + s); };
  auto bar_full_v = [&](int s) { return bar0 + 8u * (1 + NST + s); };
  auto bar_empty_k = [&](int s) { return bar0 + 8u * (1 + 2 * NST + s); };
  auto bar_empty_v = [&](int s) { return bar0 + 8u * (1 + 3 * NST + s); };
  const uint32_t bar_q_empty = bar0 + 8u * (1 + 4 * NST);

  const int tid = threadIdx.x, wg = tid / 128;
  const MaskDev& mask = p.mask;
  const int nqt = (p.sq + BR - 1) / BR, items = nqt * p.n, G = gridDim.x, b = blockIdx.x;

  if (tid == 0) {
    mbar_init(bar_q, 1);
    mbar_init(bar_q_empty, 2);  // one arrival per consumer warpgroup
#pragma unroll
    for (int s = 0; s < NST; ++s) {
      mbar_init(bar_full_k(s), 1);
      mbar_init(bar_full_v(s), 1);
      mbar_init(bar_empty_k(s), 2);
      mbar_init(bar_empty_v(s), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // ------------------------------------------------------------ producer
    setmaxnreg_dec<24>();
    if (tid == 0) {
      tma_prefetch_desc(&tm_q);
      tma_prefetch_desc(&tm_k);
      tma_prefetch_desc(&tm_v);
      int c = 0;   // K/V stage counter over all of the block's items
      int qn = 0;  // items with a visible tile so far (Q loads)
      for (int r = 0; r * G < items; ++r) {
        const int t = persist_index(r, b, G);
        if (t >= items) continue;  // the last round's missing items (snake order: any block may lack one)
        const ItemTiles<BR, BC> it = item_tiles<BR, BC>(p, t, nqt);
        const int hk = it.h / p.group, kt_end = it.kt_end;
        const int first = it.next(0);
        if (first >= kt_end) continue;
        // the previous item's last S product retired
        mbar_wait_idle<DIET>(bar_q_empty, ((uint32_t)qn & 1u) ^ 1u);
        mbar_arrive_expect_tx(bar_q, Tr::Q_BYTES);
#pragma unroll
        for (int bb = 0; bb < D / 64; ++bb) tma_load_3d(q_s + bb * BR * 128, &tm_q, bar_q, bb * 64, it.h, it.i0);
        ++qn;
        for (int kt = first; kt < kt_end; kt = it.next(kt + 1), ++c) {
          const int st = c % NST;
          const uint32_t ph = (uint32_t)(c / NST) & 1u;
          mbar_wait_idle<DIET>(bar_empty_k(st), ph ^ 1u);
          mbar_arrive_expect_tx(bar_full_k(st), Tr::KV_BYTES);
#pragma unroll
          for (int bb = 0; bb < D / 64; ++bb)
            tma_load_3d(k_s + st * Tr::KV_BYTES + bb * BC * 128, &tm_k, bar_full_k(st), bb * 64, hk, kt * BC);
          mbar_wait_idle<DIET>(bar_empty_v(st), ph ^ 1u);
          mbar_arrive_expect_tx(bar_full_v(st), Tr::KV_BYTES);
#pragma unroll
          for (int bb = 0; bb < D / 64; ++bb)
            tma_load_3d(v_s + st * Tr::KV_BYTES + bb * BC * 128, &tm_v, bar_full_v(st), bb * 64, hk, kt * BC);
        }
      }
    }
    return;
  }

  // -------------------------------------------------------------- consumers
  setmaxnreg_inc<240>();
  const int cw = wg - 1;
  const int wtid = tid % 128;
  const int lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int wrow = cw * 64 + (wtid / 32) * 16;
  const int my_bar = cw == 0 ? kBarSched0 : kBarSched1, other_bar = cw == 0 ? kBarSched1 : kBarSched0;
  const uint32_t q_base = q_s + cw * 64 * 128;
  int c = 0;   // K/V stage counter, as the producer's
  int qn = 0;  // items with a visible tile so far

  for (int r = 0; r * G < items; ++r) {
    const int ti = persist_index(r, b, G);
    if (ti >= items) continue;
    const ItemTiles<BR, BC> it = item_tiles<BR, BC>(p, ti, nqt);
    const int h = it.h, kt_end = it.kt_end;
    const int row0 = it.i0 + wrow + g;
    const int first = it.next(0);

    RowInfo qinfo[POS ? 2 : 1];
    if constexpr (POS) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) qinfo[hf] = row_info(mask, min(row0 + hf * 8, p.sq - 1), true);
    }
    float o[D / 2];
#pragma unroll
    for (int x = 0; x < D / 2; ++x) o[x] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    if (first < kt_end) {
      if (cw == 1) named_bar_arrive(kBarSched0, 256);  // consumer 0 goes first in every item
      mbar_wait_fault(bar_q, (uint32_t)qn & 1u);
      float s[BC / 2];
      uint32_t pf[BC / 16][4];
      float alpha[2];
      int cur = first, nxt = it.next(first + 1);
      {  // turn 0 (peeled, as variant 9/10: unconditional waits in the loop)
        const int st = c % NST;
        const uint32_t ph = (uint32_t)(c / NST) & 1u;
        mbar_wait_fault(bar_full_k(st), ph);
        uint32_t qa = q_base, ka = k_s + st * Tr::KV_BYTES;
        asm volatile("" : "+r"(qa), "+r"(ka));
        named_bar_sync(my_bar, 256);
        wgmma_fence();
        issue_qk<D, BC, BR, DIET>(s, qa, ka);
        wgmma_commit();
        if (cw == 0 || nxt < kt_end) named_bar_arrive(other_bar, 256);
        wgmma_wait<0>();
        reg_fence(s);
        if (wtid == 0) mbar_arrive(bar_empty_k(st));
        if (nxt >= kt_end && wtid == 0) mbar_arrive(bar_q_empty);  // Q no longer read in this item
        if (it.cls(cur) == 1) tile_mask<BC, POS>(s, mask, p.sk, row0, cur * BC, t, qinfo);
        softmax_step<BC>(s, m, l, alpha, p.scale_log2);
        pack_p<BC>(s, pf);
      }
      int k = 1;  // the item's turn index; stage of turn k: (c + k) % NST
      for (; nxt < kt_end; ++k) {
        cur = nxt;
        nxt = it.next(cur + 1);
        const bool last = nxt >= kt_end;
        const int st = (c + k) % NST, pst = (c + k - 1) % NST;
        const uint32_t ph = (uint32_t)((c + k) / NST) & 1u, pph = (uint32_t)((c + k - 1) / NST) & 1u;
        mbar_wait_fault(bar_full_k(st), ph);
        mbar_wait_fault(bar_full_v(pst), pph);
        uint32_t qa = q_base, ka = k_s + st * Tr::KV_BYTES, va = v_s + pst * Tr::KV_BYTES;
        asm volatile("" : "+r"(qa), "+r"(ka), "+r"(va));
        named_bar_sync(my_bar, 256);
        wgmma_fence();
        issue_qk<D, BC, BR, DIET>(s, qa, ka);
        wgmma_commit();
        issue_pv<D, BC, DIET>(o, pf, va);
        wgmma_commit();
        if (cw == 0 || !last) named_bar_arrive(other_bar, 256);
        wgmma_wait<1>();
        reg_fence(s);
        if (wtid == 0) mbar_arrive(bar_empty_k(st));
        if (last && wtid == 0) mbar_arrive(bar_q_empty);
        if (it.cls(cur) == 1) tile_mask<BC, POS>(s, mask, p.sk, row0, cur * BC, t, qinfo);
        softmax_step<BC>(s, m, l, alpha, p.scale_log2);
        wgmma_wait<0>();
        reg_fence(o);
        reg_fence(pf);
        if (wtid == 0) mbar_arrive(bar_empty_v(pst));
        rescale_o<D>(o, alpha);
        pack_p<BC>(s, pf);
      }
      // the last tile's P V (turn k - 1)
      const int st = (c + k - 1) % NST;
      const uint32_t ph = (uint32_t)((c + k - 1) / NST) & 1u;
      mbar_wait_fault(bar_full_v(st), ph);
      uint32_t va = v_s + st * Tr::KV_BYTES;
      asm volatile("" : "+r"(va));
      wgmma_fence();
      issue_pv<D, BC, DIET>(o, pf, va);
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(o);
      if (wtid == 0) mbar_arrive(bar_empty_v(st));
      c += k;
      ++qn;
    }

    // ---- epilogue: O / l, lse = (m + log2 l) ln 2
    write_o_lse<D>(p, o, m, l, row0, h, t);
  }
}

// One block per SM (the device's count, read once), at most one per item.
template <int D, int BC, int NST, bool POS, bool DIET>
cudaError_t launch_fwd_persist_t(const FwdParams& p, cudaStream_t st) {
  using Tr = TmaWsTraits<D, BC, NST>;
  constexpr size_t smem = Tr::smem_bytes + 8;  // + the Q empty barrier
  static_assert(smem <= 227 * 1024, "shared memory");
  auto kern = flash_fwd_persist_kernel<D, BC, NST, POS, DIET>;
  static cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (attr != cudaSuccess) return attr;
  static int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 0;
    return n;
  }();
  if (sms <= 0) return cudaErrorInvalidDevice;
  CUtensorMap tq, tk, tv;
  std::memset(&tq, 0, sizeof tq), std::memset(&tk, 0, sizeof tk), std::memset(&tv, 0, sizeof tv);
  cudaError_t e = make_tile_map(&tq, p.q, p.sq, p.n, D, Tr::BR);
  if (e == cudaSuccess && p.sk > 0) e = make_tile_map(&tk, p.k, p.sk, p.nkv, D, BC);
  if (e == cudaSuccess && p.sk > 0) e = make_tile_map(&tv, p.v, p.sk, p.nkv, D, BC);
  if (e != cudaSuccess) return e;
  const long long items = (long long)((p.sq + Tr::BR - 1) / Tr::BR) * p.n;
  if (items <= 0) return cudaSuccess;
  const int grid = (int)(items < sms ? items : sms);
  kern<<<grid, Tr::NT, smem, st>>>(p, tq, tk, tv);
  return cudaGetLastError();
}

// DIET: forward variant 12's descriptor diet and sleeping producer (variant 13).
template <int D, int BC, int NST, bool DIET = false>
cudaError_t launch_fwd_persist(const FwdParams& p, cudaStream_t st) {
  return p.mask.kind >= kMaskWindow ? launch_fwd_persist_t<D, BC, NST, true, DIET>(p, st)
                                    : launch_fwd_persist_t<D, BC, NST, false, DIET>(p, st);
}

}  // namespace dev
}  // namespace burst_fa

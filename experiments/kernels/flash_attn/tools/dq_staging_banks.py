#!/usr/bin/env python3
"""Shared-memory wavefronts of the backward's dQ staging stores (flash_bwd_tma_ws.cuh,
one consumer warpgroup, BR = 64 rows x 64 fp32 columns in two 128B-swizzled boxes of
32 columns): each lane stores a float2 (STS.64), which the hardware runs as two
16-lane phases; a phase needs as many wavefronts as the most distinct 4-byte words
any one of the 32 banks holds among its accesses.

  variant 10 (MODE 3): every lane stores column x at step x;
  variant 11 (MODE 7, kBwdDqSwz): lanes of odd g store column x ^ 2.

Variant 13 (kBwdQ80, 80 query rows, dQ computed transposed) stages the dQ^T
accumulator by 4-byte stores (stage_dq_t) and writes dS query-major by
stmatrix .x4 .trans (store_ds_q); both are checked too: one wavefront per
store, every element once, at the place the TMA box (staging) or the wgmma
K-major descriptor (dS) reads it.

Exits non-zero if variants 11 or 13 are not conflict-free or do not store
every element exactly once where it is read."""
import sys

BR = 64


def offset(r, x, g, t):
    """Byte offset of column pair (x, t) of row r in the staging tile: stage_dq's formula
    (flash_bwd_wgmma.cuh); change both together."""
    return (x >> 2) * (BR * 128) + r * 128 + ((((x & 3) * 2 + (t >> 1)) ^ g) << 4) + (t & 1) * 8


def wavefronts(addrs):
    banks = {}
    for a in addrs:
        for w in (a // 4, a // 4 + 1):  # the two 4-byte words of the float2
            banks.setdefault(w % 32, set()).add(w)
    return max(len(v) for v in banks.values())


def check(swap):
    worst, stored = 0, {}
    for warp in range(4):
        for hf in range(2):
            for step in range(8):
                for phase in range(2):
                    addrs = []
                    for lane in range(16 * phase, 16 * phase + 16):
                        g, t = lane >> 2, lane & 3
                        x = step ^ (2 if swap and g & 1 else 0)
                        r = warp * 16 + g + hf * 8
                        a = offset(r, x, g, t)
                        addrs.append(a)
                        stored[a] = stored.get(a, 0) + 1
                    worst = max(worst, wavefronts(addrs))
    complete = len(stored) == BR * 64 * 4 // 8 and set(stored.values()) == {1}
    return worst, complete


def wavefronts_words(words):
    banks = {}
    for w in words:
        banks.setdefault(w % 32, set()).add(w)
    return max(len(v) for v in banks.values())


def check_q80():
    """stage_dq_t and store_ds_q of variant 13 (flash_bwd_tma_ws.cuh); change together."""
    BR80 = 80
    # stage_dq_t: thread (warp w, g, t) holds dQ^T[d = 16 w + g + 8 hf][q = 8 x + 2 t + e]; one consumer's
    # 64 columns in two boxes of BR80 rows x 32 fp32; the TMA's 128B swizzle puts (row r, column c) of a box
    # at r * 128 + ((c >> 2) ^ (r & 7)) * 16 + (c & 3) * 4.
    worst, stored, right = 0, {}, True
    for w in range(4):
        for hf in range(2):
            for x in range(BR80 // 8):
                for e in range(2):
                    words = []
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        c, r = 16 * (w & 1) + 8 * hf + g, 8 * x + 2 * t + e
                        a = (w >> 1) * (BR80 * 128) + r * 128 + (((c >> 2) ^ (r & 7)) << 4) + (c & 3) * 4
                        d, q = 16 * w + g + 8 * hf, 8 * x + 2 * t + e
                        box, col = d // 32, d % 32  # where the reduce-add reads dQ[q][d]
                        right &= a == box * (BR80 * 128) + q * 128 + (((col >> 2) ^ (q & 7)) << 4) + (col & 3) * 4
                        words.append(a // 4)
                        stored[a] = stored.get(a, 0) + 1
                    worst = max(worst, wavefronts_words(words))
    ok_stage = worst == 1 and right and len(stored) == BR80 * 64 and set(stored.values()) == {1}
    print(f"variant 13 dQ^T staging: {worst} wavefront(s) per store, every element once at its TMA place: "
          f"{right and len(stored) == BR80 * 64 and set(stored.values()) == {1}}")
    # store_ds_q: stmatrix .x4 .trans; register i of a lane (g, t) holds elements (row g, columns 2t, 2t+1) of
    # matrix i (rows = keys 16 warp + 8 (i & 1) + g, columns = queries 16 kk + 8 (i >> 1) + 2 t + e); .trans
    # stores element (row a, column b) of matrix i in the 16-byte row given by lane 8 i + b, at position a.
    # The wgmma K-major operand (N = queries, K = keys, 128B swizzle) reads dS[q][key] of a 64-key block at
    # q * 128 + ((key >> 3) ^ (q & 7)) * 16 + (key & 7) * 2.
    worst, stored, right = 0, {}, True
    for warp in range(4):
        for kk in range(BR80 // 16):
            rows = {}
            for lane in range(32):
                i, r = lane >> 3, lane & 7
                rows[lane] = (8 * (i >> 1) + r) * 128 + (((2 * warp + (i & 1)) ^ r) << 4) + kk * 16 * 128
            for i in range(4):
                words = []
                for b in range(8):
                    base_ = rows[8 * i + b]
                    words += [base_ // 4 + k for k in range(4)]
                    for a_ in range(8):
                        key, q = 16 * warp + 8 * (i & 1) + a_, 16 * kk + 8 * (i >> 1) + b
                        addr = base_ + 2 * a_
                        right &= addr == q * 128 + (((key >> 3) ^ (q & 7)) << 4) + (key & 7) * 2
                        stored[addr] = stored.get(addr, 0) + 1
                worst = max(worst, wavefronts_words(words))
    ok_ds = worst == 1 and right and len(stored) == BR80 * 64 and set(stored.values()) == {1}
    print(f"variant 13 dS (stmatrix .trans): {worst} wavefront(s) per matrix, every element once where wgmma reads it: "
          f"{right and len(stored) == BR80 * 64 and set(stored.values()) == {1}}")
    return ok_stage and ok_ds


def main():
    ok = check_q80()
    for name, swap in (("variant 10 (every lane column x)", False), ("variant 11 (odd g: column x ^ 2)", True)):
        w, complete = check(swap)
        print(f"{name}: {w} wavefront(s) per 16-lane phase, every float2 stored once: {complete}")
        ok &= complete
        if swap:
            ok &= w == 1
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Shared-memory wavefronts of the backward's dQ staging stores (flash_bwd_tma_ws.cuh,
one consumer warpgroup, BR = 64 rows x 64 fp32 columns in two 128B-swizzled boxes of
32 columns): each lane stores a float2 (STS.64), which the hardware runs as two
16-lane phases; a phase needs as many wavefronts as the most distinct 4-byte words
any one of the 32 banks holds among its accesses.

  variant 10 (MODE 3): every lane stores column x at step x;
  variant 11 (MODE 7, kBwdDqSwz): lanes of odd g store column x ^ 2.

Exits non-zero if variant 11 is not conflict-free (one wavefront per phase) or
does not store every (row, column) exactly once."""
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


def main():
    ok = True
    for name, swap in (("variant 10 (every lane column x)", False), ("variant 11 (odd g: column x ^ 2)", True)):
        w, complete = check(swap)
        print(f"{name}: {w} wavefront(s) per 16-lane phase, every float2 stored once: {complete}")
        ok &= complete
        if swap:
            ok &= w == 1
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Medians over rounds of bench_attn --rounds N (time.csv: one row per kernel, shape and round) and each
kernel's ratio to a base kernel per shape, with the geometric mean per mask. A/B on a card whose clocks
drift from row to row: the median of N rounds, each round timing every kernel once in turn.
usage: tools/ab_summary.py time.csv [--base-fwd SUBSTR] [--base-bwd SUBSTR]
(the base: the first kernel of each direction whose name contains SUBSTR; default the first listed)"""
import csv
import math
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path, args = sys.argv[1], sys.argv[2:]
    base_sub = {"fwd": None, "bwd": None}
    for k in ("fwd", "bwd"):
        if f"--base-{k}" in args:
            base_sub[k] = args[args.index(f"--base-{k}") + 1]
    rows = [r for r in csv.DictReader(open(path)) if r["kernel"] != "rowsum" and not r["kernel"].startswith("diag")]
    for direction in ("fwd", "bwd"):
        rs = [r for r in rows if r["kernel"].startswith(direction)]
        if not rs:
            continue
        kernels = list(dict.fromkeys(r["kernel"] for r in rs))
        base = next((k for k in kernels if base_sub[direction] and base_sub[direction] in k), kernels[0])
        t = {}
        for r in rs:
            key = (r["kernel"], (int(r["sq"]), int(r["sk"]), int(r["n"]), int(r["nkv"]), int(r["d"]), int(r["causal"])))
            t.setdefault(key, []).append(float(r["tflops"]))
        shapes = list(dict.fromkeys(s for _, s in t))
        print(f"{direction}: median TFLOP/s over rounds (rounds per cell: {min(len(v) for v in t.values())}"
              f"-{max(len(v) for v in t.values())}); base = {base}")
        for k in kernels:
            print(f"  [{kernels.index(k)}] {k}")
        print("  shape                      " + " ".join(f"{'[' + str(i) + ']':>14}" for i in range(len(kernels))))
        logs = {}
        for s in shapes:
            line = f"  {s[0]:>5} x {s[1]:<5} {s[2]}:{s[3]} d{s[4]} {'causal' if s[5] else 'full  '}"
            b = t.get((base, s))
            for k in kernels:
                v = t.get((k, s))
                if not v:
                    line += f"{'-':>15}"
                    continue
                m = statistics.median(v)
                spread = (max(v) - min(v)) / m * 100
                line += f" {m:7.1f} +-{spread / 2:4.1f}%"
                if b:
                    logs.setdefault((k, s[5]), []).append(math.log(m / statistics.median(b)))
            print(line)
        for (k, c), l in sorted(logs.items(), key=lambda x: (x[0][1], kernels.index(x[0][0]))):
            if k == base:
                continue
            g = 100 * (math.exp(sum(l) / len(l)) - 1)
            print(f"  [{kernels.index(k)}] vs base, {'causal' if c else 'full'}: geometric mean {g:+.2f}% over {len(l)} shapes"
                  f" (per shape {100 * (math.exp(min(l)) - 1):+.1f} .. {100 * (math.exp(max(l)) - 1):+.1f}%)")


if __name__ == "__main__":
    main()

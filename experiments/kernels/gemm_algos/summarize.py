#!/usr/bin/env python3
"""Summarise gemm_algos.csv: per shape, the heuristic's first algorithm against
the fastest candidate alone; per model, the 21-GEMM sequence with each choice
(medians over the rounds)."""
import csv
import statistics
import sys


def main(path):
    try:
        rows = list(csv.reader(open(path)))
    except OSError as e:
        sys.exit(f"summarize.py: error: cannot read {path}: {e.strerror}")
    alone = {}
    seq = {}
    device = "?"
    for r in rows:
        if not r:
            continue
        if r[0] == "device":
            device = r[1]
        elif r[0] == "alone":
            alone.setdefault(r[1], []).append(r)
        elif r[0] == "sequence":
            seq.setdefault((r[1], r[3]), []).append(float(r[4]))
    if not alone:
        sys.exit(f"summarize.py: error: {path} has no 'alone' rows (did the run fail?)")
    print(f"device: {device}")
    print(f"{'shape':22s} {'m x n x k':>22s} {'first ms':>9s} {'TF/s':>6s} {'best ms':>9s} {'TF/s':>6s} {'cand':>4s} {'gain':>6s}  best config (tile,stages,splitk,red,cluster,swz)")
    sums = {}
    for name, rs in alone.items():
        first = rs[0]
        best = min(rs, key=lambda r: float(r[15]))
        best8 = min(rs[:8], key=lambda r: float(r[15]))  # what the engine's tuning (8 candidates) can reach
        f, b = float(first[15]), float(best[15])
        mdl = name.split(".")[0]
        s = sums.setdefault(mdl, [0.0, 0.0, 0.0])
        s[0] += f
        s[1] += b
        s[2] += float(best8[15])
        shape = f"{first[4]}x{first[5]}x{first[6]}"
        print(f"{name:22s} {shape:>22s} {f:9.4f} {float(first[16]):6.0f} {b:9.4f} {float(best[16]):6.0f} {best[7]:>4s} {100*(f/b-1):5.1f}%  "
              f"{','.join(best[8:14])} (first: {','.join(first[8:14])})")
    for mdl, (f, b, b8) in sums.items():
        print(f"{mdl}: sum alone, heuristic first {f:.3f} ms, fastest {b:.3f} ms ({100*(f/b-1):.1f}%), "
              f"fastest of the first 8 {b8:.3f} ms ({100*(f/b8-1):.1f}%)")
    for (mdl, choice), ts in sorted(seq.items()):
        print(f"{mdl} sequence {choice:16s}: median {statistics.median(ts):.3f} ms over {len(ts)} rounds "
              f"(min {min(ts):.3f}, max {max(ts):.3f})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py gemm_algos.csv")
    main(sys.argv[1])

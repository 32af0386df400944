#!/usr/bin/env python3
"""Print what a BurstEngine result file holds: attributes, datasets, and for
benchmarks a table. Usage: h5_summary.py FILE.h5 [...]"""
import sys

import h5py
import numpy as np

from burst_h5 import attrs, open_h5, read_dataset


def summarize(path):
    with open_h5(path) as f:
        a = attrs(f)
        print(f"== {path}")
        for k in sorted(a):
            if k != "config":
                print(f"  {k}: {a[k]}")
        names = []
        f.visit(lambda n: names.append(n) if isinstance(f[n], h5py.Dataset) else None)
        if "log" in f:
            print(f"  run log: {len(f['log'].keys())} columns x {f['log'].attrs['rows']} rows")
        else:
            for n in names:
                print(f"  /{n} {f[n].shape} {f[n].dtype}")
        if "log" in f and "eval_loss" in f["log"]:
            log = f["log"]
            step, el, ea = log["step"][()], log["eval_loss"][()], log["eval_accuracy"][()]
            # per evaluation length (train.eval_seq_lens), when the run logged them
            lens = sorted(int(k[len("eval_accuracy_"):]) for k in log.keys() if k.startswith("eval_accuracy_"))
            head = "".join(f" {'acc@' + str(n):>10}" for n in lens)
            print(f"  {'step':>6} {'train loss':>11} {'held-out loss':>14} {'held-out acc':>13}{head}")
            for i in np.where(~np.isnan(el))[0]:
                per = "".join(f" {log['eval_accuracy_' + str(n)][i]:>10.3f}" for n in lens)
                print(f"  {int(step[i]) + 1:>6} {log['loss'][i]:>11.4f} {el[i]:>14.4f} {ea[i]:>13.3f}{per}")
        if a.get("benchmark") == "gemm":
            sizes = read_dataset(f, "gemm/sizes")
            g = read_dataset(f, "gemm/gflops")
            print(f"  {'n':>6} {'GFLOP/s per rank (mean)':>24} {'sum over ranks':>16}")
            for j, n in enumerate(sizes):
                print(f"  {n:>6} {np.mean(g[:, j]):>24.2f} {np.sum(g[:, j]):>16.2f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: h5_summary.py FILE.h5 [...]", file=sys.stderr)
        sys.exit(2)
    for p in sys.argv[1:]:
        summarize(p)

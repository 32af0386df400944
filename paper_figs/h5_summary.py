#!/usr/bin/env python3
"""Print what a BurstEngine result file holds: attributes, datasets, and for
benchmarks a table. Usage: h5_summary.py FILE.h5 [...]"""
import sys

import h5py
import numpy as np

from burst_h5 import attrs, die, open_h5, read_dataset


def column(path, log, name):
    """A run log's column, or one line naming the file and the column it lacks (status 2)."""
    if name not in log or not isinstance(log[name], h5py.Dataset):
        die(f"{path}: the run log has no column 'log/{name}'")
    return log[name][()]


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
            if not isinstance(f["log"], h5py.Group) or "rows" not in f["log"].attrs:
                die(f"{path}: 'log' is not a run log (no attribute 'rows' on a log group)")
            print(f"  run log: {len(f['log'].keys())} columns x {f['log'].attrs['rows']} rows")
        else:
            for n in names:
                print(f"  /{n} {f[n].shape} {f[n].dtype}")
        if "log" in f and "eval_loss" in f["log"]:
            log = f["log"]
            step, el, ea = column(path, log, "step"), column(path, log, "eval_loss"), column(path, log, "eval_accuracy")
            loss = column(path, log, "loss")
            # per evaluation length (train.eval_seq_lens), when the run logged them
            lens = sorted(int(k[len("eval_accuracy_"):]) for k in log.keys() if k.startswith("eval_accuracy_"))
            head = "".join(f" {'acc@' + str(n):>10}" for n in lens)
            print(f"  {'step':>6} {'train loss':>11} {'held-out loss':>14} {'held-out acc':>13}{head}")
            for i in np.where(~np.isnan(el))[0]:
                per = "".join(f" {log['eval_accuracy_' + str(n)][i]:>10.3f}" for n in lens)
                print(f"  {int(step[i]) + 1:>6} {loss[i]:>11.4f} {el[i]:>14.4f} {ea[i]:>13.3f}{per}")
        if a.get("benchmark") == "gemm":
            # every shape timed (the squares of gemm/sizes first, then bench.shapes / bench.llama)
            m, n, k = (read_dataset(f, "gemm/" + x) for x in ("m", "n", "k"))
            g = read_dataset(f, "gemm/gflops")
            print(f"  {'M x N x K':>22} {'GFLOP/s per rank (mean)':>24} {'sum over ranks':>16}")
            for j in range(len(m)):
                print(f"  {f'{m[j]} x {n[j]} x {k[j]}':>22} {np.mean(g[:, j]):>24.2f} {np.sum(g[:, j]):>16.2f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: h5_summary.py FILE.h5 [...]", file=sys.stderr)
        sys.exit(2)
    for p in sys.argv[1:]:
        summarize(p)

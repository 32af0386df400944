#!/usr/bin/env python3
"""Per-kernel time and DRAM bytes of one program run under Nsight Compute
(`ncu --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum`),
grouped by kernel (its demangled name, shortened), sorted by total time, each with
its achieved bandwidth and the time at the bytes floor (bytes / BW_TBS TB/s).

    python3 experiments/peers/ncu_kernels_summary.py ncu_layer_1B.csv [--bw-tbs 4.3] [--top 40]

Used by experiments/peers/run_h200.sh PART 8 to see where the LLaMA block's
"rest" (everything but the GEMMs and the attention kernels) goes."""
import argparse
import csv
import re
import sys


def short(name):
    """A readable kernel label: Kokkos functor / lambda tag, cuBLAS / flash kernel names kept short."""
    n = name
    m = re.search(r"__nv_dl_tag<[^,]*?\(&([\w:]+)\)", n) or re.search(r"__nv_dl_tag<[^>]*?&([\w:]+)", n)
    if m:
        return "lambda in " + m.group(1)
    m = re.search(r"ParallelFor<([\w:]+)", n) or re.search(r"ParallelReduce<([\w:]+)", n)
    if m:
        return "Kokkos " + m.group(1)
    n = re.sub(r"<.*", "", n)  # drop template arguments
    n = re.sub(r"\(.*", "", n)
    return n[:90]


# Older ncu names its units nsecond / usecond / byte / kbyte ..., ncu 2025 ns / us / B / KB ... (lowercased here)
SCALES = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "byte": 1.0, "kbyte": 1e3,
          "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}


def unit_scale(u, default):
    """Seconds or bytes per unit of ncu's unit name (the default unit's when the CSV has no units row)."""
    u = (u or default).strip().lower()
    if u not in SCALES:
        sys.exit(f"unknown ncu unit '{u}' (known: {', '.join(SCALES)})")
    return SCALES[u]


def number(x):
    """ncu's number ('1,234.5'), or None for 'n/a' and empty cells."""
    try:
        return float(x.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--bw-tbs", type=float, default=4.3)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    lines = [l for l in open(a.csv, errors="replace") if l.startswith('"')]  # ncu prints ==PROF== lines too
    rows = list(csv.reader(lines))
    if len(rows) < 2:
        sys.exit(f"{a.csv}: no ncu CSV rows (did the program launch any kernel?)")
    head = rows[0]
    col = {h: i for i, h in enumerate(head)}
    for need in ("Kernel Name", "gpu__time_duration.sum"):
        if need not in col:
            sys.exit(f"{a.csv}: no column '{need}' (columns: {', '.join(head[:12])} ...)")
    has_units = rows[1][col["Kernel Name"]] == ""  # ncu's second row: the metrics' units
    units = rows[1] if has_units else [""] * len(head)
    data = rows[2:] if has_units else rows[1:]
    ti = col["gpu__time_duration.sum"]
    bi = [col[k] for k in ("dram__bytes_read.sum", "dram__bytes_write.sum") if k in col]
    ts = unit_scale(units[ti], "nsecond")
    bs = {i: unit_scale(units[i], "byte") for i in bi}
    groups = {}
    total_t = total_b = 0.0
    launches = 0
    for r in data:
        t = number(r[ti]) if len(r) > ti else None
        if t is None:
            continue
        launches += 1
        t *= ts
        b = sum((number(r[i]) or 0.0) * bs[i] for i in bi if i < len(r))
        g = groups.setdefault(short(r[col["Kernel Name"]]), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += t
        g[2] += b
        total_t += t
        total_b += b
    if launches == 0:
        sys.exit(f"{a.csv}: no kernel rows")
    print(f"{launches} kernel launches, {total_t * 1e3:.3f} ms, {total_b / 1e9:.2f} GB DRAM "
          f"(floor at {a.bw_tbs} TB/s: {total_b / (a.bw_tbs * 1e12) * 1e3:.3f} ms)")
    print(f"{'kernel':90s} {'calls':>5s} {'ms':>9s} {'share':>6s} {'GB':>7s} {'TB/s':>6s} {'x floor':>7s}")
    for name, (n, t, b) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:a.top]:
        bw = b / t / 1e12 if t > 0 else 0.0
        fl = t / (b / (a.bw_tbs * 1e12)) if b > 0 else float("nan")
        print(f"{name:90s} {n:5d} {t * 1e3:9.3f} {100 * t / total_t:5.1f}% {b / 1e9:7.3f} {bw:6.2f} {fl:7.2f}")


if __name__ == "__main__":
    main()

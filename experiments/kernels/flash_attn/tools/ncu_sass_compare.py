#!/usr/bin/env python3
"""Two kernels side by side from Nsight Compute SASS source pages (CSV, as profile_h200.sh writes them:
`ncu -i R --page source --print-source sass --csv | gzip > F.csv.gz`): executed warp instructions and
stall samples per opcode, then every mbarrier wait (TRYWAIT) executed more often than 100 000 times with
its count, which shows polling loops (a wait executed N times for M waits polls N / M times per wait).

  ncu_sass_compare.py OURS.csv.gz[:K] THEIRS.csv.gz[:K] [top N]

K picks the K-th kernel of a file holding several (cuDNN's forward and backward: :0 and :1; default 0).
Used for the lab NOTES' "v11 forward" / "v10 backward" tables (run 9's pages)."""
import collections
import csv
import gzip
import sys


def load_page(arg):
    """(kernel name, header, rows) of kernel K of an ncu SASS source page (PATH[:K])."""
    path, _, k = arg.partition(":")
    which = int(k) if k else 0
    rows = list(csv.reader(gzip.open(path, "rt")))
    starts = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name"] + [len(rows)]
    if which >= len(starts) - 1:
        sys.exit(f"{path}: no kernel {which} (the file holds {len(starts) - 1})")
    a, b = starts[which], starts[which + 1]
    name = rows[a][1] if len(rows[a]) > 1 else "?"
    hdr = rows[a + 1]
    for col in ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"):
        if col not in hdr:
            sys.exit(f"{path}: not an ncu SASS source page (no column {col!r})")
    return name, hdr, rows[a + 2:b]


def load(arg):
    """(kernel name, [(source, executed, stall samples)]) of PATH[:K]."""
    name, hdr, rows = load_page(arg)
    i_src, i_ex = hdr.index("Source"), hdr.index("Instructions Executed")
    i_st = hdr.index("Warp Stall Sampling (All Samples)")
    out = []
    for r in rows:
        if len(r) <= max(i_src, i_ex, i_st):
            continue
        out.append((r[i_src].strip(), int(r[i_ex] or 0), int(r[i_st] or 0)))
    return name, out


def opcode(src):
    t = src.split()
    if not t:
        return "?"
    return (t[1] if t[0].startswith("@") and len(t) > 1 else t[0]).split(".")[0]


def by_op(lines):
    ex, st = collections.Counter(), collections.Counter()
    for src, e, s in lines:
        ex[opcode(src)] += e
        st[opcode(src)] += s
    return ex, st


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    (na, a), (nb, b) = load(sys.argv[1]), load(sys.argv[2])
    ea, sa = by_op(a)
    eb, sb = by_op(b)
    print(f"A: {na[:110]}\nB: {nb[:110]}")
    print(f"SASS lines {len(a)} / {len(b)}; executed {sum(ea.values()):,} / {sum(eb.values()):,}; "
          f"stall samples {sum(sa.values()):,} / {sum(sb.values()):,}")
    print(f"{'opcode':10s} {'A exec':>14s} {'B exec':>14s} {'A - B':>14s} {'A stall':>9s} {'B stall':>9s}")
    for k in sorted(set(ea) | set(eb), key=lambda k: -(ea[k] + eb[k]))[:top]:
        print(f"{k:10s} {ea[k]:14,d} {eb[k]:14,d} {ea[k] - eb[k]:14,d} {sa[k]:9,d} {sb[k]:9,d}")
    for tag, lines in (("A", a), ("B", b)):
        print(f"{tag}: mbarrier waits executed > 100000 times (TRYWAIT; NANOSLEEP = asleep in the barrier)")
        for i, (src, e, s) in enumerate(lines):
            if e > 100000 and ("TRYWAIT" in src or "NANOSLEEP" in src):
                print(f"  line {i:5d} {e:12,d} stall {s:7,d}  {src[:70]}")


if __name__ == "__main__":
    main()

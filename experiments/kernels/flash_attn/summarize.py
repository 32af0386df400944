#!/usr/bin/env python3
"""Side-by-side table of bench_attn's time.csv and peers_sdpa.py's peers.csv:
for each shape the best variant of ours (named), torch FLASH, torch cuDNN, and
ours / cuDNN, and the best wgmma and best mma.sync variant separately (DIAG
variants, diagnostics that may be wrong by design, are left out). usage: summarize.py OUTDIR  (writes OUTDIR/summary.md, prints it)"""
import csv
import os
import subprocess
import sys


def gpu_name():
    """The card this table was measured on (nvidia-smi, which the device has), so that an H100's run is not
    labelled H200; GPU_NAME=... overrides (summarizing a fetched folder elsewhere)."""
    if os.environ.get("GPU_NAME"):
        return "one " + os.environ["GPU_NAME"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip().splitlines()
        return "one " + out[0] if out else "an unnamed GPU"
    except (OSError, subprocess.SubprocessError):
        return "an unnamed GPU (no nvidia-smi where this table was written)"


def load(path):
    try:
        with open(path) as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        return []


def main():
    out = sys.argv[1]
    ours = load(f"{out}/time.csv")
    peers = load(f"{out}/peers.csv")
    shapes = sorted({(int(r["sq"]), int(r["sk"]), int(r["n"]), int(r["nkv"]), int(r["causal"])) for r in ours if r["kernel"] != "rowsum"})
    lines = ["| sq x sk | heads | mask | pass | ours best (variant) | wgmma best | mma.sync best | torch FLASH | torch cuDNN | ours/FLASH | ours/cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (sq, sk, n, nkv, c) in shapes:
        for pas in ("fwd", "bwd"):
            mine = [r for r in ours if int(r["sq"]) == sq and int(r["sk"]) == sk and int(r["n"]) == n and int(r["nkv"]) == nkv
                    and int(r["causal"]) == c and r["kernel"].startswith(pas) and "DIAG" not in r["kernel"]]
            if not mine:
                continue
            best = max(mine, key=lambda r: float(r["tflops"]))
            def peer(impl):
                m = [r for r in peers if r["impl"] == impl and r["kernel"] == pas and int(r["sq"]) == sq and int(r["sk"]) == sk
                     and int(r["n"]) == n and int(r["nkv"]) == nkv and int(r["causal"]) == c]
                return float(m[0]["tflops"]) if m else None
            fa, cd = peer("torch_flash"), peer("torch_cudnn")
            bt = float(best["tflops"])
            wg = [float(r["tflops"]) for r in mine if "wgmma" in r["kernel"]]
            ms = [float(r["tflops"]) for r in mine if "wgmma" not in r["kernel"]]
            fmt = lambda x: f"{x:.0f}" if x is not None else "n/a"
            rat = lambda x: f"{bt / x:.2f}" if x else "n/a"
            lines.append(f"| {sq}x{sk} | {n}:{nkv}x128 | {'causal' if c else 'full'} | {pas} | {bt:.0f} ({best['kernel'][4:]}) "
                         f"| {fmt(max(wg) if wg else None)} | {fmt(max(ms) if ms else None)} "
                         f"| {fmt(fa)} | {fmt(cd)} | {rat(fa)} | {rat(cd)} |")
    txt = "TFLOP/s (fwd = 4 sq sk n d, x0.5 causal; bwd = 2.5 x fwd), bf16, batch 1, " + gpu_name() + ", same run\n\n" + "\n".join(lines) + "\n"
    with open(f"{out}/summary.md", "w") as fh:
        fh.write(txt)
    print(txt)


if __name__ == "__main__":
    main()

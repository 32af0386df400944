#!/usr/bin/python3
"""The H200 cluster of THIS engine (experiments/clusters/h200_engine.toml) and
its software constants (experiments/perf_calibration_h200_engine.toml) from
the engine's own block microbenchmark on the H200 (`burst bench layer`, bf16,
32K tokens, the 1B and 7B block shapes; PART 6 of experiments/peers/run_h200.sh),
the method calibrate_cpu.py uses on the CPU:

- the GEMM rate at the block's own shapes: 3 x the block's forward GEMM FLOPs
  (perf::ModelShape::gemm_flops_per_token, SwiGLU) over the measured GEMM
  phases (7 forward + 14 backward GEMMs), mean over the shapes, as a fraction
  of the cluster's peak -> gpu.gemm_fraction;
- the block's rest (RMSNorm, RoPE, SwiGLU, residuals, casts: the block's time
  less its attention and GEMMs) as bf16 passes over (hidden + ffn) values per
  token at the cluster's HBM bandwidth -> elementwise.passes, and its forward
  part -> elementwise.forward_share.

The attention rates stay those of the lab kernels (the cluster file says
which runs). perf_calibration.toml's passes (123) describe torch eager's
block, the right constants for the paper's PyTorch engine, not ours.

    /usr/bin/python3 experiments/runners/calibrate_h200_engine.py DIR_WITH_layer_1B_bf16.h5_AND_layer_7B_bf16.h5 [--check]

--check: only compare with the committed files (exit 1 when they differ by more than the printed precision)."""
import argparse
import os
import re
import sys
import tomllib

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLUSTER = os.path.join(ROOT, "experiments", "clusters", "h200_engine.toml")
BASE_CAL = os.path.join(ROOT, "experiments", "perf_calibration.toml")
OUT_CAL = os.path.join(ROOT, "experiments", "perf_calibration_h200_engine.toml")
SHAPES = {"1B": (2048, 16, 128, 5632), "7B": (4096, 32, 128, 11008)}  # bench layer's presets (SwiGLU, MHA)


def phases(path):
    with h5py.File(path, "r") as f:
        names = f.attrs["phase_names"]
        names = (names.decode() if isinstance(names, bytes) else names).split(";")
        ph = dict(zip(names, (float(x) for x in f["phases/seconds"][:])))
        return ph, int(f.attrs["tokens"]) if "tokens" in f.attrs else 32768, str(f.attrs.get("date", ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    with open(CLUSTER, "rb") as f:
        cl = tomllib.load(f)
    peak, hbm = cl["gpu"]["peak_bf16_tflops"] * 1e12, cl["gpu"]["hbm_tb_per_s"] * 1e12
    rates, passes, fshare, notes = [], [], [], []
    for name, (h, n, d, ffn) in SHAPES.items():
        path = os.path.join(a.dir, f"layer_{name}_bf16.h5")
        if not os.path.exists(path):
            sys.exit(f"calibrate_h200_engine: no {path} (run_h200.sh PART 6 writes it)")
        ph, S, _ = phases(path)
        q = n * d
        flops_fwd = 2.0 * S * (h * q + 2 * h * q + q * h + 3 * h * ffn)
        gemm = ph["gemm_fwd"] + ph["gemm_bwd"]
        rest = ph["rest_fwd"] + ph["rest_bwd"]
        rates.append(3 * flops_fwd / gemm)
        passes.append(rest * hbm / (2 * (h + ffn) * S))
        fshare.append(ph["rest_fwd"] / rest)
        notes.append(f"{name} {S // 1024}K: GEMMs {gemm * 1e3:.3f} ms = {rates[-1] / 1e12:.1f} TFLOP/s, rest "
                     f"{rest * 1e3:.3f} ms ({ph['rest_fwd'] * 1e3:.3f} fwd) = {passes[-1]:.2f} passes")
    frac, p, fs = float(np.mean(rates)) / peak, float(np.mean(passes)), float(np.mean(fshare))
    src = os.path.relpath(a.dir, ROOT)
    print("\n".join(notes))
    print(f"-> gemm_fraction {frac:.4f}, elementwise passes {p:.1f}, forward share {fs:.3f}")
    cl_text = open(CLUSTER).read()
    new_cl = re.sub(r"^gemm_fraction = .*$",
                    f"gemm_fraction = {frac:.4f}    # measured: bench layer's GEMM phases at the block shapes ({src}): "
                    f"mean {np.mean(rates) / 1e12:.1f} TFLOP/s (calibrate_h200_engine.py)", cl_text, count=1, flags=re.M)
    base = open(BASE_CAL).read()
    head = ("# perf_calibration.toml with THIS engine's block on the H200 (experiments/runners/calibrate_h200_engine.py,\n"
            f"# from {src}: {'; '.join(notes)}).\n# Use with --cluster experiments/clusters/h200_engine.toml.\n")
    new_cal = head + re.sub(r"^passes = .*$", f"passes = {p:.1f}   # measured: the engine's block rest (header)", base, count=1, flags=re.M)
    new_cal = re.sub(r"^forward_share = .*$", f"forward_share = {fs:.3f}    # measured: the block rest's forward part (header)",
                     new_cal, count=1, flags=re.M)
    if a.check:
        old_cal = open(OUT_CAL).read() if os.path.exists(OUT_CAL) else ""
        same = old_cal == new_cal and cl_text == new_cl
        print("committed files " + ("match" if same else "DIFFER"))
        sys.exit(0 if same else 1)
    with open(CLUSTER, "w") as f:
        f.write(new_cl)
    with open(OUT_CAL, "w") as f:
        f.write(new_cal)
    print(f"wrote {os.path.relpath(CLUSTER, ROOT)}, {os.path.relpath(OUT_CAL, ROOT)}")


if __name__ == "__main__":
    main()

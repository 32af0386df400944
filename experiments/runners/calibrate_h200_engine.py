#!/usr/bin/python3
"""The one-GPU cluster of THIS engine (experiments/clusters/h200_engine.toml, or
with --card h100 h100_engine.toml) and its software constants
(experiments/perf_calibration_h200_engine.toml / _h100_engine.toml) from the
engine's own block microbenchmark on that card (`burst bench layer`, bf16,
32K tokens, the 1B and 7B block shapes; PART 6 / 17 of
experiments/peers/run_h200.sh), the method calibrate_cpu.py uses on the CPU:

- the GEMM rate at the block's own shapes: 3 x the block's forward GEMM FLOPs
  (perf::ModelShape::gemm_flops_per_token, SwiGLU) over the measured GEMM
  phases (7 forward + 14 backward GEMMs), mean over the shapes, as a fraction
  of the cluster's peak -> gpu.gemm_fraction;
- the block's rest (RMSNorm, RoPE, SwiGLU, residuals, casts: the block's time
  less its attention and GEMMs) as bf16 passes over (hidden + ffn) values per
  token at the cluster's HBM bandwidth -> elementwise.passes, and its forward
  part -> elementwise.forward_share.

The attention curve is the lab kernels' (the cluster file says which runs);
with --attention S:FWD:BWD,S:FWD:BWD (causal forward and backward TFLOP/s of
the engine's default kernels at two block sizes, paper convention) the
cluster's curve r_inf * S / (S + t0) is refitted through the two combined
rates 3.5 / (1/FWD + 2.5/BWD), fwd_over_bwd from the longer one, and
--attention-source says where the rates were measured.
perf_calibration.toml's passes (123) describe torch eager's block, the right
constants for the paper's PyTorch engine, not ours.

    /usr/bin/python3 experiments/runners/calibrate_h200_engine.py DIR_OR_TAR_WITH_layer_1B_bf16.h5_AND_layer_7B_bf16.h5
        [--card h200|h100] [--attention S:F:B,S:F:B --attention-source TEXT] [--check]

--check: only compare with the committed files (exit 1 when they differ by more than the printed precision)."""
import argparse
import os
import re
import sys
import tarfile
import tempfile
import textwrap
import tomllib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common as C  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BASE_CAL = os.path.join(ROOT, "experiments", "perf_calibration.toml")
SHAPES = {"1B": (2048, 16, 128, 5632), "7B": (4096, 32, 128, 11008)}  # bench layer's presets (SwiGLU, MHA)


def fail(msg):
    sys.exit(f"calibrate_h200_engine: {msg}")


def phases(path, widths):
    """The phase times and tokens of one bench layer file, checked against the expected widths."""
    with h5py.File(path, "r") as f:
        a = f.attrs
        for k in ("phase_names", "tokens"):
            if k not in a:
                fail(f"{path}: no attribute '{k}' (not a `burst bench layer` file with its phase breakdown?)")
        names = a["phase_names"]
        names = (names.decode() if isinstance(names, bytes) else names).split(";")
        if "phases/seconds" not in f:
            fail(f"{path}: no phases/seconds (bench layer ran with bench.phases = false?)")
        ph = dict(zip(names, (float(x) for x in f["phases/seconds"][:])))
        for k in ("gemm_fwd", "gemm_bwd", "rest_fwd", "rest_bwd"):
            if k not in ph:
                fail(f"{path}: no phase '{k}' (phases: {', '.join(names)})")
        got = {k: int(a[k]) for k in ("hidden", "heads", "head_dim", "ffn") if k in a}
        want = dict(zip(("hidden", "heads", "head_dim", "ffn"), widths))
        if any(got.get(k, want[k]) != v for k, v in want.items()):
            fail(f"{path}: block widths {got}, expected {want}")
        return ph, int(a["tokens"])


def attention_fit(spec):
    """r_inf (TFLOP/s), t0 (tokens), fwd_over_bwd and a note from 'S:F:B,S:F:B' (two block sizes)."""
    pts = []
    for item in spec.split(","):
        parts = item.split(":")
        try:
            S, fw, bw = int(parts[0]), float(parts[1]), float(parts[2])
        except (ValueError, IndexError):
            fail(f"--attention: '{item}' is not TOKENS:FWD_TFLOPS:BWD_TFLOPS")
        if len(parts) != 3 or S <= 0 or fw <= 0 or bw <= 0:
            fail(f"--attention: '{item}' is not TOKENS:FWD_TFLOPS:BWD_TFLOPS with positive values")
        pts.append((S, fw, bw, 3.5 / (1 / fw + 2.5 / bw)))
    if len(pts) != 2 or pts[0][0] == pts[1][0]:
        fail("--attention: give exactly two different block sizes")
    (s1, f1, b1, r1), (s2, f2, b2, r2) = sorted(pts)
    # r = r_inf S / (S + t0) through both: r1 (s1 + t0) / s1 = r2 (s2 + t0) / s2
    den = r2 / s2 - r1 / s1
    if not r2 > r1 or den >= 0:
        fail(f"--attention: the combined rate must grow with the block ({r1:.1f} at {s1}, {r2:.1f} at {s2})")
    t0 = (r1 - r2) / den
    r_inf = r2 * (s2 + t0) / s2
    note = (f"S={s1 // 1024}K {f1:g} / {b1:g} -> {r1:.0f} TFLOP/s, S={s2 // 1024}K {f2:g} / {b2:g} -> {r2:.0f} TFLOP/s")
    return r_inf, t0, f2 / b2, note


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--card", choices=("h200", "h100"), default="h200")
    ap.add_argument("--attention", help="S:FWD:BWD,S:FWD:BWD causal TFLOP/s of the default kernels at two block sizes")
    ap.add_argument("--attention-source", help="where --attention's rates were measured (into the cluster file)")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if bool(a.attention) != bool(a.attention_source):
        fail("--attention and --attention-source go together")
    CLUSTER = os.path.join(ROOT, "experiments", "clusters", f"{a.card}_engine.toml")
    OUT_CAL = os.path.join(ROOT, "experiments", f"perf_calibration_{a.card}_engine.toml")
    card = a.card.upper()
    src = os.path.relpath(a.dir, ROOT)
    if os.path.isfile(a.dir):  # a part's h5 tar (run_h200.sh packs them): read its layer files from a temporary copy
        tmp = tempfile.TemporaryDirectory()
        try:
            with tarfile.open(a.dir) as t:
                for name in ("layer_1B_bf16.h5", "layer_7B_bf16.h5"):
                    try:
                        data = t.extractfile(name)
                    except KeyError:
                        data = None
                    if data is None:
                        fail(f"{a.dir}: no {name} in the tar")
                    with open(os.path.join(tmp.name, name), "wb") as f:
                        f.write(data.read())
        except tarfile.TarError as e:
            fail(f"{a.dir}: not a tar of bench layer files ({e})")
        a.dir = tmp.name
    with open(CLUSTER, "rb") as f:
        cl = tomllib.load(f)
    peak, hbm = cl["gpu"]["peak_bf16_tflops"] * 1e12, cl["gpu"]["hbm_tb_per_s"] * 1e12
    rates, passes, fshare, notes = [], [], [], []
    for name, (h, n, d, ffn) in SHAPES.items():
        path = os.path.join(a.dir, f"layer_{name}_bf16.h5")
        if not os.path.exists(path):
            fail(f"no {path} (run_h200.sh PART 6 / 17 writes it)")
        ph, S = phases(path, (h, n, d, ffn))
        flops_fwd = C.block_gemm_flops_fwd(S, h, n, n, d, ffn)
        gemm = ph["gemm_fwd"] + ph["gemm_bwd"]
        rest = ph["rest_fwd"] + ph["rest_bwd"]
        rates.append(3 * flops_fwd / gemm)
        passes.append(rest * hbm / (2 * (h + ffn) * S))
        fshare.append(ph["rest_fwd"] / rest)
        notes.append(f"{name} {S // 1024}K: GEMMs {gemm * 1e3:.3f} ms = {rates[-1] / 1e12:.1f} TFLOP/s, rest "
                     f"{rest * 1e3:.3f} ms ({ph['rest_fwd'] * 1e3:.3f} fwd) = {passes[-1]:.2f} passes")
    frac, p, fs = float(np.mean(rates)) / peak, float(np.mean(passes)), float(np.mean(fshare))
    print("\n".join(notes))
    print(f"-> gemm_fraction {frac:.4f}, elementwise passes {p:.1f}, forward share {fs:.3f}")
    cl_text = open(CLUSTER).read()

    def sub(pattern, repl, text, what):
        out, n = re.subn(pattern, repl, text, count=1, flags=re.M)
        if n != 1:
            fail(f"no '{what}' line to replace")
        return out
    new_cl = sub(r"^gemm_fraction = .*$",
                 f"gemm_fraction = {frac:.4f}    # measured: bench layer's GEMM phases at the block shapes ({src}): "
                 f"mean {np.mean(rates) / 1e12:.1f} TFLOP/s (calibrate_h200_engine.py)", cl_text, "gpu.gemm_fraction")
    if a.attention:
        r_inf, t0, k, anote = attention_fit(a.attention)
        print(f"-> attention {anote}: rate_inf {r_inf:.1f} TFLOP/s, t0 {t0:.0f} tokens, fwd_over_bwd {k:.3f}")
        text = (f"OUR engine's default bf16 flash kernels, causal, {a.attention_source}: fwd / bwd -> combined "
                f"3.5 / (1/fwd + 2.5/bwd): {anote}; the curve through both points (calibrate_h200_engine.py --attention).")
        block = ("[attention]\n" + "".join(f"# {line}\n" for line in textwrap.wrap(text, 100)) +
                 f"rate_inf_tflops = {r_inf:.1f}\nt0_tokens = {t0:.0f}\nfwd_over_bwd = {k:.3f}\n")
        new_cl = sub(r"^\[attention\]\n(?:(?!\[).*\n)*?fwd_over_bwd = .*\n", block, new_cl, "[attention] section")
    base = open(BASE_CAL).read()
    # the base file's header and its [elementwise] comment describe torch eager's block: replaced
    body = base[base.index("[elementwise]"):]
    body = sub(r"^\[elementwise\]\n(#.*\n)*", "[elementwise]\n# THIS engine's block: bf16 passes over (hidden + ffn) values per token, forward + backward, at\n"
               "# the cluster's HBM bandwidth, from bench layer's rest (header).\n", body, "[elementwise] comment")
    body = sub(r"^passes = .*$", f"passes = {p:.1f}   # measured: the engine's block rest (header)", body, "elementwise.passes")
    body = sub(r"^forward_share = .*$", f"forward_share = {fs:.3f}    # measured: the block rest's forward part (header)",
               body, "elementwise.forward_share")
    new_cal = (f"# Software constants of the performance model for THIS engine's kernels on the {card}: perf_calibration.toml\n"
               "# with the block's elementwise part measured by experiments/runners/calibrate_h200_engine.py from\n"
               f"# {src}: {'; '.join(notes)}.\n"
               f"# Use with --cluster experiments/clusters/{a.card}_engine.toml (whose gemm_fraction the same script measured).\n\n"
               + body)
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

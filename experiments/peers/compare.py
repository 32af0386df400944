#!/usr/bin/env python3
"""Side-by-side ratios of our benchmarks and the PyTorch peers of one device run.

  compare.py DIR     DIR holds gemm_bf16.h5, ce_bf16.h5, kernels_bf16.h5, layer_*.h5 (burst bench) and
                     peers_*.json (experiments/peers/peers.py); whatever is there is compared.

The LLaMA block (layer_<preset>_<dtype>.h5 from `burst bench layer`, peers' `block`): time of forward +
backward side by side, the ratio torch / burst (> 1: burst is faster; the issue's target is >= 1.1 against
eager), TFLOP/s by the same convention (ALGORITHMS.md section 9: 3 x (GEMMs + causal attention) forward
FLOPs), peak memory, burst's phase breakdown and the check against the double block.
"""
import glob
import json
import os
import sys

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "paper_figs"))
from burst_h5 import die, open_h5, require  # noqa: E402

USAGE = "usage: compare.py DIR   (DIR holds gemm_bf16.h5, ce_bf16.h5, kernels_bf16.h5, layer_*.h5, peers_*.json)"
BENCH = "a `burst bench {}` output"
LAYER_ATTRS = ("preset", "dtype", "tokens", "median_fwd_bwd_s", "tflops_fwd_bwd", "flops_fwd_bwd", "peak_extra_bytes",
               "median_fwd_s", "check_rel_error_y", "check_rel_error_dx", "check_rel_error_dw", "check_passed",
               "check_tokens")


def load_peers(d):
    """peers_*.json of DIR merged (each a JSON object); a file that is not one exits with one line."""
    peers = {}
    for p in sorted(glob.glob(os.path.join(d, "peers_*.json"))):
        try:
            with open(p) as fh:
                x = json.load(fh)
        except json.JSONDecodeError as e:
            die(f"{p}: not valid JSON: {e}")
        except (OSError, UnicodeDecodeError) as e:
            die(f"{p}: cannot read it: {e}")
        if not isinstance(x, dict):
            die(f"{p}: must be a JSON object (experiments/peers/peers.py's output), got a {type(x).__name__}")
        peers.update(x)
    return peers


def check_inputs(d):
    """Every burst file of DIR opened and checked before anything is printed."""
    names = {"gemm_bf16.h5": (("shape_labels",), ("gemm/tflops",), "gemm"),
             "ce_bf16.h5": (("tokens", "hidden", "vocab"), ("ce/chunks", "ce/seconds", "ce/extra_peak_bytes"), "ce"),
             "kernels_bf16.h5": (("kernel_names",), ("kernels/seconds",), "kernels")}
    for n, (attrs, items, kind) in names.items():
        p = os.path.join(d, n)
        if os.path.exists(p):
            with open_h5(p, "benchmark file") as f:
                require(f, p, BENCH.format(kind), attrs=attrs, items=items)
    for p in sorted(glob.glob(os.path.join(d, "layer_*.h5"))):
        with open_h5(p, "benchmark file") as f:
            require(f, p, BENCH.format("layer"), attrs=LAYER_ATTRS)


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__ if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else USAGE,
              file=sys.stdout if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else sys.stderr)
        sys.exit(0 if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else 2)
    d = sys.argv[1]
    if not os.path.isdir(d):
        die(f"no such directory: {d}" if not os.path.exists(d) else f"{d} is not a directory")
    known = ["gemm_bf16.h5", "ce_bf16.h5", "kernels_bf16.h5"]
    if not (any(os.path.exists(os.path.join(d, n)) for n in known) or glob.glob(os.path.join(d, "layer_*.h5"))
            or glob.glob(os.path.join(d, "peers_*.json"))):
        die(f"{d} holds none of gemm_bf16.h5, ce_bf16.h5, kernels_bf16.h5, layer_*.h5, peers_*.json: nothing to compare")
    peers = load_peers(d)
    check_inputs(d)
    g = os.path.join(d, "gemm_bf16.h5")
    if os.path.exists(g) and "gemm" in peers:
        with h5py.File(g, "r") as f:
            labels = f.attrs["shape_labels"]
            labels = (labels.decode() if isinstance(labels, bytes) else str(labels)).split(";")
            tf = f["gemm/tflops"][0]
        torch_tf = {r["label"]: r["tflops"] for r in peers["gemm"]}
        print(f"\n{'GEMM bf16 (TFLOP/s)':30s} {'burst':>8s} {'torch':>8s} {'ratio':>7s}")
        for lab, t in zip(labels, tf):
            key = lab if lab in torch_tf else ("NN:8192^3" if lab.startswith("NN:8192") else None)
            if key in torch_tf:
                print(f"{lab:30s} {t:8.1f} {torch_tf[key]:8.1f} {t / torch_tf[key]:7.3f}")
    c = os.path.join(d, "ce_bf16.h5")
    if os.path.exists(c):
        with h5py.File(c, "r") as f:
            chunks, sec, extra = f["ce/chunks"][:], f["ce/seconds"][:], f["ce/extra_peak_bytes"][:]
            N, H, V = int(f.attrs["tokens"]), int(f.attrs["hidden"]), int(f.attrs["vocab"])
        ce = peers.get("ce", {})
        naive = ce.get("naive", {}).get("ms")
        print(f"\nLM head + CE, N={N} H={H} V={V}, fwd+bwd     s     extra GiB   naive torch / this")
        if naive:
            print(f"{'torch naive':24s} {naive / 1e3:9.4f} {ce['naive']['extra_peak_bytes'] / 2**30:10.2f}   1.000")
        for r in ce.get("chunked", []):
            print(f"{'torch chunked ' + str(r['chunk']):24s} {r['ms'] / 1e3:9.4f} {r['extra_peak_bytes'] / 2**30:10.2f}"
                  f"   {naive / r['ms'] if naive else float('nan'):.3f}")
        for ch, s, e in zip(chunks, sec, extra):
            print(f"{'burst fused ' + str(ch):24s} {s:9.4f} {e / 2**30:10.2f}   {naive / 1e3 / s if naive else float('nan'):.3f}")
    k = os.path.join(d, "kernels_bf16.h5")
    if os.path.exists(k):
        with h5py.File(k, "r") as f:
            names = f.attrs["kernel_names"]
            names = (names.decode() if isinstance(names, bytes) else str(names)).split(";")
            sec = f["kernels/seconds"][:]
        tk = {r["kernel"]: r["ms"] for r in peers.get("kernels", [])}
        print(f"\n{'memory-bound kernel (ms)':24s} {'burst':>9s} {'torch':>9s} {'torch/burst':>11s}")
        for n, s_ in zip(names, sec):
            t = tk.get(n)
            print(f"{n:24s} {s_ * 1e3:9.4f} {t if t else float('nan'):9.4f} {t / (s_ * 1e3) if t else float('nan'):11.3f}")
    for r in peers.get("sdpa", []):
        print(f"sdpa {r['impl']:6s} {r['kernel']} S={r['seq']} {'causal' if r['causal'] else 'full':6s} {r['tflops']:7.1f} TFLOP/s")
    for r in peers.get("block", []):
        if "tflops" in r:
            print(f"block {r['model']} {r['mode']:7s} {r['ms']:9.3f} ms {r['tflops']:7.1f} TFLOP/s")
    compare_layers(d, peers)


def attr_str(f, k):
    v = f.attrs[k]
    return v.decode() if isinstance(v, bytes) else str(v)


def compare_layers(d, peers):
    """burst bench layer files against the torch block of the same preset and token count."""
    files = sorted(glob.glob(os.path.join(d, "layer_*.h5")))
    if not files:
        return
    torch_rows = {}
    for r in peers.get("block", []):
        if "ms" in r:
            torch_rows[(r["model"], int(r["tokens"]), r["mode"])] = r
    print(f"\n{'LLaMA block fwd+bwd':26s} {'ms':>9s} {'TFLOP/s':>8s} {'peak GiB':>9s} {'torch/burst':>11s}")
    for path in files:
        with h5py.File(path, "r") as f:
            preset, dtype, S = attr_str(f, "preset"), attr_str(f, "dtype"), int(f.attrs["tokens"])
            ms = float(f.attrs["median_fwd_bwd_s"]) * 1e3
            tf = float(f.attrs["tflops_fwd_bwd"])
            fl = float(f.attrs["flops_fwd_bwd"])
            extra = float(f.attrs["peak_extra_bytes"]) / 2**30
            fwd_ms = float(f.attrs["median_fwd_s"]) * 1e3
            names = attr_str(f, "phase_names").split(";") if "phase_names" in f.attrs else []
            phases = f["phases/seconds"][:] if "phases/seconds" in f else []
            chk = [float(f.attrs[k]) for k in ("check_rel_error_y", "check_rel_error_dx", "check_rel_error_dw")]
            passed, ctok = int(f.attrs["check_passed"]), int(f.attrs["check_tokens"])
        print(f"{'burst ' + preset + ' ' + dtype:26s} {ms:9.3f} {tf:8.1f} {extra:9.2f} {'1.000':>11s}"
              f"   (forward alone {fwd_ms:.3f} ms)")
        for mode in ("eager", "compile"):
            r = torch_rows.get((preset, S, mode))
            if not r:
                continue
            if abs(r["flops"] / fl - 1) > 1e-6:
                print(f"  (torch {mode} counts {r['flops']:.4g} FLOPs, burst {fl:.4g}: different shapes?)")
            print(f"{'torch ' + preset + ' ' + mode:26s} {r['ms']:9.3f} {r['tflops']:8.1f} "
                  f"{r['peak_extra_bytes'] / 2**30:9.2f} {r['ms'] / ms:11.3f}")
        if len(phases):
            print("  phases (alone, ms): " + ", ".join(f"{n} {s * 1e3:.3f}" for n, s in zip(names, phases)))
        print(f"  check vs double at {ctok} tokens: y {chk[0]:.2e}, dx {chk[1]:.2e}, dW {chk[2]:.2e}"
              f" ({'passed' if passed else 'FAILED'})")


if __name__ == "__main__":
    main()

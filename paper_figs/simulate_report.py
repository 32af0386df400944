#!/usr/bin/env python3
"""`burst simulate --table paper` HDF5 -> Markdown tables and PNG figures.

    python3 paper_figs/simulate_report.py experiments/results/simulate_paper.h5 --out experiments/results/simulate

Writes <out>/simulate_tables.md (predicted vs published, error of every cell) and
<out>/*.png: throughput and memory per method, attention TFLOP/s, ablation,
scaling, memory vs sequence length.
"""
import argparse
import os
import shutil
import tempfile

# The Agg backend (files only), set before matplotlib is imported: an invalid
# MPLBACKEND in the environment made `import matplotlib` itself fail.
os.environ["MPLBACKEND"] = "Agg"
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from burst_h5 import attrs, check_out_dir, die, make_out_dir, open_h5, require  # noqa: E402

WHAT = "a `burst simulate --table paper` output"
REQUIRED_ATTRS = ("cluster_file", "calibration_file", "gemm_fraction", "attn_rate_inf_tflops", "attn_t0_tokens",
                  "link_efficiency", "elementwise_passes", "allocator_slack")



class Malformed(Exception):
    """The input lacks something the report reads (named in the message)."""


def repo_rel(path):
    """A path inside this repository, relative to its root (the report is read from the repository)."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    p = os.path.abspath(str(path))
    return os.path.relpath(p, root) if p.startswith(root + os.sep) else str(path)

def err(pred, pub):
    return f"{100 * (pred / pub - 1):+.1f}%"


def prediction_cell(a):
    if "infeasible" in a:
        return "infeasible", None, None
    tgs, mem = a["tokens_per_s_per_gpu"], a["memory_gib"]
    if not a["fits"]:
        return f"OOM ({mem:.1f} GiB; {tgs:.1f} tok/s/GPU if it fitted)", None, mem
    return f"{tgs:.1f}, {mem:.1f}", tgs, mem


def end_to_end(f, sect, lines, figdir):
    if sect not in f:
        return
    rows = list(f[sect].keys())
    fig, axes = plt.subplots(2, len(rows), figsize=(6.5 * len(rows), 8), squeeze=False)
    for j, row in enumerate(rows):
        g = f[sect][row]
        names = list(g.keys())
        known = ["BurstEngine", "LoongTrain-USP", "LoongTrain-DoubleRing", "DeepSpeed-Ulysses", "Megatron-CP"]
        for n in names:
            if n not in known:
                raise Malformed(f"{sect}/{row}/{n}: unknown framework {n!r} (known: {', '.join(known)})")
        if not names:
            raise Malformed(f"{sect}/{row}: no frameworks")
        names.sort(key=known.index)
        lines.append(f"\n### {sect}: {row.replace('_', ', ')} GPUs\n")
        published = "published_tokens_per_s_per_gpu" in g[names[0]].attrs
        if published:
            lines.append("| framework | predicted tok/s/GPU, GiB | published tok/s/GPU, GB | tok/s error | memory error |")
            lines.append("|---|---|---|---|---|")
        else:
            lines.append("| framework | predicted tok/s/GPU, GiB | MFU (paper convention) |")
            lines.append("|---|---|---|")
        pt, pm, bt, bm, oom = [], [], [], [], []
        for n in names:
            a = attrs(f, f"{sect}/{row}/{n}")
            cell, tgs, mem = prediction_cell(a)
            pt.append(tgs if tgs else a.get("tokens_per_s_per_gpu", 0)), pm.append(mem if mem else 0)
            oom.append(tgs is None)
            if published:
                ptgs, pmem = a["published_tokens_per_s_per_gpu"], a["published_memory_gib"]
                bt.append(ptgs), bm.append(pmem)
                pubcell = "OOM" if ptgs == 0 else f"{ptgs:.1f}, {pmem:.1f}"
                if ptgs == 0:
                    e_t = "agrees (no run)" if tgs is None else "predicted a run"
                else:
                    e_t = err(tgs, ptgs) if tgs else f"predicted OOM (time alone: {err(a['tokens_per_s_per_gpu'], ptgs)})" if "fits" in a and "infeasible" not in a else "predicted no run"
                e_m = (err(mem, pmem) if (mem and ptgs and n == "BurstEngine") else
                       "not compared (other allocator)" if ptgs else "")
                lines.append(f"| {n} | {cell} | {pubcell} | {e_t} | {e_m} |")
            else:
                mfu = f"{100 * a['mfu']:.1f}%" if "mfu" in a and a.get("fits") else ""
                lines.append(f"| {n} | {cell} | {mfu} |")
        x = np.arange(len(names))
        w = 0.38
        ax = axes[0][j]
        bars = ax.bar(x - w / 2, pt, w, label="predicted")
        for b, o in zip(bars, oom):
            if o:  # predicted OOM: the time alone, hatched
                b.set_alpha(0.35), b.set_hatch("//")
        if published:
            ax.bar(x + w / 2, bt, w, label="published")
        ax.set_xticks(x, [n.replace("-", "-\n") for n in names], fontsize=9)
        ax.set_ylabel("tokens/s per GPU")
        ax.set_title(f"{row.replace('_', ', ')} GPUs: throughput\n(hatched: predicted OOM, time alone; missing: OOM / infeasible)", fontsize=10)
        ax.legend()
        ax = axes[1][j]
        ax.bar(x - w / 2, pm, w, label="predicted (GiB)")
        if published:
            ax.bar(x + w / 2, bm, w, label="published (GB)")
        ax.axhline(f.attrs["memory_capacity_gib"], color="k", ls="--", lw=1, label="capacity")
        ax.set_xticks(x, [n.replace("-", "-\n") for n in names], fontsize=9)
        ax.set_ylabel("peak reserved memory per GPU")
        ax.set_title("memory (bars above the line: OOM)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(figdir, f"{sect}_throughput_memory.png"), dpi=110)
    plt.close(fig)


def attention_only(f, lines, figdir):
    g = f["attention_only"]
    if not isinstance(g, h5py.Group) or len(g.keys()) == 0:
        raise Malformed("attention_only: an empty group (no methods)")
    lines.append("\n### Attention only: 40 heads x 128, causal, 32 GPUs, fwd+bwd TFLOP/s per GPU (predicted / published, error)\n")
    seq = None
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, name in enumerate(g.keys()):
        seq = g[name]["seq"][()]
        pred, pub = g[name]["predicted_tflops"][()], g[name]["published_tflops"][()]
        if i == 0:
            lines.append("| method | " + " | ".join(f"{int(s) // 1024}K" for s in seq) + " |")
            lines.append("|---|" + "---|" * len(seq))
        cells = [f"{p:.1f} / {b:.1f} ({err(p, b)})" if b > 0 else f"{p:.1f} / OOM" for p, b in zip(pred, pub)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        c = f"C{i}"
        ax.plot(seq / 1024, pred, "-o", color=c, label=f"{name} predicted")
        ok = pub > 0
        ax.plot(seq[ok] / 1024, pub[ok], "--s", color=c, mfc="none", label=f"{name} published")
    ax.set_xscale("log", base=2)
    ax.set_xticks(seq / 1024, [f"{int(s) // 1024}K" for s in seq])
    ax.set_xlabel("sequence length")
    ax.set_ylabel("TFLOP/s per GPU (fwd+bwd)")
    ax.set_title("Attention only, 32 A800s (published missing = OOM)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(figdir, "attention_tflops.png"), dpi=110)
    plt.close(fig)


def ablation(f, lines, figdir):
    g = f["ablation"]
    steps = g.attrs["steps"]
    steps = (steps.decode() if isinstance(steps, bytes) else steps).split(",")
    tgs, mem = g["tokens_per_s_per_gpu"][()], g["memory_gib"][()]
    cap = f.attrs["memory_capacity_gib"]
    lines.append("\n### Ablation: 14B, 1M tokens, 32 GPUs (predicted; no published numbers in our sources)\n")
    lines.append("| step | tok/s/GPU | GiB/GPU |")
    lines.append("|---|---|---|")
    for s, t, m in zip(steps, tgs, mem):
        lines.append(f"| {s} | {t:.1f} | {m:.1f}{' (OOM)' if m > cap else ''} |")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(steps))
    a1.bar(x, tgs, color=["C3" if m > cap else "C0" for m in mem])
    a1.set_xticks(x, steps, rotation=20, fontsize=9)
    a1.set_ylabel("tokens/s per GPU")
    a1.set_title("Ablation throughput (red: predicted OOM)")
    a2.bar(x, mem, color="C1")
    a2.axhline(cap, color="k", ls="--", lw=1, label="capacity")
    a2.set_xticks(x, steps, rotation=20, fontsize=9)
    a2.set_ylabel("GiB per GPU")
    a2.set_title("Ablation memory")
    a2.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(figdir, "ablation.png"), dpi=110)
    plt.close(fig)


def scaling(f, lines, figdir):
    g = f["scaling"]
    P, tgs, mfu, mem = g["gpus"][()], g["tokens_per_s_per_gpu"][()], g["mfu_paper_script"][()], g["memory_gib"][()]
    lines.append("\n### Scaling: 14B, 32K tokens per GPU, BurstEngine (published: 1 GPU only, 1201 tok/s, 47.3%)\n")
    lines.append("| GPUs | tokens | tok/s/GPU | MFU (their script) | GiB/GPU |")
    lines.append("|---|---|---|---|---|")
    for p, t, m, me in zip(P, tgs, mfu, mem):
        lines.append(f"| {int(p)} | {int(p) * 32}K | {t:.1f} | {100 * m:.1f}% | {me:.1f} |")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    a1.plot(P, tgs, "-o", label="predicted")
    a1.plot([1], [g.attrs["published_one_gpu_tokens_per_s"]], "ks", mfc="none", ms=10, label="published (1 GPU)")
    a1.set_xscale("log", base=2), a1.set_yscale("log")
    a1.set_yticks([50, 100, 200, 400, 800, 1600], ["50", "100", "200", "400", "800", "1600"])
    a1.set_xlabel("GPUs (32K tokens each)"), a1.set_ylabel("tokens/s per GPU")
    a1.set_title("Scaling: tokens/s per GPU (attention grows with S)")
    a1.legend()
    a2.plot(P, 100 * mfu, "-o")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("GPUs"), a2.set_ylabel("MFU % (paper convention x 1.024)")
    a2.set_title("Scaling: MFU")
    fig.tight_layout()
    fig.savefig(os.path.join(figdir, "scaling.png"), dpi=110)
    plt.close(fig)


def memory_vs_seq(f, lines, figdir):
    g = f["memory_vs_seq"]
    seq = g["seq"][()]
    cap = g.attrs["capacity_gib"]
    names = [k[: -len("_memory_gib")] for k in g.keys() if k.endswith("_memory_gib")]
    lines.append("\n### Memory vs sequence length: 14B, 32 GPUs, GiB/GPU (predicted; > capacity = OOM)\n")
    lines.append("| framework | " + " | ".join(f"{int(s) // 1024}K" for s in seq) + " |")
    lines.append("|---|" + "---|" * len(seq))
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, n in enumerate(names):
        m = g[n + "_memory_gib"][()]
        lines.append(f"| {n} | " + " | ".join("-" if np.isnan(v) else f"{v:.1f}" for v in m) + " |")
        if not np.all(np.isnan(m)):
            ax.plot(seq / 1024, m, "-o", label=n)
    ax.axhline(cap, color="k", ls="--", lw=1, label=f"capacity {cap:.1f} GiB")
    ax.set_xscale("log", base=2), ax.set_yscale("log")
    ax.set_xticks(seq / 1024, [f"{int(s) // 1024}K" for s in seq])
    ax.set_yticks([16, 32, 64, 128, 256, 512], ["16", "32", "64", "128", "256", "512"])
    ax.set_xlabel("sequence length"), ax.set_ylabel("GiB per GPU")
    ax.set_title("Predicted peak memory, 14B on 32 A800s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(figdir, "memory_vs_seq.png"), dpi=110)
    plt.close(fig)


def sparse(f, lines, figdir):
    g = f["sparse"]
    A = g.attrs
    dec = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    masks, layouts = dec(A["masks"]).split(","), dec(A["layouts"]).split(",")
    docs = g["doc_lengths"][()]
    methods = [m for m in ("burst", "ring") if m in g]
    seq = int(A["seq"])
    seq_txt = f"{seq // 2**20}M" if seq % 2**20 == 0 else f"{seq // 1024}K"
    lines.append(f"\n### Sparse masks and workload balance: 14B heads (40 x 128), {seq_txt} tokens, "
                 f"{int(A['gpus'])} GPUs, one layer's attention fwd+bwd (predicted; no published numbers in our sources)\n")
    lines.append(f"TFLOP/s per GPU over the mask's visible area (paper convention), and the fwd+bwd seconds. Window "
                 f"{int(A['window']) // 1024}K tokens; documents {len(docs)} of "
                 f"{', '.join(f'{int(d) // 1024}K' for d in docs[:8])} (x {len(docs) // 8}). Ring shapes as the engine's "
                 f"`auto` picks them: burst's double ring over nodes unless a flat ring stops early (the window on the "
                 f"contiguous layout); the ring method's flat ring.\n")
    lines.append("| mask | layout | " + " | ".join(f"{m} TFLOP/s | {m} s" for m in methods) + " |")
    lines.append("|---|---|" + "---|---|" * len(methods))
    for i, (mk, lay) in enumerate(zip(masks, layouts)):
        cells = []
        for m in methods:
            cells += [f"{g[m]['tflops_per_gpu'][i]:.1f}", f"{g[m]['fwd_bwd_s'][i]:.3f}"]
        lines.append(f"| {mk} | {lay} | " + " | ".join(cells) + " |")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = np.arange(len(masks))
    w = 0.8 / max(1, len(methods))
    for j, m in enumerate(methods):
        ax.bar(x + (j - (len(methods) - 1) / 2) * w, g[m]["tflops_per_gpu"][()], w, label=m)
    ax.set_xticks(x, [f"{mk}\n{lay}" for mk, lay in zip(masks, layouts)], fontsize=8)
    ax.set_ylabel("TFLOP/s per GPU (visible area)")
    ax.set_title(f"Sparse masks, {seq_txt} tokens on {int(A['gpus'])} A800s (predicted)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(figdir, "sparse_masks.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("h5")
    ap.add_argument("--out", default="experiments/results/simulate")
    a = ap.parse_args()
    check_out_dir(a.out)
    f_in = open_h5(a.h5, "`burst simulate --table paper` output")
    # the input checked before any output is created
    require(f_in, a.h5, WHAT, attrs=REQUIRED_ATTRS, items=("calibration/one_gpu", "attention_only"))
    if "end_to_end" in f_in or "ablation" in f_in:
        require(f_in, a.h5, WHAT, attrs=("memory_capacity_gib",),
                items=(("end_to_end", "gpus64") if "end_to_end" in f_in else ())
                + (("scaling", "memory_vs_seq") if "ablation" in f_in else ()))
    # Everything is drawn into a scratch directory first and moved into --out only when the whole report
    # succeeded: a malformed input is one line naming what is missing, and nothing is written.
    stage = tempfile.mkdtemp(prefix="simulate_report.")
    try:
        paths = report(a, f_in, stage)
    except Malformed as e:
        die(f"'{a.h5}' is not a well-formed {WHAT[2:]}: {e}")
    except KeyError as e:
        die(f"'{a.h5}' is not a well-formed {WHAT[2:]}: missing {e.args[0] if e.args else e}")
    except (ValueError, TypeError, IndexError, AttributeError, ZeroDivisionError, OSError, RuntimeError) as e:
        die(f"'{a.h5}' is not a well-formed {WHAT[2:]}: {type(e).__name__}: {e}")
    else:
        make_out_dir(a.out)
        for n in paths:
            shutil.move(os.path.join(stage, n), os.path.join(a.out, n))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    print(f"wrote {os.path.join(a.out, 'simulate_tables.md')} and the figures in {a.out}")


def report(a, f_in, out):
    """The tables (simulate_tables.md) and figures into the directory out; returns the names written."""
    lines = []
    with f_in as f:
        r = attrs(f)
        lines.append(f"# burst simulate: predicted vs published ({os.path.basename(a.h5)})\n")
        lines.append(f"Cluster `{repo_rel(r['cluster_file'])}`, calibration `{repo_rel(r['calibration_file'])}`: GEMM fraction {r['gemm_fraction']:.3f}, "
                     f"attention r_inf {r['attn_rate_inf_tflops']:.1f} TFLOP/s, t0 {r['attn_t0_tokens']:.0f} tokens, "
                     f"link efficiency {r['link_efficiency']:.3f}, elementwise passes {r['elementwise_passes']:.0f}, "
                     f"allocator slack {r['allocator_slack']:.2f}. Published memory is PyTorch's peak reserved (GB as printed); "
                     "predicted is GiB. Only BurstEngine's memory is compared (the baselines' allocators differ).")
        c = attrs(f, "calibration/one_gpu")
        lines.append(f"\nCalibration point, one GPU, 14B, 32K: predicted {c['tokens_per_s_per_gpu']:.1f} tok/s, MFU "
                     f"{100 * c['mfu_paper_script']:.1f}% (their script); published {c['published_tokens_per_s_per_gpu']:.0f}, "
                     f"{100 * c['published_mfu']:.1f}%.")
        if "end_to_end" in f:
            end_to_end(f, "end_to_end", lines, out)
            end_to_end(f, "gpus64", lines, out)
        attention_only(f, lines, out)
        if "ablation" in f:
            ablation(f, lines, out)
            scaling(f, lines, out)
            memory_vs_seq(f, lines, out)
        if "sparse" in f:
            sparse(f, lines, out)
    path = os.path.join(out, "simulate_tables.md")
    with open(path, "w") as fo:
        fo.write("\n".join(lines) + "\n")
    return sorted(os.listdir(out))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""experiments/results/exp_*.h5 (experiments/runners/run_experiment.py) ->
Markdown tables and PNG figures of the real runs made on this machine, each
measurement beside the performance model's prediction.

    /usr/bin/python3 paper_figs/experiments_report.py experiments/results --out experiments/results/figures

Writes <out>/experiments_tables.md and <out>/exp_*.png: throughput and memory
per method, ablation bars, scaling, attention GFLOP/s per rank, sparse masks,
memory vs sequence length, predicted vs measured for every run.
"""
import argparse
import glob
import math
import os
import textwrap

# The Agg backend (files only), set before matplotlib is imported: an invalid
# MPLBACKEND in the environment made `import matplotlib` itself fail.
os.environ["MPLBACKEND"] = "Agg"
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from burst_h5 import check_out_dir, die, make_out_dir, open_h5, require  # noqa: E402

plt.rcParams.update({"font.size": 11, "axes.grid": True, "grid.alpha": 0.3})
MiB = 2.0 ** 20


STRING_COLUMNS = ("label", "method", "policy", "layout", "mask", "ring", "not_modelled", "describe")
WRITTEN = []  # the figures this run wrote (stale PNGs in --out are not counted)


def save(fig, path):
    fig.savefig(path, dpi=110)
    WRITTEN.append(path)


def text_attr(f, name, default=""):
    """A root attribute as str (h5py gives str, fixed-length bytes or numpy scalars)."""
    v = f.attrs.get(name, default)
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def table(f, path=None):
    """The flat table/ as {column: list of str | float array}, validated (exit 2 with one line naming the file):
    a group of 1-D datasets of one length > 0; the text columns text (vlen or fixed-length bytes), the others numbers."""
    path = path or f.filename
    t = f["table"]
    if not isinstance(t, h5py.Group):
        die(f"'{path}' is not {WHAT}: 'table' is a {type(t).__name__}, not a group")
    out, n = {}, None
    for k in t.keys():
        d = t[k]
        if not isinstance(d, h5py.Dataset) or d.ndim != 1:
            die(f"'{path}': table/{k} is not a 1-D dataset")
        v = d[()]
        if k in STRING_COLUMNS:
            if v.dtype.kind not in "OSU":
                die(f"'{path}': table/{k} holds {v.dtype} values, not text")
            out[k] = [x.decode(errors="replace") if isinstance(x, bytes) else str(x) for x in v]
        else:
            if v.dtype.kind not in "fiub":
                die(f"'{path}': table/{k} holds {v.dtype} values, not numbers")
            out[k] = np.asarray(v, dtype=float)
        if n is not None and len(out[k]) != n:
            die(f"'{path}': the table's columns differ in length (table/{k} has {len(out[k])} rows, others {n})")
        n = len(out[k])
    if not n:
        die(f"'{path}' holds no runs (an empty table): run its experiment again")
    return out


def pct(x):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.1f}%"


def other(t, i):
    """The CPU (cores) other processes used during run i and its retakes (run_measured), the machine's speed
    before / after it against the calibration's (run_experiment.Probe); '-' before they were logged."""
    if "foreign_cores" not in t:
        return "-"
    a = int(t["attempts"][i]) if "attempts" in t else 1
    txt = f"{t['foreign_cores'][i]:.2f}" + (f" ({a - 1} retaken)" if a > 1 else "")
    if "probe_before" in t and "probe_after" in t and t["probe_before"][i] == t["probe_before"][i]:
        pr = int(t["probe_retakes"][i]) if "probe_retakes" in t else 0
        txt += f"; speed probe {t['probe_before'][i]:.2f} / {t['probe_after'][i]:.2f}" + (f" ({pr} retaken)" if pr else "")
    return txt


def no_wait_line(t, lines):
    """The same runs predicted without the collective-wait terms (host.collective_wait_ms, nap_wait_ms = 0)."""
    cal = t.get("calibration_point", [0] * len(t["label"]))
    ew = [abs(e) for e, c in zip(t.get("error_no_wait", []), cal) if not math.isnan(e) and not c]
    if ew:
        lines.append(f"The same runs without the collective-wait terms (blocking and napping waits set to 0): max |error| "
                     f"{100 * max(ew):.1f}%, {sum(e <= 0.25 for e in ew)} of {len(ew)} within 25%.")


def train_table(name, f, lines):
    t = table(f)
    lines += [f"## {name}: {f.attrs['description']}", "",
              f"Config `{f.attrs['config_file']}`; {len(t['label'])} runs; measured {f.attrs['date']} on {f.attrs['host']} "
              f"(load average at start {f.attrs['load_average_at_start']}).", "",
              "| run | ranks | tokens | method | policy | CPU per rank; other processes (cores); speed probe before / after (x calibration) | measured s/step | predicted (cores got) | error | "
              "predicted (2 free cores) | error | tok/s/rank | memory measured MiB (all; modelled categories) | "
              "engine memory model MiB | memory error |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    nan = [float("nan")] * len(t["label"])
    for i in range(len(t["label"])):
        cal = " (calibration point)" if t.get("calibration_point") is not None and t["calibration_point"][i] else ""
        mm = t.get("measured_mem_modelled_bytes", nan)[i]
        lines.append(f"| {t['label'][i]}{cal} | {int(t['ranks'][i])} | {int(t['seq'][i])} | {t['method'][i]} | {t['policy'][i]} | "
                     f"{t.get('cpu_share', nan)[i]:.2f}; {other(t, i)} | {t['measured_step_s'][i]:.3f} | {t['predicted_step_s'][i]:.3f} | "
                     f"{pct(t['error'][i])} | {t.get('predicted_nominal_step_s', nan)[i]:.3f} | {pct(t.get('error_nominal', nan)[i])} | "
                     f"{t['measured_tokens_per_s_per_rank'][i]:.0f} | {t['measured_mem_bytes'][i] / MiB:.2f}; {mm / MiB:.2f} | "
                     f"{t['model_mem_bytes'][i] / MiB:.2f} | {pct(t['mem_error'][i])} |")
    errs = [abs(e) for e, c in zip(t["error"], t.get("calibration_point", [0] * len(t["error"]))) if not math.isnan(e) and not c]
    if errs:
        lines += ["", f"Step time, model (with the cores each run got) vs measured: {len(errs)} runs, max |error| "
                      f"{100 * max(errs):.1f}%, mean |error| {100 * np.mean(errs):.1f}%, {sum(e <= 0.25 for e in errs)} of "
                      f"{len(errs)} within 25%."]
        en = [abs(e) for e in t.get("error_nominal", []) if not math.isnan(e)]
        if en:
            lines.append(f"With the machine's 2 cores assumed free (nominal): max |error| {100 * max(en):.1f}%, "
                         f"{sum(e <= 0.25 for e in en)} of {len(en)} within 25%.")
        no_wait_line(t, lines)
    lines.append("")
    return t


def attention_table(name, f, lines):
    t = table(f)
    lines += [f"## {name}: {f.attrs['description']}", "",
              f"Config `{f.attrs['config_file']}`; measured {f.attrs['date']} (load average at start {f.attrs['load_average_at_start']}).", "",
              "| case | ranks | tokens | CPU per rank; other processes (cores); speed probe before / after (x calibration) | measured fwd+bwd s | predicted (cores got) | error | predicted (2 free cores) | "
              "error | GFLOP/s per rank measured | predicted | bytes sent per rank |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    nan = [float("nan")] * len(t["label"])
    for i in range(len(t["label"])):
        nm = t["not_modelled"][i]
        pred = "not modelled" if nm else f"{t['predicted_step_s'][i]:.3f}"
        pn = "-" if nm else f"{t.get('predicted_nominal_step_s', nan)[i]:.3f}"
        pg = "-" if nm else f"{t['predicted_gflops_per_rank'][i]:.3f}"
        lines.append(f"| {t['method'][i]}, {t['layout'][i]}, {t['mask'][i]}{'' if t['ring'][i] in ('-', 'auto') else ', ' + t['ring'][i]} | "
                     f"{int(t['ranks'][i])} | {int(t['seq'][i])} | {t.get('cpu_share', nan)[i]:.2f}; {other(t, i)} | {t['measured_step_s'][i]:.3f} | "
                     f"{pred} | {pct(t['error'][i])} | {pn} | {pct(t.get('error_nominal', nan)[i])} | "
                     f"{t['measured_gflops_per_rank'][i]:.3f} | {pg} | {t['bytes_sent'][i]:.0f} |")
    errs = [abs(e) for e in t["error"] if not math.isnan(e)]
    if errs:
        lines += ["", f"Model vs measured: {len(errs)} modelled cases, max |error| {100 * max(errs):.1f}%, "
                      f"{sum(e <= 0.25 for e in errs)} of {len(errs)} within 25%."]
        no_wait_line(t, lines)
    lines.append("")
    return t


def fig_main(t, out):
    methods = list(dict.fromkeys(t["method"]))
    cfgs = list(dict.fromkeys((int(s), int(p)) for s, p in zip(t["seq"], t["ranks"])))
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5))
    w = 0.8 / len(methods)
    for mi, m in enumerate(methods):
        meas, pred, mem = [], [], []
        for (s, p) in cfgs:
            i = [j for j in range(len(t["label"])) if t["method"][j] == m and int(t["seq"][j]) == s and int(t["ranks"][j]) == p]
            meas.append(t["measured_tokens_per_s_per_rank"][i[0]] if i else np.nan)
            pred.append(t["predicted_tokens_per_s_per_rank"][i[0]] if i else np.nan)
            mem.append(t["measured_mem_bytes"][i[0]] / MiB if i else np.nan)
        x = np.arange(len(cfgs)) + mi * w
        axes[0].bar(x, meas, w, label=m, color=f"C{mi}")
        axes[0].plot(x, pred, "k_", markersize=14, markeredgewidth=2)
        axes[1].bar(x, mem, w, label=m, color=f"C{mi}")
    for ax in axes:
        ax.set_xticks(np.arange(len(cfgs)) + 0.4 - w / 2)
        ax.set_xticklabels([f"{s} tok\n{p} ranks" for s, p in cfgs])
    axes[0].set_ylabel("tokens/s per rank (bars: measured, black: model)")
    axes[0].set_title("Throughput per method (real burst train steps)")
    axes[1].set_ylabel("measured peak memory per rank, MiB")
    axes[1].set_title("Memory per method (allocation tracker, first step)")
    axes[0].legend(ncol=3, fontsize=9)
    fig.tight_layout()
    save(fig, os.path.join(out, "exp_main_throughput_memory.png"))
    plt.close(fig)


def fig_bars(t, out, fname, title):
    n = len(t["label"])
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    x = np.arange(n)
    axes[0].bar(x - 0.2, t["measured_step_s"], 0.4, label="measured")
    axes[0].bar(x + 0.2, t["predicted_step_s"], 0.4, label="model")
    axes[0].set_ylabel("seconds per step")
    axes[0].legend()
    mm = np.array(t.get("measured_mem_modelled_bytes", t["measured_mem_bytes"])) / MiB
    axes[1].bar(x - 0.27, np.array(t["measured_mem_bytes"]) / MiB, 0.27, label="measured, all (incl. method buffers)", color="C7")
    axes[1].bar(x, mm, 0.27, label="measured, categories the model covers", color="C0")
    axes[1].bar(x + 0.27, np.array(t["model_mem_bytes"]) / MiB, 0.27, label="engine memory model", color="C1")
    axes[1].set_ylabel("peak memory per rank, MiB")
    axes[1].legend(fontsize=9)
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(t["label"], rotation=25, ha="right")
    fig.suptitle(textwrap.fill(title, 110), fontsize=11)
    fig.tight_layout()
    save(fig, os.path.join(out, fname))
    plt.close(fig)


def fig_scaling(t, out):
    fig, ax = plt.subplots(figsize=(7, 5))
    P = np.array(t["ranks"], dtype=float)
    ax.plot(P, t["measured_tokens_per_s_per_rank"], "o-", label="measured")
    ax.plot(P, t["predicted_tokens_per_s_per_rank"], "s--", label="model")
    ax.set_xscale("log", base=2)
    ax.set_xticks(P)
    ax.set_xticklabels([str(int(p)) for p in P])
    ax.set_xlabel("ranks (512 tokens per rank; 2 cores)")
    ax.set_ylabel("tokens/s per rank")
    ax.set_title("Scaling series (burst, whole, fused loss)")
    ax.legend()
    fig.tight_layout()
    save(fig, os.path.join(out, "exp_scaling.png"))
    plt.close(fig)


def fig_attention(t, out, fname, title):
    short = {"contiguous": "contig.", "document": "doc.", "zigzag": "zigzag", "striped": "striped"}
    labels = [f"{m}\n{short.get(l, l)}\n{short.get(k, k)}\nS={int(s)}" for m, l, k, s in
              zip(t["method"], t["layout"], t["mask"], t["seq"])]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(9, 1.15 * len(labels)), 6))
    ax.bar(x - 0.2, t["measured_gflops_per_rank"], 0.4, label="measured")
    ax.bar(x + 0.2, np.nan_to_num(np.array(t["predicted_gflops_per_rank"], dtype=float)), 0.4, label="model (0: not modelled)")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=9)
    ax.set_ylabel("fwd+bwd GFLOP/s per rank\n(paper convention, visible area)")
    ax.set_title(textwrap.fill(title, 90), fontsize=11)
    ax.legend()
    fig.tight_layout()
    save(fig, os.path.join(out, fname))
    plt.close(fig)


def fig_memory(t, out):
    fig, ax = plt.subplots(figsize=(7, 5))
    for pol, c in (("keep", "C0"), ("whole", "C1")):
        i = [j for j in range(len(t["label"])) if t["policy"][j] == pol]
        S = [t["seq"][j] for j in i]
        mm = t.get("measured_mem_modelled_bytes", t["measured_mem_bytes"])
        ax.plot(S, [t["measured_mem_bytes"][j] / MiB for j in i], "^:", color=c, label=f"{pol}: measured, all")
        ax.plot(S, [mm[j] / MiB for j in i], "o-", color=c, label=f"{pol}: measured, modelled categories")
        ax.plot(S, [t["model_mem_bytes"][j] / MiB for j in i], "s--", color=c, label=f"{pol}: engine memory model")
    ax.set_xscale("log", base=2)
    seqs = sorted(set(int(x) for x in t["seq"]))
    ax.set_xticks(seqs)
    ax.set_xticklabels([str(x) for x in seqs])
    ax.set_xlabel("sequence length (tokens, 4 ranks)")
    ax.set_ylabel("peak memory per rank, MiB")
    ax.set_title("Memory vs sequence length (burst, 4 ranks)")
    ax.legend(fontsize=9)
    fig.tight_layout()
    save(fig, os.path.join(out, "exp_memory_vs_seq.png"))
    plt.close(fig)


def fig_pred_vs_meas(all_rows, out):
    fig, ax = plt.subplots(figsize=(7, 6.5))
    lo, hi = 1e9, 0
    for k, (name, meas, pred) in enumerate(all_rows):
        m, p = np.array(meas, dtype=float), np.array(pred, dtype=float)
        ok = ~np.isnan(p)
        if ok.any():
            ax.loglog(m[ok], p[ok], "o", color=f"C{k}", label=name)
            lo, hi = min(lo, m[ok].min(), p[ok].min()), max(hi, m[ok].max(), p[ok].max())
    if hi > 0:
        xs = np.array([lo / 1.3, hi * 1.3])
        ax.plot(xs, xs, "k-", lw=1)
        ax.fill_between(xs, xs * 0.75, xs * 1.25, color="gray", alpha=0.2, label="within 25%")
    ax.set_xlabel("measured seconds (step or attention fwd+bwd)")
    ax.set_ylabel("model prediction, seconds")
    ax.set_title("Performance model vs every real run")
    ax.legend(fontsize=9)
    fig.tight_layout()
    save(fig, os.path.join(out, "exp_predicted_vs_measured.png"))
    plt.close(fig)


WHAT = "an exp_* results file (experiments/runners/run_experiment.py)"
COMMON_ATTRS = ("kind", "description", "config_file", "date", "load_average_at_start")
TABLE_COLUMNS = {"train": ("label", "ranks", "seq", "method", "policy", "measured_step_s", "predicted_step_s", "error",
                           "measured_tokens_per_s_per_rank", "predicted_tokens_per_s_per_rank", "measured_mem_bytes",
                           "model_mem_bytes", "mem_error"),
                 "attention": ("label", "ranks", "seq", "method", "layout", "mask", "ring", "not_modelled", "measured_step_s",
                               "predicted_step_s", "error", "measured_gflops_per_rank", "predicted_gflops_per_rank",
                               "bytes_sent")}


def check_results(f, path, name):
    """Exit with one line (status 2) unless f is experiment `name`'s results file (its `experiment` attribute,
    where it has one) of a known kind with a well-formed table; returns the kind."""
    require(f, path, WHAT, attrs=COMMON_ATTRS, items=("table",))
    kind = text_attr(f, "kind")
    if kind not in TABLE_COLUMNS:
        die(f"'{path}': unknown experiment kind {kind!r} (train or attention)")
    if "experiment" in f.attrs and text_attr(f, "experiment") != name:
        die(f"'{path}' holds experiment {text_attr(f, 'experiment')!r}, not {name!r} as its name says (a copied or "
            f"renamed file?)")
    if kind == "train":
        require(f, path, WHAT, attrs=("host",))
    if isinstance(f["table"], h5py.Group) and len(f["table"].keys()) == 0:
        die(f"'{path}' holds no runs (an empty table): run its experiment again")
    t = table(f, path)
    for c in TABLE_COLUMNS[kind]:
        if c not in t:
            die(f"'{path}' is not {WHAT}: no column 'table/{c}'")
    return kind


def read_checked(path, fn):
    """fn(open file) for one results file; a file h5py cannot read through (corrupted, truncated datasets):
    one line naming it (status 2)."""
    with open_h5(path, "results file") as f:
        try:
            return fn(f)
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
            die(f"{path} is not a readable HDF5 file ({type(e).__name__}: {e})")


def draw(name, kind, f, a, lines, all_rows, no_wait):
    """The tables and figures of one (checked) results file."""
    if kind == "train":
        t = train_table(name, f, lines)
        cal = t.get("calibration_point", np.zeros(len(t["label"])))
        keep = [i for i in range(len(t["label"])) if not cal[i]]
        all_rows.append((name, [t["measured_step_s"][i] for i in keep], [t["predicted_step_s"][i] for i in keep]))
        if "error_no_wait" in t:
            no_wait += [abs(t["error_no_wait"][i]) for i in keep if not math.isnan(t["error_no_wait"][i])]
        if name == "main":
            fig_main(t, a.out)
        elif name == "scaling":
            fig_scaling(t, a.out)
        elif name == "memory":
            fig_memory(t, a.out)
        else:
            fig_bars(t, a.out, f"exp_{name}.png", f"{name}: {text_attr(f, 'description')}")
    else:
        t = attention_table(name, f, lines)
        all_rows.append((name, t["measured_step_s"], t["predicted_step_s"]))
        if "error_no_wait" in t:
            no_wait += [abs(e) for e in t["error_no_wait"] if not math.isnan(e)]
        fig_attention(t, a.out, f"exp_{name}.png", f"{name}: {text_attr(f, 'description')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lines = ["# Real runs on this machine, measured and predicted", "",
             "Each row is a real run (`mpiexec`, one OpenMP thread per rank); the prediction is src/perf's "
             "(`burst simulate`) with this machine's cluster description measured by calibrate_cpu.py in the same "
             "session. error = predicted / measured - 1.", ""]
    all_rows = []
    no_wait = []  # |error| of the same runs without the collective-wait terms
    order = ["main", "ablation", "scaling", "attention", "sparse", "memory"]
    if not os.path.isdir(a.results):
        die(f"no such directory: {a.results}" if not os.path.exists(a.results) else f"{a.results} is not a directory")
    check_out_dir(a.out)
    files = {os.path.basename(p)[4:-3]: p for p in glob.glob(os.path.join(a.results, "exp_*.h5"))}
    if not files:
        die(f"no exp_*.h5 in {a.results} (run experiments/runners/run_experiment.py first)")
    # every input checked before any output is written
    kinds = {name: read_checked(p, lambda f, p=p, name=name: check_results(f, p, name)) for name, p in files.items()}
    make_out_dir(a.out)
    for name in order + sorted(set(files) - set(order)):
        if name not in files:
            continue
        read_checked(files[name], lambda f, name=name: draw(name, kinds[name], f, a, lines, all_rows, no_wait))
    fig_pred_vs_meas(all_rows, a.out)
    allm = [abs(p / m - 1) for _, ms, ps in all_rows for m, p in zip(ms, ps) if not math.isnan(p)]
    if allm:
        lines += ["## All real runs", "",
                  f"{len(allm)} predicted runs: {sum(e <= 0.25 for e in allm)} within 25%, max |error| {100 * max(allm):.1f}%, "
                  f"median |error| {100 * float(np.median(allm)):.1f}%."
                  + (f" Without the collective-wait terms (the same runs and shares): {sum(e <= 0.25 for e in no_wait)} of "
                     f"{len(no_wait)} within 25%, max |error| {100 * max(no_wait):.1f}%." if no_wait else ""), ""]
    path = os.path.join(a.out, "experiments_tables.md")
    with open(path, "w") as fo:
        fo.write("\n".join(lines) + "\n")
    print(f"wrote {path} and {len(WRITTEN)} figures in {a.out}")


if __name__ == "__main__":
    main()

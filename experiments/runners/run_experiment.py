#!/usr/bin/python3
"""Run one paper experiment at the scale of this machine and write
experiments/results/exp_<name>.h5.

    /usr/bin/python3 experiments/runners/run_experiment.py <name>    (or scripts/run_experiment.sh <name>)

<name> picks experiments/configs/exp_<name>.toml. Two kinds:

- kind = "train": every run is `mpiexec -n P burst train` for a few steps of
  the experiments' model (experiments/configs/exp_model.json) on one
  sequence per step (dp = 1, cp = P); measured = median step time after the
  first step; predicted = `burst simulate` (src/perf) of the same
  configuration on this machine's cluster description
  (experiments/results/calibration/cpu.toml, from calibrate_cpu.py).
- kind = "attention": `mpiexec -n P burst bench attention` with the
  distributed methods (forward + backward of one layer's attention), each
  case predicted by `burst simulate --attention-only`.

The HDF5 file holds the experiment's TOML and the cluster description as
root attributes and one group per run under runs/ with its settings, the
measurement and the prediction as attributes, plus flat datasets (label,
measured, predicted, error) for the figure scripts.
"""
import argparse
import difflib
import errno
import fcntl
import itertools
import json
import math
import os
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common as C  # noqa: E402

SIM_KEYS = {  # train key -> simulate flag (the same names the engine and the model use)
    "parallel.method": "--method", "parallel.ring": "--ring", "parallel.backward": "--backward",
    "parallel.partial": "--partial", "parallel.hp": "--hp", "parallel.inner": "--inner",
    "parallel.placement": "--placement", "parallel.usp_inner": "--usp-inner",
    "train.activation": "--policy", "train.zero": "--zero",
}


# The keys an experiment config may have (anything else is a misspelling: an error, with the closest match).
TOP_KEYS = ("experiment", "train", "bench", "run", "matrix", "methods")
EXPERIMENT_KEYS = ("kind", "description")
RUN_KEYS = ("label", "ranks", "gpus_per_node", "seq", "set", "calibration_point")
MATRIX_KEYS = ("method", "seq", "ranks")


def _suggest(key, known):
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known)})"


def _known(table, where, known):
    for k in table:
        if k not in known:
            raise C.InputError(f"{where}: unknown key '{k}'{_suggest(k, known)}")


def _typed(v, where, kind, lo=None):
    """v checked to be kind ("table", "string", "integer"); integers >= lo."""
    if kind == "table":
        ok = isinstance(v, dict)
    elif kind == "string":
        ok = isinstance(v, str)
    else:
        ok = isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo)
        kind = "an integer" + (f" >= {lo}" if lo is not None else "")
    if not ok:
        a = kind if kind.startswith("an ") else f"a {kind}"
        raise C.InputError(f"{where} = {v!r}: must be {a}")
    return v


def _list_of(v, where, kind, lo=None):
    if not isinstance(v, list) or not v:
        raise C.InputError(f"{where} = {v!r}: must be a non-empty list")
    for i, x in enumerate(v):
        _typed(x, f"{where}[{i}]", kind, lo)
    return v


def validate_config(cfg):
    """The whole experiment config checked before anything runs: the tables and keys it may have, their
    types; raises InputError naming the key and what was expected."""
    _known(cfg, "the config", TOP_KEYS)
    exp = _typed(cfg["experiment"], "experiment", "table")
    _known(exp, "[experiment]", EXPERIMENT_KEYS)
    kind = exp.get("kind", "train")
    if kind not in ("train", "attention"):
        raise C.InputError(f"[experiment] kind = {kind!r} is not allowed: must be train or attention")
    _typed(exp.get("description", ""), "[experiment] description", "string")
    for t in ("train", "bench"):
        if t in cfg:
            _typed(cfg[t], t, "table")
    other = "bench" if kind == "train" else "train"
    if other in cfg:
        raise C.InputError(f"[{other}] is not read by kind = {kind!r} experiments (its settings go in "
                           f"[{'train' if kind == 'train' else 'bench'}])")
    runs = cfg.get("run", [])
    if not isinstance(runs, list):
        raise C.InputError(f"run = {runs!r}: must be [[run]] tables")
    for i, r in enumerate(runs):
        where = f"[[run]] number {i + 1}"
        if not isinstance(r, dict):
            raise C.InputError(f"{where}: must be a table")
        if "label" not in r or "ranks" not in r:
            raise C.InputError(f"{where} needs a label and ranks")
        _known(r, where, RUN_KEYS)
        lab = _typed(r["label"], f"{where} label", "string")
        if not lab or "/" in lab:
            raise C.InputError(f"{where} label = {lab!r}: must be a non-empty name without '/'")
        _typed(r["ranks"], f"{where} ranks", "integer", 1)
        _typed(r.get("gpus_per_node", 0), f"{where} gpus_per_node", "integer", 0)
        if "seq" in r:
            _typed(r["seq"], f"{where} seq", "integer", 1)
        _typed(r.get("set", {}), f"{where} set", "table")
        cp = r.get("calibration_point", 0)
        if not isinstance(cp, (bool, int)):
            raise C.InputError(f"{where} calibration_point = {cp!r}: must be true / false")
    m = cfg.get("matrix")
    if m is not None:
        _typed(m, "matrix", "table")
        _known(m, "[matrix]", MATRIX_KEYS)
        missing = [k for k in MATRIX_KEYS if k not in m]
        if missing:
            raise C.InputError(f"[matrix] needs method, seq and ranks (lists); it has no {', '.join(missing)}")
        _list_of(m["method"], "[matrix] method", "string")
        _list_of(m["seq"], "[matrix] seq", "integer", 1)
        _list_of(m["ranks"], "[matrix] ranks", "integer", 1)
    methods = cfg.get("methods", {})
    _typed(methods, "methods", "table")
    for k, v in methods.items():
        if not isinstance(v, dict):
            raise C.InputError(f"[methods] {k} = {v!r}: must be a table ([methods.{k}] of settings)")
        if m is None:
            raise C.InputError(f"[methods.{k}]: [methods] applies to the [matrix] runs, and there is no [matrix]")
        if k not in m["method"]:
            raise C.InputError(f"[methods.{k}]: not a method of [matrix] method{_suggest(k, m['method'])}")


def expand_runs(cfg):
    """Runs from [[run]] entries and/or a [matrix] (method x seq x ranks); the config is validated first."""
    validate_config(cfg)
    runs = []
    for r in cfg.get("run", []):
        runs.append(dict(r))
    m = cfg.get("matrix")
    if m:
        extra = cfg.get("methods", {})
        for method, seq, ranks in itertools.product(m["method"], m["seq"], m["ranks"]):
            sets = {"parallel.method": method, "train.seq_len": seq}
            sets.update(extra.get(method, {}))
            runs.append({"label": f"{method}_S{seq}_np{ranks}", "ranks": ranks, "set": sets})
    labels = set()
    base = C.flatten(cfg.get("train", {}))
    for r in runs:
        r["set"] = C.flatten(r.get("set", {}))
        r.setdefault("gpus_per_node", 0)
        if "seq" in r:
            r["set"]["train.seq_len"] = r["seq"]
        if r["label"] in labels:
            raise C.InputError(f"two runs are labelled {r['label']!r}: labels must be unique")
        labels.add(r["label"])
        if cfg["experiment"].get("kind", "train") == "train":
            seq = r["set"].get("train.seq_len", base.get("train.seq_len"))
            if seq is None:
                raise C.InputError(f"run {r['label']!r} has no sequence length: give it seq = N "
                                   f"(or train.seq_len in [train])")
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise C.InputError(f"run {r['label']!r}: train.seq_len = {seq!r}: must be an integer >= 1")
    return runs


def sim_args_train(keys, ranks, gpus_per_node, model):
    a = ["--model", model, "--seq", str(keys["train.seq_len"]), "--gpus", str(ranks),
         "--gpus-per-node", str(gpus_per_node or ranks), "--offload", "off",
         "--fused-loss", "on" if int(keys.get("train.loss_chunk", 0)) > 0 else "off"]
    keys = dict(keys)
    keys.setdefault("train.zero", 0)
    keys.setdefault("train.activation", "keep")
    for k, flag in SIM_KEYS.items():
        if k in keys:
            a += [flag, str(keys[k])]
    w = int(keys.get("train.attention_window", 0))
    if w > 0:
        a += ["--mask", "window", "--window", str(w)]
    return a


def read_pred(path, group):
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f[group].attrs.items()}


PROBE_TOL = C._env_number("BURST_PROBE_TOL", "0.10", float, 0.0, 10.0)  # |probe / calibration - 1| kept
PROBE_PAUSE_S = 10.0  # before a retake


class Probe:
    """The machine's speed before and after a run, against the calibration's (common.speed_probe):
    ratio > 1 = slower than when the model's constants were measured. The host's other tenants can
    slow it by 10-30% for a minute without using a CPU of this machine (a training row measured
    0.238 s and 0.302 s per step in two quiet runs, NOTES). A run with either probe more than
    PROBE_TOL (BURST_PROBE_TOL) off the calibration's speed is run again after a pause, at most
    common.QUIET_RETRIES more times within common.QUIET_BUDGET_S (shared with the quiet retakes);
    the kept run is the last, its probes and attempts are written with it."""

    def __init__(self, workdir):
        self.wd, self.ref = workdir, C.probe_reference()
        self.before = self.after = float("nan")
        self.retakes = 0

    def off(self):
        return any(abs(x - 1) > PROBE_TOL for x in (self.before, self.after) if x == x)

    def run(self, fn):
        while True:
            t0 = time.time()
            if self.ref == self.ref:
                self.before = C.speed_probe(self.wd) / self.ref
            out = fn()
            if self.ref != self.ref:
                return out
            # the run's accounting (C.last_*), which the probe's own mpiexec would overwrite
            run_acct = (C.last_cpu_share, C.last_foreign_cores, C.last_attempts)
            self.after = C.speed_probe(self.wd) / self.ref
            C.last_cpu_share, C.last_foreign_cores, C.last_attempts = run_acct
            if not self.off() or self.retakes >= C.QUIET_RETRIES or C.quiet_spent_s >= C.QUIET_BUDGET_S:
                return out
            self.retakes += 1
            C.quiet_spent_s += time.time() - t0 + PROBE_PAUSE_S
            print(f"  [probe] the machine ran at {self.before:.2f} / {self.after:.2f} of the calibration's time per "
                  f"block before / after the run; again in {PROBE_PAUSE_S:.0f} s ({self.retakes + 1} of "
                  f"{C.QUIET_RETRIES + 1})", flush=True)
            time.sleep(PROBE_PAUSE_S)

    def fields(self):
        return dict(probe_before=self.before, probe_after=self.after, probe_retakes=self.retakes)


def run_train(name, cfg, runs, out):
    base = C.flatten(cfg.get("train", {}))
    wd = C.work_dir(name)
    model = base.get("model.config", os.path.join(C.CONFIGS, "exp_model.json"))
    model_abs = model if os.path.isabs(model) else os.path.join(C.ROOT, model)
    no_wait_cluster = C.cluster_without_waits(wd)
    rows = []
    for i, r in enumerate(runs):
        keys = dict(base)
        keys.update(r["set"])
        label = r["label"]
        log_h5 = os.path.join(wd, f"{label}.h5")
        if os.path.exists(log_h5):
            os.remove(log_h5)
        keys["io.run_log"] = log_h5
        keys["io.overwrite"] = True  # a retaken run (Probe) replaces its own log
        keys["model.config"] = model_abs
        P, G = int(r["ranks"]), int(r.get("gpus_per_node", 0))
        keys["parallel.cp"] = P
        keys["train.batch"] = 1
        probe = Probe(wd)
        wall = probe.run(lambda: C.mpiexec(P, ["train"] + C.set_args(keys), os.path.join(wd, f"{label}.log"), gpus_per_node=G))
        with h5py.File(log_h5, "r") as f:
            secs = np.array(f["log/seconds"][:], dtype=float)
            check_steps(label, keys, secs, os.path.join(wd, f"{label}.log"))
            cpu = np.array(f["log/cpu_seconds"][:], dtype=float) if "log/cpu_seconds" in f else None
            wait = np.array(f["log/comm_wait_seconds"][:], dtype=float) if "log/comm_wait_seconds" in f else None
            meas_mem = {k[len("mem_peak_"):]: float(f["log/" + k][0]) for k in f["log"].keys() if k.startswith("mem_peak_")}
            model_mem = {k[len("mem_model_"):]: float(v) for k, v in f.attrs.items() if k.startswith("mem_model_")}
            phases = {k[len("time_"):]: float(np.median(f["log/" + k][1:])) for k in f["log"].keys() if k.startswith("time_")}
        measured = float(np.median(secs[1:])) if len(secs) > 1 else float(secs[0])
        pred_h5 = os.path.join(wd, f"{label}_pred.h5")
        sargs = sim_args_train(keys, P, G, model_abs)
        # CPU seconds per wall second of the timed steps (rank 0's), else the whole run's (all ranks)
        share = float(np.median(cpu[1:] / secs[1:])) if cpu is not None and len(secs) > 1 else C.last_cpu_share
        share_run = C.last_cpu_share
        # Nominal: the machine's cores to this run alone. Load-aware: the cores
        # this run's ranks actually got (CPU seconds per wall second, summed).
        C.simulate(sargs, pred_h5)
        nominal = float(read_pred(pred_h5, "run")["t_total"])
        C.simulate(sargs + ["--host-cpu", f"{share * P:.4f}"], pred_h5, cluster=no_wait_cluster)
        no_wait = float(read_pred(pred_h5, "run")["t_total"])
        pred_txt = C.simulate(sargs + ["--host-cpu", f"{share * P:.4f}"], pred_h5)
        p = read_pred(pred_h5, "run")
        predicted = float(p["t_total"])
        err = C.rel_err(predicted, measured)
        S = int(keys["train.seq_len"])
        row = dict(label=label, ranks=P, gpus_per_node=G or P, seq=S, method=keys.get("parallel.method", "burst"),
                   policy=keys.get("train.activation", "keep"), loss_chunk=int(keys.get("train.loss_chunk", 0)),
                   window=int(keys.get("train.attention_window", 0)), measured_step_s=measured,
                   predicted_step_s=predicted, error=err, predicted_nominal_step_s=nominal,
                   error_nominal=C.rel_err(nominal, measured), predicted_no_wait_step_s=no_wait,
                   error_no_wait=C.rel_err(no_wait, measured), steps=len(secs), wall_s=wall,
                   measured_tokens_per_s_per_rank=S / measured / P, predicted_tokens_per_s_per_rank=S / predicted / P,
                   measured_mem_bytes=sum(meas_mem.values()), model_mem_bytes=sum(model_mem.values()),
                   calibration_point=int(r.get("calibration_point", 0)), cpu_share=share, cpu_share_run=share_run,
                   load_average=os.getloadavg()[0], foreign_cores=C.last_foreign_cores, attempts=C.last_attempts,
                   **probe.fields())
        # The engine's analytic model covers parameters, gradients, optimizer and
        # activations; the attention method's buffers (comm, workspace) it
        # leaves to the tracker. Compare like with like.
        # rank 0's time blocked in waits and blocking collectives per step (median after the first)
        row["measured_comm_wait_s"] = float(np.median(wait[1:])) if wait is not None and len(wait) > 1 else float("nan")
        row["measured_mem_modelled_bytes"] = sum(v for k, v in meas_mem.items() if k in model_mem)
        row["mem_error"] = (C.rel_err(row["model_mem_bytes"], row["measured_mem_modelled_bytes"])
                            if row["model_mem_bytes"] else float("nan"))
        rows.append(row)
        g = out.create_group(f"runs/{i:02d}_{label}")
        C.write_attrs(g, row)
        g.attrs["train_settings"] = json.dumps(keys)
        g.attrs["simulate_args"] = " ".join(sargs)
        g.attrs["prediction_text"] = pred_txt
        for k, v in p.items():
            g.attrs["pred_" + k] = v
        g.create_dataset("step_seconds", data=secs)
        for k, v in meas_mem.items():
            g.attrs["mem_peak_" + k] = v
        for k, v in model_mem.items():
            g.attrs["mem_model_" + k] = v
        for k, v in phases.items():
            g.attrs["phase_s_" + k] = v
        print(f"  {label:34s} measured {measured:8.4f} s/step  predicted {predicted:8.4f}  error {100 * err:+6.1f}%"
              f" (nominal {100 * row['error_nominal']:+6.1f}%)"
              f"  mem {row['measured_mem_bytes'] / 2**20:7.2f} MiB (model {row['model_mem_bytes'] / 2**20:7.2f})"
              f"  cpu/rank {row['cpu_share']:.2f} other {row['foreign_cores']:.2f} cores"
              f" probe {row['probe_before']:.2f}/{row['probe_after']:.2f}", flush=True)
    return rows


def run_attention(name, cfg, runs, out):
    """Each entry: ranks, methods, seq list, layouts, masks, extra bench keys."""
    base = C.flatten(cfg.get("bench", {}))
    wd = C.work_dir(name)
    no_wait_cluster = C.cluster_without_waits(wd)
    rows = []
    idx = 0
    for r in runs:
        keys = dict(base)
        keys.update(r["set"])
        P, G = int(r["ranks"]), int(r.get("gpus_per_node", 0))
        h5 = os.path.join(wd, f"{r['label']}.h5")
        probe = Probe(wd)
        probe.run(lambda: C.mpiexec(P, ["bench", "attention"] + C.set_args(keys) + ["--output", h5],
                                    os.path.join(wd, f"{r['label']}.log"), gpus_per_node=G))
        share, foreign, attempts = C.last_cpu_share, C.last_foreign_cores, C.last_attempts
        heads, kvh, d = int(keys.get("bench.heads", 8)), int(keys.get("bench.kv_heads", 8)), int(keys.get("bench.head_dim", 16))
        model_json = os.path.join(wd, f"attn_h{heads}_kv{kvh}_d{d}.json")
        with open(model_json, "w") as f:  # the model needs a shape: one layer of these heads
            json.dump({"model_type": "llama", "vocab_size": 64, "hidden_size": heads * d, "num_hidden_layers": 1,
                       "num_attention_heads": heads, "num_key_value_heads": kvh, "head_dim": d,
                       "intermediate_size": 4 * heads * d, "max_position_embeddings": 1 << 20, "hidden_act": "silu"}, f)
        with h5py.File(h5, "r") as f:
            cases = []
            f.visititems(lambda n, o: cases.append(n) if isinstance(o, h5py.Group) and "total_s_median" in o.attrs else None)
            for cname in cases:
                a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f[cname].attrs.items()}
                meth, layout, mask, ring = a["method"], a["layout"], a["mask"], a["ring"]
                # the cores this case got (per-case CPU accounting of the bench), else the whole run's
                case_share = float(a["cpu_share"]) if "cpu_share" in a else share
                S, win = int(a["seq"]), int(a["window"])
                measured = float(a["total_s_median"])
                sargs = ["--model", model_json, "--seq", str(S), "--gpus", str(P), "--gpus-per-node", str(G or P),
                         "--method", meth, "--attention-only"]
                for k, flag in (("bench.backward", "--backward"), ("bench.partial", "--partial"), ("bench.hp", "--hp"),
                                ("bench.inner", "--inner")):
                    if k in keys and keys[k] not in (0, ""):
                        sargs += [flag, str(keys[k])]
                if ring not in ("-", "auto"):
                    sargs += ["--ring", ring]
                why = ""
                if mask == "full":
                    sargs += ["--mask", "full"]
                elif meth in ("ring", "burst", "loongtrain"):
                    # the ring family, every layout and mask (causal zigzag too): the model costs each round from
                    # the tiles the engine's kernel calls compute on that layout, so that only the diagonal
                    # round pays the causal block's partly visible tiles (the analytic path charges every
                    # round at the causal block's rate: +20% on 1K-token zigzag rings, NOTES)
                    sargs += ["--layout", layout]
                    if mask == "window":
                        sargs += ["--mask", "window", "--window", str(win)]
                    elif mask == "document":
                        sargs += ["--mask", "document"]
                    if "doc_lengths" in f[cname]:
                        sargs += ["--doc-lengths", ",".join(str(int(x)) for x in f[cname]["doc_lengths"][()])]
                elif mask == "causal" and layout in ("zigzag", "striped"):
                    pass  # Ulysses, USP, all-gather: the analytic causal path
                else:
                    why = f"not modelled: {meth} with {mask} on {layout} (the model knows causal (zigzag) and full for it)"
                predicted, pred_gf, pred_txt, nominal, no_wait = float("nan"), float("nan"), "", float("nan"), float("nan")
                if not why:
                    ph5 = os.path.join(wd, f"{r['label']}_{idx}_pred.h5")
                    C.simulate(sargs, ph5)
                    p = read_pred(ph5, "attention")
                    nominal = float(p["fwd_s"]) + float(p["bwd_s"])
                    C.simulate(sargs + ["--host-cpu", f"{case_share * P:.4f}"], ph5, cluster=no_wait_cluster)
                    p = read_pred(ph5, "attention")
                    no_wait = float(p["fwd_s"]) + float(p["bwd_s"])
                    pred_txt = C.simulate(sargs + ["--host-cpu", f"{case_share * P:.4f}"], ph5)
                    p = read_pred(ph5, "attention")
                    predicted = float(p["fwd_s"]) + float(p["bwd_s"])
                    pred_gf = float(p["gflops_per_rank"])
                row = dict(label=f"{meth}_{layout}_{mask}_{ring}_S{S}_np{P}", ranks=P, method=meth, layout=layout, mask=mask,
                           ring=ring, seq=S, window=win, measured_step_s=measured, predicted_step_s=predicted,
                           error=C.rel_err(predicted, measured) if not why else float("nan"),
                           predicted_nominal_step_s=nominal, error_nominal=C.rel_err(nominal, measured) if not why else float("nan"),
                           predicted_no_wait_step_s=no_wait, error_no_wait=C.rel_err(no_wait, measured) if not why else float("nan"),
                           cpu_share=case_share, load_average=os.getloadavg()[0], foreign_cores=foreign, attempts=attempts,
                           **probe.fields(),
                           measured_gflops_per_rank=float(a["tflops_per_rank"]) * 1e3, predicted_gflops_per_rank=pred_gf,
                           measured_fwd_s=float(a["fwd_s_median"]), measured_bwd_s=float(a["bwd_s_median"]),
                           bytes_sent=float(np.max(f[cname]["bytes_sent"][:])), not_modelled=why,
                           describe=a.get("describe", ""))
                rows.append(row)
                g = out.create_group(f"runs/{idx:02d}_{row['label']}")
                C.write_attrs(g, row)
                g.attrs["simulate_args"] = " ".join(sargs)
                g.attrs["prediction_text"] = pred_txt
                idx += 1
                e = "" if why else f"error {100 * row['error']:+6.1f}% (nominal {100 * row['error_nominal']:+6.1f}%)"
                print(f"  {row['label']:44s} measured {measured:8.4f} s  predicted {predicted:8.4f}  {e}"
                      f"  {row['measured_gflops_per_rank']:.2f} GFLOP/s/rank{'  (' + why + ')' if why else ''}", flush=True)
    return rows


class RunIncomplete(Exception):
    """A train run that ended before the steps asked (a stop signal to a rank: burst exits 0 after its step)."""


def check_steps(label, keys, secs, log_path):
    """Fail a run whose log holds fewer steps than asked, or whose output says it was stopped early."""
    try:
        text = open(log_path, errors="replace").read()
    except OSError:
        text = ""
    stop = [x for x in text.splitlines() if "received: stopped after step" in x]
    asked = keys.get("train.steps")
    if stop or (isinstance(asked, int) and not isinstance(asked, bool) and len(secs) < asked):
        why = stop[-1].strip() if stop else f"{len(secs)} of {asked} steps in its run log"
        raise RunIncomplete(f"run {label!r} stopped early ({why}; log {log_path})")


class Lock:
    """An exclusive lock (flock) on exp_<name>.h5.lock beside the results file, taken before any work: a second
    runner of the same experiment exits 2 naming the first; the lock file is removed by its holder."""

    def __init__(self, out_path):
        self.path = out_path + ".lock"
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                C.die(f"{self.path}: cannot create the lock file: {e.strerror or e}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                holder = os.read(fd, 200).decode(errors="replace").strip() or "?"
                os.close(fd)
                C.die(f"{out_path}: another runner is writing it ({holder}; lock {self.path}); wait for it to end")
            try:  # the file we locked is still the one at the path (a holder that ended removed it)
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
        self.fd = fd

    def release(self):
        try:
            os.remove(self.path)
        except OSError:
            pass
        os.close(self.fd)


def check_output(out_path):
    """The results file's place, checked before any work: exp_<name>.h5 a file (or absent) we may replace."""
    d = os.path.dirname(out_path)
    if os.path.isdir(out_path):
        C.die(f"{out_path}: is a directory, not a results file; nothing was run")
    if not os.access(d, os.W_OK | os.X_OK):
        C.die(f"{d}: not writable; nothing was run")


def earlier_rows(path, kind):
    """The rows of an earlier results file (its table/), checked to be of the same kind; for merging --only."""
    with C.open_h5(path, "results file") as f:
        C.require(f, path, "an exp_* results file", attrs=("kind",), items=("table", "runs"))
        k = f.attrs["kind"]
        k = k.decode() if isinstance(k, bytes) else str(k)
        if k != kind:
            C.die(f"{path}: holds a kind = {k!r} experiment, not {kind!r}: cannot merge --only into it "
                  f"(run without --only, or move it away)")
        t = f["table"]
        if not isinstance(t, h5py.Group) or "label" not in t:
            C.die(f"'{path}' is not an exp_* results file: no table/label")
        cols = {}
        for c in t.keys():
            d = t[c]
            cols[c] = list(d.asstr()[()]) if h5py.check_string_dtype(d.dtype) else [float(x) for x in d[()]]
        n = len(cols["label"])
        if any(len(v) != n for v in cols.values()):
            C.die(f"'{path}': the table's columns differ in length: cannot merge --only into it")
        groups = {}
        for g in f["runs"].keys():
            lab = f["runs"][g].attrs.get("label")
            groups[lab.decode() if isinstance(lab, bytes) else lab] = g
        rows = [{c: cols[c][i] for c in cols} for i in range(n)]
        missing = [r["label"] for r in rows if r["label"] not in groups]
        if missing:
            C.die(f"'{path}': no runs/ group for row {missing[0]!r}: cannot merge --only into it")
    return rows, groups


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("--only", help="run only labels containing this text; the other runs of an earlier results "
                                   "file are kept (merged)")
    args = ap.parse_args()
    cfg_path, cfg = C.load_config(args.name)
    if args.name.endswith(".toml"):  # a config file given by path (tests): exp_<stem>.h5
        args.name = os.path.basename(args.name)[:-5].removeprefix("exp_")
    try:
        runs = expand_runs(cfg)
    except C.InputError as e:
        C.die(f"{cfg_path}: {e}")
    if not runs:  # nothing to run: never replace an earlier results file with an empty one
        C.die(f"{cfg_path}: no configurations ([[run]] entries or a [matrix] table)")
    args.all_labels = [r["label"] for r in runs]
    if args.only is not None:
        labels = args.all_labels
        runs = [r for r in runs if args.only in r["label"]]
        if not runs:
            C.die(f"--only {args.only!r} matches none of the {len(labels)} labels of {cfg_path} "
                  f"({', '.join(labels[:6])}{', ...' if len(labels) > 6 else ''}); nothing was run or written")
    kind = cfg["experiment"].get("kind", "train")
    out_path = os.path.join(C.results_dir(), f"exp_{args.name}.h5")
    check_output(out_path)
    C.require_mpiexec()
    C.burst_bin()
    cl, kal = C.cpu_cluster_paths()
    C.handle_signals()
    lock = Lock(out_path)
    tmp = f"{out_path}.{os.getpid()}.tmp"  # this runner's own: no runner removes another's
    try:
        args.earlier = None
        if args.only is not None and os.path.exists(out_path):  # the runs not re-run are kept from it
            args.earlier = earlier_rows(out_path, kind)
        print(f"experiment {args.name} ({kind}): {len(runs)} configuration(s) -> {out_path}", flush=True)
        errs, rows = write_results(args, cfg_path, cfg, kind, runs, cl, kal, tmp)
    except C.Interrupted as e:
        e.exit(f"{out_path} was not written")
    except C.CommandFailed as e:  # a burst command failed: its error, no traceback; the earlier results stay
        e.report()
        print(f"{C.prog()}: {out_path} was not written", file=sys.stderr)
        sys.exit(1)
    except RunIncomplete as e:
        C.die(f"{e}; {out_path} was not written", status=1)
    finally:
        if os.path.exists(tmp):  # the partial file of a failed or interrupted run
            os.remove(tmp)
        lock.release()
    if errs:
        print(f"  {len(errs)} predicted runs: max |error| {100 * max(errs):.1f}%, {sum(e <= 0.25 for e in errs)} within 25%"
              f" ({sum(abs(r['error_no_wait']) <= 0.25 for r in rows if not math.isnan(r['error_no_wait']) and not r.get('calibration_point', 0))}"
              f" without the collective-wait terms)")
    print(f"wrote {out_path}")


def merge_earlier(args, kind, out, rows, out_path):
    """--only: the rows (and runs/ groups) of the earlier file that were not re-run, kept beside the new ones
    (a re-run row replaces the earlier row of its label). Train rows in the config's order; attention rows
    in the earlier file's order, new ones after them. Returns the merged rows."""
    old_rows, old_groups = args.earlier
    if old_rows and rows and set(old_rows[0]) != set(rows[0]):
        C.die(f"{out_path}: its table's columns are not this runner's: cannot merge "
              f"--only into it (run without --only); it was not replaced")
    new = {r["label"]: r for r in rows}
    merged = [("new", new[r["label"]]) if r["label"] in new else ("old", r) for r in old_rows]
    seen = {r["label"] for r in old_rows}
    merged += [("new", r) for r in rows if r["label"] not in seen]
    if kind == "train":
        order = {lab: i for i, lab in enumerate(args.all_labels)}
        merged.sort(key=lambda x: order.get(x[1]["label"], len(order)))
    new_groups = {out["runs"][g].attrs["label"]: g for g in out["runs"].keys()}
    for g in list(out["runs"].keys()):
        out.move(f"runs/{g}", f"runs_new/{g}")
    with h5py.File(out_path, "r") as old:
        for i, (src, r) in enumerate(merged):
            name = f"runs/{i:02d}_{r['label']}"
            if src == "new":
                out.move(f"runs_new/{new_groups[r['label']]}", name)
            else:
                old.copy(old["runs"][old_groups[r["label"]]], out, name=name)
    del out["runs_new"]
    return [r for _, r in merged]


def write_results(args, cfg_path, cfg, kind, runs, cl, kal, tmp):
    """Run the experiment into tmp, then move it over exp_<name>.h5; returns (|errors|, rows)."""
    out_path = os.path.join(os.path.dirname(tmp), f"exp_{args.name}.h5")
    with h5py.File(tmp, "w") as out:
        C.write_attrs(out, C.machine_attrs())
        out.attrs["experiment"] = args.name
        out.attrs["kind"] = kind
        out.attrs["description"] = cfg["experiment"].get("description", "")
        out.attrs["config_file"] = os.path.relpath(cfg_path, C.ROOT)
        out.attrs["config"] = open(cfg_path).read()
        out.attrs["cluster_toml"] = open(cl).read()
        out.attrs["calibration_toml"] = open(kal).read()
        out.attrs["measured_convention"] = ("train: median step seconds after the first step (rank 0's step timer); "
                                            "attention: median over repeats of the slowest rank's fwd + bwd")
        rows = run_train(args.name, cfg, runs, out) if kind == "train" else run_attention(args.name, cfg, runs, out)
        if getattr(args, "earlier", None) and rows:
            rows = merge_earlier(args, kind, out, rows, out_path)
        t = out.create_group("table")
        for key in rows[0].keys() if rows else []:
            vals = [r[key] for r in rows]
            if isinstance(vals[0], str):
                t.create_dataset(key, data=np.array(vals, dtype=h5py.string_dtype()))
            else:
                t.create_dataset(key, data=np.array(vals, dtype=float))
        errs = [abs(r["error"]) for r in rows if not math.isnan(r["error"]) and not r.get("calibration_point", 0)]
        out.attrs["runs"] = len(rows)
        out.attrs["max_abs_error"] = max(errs) if errs else float("nan")
        out.attrs["within_25pct"] = sum(e <= 0.25 for e in errs)
        out.attrs["predicted_runs"] = len(errs)
        nw = [abs(r["error_no_wait"]) for r in rows if not math.isnan(r.get("error_no_wait", float("nan"))) and not r.get("calibration_point", 0)]
        out.attrs["within_25pct_no_wait"] = sum(e <= 0.25 for e in nw)
    if not rows:  # an attention run whose bench file held no cases: keep the earlier results
        C.die(f"{cfg_path}: the runs produced no rows; {out_path} was not written")
    os.replace(tmp, out_path)
    return errs, rows


if __name__ == "__main__":
    main()

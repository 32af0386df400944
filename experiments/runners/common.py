"""Shared pieces of the experiment runners: running `burst` under mpiexec,
reading run logs, asking the performance model (`burst simulate`) for the
prediction of each real run, and writing one HDF5 file per experiment.

Every run is real: `mpiexec -n P build-host/burst train|bench ...` with one
OpenMP thread per rank. The prediction of each run comes from src/perf (the
same library as the paper-scale tables) with the cluster description of this
machine that calibrate_cpu.py measured earlier in the same script run.
"""
import datetime
import resource
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import tomllib

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIGS = os.path.join(ROOT, "experiments", "configs")


def build_dir():
    return os.environ.get("BURST_BUILD", os.path.join(ROOT, "build-host"))


def burst_bin():
    b = os.path.join(build_dir(), "burst")
    if not os.path.exists(b):
        sys.exit(f"no {b}: build first (scripts/build.sh)")
    return b


def results_dir():
    d = os.environ.get("BURST_RESULTS", os.path.join(ROOT, "experiments", "results"))
    os.makedirs(d, exist_ok=True)
    return d


def work_dir(name):
    d = os.path.join(results_dir(), "work", name)
    os.makedirs(d, exist_ok=True)
    return d


def cpu_cluster_paths():
    """The cluster and calibration TOML of this machine (calibrate_cpu.py)."""
    d = os.path.join(results_dir(), "calibration")
    c = os.environ.get("BURST_CPU_CLUSTER", os.path.join(d, "cpu.toml"))
    k = os.environ.get("BURST_CPU_CALIBRATION", os.path.join(d, "cpu_calibration.toml"))
    if not (os.path.exists(c) and os.path.exists(k)):
        sys.exit(f"no {c} / {k}: run experiments/runners/calibrate_cpu.py first")
    return c, k


def env_for(gpus_per_node=0):
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e["OMP_PROC_BIND"] = "false"
    e.pop("OMP_PLACES", None)
    if gpus_per_node:
        e["BURST_GPUS_PER_NODE"] = str(gpus_per_node)
    else:
        e.pop("BURST_GPUS_PER_NODE", None)
    return e


last_cpu_share = float("nan")


def mpiexec(n, args, log_path, gpus_per_node=0, timeout=900):
    """Run `mpiexec -n n burst args...`; stdout+stderr to log_path. Returns wall seconds."""
    cmd = ["mpiexec", "-n", str(n)]
    if n > os.cpu_count():
        # MPICH's hydra accepts any n; Open MPI needs --oversubscribe.
        v = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True).stdout
        if "Open MPI" in v or "OpenRTE" in v:
            cmd.append("--oversubscribe")
    cmd += [burst_bin()] + args
    t0 = time.time()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_path, "w") as f:
        f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env_for(gpus_per_node), timeout=timeout)
    if r.returncode != 0:
        tail = open(log_path).read()[-3000:]
        raise RuntimeError(f"command failed ({r.returncode}): {' '.join(cmd)}\n{tail}")
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.time() - t0
    global last_cpu_share
    # CPU seconds the ranks got per second of wall per rank (busy-polling MPI
    # waits count as CPU): 1 = every rank had a core; lower = the machine was
    # shared with other jobs or P exceeded the cores.
    last_cpu_share = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / wall / n
    return wall


def simulate(args, out_h5, cluster=None):
    """`burst simulate ... --output out_h5` with this machine's cluster (or `cluster`); returns its stdout."""
    c, k = cpu_cluster_paths()
    c = cluster or c
    cmd = [burst_bin(), "simulate", "--cluster", c, "--calibration", k, "--output", out_h5] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"simulate failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def cluster_without_waits(work):
    """This machine's cluster with the collective-wait constants set to 0: the
    model as it was before them, for the same runs (a comparison column)."""
    import re
    c, _ = cpu_cluster_paths()
    text = open(c).read()
    text = re.sub(r"(?m)^(collective_wait_ms|nap_wait_ms) = .*$", r"\1 = 0   # zeroed: the model without collective waits", text)
    out = os.path.join(work, "cpu_without_waits.toml")
    with open(out, "w") as f:
        f.write(text)
    return out


def load_config(name):
    path = name if name.endswith(".toml") else os.path.join(CONFIGS, f"exp_{name}.toml")
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    return path, cfg


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ",".join(toml_value(x) for x in v) + "]"
    return str(v)


def set_args(keys):
    out = []
    for k, v in keys.items():
        out += ["--set", f"{k}={toml_value(v)}"]
    return out


def write_attrs(g, d):
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = json.dumps(v)
        g.attrs[k] = v


def machine_attrs():
    return {
        "host": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu_count": os.cpu_count(),
        "omp_num_threads": 1,
        "load_average_at_start": json.dumps(os.getloadavg()),
    }


def rel_err(pred, meas):
    return (pred - meas) / meas if meas > 0 else float("nan")

"""Helpers for reading BurstEngine HDF5 results with h5py.

    from burst_h5 import read_log, read_dataset, open_h5, require, die
    log = read_log("run.h5")          # {"loss": array, "lr": array, ...}
    x = read_dataset(f, "model.layers.0.mlp.up_proj.weight")  # bf16 -> float32
"""
import os
import sys

import h5py
import numpy as np


class InputError(Exception):
    """Bad input found deep in a script (e.g. a config's tables): the caller names the file and calls die()."""


def prog():
    return os.path.basename(sys.argv[0]) or "python3"


def die(msg, status=2):
    """One line `<script>: error: msg` on stderr and exit status 2 (bad input): no traceback."""
    print(f"{prog()}: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(status)


def open_h5(path, what="HDF5 result file"):
    """h5py.File(path, "r"); bad input (missing, a directory, not HDF5, truncated) exits with one
    line naming the file and the problem (status 2, no traceback)."""
    if not os.path.exists(path):
        die(f"no such {what}: {path}")
    if os.path.isdir(path):
        die(f"{path} is a directory, not a {what}")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        die(f"{path} is not a readable HDF5 file ({e})")


def require(f, path, what, attrs=(), items=()):
    """Exit with one line (status 2) when the open HDF5 file f (named path) lacks one of the root
    attributes `attrs` or the groups / datasets `items`: "'F' is not a <what>: no attribute 'kind'"."""
    for a in attrs:
        if a not in f.attrs:
            die(f"'{path}' is not {what}: no attribute '{a}'")
    for i in items:
        if i not in f:
            die(f"'{path}' is not {what}: no group or dataset '{i}'")


def check_out_dir(out, flag="--out"):
    """An output directory named by `flag`: an existing non-directory is bad input (checked before any output)."""
    if os.path.exists(out) and not os.path.isdir(out):
        die(f"{flag} {out}: exists and is not a directory")


def make_out_dir(out, flag="--out"):
    """os.makedirs(out), or one line naming it and the problem (status 2)."""
    check_out_dir(out, flag)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        die(f"{flag} {out}: cannot create the directory: {e.strerror or e}")


def read_dataset(f, name):
    """A dataset as a numpy array; bf16 (uint16 bits, attribute dtype=bfloat16) becomes float32."""
    d = f[name]
    a = d[()]
    if d.attrs.get("dtype", b"") in (b"bfloat16", "bfloat16"):
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a


def read_log(path, group="log"):
    """The run log as {column: float64 array}; rows a column did not have are NaN."""
    with h5py.File(path, "r") as f:
        g = f[group]
        return {k: g[k][()] for k in g.keys()}


def attrs(f, obj="/"):
    out = {}
    for k, v in f[obj].attrs.items():
        out[k] = v.decode() if isinstance(v, bytes) else v
    return out

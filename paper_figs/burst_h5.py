"""Helpers for reading BurstEngine HDF5 results with h5py.

    from burst_h5 import read_log, read_dataset
    log = read_log("run.h5")          # {"loss": array, "lr": array, ...}
    x = read_dataset(f, "model.layers.0.mlp.up_proj.weight")  # bf16 -> float32
"""
import os
import sys

import h5py
import numpy as np


def open_h5(path, what="HDF5 result file"):
    """h5py.File(path, "r"), or exit with one line naming the file and the problem (no traceback)."""
    prog = os.path.basename(sys.argv[0])
    if not os.path.exists(path):
        sys.exit(f"{prog}: no such {what}: {path}")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        sys.exit(f"{prog}: {path} is not a readable HDF5 file ({e})")


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

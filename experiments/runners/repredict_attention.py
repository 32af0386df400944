#!/usr/bin/env python3
"""Predict the stored rows of an attention-kind experiment file again with a
given `burst` binary: each row's stored simulate arguments, the file's own
cluster and calibration, the row's measured CPU share; the measurements are
not rerun. For comparing two versions of the model on the same data.

  repredict_attention.py experiments/results/exp_sparse.h5 build-host/burst [--host-cpu | --host-cores] [--extra-host FILE]

--host-cpu (default): the share is the CPU the run used (the runner's
meaning since the i7-model branch); --host-cores: the cores it could use (a
binary older than --host-cpu takes only this). --extra-host FILE: lines
appended to the stored cluster description's [host] table (its last one),
e.g. tile costs measured after the experiment ran.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py


def main():
    argv = list(sys.argv[1:])
    extra = ""
    if "--extra-host" in argv:
        i = argv.index("--extra-host")
        extra = open(argv[i + 1]).read()
        del argv[i:i + 2]
    exp, binary = argv[0], argv[1]
    flag = argv[2] if len(argv) > 2 else "--host-cpu"
    d = tempfile.mkdtemp()
    with h5py.File(exp, "r") as f:
        c, k = os.path.join(d, "cluster.toml"), os.path.join(d, "calibration.toml")
        open(c, "w").write(f.attrs["cluster_toml"] + "\n" + extra)
        open(k, "w").write(f.attrs["calibration_toml"])
        n = within = 0
        for name in sorted(f["runs"].keys()):
            a = f["runs"][name].attrs
            if a["not_modelled"]:
                continue
            args = str(a["simulate_args"]).split()
            m = args.index("--model") + 1
            if not os.path.exists(args[m]):  # the run's work directory is not kept: the same shape again
                heads = 8
                model = os.path.join(d, "attn.json")
                json.dump({"model_type": "llama", "vocab_size": 64, "hidden_size": heads * 16, "num_hidden_layers": 1,
                           "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": 16,
                           "intermediate_size": 4 * heads * 16, "max_position_embeddings": 1 << 20, "hidden_act": "silu"},
                          open(model, "w"))
                args[m] = model
            out = os.path.join(d, "pred.h5")
            P, share = int(a["ranks"]), float(a["cpu_share"])
            subprocess.run([binary, "simulate", "--cluster", c, "--calibration", k, "--output", out] + args +
                           [flag, f"{share * P:.4f}"], check=True, capture_output=True)
            with h5py.File(out, "r") as p:
                pred = float(p["attention"].attrs["fwd_s"]) + float(p["attention"].attrs["bwd_s"])
            meas = float(a["measured_step_s"])
            e = pred / meas - 1
            n += 1
            within += abs(e) <= 0.25
            print(f"{name:46s} share {share:.2f} measured {meas:.4f} stored {float(a['predicted_step_s']):.4f} "
                  f"({100 * float(a['error']):+.1f}%) now {pred:.4f} ({100 * e:+.1f}%)")
        print(f"{within} of {n} within 25%")


if __name__ == "__main__":
    main()

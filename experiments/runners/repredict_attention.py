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
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "paper_figs"))
from burst_h5 import die, open_h5, require  # noqa: E402

WHAT = "an attention-kind exp_* results file (experiments/runners/run_experiment.py)"
ROW_ATTRS = ("not_modelled", "simulate_args", "ranks", "cpu_share", "measured_step_s", "predicted_step_s", "error")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exp", help="an attention-kind experiment file (exp_attention.h5, exp_sparse.h5)")
    ap.add_argument("binary", help="the burst binary that predicts again")
    share = ap.add_mutually_exclusive_group()
    share.add_argument("--host-cpu", dest="flag", action="store_const", const="--host-cpu",
                       help="pass the share as the CPU the run used (default)")
    share.add_argument("--host-cores", dest="flag", action="store_const", const="--host-cores",
                       help="pass the share as the cores the run could use (binaries older than --host-cpu)")
    ap.add_argument("--extra-host", metavar="FILE", help="lines appended to the stored cluster's [host] table")
    a = ap.parse_args()
    flag = a.flag or "--host-cpu"
    extra = ""
    if a.extra_host:
        try:
            with open(a.extra_host) as fh:
                extra = fh.read()
        except OSError as e:
            die(f"--extra-host {a.extra_host}: cannot read it: {e.strerror or e}")
    if not (os.path.isfile(a.binary) and os.access(a.binary, os.X_OK)):
        die(f"{a.binary}: no such executable (the burst binary, e.g. build-host/burst)")
    f = open_h5(a.exp, "experiment file")
    with f:
        require(f, a.exp, WHAT, attrs=("cluster_toml", "calibration_toml"), items=("runs",))
        for name in f["runs"].keys():
            for k in ROW_ATTRS:
                if k not in f["runs"][name].attrs:
                    die(f"'{a.exp}' is not {WHAT}: run '{name}' has no attribute '{k}'")
        d = tempfile.mkdtemp()
        c, k = os.path.join(d, "cluster.toml"), os.path.join(d, "calibration.toml")
        with open(c, "w") as fh:
            fh.write(f.attrs["cluster_toml"] + "\n" + extra)
        with open(k, "w") as fh:
            fh.write(f.attrs["calibration_toml"])
        n = within = 0
        for name in sorted(f["runs"].keys()):
            a_ = f["runs"][name].attrs
            if a_["not_modelled"]:
                continue
            args = str(a_["simulate_args"]).split()
            if "--model" not in args:
                die(f"'{a.exp}': run '{name}': simulate_args has no --model")
            m = args.index("--model") + 1
            if not os.path.exists(args[m]):  # the run's work directory is not kept: the same shape again
                heads = 8
                model = os.path.join(d, "attn.json")
                with open(model, "w") as fh:
                    json.dump({"model_type": "llama", "vocab_size": 64, "hidden_size": heads * 16, "num_hidden_layers": 1,
                               "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": 16,
                               "intermediate_size": 4 * heads * 16, "max_position_embeddings": 1 << 20,
                               "hidden_act": "silu"}, fh)
                args[m] = model
            out = os.path.join(d, "pred.h5")
            P, share_ = int(a_["ranks"]), float(a_["cpu_share"])
            cmd = [a.binary, "simulate", "--cluster", c, "--calibration", k, "--output", out] + args + [flag, f"{share_ * P:.4f}"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:  # the binary's own error line, no traceback
                last = [x for x in (r.stderr + "\n" + r.stdout).splitlines() if x.strip()][-3:]
                print(f"{os.path.basename(sys.argv[0])}: error: run '{name}': `{' '.join(cmd)}` failed ({r.returncode}):",
                      file=sys.stderr)
                for x in last:
                    print(f"  {x}", file=sys.stderr)
                sys.exit(1)
            with open_h5(out, "simulate output") as p:
                pred = float(p["attention"].attrs["fwd_s"]) + float(p["attention"].attrs["bwd_s"])
            meas = float(a_["measured_step_s"])
            e = pred / meas - 1
            n += 1
            within += abs(e) <= 0.25
            print(f"{name:46s} share {share_:.2f} measured {meas:.4f} stored {float(a_['predicted_step_s']):.4f} "
                  f"({100 * float(a_['error']):+.1f}%) now {pred:.4f} ({100 * e:+.1f}%)")
        print(f"{within} of {n} within 25%")


if __name__ == "__main__":
    main()

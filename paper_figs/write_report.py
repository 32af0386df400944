#!/usr/bin/python3
"""Assemble REPORT.md from what scripts/reproduce_paper.sh produced: the
calibration of this machine, the paper-scale predictions beside the published
numbers (simulate/simulate_tables.md, error of every cell), and the real runs
made here with the model's prediction of each (figures/experiments_tables.md).

    /usr/bin/python3 paper_figs/write_report.py experiments/results --elapsed SECONDS --out experiments/results/REPORT.md
"""
import argparse
import datetime
import json
import os
import socket
import tomllib

import numpy as np

from burst_h5 import die, open_h5, require

CAL_WHAT = "a calibration file (experiments/runners/calibrate_cpu.py)"
CAL_ATTRS = ("cluster_toml", "attn_rate_inf_gflops", "attn_t0_tokens", "attn_fwd_over_bwd", "mpi_alpha_s",
             "mpi_beta_bytes_per_s", "mem_bandwidth_bytes_per_s", "cores")
CAL_ITEMS = ("gemm_gflops", "gemm_tokens", "attention_seq")


def kept_foreign(f):
    """Other processes' CPU (cores) during each kept attempt of the calibration's commands (calibration.h5)."""
    x = f["calls_foreign_cores"][:]
    return x[f["calls_kept"][:] > 0] if "calls_kept" in f else x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--elapsed", type=float, default=float("nan"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    r = a.results
    if a.elapsed == a.elapsed and not 0 <= a.elapsed < float("inf"):
        die(f"--elapsed {a.elapsed}: must be the script's wall seconds (a number >= 0)")
    if not os.path.isdir(r):
        die(f"no such directory: {r}" if not os.path.exists(r) else f"{r} is not a directory")
    if os.path.isdir(a.out):
        die(f"--out {a.out}: is a directory (name the report file, e.g. {os.path.join(a.out, 'REPORT.md')})")
    out_parent = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_parent):
        die(f"--out {a.out}: the directory {out_parent} does not exist")
    parts = [os.path.join(r, "calibration", "calibration.h5"), os.path.join(r, "simulate", "simulate_tables.md"),
             os.path.join(r, "figures", "experiments_tables.md")]
    if not any(os.path.exists(x) for x in parts):
        die(f"{r} holds none of {', '.join(os.path.relpath(x, r) for x in parts)} "
                 "(scripts/reproduce_paper.sh writes them)")
    L = ["# BurstEngine: reproducing the paper (REPORT)", "",
         f"Written {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {socket.gethostname()} "
         f"({os.cpu_count()} cores) by `scripts/reproduce_paper.sh`; "
         + (f"the script ran for {a.elapsed:.0f} s ({a.elapsed / 60:.1f} min) of wall time after set-up." if a.elapsed == a.elapsed
            else "its wall time was not measured (no --elapsed)."), "",
         "Two halves: (1) the paper's tables at the paper's scale (32 and 64 A800s) from the performance and memory "
         "model (src/perf, `burst simulate`), beside the published numbers; (2) every experiment run for real at the "
         "scale of this machine (at most 8 MPI ranks on its cores), each run beside the same model's prediction for "
         "this machine.", ""]
    cal = os.path.join(r, "calibration", "calibration.h5")
    if os.path.exists(cal):
        with open_h5(cal, "calibration file") as f:
            require(f, cal, CAL_WHAT, attrs=CAL_ATTRS, items=CAL_ITEMS)
            try:
                float(tomllib.loads(f.attrs["cluster_toml"])["gpu"]["peak_bf16_tflops"])
            except (tomllib.TOMLDecodeError, TypeError, ValueError) as e:
                die(f"'{cal}': attribute 'cluster_toml' is not valid TOML: {e}")
            except KeyError:
                die(f"'{cal}': attribute 'cluster_toml' has no gpu.peak_bf16_tflops")
            A = f.attrs
            per_p = "wait_ranks" in A.keys() and len(A["wait_ranks"]) > 0

            def wait_txt(name):  # per rank count when the calibration fitted them so (host.wait_ranks), else the pooled value
                key = f"collective_wait_{name}_s"
                if per_p and key + "_at_ranks" in A.keys():
                    return " / ".join(f"{v * 1e3:.2f}" for v in A[key + "_at_ranks"])
                return f"{A[key] * 1e3:.2f}"
            wait_where = (" (at " + " / ".join(str(int(p)) for p in A["wait_ranks"]) + " ranks)") if per_p else ""
            L += ["## This machine as the model sees it (measured in this run, before any comparison)", "",
                  "| constant | value | from |", "|---|---|---|",
                  f"| GEMM rate per CPU-second | {tomllib.loads(A['cluster_toml'])['gpu']['peak_bf16_tflops'] * 1e3:.2f} GFLOP/s "
                  f"(the block's own GEMMs: {', '.join(f'{g:.1f}' for g in f['gemm_gflops'][:])} at "
                  f"{', '.join(str(int(t)) for t in f['gemm_tokens'][:])} tokens) | `burst bench layer` on the CPU clock, one rank |",
                  f"| attention rate curve (per CPU-second) | r_inf {A['attn_rate_inf_gflops']:.3f} GFLOP/s, t0 {A['attn_t0_tokens']:.0f} tokens, "
                  f"fwd/bwd {A['attn_fwd_over_bwd']:.3f} | the block's attention at "
                  f"{', '.join(str(int(s)) for s in f['attention_seq'][:])} tokens |",
                  (f"| the block's rest (RMSNorm, RoPE, SwiGLU, copies) | a + b t + c t^2 = "
                   + " / ".join(f"{x:.3g}" for x in json.loads(A['layer_rest_fit_abc']))
                   + f" (per layer overhead {A['layer_overhead_s'] * 1e3:.3f} ms; {A['elementwise_passes']:.1f} passes) "
                   f"| `burst bench layer` at {', '.join(str(int(t)) for t in f['layer_tokens'][:])} tokens |") if "layer_rest_fit_abc" in A.keys() else "",
                  (f"| ranks at once, speed per CPU-second | "
                   + ", ".join(f"{int(p)}: {e:.2f}" for p, e in zip(f['concurrency_ranks'][:], f['concurrency_efficiency'][:]))
                   + " | `burst bench layer` as 1/2/4/8 copies at once |") if "concurrency_efficiency" in f else "",
                  (f"| per-step overhead | {A['step_overhead_s'] * 1e3:.2f} ms + {A['step_overhead_s_per_token'] * 1e6:.3f} us per token "
                   f"| one-rank train steps at {', '.join(str(int(t)) for t in f['step_seq'][:])} tokens, what the model leaves "
                   f"unexplained |") if "step_overhead_s" in A.keys() else "",
                  f"| MPI alpha, beta | {A['mpi_alpha_s'] * 1e6:.1f} us, {A['mpi_beta_bytes_per_s'] / 1e9:.2f} GB/s | `burst bench pingpong` |",
                  f"| memory bandwidth | {A['mem_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s | 64 MiB copy |",
                  (f"| collective waits on shared cores, per unit of 1/s - 1{wait_where} | attention collectives {wait_txt('spin')} ms per "
                   f"round of MPICH's algorithm"
                   + (f" ({wait_txt('fit')} ms within groups that fit on the cores)" if "collective_wait_fit_s" in A.keys() else "")
                   + (f", {wait_txt('follow')} ms for a call right after another" if "collective_wait_follow_s" in A.keys() else "")
                   + f", all-reduce {wait_txt('nap')} ms per call"
                   + (f"; after W of compute per rank a call waits 1 - exp(-W / ("
                      + " / ".join(f"{v * 1e3:.2f}" for v in A["wait_work_s_at_ranks"]) + " ms)) of it"
                      if per_p and "wait_work_s_at_ranks" in A.keys() and len(A["wait_work_s_at_ranks"]) == len(A["wait_ranks"]) else "")
                   + " | `burst bench collective` at "
                   f"{', '.join(str(int(p)) for p in sorted(set(f['collective_ranks'][:])))} ranks"
                   + (f" (and groups of {', '.join(str(int(g)) for g in sorted(set(g for g, r in zip(f['collective_group'][:], f['collective_ranks'][:]) if g != r)))})"
                      if "collective_group" in f else "")
                   + " |") if "collective_wait_spin_s" in A.keys() else "",
                  (f"| spread of the calibration points (max / min of {A['samples_per_point']} samples, median kept) | "
                   f"block {', '.join(f'{x:.2f}' for x in f['layer_fwd_bwd_spread'][:])}; attention rate "
                   f"{', '.join(f'{x:.2f}' for x in f['attention_combined_spread'][:])}; GEMMs "
                   f"{', '.join(f'{x:.2f}' for x in f['layer_gemm_spread'][:])}; rest {', '.join(f'{x:.2f}' for x in f['layer_rest_spread'][:])} "
                   f"(at {', '.join(str(int(t)) for t in f['layer_tokens'][:])} tokens); copies at once "
                   f"{', '.join(f'{x:.2f}' for x in f['concurrency_fwd_bwd_spread'][:])} (1, 2, 4, 8); one-rank steps "
                   f"{', '.join(f'{x:.2f}' for x in f['step_spread'][:])}; pingpong alpha {A['mpi_alpha_spread']:.2f}, beta "
                   f"{A['mpi_beta_spread']:.2f} | independent runs of each benchmark, interleaved |")
                  if "samples_per_point" in A.keys() else "",
                  (f"| local memory work of the blocking collectives, CPU time per byte of the tensors they fill | Ulysses/USP "
                   f"all-to-all {A['a2a_local_s_per_byte'] * 1e9:.3f} ns, all-gather method "
                   + (", ".join(f"{x * 1e9:.3f} ns at {int(r)} ranks" for r, x in zip(f["allgather_local_ranks"][:],
                                                                                 f["allgather_local_s_per_byte_at"][:]))
                      if "allgather_local_ranks" in f else f"{A['allgather_local_s_per_byte'] * 1e9:.3f} ns")
                   + " | `burst bench attention` comm-only (no math), 2 ranks"
                   + (" (the all-gather method at each rank count named: above the cores with the members' turns between "
                      "its calls, which the model then charges no separate wait)" if "allgather_local_ranks" in f else "")
                   + ", a size no experiment runs |")
                  if "a2a_local_s_per_byte" in A.keys() else "",
                  (f"| the host kernel's tile costs, us per (tile, head), forward / backward | partly visible beyond a whole tile: "
                   f"causal diagonal {A['tile_partial_causal_fwd_s'] * 1e6:.2f} / {A['tile_partial_causal_bwd_s'] * 1e6:.2f}, window edge "
                   f"{A['tile_partial_window_fwd_s'] * 1e6:.2f} / {A['tile_partial_window_bwd_s'] * 1e6:.2f}, document boundary "
                   f"{A['tile_partial_document_fwd_s'] * 1e6:.2f} / {A['tile_partial_document_bwd_s'] * 1e6:.2f}; skipped "
                   f"{A['tile_skip_fwd_s'] * 1e6:.3f} / {A['tile_skip_bwd_s'] * 1e6:.3f}; general mask's checks "
                   f"{A['tile_mask_fwd_s'] * 1e6:.3f} / {A['tile_mask_bwd_s'] * 1e6:.3f}; plain causal diagonal "
                   f"{A['tile_causal_diag_fwd_s'] * 1e6:.2f} / {A['tile_causal_diag_bwd_s'] * 1e6:.2f}; per call "
                   f"{A['tile_call_fwd_s'] * 1e6:.2f} / {A['tile_call_bwd_s'] * 1e6:.2f} | `burst bench attention --set "
                   f"bench.tile_costs=true`, one rank, CPU clock |")
                  if "tile_partial_causal_fwd_s" in A.keys() else "",
                  (f"| a ring round's CPU on shared cores | {A['ring_round_cpu_s'] * 1e6:.1f} us + "
                   f"{A['ring_round_cpu_s_per_byte'] * 1e9:.3f} ns per byte | `burst bench collective` kind ring, 4 ranks |")
                  if "ring_round_cpu_s" in A.keys() else "",
                  (f"| load average at the end of the calibration | {A['load_average_at_end']} | os.getloadavg() |")
                  if "load_average_at_end" in A.keys() else "",
                  (f"| other processes during the calibration's commands (kept attempts) | median {float(np.median(kept_foreign(f))):.2f}, "
                   f"max {float(np.max(kept_foreign(f))):.2f} cores; {int(A['retakes'])} retaken, {int(A['kept_not_quiet'])} kept "
                   f"above {A['foreign_max_fraction']:.2f} x cores | /proc/stat busy less the commands' own CPU; a command is run again "
                   f"when others used more |") if "calls_foreign_cores" in f else "",
                  f"| cores shared by the ranks | {A['cores']} | os.cpu_count(); each run is predicted with the share of them it got "
                  f"(CPU seconds per wall second, kernel accounting) |", ""]
    L += ["## Part 1: the paper's scale (model) vs published", "",
          "Figures: `simulate/*.png`. Acceptance: tokens/s within 15%, BurstEngine's memory within 10%, OOM where "
          "the paper saw OOM; misses are marked by their error.", ""]
    st = os.path.join(r, "simulate", "simulate_tables.md")
    if os.path.exists(st):
        body = open(st).read().split("\n")
        L += [("#" + x if x.startswith("#") else x) for x in body[1:]]
    L += ["## Part 2: real runs on this machine vs the model", "", "Figures: `figures/exp_*.png`.", ""]
    et = os.path.join(r, "figures", "experiments_tables.md")
    if os.path.exists(et):
        body = open(et).read().split("\n")
        L += [("#" + x if x.startswith("#") else x) for x in body[1:]]
    tmp = a.out + ".tmp"
    try:
        with open(tmp, "w") as fo:
            fo.write("\n".join(L) + "\n")
        os.replace(tmp, a.out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        die(f"--out {a.out}: cannot write it: {e.strerror or e}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

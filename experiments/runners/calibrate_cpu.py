#!/usr/bin/python3
"""Describe THIS machine to the performance model (src/perf) from our own
microbenchmarks, measured now, before any experiment is compared:

- the block: `burst bench layer` (the engine's block forward + backward,
  float, the model's widths) at LAYER_SEQ tokens, one rank: the GEMM rate at
  the block's own shapes (its 7 forward and 14 backward GEMMs timed alone),
  and the rest (RMSNorm, RoPE, SwiGLU, residuals, copies, launches: the
  block's time minus its attention and GEMMs) as a line in the tokens:
  slope -> elementwise passes, intercept -> a per-layer overhead;
- concurrency: the same block benchmark as P = 2, 4, 8 copies at once
  (mpiexec, no communication): the CPU time per block at P over that of one
  copy alone = the rate per CPU-second a rank keeps while P ranks share the
  host (caches, memory bandwidth, context switches past the cores);
- attention kernel: the block's causal attention as bench layer times it
  alone (the model's heads, 8 x 16) at the block sizes the runs use;
  rate(t) = r_inf t / (t + t0) fitted through them (the same curve as the
  A800's), fwd/bwd ratio;
- every kernel timing above in CPU seconds of the benchmark's process
  (bench.clock = cpu): the cores are shared with other jobs;
- MPI alpha-beta: `burst bench pingpong` between two ranks;
- the host kernel's tile costs: `burst bench attention --set
  bench.tile_costs=true` (one rank, CPU clock): per (tile, head) the general
  mask's checks, the element mask of partly visible tiles (causal diagonal,
  window edge, document boundary), skipped tiles, per call and per row;
- a ring round's CPU on shared cores: `burst bench collective` kind ring at
  4 ranks (CPU per round beyond the compute, as a + b bytes);
- waits of collectives on shared cores: `burst bench collective` at
  P = 2, 4, 8 ranks (compute between the engine's collectives, against the
  compute alone); the wall time per collective beyond the compute, over
  rounds x (1/s - 1) (the dependent rounds of MPICH's algorithm for that
  size, the ranks' off-core ratio), fitted through the origin: one constant
  per round for the attention methods' collectives (all-to-all,
  all-gather, reduce-scatter), one per call for the trainer's all-reduce
  (all of them non-blocking, completed by the engine's bounded wait, which
  yields the core on shared cores);
- memory bandwidth (the unit of the elementwise passes): a 64 MiB copy;
- the step outside the layers (data, embedding, the trainer's bookkeeping):
  no microbenchmark isolates it, so what one-rank training steps of the
  model at STEP_SEQ tokens leave unexplained by every term above, as a line
  in the tokens (intercept: per step; slope: per token), least squares in
  relative terms over five lengths (fit_overhead). One-rank runs only,
  at sizes no experiment runs; no multi-rank run is used.

Every point above is the MEDIAN of SAMPLES independent samples (separate
processes, taken in interleaved rounds so that a slow minute of the host
hits one sample of each point rather than every sample of one point); the
spread of each point (max / min over its samples) is written beside it
(calibration.h5 `*_spread`, the log, REPORT.md), so the noise of a
calibration can be cited. One sample per point moved by up to 30% between
calibrations (NOTES, 2026-12-03).

Writes experiments/results/calibration/{cpu.toml,cpu_calibration.toml,
calibration.h5}. The cluster has host.cores = the cores of this machine:
with P ranks on it each computes at cores / P of the one-thread rates.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import time

ENV_HELP = """where it writes: $BURST_RESULTS/calibration/ (default experiments/results/calibration/ of this
repository): cpu.toml, cpu_calibration.toml, calibration.h5 and the benchmarks' logs, replacing an
earlier calibration. It runs for several minutes (mpiexec, up to 8 ranks) and needs build-host/burst.

environment:
  BURST_CALIB_SAMPLES   independent samples per calibration point, median kept (integer in [1, 100], default 3)
  BURST_HOST_CORES      the cores the ranks share (integer in [1, 4096]; default: the physical cores
                        under MPICH core binding, else the CPUs this process may use)
  BURST_BUILD           the build directory holding burst (default build-host)
  BURST_RESULTS         the results directory (default experiments/results)
  BURST_MPI_BIND        core (default) or none: how mpiexec places the ranks
  BURST_FOREIGN_MAX, BURST_QUIET_RETRIES, BURST_QUIET_WAIT_S, BURST_QUIET_BUDGET_S
                        retakes of a command other processes loaded (common.py)"""


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, epilog=ENV_HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    return ap.parse_args()  # no arguments: --help, anything else is refused (status 2)


if __name__ == "__main__":
    parse_args()  # before anything is measured or written

import h5py  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import common as C  # noqa: E402

B = C.EXP_BLOCK  # experiments/configs/exp_model.json
HEADS, KVH, D, HIDDEN, FFN, LAYERS = B["heads"], B["kv_heads"], B["head_dim"], B["hidden"], B["ffn"], B["layers"]
ATTN_SEQ = [256, 512, 1024, 2048]  # the per-rank block sizes of the runs (S / P)
LAYER_SEQ = [256, 512, 1024, 2048]  # bench layer, one rank: tokens per rank of the runs
CONC_RANKS = [2, 4, 8]  # bench layer copies at once (the runs' rank counts)
CONC_SEQ = 512          # tokens per copy (the runs' most common tokens per rank)
STEP_SEQ = [256, 768, 1024, 1536, 2048]  # one-rank training steps (no experiment runs one rank at these sizes)
STEPS = 8               # train steps of each, the first dropped
REPEATS = 5             # timed repeats of the kernel benchmarks
SAMPLES = C._env_number("BURST_CALIB_SAMPLES", "3", int, 1, 100)  # independent samples per calibration point (median kept)
assert C.PROBE_TOKENS in LAYER_SEQ, "the speed probe is a calibrated one-rank block point"


def spread(xs):
    """max / min of a point's samples (1 = identical); nan when a sample is <= 0."""
    xs = np.asarray(xs, dtype=float)
    return float(xs.max() / xs.min()) if len(xs) and xs.min() > 0 else float("nan")


def median_of(samples):
    """The median of each numeric field over independent samples (dicts of the same keys)."""
    out = dict(samples[0])
    for k, v in samples[0].items():
        if isinstance(v, float):
            out[k] = float(np.median([x[k] for x in samples]))
    out["samples"] = samples
    return out


COLL_RANKS = [2, 4, 8]  # the runs' rank counts (scaling goes to 8)
SPIN_KINDS = ["all_to_all", "all_gather", "reduce_scatter"]  # the attention methods' collectives (per round; "spin": the historical name)
NAP_KINDS = ["all_reduce"]  # the trainer's all-reduce (per call)
COLL_CHUNKS = [8192, 65536, 262144]  # bytes per peer: both sides of MPICH's size thresholds, the runs' sizes


FIT_GROUP = 2          # ranks per collective of the groups that fit on the host's cores (USP's head-parallel pairs)
FIT_RANKS = [4, 8]     # the runs' rank counts past the cores, where such groups wait for their members
FIT_WORK_US = [3000, 10000]  # compute between collectives: the runs' 1K-2K token passes span about this
FOLLOW_RANKS = [4, 8]  # two calls back to back over all the ranks (a group that does not fit on the cores)
# Compute between calls (us per rank) of the single calls over all the ranks:
# the wait grows with it (the members' arrivals spread over the scheduler's
# turns) until it saturates; host.wait_work_ms is fitted on these.
WAIT_WORK_US = [1000, 3000, 10000]
# The rank counts of the per-P wait constants (host.wait_ranks): those of the
# measured points past the host's cores (fewer ranks than cores wait for nobody).
WAIT_RANKS = sorted(P for P in set(COLL_RANKS) | set(FIT_RANKS) | set(FOLLOW_RANKS) if P > C.host_cores())
assert set(FOLLOW_RANKS) <= set(COLL_RANKS), "the second call's wait is the pair's less the single call's at the same P"


def collective_waits(d, alpha, beta):
    """`burst bench collective` at COLL_RANKS (each collective over all the
    ranks) and at FIT_RANKS with bench.group = FIT_GROUP (groups of ranks that
    fit on the cores at once, every group calling its own collective): per
    case the wall time per collective beyond the compute the ranks' share
    pays for, less the alpha-beta time of its bytes (the model prices those
    separately), against x = rounds (1/s - 1) (rounds of MPICH's algorithm
    for that size; 1 for the all-reduce); tau by least squares through
    the origin, one for the attention methods' kinds over all the ranks (per round),
    one for them within groups that fit on the cores (their members can be on
    the cores together, so a member is waited for less often: the 2-rank
    all-to-all waited 0.3-0.5 ms at 4 ranks on 2 cores where the 4-rank one
    waited 0.5-0.9 ms for its 3 rounds, NOTES), one for the all-reduce
    (per call), and one for a call right after another of a group that does
    not fit (at FOLLOW_RANKS with bench.calls = 2: the second call's excess,
    the pair's less the single call's of the same case)."""
    xs = {"spin": [], "nap": [], "spin_fit": [], "follow": []}
    ys = {"spin": [], "nap": [], "spin_fit": [], "follow": []}
    ps = {"spin": [], "nap": [], "spin_fit": [], "follow": []}  # the rank count of each point
    ws = {"spin": [], "nap": [], "spin_fit": [], "follow": []}  # CPU seconds of compute before the call (0: right after another)
    rows = []
    kinds = SPIN_KINDS + NAP_KINDS
    first = {}  # (P, kind, chunk) -> [(compute before, the single call's median excess)] over all the ranks
    runs = ([(P, P, kinds, WAIT_WORK_US, 1) for P in COLL_RANKS] + [(P, FIT_GROUP, SPIN_KINDS, FIT_WORK_US, 1) for P in FIT_RANKS]
            + [(P, P, SPIN_KINDS, [10000], 2) for P in FOLLOW_RANKS])
    for P, G, run_kinds, work, calls in runs:
        # SAMPLES independent runs; per case the median excess and share (the spread is kept per case)
        per_case = {}
        tag = f"collective_np{P}" + (f"_g{G}" if G != P else "") + (f"_calls{calls}" if calls != 1 else "")
        for i in range(SAMPLES):
            h5 = os.path.join(d, f"{tag}_s{i}.h5")
            C.mpiexec(P, ["bench", "collective", "--set", "bench.kinds=[" + ",".join(f'"{k}"' for k in run_kinds) + "]",
                          "--set", f"bench.chunk_bytes={COLL_CHUNKS}".replace(" ", ""),
                          "--set", f"bench.work_us={work}".replace(" ", ""), "--set", f"bench.group={G}",
                          "--set", f"bench.calls={calls}", "--set", "bench.iterations=6", "--set", "bench.rounds=2", "--output", h5],
                      os.path.join(d, f"{tag}_s{i}.log"))
            with h5py.File(h5, "r") as f:
                for k in run_kinds:
                    g = f["collective/" + k]
                    # rounds: of MPICH's algorithm for the size, as the model counts them (the bench writes them)
                    # one entry per (chunk, compute) case, in the same order in every sample
                    for j, (chunk, sh, ex, rounds, wk) in enumerate(zip(g["chunk_bytes"][:], g["cpu_share"][:], g["excess_seconds"][:],
                                                                        g["rounds"][:], g["work_cpu_seconds"][:])):
                        c = per_case.setdefault((k, j), dict(chunk=float(chunk), share=[], excess=[], rounds=int(rounds), work=[]))
                        c["share"].append(float(sh)), c["excess"].append(float(ex)), c["work"].append(float(wk))
        for (k, _), c in per_case.items():
            chunk, s, ex, rounds = c["chunk"], float(np.median(c["share"])), float(np.median(c["excess"])), c["rounds"]
            wk = float(np.median(c["work"]))
            moved = chunk * (G - 1) * (2 if k == "all_reduce" else 1)
            x = rounds * max(0.0, 1.0 / min(1.0, s) - 1.0)
            if calls == 1:
                y = ex - (alpha + moved / beta)
                w = "nap" if k in NAP_KINDS else "spin" if G == P else "spin_fit"
                if G == P:
                    first.setdefault((P, k, chunk), []).append((wk, ex))
            else:  # the second call of the pair: the pair's excess less the single call's after the same compute
                single = min(first[(P, k, chunk)], key=lambda we: abs(we[0] - wk))
                y = ex - single[1] - (alpha + moved / beta)
                w = "follow"
                wk = 0.0  # right after the first call
            xs[w].append(x), ys[w].append(y), ps[w].append(P), ws[w].append(wk)
            rows.append((P, k, chunk, s, x, ex, y, rounds, spread(c["excess"]), c["excess"], G, calls, wk))

    def fit(x, y):
        return max(0.0, float((x * y).sum() / (x * x).sum())) if (x * x).sum() > 0 else 0.0

    def gain(W, w0):  # the share of the saturated wait after W seconds of compute (Cluster::wait_fraction)
        return np.ones_like(W) if w0 is None else 1.0 - np.exp(-W / w0)

    def taus(sel_p, w0):
        """Per class: tau by least squares over the points at the rank counts sel_p
        (a boolean mask per class), the wait scaled by gain(W, w0); the relative residual."""
        tau, sse = {}, 0.0
        for w in xs:
            x, y, W = np.array(xs[w]), np.array(ys[w]), np.array(ws[w])
            sel = sel_p(np.array(ps[w]))
            if not sel.any():
                continue
            # a call right after another is measured as such (W = 0): not scaled
            xg = x[sel] * (gain(W[sel], w0) if w != "follow" else 1.0)
            tau[w] = fit(xg, y[sel])
            if w != "follow":  # residuals relative to the class's scale
                sse += float((((y[sel] - tau[w] * xg) / max(1e-6, float(np.abs(y[sel]).max()))) ** 2).sum())
        return tau, sse

    # host.wait_work_ms per rank count: the time constant with the least
    # relative residual over a grid (None: no dependence on the compute; at 8
    # ranks on 2 cores the wait is whole after 1 ms already), then each class's
    # tau at that P alone. One constant over all the rank counts is pulled to
    # the largest P, where 1/s - 1 is largest (the all-reduce's 0.98 ms at 4
    # ranks against 2.3 ms at 8 on 2 cores).
    grid = [None] + list(np.geomspace(2e-4, 5e-2, 48))
    tau_at = {w: [] for w in xs}
    work_at = []
    for P in WAIT_RANKS:
        at = lambda p, P=P: p == P  # noqa: E731
        best = min(grid, key=lambda w0: taus(at, w0)[1])
        t, _ = taus(at, best)
        work_at.append(0.0 if best is None else float(best))
        for w in xs:
            tau_at[w].append(t.get(w, float("nan")))
    # pooled over every P (the file's comment, and the one value where no
    # rank count passes the cores), with the median time constant
    pooled_w0 = float(np.median(work_at)) if work_at and min(work_at) > 0 else None
    tau, _ = taus(lambda p: np.ones_like(p, dtype=bool), pooled_w0)
    for w in xs:
        tau_at[w] = [tau.get(w, 0.0) if np.isnan(v) else v for v in tau_at[w]]  # a class not measured at that P: pooled
    return tau, tau_at, work_at, rows


TILE_SEQ = 512      # bench attention tile costs: the block size (the sparse runs' 2048 / 4 ranks; the calls' tiles are 32 x 32)
TILE_REPEATS = 9


def tile_costs(d):
    """The host kernel's costs beyond whole tiles' arithmetic, per (tile, head),
    forward and backward: `burst bench attention --set bench.tile_costs=true`
    (one rank, CPU clock; src/cli/bench_tiles.cpp), median of SAMPLES runs per
    configuration. mask = a whole tile under the general position mask less one
    without a mask (the per-tile bound and all-visible checks); partial_<kind>
    = a partly visible tile of that mask less a whole one under the general mask
    (the element mask); causal_diag = a diagonal tile of the plain causal mask
    (the calibration's block) less an unmasked whole one; the all-skipped calls at s = TILE_SEQ/8 .. TILE_SEQ
    (queries = keys = s) fitted as a + b s + c s^2: call = a, row = b / (2
    heads) per (query + key row, head), skip = c * tile^2 / heads per skipped
    (tile, head). Every constant >= 0 (a negative difference: 0, said in the log)."""
    raw = {}
    meta = {}
    for i in range(SAMPLES):
        h5 = os.path.join(d, f"tiles_s{i}.h5")
        C.mpiexec(1, ["bench", "attention", "--set", "bench.tile_costs=true", "--set", f"bench.heads={HEADS}",
                      "--set", f"bench.kv_heads={KVH}", "--set", f"bench.head_dim={D}", "--set", f"bench.repeats={TILE_REPEATS}",
                      "--set", f"bench.seq=[{TILE_SEQ}]", "--output", h5], os.path.join(d, f"tiles_s{i}.log"))
        with h5py.File(h5, "r") as f:
            tile = int(f.attrs["tile_rows"])
            for name, g in f["tiles"].items():
                a = g.attrs
                raw.setdefault(name, []).append((float(a["fwd_cpu_s"]), float(a["bwd_cpu_s"])))
                meta[name] = dict(seq=int(a["seq"]), tiles=int(a["whole_tiles"] + a["partial_tiles"] + a["skipped_tiles"]),
                                  whole=int(a["whole_tiles"]), partial=int(a["partial_tiles"]), skipped=int(a["skipped_tiles"]))
    med = {k: (float(np.median([x[0] for x in v])), float(np.median([x[1] for x in v]))) for k, v in raw.items()}
    sp = {k: (spread([x[0] for x in v]), spread([x[1] for x in v])) for k, v in raw.items()}
    per_tile = {k: (med[k][0] / meta[k]["tiles"], med[k][1] / meta[k]["tiles"]) for k in med}
    out = {}
    for j, pas in enumerate(("fwd", "bwd")):
        c = {}
        c["mask"] = per_tile["general_whole"][j] - per_tile["none"][j]
        for kind in ("causal", "window", "document"):
            c["partial_" + kind] = per_tile["partial_" + kind][j] - per_tile["general_whole"][j]
        ck, none = meta["causal_kind"], per_tile["none"][j]
        c["causal_diag"] = (med["causal_kind"][j] - ck["whole"] * none) / ck["partial"] - none
        skips = sorted((meta[k]["seq"], med[k][j]) for k in med if k.startswith("skip_"))
        s_ = np.array([x[0] for x in skips], dtype=float)
        t_ = np.array([x[1] for x in skips])
        A = np.vstack([np.ones_like(s_), s_, s_ * s_]).T
        (a, b, cc), *_ = np.linalg.lstsq(A, t_, rcond=None)
        c["call"], c["row"], c["skip"] = float(a), float(b) / (2 * HEADS), float(cc) * tile * tile / HEADS
        c["raw"] = {k: c[k] for k in c}
        for k in list(c):
            if k != "raw":
                c[k] = max(0.0, float(c[k]))
        out[pas] = c
    out["per_tile"], out["median"], out["spread"], out["meta"] = per_tile, med, sp, meta
    return out


RING_RANKS = 4  # the sparse, attention and most training runs' rank count
RING_CHUNKS = [65536, 262144, 524288, 1048576]  # bytes per transfer: the runs' K,V and Q,dO blocks span 0.1-1 MiB


def ring_round_cpu(d):
    """A rank's CPU time per ring round beyond its compute: `burst bench
    collective` kind ring (send to the next rank, receive from the previous,
    posted before a spin of compute and completed by wait_all_bounded after
    it, as the ring executor) at RING_RANKS ranks sharing the cores, per
    RING_CHUNKS chunk and 1 / 3 ms of compute: the CPU seconds per iteration
    with the round less without it (extra_cpu_seconds), median of SAMPLES
    runs per case, fitted as a + b bytes (least squares, each >= 0)."""
    per_case = {}
    for i in range(SAMPLES):
        h5 = os.path.join(d, f"ring_round_np{RING_RANKS}_s{i}.h5")
        C.mpiexec(RING_RANKS, ["bench", "collective", "--set", "bench.kinds=[\"ring\"]",
                               "--set", f"bench.chunk_bytes={RING_CHUNKS}".replace(" ", ""), "--set", "bench.work_us=[1000,3000]",
                               "--set", "bench.iterations=10", "--set", "bench.rounds=3", "--output", h5],
                  os.path.join(d, f"ring_round_np{RING_RANKS}_s{i}.log"))
        with h5py.File(h5, "r") as f:
            g = f["collective/ring"]
            for k, (chunk, x) in enumerate(zip(g["chunk_bytes"][:], g["extra_cpu_seconds"][:])):
                per_case.setdefault(k, dict(chunk=float(chunk), cpu=[]))["cpu"].append(float(x))
    xs = np.array([c["chunk"] for c in per_case.values()])
    ys = np.array([float(np.median(c["cpu"])) for c in per_case.values()])
    A = np.vstack([np.ones_like(xs), xs]).T
    (a, b), *_ = np.linalg.lstsq(A, ys, rcond=None)
    if b < 0:
        a, b = float(np.mean(ys)), 0.0
    elif a < 0:
        a, b = 0.0, float(np.dot(xs, ys) / np.dot(xs, xs))
    return dict(a=max(0.0, float(a)), b=max(0.0, float(b)), chunks=xs, cpu=ys,
                spread=[spread(c["cpu"]) for c in per_case.values()], samples=[c["cpu"] for c in per_case.values()])


ALLGATHER_LOCAL_RANKS = (4, 8)  # the all-gather method's local work also at these rank counts (above the cores)
LOCAL_SEQ = 3072  # bench attention comm-only at 2 ranks: a size no experiment runs (they run 1024, 2048, 4096)


def comm_only_runs(d, P, methods, hp=None):
    """(method, comm-only seconds, CPU share) of every case of SAMPLES
    `burst bench attention` runs at P ranks, LOCAL_SEQ tokens."""
    rows = []
    for i in range(SAMPLES):
        h5 = os.path.join(d, f"local_np{P}_S{LOCAL_SEQ}_s{i}.h5")
        C.mpiexec(P, ["bench", "attention", "--set", f"bench.heads={HEADS}", "--set", f"bench.kv_heads={KVH}",
                      "--set", f"bench.head_dim={D}", "--set", "bench.repeats=5", "--set", "bench.warmup=1"]
                  + (["--set", f"bench.hp={hp}"] if hp else [])
                  + ["--set", "bench.methods=[" + ",".join(f'"{m}"' for m in methods) + "]",
                     "--set", f"bench.seq=[{LOCAL_SEQ}]", "--output", h5], os.path.join(d, f"local_np{P}_S{LOCAL_SEQ}_s{i}.log"))
        with h5py.File(h5, "r") as f:
            cases = []
            f.visititems(lambda n, o: cases.append(n) if isinstance(o, h5py.Group) and "comm_s_median" in o.attrs else None)
            for cname in cases:
                a = f[cname].attrs
                m = a["method"].decode() if isinstance(a["method"], bytes) else str(a["method"])
                share = min(1.0, float(a["cpu_share"])) if "cpu_share" in a else 1.0
                rows.append((m, float(a["comm_s_median"]), share))
    return rows


def collective_local_work(d, alpha, beta, eff):
    """CPU seconds per byte of the local memory work around the engine's
    blocking collectives: `burst bench attention` at 2 ranks, LOCAL_SEQ tokens,
    the comm-only run (every transfer and its copies, no attention math) of
    Ulysses (seq_to_heads / heads_to_seq: fresh buffers, pack / unpack, MPI's
    shared-memory copies, the head-layout state) and of the all-gather method
    (fresh gathered K, V; zero-filled dK, dV reduce-scattered), less the
    alpha-beta time of the bytes that cross to the peer (priced separately),
    over the bytes of the tensors the collectives fill (the same bytes as
    src/perf's host.*_local terms). Median of SAMPLES runs. Each value is
    (median, spread, raw comm-only seconds); "allgather_at" holds one per
    rank count (P, median, spread, raw), its first the 2-rank "allgather"."""
    P, S = 2, LOCAL_SEQ
    s, nd, kvd, e = S / P, HEADS * D, KVH * D, 4.0
    uly_bytes = (s * (nd + 2 * kvd) * e + s * nd * 4 + s * HEADS * 4) + (s * nd * e + s * (nd + 2 * kvd) * 4)
    ag_bytes = 2 * S * kvd * e + (2 * S * kvd * e + 2 * S * kvd * 4)
    # The all-gather method also at each of ALLGATHER_LOCAL_RANKS: above the
    # cores its comm-only run holds the members' turns on the shared cores
    # between its back-to-back calls as well (the model then charges those
    # calls no follow wait: Cluster::allgather_local_holds_follows).
    rows = {Pn: comm_only_runs(d, Pn, ["ulysses", "allgather"] if Pn == P else ["allgather"], hp=P if Pn == P else None)
            for Pn in (P,) + tuple(ALLGATHER_LOCAL_RANKS)}
    # Ulysses: 9 collectives per forward + backward, half its bytes to the peer.
    uly = [(t, sh) for m, t, sh in rows[P] if m == "ulysses"]
    uly_raw = [t for t, _ in uly]
    uly_per = [max(0.0, t * sh - (9 * alpha + uly_bytes / 2 / beta)) / uly_bytes for t, sh in uly]
    out = {"ulysses": (float(np.median(uly_per)), spread(uly_raw), uly_raw)}

    # Each all-gather value inverts what the model charges the method's
    # comm-only pass at Pn ranks (src/perf/attention.cpp, allgather): its
    # three alpha-beta calls (K,V gathered forward and backward, dK,dV
    # reduce-scattered) in wall time, plus the local work / f with f = share x
    # concurrency efficiency (Cluster::shared_by): value = (t - alpha-beta) f / bytes.
    def ag_value(t, Pn, share):
        sn = S / Pn
        ab = 3 * alpha + (Pn - 1) * (4 * sn * kvd * e + 2 * sn * kvd * 4) / beta
        return max(0.0, t - ab) * share * eff.get(Pn, 1.0) / ag_bytes
    at = []
    for Pn, runs in rows.items():
        ag = [(t, sh) for m, t, sh in runs if m == "allgather"]
        raw = [t for t, _ in ag]
        at.append((Pn, float(np.median([ag_value(t, Pn, sh) for t, sh in ag])), spread(raw), raw))
    out["allgather"] = at[0][1:]
    out["allgather_at"] = at
    return out


def bench_layer(d, tokens, ranks, tag):
    """`burst bench layer` at the model's widths, float, `tokens` tokens, as
    `ranks` independent copies at once; rank 0's numbers, timed in CPU
    seconds of the process (bench.clock = cpu: on this shared host the wall
    time of each phase holds whatever the scheduler gave to other processes,
    and the block's rest is a difference of phases timed at different moments)."""
    h5 = os.path.join(d, f"layer_{tag}.h5")
    C.mpiexec(ranks, C.block_bench_args(tokens, REPEATS) + ["--output", h5], os.path.join(d, f"layer_{tag}.log"))
    with h5py.File(h5, "r") as f:
        a = f.attrs
        names = a["phase_names"]
        names = (names.decode() if isinstance(names, bytes) else names).split(";")
        ph = dict(zip(names, f["phases/seconds"][:]))
        return dict(tokens=tokens, ranks=ranks, fb=float(a["median_fwd_bwd_s"]), f=float(a["median_fwd_s"]),
                    share=min(1.0, float(a["cpu_share"])), share_phases=min(1.0, float(a["cpu_share_phases"])),
                    flops_fwd=float(a["flops_fwd"]), **{k: float(v) for k, v in ph.items()})


def nonneg_lstsq(A, y):
    """Least squares with every coefficient >= 0, exact for a few columns:
    the best of the unconstrained fits over every subset of the columns whose
    coefficients all come out >= 0 (the others 0)."""
    import itertools
    n = A.shape[1]
    best, best_x = None, np.zeros(n)
    for k in range(1, n + 1):
        for cols in itertools.combinations(range(n), k):
            x, *_ = np.linalg.lstsq(A[:, cols], y, rcond=None)
            if (x < 0).any():
                continue
            res = float(np.sum((A[:, cols] @ x - y) ** 2))
            if best is None or res < best:
                best, best_x = res, np.zeros(n)
                best_x[list(cols)] = x
    return [float(v) for v in best_x]


def layer_terms(d):
    """One rank: GEMM rate at the block's shapes, the rest as a + b t.
    P copies: CPU seconds per block against one copy (concurrency).
    Each point is the median of SAMPLES runs, taken in interleaved rounds
    (every size and copy count once per round)."""
    raw_one = {t: [] for t in LAYER_SEQ}
    raw_conc = {P: [] for P in CONC_RANKS}
    for i in range(SAMPLES):
        for t in LAYER_SEQ:
            raw_one[t].append(bench_layer(d, t, 1, f"np1_t{t}_s{i}"))
        for P in CONC_RANKS:
            raw_conc[P].append(bench_layer(d, CONC_SEQ, P, f"np{P}_t{CONC_SEQ}_s{i}"))
    one = [median_of(raw_one[t]) for t in LAYER_SEQ]
    # the phase times are CPU seconds of the process (bench.clock = cpu)
    gemm_rates = [3 * C.block_gemm_flops_fwd(r["tokens"], HIDDEN, HEADS, KVH, D, FFN) / (r["gemm_fwd"] + r["gemm_bwd"])
                  for r in one]
    gemm_rate = float(np.median(gemm_rates))
    t = np.array([r["tokens"] for r in one], dtype=float)
    rest = np.array([r["rest_fwd"] + r["rest_bwd"] for r in one])
    # The rest grows faster than the tokens (measured: ~4, 8, 29, 73 CPU-ms at 256-2048): a part of it
    # scales with the attention's pairs (mask and tile-visibility work around the kernel calls). Least
    # squares a + b t + c t^2: a -> per-layer overhead, b -> elementwise passes, c t^2 -> the attention term
    # (per visible pair of the causal block, t^2 / 2 of them), added to the attention timings below.
    # Least squares under a, b, c >= 0 (each term is a cost). The free fit
    # clamped afterwards (the earlier way) was biased: on 2026-12-08 a noisy
    # sample gave a = -1.27 ms and c < 0, and a raised to 0 with the free fit's
    # slope kept over-predicted the rest by 17-70% (the one-rank 512-token step
    # +24%).
    A = np.vstack([np.ones_like(t), t, t * t]).T
    a, b, c = nonneg_lstsq(A, rest)
    base = next(r for r in one if r["tokens"] == CONC_SEQ)
    cpu1 = base["fb"]
    conc = []
    for P in CONC_RANKS:
        r = median_of(raw_conc[P])
        conc.append(dict(r, eff=cpu1 / r["fb"]))
    # spreads (max / min over the samples) of each point's measured quantities
    sp = {"fb": [spread([x["fb"] for x in r["samples"]]) for r in one],
          "attention": [spread([x["attention_fwd"] + x["attention_bwd"] for x in r["samples"]]) for r in one],
          "gemm": [spread([x["gemm_fwd"] + x["gemm_bwd"] for x in r["samples"]]) for r in one],
          "rest": [spread([x["rest_fwd"] + x["rest_bwd"] for x in r["samples"]]) for r in one],
          "conc_fb": [spread([x["fb"] for x in r["samples"]]) for r in conc]}
    return dict(one=one, gemm_rates=gemm_rates, gemm_rate=gemm_rate, rest=rest, rest_a=float(a), rest_b=float(b), rest_c=c,
                conc=conc, spread=sp)


def mem_bandwidth():
    a = np.ones(8 << 20, dtype=np.float64)  # 64 MiB
    b = np.empty_like(a)
    np.copyto(b, a)  # first touch of b (page faults) outside the timed copies
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        np.copyto(b, a)
        ts.append(time.perf_counter() - t)
    return 2 * a.nbytes / sorted(ts)[len(ts) // 2], spread(ts)  # read + write; max / min of the 7 copies


def one_rank_step(d, seq, sample=0):
    """One-rank train steps of the model at `seq` tokens (whole, fused loss,
    as the runs): median step seconds after the first and its CPU share."""
    import tomllib
    with open(os.path.join(C.CONFIGS, "exp_main.toml"), "rb") as f:
        keys = C.flatten(tomllib.load(f)["train"])
    log_h5 = os.path.join(d, f"one_rank_step_S{seq}_s{sample}.h5")
    if os.path.exists(log_h5):
        os.remove(log_h5)
    model = os.path.join(C.ROOT, keys["model.config"])
    keys.update({"model.config": model, "train.seq_len": seq, "train.steps": STEPS, "parallel.cp": 1, "train.batch": 1,
                 "io.run_log": log_h5})
    C.mpiexec(1, ["train"] + C.set_args(keys), os.path.join(d, f"one_rank_step_S{seq}_s{sample}.log"))
    share = min(1.0, C.last_cpu_share)
    with h5py.File(log_h5, "r") as f:
        step_s = float(np.median(f["log/seconds"][1:]))
        if "log/cpu_seconds" in f:  # the timed steps' own CPU share
            share = min(1.0, float(np.median(f["log/cpu_seconds"][1:] / f["log/seconds"][1:])))
    return model, keys, step_s, share


def fit_overhead(x, y, scale):
    """The line a + b x through residuals y at sizes x, both terms >= 0,
    least squares in RELATIVE terms (each row divided by its step's own time
    `scale`): the runs' predictions are judged by their relative error, and
    the short steps, whose absolute noise is small, then set the intercept
    instead of an extrapolation from the long ones (with two points, 1K and
    2K tokens, 3% of noise in the 2K step moved the intercept by 9 ms, the
    whole step of the smallest runs). When the line's intercept (slope)
    comes out negative, refit with the slope (intercept) alone instead of
    clamping one coefficient and keeping the other, which over-predicts the
    ends."""
    x, y, w = (np.asarray(v, dtype=float) for v in (x, y, scale))
    if len(x) == 0 or len(x) != len(y) or len(x) != len(w) or not np.all(w > 0) or not np.all(np.isfinite(y)):
        raise ValueError("fit_overhead: needs as many finite residuals as sizes and positive step times")
    w = 1.0 / w
    A = np.vstack([w, x * w]).T
    (a, b), *_ = np.linalg.lstsq(A, y * w, rcond=None)
    if a < 0 or b < 0:
        only_b = max(0.0, float(np.dot(x * w, y * w) / np.dot(x * w, x * w)))
        only_a = max(0.0, float(np.dot(w, y * w) / np.dot(w, w)))
        if a < 0 and b < 0:
            a, b = 0.0, 0.0
        elif a < 0:
            a, b = 0.0, only_b
        else:
            a, b = only_a, 0.0
    return float(a), float(b)


def step_overhead(d):
    """What one-rank steps at STEP_SEQ leave unexplained by the model with
    every other term (cluster and calibration already written), in CPU
    seconds: a line a + b tokens."""
    pts = []
    raw = {seq: [] for seq in STEP_SEQ}
    for i in range(SAMPLES):  # interleaved rounds, as the kernel points
        for seq in STEP_SEQ:
            raw[seq].append(one_rank_step(d, seq, i))
    for seq in STEP_SEQ:
        model, keys = raw[seq][0][0], raw[seq][0][1]
        samples = [x[2] for x in raw[seq]]
        step_s, share = float(np.median(samples)), float(np.median([x[3] for x in raw[seq]]))
        ph5 = os.path.join(d, f"one_rank_pred_S{seq}.h5")
        C.simulate(["--model", model, "--seq", str(seq), "--gpus", "1", "--gpus-per-node", "1", "--zero", "0",
                    "--offload", "off", "--policy", keys["train.activation"], "--fused-loss", "on", "--host-cores", "1"], ph5,
                   cluster=os.path.join(d, "cpu.toml"), calibration=os.path.join(d, "cpu_calibration.toml"))
        with h5py.File(ph5, "r") as f:
            pred = float(f["run"].attrs["t_total"])  # at one full core: CPU seconds
        pts.append(dict(seq=seq, step_s=step_s, share=share, cpu_s=step_s * share, model_s=pred,
                        residual=step_s * share - pred, samples=samples, spread=spread(samples)))
    x = np.array([p["seq"] for p in pts], dtype=float)
    y = np.array([p["residual"] for p in pts])
    a, b = fit_overhead(x, y, np.array([p["cpu_s"] for p in pts]))
    return float(a), float(b), pts


PUBLISHED_LAST = ("cpu_calibration.toml", "calibration.h5", "cpu.toml")  # the descriptions the runners read


def publish(stage, final):
    """Move every file of the finished calibration from the staging directory into `final` (the earlier
    calibration's files of the same names replaced; the descriptions last), with SIGINT / SIGTERM held
    off meanwhile so that an interrupt never leaves half of each."""
    os.makedirs(final, exist_ok=True)
    names = sorted(os.listdir(stage), key=lambda n: (n in PUBLISHED_LAST, PUBLISHED_LAST.index(n) if n in PUBLISHED_LAST else 0, n))
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for n in names:
            os.replace(os.path.join(stage, n), os.path.join(final, n))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def main():
    """Measure into a staging directory (results/work/calibration.staging.<pid>) and move the files over
    results/calibration/ only when everything was measured: a failed or interrupted calibration leaves
    the earlier one exactly as it was."""
    final = os.path.join(C.results_dir(), "calibration")
    if os.path.exists(final) and not os.path.isdir(final):
        C.die(f"{final}: exists and is not a directory")
    C.require_mpiexec()
    C.burst_bin()
    stage = os.path.join(C.results_dir(), "work", f"calibration.staging.{os.getpid()}")
    try:
        os.makedirs(stage)
        measure(stage, final)
    except C.Interrupted as e:
        e.exit(f"{final} was left as it was")
    except C.CommandFailed as e:  # a benchmark command failed: its error lines, no traceback
        e.report()
        print(f"{C.prog()}: {final} was left as it was", file=sys.stderr)
        sys.exit(1)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def measure(d, final):
    cores = C.host_cores()
    t_start = time.time()
    waited = C.wait_for_quiet()
    if waited > 1.5:
        print(f"waited {waited:.0f} s for other processes to use at most {C.FOREIGN_MAX:.2f} of the cores", flush=True)
    load_start = os.getloadavg()

    # Rates per CPU-second: the machine is shared with other jobs, so each
    # benchmark's time is multiplied by the CPU share its process got (CPU
    # time / wall, from the kernel's accounting); each run's prediction then
    # uses the cores that run got (run_experiment.py).
    bw, bw_spread = mem_bandwidth()
    lay = layer_terms(d)
    gemm_rate = lay["gemm_rate"]
    # rest of the block = a + b t CPU-seconds: b in passes over (h + ffn) float... in the model's unit,
    # "bf16 passes over (hidden + ffn) values per token" at the copy bandwidth: 2 (h + ffn) bytes per pass per token
    passes = max(0.0, lay["rest_b"] * bw / (2 * (HIDDEN + FFN)))
    layer_over = max(0.0, lay["rest_a"])

    # attention: the block's own causal attention (LocalAttention: the kernel every ring round calls), timed
    # alone in bench layer in CPU seconds, forward and backward (rowsum + flash backward)
    seq = np.array([r["tokens"] for r in lay["one"]], dtype=float)
    quad = lay["rest_c"] * seq ** 2  # the rest's pair-proportional part, split as the attention's work (1 : 2.5)
    tf = np.array([r["attention_fwd"] for r in lay["one"]]) + quad / 3.5
    tb = np.array([r["attention_bwd"] for r in lay["one"]]) + quad * 2.5 / 3.5
    point_share = np.ones(len(seq))  # CPU-clock timings
    share_attn = 1.0
    F = 4 * seq ** 2 / 2 * HEADS * D
    comb = 3.5 * F / (tf + tb) / point_share
    # 1 / rate = 1 / r_inf + (t0 / r_inf) / t: a straight line in 1/t.
    A = np.vstack([np.ones_like(seq), 1 / seq]).T
    (a0, a1), *_ = np.linalg.lstsq(A, 1 / comb, rcond=None)
    r_inf, t0 = 1 / a0, max(0.0, a1 / a0)
    fwd_over_bwd = float(np.median((F / tf) / (2.5 * F / tb)))

    # per-sample combined attention rate at each point (spread only; the point itself is from the medians above)
    comb_samples = np.array([[3.5 * Fi / (x["attention_fwd"] + x["attention_bwd"] + qi) for x in r["samples"]]
                             for r, Fi, qi in zip(lay["one"], F, quad)])
    attn_spread = [spread(c) for c in comb_samples]

    alphas, betas = [], []
    for i in range(SAMPLES):
        p_h5 = os.path.join(d, f"pingpong_s{i}.h5")
        C.mpiexec(2, ["bench", "pingpong", "--output", p_h5], os.path.join(d, f"pingpong_s{i}.log"))
        with h5py.File(p_h5, "r") as f:
            alphas.append(float(f.attrs["alpha_s"])), betas.append(float(f.attrs["beta_bytes_per_s"]))
    betas = [b for b in betas if np.isfinite(b)]  # NaN: a sample whose largest message was not slower (bench pingpong)
    if not betas:
        raise SystemExit(f"calibrate_cpu: no pingpong sample fitted a bandwidth (logs in {d})")
    alpha, beta = float(np.median(alphas)), float(np.median(betas))

    tiles = tile_costs(d)
    tf_, tb_ = tiles["fwd"], tiles["bwd"]
    tile_pair = lambda k, unit: f"[{tf_[k] * unit:.4g}, {tb_[k] * unit:.4g}]"  # noqa: E731
    tile_note = ", ".join(f"{k} {tiles['median'][k][0] * 1e3:.2f} / {tiles['median'][k][1] * 1e3:.2f}"
                          for k in ("none", "general_whole", "partial_causal", "partial_window", "partial_document"))
    skip_note = ", ".join(f"{tiles['meta'][k]['seq']}: {tiles['median'][k][0] * 1e3:.3f} / {tiles['median'][k][1] * 1e3:.3f}"
                          for k in sorted((k for k in tiles["median"] if k.startswith("skip_")), key=lambda k: tiles["meta"][k]["seq"]))
    ring = ring_round_cpu(d)
    ring_note = ", ".join(f"{int(x) // 1024} KiB {y * 1e3:.3f}" for x, y in zip(ring["chunks"], ring["cpu"]))
    tau, tau_at, work_at, coll_rows = collective_waits(d, alpha, beta)
    wait_work_line = ("wait_work_ms = [" + ", ".join(f"{v * 1e3:.4g}" for v in work_at) + "]   # measured: the waits above are the "
                      f"saturated ones; after W of compute per rank a call waits 1 - exp(-W / wait_work) of it (single calls after "
                      f"{WAIT_WORK_US} us of compute, per P the time constant of least relative residual; 0: whole after any)\n"
                      if WAIT_RANKS else "")
    # per rank count when the runs pass the cores (host.wait_ranks), else the one pooled value
    wait_val = (lambda w: "[" + ", ".join(f"{v * 1e3:.4g}" for v in tau_at[w]) + "]") if WAIT_RANKS else (  # noqa: E731
        lambda w: f"{tau[w] * 1e3:.4g}")
    wait_ranks_line = (f"wait_ranks = [{', '.join(str(P) for P in WAIT_RANKS)}]   # the rank counts of the wait constants below "
                       f"(each fitted at its P alone; pooled over P: blocking {tau['spin'] * 1e3:.3g}, all-reduce "
                       f"{tau['nap'] * 1e3:.3g}, right after another {tau['follow'] * 1e3:.3g}, groups that fit "
                       f"{tau['spin_fit'] * 1e3:.3g} ms)\n") if WAIT_RANKS else ""
    local = collective_local_work(d, alpha, beta, {c["ranks"]: c["eff"] for c in lay["conc"]})

    conc = lay["conc"]
    gemm_txt = ", ".join(f"{g / 1e9:.1f}" for g in lay["gemm_rates"])
    sp = lay["spread"]
    fmt_sp = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    rest_txt = ", ".join(f"{r * 1e3:.2f}" for r in lay["rest"])

    def write_cluster(step_a, step_b, note):
        text = f"""# THIS machine (the CPU the experiments run on), written by experiments/runners/calibrate_cpu.py
# at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} from microbenchmarks run just before, one thread per rank.
# "gpu" = one MPI rank; every rank of a run shares host.cores cores. Load average at the start {load_start[0]:.2f}.
# Every measured point: the median of {SAMPLES} independent samples; spread = max / min over them (1 = identical).
name = "cpu"

[node]
gpus = 8                  # ranks per "node": the whole host (runs override with --gpus-per-node)
ib_hcas = 8               # one host: "inter-node" links are the same shared memory as intra-node

[gpu]
peak_bf16_tflops = {gemm_rate / 1e12:.6g}   # measured: bench layer float, the block's 7 fwd + 14 bwd GEMMs at t = {LAYER_SEQ}: {gemm_txt} GFLOP/s per CPU-second (median)
gemm_fraction = 1.0
# spread of the GEMM time per point: {fmt_sp(sp["gemm"])}
hbm_tb_per_s = {bw / 1e12:.6g}     # measured: 64 MiB copy, read + write (median of 7, spread {bw_spread:.2f})
memory_gib = 16

[attention]
rate_inf_tflops = {r_inf / 1e12:.6g}   # measured fit: bench layer's attention ({HEADS}x{D} causal) at t = {LAYER_SEQ}, CPU clock: {', '.join(f'{c / 1e9:.1f}' for c in comb)} GFLOP/s
t0_tokens = {t0:.6g}
fwd_over_bwd = {fwd_over_bwd:.4g}    # measured: median fwd / bwd rate (2.5x convention)
# the measured combined rates themselves: the model interpolates them in log t and holds them beyond the ends
# (the host kernel's rate is not monotonic in t: it peaks where K/V leave the caches), so rate_inf / t0 are unused
rate_points_tokens = [{', '.join(str(int(t)) for t in seq)}]
rate_points_tflops = [{', '.join(f'{c / 1e12:.6g}' for c in comb)}]
# spread of the rate per point: {fmt_sp(attn_spread)}

[links]
efficiency = 1.0
nvlink_gb_per_s = {beta / 1e9:.6g}   # measured: bench pingpong, largest message beyond alpha
nvlink_latency_us = {alpha * 1e6:.4g}  # measured: bench pingpong alpha (spreads: alpha {spread(alphas):.2f}, beta {spread(betas):.2f})
ib_hca_gbit_per_s = {beta * 8 / 1e9:.6g}
ib_latency_us = {alpha * 1e6:.4g}
pcie_gb_per_s = {bw / 2 / 1e9:.6g}
pcie_latency_us = 0

[host]
memory_gb_per_s = {bw / 1e9:.6g}
cores = {cores}                 # ranks of a run share these cores (one OpenMP thread each); runs pass --host-cores = the cores they got
binding = "{C.binding()}"   # the runners' mpiexec: rank r bound to core r mod cores (common.mpiexec), or placed by the kernel
{wait_ranks_line}collective_wait_ms = {wait_val("spin")}   # measured: bench collective at P = {COLL_RANKS}, all-to-all/all-gather/reduce-scatter: wait per round of MPICH's algorithm / (1/s - 1), least squares
element_bytes = 4               # the host build moves float tensors
nap_wait_ms = {wait_val("nap")}          # measured: the same for the trainer's all-reduce (per call)
collective_wait_follow_ms = {wait_val("follow")}   # measured: the blocking kinds over all the ranks at P = {FOLLOW_RANKS}, two calls back to back (bench.calls = 2): the second call's wait, the same fit
collective_wait_fit_ms = {wait_val("spin_fit")}   # measured: the blocking kinds within groups of {FIT_GROUP} (which fit on the cores) at P = {FIT_RANKS}, {FIT_WORK_US} us of compute between calls, the same fit
{wait_work_line}# measured: bench layer at t = {CONC_SEQ} as P copies at once: CPU seconds per block alone / at P (shares {', '.join(f'{c["share"]:.2f}' for c in conc)})
# spread of the block's CPU time: one copy at t = {CONC_SEQ} {sp["fb"][LAYER_SEQ.index(CONC_SEQ)]:.2f}, P copies {fmt_sp(sp["conc_fb"])}
concurrency_ranks = [{', '.join(str(c["ranks"]) for c in conc)}]
concurrency_efficiency = [{', '.join(f'{c["eff"]:.4f}' for c in conc)}]
a2a_local_ns_per_byte = {local["ulysses"][0] * 1e9:.4g}   # measured: bench attention, 2 ranks, {LOCAL_SEQ} tokens, Ulysses comm-only (no math) {', '.join(f'{x * 1e3:.2f}' for x in local["ulysses"][2])} ms (spread {local["ulysses"][1]:.2f}) less alpha-beta, per byte of the tensors converted
allgather_local_ranks = [{', '.join(str(r[0]) for r in local["allgather_at"])}]
allgather_local_ns_per_byte = [{', '.join(f"{r[1] * 1e9:.4g}" for r in local["allgather_at"])}]   # measured: the same, all-gather method comm-only at P = [{', '.join(str(r[0]) for r in local["allgather_at"])}]: {'; '.join(', '.join(f'{x * 1e3:.2f}' for x in r[3]) for r in local["allgather_at"])} ms (spreads {', '.join(f"{r[2]:.2f}" for r in local["allgather_at"])}) less the model's alpha-beta, x the CPU share x the concurrency efficiency, per byte of gathered K,V and dK,dV accumulators (above the cores: with the members' turns between its calls)
layer_overhead_ms = {layer_over * 1e3:.4g}    # measured: bench layer, one rank: intercept of the block's rest (CPU ms {rest_txt} at t = {LAYER_SEQ}; spreads {fmt_sp(sp["rest"])}) = a + b t + c t^2, c t^2 = {lay["rest_c"] * 1e12:.3g} ps t^2 in the attention rates
# measured: bench attention --set bench.tile_costs=true ({HEADS}x{D}, s = {TILE_SEQ}, tiles 32 x 32, one rank, CPU clock), fwd / bwd CPU ms per call:
# {tile_note}; all-skipped calls at s = {skip_note}
tile_mask_us = {tile_pair("mask", 1e6)}               # per computed (tile, head): general whole less unmasked whole
tile_partial_causal_us = {tile_pair("partial_causal", 1e6)}     # per partly visible (tile, head) beyond a whole one: the diagonal
tile_partial_window_us = {tile_pair("partial_window", 1e6)}     # the window's edge
tile_partial_document_us = {tile_pair("partial_document", 1e6)}   # a document boundary
tile_skip_us = {tile_pair("skip", 1e6)}               # per skipped (tile, head): all-skipped calls a + b s + c s^2, c
call_us = {tile_pair("call", 1e6)}                    # per call: a
call_row_ns = {tile_pair("row", 1e9)}                # per (query + key row, head): b
tile_causal_diag_us = {tile_pair("causal_diag", 1e6)}        # per diagonal (tile, head) of the plain causal mask beyond an unmasked whole one
ring_round_cpu_us = {ring["a"] * 1e6:.4g}          # measured: bench collective ring, {RING_RANKS} ranks, CPU ms per round beyond the compute ({ring_note}; 1 and 3 ms of compute each) = a + b bytes
ring_round_cpu_ns_per_byte = {ring["b"] * 1e9:.4g}
step_overhead_ms = {step_a * 1e3:.4g}     # {note}
step_overhead_us_per_token = {step_b * 1e6:.4g}
"""
        with open(cpath, "w") as f:
            f.write(text)
        return text

    cpath = os.path.join(d, "cpu.toml")
    template = open(os.path.join(C.ROOT, "experiments", "perf_calibration_cpu.toml")).read()
    kpath = os.path.join(d, "cpu_calibration.toml")
    calib = template.replace("@ELEMENTWISE_PASSES@", f"{passes:.4g}   # measured: bench layer, one rank: slope of the block's rest, "
                             f"{lay['rest_b'] * 1e9:.1f} ns per token at {bw / 1e9:.1f} GB/s")
    with open(kpath, "w") as f:
        f.write(calib)
    write_cluster(0.0, 0.0, "(being measured)")
    step_a, step_b, step_pts = step_overhead(d)
    note = ("measured: one-rank train steps at " + ", ".join(f"{p['seq']} tokens {p['cpu_s']:.4f} CPU-s (spread {p['spread']:.2f}; model {p['model_s']:.4f})"
                                                             for p in step_pts) + ": residual = a + b tokens")
    cluster = write_cluster(max(0.0, step_a), max(0.0, step_b), note)

    # the kept attempt of each command: its last; loud = other processes above FOREIGN_MAX of the cores
    kept = {}
    for c in C.call_log:
        kept[c["log"]] = c
    kept_loud = sum(1 for c in kept.values() if not c["quiet"])
    with h5py.File(os.path.join(d, "calibration.h5"), "w") as f:
        C.write_attrs(f, C.machine_attrs())
        f.attrs["load_average_at_end"] = json.dumps(os.getloadavg())
        f["gemm_gflops"] = np.array(lay["gemm_rates"]) / 1e9
        f["gemm_tokens"] = np.array(LAYER_SEQ)
        f["layer_tokens"] = np.array([r["tokens"] for r in lay["one"]], dtype=float)
        f["layer_fwd_bwd_s"] = np.array([r["fb"] for r in lay["one"]])
        f["layer_rest_cpu_s"] = lay["rest"]
        f["layer_cpu_share"] = np.array([r["share"] for r in lay["one"]])
        for k in ("attention_fwd", "attention_bwd", "gemm_fwd", "gemm_bwd", "rest_fwd", "rest_bwd"):
            f["layer_" + k + "_s"] = np.array([r[k] for r in lay["one"]])
        f["concurrency_ranks"] = np.array([1] + [c["ranks"] for c in conc], dtype=float)
        f["concurrency_fwd_bwd_s"] = np.array([next(r["fb"] for r in lay["one"] if r["tokens"] == CONC_SEQ)] + [c["fb"] for c in conc])
        f["concurrency_cpu_share"] = np.array([next(r["share"] for r in lay["one"] if r["tokens"] == CONC_SEQ)] + [c["share"] for c in conc])
        f["concurrency_efficiency"] = np.array([1.0] + [c["eff"] for c in conc])
        f.attrs["layer_overhead_s"] = layer_over
        # the speed probe's reference (common.speed_probe: this same one-rank point, median of the samples)
        f.attrs["probe_fwd_bwd_s"] = next(r["fb"] for r in lay["one"] if r["tokens"] == C.PROBE_TOKENS)
        f.attrs["layer_rest_fit_abc"] = json.dumps([lay["rest_a"], lay["rest_b"], lay["rest_c"]])
        f.attrs["elementwise_passes"] = passes
        f["step_seq"] = np.array(STEP_SEQ, dtype=float)
        f["step_s"] = np.array([p["step_s"] for p in step_pts])
        f["step_cpu_share"] = np.array([p["share"] for p in step_pts])
        f["step_model_s"] = np.array([p["model_s"] for p in step_pts])
        f["step_residual_s"] = np.array([p["residual"] for p in step_pts])
        f.attrs["step_overhead_s"] = step_a
        f.attrs["step_overhead_s_per_token"] = step_b
        f["attention_seq"] = seq
        f["attention_fwd_s"] = tf
        f["attention_bwd_s"] = tb
        f["attention_combined_gflops"] = comb / 1e9
        f["attention_cpu_share"] = point_share
        f["attention_fit_gflops"] = r_inf * seq / (seq + t0) / 1e9
        f.attrs["attn_rate_inf_gflops"] = r_inf / 1e9
        f.attrs["attn_t0_tokens"] = t0
        f.attrs["attn_fwd_over_bwd"] = fwd_over_bwd
        f.attrs["mpi_alpha_s"] = alpha
        f.attrs["mpi_beta_bytes_per_s"] = beta
        f.attrs["mem_bandwidth_bytes_per_s"] = bw
        f.attrs["collective_wait_spin_s"] = tau["spin"]
        f.attrs["collective_wait_nap_s"] = tau["nap"]
        f.attrs["collective_wait_fit_s"] = tau["spin_fit"]
        f.attrs["collective_wait_follow_s"] = tau["follow"]
        f.attrs["wait_ranks"] = np.array(WAIT_RANKS, dtype=float)
        for w, name in (("spin", "spin"), ("nap", "nap"), ("spin_fit", "fit"), ("follow", "follow")):
            f.attrs[f"collective_wait_{name}_s_at_ranks"] = np.array(tau_at[w], dtype=float)
        f["collective_calls"] = np.array([r[11] for r in coll_rows], dtype=float)
        f["collective_group"] = np.array([r[10] for r in coll_rows], dtype=float)
        f["collective_ranks"] = np.array([r[0] for r in coll_rows], dtype=float)
        f["collective_kind"] = np.array([r[1] for r in coll_rows], dtype=h5py.string_dtype())
        f["collective_cpu_share"] = np.array([r[3] for r in coll_rows])
        f["collective_off_core_ratio"] = np.array([r[4] for r in coll_rows])
        f["collective_excess_s"] = np.array([r[5] for r in coll_rows])
        f["collective_wait_s"] = np.array([r[6] for r in coll_rows])
        f["collective_chunk_bytes"] = np.array([r[2] for r in coll_rows])
        f["collective_rounds"] = np.array([r[7] for r in coll_rows], dtype=float)
        f["collective_work_cpu_s"] = np.array([r[12] for r in coll_rows], dtype=float)
        f.attrs["wait_work_s_at_ranks"] = np.array(work_at, dtype=float)
        f.attrs["cores"] = cores
        f.attrs["cpu_share_attention"] = share_attn
        f.attrs["cluster_toml"] = cluster
        f.attrs["calibration_toml"] = calib
        f.attrs["samples_per_point"] = SAMPLES
        # spreads: max / min over each point's samples
        f["layer_fwd_bwd_spread"] = np.array(sp["fb"])
        f["layer_attention_spread"] = np.array(sp["attention"])
        f["layer_gemm_spread"] = np.array(sp["gemm"])
        f["layer_rest_spread"] = np.array(sp["rest"])
        f["layer_fwd_bwd_samples_s"] = np.array([[x["fb"] for x in r["samples"]] for r in lay["one"]])
        f["attention_combined_gflops_samples"] = comb_samples / 1e9
        f["attention_combined_spread"] = np.array(attn_spread)
        f["concurrency_fwd_bwd_spread"] = np.array([sp["fb"][LAYER_SEQ.index(CONC_SEQ)]] + sp["conc_fb"])
        f["concurrency_fwd_bwd_samples_s"] = np.array([[x["fb"] for x in next(r for r in lay["one"] if r["tokens"] == CONC_SEQ)["samples"]]]
                                                      + [[x["fb"] for x in c["samples"]] for c in conc])
        f["step_s_samples"] = np.array([p["samples"] for p in step_pts])
        f["step_spread"] = np.array([p["spread"] for p in step_pts])
        f["mpi_alpha_samples_s"] = np.array(alphas)
        f["mpi_beta_samples_bytes_per_s"] = np.array(betas)
        f.attrs["mpi_alpha_spread"] = spread(alphas)
        f.attrs["mpi_beta_spread"] = spread(betas)
        f.attrs["mem_bandwidth_spread"] = bw_spread
        f["collective_excess_spread"] = np.array([r[8] for r in coll_rows])
        f["collective_excess_samples_s"] = np.array([r[9] for r in coll_rows])
        for pas in ("fwd", "bwd"):
            for k in ("mask", "partial_causal", "partial_window", "partial_document", "skip", "call", "row", "causal_diag"):
                f.attrs[f"tile_{k}_{pas}_s"] = tiles[pas][k]
                f.attrs[f"tile_{k}_{pas}_s_unclamped"] = tiles[pas]["raw"][k]
        f["tile_configs"] = np.array(sorted(tiles["median"]), dtype=h5py.string_dtype())
        f["tile_fwd_bwd_cpu_s"] = np.array([tiles["median"][k] for k in sorted(tiles["median"])])
        f["tile_fwd_bwd_spread"] = np.array([tiles["spread"][k] for k in sorted(tiles["median"])])
        f["tile_counts_whole_partial_skipped"] = np.array([[tiles["meta"][k][x] for x in ("whole", "partial", "skipped")]
                                                          for k in sorted(tiles["median"])], dtype=float)
        f.attrs["ring_round_cpu_s"] = ring["a"]
        f.attrs["ring_round_cpu_s_per_byte"] = ring["b"]
        f["ring_round_chunk_bytes"] = ring["chunks"]
        f["ring_round_extra_cpu_s"] = ring["cpu"]
        f["ring_round_extra_cpu_spread"] = np.array(ring["spread"])
        f.attrs["a2a_local_s_per_byte"] = local["ulysses"][0]
        f.attrs["allgather_local_s_per_byte"] = local["allgather"][0]
        f["local_work_comm_only_s_ulysses"] = np.array(local["ulysses"][2])
        f["local_work_comm_only_s_allgather"] = np.array(local["allgather"][2])
        f.attrs["local_work_spread_ulysses"] = local["ulysses"][1]
        f.attrs["local_work_spread_allgather"] = local["allgather"][1]
        f["allgather_local_ranks"] = np.array([r[0] for r in local["allgather_at"]])
        f["allgather_local_s_per_byte_at"] = np.array([r[1] for r in local["allgather_at"]])
        f.attrs["seconds"] = time.time() - t_start
        # every command run (each attempt): the CPU other processes used during it (retaken above FOREIGN_MAX)
        log = C.call_log
        f["calls_log"] = np.array([c["log"] for c in log], dtype=h5py.string_dtype())
        f["calls_attempt"] = np.array([c["attempt"] for c in log], dtype=float)
        f["calls_wall_s"] = np.array([c["wall_s"] for c in log])
        f["calls_foreign_cores"] = np.array([c["foreign_cores"] for c in log])
        f["calls_steal_cores"] = np.array([c["steal_cores"] for c in log])
        last = {c["log"]: i for i, c in enumerate(log)}  # the kept attempt of each command: its last
        f["calls_kept"] = np.array([float(last[c["log"]] == i) for i, c in enumerate(log)])
        f.attrs["foreign_max_fraction"] = C.FOREIGN_MAX
        f.attrs["quiet_retries"] = C.QUIET_RETRIES
        f.attrs["retakes"] = sum(1 for c in log if c["attempt"] > 0)
        f.attrs["kept_not_quiet"] = kept_loud
    publish(d, final)  # everything measured: now it replaces the earlier calibration
    cpath, kpath = os.path.join(final, "cpu.toml"), os.path.join(final, "cpu_calibration.toml")
    print(f"block (bench layer, one rank): GEMMs {gemm_rate / 1e9:.1f} GFLOP/s per CPU-second ({gemm_txt} at t = {LAYER_SEQ}); "
          f"rest {rest_txt} CPU-ms = {layer_over * 1e3:.3f} ms + {lay['rest_b'] * 1e9:.1f} ns/token ({passes:.1f} passes)"
          f" + {lay['rest_c'] * 1e12:.2f} ps/token^2 (to attention)")
    print("concurrency (bench layer at t = %d): " % CONC_SEQ + ", ".join(
        f"P={c['ranks']} share {c['share']:.2f} fwd+bwd {c['fb'] * 1e3:.1f} ms efficiency {c['eff']:.3f}" for c in conc))
    print(f"attention r_inf {r_inf / 1e9:.2f} GFLOP/s t0 {t0:.0f} "
          f"(combined {', '.join(f'{c / 1e9:.2f}' for c in comb)} at {LAYER_SEQ}), fwd/bwd {fwd_over_bwd:.3f}; "
          f"MPI alpha {alpha * 1e6:.1f} us beta {beta / 1e9:.2f} GB/s; memory {bw / 1e9:.1f} GB/s; cores {cores}; "
          f"collective wait per unit of 1/s - 1: blocking {tau['spin'] * 1e3:.2f} ms, within groups of {FIT_GROUP} "
          f"{tau['spin_fit'] * 1e3:.2f} ms, a second call back to back {tau['follow'] * 1e3:.2f} ms, all-reduce {tau['nap'] * 1e3:.2f} ms"
          + (f"; at P = {WAIT_RANKS} alone: " + "; ".join(f"{w} " + " / ".join(f"{v * 1e3:.3f}" for v in tau_at[w]) + " ms"
                                                         for w in tau_at) if WAIT_RANKS else ""))
    print("one-rank steps: " + ", ".join(f"{p['seq']} tokens {p['step_s']:.4f} s at share {p['share']:.2f}, model {p['model_s']:.4f} "
                                         f"CPU-s, residual {p['residual'] * 1e3:+.2f} ms" for p in step_pts)
          + f" -> step overhead {step_a * 1e3:.2f} ms + {step_b * 1e6:.2f} us/token")
    for P, G, calls in [(P, P, 1) for P in COLL_RANKS] + [(P, FIT_GROUP, 1) for P in FIT_RANKS] + [(P, P, 2) for P in FOLLOW_RANKS]:
        for w, kinds in (("blocking" if calls == 1 else "second of two", SPIN_KINDS), ("all-reduce", NAP_KINDS)):
            sel = [r for r in coll_rows if r[0] == P and r[10] == G and r[11] == calls and r[1] in kinds]
            if not sel:
                continue
            x = np.array([r[4] for r in sel]); y = np.array([r[6] for r in sel])
            print(f"  P={P} groups of {G} {w}: share {np.mean([r[3] for r in sel]):.2f}, wait {1e3 * y.mean():.2f} ms"
                  f" = {1e3 * (x * y).sum() / max(1e-12, (x * x).sum()):.2f} ms x rounds x (1/s - 1)"
                  f" (cases: {', '.join(f'{r[1]} {r[2] / 1024:.0f}K {r[7]}r {1e3 * r[6]:.1f}' for r in sel)})")
    print(f"spreads (max / min over {SAMPLES} samples per point): block fwd+bwd {fmt_sp(sp['fb'])}, attention rate "
          f"{fmt_sp(attn_spread)}, GEMMs {fmt_sp(sp['gemm'])}, rest {fmt_sp(sp['rest'])} at t = {LAYER_SEQ}; "
          f"P copies {fmt_sp(sp['conc_fb'])} at P = {CONC_RANKS}; one-rank steps {fmt_sp([p['spread'] for p in step_pts])} at "
          f"{STEP_SEQ}; pingpong alpha {spread(alphas):.2f} beta {spread(betas):.2f}; copy {bw_spread:.2f}; collective excess "
          f"median {np.nanmedian([r[8] for r in coll_rows]):.2f}, max {np.nanmax([r[8] for r in coll_rows]):.2f}"
          f" ({sum(1 for r in coll_rows if not np.isfinite(r[8]))} cases with a sample <= 0)")
    print(f"local work of the blocking collectives (bench attention comm-only, 2 ranks, {LOCAL_SEQ} tokens): Ulysses "
          f"{local['ulysses'][0] * 1e9:.3f} ns/byte (comm-only {', '.join(f'{x * 1e3:.2f}' for x in local['ulysses'][2])} ms), "
          f"all-gather {local['allgather'][0] * 1e9:.3f} ns/byte ({', '.join(f'{x * 1e3:.2f}' for x in local['allgather'][2])} ms); "
          f"all-gather at P = " + ", ".join(f"{r[0]}: {r[1] * 1e9:.3f} ns/byte ({', '.join(f'{x * 1e3:.2f}' for x in r[3])} ms)"
                                            for r in local["allgather_at"]))
    print("tile costs (bench attention tile_costs, per (tile, head), fwd / bwd us): " + ", ".join(
        f"{k} {tf_[k] * 1e6:.3f} / {tb_[k] * 1e6:.3f}" for k in ("mask", "partial_causal", "partial_window", "partial_document", "skip", "call", "causal_diag"))
        + f", row {tf_['row'] * 1e9:.2f} / {tb_['row'] * 1e9:.2f} ns (unclamped: "
        + ", ".join(f"{k} {tf_['raw'][k] * 1e6:.3f} / {tb_['raw'][k] * 1e6:.3f}" for k in tf_["raw"]) + ")")
    print(f"ring round CPU (bench collective ring, {RING_RANKS} ranks): {ring_note} ms -> {ring['a'] * 1e6:.1f} us + "
          f"{ring['b'] * 1e9:.3f} ns/byte (spreads {fmt_sp(ring['spread'])})")
    fc = np.array([c["foreign_cores"] for c in kept.values()])
    print(f"other processes during the {len(kept)} commands (kept attempts): median {np.median(fc):.2f}, max {fc.max():.2f} "
          f"of {os.cpu_count()} cores; {sum(1 for c in C.call_log if c['attempt'] > 0)} retakes; {kept_loud} kept above "
          f"{C.FOREIGN_MAX:.2f} x cores")
    print(f"wrote {cpath}, {kpath} ({time.time() - t_start:.0f} s)")


if __name__ == "__main__":
    C.handle_signals()
    main()

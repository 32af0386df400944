#!/usr/bin/python3
"""Describe THIS machine to the performance model (src/perf) from our own
microbenchmarks, measured now, before any experiment is compared:

- GEMM rate: `burst bench gemm` at the sizes of the experiments' model
  (hidden 128, ffn 256), one rank, one thread;
- attention kernel: `burst bench attention` with the model's heads (8 x 16,
  causal) at the block sizes the runs use; rate(t) = r_inf t / (t + t0)
  fitted through them (the same curve as the A800's), fwd/bwd ratio;
- MPI alpha-beta: `burst bench pingpong` between two ranks;
- waits of collectives on shared cores: `burst bench collective` at
  P = 2, 4, 8 ranks (compute between the engine's collectives, against the
  compute alone); the wall time per collective beyond the compute, over
  rounds x (1/s - 1) (the dependent rounds of MPICH's algorithm for that
  size, the ranks' off-core ratio), fitted through the origin: one constant
  per round for the busy-polling blocking collectives (all-to-all,
  all-gather, reduce-scatter), one per call for the engine's napping
  all-reduce;
- memory bandwidth (merges, copies, elementwise passes): a 64 MiB copy;
- elementwise passes of one block (norms, RoPE, SwiGLU, residuals, copies,
  kernel launches): no microbenchmark isolates them, so this one constant
  is what a one-rank training step of the model at 1024 tokens leaves
  unexplained by the terms above (the analogue of the paper's one-GPU
  point; one global constant, no per-run factor, no multi-rank run used).

Writes experiments/results/calibration/{cpu.toml,cpu_calibration.toml,
calibration.h5}. The cluster has host.cores = the cores of this machine:
with P ranks on it each computes at cores / P of the one-thread rates.
"""
import os
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common as C  # noqa: E402

HEADS, KVH, D = 8, 8, 16          # experiments/configs/exp_model.json
HIDDEN, FFN, LAYERS = 128, 256, 2
ATTN_SEQ = [256, 512, 1024, 2048]  # the per-rank block sizes of the runs (S / P)


COLL_RANKS = [2, 4, 8]  # the runs' rank counts (scaling goes to 8)
SPIN_KINDS = ["all_to_all", "all_gather", "reduce_scatter"]  # blocking MPI collectives (busy-polling waits)
NAP_KINDS = ["all_reduce"]  # MPI_Iallreduce + wait_all_bounded (napping waits)
COLL_CHUNKS = [8192, 65536, 262144]  # bytes per peer: both sides of MPICH's size thresholds, the runs' sizes


def collective_waits(d, alpha, beta):
    """`burst bench collective` at COLL_RANKS: per case the wall time per
    collective beyond the compute the ranks' share pays for, less the
    alpha-beta time of its bytes (the model prices those separately), against
    x = rounds (1/s - 1) (rounds of MPICH's algorithm for that size; 1 for the
    napping all-reduce); tau by least squares through the origin, one for the
    busy-polling kinds (per round) and one for the napping all-reduce (per call)."""
    xs = {"spin": [], "nap": []}
    ys = {"spin": [], "nap": []}
    rows = []
    kinds = SPIN_KINDS + NAP_KINDS
    for P in COLL_RANKS:
        h5 = os.path.join(d, f"collective_np{P}.h5")
        C.mpiexec(P, ["bench", "collective", "--set", "bench.kinds=[" + ",".join(f'"{k}"' for k in kinds) + "]",
                      "--set", f"bench.chunk_bytes={COLL_CHUNKS}".replace(" ", ""), "--set", "bench.work_us=[10000]",
                      "--set", "bench.iterations=6", "--set", "bench.rounds=2", "--output", h5],
                  os.path.join(d, f"collective_np{P}.log"))
        with h5py.File(h5, "r") as f:
            for k in kinds:
                g = f["collective/" + k]
                # rounds: of MPICH's algorithm for the size, as the model counts them (the bench writes them)
                for chunk, s, ex, rounds in zip(g["chunk_bytes"][:], g["cpu_share"][:], g["excess_seconds"][:], g["rounds"][:]):
                    chunk, rounds = float(chunk), int(rounds)
                    moved = chunk * (P - 1) * (2 if k == "all_reduce" else 1)
                    y = ex - (alpha + moved / beta)
                    x = rounds * max(0.0, 1.0 / min(1.0, s) - 1.0)
                    w = "nap" if k in NAP_KINDS else "spin"
                    xs[w].append(x), ys[w].append(y)
                    rows.append((P, k, chunk, float(s), x, float(ex), y, rounds))
    tau = {}
    for w in ("spin", "nap"):
        x, y = np.array(xs[w]), np.array(ys[w])
        tau[w] = max(0.0, float((x * y).sum() / (x * x).sum())) if (x * x).sum() > 0 else 0.0
    return tau, rows


def mem_bandwidth():
    a = np.ones(8 << 20, dtype=np.float64)  # 64 MiB
    b = np.empty_like(a)
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        np.copyto(b, a)
        ts.append(time.perf_counter() - t)
    return 2 * a.nbytes / sorted(ts)[len(ts) // 2]  # read + write


ELEM_SEQ = 1024  # tokens per rank of most runs


def elementwise_passes(d, kpath, template):
    """One-rank train steps of the model at ELEM_SEQ tokens (whole, fused
    loss, as the runs): the part of the measured step the model's GEMM,
    attention, LM head and optimizer terms do not explain, in passes."""
    import tomllib
    with open(os.path.join(C.CONFIGS, "exp_main.toml"), "rb") as f:
        keys = C.flatten(tomllib.load(f)["train"])
    log_h5 = os.path.join(d, "one_rank_step.h5")
    if os.path.exists(log_h5):
        os.remove(log_h5)
    model = os.path.join(C.ROOT, keys["model.config"])
    keys.update({"model.config": model, "train.seq_len": ELEM_SEQ, "train.steps": 4, "parallel.cp": 1, "train.batch": 1,
                 "io.run_log": log_h5})
    C.mpiexec(1, ["train"] + C.set_args(keys), os.path.join(d, "one_rank_step.log"))
    share = min(1.0, C.last_cpu_share)
    with h5py.File(log_h5, "r") as f:
        step_s = float(np.median(f["log/seconds"][1:]))
        if "log/cpu_seconds" in f:  # the timed steps' own CPU share
            share = min(1.0, float(np.median(f["log/cpu_seconds"][1:] / f["log/seconds"][1:])))
    preds = []
    for passes in (0.0, 1.0):
        with open(kpath, "w") as f:
            f.write(template.replace("@ELEMENTWISE_PASSES@", str(passes)))
        ph5 = os.path.join(d, f"one_rank_pred{int(passes)}.h5")
        C.simulate(["--model", model, "--seq", str(ELEM_SEQ), "--gpus", "1", "--gpus-per-node", "1", "--zero", "0",
                    "--offload", "off", "--policy", keys["train.activation"], "--fused-loss", "on", "--host-cores", f"{share:.4f}"], ph5)
        with h5py.File(ph5, "r") as f:
            preds.append(float(f["run"].attrs["t_total"]))
    per_pass = preds[1] - preds[0]
    elementwise_passes.share = share
    return max(0.0, (step_s - preds[0]) / per_pass), step_s, preds[0], per_pass


def main():
    d = os.path.join(C.results_dir(), "calibration")
    os.makedirs(d, exist_ok=True)
    cores = int(os.environ.get("BURST_HOST_CORES", os.cpu_count()))
    t_start = time.time()

    g_h5 = os.path.join(d, "gemm.h5")
    C.mpiexec(1, ["bench", "gemm", "--set", f"bench.sizes=[{HIDDEN},{FFN}]", "--set", "bench.repeats=30",
                  "--set", "bench.warmup=3", "--output", g_h5], os.path.join(d, "gemm.log"))
    share_gemm = min(1.0, C.last_cpu_share)
    with h5py.File(g_h5, "r") as f:
        gemm_gflops = f["gemm/gflops"][0, :]
    # Rates per CPU-second: the machine is shared with other jobs, so each
    # benchmark's rate is divided by the CPU share its process got (CPU time /
    # wall, from the kernel's accounting); each run's prediction then uses the
    # cores that run got (run_experiment.py).
    gemm_rate = float(np.median(gemm_gflops)) * 1e9 / share_gemm

    a_h5 = os.path.join(d, "attention.h5")
    C.mpiexec(1, ["bench", "attention", "--set", f"bench.seq={ATTN_SEQ}".replace(" ", ""), "--set", f"bench.heads={HEADS}",
                  "--set", f"bench.kv_heads={KVH}", "--set", f"bench.head_dim={D}", "--set", "bench.repeats=2",
                  "--output", a_h5], os.path.join(d, "attention.log"))
    share_attn = min(1.0, C.last_cpu_share)
    with h5py.File(a_h5, "r") as f:
        seq = f["attention/seq"][:].astype(float)
        tf, tb = f["attention/fwd_seconds"][:], f["attention/bwd_seconds"][:]
        # per point: the CPU share of the timed rounds themselves (else the whole run's)
        point_share = np.minimum(1.0, f["attention/cpu_share"][:]) if "attention/cpu_share" in f else np.full(len(seq), share_attn)
    F = 4 * seq ** 2 / 2 * HEADS * D
    comb = 3.5 * F / (tf + tb) / point_share
    # 1 / rate = 1 / r_inf + (t0 / r_inf) / t: a straight line in 1/t.
    A = np.vstack([np.ones_like(seq), 1 / seq]).T
    (a0, a1), *_ = np.linalg.lstsq(A, 1 / comb, rcond=None)
    r_inf, t0 = 1 / a0, max(0.0, a1 / a0)
    fwd_over_bwd = float(np.median((F / tf) / (2.5 * F / tb)))

    p_h5 = os.path.join(d, "pingpong.h5")
    C.mpiexec(2, ["bench", "pingpong", "--output", p_h5], os.path.join(d, "pingpong.log"))
    with h5py.File(p_h5, "r") as f:
        alpha, beta = float(f.attrs["alpha_s"]), float(f.attrs["beta_bytes_per_s"])

    tau, coll_rows = collective_waits(d, alpha, beta)

    bw = mem_bandwidth()

    cluster = f"""# THIS machine (the CPU the experiments run on), written by experiments/runners/calibrate_cpu.py
# at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} from microbenchmarks run just before, one thread per rank.
# "gpu" = one MPI rank; every rank of a run shares host.cores cores.
name = "cpu"

[node]
gpus = 8                  # ranks per "node": the whole host (runs override with --gpus-per-node)
ib_hcas = 8               # one host: "inter-node" links are the same shared memory as intra-node

[gpu]
peak_bf16_tflops = {gemm_rate / 1e12:.6g}   # measured: bench gemm float n={HIDDEN},{FFN}, 1 thread: {', '.join(f'{g:.2f}' for g in gemm_gflops)} GFLOP/s (median) at CPU share {share_gemm:.2f}
gemm_fraction = 1.0
hbm_tb_per_s = {bw / 1e12:.6g}     # measured: 64 MiB copy, read + write
memory_gib = 16

[attention]
rate_inf_tflops = {r_inf / 1e12:.6g}   # measured fit: bench attention {HEADS}x{D} causal at t = {ATTN_SEQ}, per CPU-second (shares {', '.join(f'{x:.2f}' for x in point_share)})
t0_tokens = {t0:.6g}
fwd_over_bwd = {fwd_over_bwd:.4g}    # measured: median fwd / bwd rate (2.5x convention)

[links]
efficiency = 1.0
nvlink_gb_per_s = {beta / 1e9:.6g}   # measured: bench pingpong, largest message beyond alpha
nvlink_latency_us = {alpha * 1e6:.4g}  # measured: bench pingpong alpha
ib_hca_gbit_per_s = {beta * 8 / 1e9:.6g}
ib_latency_us = {alpha * 1e6:.4g}
pcie_gb_per_s = {bw / 2 / 1e9:.6g}
pcie_latency_us = 0

[host]
memory_gb_per_s = {bw / 1e9:.6g}
cores = {cores}                 # ranks of a run share these cores (one OpenMP thread each); runs pass --host-cores = the cores they got
collective_wait_ms = {tau["spin"] * 1e3:.4g}   # measured: bench collective at P = {COLL_RANKS}, all-to-all/all-gather/reduce-scatter: wait per round of MPICH's algorithm / (1/s - 1), least squares
element_bytes = 4               # the host build moves float tensors
nap_wait_ms = {tau["nap"] * 1e3:.4g}          # measured: the same for the engine's all-reduce (nonblocking, napping wait)
"""
    cpath = os.path.join(d, "cpu.toml")
    with open(cpath, "w") as f:
        f.write(cluster)
    template = open(os.path.join(C.ROOT, "experiments", "perf_calibration_cpu.toml")).read()
    kpath = os.path.join(d, "cpu_calibration.toml")
    passes, step_s, base_s, per_pass_s = elementwise_passes(d, kpath, template)
    calib = template.replace("@ELEMENTWISE_PASSES@", f"{passes:.4g}   # measured: one-rank step {step_s:.4f} s, model without "
                             f"elementwise {base_s:.4f} s, {per_pass_s * 1e3:.4f} ms per pass")
    with open(kpath, "w") as f:
        f.write(calib)

    with h5py.File(os.path.join(d, "calibration.h5"), "w") as f:
        C.write_attrs(f, C.machine_attrs())
        f["gemm_gflops"] = gemm_gflops
        f["gemm_sizes"] = np.array([HIDDEN, FFN])
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
        f["collective_ranks"] = np.array([r[0] for r in coll_rows], dtype=float)
        f["collective_kind"] = np.array([r[1] for r in coll_rows], dtype=h5py.string_dtype())
        f["collective_cpu_share"] = np.array([r[3] for r in coll_rows])
        f["collective_off_core_ratio"] = np.array([r[4] for r in coll_rows])
        f["collective_excess_s"] = np.array([r[5] for r in coll_rows])
        f["collective_wait_s"] = np.array([r[6] for r in coll_rows])
        f["collective_chunk_bytes"] = np.array([r[2] for r in coll_rows])
        f["collective_rounds"] = np.array([r[7] for r in coll_rows], dtype=float)
        f.attrs["cores"] = cores
        f.attrs["elementwise_passes"] = passes
        f.attrs["cpu_share_gemm"] = share_gemm
        f.attrs["cpu_share_attention"] = share_attn
        f.attrs["cpu_share_one_rank_step"] = elementwise_passes.share
        f.attrs["elementwise_seq"] = ELEM_SEQ
        f.attrs["elementwise_step_s"] = step_s
        f.attrs["elementwise_model_without_s"] = base_s
        f.attrs["cluster_toml"] = cluster
        f.attrs["calibration_toml"] = calib
        f.attrs["seconds"] = time.time() - t_start
    print(f"gemm {gemm_rate / 1e9:.2f} GFLOP/s; attention r_inf {r_inf / 1e9:.2f} GFLOP/s t0 {t0:.0f} "
          f"(combined {', '.join(f'{c / 1e9:.2f}' for c in comb)} at {ATTN_SEQ}), fwd/bwd {fwd_over_bwd:.3f}; "
          f"MPI alpha {alpha * 1e6:.1f} us beta {beta / 1e9:.2f} GB/s; memory {bw / 1e9:.1f} GB/s; cores {cores}; "
          f"collective wait per unit of 1/s - 1: blocking {tau['spin'] * 1e3:.2f} ms, napping {tau['nap'] * 1e3:.2f} ms")
    for P in COLL_RANKS:
        for w, kinds in (("blocking", SPIN_KINDS), ("napping", NAP_KINDS)):
            sel = [r for r in coll_rows if r[0] == P and r[1] in kinds]
            x = np.array([r[4] for r in sel]); y = np.array([r[6] for r in sel])
            print(f"  P={P} {w}: share {np.mean([r[3] for r in sel]):.2f}, wait {1e3 * y.mean():.2f} ms"
                  f" = {1e3 * (x * y).sum() / max(1e-12, (x * x).sum()):.2f} ms x rounds x (1/s - 1)"
                  f" (cases: {', '.join(f'{r[1]} {r[2] / 1024:.0f}K {r[7]}r {1e3 * r[6]:.1f}' for r in sel)})")
    print(f"wrote {cpath}, {kpath} ({time.time() - t_start:.0f} s)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch's own context parallelism on the shapes `burst bench attention`
times (issue 8), in the same device run: causal SDPA (cuDNN or FLASH backend)
under torch.distributed.tensor.experimental.context_parallel, forward +
backward, one process per GPU.

  torchrun --nproc-per-node P experiments/peers/torch_cp.py OUTDIR \
      [--per-gpu 2048,4096,8192] [--heads 32] [--kv-heads 32] [--head-dim 128]
      [--rotate allgather,alltoall] [--backend cudnn|flash] [--reps-ms 2000] [--check-tokens 4096]

Inputs are [1, heads, S, d] bf16 with S = per-GPU tokens x P, the same on
every rank (one seed); the context manager shards them along the sequence
(its head-tail load balancing for causal). Times are CUDA events per rank,
the slowest rank's per repetition (all-reduce MAX), median over repetitions.
TFLOP/s per GPU by the paper's convention (ALGORITHMS.md section 9): forward
4 S^2 n d / 2 (causal), backward 2.5 x forward, divided by P.
Before timing, at --check-tokens total tokens, the unsharded output and
input gradients are compared with plain SDPA on one GPU (relative Frobenius
error, reported; bf16 tolerance 2e-2).
Writes OUTDIR/peers_torch_cp_np<P>.json (rank 0): one row per (rotate
method, per-GPU tokens) with ms and TFLOP/s, or the error that stopped it.
An exception inside torch's context manager (an out-of-memory error at the
largest size) can leave SDPA patched for the rest of the process (the
manager has no try/finally around its body in the versions read): rows
after an error are marked `after_error`.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel
from torch.nn.attention import SDPBackend, sdpa_kernel


def _find(name):
    """An experimental context-parallel helper wherever this torch keeps it (None if nowhere)."""
    import importlib
    for mod in ("torch.distributed.tensor.experimental", "torch.distributed.tensor.experimental._attention",
                "torch.distributed.tensor.experimental._context_parallel._attention"):
        try:
            return getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError):
            continue
    return None


context_parallel_unshard = _find("context_parallel_unshard")
set_rotate_method = _find("set_rotate_method")


def rel_err(a, b):
    a, b = a.double(), b.double()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30)).item()


def inputs(S, n, m, d, dev, seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    q = torch.randn(1, n, S, d, device=dev, dtype=torch.bfloat16, generator=g)
    k = torch.randn(1, m, S, d, device=dev, dtype=torch.bfloat16, generator=g)
    v = torch.randn(1, m, S, d, device=dev, dtype=torch.bfloat16, generator=g)
    do = torch.randn(1, n, S, d, device=dev, dtype=torch.bfloat16, generator=g)
    return q, k, v, do


def sdpa(q, k, v):
    if q.shape[1] != k.shape[1]:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def check(mesh, P, n, m, d, S, backend, dev):
    """Unsharded CP output and gradients against one-GPU SDPA on the same inputs."""
    q, k, v, do = inputs(S, n, m, d, dev, 7)
    with sdpa_kernel(backend):
        rq, rk, rv = (t.clone().requires_grad_() for t in (q, k, v))
        ro = sdpa(rq, rk, rv)
        ro.backward(do)
    if context_parallel_unshard is None:  # never raise inside the context: it would stay patched
        raise RuntimeError("this torch has no context_parallel_unshard: cannot check")
    cq, ck, cv, cdo = (t.clone() for t in (q, k, v, do))
    # no_restore_buffers: restoring resizes the buffers, which torch refuses
    # for tensors that require grad (and they are not used afterwards).
    with context_parallel(mesh, buffers=[cq, ck, cv, cdo], buffer_seq_dims=[2, 2, 2, 2],
                          no_restore_buffers={cq, ck, cv, cdo}):
        for t in (cq, ck, cv):
            t.requires_grad_()
        with sdpa_kernel(backend):
            co = sdpa(cq, ck, cv)
        co.backward(cdo)
        o, dq, dk, dv = context_parallel_unshard(mesh, [co.detach(), cq.grad, ck.grad, cv.grad], [2, 2, 2, 2])
    return {"o": rel_err(o, ro), "dq": rel_err(dq, rq.grad), "dk": rel_err(dk, rk.grad), "dv": rel_err(dv, rv.grad)}


def timed(mesh, P, n, m, d, S, backend, dev, budget_ms):
    q, k, v, do = inputs(S, n, m, d, dev, 1)
    with context_parallel(mesh, buffers=[q, k, v, do], buffer_seq_dims=[2, 2, 2, 2], no_restore_buffers={q, k, v, do}):
        for t in (q, k, v):
            t.requires_grad_()
        a, b, c = (torch.cuda.Event(enable_timing=True) for _ in range(3))

        def once():
            for t in (q, k, v):
                t.grad = None
            a.record()
            with sdpa_kernel(backend):
                o = sdpa(q, k, v)
            b.record()
            o.backward(do)
            c.record()
            c.synchronize()
            t = torch.tensor([a.elapsed_time(b), b.elapsed_time(c)], device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.tolist()

        once()  # warm-up
        f1, b1 = once()
        reps = max(3, min(30, int(budget_ms / max(f1 + b1, 1e-3))))
        reps = torch.tensor([reps], device=dev)
        dist.all_reduce(reps, op=dist.ReduceOp.MIN)  # every rank runs the same count
        fs, bs = [], []
        for _ in range(int(reps.item())):
            f, bw = once()
            fs.append(f), bs.append(bw)
    fs.sort(), bs.sort()
    return fs[len(fs) // 2], bs[len(bs) // 2], len(fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--per-gpu", default="2048,4096,8192")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--rotate", default="allgather,alltoall")
    ap.add_argument("--backend", default="cudnn", choices=["cudnn", "flash"])
    ap.add_argument("--reps-ms", type=float, default=2000)
    ap.add_argument("--check-tokens", type=int, default=4096, help="0: no check")
    a = ap.parse_args()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if name not in os.environ:
            sys.exit(f"torch_cp.py: {name} is not set: launch with torchrun --nproc-per-node P")
    if a.heads % a.kv_heads:
        sys.exit(f"torch_cp.py: --heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}")
    per_gpu = [int(x) for x in a.per_gpu.split(",") if x]
    rotates = [x for x in a.rotate.split(",") if x]
    for r in rotates:
        if r not in ("allgather", "alltoall"):
            sys.exit(f"torch_cp.py: --rotate {r}: expected allgather or alltoall")
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    P, me = dist.get_world_size(), dist.get_rank()
    mesh = init_device_mesh("cuda", (P,))
    backend = SDPBackend.CUDNN_ATTENTION if a.backend == "cudnn" else SDPBackend.FLASH_ATTENTION
    n, m, d = a.heads, a.kv_heads, a.head_dim
    res = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(dev), "ranks": P,
           "backend": a.backend, "heads": n, "kv_heads": m, "head_dim": d, "mask": "causal",
           "flop_convention": "fwd 4 S^2 n d / 2 (causal), bwd 2.5 x fwd, per GPU / P", "rows": []}
    had_error = False
    for rot in rotates:
        if set_rotate_method is not None:
            set_rotate_method(rot)
        elif rot != "allgather":
            res["rows"].append({"rotate": rot, "error": "this torch has no set_rotate_method"})
            continue
        if a.check_tokens > 0:
            try:
                err = check(mesh, P, n, m, d, a.check_tokens, backend, dev)
                res["rows"].append({"rotate": rot, "check_tokens": a.check_tokens, "rel_err": err,
                                    "check_passed": max(err.values()) < 2e-2})
            except Exception as e:  # a peer that cannot run is a result, not a crash
                res["rows"].append({"rotate": rot, "check_tokens": a.check_tokens, "error": f"{type(e).__name__}: {e}"})
                had_error = True
        for t in per_gpu:
            S = t * P
            row = {"rotate": rot, "per_gpu_tokens": t, "seq": S}
            try:
                fms, bms, reps = timed(mesh, P, n, m, d, S, backend, dev, a.reps_ms)
                fwd = 4.0 * S * S * n * d * 0.5
                row.update({"fwd_ms": fms, "bwd_ms": bms, "reps": reps,
                            "tflops_per_gpu_fwd": fwd / P / (fms * 1e-3) / 1e12,
                            "tflops_per_gpu_bwd": 2.5 * fwd / P / (bms * 1e-3) / 1e12,
                            "tflops_per_gpu": 3.5 * fwd / P / ((fms + bms) * 1e-3) / 1e12})
            except torch.cuda.OutOfMemoryError:
                row["error"] = "out of memory"
                torch.cuda.empty_cache()
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"
            if had_error:
                row["after_error"] = True
            had_error = had_error or "error" in row
            res["rows"].append(row)
            if me == 0:
                if "error" in row:
                    print(f"torch_cp {rot:9s} {t:7d}/GPU  {row['error']}", flush=True)
                else:
                    print(f"torch_cp {rot:9s} {t:7d}/GPU  fwd {row['fwd_ms']:9.3f} ms  bwd {row['bwd_ms']:9.3f} ms  "
                          f"{row['tflops_per_gpu']:6.1f} TFLOP/s/GPU", flush=True)
    if me == 0:
        os.makedirs(a.outdir, exist_ok=True)
        path = os.path.join(a.outdir, f"peers_torch_cp_np{P}.json")
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {path}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times torch's FLASH (FA2) and cuDNN SDPA backends on the lab's benchmark
shapes, in the same run as bench_attn, so every number is a ratio measured side
by side. Layout mirrors ours: [1, S, n, d] viewed as [1, n, S, d] (transpose,
not a copy). Same timing method: CUDA events, 2 warmups, median of 5-50 reps.

usage: peers_sdpa.py OUTDIR [--sizes 4096,8192,...] [--reps-ms 300] [--gqa-time]
writes OUTDIR/peers.csv (impl,kernel,sq,sk,n,nkv,d,causal,ms,tflops)
"""
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


def median_ms(fn, budget_ms):
    fn(); fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); fn(); b.record(); b.synchronize()
    t1 = a.elapsed_time(b)
    reps = max(5, min(50, int(budget_ms / max(t1, 1e-3))))
    ts = []
    for _ in range(reps):
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    out = sys.argv[1]
    sizes = [4096, 8192, 16384, 32768]
    budget = 300.0
    gqa = False
    args = sys.argv[2:]
    i = 0
    while i < len(args):
        if args[i] == "--sizes":
            sizes = [int(x) for x in args[i + 1].split(",")]; i += 2
        elif args[i] == "--reps-ms":
            budget = float(args[i + 1]); i += 2
        elif args[i] == "--gqa-time":
            gqa = True; i += 1
        else:
            raise SystemExit(f"unknown argument {args[i]}")
    print(f"torch {torch.__version__}, cuda {torch.version.cuda}, cudnn {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    rows = []
    d = 128
    # (sq, sk, n, nkv, causals): the square shapes, GQA 32:8 at 16K, the zigzag half blocks
    shapes = [(S, S, 32, 32, (0, 1)) for S in sizes]
    if gqa:
        shapes += [(16384, 16384, 32, 8, (0, 1)), (8192, 4096, 32, 32, (0,)), (4096, 8192, 32, 32, (0,)),
                   (16384, 8192, 32, 32, (0,)), (8192, 16384, 32, 32, (0,))]
    for sq, sk, n, nkv, causals in shapes:
        g = torch.Generator(device="cuda").manual_seed(sq * 7 + sk)
        mk = lambda s, h, amp: ((torch.rand(1, s, h, d, device="cuda", generator=g) * 2 - 1) * amp).to(torch.bfloat16).transpose(1, 2)
        q = mk(sq, n, 2.5).detach().requires_grad_()
        k = mk(sk, nkv, 1.7).detach().requires_grad_()
        v = mk(sk, nkv, 1.7).detach().requires_grad_()
        do = mk(sq, n, 1.7).detach()
        for causal in causals:
            fl = 4.0 * sq * sk * n * d * (0.5 if causal else 1.0)
            for name, be in (("torch_flash", SDPBackend.FLASH_ATTENTION), ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
                kw = dict(is_causal=bool(causal))
                if nkv != n:
                    kw["enable_gqa"] = True
                try:
                    with sdpa_kernel([be]):
                        def fwd():
                            with torch.no_grad():
                                F.scaled_dot_product_attention(q, k, v, **kw)
                        tf_ = median_ms(fwd, budget)
                        o = F.scaled_dot_product_attention(q, k, v, **kw)
                        def bwd():
                            torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
                        tb = median_ms(bwd, budget)
                        del o
                except Exception as e:  # a backend that refuses a shape: recorded, not fatal
                    print(f"{name} sq={sq} sk={sk} n={n}/{nkv} causal={causal}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                    continue
                for kern, t, f in (("fwd", tf_, fl), ("bwd", tb, 2.5 * fl)):
                    rows.append((name, kern, sq, sk, n, nkv, d, causal, t, f / (t * 1e-3) / 1e12))
                    print(f"time {name:12s} {kern} sq={sq:<6d} sk={sk:<6d} n={n}/{nkv} d={d} {'causal' if causal else 'full':6s} "
                          f"{t:9.3f} ms {rows[-1][-1]:6.1f} TFLOP/s", flush=True)
        del q, k, v, do
        torch.cuda.empty_cache()
    with open(f"{out}/peers.csv", "w") as fh:
        fh.write("impl,kernel,sq,sk,n,nkv,d,causal,ms,tflops\n")
        for r in rows:
            fh.write(",".join(str(x) if not isinstance(x, float) else f"{x:.5f}" for x in r) + "\n")


if __name__ == "__main__":
    main()

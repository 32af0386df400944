#!/usr/bin/env python3
"""PyTorch on the shapes our benchmarks time, in the same device run, so every
figure is a ratio measured side by side (issue 6). Writes
OUTDIR/peers_<parts>.json (e.g. peers_ce_gemm.json).

  peers.py OUTDIR [--only gemm,ce,kernels,block,sdpa] [--tokens 32768] [--no-compile] [--reps-ms 400]

- gemm:  torch.matmul in bf16 on the `burst bench gemm --set bench.llama=true`
         shapes (same labels; op(A) / op(B) as transposed views, no copies).
- ce:    the LM head + cross-entropy at N tokens, H 4096, V 128256, bf16,
         forward + backward: `naive` (full logits, F.cross_entropy on fp32
         logits, autograd) and `chunked` (our algorithm in torch ops: per
         chunk logits, softmax - onehot in place, dX and dW GEMMs); time and
         the peak memory beyond what was allocated before the call (x, W,
         targets and the gradient buffers dx, dW), as `burst bench ce`.
- block: a LLaMA decoder block (RMSNorm, q/k/v/o, RoPE, causal cuDNN SDPA,
         SwiGLU MLP, residuals; MHA) at 1B (2048 / 16 heads / 5632) and 7B
         (4096 / 32 / 11008) shapes, forward + backward, eager and
         torch.compile; TFLOP/s by 3 x forward FLOPs (GEMMs + causal attention).
- kernels: RMSNorm fwd / bwd, SwiGLU fwd / bwd, RoPE and fused AdamW (256M
         fp32 params) at the `burst bench kernels` shapes, GB/s by the same
         byte floors.
- sdpa:  FLASH and cuDNN SDPA, 32 heads x 128, S = 32K, causal and full,
         forward and backward (fwd 4 S^2 n d, halved when causal; bwd 2.5 x).
Timing: CUDA events, warm-up, median of 3-50 repetitions within --reps-ms.
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

IGNORE = -100


def median_ms(fn, budget_ms, min_reps=3, max_reps=50):
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); fn(); b.record(); b.synchronize()
    t1 = a.elapsed_time(b)
    reps = max(min_reps, min(max_reps, int(budget_ms / max(t1, 1e-3))))
    ts = []
    for _ in range(reps):
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def peak_extra(fn):
    """Peak allocation during fn() beyond what was allocated before it (bytes)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def rand(shape, amp, gen):
    return ((torch.rand(shape, device="cuda", generator=gen) * 2 - 1) * amp).to(torch.bfloat16)


# ---------------------------------------------------------------- gemm
def llama_gemm_shapes(T):
    shapes = []
    for name, h, f in (("1B", 2048, 5632), ("7B", 4096, 11008)):
        p = name + " "
        shapes += [(p + "qkvo fwd XW^T", "NT", T, h, h), (p + "up/gate fwd XW^T", "NT", T, f, h),
                   (p + "down fwd XW^T", "NT", T, h, f), (p + "qkvo dX=dYW", "NN", T, h, h),
                   (p + "up/gate dX=dYW", "NN", T, h, f), (p + "qkvo dW=dY^TX", "TN", h, h, T),
                   (p + "up/gate dW=dY^TX", "TN", f, h, T)]
    shapes += [("LM head 128256 fwd XW^T", "NT", T, 128256, 4096), ("LM head 128256 dX=GW", "NN", T, 4096, 128256),
               ("LM head 128256 dW=G^TX", "TN", 128256, 4096, T), ("NN:8192^3", "NN", 8192, 8192, 8192)]
    return shapes


def bench_gemm(T, budget, res):
    g = torch.Generator(device="cuda").manual_seed(1)
    out = []
    for label, op, m, n, k in llama_gemm_shapes(T):
        A = rand((m, k) if op[0] == "N" else (k, m), 1.0, g)
        B = rand((k, n) if op[1] == "N" else (n, k), 1.0, g)
        a = A if op[0] == "N" else A.t()
        b = B if op[1] == "N" else B.t()
        C = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ms = median_ms(lambda: torch.matmul(a, b, out=C), budget)
        tf = 2.0 * m * n * k / (ms * 1e-3) / 1e12
        out.append(dict(label=label, op=op, m=m, n=n, k=k, ms=ms, tflops=tf))
        print(f"gemm  {label:26s} {op} {m:7d} {n:7d} {k:7d} {ms:9.3f} ms {tf:7.1f} TFLOP/s", flush=True)
        del A, B, C, a, b
    torch.cuda.empty_cache()
    res["gemm"] = out


# ---------------------------------------------------------------- lm head + ce
def bench_ce(N, H, V, budget, res, chunks=(2048, 4096)):
    g = torch.Generator(device="cuda").manual_seed(2)
    x = rand((N, H), 1.0, g)
    W = rand((V, H), 0.05, g)
    t = torch.randint(0, V, (N,), device="cuda", generator=g)
    t[100::101] = IGNORE
    valid = int((t != IGNORE).sum())
    out = dict(tokens=N, hidden=H, vocab=V, valid=valid, flops=6.0 * N * H * V)

    # naive: full logits, autograd
    xg = x.detach().clone().requires_grad_()
    Wg = W.detach().clone().requires_grad_()

    def naive():
        logits = xg @ Wg.t()
        loss = F.cross_entropy(logits.float(), t, ignore_index=IGNORE)
        loss.backward()
        return loss

    naive()  # allocates xg.grad, Wg.grad
    def naive_step():
        xg.grad.zero_(); Wg.grad.zero_()
        naive()
    try:
        ms = median_ms(naive_step, budget, min_reps=3, max_reps=10)
        mem = peak_extra(naive_step)
        out["naive"] = dict(ms=ms, extra_peak_bytes=mem, tflops=out["flops"] / (ms * 1e-3) / 1e12)
        print(f"ce    naive (full logits + F.cross_entropy)  {ms:9.3f} ms  extra peak {mem / 2**30:6.2f} GiB", flush=True)
    except torch.cuda.OutOfMemoryError as e:
        out["naive"] = dict(error=str(e)[:200])
        print("ce    naive: out of memory", flush=True)
    del xg, Wg
    torch.cuda.empty_cache()

    # chunked: our algorithm in torch ops, no autograd
    dx = torch.empty_like(x)
    dW = torch.zeros_like(W)
    scale = 1.0 / valid

    def chunked(c):
        total = torch.zeros((), device="cuda", dtype=torch.float32)
        for r0 in range(0, N, c):
            xc, tc = x[r0:r0 + c], t[r0:r0 + c]
            lg = (xc @ W.t()).float()
            lse = torch.logsumexp(lg, dim=-1)
            ok = tc != IGNORE
            tt = torch.where(ok, tc, 0)
            total += ((lse - lg.gather(1, tt[:, None])[:, 0]) * ok).sum()
            lg.sub_(lse[:, None]).exp_()
            lg[torch.arange(lg.shape[0], device="cuda"), tt] -= 1.0
            lg.mul_((ok.float() * scale)[:, None])
            gb = lg.to(torch.bfloat16)
            del lg
            torch.matmul(gb, W, out=dx[r0:r0 + c])
            dW.addmm_(gb.t(), xc)
        return total

    out["chunked"] = []
    for c in chunks:
        ms = median_ms(lambda: chunked(c), budget, min_reps=3, max_reps=10)
        mem = peak_extra(lambda: chunked(c))
        out["chunked"].append(dict(chunk=c, ms=ms, extra_peak_bytes=mem, tflops=out["flops"] / (ms * 1e-3) / 1e12))
        print(f"ce    chunked torch, chunk {c:5d}           {ms:9.3f} ms  extra peak {mem / 2**30:6.2f} GiB", flush=True)
    del x, W, dx, dW
    torch.cuda.empty_cache()
    res["ce"] = out


# ---------------------------------------------------------------- llama block
class Block(torch.nn.Module):
    def __init__(self, h, heads, f):
        super().__init__()
        self.h, self.n, self.d = h, heads, h // heads
        self.ln1 = torch.nn.Parameter(torch.ones(h))
        self.ln2 = torch.nn.Parameter(torch.ones(h))
        self.qkv = torch.nn.Linear(h, 3 * h, bias=False)
        self.o = torch.nn.Linear(h, h, bias=False)
        self.gate_up = torch.nn.Linear(h, 2 * f, bias=False)
        self.down = torch.nn.Linear(f, h, bias=False)

    def forward(self, x, cos, sin):
        T = x.shape[1]
        y = F.rms_norm(x, (self.h,), self.ln1, 1e-5)
        q, k, v = self.qkv(y).view(1, T, 3, self.n, self.d).unbind(2)
        def rope(z):
            z1, z2 = z[..., : self.d // 2], z[..., self.d // 2:]
            return z * cos + torch.cat((-z2, z1), dim=-1) * sin
        q, k = rope(q), rope(k)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(1, T, self.h))
        y = F.rms_norm(x, (self.h,), self.ln2, 1e-5)
        gt, up = self.gate_up(y).chunk(2, dim=-1)
        return x + self.down(F.silu(gt) * up)


def bench_block(T, budget, res, compile_too):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    out = []
    for name, h, heads, f in (("1B", 2048, 16, 5632), ("7B", 4096, 32, 11008)):
        blk = Block(h, heads, f).cuda().to(torch.bfloat16)
        d = h // heads
        pos = torch.arange(T, device="cuda", dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, d // 2, device="cuda", dtype=torch.float32) * 2 / d))
        ang = torch.outer(pos, inv)
        ang = torch.cat((ang, ang), dim=-1)[None, :, None, :]
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        g = torch.Generator(device="cuda").manual_seed(3)
        x = rand((1, T, h), 1.0, g).requires_grad_()
        dy = rand((1, T, h), 1.0, g)
        fl_fwd = 2.0 * T * (4 * h * h + 3 * h * f) + 4.0 * T * T * h / 2
        fl = 3.0 * fl_fwd
        for mode in (("eager", "compile") if compile_too else ("eager",)):
            fn = blk if mode == "eager" else torch.compile(blk)
            def step():
                y = fn(x, cos, sin)
                y.backward(dy)
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    t0 = time.time()
                    step()  # compiles
                    first_s = time.time() - t0
                    ms = median_ms(step, budget, min_reps=3, max_reps=20)
                    blk.zero_grad(set_to_none=False)
                    x.grad = None
                    mem = peak_extra(step)
            except Exception as e:
                print(f"block {name} {mode}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                out.append(dict(model=name, mode=mode, error=str(e)[:300]))
                continue
            out.append(dict(model=name, mode=mode, tokens=T, hidden=h, heads=heads, ffn=f, ms=ms, flops=fl,
                            tflops=fl / (ms * 1e-3) / 1e12, peak_extra_bytes=mem, first_call_s=first_s))
            print(f"block {name} {mode:7s} T={T} {ms:9.3f} ms {fl / (ms * 1e-3) / 1e12:7.1f} TFLOP/s "
                  f"(first call {first_s:.1f} s, extra peak {mem / 2**30:.1f} GiB)", flush=True)
        del blk, x, dy
        torch.cuda.empty_cache()
    res["block"] = out


# ---------------------------------------------------------------- memory-bound kernels
def bench_kernels(T, budget, res, H=4096, Fw=11008, n=32, d=128, P=1 << 28):
    """The `burst bench kernels` set in torch: F.rms_norm (fwd; bwd = autograd of
    it), silu(g) * u (fwd; bwd), RoPE (rotate_half, out of place), fused AdamW."""
    g = torch.Generator(device="cuda").manual_seed(5)
    out = []
    def rec(name, floor, ms):
        out.append(dict(kernel=name, ms=ms, floor_bytes=floor, gbps=floor / (ms * 1e-3) / 1e9))
        print(f"kern  {name:18s} {ms:9.4f} ms {out[-1]['gbps']:8.1f} GB/s (floor bytes)", flush=True)
    x = rand((T, H), 2.0, g).requires_grad_()
    w = torch.ones(H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = rand((T, H), 1.0, g)
    with torch.no_grad():
        rec("rmsnorm_forward", 4.0 * T * H + 4 * T, median_ms(lambda: F.rms_norm(x, (H,), w, 1e-5), budget))
    y = F.rms_norm(x, (H,), w, 1e-5)
    rec("rmsnorm_backward", 6.0 * T * H + 4 * T,
        median_ms(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True), budget))
    del x, w, dy, y
    gt = rand((T, Fw), 3.0, g).requires_grad_()
    up = rand((T, Fw), 1.0, g).requires_grad_()
    dh = rand((T, Fw), 1.0, g)
    with torch.no_grad():
        rec("swiglu_forward", 6.0 * T * Fw, median_ms(lambda: F.silu(gt) * up, budget))
    h = F.silu(gt) * up
    rec("swiglu_backward", 10.0 * T * Fw, median_ms(lambda: torch.autograd.grad(h, (gt, up), dh, retain_graph=True), budget))
    del gt, up, dh, h
    q = rand((T, n, d), 1.0, g)
    inv = 1.0 / (500000.0 ** (torch.arange(0, d // 2, device="cuda", dtype=torch.float32) * 2 / d))
    ang = torch.outer(torch.arange(T, device="cuda", dtype=torch.float32), inv)
    ang = torch.cat((ang, ang), dim=-1)[:, None, :]
    cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    def rope():
        q1, q2 = q[..., : d // 2], q[..., d // 2:]
        return q * cos + torch.cat((-q2, q1), dim=-1) * sin
    rec("rope_apply", 4.0 * T * n * d + 8 * T, median_ms(rope, budget))
    del q, cos, sin
    p = torch.nn.Parameter(torch.rand(P, device="cuda", generator=g) * 2 - 1)
    p.grad = (torch.rand(P, device="cuda", generator=g) * 2 - 1) * 1e-3
    opt = torch.optim.AdamW([p], lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    rec("adamw_step_fp32", 28.0 * P, median_ms(opt.step, budget))
    del p, opt
    torch.cuda.empty_cache()
    res["kernels"] = out


# ---------------------------------------------------------------- sdpa
def bench_sdpa(S, budget, res):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    n, d = 32, 128
    g = torch.Generator(device="cuda").manual_seed(4)
    mk = lambda amp: rand((1, S, n, d), amp, g).transpose(1, 2).detach().requires_grad_()
    q, k, v = mk(2.5), mk(1.7), mk(1.7)
    do = rand((1, S, n, d), 1.7, g).transpose(1, 2)
    out = []
    for causal in (False, True):
        fl = 4.0 * S * S * n * d * (0.5 if causal else 1.0)
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel([be]):
                    def fwd():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    tf_ = median_ms(fwd, budget)
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    tb = median_ms(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), budget)
                    del o
            except Exception as e:
                print(f"sdpa {name} causal={causal}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            for kern, t, f in (("fwd", tf_, fl), ("bwd", tb, 2.5 * fl)):
                out.append(dict(impl=name, kernel=kern, seq=S, heads=n, head_dim=d, causal=causal, ms=t,
                                tflops=f / (t * 1e-3) / 1e12))
                print(f"sdpa  {name:6s} {kern} S={S} {'causal' if causal else 'full':6s} {t:9.3f} ms "
                      f"{out[-1]['tflops']:6.1f} TFLOP/s", flush=True)
    res["sdpa"] = out


def main():
    outdir = sys.argv[1]
    only = {"gemm", "ce", "kernels", "block", "sdpa"}
    T, budget, compile_too = 32768, 400.0, True
    args = sys.argv[2:]
    i = 0
    while i < len(args):
        if args[i] == "--only":
            only = set(args[i + 1].split(",")); i += 2
        elif args[i] == "--tokens":
            T = int(args[i + 1]); i += 2
        elif args[i] == "--reps-ms":
            budget = float(args[i + 1]); i += 2
        elif args[i] == "--no-compile":
            compile_too = False; i += 1
        else:
            raise SystemExit(f"unknown argument {args[i]}")
    res = dict(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
               device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    print(f"torch {res['torch']}, cuda {res['cuda']}, cudnn {res['cudnn']}, {res['device']}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    fname = "peers_" + "_".join(sorted(only)) + ".json"
    steps = [("gemm", lambda: bench_gemm(T, budget, res)), ("ce", lambda: bench_ce(T, 4096, 128256, budget, res)),
             ("kernels", lambda: bench_kernels(T, budget, res)), ("sdpa", lambda: bench_sdpa(T, budget, res)), ("block", lambda: bench_block(T, budget, res, compile_too))]
    for name, fn in steps:
        if name not in only:
            continue
        try:
            fn()
        except Exception as e:  # one failing part must not lose the others
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            res[name + "_error"] = str(e)[:500]
        with open(f"{outdir}/{fname}", "w") as fh:
            json.dump(res, fh, indent=1)
    print(f"wrote {outdir}/{fname}", flush=True)


if __name__ == "__main__":
    main()

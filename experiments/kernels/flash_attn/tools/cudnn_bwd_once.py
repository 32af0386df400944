"""One cuDNN SDPA forward + backward inside an NVTX range "prof" (for ncu --nvtx-include prof/).
Usage: python3 cudnn_bwd_once.py S [causal]"""
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

S = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
causal = len(sys.argv) > 2 and sys.argv[2] == "causal"
torch.manual_seed(0)
q, k, v, do = (torch.randn(1, 32, S, 128, device="cuda", dtype=torch.bfloat16) for _ in range(4))
for t in (q, k, v):
    t.requires_grad_(True)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        o.backward(do)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    o.backward(do)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("cudnn fwd+bwd done", S, "causal" if causal else "full")

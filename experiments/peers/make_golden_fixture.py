#!/usr/bin/env python3
"""Golden fixture from the reference implementation (Hugging Face transformers).

Builds a tiny random LLaMA (GQA 4:2, llama3 rope scaling, untied head, random
norm weights) in float64 with eager attention, runs one sequence through it,
and saves weights, tokens, logits, the mean next-token loss and every
parameter gradient to HDF5 under Hugging Face names. Run on the GPU machine,
where transformers is installed:

    python3 experiments/peers/make_golden_fixture.py tests/fixtures/llama_tiny_golden.h5

The C++ test tests/test_golden.cpp loads the weights and must match.
"""
import json
import sys

import h5py
import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def main(out):
    torch.manual_seed(20261202)
    kw = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
              rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
              hidden_act="silu", initializer_range=0.3)
    rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        cfg = LlamaConfig(rope_parameters=rope, **kw)
    else:
        cfg = LlamaConfig(rope_theta=rope["rope_theta"],
                          rope_scaling={k: v for k, v in rope.items() if k != "rope_theta"}, **kw)
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    s = 24
    tokens = torch.randint(0, cfg.vocab_size, (1, s))
    outs = model(input_ids=tokens, labels=tokens)  # HF shifts labels itself
    outs.loss.backward()
    with h5py.File(out, "w") as f:
        f.attrs["config_json"] = np.bytes_(cfg.to_json_string().encode())
        f.attrs["transformers_version"] = np.bytes_(f"{transformers.__version__}".encode())
        f.attrs["torch_version"] = np.bytes_(f"{torch.__version__}".encode())
        f.attrs["note"] = np.bytes_(b"labels = tokens shifted by one (mean over s-1 tokens), position ids 0..s-1, float64")
        f["tokens"] = tokens[0].numpy().astype(np.int32)
        f["logits"] = outs.logits[0].detach().numpy()
        f["loss"] = np.array([outs.loss.item()])
        for name, p in model.named_parameters():
            f["params/" + name] = p.detach().numpy()
            f["grads/" + name] = p.grad.numpy()
    print(f"wrote {out}: loss {outs.loss.item():.6f}, transformers {transformers.__version__}")
    print(json.dumps(json.loads(cfg.to_json_string()).get("rope_parameters", {})))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "llama_tiny_golden.h5")

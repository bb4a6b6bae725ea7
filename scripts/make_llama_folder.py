#!/usr/bin/env python3
"""Write a Llama-family model folder (config.json + model.safetensors) with
random weights, through transformers, for `kernelkit model` on a GPU machine.

  python3 scripts/make_llama_folder.py OUT_DIR [--layers 2] [--hidden 4096]
      [--heads 32] [--kv-heads 8] [--head-dim 128] [--intermediate 14336]
      [--vocab 1024] [--dtype bfloat16] [--seed 0]

The defaults are a Llama-3-8B-shaped layer stack (issue 19's anchor) with a
small vocabulary, so the folder stays small. Weights are initialised on the
GPU when there is one (fast), with transformers' own initialiser.
"""
import argparse

import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=14336)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    cfg = transformers.LlamaConfig(
        hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
        vocab_size=a.vocab, rms_norm_eps=1e-5, rope_theta=500000.0,
        max_position_embeddings=131072, torch_dtype=a.dtype)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(dev):
        model = transformers.LlamaForCausalLM(cfg).to(getattr(torch, a.dtype))
    model.save_pretrained(a.out, safe_serialization=True)
    print(f"wrote {a.out}: {a.layers} layers, hidden {a.hidden}, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()

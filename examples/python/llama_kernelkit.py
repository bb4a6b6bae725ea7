"""A Hugging Face Llama with KernelKit attention, against SDPA.

A tiny Llama of a random configuration (no download: the weights are drawn
from a seed) runs the same tokens twice, with attn_implementation="sdpa" and
"kernelkit" (registered by kernelkit.torch), and the logits and the greedy
continuations are compared:

    python examples/python/llama_kernelkit.py                    # CPU, float32
    python examples/python/llama_kernelkit.py --device cuda --dtype bfloat16

Exit status 0 when the logits agree within the dtype's tolerance (float32:
1e-4, bfloat16: 5e-2 absolute on logits of unit scale) and the greedy tokens
are the same, 1 otherwise. Needs torch and transformers; the
kernelkit package (pip install . from the repository root, or
KERNELKIT_LIBRARY=build/libkernelkit.so PYTHONPATH=python).
"""

import argparse
import sys

import torch

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def tiny_llama(attn_implementation: str, dtype=torch.float32, device="cpu", seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    import kernelkit.torch

    kernelkit.torch.register_transformers()
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # GQA
        head_dim=32,
        max_position_embeddings=256,
        attn_implementation=attn_implementation,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    return model.to(device=device, dtype=dtype).eval()


def compare(device="cpu", dtype=torch.float32, seq=24, new_tokens=8, verbose=True):
    """Logits of both implementations on the same random tokens; returns
    (max abs difference of the logits, greedy tokens equal)."""
    ref = tiny_llama("sdpa", dtype, device)
    kk = tiny_llama("kernelkit", dtype, device)
    kk.load_state_dict(ref.state_dict())
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 256, (2, seq), generator=g).to(device)
    with torch.no_grad():
        a = ref(ids).logits.float()
        b = kk(ids).logits.float()
        diff = (a - b).abs().max().item()
        kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                  do_sample=False, pad_token_id=0)
        ga = ref.generate(ids, **kw)
        gb = kk.generate(ids, **kw)
    same = torch.equal(ga, gb)
    if verbose:
        print(f"device {device}, {dtype}: max |logits(kernelkit) - logits(sdpa)| = {diff:.3g} "
              f"(tolerance {TOLERANCE[dtype]:g}); greedy tokens equal: {same}")
    return diff, same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    diff, same = compare(args.device, dtype)
    return 0 if diff <= TOLERANCE[dtype] and (same or dtype != torch.float32) else 1


if __name__ == "__main__":
    sys.exit(main())

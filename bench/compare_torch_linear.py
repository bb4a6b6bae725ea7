#!/usr/bin/env python3
"""PyTorch's GEMM, Linear + activation and SwiGLU, timed as anchors for gemm/linear.

For the gemm and linear cases of a kernelkit suite (bench/suites/gemm.json) this times,
on the same shapes and dtype:

  torch_linear           F.linear(x, W, b) then the activation (cuBLAS; bias in cuBLASLt),
                         then + r for residual=1 cases
  torch_addmm_gelu       torch._addmm_activation(b, x, W^T, use_gelu=True): cuBLASLt's GELU
                         epilogue (gelu_tanh and gelu_erf cases; cuBLASLt's GELU is tanh)
  torch_swiglu_eager     silu(F.linear(x, Wg, bg)) * F.linear(x, Wu, bu)
  torch_swiglu_compile   the same under torch.compile
  torch_mm               torch.mm(a, b^T) for gemm cases (cuBLAS)

f32 cases are timed twice, with torch.backends.cuda.matmul.allow_tf32 on (the impl name
ends in _tf32: KernelKit's KK_TF32=1) and off (_ieee: KK_TF32=0, exact FMA).

as `kernelkit bench --cold` times KernelKit (bench/anchor_timing.py), and writes the raw
samples for `kernelkit bench --import`. Runs on the GPU machine only:

  python3 bench/compare_torch_linear.py bench/suites/gemm.json samples.json
  ./build/kernelkit bench --device cuda:0 --import samples.json -o torch-gemm.json
"""
import json
import sys

import torch
import torch.nn.functional as F

from anchor_timing import Samples, Timer

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
ACTS = {"none": lambda h: h, "relu": F.relu, "silu": F.silu,
        "gelu_erf": lambda h: F.gelu(h), "gelu_tanh": lambda h: F.gelu(h, approximate="tanh")}


def swiglu(x, wg, wu, bg, bu):
    return F.silu(F.linear(x, wg, bg)) * F.linear(x, wu, bu)


def main(suite_path, out_path):
    suite = json.load(open(suite_path))
    timer, out = Timer(), Samples()
    gen = torch.Generator(device="cuda").manual_seed(1)
    compiled = torch.compile(swiglu)
    with torch.inference_mode():
        for case in suite["cases"]:
            p = dict(kv.split("=") for kv in case["params"].replace(",", " ").split())
            if case["op"] not in ("gemm", "linear"):
                continue
            m, n, k = int(p["M"]), int(p["N"]), int(p["K"])
            dt = DTYPES[p.get("dtype", "bf16")]

            def rand(*shape):
                return torch.randn(*shape, generator=gen, device="cuda", dtype=dt)
            x, w = rand(m, k), rand(n, k)
            runs = {}
            if case["op"] == "gemm":
                runs["torch_mm"] = lambda: torch.mm(x, w.t())
            else:
                act = p.get("activation", "none")
                b = rand(n) if p.get("bias", "1") == "1" else None
                if act == "swiglu":
                    wu, bu = rand(n, k), (rand(n) if b is not None else None)
                    runs["torch_swiglu_eager"] = lambda: swiglu(x, w, wu, b, bu)
                    runs["torch_swiglu_compile"] = lambda: compiled(x, w, wu, b, bu)
                else:
                    f = ACTS[act]
                    if p.get("residual", "0") == "1":  # y = act(x W^T + b) + r, one more kernel
                        r = rand(m, n)
                        runs["torch_linear"] = lambda: f(F.linear(x, w, b)) + r
                    else:
                        runs["torch_linear"] = lambda: f(F.linear(x, w, b))
                    if act.startswith("gelu") and b is not None:
                        runs["torch_addmm_gelu"] = lambda: torch._addmm_activation(
                            b, x, w.t(), use_gelu=True)
            modes = [("_tf32", True), ("_ieee", False)] if dt == torch.float32 else [("", None)]
            for impl, fn in runs.items():
                for suffix, tf32 in modes:
                    if tf32 is not None:
                        torch.backends.cuda.matmul.allow_tf32 = tf32
                    samples = timer.time(fn)
                    out.add(f"anchor/{impl}{suffix}/{case['name']}", case["op"], case["params"],
                            impl + suffix, samples, flush=timer.flush_mode)
                    print(f"{case['name']:44s} {impl + suffix:22s} median "
                          f"{sorted(samples)[len(samples) // 2] * 1e6:10.2f} us", flush=True)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.cuda.empty_cache()
    out.write(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""PyTorch's FP8 GEMM (torch._scaled_mm, cuBLASLt), timed as anchors for fp8_gemm.

For the fp8_gemm cases of a kernelkit suite (bench/suites/fp8_gemm.json) this times,
on the same shapes, dtypes and scaling:

  torch_scaled_mm        torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype) with
                         use_fast_accum=False (cuBLASLt promotes the FP8 sums, as
                         KernelKit's default kernel does)
  torch_scaled_mm_fast   the same with use_fast_accum=True (KK_FP8_FAST_ACCUM=1's peer)

for scaling=tensor (f32 scalar scales) and scaling=rowwise (scale_a [M, 1], scale_b
[1, N]; bf16 out only, as PyTorch requires). Block-scaled cases have no anchor here
(PyTorch's block-wise _scaled_mm is not in every release) and are skipped. Timed as
`kernelkit bench --cold` times KernelKit (bench/anchor_timing.py); writes the raw
samples for `kernelkit bench --import`. Runs on the GPU machine only:

  python3 bench/compare_torch_fp8.py bench/suites/fp8_gemm.json samples.json
  ./build/kernelkit bench --device cuda:0 --import samples.json -o torch-fp8.json
"""
import json
import sys

import torch

from anchor_timing import Samples, Timer

FP8 = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
OUT = {"bf16": torch.bfloat16, "f32": torch.float32}


def operands(p, gen):
    m, n, k = int(p["M"]), int(p["N"]), int(p["K"])

    def fp8(rows, dtype):
        x = torch.randn(rows, k, generator=gen, device="cuda", dtype=torch.float32)
        return x.to(FP8[dtype])
    a = fp8(m, p.get("a_dtype", "fp8_e4m3"))
    b = fp8(n, p.get("b_dtype", "fp8_e4m3"))
    if p.get("scaling", "tensor") == "rowwise":
        sa = torch.rand(m, 1, generator=gen, device="cuda") + 0.5
        sb = torch.rand(1, n, generator=gen, device="cuda") + 0.5
    else:
        sa = torch.rand((), generator=gen, device="cuda") + 0.5
        sb = torch.rand((), generator=gen, device="cuda") + 0.5
    return a, b, sa, sb


def main(suite_path, out_path):
    suite = json.load(open(suite_path))
    timer, out = Timer(), Samples()
    gen = torch.Generator(device="cuda").manual_seed(1)
    with torch.inference_mode():
        for case in suite["cases"]:
            if case["op"] != "fp8_gemm":
                continue
            p = dict(kv.split("=") for kv in case["params"].replace(",", " ").split())
            scaling = p.get("scaling", "tensor")
            if scaling == "block":
                print(f"{case['name']:44s} skipped: no block-scaled anchor", flush=True)
                continue
            a, b, sa, sb = operands(p, gen)
            out_dtype = OUT[p.get("c_dtype", "bf16")]
            bt = b.t()  # [K, N] column-major, as _scaled_mm takes its second operand
            runs = {}
            for impl, fast in (("torch_scaled_mm", False), ("torch_scaled_mm_fast", True)):
                def fn(fast=fast):
                    return torch._scaled_mm(a, bt, scale_a=sa, scale_b=sb, out_dtype=out_dtype,
                                            use_fast_accum=fast)
                runs[impl] = fn
            for impl, fn in runs.items():
                try:
                    fn()
                except RuntimeError as e:  # a dtype pair or mode this release lacks
                    print(f"{case['name']:44s} {impl:22s} unavailable: {str(e)[:80]}", flush=True)
                    continue
                samples = timer.time(fn)
                out.add(f"anchor/{impl}/{case['name']}", case["op"], case["params"], impl,
                        samples, flush=timer.flush_mode)
                med = sorted(samples)[len(samples) // 2]
                tflops = 2.0 * int(p["M"]) * int(p["N"]) * int(p["K"]) / med / 1e12
                print(f"{case['name']:44s} {impl:22s} median {med * 1e6:10.2f} us "
                      f"{tflops:7.1f} TFLOP/s", flush=True)
            del a, b, sa, sb, bt, runs
            torch.cuda.empty_cache()
    out.write(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

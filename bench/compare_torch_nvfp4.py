#!/usr/bin/env python3
"""What a Hopper user has today for an NVFP4 GEMV, timed as anchors for nvfp4_gemv.

Hopper has no FP4 tensor core, so the alternative to KernelKit's kernel is to
dequantize a (e2m1 codes times their e4m3 block scales) to bf16 and call
torch.matmul (cuBLAS) in bf16. For the cases of a kernelkit nvfp4_gemv suite
(GPU MODE's three benchmark shapes) this times

  torch_bf16_gemv          the GEMV alone, on weights dequantized beforehand
  torch_dequant_bf16_gemv  dequantize (a torch e2m1 table and the scale multiply) + GEMV

as `kernelkit bench --cold` times KernelKit (bench/anchor_timing.py: CUDA events
around the work alone, the L2 flushed before every sample), and writes the raw
samples; `kernelkit bench --import` makes them a results file with KernelKit's
statistics and the registry's byte counts, paired with KernelKit's entries by
`kernelkit report`. Runs on the GPU machine only:

  python3 bench/compare_torch_nvfp4.py bench/suites/nvfp4_gemv.json samples.json
  ./build/kernelkit bench --device cuda:0 --import samples.json -o torch-nvfp4.json
  ./build/kernelkit bench --device cuda:0 --suite nvfp4_gemv --cold -o kernelkit-nvfp4.json
  ./build/kernelkit report kernelkit-nvfp4.json torch-nvfp4.json --output report.md

KK_BENCH_FLUSH=read (with `kernelkit bench --flush read`) flushes the L2 by
reading instead of writing; the mode is recorded in the samples file.
"""
import json
import sys

import torch

from anchor_timing import Samples, Timer

# e2m1 code -> value; the low nibble of a byte is the first element
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def make_inputs(m, k, l, gen):
    """Every e2m1 code; e4m3 scales of magnitude 2^-6..2^2 (the `full` distribution)."""
    a = torch.randint(0, 256, (l, m, k // 2), dtype=torch.uint8, generator=gen, device="cuda")
    b = torch.randint(0, 256, (l, 1, k // 2), dtype=torch.uint8, generator=gen, device="cuda")

    def scales(rows):
        e = torch.randint(-6, 2, (l, rows, k // 16), generator=gen, device="cuda").float()
        u = 1 + torch.rand(l, rows, k // 16, generator=gen, device="cuda")
        return (torch.exp2(e) * u).to(torch.float8_e4m3fn)
    return a, b, scales(m), scales(1)


def dequant_bf16(codes, scale, lut):
    """[L, R, K/2] e2m1 bytes and [L, R, K/16] e4m3 scales -> [L, R, K] bf16 (exact)."""
    l, r, half = codes.shape
    vals = lut[torch.stack((codes & 0xF, codes >> 4), dim=-1).long()].reshape(l, r, half * 2)
    return (vals.reshape(l, r, -1, 16) * scale.to(torch.bfloat16).unsqueeze(-1)).reshape(l, r, -1)


def main(suite_path, out_path):
    suite = json.load(open(suite_path))
    timer, out = Timer(), Samples()
    lut = torch.tensor(E2M1, dtype=torch.bfloat16, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(1)
    with torch.inference_mode():
        for case in suite["cases"]:
            p = dict(kv.split("=") for kv in case["params"].replace(",", " ").split())
            if case["op"] != "nvfp4_gemv" or p.get("global", "0") != "0":
                continue
            m, k, l = int(p["M"]), int(p["K"]), int(p.get("L", 1))
            a, b, sa, sb = make_inputs(m, k, l, gen)
            av = dequant_bf16(a, sa, lut)                  # [L, M, K] bf16, made beforehand
            bv = dequant_bf16(b, sb, lut).transpose(1, 2)  # [L, K, 1]
            runs = {"torch_bf16_gemv": lambda: torch.matmul(av, bv),
                    "torch_dequant_bf16_gemv": lambda: torch.matmul(
                        dequant_bf16(a, sa, lut), dequant_bf16(b, sb, lut).transpose(1, 2))}
            for impl, fn in runs.items():
                samples = timer.time(fn)
                out.add(f"anchor/{impl}/{case['name']}", "nvfp4_gemv", case["params"], impl,
                        samples, flush=timer.flush_mode)
                print(f"{case['name']:40s} {impl:24s} median "
                      f"{sorted(samples)[len(samples) // 2] * 1e6:9.2f} us", flush=True)
            del av, bv, a, b, sa, sb
            torch.cuda.empty_cache()
    out.write(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

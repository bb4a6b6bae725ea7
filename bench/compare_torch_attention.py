"""PyTorch SDPA (its FlashAttention-2 and cuDNN backends) on the cases of a
kernelkit attention suite, for the side-by-side comparison (ANCHORS.md). Cases
of `attention_backward` time SDPA's backward alone (torch.autograd.grad of one
kept forward, dq, dk and dv):
    python3 bench/compare_torch_attention.py bench/suites/attention-backward.json samples.json

    python3 bench/compare_torch_attention.py bench/suites/attention.json samples.json
    kernelkit bench --device cuda:0 --import samples.json -o torch-attention.json
    kernelkit bench --device cuda:0 --suite attention -o kernelkit-attention.json
    kernelkit report kernelkit-attention.json torch-attention.json --output report.md

The L2 flush before each sample is a write (GPU MODE's rule) unless
KK_BENCH_FLUSH=read, which pairs with `kernelkit bench --flush read`
(bench/anchor_timing.py); the mode is recorded in the samples file.

Each case's parameters are the suite's own, so the entries pair with
KernelKit's. The mask is bottom-right aligned like KernelKit's: for Sq == Sk
(every case of the suites) that is SDPA's is_causal. Cases SDPA cannot express
(windows, Sq != Sk with causal, dropout) are skipped with a note.
"""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from anchor_timing import Samples, Timer

BACKENDS = {"torch_sdpa_flash": SDPBackend.FLASH_ATTENTION,
            "torch_sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def parse(params):
    p = dict(kv.split("=") for kv in params.replace(",", " ").split())
    return p


def main(suite_path, out_path):
    suite = json.load(open(suite_path))
    timer, out = Timer(), Samples()
    for case in suite["cases"]:
        if case["op"] not in ("attention", "attention_backward"):
            continue
        backward = case["op"] == "attention_backward"
        p = parse(case["params"])
        B, Hq, Hkv = int(p["B"]), int(p["Hq"]), int(p.get("Hkv", p["Hq"]))
        Sq, Sk, D = int(p["Sq"]), int(p["Sk"]), int(p.get("D", 64))
        causal = p.get("causal", "0") in ("1", "true")
        if (int(p.get("window_left", -1)) >= 0 or int(p.get("window_right", -1)) >= 0
                or float(p.get("dropout", 0)) > 0 or (causal and Sq != Sk)):
            print(f"skip {case['name']}: SDPA has no bottom-right/window/dropout match",
                  file=sys.stderr)
            continue
        dt = DTYPES[p.get("dtype", "bf16")]
        q = torch.randn(B, Hq, Sq, D, dtype=dt, device="cuda", requires_grad=backward)
        k = torch.randn(B, Hkv, Sk, D, dtype=dt, device="cuda", requires_grad=backward)
        v = torch.randn(B, Hkv, Sk, D, dtype=dt, device="cuda", requires_grad=backward)
        for impl, backend in BACKENDS.items():
            def forward():
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal, enable_gqa=Hq != Hkv)
            run = forward
            try:
                if backward:  # the backward alone: dq, dk, dv of one forward, kept
                    o = forward()
                    do = torch.randn_like(o)

                    def run():
                        return torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
                samples = timer.time(run)
            except RuntimeError as e:  # the backend refuses this shape
                print(f"skip {case['name']} {impl}: {str(e).splitlines()[0]}", file=sys.stderr)
                continue
            out.add(f"anchor/{impl}/{case['name']}", case["op"], case["params"], impl, samples,
                    flush=timer.flush_mode)
            med = sorted(samples)[len(samples) // 2]
            print(f"{case['name']:44s} {impl:18s} median {med * 1e6:10.1f} us")
    out.write(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

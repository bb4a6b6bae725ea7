#!/usr/bin/env python3
"""PyTorch CPU anchors on the cases of a KernelKit bench suite, as raw samples for
`kernelkit bench --device cpu --import` (bench/anchor_timing.py's format).

    python bench/cpu/torch_cpu.py bench/suites/cpu-linear.json --threads 2 \
        --time-budget 3 --output raw.json
    kernelkit bench --device cpu --import raw.json -o torch-cpu-linear.json

Each case is timed as its PyTorch equivalent on inputs of the same shapes and dtype:
gemm as x @ W.T, linear as act(F.linear(x, W, b)) (F.gelu with approximate="none" or
"tanh", F.relu, F.silu; swiglu as silu(x·Wgᵀ + bg) * (x·Wuᵀ + bu)), attention as
F.scaled_dot_product_attention(q, k, v, is_causal=...). torch.set_num_threads(N),
warm-up calls, then one sample per call (time.perf_counter) until the time budget is
spent. Entries keep the case's own params string and "implementation": "torch_cpu", so
KernelKit computes statistics, FLOPs and bytes exactly as for its own entry and `kernelkit
report` pairs the two. Cases PyTorch cannot express are skipped with a note on stderr.
PyTorch is a measuring tool only, run from bench/cpu/.venv (bench/cpu/run.sh makes it).
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# The registry's defaults (src/harness/registry.c) for the parameters used here.
DEFAULTS = {
    "gemm": {"M": "256", "N": "256", "K": "256", "dtype": "bf16"},
    "linear": {"M": "256", "N": "256", "K": "256", "bias": "1", "activation": "none",
               "dtype": "bf16"},
    "attention": {"B": "1", "Hq": "4", "Hkv": "4", "Sq": "128", "Sk": "128", "D": "64",
                  "causal": "0", "window_left": "-1", "window_right": "-1", "scale": "0",
                  "lse": "0", "dtype": "bf16", "dropout": "0"},
}
ACTIVATIONS = {
    "none": lambda h: h,
    "relu": F.relu,
    "gelu_erf": lambda h: F.gelu(h, approximate="none"),
    "gelu_tanh": lambda h: F.gelu(h, approximate="tanh"),
    "silu": F.silu,
}


def is_true(text):
    return text.lower() in ("1", "true", "yes", "on")


def make_call(op, text, gen):
    """The call to time for one case, or a string saying why PyTorch cannot express it."""
    if op not in DEFAULTS:
        return f"no PyTorch CPU equivalent measured for op {op!r}"
    p = dict(DEFAULTS[op])
    p.update(kv.split("=", 1) for kv in text.replace(",", " ").split())
    dt = DTYPES[p["dtype"].lower()]

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dt)

    if op in ("gemm", "linear"):
        m, n, k = int(p["M"]), int(p["N"]), int(p["K"])
        x, w = randn(m, k), randn(n, k)
        if op == "gemm":
            return lambda: x @ w.T
        b = randn(n) if is_true(p["bias"]) else None
        act = p["activation"].lower()
        if act == "swiglu":
            w_up, b_up = randn(n, k), randn(n) if b is not None else None
            return lambda: F.silu(F.linear(x, w, b)) * F.linear(x, w_up, b_up)
        f = ACTIVATIONS[act]
        return lambda: f(F.linear(x, w, b))
    B, hq, hkv = int(p["B"]), int(p["Hq"]), int(p["Hkv"])
    sq, sk, d, causal = int(p["Sq"]), int(p["Sk"]), int(p["D"]), is_true(p["causal"])
    if causal and sq != sk:
        return "SDPA's is_causal is top-left aligned, KernelKit's bottom-right (Sq != Sk)"
    if (int(p["window_left"]) >= 0 or int(p["window_right"]) >= 0
            or float(p["dropout"]) > 0 or is_true(p["lse"])):
        return "windows, seeded dropout and the lse output have no SDPA equivalent"
    q, k, v = randn(B, hq, sq, d), randn(B, hkv, sk, d), randn(B, hkv, sk, d)
    scale = float(p["scale"]) or None
    kw = {"enable_gqa": True} if hq != hkv else {}
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                                  **kw)


def measure(fn, budget_s, warmup, min_samples):
    """Warm-up calls, then one sample per call until the budget is spent."""
    for _ in range(warmup):
        fn()
    samples = []
    start = time.perf_counter()
    while len(samples) < min_samples or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
        if len(samples) >= 100000:
            break
    return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", help="a kernelkit suite file (bench/suites/*.json)")
    ap.add_argument("--threads", type=int, required=True, help="torch.set_num_threads")
    ap.add_argument("--time-budget", type=float, default=3.0, help="seconds per case")
    ap.add_argument("--output", required=True, help="raw samples for kernelkit bench --import")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls first")
    ap.add_argument("--min-samples", type=int, default=5)
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    args = ap.parse_args()
    if args.threads < 1:
        sys.exit("--threads must be at least 1")
    torch.set_num_threads(args.threads)
    out = []
    for i, case in enumerate(json.load(open(args.suite))["cases"]):
        if args.filter not in case["name"]:
            continue
        call = make_call(case["op"], case["params"], torch.Generator().manual_seed(1 + i))
        if isinstance(call, str):
            print(f"skip {case['name']}: {call}", file=sys.stderr)
            continue
        with torch.inference_mode():
            samples = measure(call, args.time_budget, args.warmup, args.min_samples)
        out.append({"name": f"anchor/torch_cpu/{case['name']}", "op": case["op"],
                    "params": case["params"], "implementation": "torch_cpu",
                    "samples": samples, "cold": False})
        med = sorted(samples)[len(samples) // 2]
        print(f"{case['name']:<44} torch_cpu median {med * 1e3:10.3f} ms  n={len(samples)}",
              flush=True)
    if not out:
        sys.exit(f"{args.suite}: no case PyTorch can measure")
    with open(args.output, "w") as f:
        json.dump({"benchmarks": out}, f)


if __name__ == "__main__":
    main()

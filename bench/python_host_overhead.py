"""The host cost of one kernelkit.attention(q, k, v) call on torch tensors,
beside torch.nn.functional.scaled_dot_product_attention's own, in one run
(issue 20's host-overhead figure).

On CUDA (the figure that counts) the stream is first held by a sleeping kernel
(torch.cuda._sleep), so every timed call only enqueues its work: the time per
call is what the calling thread pays (marshalling, checks, launch), not the
GPU's. Measured, each as the median over `--rounds` batches of `--calls` calls,
the variants interleaved round by round so that they see the same machine:

  sdpa            F.scaled_dot_product_attention(q, k, v, is_causal=True)
                  (k, v with Hq heads: SDPA has no GQA without enable_gqa)
  kernelkit       kernelkit.attention on plain torch tensors: the fast path
                  (kernelkit/_fastpath.py: four descriptors packed at once,
                  torch's raw stream handle)
  kernelkit_general  the same call with the fast path off (KERNELKIT_FASTPATH=0):
                  the general "auto" path, tensors read from data_ptr/stride
  kernelkit_dlpack  the same through __dlpack__ (set_array_path("dlpack"))
  custom_op       torch.ops.kernelkit.attention (the torch.library op:
                  dispatcher + the same call)

On the CPU there is no queue to fill: the calls run, so a tiny shape
(--cpu-shape) is used where both sides are mostly overhead; the figure there
is an upper bound of the host cost.

    python bench/python_host_overhead.py --device cuda --out bench/results/python-host-overhead.json
    KERNELKIT_LIBRARY=build/libkernelkit.so PYTHONPATH=python python bench/python_host_overhead.py --device cpu
"""

import argparse
import json
import platform
import statistics
import sys
import time

import torch

import kernelkit
import kernelkit.torch  # noqa: F401  (torch.ops.kernelkit.*)
from kernelkit import _fastpath


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--shape", default="1,16,1,128,128",
                    help="B,Hq,Sq,Sk,D on CUDA (default: one decode step)")
    ap.add_argument("--cpu-shape", default="1,1,1,16,16", help="B,Hq,Sq,Sk,D on the CPU")
    ap.add_argument("--hkv", type=int, default=0, help="KV heads (0 = Hq)")
    ap.add_argument("--calls", type=int, default=100, help="calls per timed batch")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--out", help="write the results as JSON to this file")
    a = ap.parse_args()

    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    dtype = getattr(torch, a.dtype)
    B, Hq, Sq, Sk, D = (int(v) for v in (a.shape if cuda else a.cpu_shape).split(","))
    Hkv = a.hkv or Hq
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, Hq, Sq, D, generator=g).to(dev, dtype)
    k = torch.randn(B, Hkv, Sk, D, generator=g).to(dev, dtype)
    v = torch.randn(B, Hkv, Sk, D, generator=g).to(dev, dtype)
    ks, vs = k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1)
    causal = Sq > 1

    def sdpa():
        torch.nn.functional.scaled_dot_product_attention(q, ks, vs, is_causal=causal)

    def kk():
        kernelkit.attention(q, k, v, causal=causal)

    def kk_dlpack():
        kernelkit.attention(q, k, v, causal=causal)

    def custom_op():
        torch.ops.kernelkit.attention(q, k, v, causal)

    variants = {"sdpa": sdpa, "kernelkit": kk, "kernelkit_general": kk,
                "kernelkit_dlpack": kk_dlpack, "custom_op": custom_op}
    paths = {"kernelkit_dlpack": "dlpack"}

    def batch(fn, path, fast=True):
        old = kernelkit.set_array_path(path)
        _fastpath.enabled = fast
        try:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda._sleep(int(2e8))  # hold the stream: only enqueueing is timed
            t0 = time.perf_counter()
            for _ in range(a.calls):
                fn()
            t = time.perf_counter() - t0
            if cuda:
                torch.cuda.synchronize()
        finally:
            kernelkit.set_array_path(old)
            _fastpath.enabled = True
        return t / a.calls

    for name, fn in variants.items():  # warm-up (first-call lookups, compile caches)
        batch(fn, paths.get(name, "auto"), name != "kernelkit_general")
    samples = {name: [] for name in variants}
    for _ in range(a.rounds):
        for name, fn in variants.items():
            samples[name].append(batch(fn, paths.get(name, "auto"), name != "kernelkit_general"))
    med = {name: statistics.median(s) for name, s in samples.items()}
    res = {
        "what": "host seconds per call (median of rounds of --calls calls)",
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if cuda else platform.processor(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "kernelkit": kernelkit.version(),
        "shape": {"B": B, "Hq": Hq, "Hkv": Hkv, "Sq": Sq, "Sk": Sk, "D": D, "dtype": a.dtype,
                  "causal": causal},
        "calls_per_round": a.calls,
        "rounds": a.rounds,
        "median_s": med,
        "ratio_to_sdpa": {n: med[n] / med["sdpa"] for n in med},
        "samples_s": samples,
    }
    for n in variants:
        print(f"{n:18s} {med[n] * 1e6:8.2f} us/call  ({med[n] / med['sdpa']:.2f}x sdpa)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Timing anchors (PyTorch, cuBLAS, cuDNN) the way `kernelkit bench` times
KernelKit, for the side-by-side scripts in bench/: CUDA events around the work
alone, the L2 flushed before every sample (a buffer of twice the L2, written
before the start event), warm-up first, then a fixed number of samples.

The script writes raw samples only; `kernelkit bench --import FILE -o OUT`
turns them into a kernelkit.bench/1 results file with KernelKit's own
statistics, environment capture and the registry's FLOP and byte counts, so an
anchor and a KernelKit entry of the same op and parameters are paired by
`kernelkit report`. Runs only where PyTorch and a GPU are (the lent GPU machine).
"""
import json

import torch


class Timer:
    def __init__(self, warmup=5, samples=30, cold=True):
        self.warmup, self.samples, self.cold = warmup, samples, cold
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")
        self.start = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        self.stop = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]

    def time(self, fn):
        """Seconds per call of fn (which enqueues GPU work), one per sample."""
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        for i in range(self.samples):
            if self.cold:
                self.flush.random_(0, 255)  # not timed: before the start event
            self.start[i].record()
            fn()
            self.stop[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e-3 for s, e in zip(self.start, self.stop)]


class Samples:
    """The file `kernelkit bench --import` reads."""

    def __init__(self):
        self.benchmarks = []

    def add(self, name, op, params, implementation, samples, cold=True):
        self.benchmarks.append({"name": name, "op": op, "params": params,
                                "implementation": implementation,
                                "samples": samples, "cold": cold})

    def write(self, path):
        with open(path, "w") as f:
            json.dump({"benchmarks": self.benchmarks}, f)

"""Timing anchors (PyTorch, cuBLAS, cuDNN) the way `kernelkit bench` times
KernelKit, for the side-by-side scripts in bench/: CUDA events around the work
alone, the L2 flushed before every sample (outside the timed region, before
the start event), warm-up first, then a fixed number of samples.

The flush has two modes, as `kernelkit bench --flush` does:
  write (default, GPU MODE's rule): write a buffer of twice the L2. It leaves
        the L2 full of dirty lines, whose write-back then lands inside the
        next timed sample (~L2 bytes of extra HBM writes).
  read: sum a buffer of twice the L2 (read-only): the L2 is left holding
        clean lines, and the previous sample's dirty outputs are written back
        during the flush, not inside the sample.
Timer(flush=...) picks it; without an argument the environment variable
KK_BENCH_FLUSH (write or read) does, so the side-by-side scripts time the
anchors the way `kernelkit bench --flush MODE` times KernelKit:
    KK_BENCH_FLUSH=read python3 bench/compare_torch_attention.py SUITE samples.json
The mode is written to the samples file ("flush") and kept by --import.

Before the start event a spin kernel (torch.cuda._sleep, ~1 ms) holds the
stream while the host enqueues the event and the work, as kernelkit bench's
blocking kernel does: otherwise, when the flush ends before the host has
enqueued the work (a fast flush, a library call with tens of microseconds of
host-side dispatch), the GPU idles after the start event and host time lands
in the sample. Seen on an H100 before the spin: SDPA decode at B = 1, 8192
keys, 68 us with the write flush and 122 us with the (faster) read flush.

The script writes raw samples only; `kernelkit bench --import FILE -o OUT`
turns them into a kernelkit.bench/1 results file with KernelKit's own
statistics, environment capture and the registry's FLOP and byte counts, so an
anchor and a KernelKit entry of the same op and parameters are paired by
`kernelkit report`. Runs only where PyTorch and a GPU are (the lent GPU machine).
"""
import json
import os

import torch

FLUSH_MODES = ("write", "read")


def flush_mode(flush=None):
    """The flush mode: `flush` if given, else $KK_BENCH_FLUSH, else "write"."""
    mode = flush if flush is not None else os.environ.get("KK_BENCH_FLUSH", "") or "write"
    if mode not in FLUSH_MODES:
        raise ValueError(f"flush mode {mode!r} (from "
                         f"{'the flush argument' if flush is not None else 'KK_BENCH_FLUSH'}): "
                         f"expected one of {', '.join(FLUSH_MODES)}")
    return mode


class Timer:
    HOLD_CYCLES = 2_000_000  # the spin before each sample: ~1 ms at 2 GHz

    def __init__(self, warmup=5, samples=30, cold=True, flush=None):
        self.warmup, self.samples, self.cold = warmup, samples, cold
        self.flush_mode = flush_mode(flush)
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        nbytes = (max(2 * l2, 1 << 20) + 15) // 16 * 16  # whole int64 words for the read
        self.flush = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        if self.flush_mode == "read":
            self.flush.zero_()  # defined contents; the sweeps only read them
            self.flush_words = self.flush.view(torch.int64)
            self._flush()
            torch.cuda.synchronize()
        self.start = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        self.stop = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]

    def _flush(self):
        if self.flush_mode == "read":
            self.flush_words.sum()  # reads 2x the L2 (read-only); writes one int64
        else:
            self.flush.random_(0, 255)  # writes 2x the L2: dirty lines left behind

    def time(self, fn):
        """Seconds per call of fn (which enqueues GPU work), one per sample."""
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        for i in range(self.samples):
            if self.cold:
                self._flush()  # not timed: before the start event
            torch.cuda._sleep(self.HOLD_CYCLES)  # holds the stream while the host enqueues
            self.start[i].record()
            fn()
            self.stop[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e-3 for s, e in zip(self.start, self.stop)]


class Samples:
    """The file `kernelkit bench --import` reads."""

    def __init__(self):
        self.benchmarks = []

    def add(self, name, op, params, implementation, samples, cold=True, flush=None):
        """flush: the Timer's flush_mode (default: $KK_BENCH_FLUSH, else write)."""
        self.benchmarks.append({"name": name, "op": op, "params": params,
                                "implementation": implementation,
                                "samples": samples, "cold": cold,
                                "flush": flush_mode(flush)})

    def write(self, path):
        with open(path, "w") as f:
            json.dump({"benchmarks": self.benchmarks}, f)

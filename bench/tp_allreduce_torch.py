#!/usr/bin/env python3
"""The anchor for kk_comm's all-reduce bandwidth (bench/comm_bench.c): torch.distributed's
NCCL all_reduce on the same sizes, measured the same way (nccl-tests arithmetic): per size,
warm-up calls, a barrier, then back-to-back in-place all-reduces timed on the host from the
start to one synchronization at the end; time = the slowest rank's mean; algbw = bytes /
time, busbw = algbw * 2 (n - 1) / n. As many calls as comm_bench makes (iters x 32 MiB /
bytes, at least iters, at most max-iters). One process per GPU (torch.multiprocessing).
Prints one JSON document in comm_bench's schema. GPU machine only.

  python3 bench/tp_allreduce_torch.py --ranks 4 [--dtype bf16] [--min 8K] [--max 256M]
      [--iters 20] [--max-iters 1000] [--warmup 5]
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * mult[text[-1].upper()]) if text[-1].upper() in mult else int(text)


def worker(rank, a, port, queue):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # as kk_comm does: the machines require it
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.ranks)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    results = []
    s = a.min
    while s <= a.max:
        calls = max(a.iters, min(a.max_iters, int(a.iters * (32 << 20) / s)))
        t = torch.empty(s // torch.empty((), dtype=dtype).element_size(), dtype=dtype,
                        device="cuda")
        for _ in range(max(a.warmup, calls // 20)):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        sec = torch.tensor([(time.perf_counter() - t0) / calls], device="cuda")
        dist.all_reduce(sec, op=dist.ReduceOp.MAX)
        sec = sec.item()
        algbw = s / sec / 1e9
        results.append({"bytes": s, "calls": calls, "time_us": round(sec * 1e6, 3), "algbw_GBps": round(algbw, 3),
                        "busbw_GBps": round(algbw * 2 * (a.ranks - 1) / a.ranks, 3)})
        del t
        s *= 2
    if rank == 0:
        v = torch.cuda.nccl.version()
        queue.put({"schema": "kernelkit.comm_bench/2", "backend": "torch.distributed nccl",
                   "nccl_version": v[0] * 10000 + v[1] * 100 + v[2] if isinstance(v, tuple) else v,
                   "torch": torch.__version__, "ranks": a.ranks, "dtype": a.dtype,
                   "iters": a.iters, "max_iters": a.max_iters, "warmup": a.warmup,
                   "ranks_as": "processes", "results": results})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--min", type=size, default=8 << 10)
    ap.add_argument("--max", type=size, default=256 << 20)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--max-iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(worker, args=(a, a.port, queue), nprocs=a.ranks, join=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()

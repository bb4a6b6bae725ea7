"""PyTorch eager and torch.compile on the cases of a kernelkit row-op suite
(rmsnorm, layernorm, softmax, rope and the fused add_rmsnorm, rmsnorm_fp8,
silu_mul), for the side-by-side comparison:

    python3 bench/compare_torch_rowops.py bench/suites/rowops.json samples.json
    kernelkit bench --device cuda:0 --import samples.json -o torch-rowops.json
    kernelkit bench --device cuda:0 --suite rowops -o kernelkit-rowops.json
    kernelkit report kernelkit-rowops.json torch-rowops.json --output report.md

The same expression both ways, on the suite's own parameters so the entries
pair with KernelKit's: F.rms_norm (x * rsqrt(mean(x^2) + eps) * w before
PyTorch 2.4), F.layer_norm, torch.softmax(x * scale, -1), and HF's
rotate_half RoPE (x * cos + rotate_half(x) * sin, or the interleaved pairs for
style=gptj) with cos/sin tables [S, D] built outside the timed region, as a
model builds them once per forward. Timing: bench/anchor_timing.py (events,
the L2 flushed before each sample; KK_BENCH_FLUSH=read for the read flush).
The fused ops: h = x + residual then F.rms_norm(h) (both returned);
F.rms_norm in f32, the amax of each 1x128 group (or row), / 448 (1 where 0),
y / scale cast to float8_e4m3fn; F.silu(g) * u (gu.chunk(2, -1) when packed).
softmax with causal=1 fills the masked keys with -inf before the softmax (the
[sq, n] mask built outside the timed region); rope with positions=1 takes
per-token cos/sin [B, S, D] from a positions tensor, with HF's llama3
inverse frequencies when scaling=llama3.
"""
import math
import json
import sys

import torch
import torch.nn.functional as F

from anchor_timing import Samples, Timer

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def parse(params):
    return dict(kv.split("=") for kv in params.replace(",", " ").split())


def rms_norm(x, w, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_neox(x, cos, sin, r):
    if r == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    xr, xp = x[..., :r], x[..., r:]
    return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


def rope_gptj(x, cos, sin, r):
    xr, xp = x[..., :r], x[..., r:]
    a, b = xr[..., 0::2], xr[..., 1::2]
    c, s = cos[..., 0::2], sin[..., 0::2]
    out = torch.stack((a * c - b * s, b * c + a * s), dim=-1).flatten(-2)
    return torch.cat((out, xp), dim=-1) if r < x.shape[-1] else out


def add_rms_norm(x, res, w, eps):
    h = x + res
    return h, rms_norm(h, w, eps)


def rms_norm_fp8(x, w, eps, group):
    y = F.rms_norm(x.float(), (x.shape[-1],), w.float(), eps)
    g = y.view(x.shape[0], -1, group or x.shape[-1])
    amax = g.abs().amax(-1, keepdim=True)
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    return (g / scale).to(torch.float8_e4m3fn).view(x.shape), scale.view(x.shape[0], -1)


def llama3_inv_freq(inv, p):
    """HF's _compute_llama3_parameters on inverse frequencies (f64)."""
    factor, low = float(p.get("factor", 8.0)), float(p.get("low_freq_factor", 1.0))
    high, old = float(p.get("high_freq_factor", 4.0)), float(p.get("original_max_position", 8192))
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - low) / (high - low)
    mid = (1 - smooth) * inv / factor + smooth * inv
    return torch.where(wavelen > old / low, inv / factor, torch.where(wavelen < old / high, inv, mid))


def make_fused(op, p, dt, dev):
    rows, n = int(p.get("rows", p.get("M", 256))), int(p.get("n", p.get("N", 1024)))
    if op == "add_rmsnorm":
        x, res = (torch.randn(rows, n, dtype=dt, device=dev) for _ in range(2))
        w = torch.randn(n, dtype=dt, device=dev)
        return add_rms_norm, (x, res, w, float(p.get("eps", 1e-6)))
    if op == "rmsnorm_fp8":
        x, w = torch.randn(rows, n, dtype=dt, device=dev), torch.randn(n, dtype=dt, device=dev)
        group, eps = int(p.get("group", 128)), float(p.get("eps", 1e-6))
        return (lambda x, w: rms_norm_fp8(x, w, eps, group)), (x, w)
    if p.get("packed", "1") in ("1", "true"):
        gu = torch.randn(rows, 2 * n, dtype=dt, device=dev)
        return (lambda gu: (lambda g, u: F.silu(g) * u)(*gu.chunk(2, dim=-1))), (gu,)
    g, u = (torch.randn(rows, n, dtype=dt, device=dev) for _ in range(2))
    return (lambda g, u: F.silu(g) * u), (g, u)


def make(op, p):
    """(fn, args) for one case: fn(*args) is the expression."""
    dt = DTYPES[p.get("dtype", "bf16")]
    dev = "cuda"
    if op in ("add_rmsnorm", "rmsnorm_fp8", "silu_mul"):
        return make_fused(op, p, dt, dev)
    if op in ("rmsnorm", "layernorm", "softmax"):
        rows, n = int(p.get("rows", 256)), int(p.get("n", 1024))
        x = torch.randn(rows, n, dtype=dt, device=dev)
        if op == "rmsnorm":
            w = torch.randn(n, dtype=dt, device=dev)
            return rms_norm, (x, w, float(p.get("eps", 1e-6)))
        if op == "layernorm":
            affine = p.get("affine", "1") in ("1", "true")
            w = torch.randn(n, dtype=dt, device=dev) if affine else None
            b = torch.randn(n, dtype=dt, device=dev) if affine else None
            eps = float(p.get("eps", 1e-5))
            return (lambda x, w, b: F.layer_norm(x, (n,), w, b, eps)), (x, w, b)
        scale = float(p.get("scale", 1.0))
        if p.get("causal", "0") in ("1", "true"):
            sq = int(p.get("sq", 0)) or rows
            i = torch.arange(sq, device=dev)[:, None]
            mask = torch.arange(n, device=dev)[None, :] > i + n - sq  # [sq, n]

            def masked(x):
                t = (x * scale).view(-1, sq, n).masked_fill(mask, float("-inf"))
                return torch.softmax(t, dim=-1).view(rows, n)

            return masked, (x,)
        if scale == 1.0:
            return (lambda x: torch.softmax(x, dim=-1)), (x,)
        return (lambda x: torch.softmax(x * scale, dim=-1)), (x,)
    B, H, S, D = (int(p.get(k, d)) for k, d in (("B", 1), ("H", 8), ("S", 128), ("D", 64)))
    r = int(p.get("rotary_dim", 0)) or D
    theta, offset = float(p.get("theta", 10000.0)), int(p.get("offset", 0))
    gptj = p.get("style", "neox") == "gptj"
    x = torch.randn(B, H, S, D, dtype=dt, device=dev)
    inv = theta ** (-torch.arange(0, r, 2, dtype=torch.float64, device=dev) / r)
    if p.get("scaling", "none") == "llama3":
        inv = llama3_inv_freq(inv, p)
    if p.get("positions", "0") in ("1", "true"):  # per token: [B, 1, S, r] tables
        pos = torch.randint(0, 8192, (B, S), device=dev, dtype=torch.float64)
        ang = (pos[..., None] * inv)[:, None]
    else:
        ang = torch.arange(offset, offset + S, dtype=torch.float64, device=dev)[:, None] * inv
    emb = torch.repeat_interleave(ang, 2, dim=-1) if gptj else torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)
    fn = rope_gptj if gptj else rope_neox
    return (lambda x, c, s: fn(x, c, s, r)), (x, cos, sin)


def main(suite_path, out_path):
    suite = json.load(open(suite_path))
    timer, out = Timer(), Samples()
    for case in suite["cases"]:
        op = case["op"]
        if op not in ("rmsnorm", "layernorm", "softmax", "rope", "add_rmsnorm", "rmsnorm_fp8",
                      "silu_mul"):
            continue
        fn, args = make(op, parse(case["params"]))
        impls = {"torch_eager": fn, "torch_compile": torch.compile(fn, dynamic=False)}
        for impl, f in impls.items():
            try:
                samples = timer.time(lambda: f(*args))
            except Exception as e:  # noqa: BLE001 - a compile failure skips the anchor only
                print(f"skip {case['name']} {impl}: {str(e).splitlines()[0]}", file=sys.stderr)
                continue
            out.add(f"anchor/{impl}/{case['name']}", op, case["params"], impl, samples,
                    flush=timer.flush_mode)
            med = sorted(samples)[len(samples) // 2]
            print(f"{case['name']:36s} {impl:14s} median {med * 1e6:10.2f} us")
        torch._dynamo.reset()  # one compiled graph at a time
    out.write(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""KernelKit's decoder layers against transformers' LlamaDecoderLayer with the
same weights (issue 19): relative L2 of the hidden states after the first layer
and after the whole stack, per level, against transformers in float32 and in
bfloat16.

  python3 scripts/compare_transformers.py --out hf-compare.json \\
      [--model DIR | --work DIR [--layers 2 --hidden 256 --heads 4 --kv-heads 2
       --head-dim 64 --intermediate 512 --dtype bfloat16 --seed 0]]
      [--device cpu|cuda:0] [--batch 2] [--prefill 16] [--input-seed 1]
      [--levels conservative,balanced,aggressive] [--cli build/kernelkit]

Without --model the folder is written by scripts/make_llama_folder.py (random
weights through transformers' initialiser) under --work. The input hidden
states [B, S, hidden] are uniform in [-1, 1) from --input-seed, rounded to the
folder's dtype, so both sides start from the same values. transformers runs
the model's layers one after another exactly as KernelKit does (hidden states
in, hidden states out: no embedding, no final norm), positions 0..S-1, the
model's rotary embedding, a causal mask, attn_implementation="eager"; once in
float32 (the weights upcast, exact) and once in the folder's dtype. KernelKit
runs `kernelkit model DIR --device D --level L --batch B --prefill S --decode 0
--no-profile --input X.npy --save Y.npy` per level, on the folder and, for the
first layer alone, on a copy of config.json with num_hidden_layers = 1 beside a
link to the same weights. The JSON (schema "kernelkit.hf_compare/1") holds
each relative L2 ||y - ref|| / ||ref|| (float64), the same of the layers'
update (y - x against ref - x: not diluted by the residual stream), the input's
own distance from the output (what a decoder that did nothing would score) and
a negative control (transformers without the causal mask against the reference:
what a mistake scores) and the environment.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def rel_l2(y, ref):
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def hf_layers(model_dir, x, dtype, device, depths, causal=True):
    """transformers' decoder layers over x [B,S,hidden]: the hidden states
    after each depth in `depths` (float32 numpy); causal=False (no mask: every
    token sees the later ones) is the negative control."""
    m = transformers.LlamaForCausalLM.from_pretrained(
        model_dir, torch_dtype=dtype, attn_implementation="eager").to(device).eval()
    B, S, _ = x.shape
    h = torch.from_numpy(x).to(device=device, dtype=dtype)
    pos = torch.arange(S, device=device).unsqueeze(0).expand(B, S)
    mask = torch.full((S, S), torch.finfo(dtype).min, device=device, dtype=dtype).triu(1)
    mask = mask[None, None].expand(B, 1, S, S) if causal else None
    out = {}
    with torch.no_grad():
        pe = m.model.rotary_emb(h, pos)
        for i, layer in enumerate(m.model.layers[:max(depths)]):
            r = layer(h, attention_mask=mask, position_ids=pos, position_embeddings=pe,
                      cache_position=pos[0], use_cache=False)
            h = r[0] if isinstance(r, tuple) else r
            if i + 1 in depths:
                out[i + 1] = h.float().cpu().numpy()
    del m
    return out


def kernelkit(cli, model_dir, level, device, x_path, y_path, B, S):
    cmd = [cli, "model", model_dir, "--device", device, "--level", level, "--batch", str(B),
           "--prefill", str(S), "--decode", "0", "--no-profile", "--input", x_path,
           "--save", y_path]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    line = next((l for l in p.stdout.splitlines() if l.startswith("prefill")), "")
    return np.load(y_path), " ".join(cmd), line.strip(), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--model", help="an existing Llama folder (else one is made under --work)")
    ap.add_argument("--work", default="/tmp/kk-hf-compare", help="folder for files made here")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seed", type=int, default=0, help="the weights' seed")
    ap.add_argument("--device", default="cpu", help="cpu or cuda:N (both sides)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=16)
    ap.add_argument("--input-seed", type=int, default=1)
    ap.add_argument("--levels", default="conservative,balanced,aggressive")
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "kernelkit"))
    ap.add_argument("--name", default="", help="a label for this case in the JSON")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)

    model_dir = a.model
    if model_dir is None:
        model_dir = os.path.join(
            a.work, f"llama-h{a.hidden}-l{a.layers}-q{a.heads}-kv{a.kv_heads}-d{a.head_dim}"
            f"-i{a.intermediate}-{a.dtype}-s{a.seed}")
        if not os.path.exists(os.path.join(model_dir, "config.json")):
            subprocess.run([sys.executable, os.path.join(HERE, "make_llama_folder.py"), model_dir,
                            "--layers", str(a.layers), "--hidden", str(a.hidden), "--heads",
                            str(a.heads), "--kv-heads", str(a.kv_heads), "--head-dim",
                            str(a.head_dim), "--intermediate", str(a.intermediate), "--vocab",
                            str(a.vocab), "--dtype", a.dtype, "--seed", str(a.seed)], check=True)
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    L = cfg["num_hidden_layers"]
    hidden = cfg["hidden_size"]
    dtype_name = cfg.get("torch_dtype") or cfg.get("dtype") or "float32"
    dtype = getattr(torch, dtype_name)
    depths = sorted({1, L})

    # A folder of the first layer alone: the config with one layer, the same weights.
    dirs = {L: model_dir}
    if L > 1:
        one = os.path.join(a.work, os.path.basename(os.path.abspath(model_dir)) + "-first-layer")
        os.makedirs(one, exist_ok=True)
        with open(os.path.join(one, "config.json"), "w") as f:
            json.dump(dict(cfg, num_hidden_layers=1), f, indent=1)
        for name in os.listdir(model_dir):
            if name.endswith(".safetensors") or name.endswith(".index.json"):
                dst = os.path.join(one, name)
                if not os.path.lexists(dst):
                    os.symlink(os.path.abspath(os.path.join(model_dir, name)), dst)
        dirs[1] = one

    B, S = a.batch, a.prefill
    rng = np.random.default_rng(a.input_seed)
    x = rng.uniform(-1, 1, size=(B, S, hidden)).astype(np.float32)
    x = torch.from_numpy(x).to(dtype).float().numpy()  # exact in the folder's dtype
    x_path = os.path.join(a.work, f"x-{B}x{S}x{hidden}-seed{a.input_seed}.npy")
    np.save(x_path, x)

    t0 = time.time()
    ref32 = hf_layers(model_dir, x, torch.float32, a.device, depths)
    t_hf32 = time.time() - t0
    t0 = time.time()
    ref_lo = hf_layers(model_dir, x, dtype, a.device, depths) if dtype != torch.float32 else ref32
    t_hflo = time.time() - t0

    # Negative control: transformers f32 without the causal mask against the
    # reference, what a mistake scores on this metric.
    shifted = hf_layers(model_dir, x, torch.float32, a.device, depths, causal=False)

    results = []
    for depth in depths:
        entry = {"layers": depth, "folder": dirs[depth],
                 "transformers_" + dtype_name + "_vs_float32": rel_l2(ref_lo[depth],
                                                                      ref32[depth]),
                 "output_rms_float32": float(np.sqrt(np.mean(ref32[depth].astype(np.float64)
                                                              ** 2))),
                 # the layers' own contribution: how far the output moved from the input
                 # (the residual stream carries x through, so the plain relative L2 is
                 # diluted by ||x||; the update's is not)
                 "input_vs_transformers_float32": rel_l2(x, ref32[depth]),
                 "control_not_causal_vs_float32": rel_l2(shifted[depth], ref32[depth]),
                 "update_control_not_causal_vs_float32": rel_l2(shifted[depth] - x,
                                                                       ref32[depth] - x),
                 "update_transformers_" + dtype_name + "_vs_float32": rel_l2(
                     ref_lo[depth] - x, ref32[depth] - x),
                 "levels": {}}
        for level in a.levels.split(","):
            y_path = os.path.join(a.work, f"y-{level}-{depth}.npy")
            y, cmd, line, secs = kernelkit(os.path.abspath(a.cli), dirs[depth], level, a.device,
                                           x_path, y_path, B, S)
            entry["levels"][level] = {
                "vs_transformers_float32": rel_l2(y, ref32[depth]),
                "vs_transformers_" + dtype_name: rel_l2(y, ref_lo[depth]),
                "update_vs_transformers_float32": rel_l2(y - x, ref32[depth] - x),
                "update_vs_transformers_" + dtype_name: rel_l2(y - x, ref_lo[depth] - x),
                "command": cmd, "prefill_line": line, "wall_s": round(secs, 2)}
            e = entry["levels"][level]
            print(f"layers {depth} {level:12s} vs hf f32 {e['vs_transformers_float32']:.3e}"
                  f"  vs hf {dtype_name} {e['vs_transformers_' + dtype_name]:.3e}"
                  f"  update vs f32 {e['update_vs_transformers_float32']:.3e}"
                  f"  ({secs:.1f} s)", flush=True)
        print(f"layers {depth} transformers {dtype_name} vs float32: "
              f"{entry['transformers_' + dtype_name + '_vs_float32']:.3e}, update "
              f"{entry['update_transformers_' + dtype_name + '_vs_float32']:.3e}; the input "
              f"itself vs f32 {entry['input_vs_transformers_float32']:.3e}; not causal "
              f"{entry['control_not_causal_vs_float32']:.3e}, update "
              f"{entry['update_control_not_causal_vs_float32']:.3e}")
        results.append(entry)

    doc = {
        "schema": "kernelkit.hf_compare/1",
        "name": a.name,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "environment": {
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__,
            "platform": platform.platform(), "cpu": cpu_name(), "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else None,
            "kernelkit_cli": os.path.abspath(a.cli),
        },
        "device": a.device,
        "model": {k: cfg[k] for k in (
            "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "intermediate_size", "rms_norm_eps", "rope_theta", "rope_scaling",
            "rope_parameters", "torch_dtype", "dtype") if cfg.get(k) is not None},
        "model_folder": model_dir,
        "weights_seed": a.seed if a.model is None else None,
        "input": {"batch": B, "prefill": S, "positions": [0, S - 1],
                  "distribution": "uniform [-1, 1), rounded to " + dtype_name,
                  "seed": a.input_seed, "file": x_path},
        "transformers_run": {"attn_implementation": "eager", "mask": "causal, additive finfo.min",
                             "dtypes": ["float32", dtype_name],
                             "wall_s": [round(t_hf32, 2), round(t_hflo, 2)]},
        "metric": "relative L2 ||kernelkit - transformers|| / ||transformers|| (float64); "
                  "update_*: the same of (output - input)",
        "results": results,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

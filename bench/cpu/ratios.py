#!/usr/bin/env python3
"""The ratios docs/backends/cpu.md quotes, from the round files of bench/cpu/run.sh.

Each round r measured every suite with KernelKit (kernelkit-<suite>-r<r>.json) and then
with PyTorch (torch-<suite>-r<r>.json: bench/cpu/torch_cpu.py's samples through `kernelkit
bench --import`, entries named anchor/torch_cpu/<case>), back to back. A ratio is only
taken between two medians of the same round, and the table gives each round's ratio and
their median, so that load from other work on a shared machine, which drifts over minutes,
shows as spread instead of hiding in one number. cpu-nvfp4 has no anchor: its table gives
each round's GB/s and its share of the CPU read bandwidth that `kernelkit calibrate`
measured (the file's ceilings.read_gbs: one thread); cpu-rowops likewise against the
copy bandwidth (ceilings.copy_gbs). Files kernelkit-<suite>-<isa>-r<r>.json are the same
suite with the CPU kernels capped at a lower instruction set (KK_CPU_ISA=<isa>): their
table gives the time at that level over the time at the CPU's own, per round.

    python3 bench/cpu/ratios.py bench/results/cpu/<model> > bench/results/cpu/<model>/ratios.md
"""
import json
import statistics
import sys
from pathlib import Path


def medians(path, key=lambda b: b["summary"]["median"]):
    doc = json.loads(Path(path).read_text())
    return {b["name"].removeprefix("anchor/torch_cpu/"): key(b) for b in doc["benchmarks"]}


def read_share(b):
    return b["throughput"].get("share", {}).get("read_gbs", float("nan"))


def rounds(folder, suite):
    found = []
    r = 1
    while (folder / f"kernelkit-{suite}-r{r}.json").exists():
        kk = medians(folder / f"kernelkit-{suite}-r{r}.json")
        torch_file = folder / f"torch-{suite}-r{r}.json"
        found.append((kk, medians(torch_file) if torch_file.exists() else {}))
        r += 1
    return found


def row(label, values, fmt="{:.3f}"):
    cells = " | ".join(fmt.format(v) for v in values)
    return f"| {label} | {cells} | **{fmt.format(statistics.median(values))}** |"


def table(title, rows, n, what="ratio"):
    head = " | ".join(f"round {i + 1}" for i in range(n))
    out = [f"### {title}", "", f"| {what} | {head} | median |",
           "|---|" + "---:|" * (n + 1)]
    return out + rows + [""]


def isa_tables(folder):
    """Time at a forced lower instruction set / time at the CPU's own, per round."""
    out = []
    for path in sorted(folder.glob("kernelkit-*-r1.json")):
        stem = path.name.removeprefix("kernelkit-").removesuffix("-r1.json")
        for isa in ("generic", "avx2", "avx512", "avx512_bf16"):
            if not stem.endswith(f"-{isa}"):
                continue
            suite = stem.removesuffix(f"-{isa}")
            pairs, r = [], 1
            while ((folder / f"kernelkit-{suite}-{isa}-r{r}.json").exists()
                   and (folder / f"kernelkit-{suite}-r{r}.json").exists()):
                pairs.append((medians(folder / f"kernelkit-{suite}-{isa}-r{r}.json"),
                              medians(folder / f"kernelkit-{suite}-r{r}.json")))
                r += 1
            rows = [row(f"`{name}` {isa} / own", [low[name] / own[name] for low, own in pairs])
                    for name in sorted(pairs[0][0]) if all(name in own for _, own in pairs)]
            out += table(f"{suite}: KK_CPU_ISA={isa} against the CPU's own level", rows,
                         len(pairs))
    return out


def bandwidth_table(folder, suite, ceiling, label):
    files = []
    while (folder / f"kernelkit-{suite}-r{len(files) + 1}.json").exists():
        files.append(folder / f"kernelkit-{suite}-r{len(files) + 1}.json")
    if not files:
        return []
    ceil = json.loads(files[0].read_text()).get("ceilings", {})
    gbs = [medians(f, lambda b: b["throughput"]["gbs"]) for f in files]
    share = [medians(f, lambda b: b["throughput"].get("share", {}).get(ceiling, float("nan")))
             for f in files]
    rows = []
    for name in gbs[0]:
        rows.append(row(f"`{name}` GB/s", [g[name] for g in gbs], "{:.2f}"))
        rows.append(row(f"`{name}` share of {label}", [s[name] for s in share], "{:.1%}"))
    return ([f"{suite}: {label} bandwidth (kernelkit calibrate, round 1's file) "
             f"{ceil.get(ceiling, float('nan')):.2f} GB/s.", ""]
            + table(f"{suite} (KernelKit alone)", rows, len(files), "value"))


def main():
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/cpu")
    out = ["# Ratios of bench/cpu/run.sh", "",
           "Time ratios of two medians measured in the same round (< 1: the first is faster).",
           ""]
    for suite in ("cpu-linear", "cpu-linear-bf16", "cpu-attention", "cpu-attention-bf16"):
        rs = rounds(folder, suite)
        if not rs:
            continue
        rows = []
        names = sorted(rs[0][0])
        if suite.startswith("cpu-linear"):  # Linear + activation against the gemm alone
            for name in names:
                if not name.startswith("linear/"):
                    continue
                shape = name.split("/")[1].split("-")[0]
                gemm = f"gemm/{shape}-{name.rsplit('-', 1)[1]}"
                if all(gemm in kk for kk, _ in rs):
                    rows.append(row(f"`{name}` / `{gemm}`", [kk[name] / kk[gemm] for kk, _ in rs]))
        for name in names:  # KernelKit against PyTorch
            if all(name in t for _, t in rs):
                rows.append(row(f"`{name}` KernelKit / torch_cpu",
                                [kk[name] / t[name] for kk, t in rs]))
        out += table(suite, rows, len(rs))
    out += isa_tables(folder)
    out += bandwidth_table(folder, "cpu-rowops", "copy_gbs", "copy")
    out += bandwidth_table(folder, "cpu-fused-rows", "copy_gbs", "copy")
    files = []
    while (folder / f"kernelkit-cpu-nvfp4-r{len(files) + 1}.json").exists():
        files.append(folder / f"kernelkit-cpu-nvfp4-r{len(files) + 1}.json")
    if files:
        ceil = json.loads(files[0].read_text()).get("ceilings", {})
        gbs = [medians(f, lambda b: b["throughput"]["gbs"]) for f in files]
        share = [medians(f, read_share) for f in files]
        rows = []
        for name in gbs[0]:
            rows.append(row(f"`{name}` GB/s", [g[name] for g in gbs], "{:.2f}"))
            rows.append(row(f"`{name}` share of read", [s[name] for s in share], "{:.1%}"))
        out += [f"CPU ceilings (kernelkit calibrate, round 1's file): read "
                f"{ceil.get('read_gbs', float('nan')):.2f} GB/s, copy "
                f"{ceil.get('copy_gbs', float('nan')):.2f} GB/s.", ""]
        out += table("cpu-nvfp4 (KernelKit alone)", rows, len(files), "value")
    print("\n".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Per case and round: base (before-*) and this code (after-*) as GB/s, share of the
round's copy bandwidth (the ceilings each JSON carries: that round's kernelkit calibrate)
and the time ratio after/before of the two medians of the round; then the medians over
rounds. Usage: python3 ab_table.py [folder] > ratios.md"""
import json, statistics, sys
from pathlib import Path

folder = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
rounds = []
r = 1
while (folder / f"after-cpu-rowops-r{r}.json").exists():
    pair = []
    for w in ("before", "after"):
        doc = json.loads((folder / f"{w}-cpu-rowops-r{r}.json").read_text())
        pair.append({b["name"]: b for b in doc["benchmarks"]})
        copy = doc.get("ceilings", {}).get("copy_gbs", float("nan"))
    rounds.append((pair[0], pair[1], copy))
    r += 1
n = len(rounds)
med = statistics.median
print("# cpu-rowops: base (HEAD f4fba59) against this code, 2 threads\n")
print("Copy bandwidth per round (kernelkit calibrate, 2 threads, the ceiling each JSON carries): "
      + ", ".join(f"{c:.1f}" for _, _, c in rounds) + " GB/s.\n")
print("| case | before % of copy (rounds) | after % of copy (rounds) | after / before time (rounds) |"
      " before % median | after % median | after GB/s median | time ratio median |")
print("|---|---|---|---|---:|---:|---:|---:|")
for name in rounds[0][0]:
    bs = [b[name]["throughput"]["gbs"] / c for b, a, c in rounds]
    as_ = [a[name]["throughput"]["gbs"] / c for b, a, c in rounds]
    tr = [a[name]["summary"]["median"] / b[name]["summary"]["median"] for b, a, c in rounds]
    ag = [a[name]["throughput"]["gbs"] for b, a, c in rounds]
    f = lambda xs, fmt: " ".join(fmt.format(x) for x in xs)
    print(f"| `{name}` | {f([100*x for x in bs], '{:.0f}')} | {f([100*x for x in as_], '{:.0f}')} | "
          f"{f(tr, '{:.2f}')} | {100*med(bs):.0f}% | {100*med(as_):.0f}% | {med(ag):.1f} | **{med(tr):.2f}** |")

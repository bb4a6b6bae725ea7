#!/usr/bin/env python3
"""Keep bench/results small enough to travel to the GPU machines (the device
tool carries the whole working tree, at most 64 MiB): in each kernelkit.bench
results file given, a benchmark with more than KEEP samples keeps every k-th
sample (a uniform thinning, in time order) and records how many it had in
"samples_thinned": {"kept": n, "of": N, "step": k}. The "summary" (median,
CI, ...) was computed by the sampler from every sample and is left as it was;
`kernelkit compare` and `report` on a thinned file use the kept samples.
Usage: scripts/thin-results.py [--keep N] FILE.json..."""
import json
import sys


def thin(path, keep):
    with open(path) as f:
        doc = json.load(f)
    changed = 0
    if doc.get("schema") != "kernelkit.bench/1":  # other files (anchors' raw samples) as they are
        return 0
    for b in doc.get("benchmarks", []):
        s = b.get("samples")
        if not isinstance(s, list) or len(s) <= keep:
            continue
        step = -(-len(s) // keep)
        b["samples"] = s[::step]
        b["samples_thinned"] = {"kept": len(b["samples"]), "of": len(s), "step": step}
        changed += 1
    if changed:
        with open(path, "w") as f:
            json.dump(doc, f, indent="\t")
            f.write("\n")
    return changed


def main(argv):
    keep = 1000
    if len(argv) > 1 and argv[0] == "--keep":
        keep, argv = int(argv[1]), argv[2:]
    for p in argv:
        n = thin(p, keep)
        print(f"{p}: {n} benchmark(s) thinned to <= {keep} samples")


if __name__ == "__main__":
    main(sys.argv[1:])

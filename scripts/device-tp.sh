#!/usr/bin/env bash
# Issue 21's evidence (tensor parallelism over NCCL) on a lent 2x/4x GPU machine,
# in one call of under 9 minutes, from an export (scripts/export-gpu-tree.sh; cd
# .gpu-tree first):
#   run(command="cd .gpu-tree && bash scripts/device-tp.sh", carry=[".gpu-tree"],
#       kind="nvidia-h100-x4")            # or nvidia-h100-x2
# Steps, most important first, each logged with its time; a failing step does not
# stop the others, and a step that would start after DEADLINE seconds (default
# 480) is skipped and said so:
#   build (only the targets below); NCCL found in torch's install (KK_NCCL_LIBRARY,
#   NCCL_NVLS_ENABLE=0);
#   all-reduce bus bandwidth, bf16, 8 KiB .. 256 MiB, at 2 and 4 ranks: kk_comm one
#   process per GPU (as the decoder runs), kk_comm one process with a thread per
#   GPU (the path the per-call helper thread used to slow), torch.distributed
#   (bench/tp_allreduce_torch.py); nccl-tests arithmetic;
#   a Llama-3-8B-shaped folder (LAYERS layers, default 2: hidden 4096, 32 heads, 8 KV
#   heads, head_dim 128, intermediate 14336, random bf16 weights, transformers);
#   warm timings (bench/tp_bench.c, ranks started torchrun-style) at TP 1, 2, 4:
#   prefill B=1 S=4096 and B=8 S=2048 with overlap off and on (and the largest
#   difference of on's output from off's), decode steps at KV 2048 for B=1, B=16;
#   the tests (test_comm, test_decoder_tp, test_cuda_comm, test_cli_model_tp);
#   `kernelkit model DIR --device cuda:0 --tp N` (one process per GPU, launched by
#   the CLI).
# Everything lands under $OUT: tp-results.json (rewritten after every phase, so a
# run cut short still leaves what it measured), logs/ (each step's output),
# steps.txt (each step's exit code and seconds). Every timeout is cut so that
# nothing runs past HARD seconds (default 530).
set -uo pipefail
out=${OUT:-/tmp/kk-out}
LOGS=$out/logs
mkdir -p "$LOGS"
t_start=$(date +%s)
DEADLINE=${DEADLINE:-480} # no step starts after this many seconds
HARD=${HARD:-530}         # and none runs past this (its timeout is cut to fit)
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
elapsed() { echo $(($(date +%s) - t_start)); }
# tmo S: a timeout of S seconds, or what is left before HARD when that is less
tmo() {
  local left=$((HARD - $(elapsed)))
  [ "$left" -lt 10 ] && left=10
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
# to FILE COMMAND...: COMMAND's stdout in FILE (its stderr to the step's log)
to() {
  local f=$1
  shift
  "$@" > "$f"
}
# step NAME COMMAND...: run it (its output in logs/NAME.txt) unless past the deadline
step() {
  local name=$1
  shift
  if [ "$(elapsed)" -ge "$DEADLINE" ]; then
    echo "[$(elapsed)s] $name: skipped (past DEADLINE=${DEADLINE}s)" | tee -a "$out/steps.txt"
    return 99
  fi
  local t0
  t0=$(date +%s)
  "$@" > "$LOGS/$name.txt" 2>&1
  local rc=$?
  echo "[$(elapsed)s] $name: exit $rc in $(($(date +%s) - t0))s" | tee -a "$out/steps.txt"
  return $rc
}
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi topo -m > "$LOGS/nvidia-smi-topo.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
  > "$LOGS/gpus.csv" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
tps=1
[ "$ngpu" -ge 2 ] && tps="1 2"
[ "$ngpu" -ge 4 ] && tps="1 2 4"
b=${BUILD:-/tmp/kk-build-tp}
case $b in /*) ;; *) b=$PWD/$b ;; esac
echo "== $ngpu GPUs, TP sizes: $tps; commit $(cat .commit 2>/dev/null); deadline ${DEADLINE}s"

# ---- the results document (rewritten after each phase) ----
results() {
  python3 - "$LOGS" "$out/tp-results.json" "${nccl:-}" "$out/steps.txt" <<'EOF'
import glob, json, os, re, sys
logs, dest, nccl, steps = sys.argv[1:5]
def text(p):
    try:
        return open(p).read()
    except Exception:
        return ""
def lines(p):
    got = []
    for l in text(p).splitlines():
        try:
            got.append(json.loads(l))
        except Exception:
            pass
    return got
doc = {"schema": "kernelkit.tp_results/2", "issue": 21,
       "commit": text(".commit").strip() or None,
       "gpus": text(f"{logs}/gpus.csv").strip().splitlines(),
       "nccl_library": nccl, "torch": text(f"{logs}/torch-version.txt").strip(),
       "env": {"NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")},
       "steps": text(steps).strip().splitlines(),
       "tests": {}, "cli": [], "tp_bench": [], "allreduce": [], "scaling": {}}
for p in sorted(glob.glob(f"{logs}/test-*.txt")):
    m = re.search(r"exit (\d+)", text(p + ".exit"))
    doc["tests"][os.path.basename(p)[5:-4]] = int(m.group(1)) if m else None
for p in sorted(glob.glob(f"{logs}/cli-tp*.txt")):
    tp = int(re.search(r"cli-tp(\d+)", p).group(1))
    t = text(p)
    pre = re.search(r"^prefill  B=(\d+) S=(\d+): +([0-9.]+) ms", t, re.M)
    dec = re.search(r"^decode   mean ([0-9.]+) ms per step", t, re.M)
    doc["cli"].append({"tp": tp, "command": f"kernelkit model DIR --device cuda:0 --tp {tp} -b 1 -p 4096 -n 16",
                       "prefill_ms_first_call": float(pre.group(3)) if pre else None,
                       "decode_ms_mean": float(dec.group(1)) if dec else None,
                       "tensor_parallel_line": next((l.strip() for l in t.splitlines() if "tensor parallel:" in l), None),
                       "overlap_line": next((l.strip() for l in t.splitlines() if "--tp-overlap" in l), None)})
for p in sorted(glob.glob(f"{logs}/bench-tp*-r0.jsonl")):
    doc["tp_bench"] += lines(p)
for p in sorted(glob.glob(f"{logs}/allreduce-*.json")):
    try:
        r = json.loads(text(p))
    except Exception:
        continue
    r["file"] = os.path.basename(p)
    doc["allreduce"].append(r)
# issue 21's goals: prefill throughput TPn / TP1 (each overlap mode), decode latency TPn / TP1
pre = {(r["tp"], r["batch"], r["tokens"], r["overlap"]): r["ms_median"]
       for r in doc["tp_bench"] if r.get("case") == "prefill"}
for (tp, B, S, ov), ms in sorted(pre.items()):
    one = pre.get((1, B, S, "off"))
    if tp > 1 and one:
        doc["scaling"][f"prefill_B{B}_S{S}_tp{tp}_overlap_{ov}"] = {
            "speedup": round(one / ms, 3), "goal": 1.8 if tp == 2 else 3.2 if tp == 4 else None}
dec = {(r["tp"], r["batch"]): r["ms_median"] for r in doc["tp_bench"] if r.get("case") == "decode"}
for (tp, B), ms in sorted(dec.items()):
    one = dec.get((1, B))
    if tp > 1 and one:
        doc["scaling"][f"decode_B{B}_tp{tp}"] = {"latency_ratio": round(ms / one, 3),
                                                 "goal": 0.6 if tp == 2 else None}
# all-reduce: kk_comm (processes, threads) over torch, size by size
by = {}
for r in doc["allreduce"]:
    key = r.get("backend", "?") + ("" if r.get("backend", "").startswith("torch") else "/" + r.get("ranks_as", "?"))
    for x in r.get("results", []):
        by.setdefault((r.get("ranks"), x["bytes"]), {})[key] = x["busbw_GBps"]
doc["allreduce_busbw_GBps"] = [dict(ranks=k[0], bytes=k[1], **v) for k, v in sorted(by.items())]
json.dump(doc, open(dest, "w"), indent=1)
EOF
}

echo "== build"
step build kk_dev_build "$b" "$LOGS/build-cmake.txt" kernelkit_cli test_comm test_decoder_tp \
  test_cuda_comm kk_comm_bench kk_tp_bench || { tail -30 "$LOGS/build-cmake.txt"; results; exit 1; }
k=$b/kernelkit

echo "== NCCL"
nccl=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
try:
    import torch
    dirs.append(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception:
    pass
for d in dirs:
    for pat in ("nvidia/nccl/lib/libnccl.so.2", "nvidia/nccl/lib/libnccl.so*", "torch/lib/libnccl.so*"):
        hits = sorted(glob.glob(os.path.join(d, pat)))
        if hits:
            print(hits[0]); raise SystemExit
EOF
)
[ -n "$nccl" ] || nccl=$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -1)
if [ -z "$nccl" ]; then echo "no libnccl.so.2 found (torch's nvidia-nccl wheel?)"; results; exit 1; fi
export KK_NCCL_LIBRARY=$nccl KK_TEST_NCCL_LIBRARY=$nccl NCCL_NVLS_ENABLE=0
echo "KK_NCCL_LIBRARY=$nccl"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' \
  > "$LOGS/torch-version.txt" 2>&1
cat "$LOGS/torch-version.txt"

# ranks N LOG CMD...: one process per rank (GPU r), torchrun-style; rank r's output
# in LOG-rR.jsonl / LOG-rR.err; exit code: the worst rank's
ranks() {
  local n=$1 log=$2 rc=0 r
  shift 2
  rm -f /tmp/kk-tp-comm-id
  local pids=()
  for ((r = 0; r < n; r++)); do
    if [ "$n" = 1 ]; then
      timeout "$(tmo 240)" "$@" > "$log-r$r.jsonl" 2> "$log-r$r.err" &
    else
      CUDA_VISIBLE_DEVICES=$r KK_TP_DEVICE=cuda:0 KK_RANK=$r KK_LOCAL_RANK=0 KK_WORLD_SIZE=$n \
        KK_COMM_ID_FILE=/tmp/kk-tp-comm-id timeout "$(tmo 240)" "$@" \
        > "$log-r$r.jsonl" 2> "$log-r$r.err" &
    fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

echo "== all-reduce bus bandwidth (bf16, 8 KiB .. 256 MiB): kk_comm and torch.distributed"
ab() { # kk (processes), kk (threads), torch at N ranks
  local n=$1
  step allreduce-kk-proc-$n ranks "$n" "$LOGS/ar-kk-proc-$n" $b/bench/kk_comm_bench --dtype bf16 \
    --min 8K --max 256M
  cp "$LOGS/ar-kk-proc-$n-r0.jsonl" "$LOGS/allreduce-kk-proc-$n.json" 2>/dev/null
  step allreduce-kk-threads-$n to "$LOGS/allreduce-kk-threads-$n.json" timeout "$(tmo 180)" \
    $b/bench/kk_comm_bench --ranks "$n" --dtype bf16 --min 8K --max 256M
  step allreduce-torch-$n to "$LOGS/allreduce-torch-$n.json" timeout "$(tmo 240)" \
    python3 bench/tp_allreduce_torch.py --ranks "$n" --dtype bf16 --min 8K --max 256M
  python3 - "$LOGS/allreduce-kk-proc-$n.json" "$LOGS/allreduce-kk-threads-$n.json" \
    "$LOGS/allreduce-torch-$n.json" <<'EOF'
import json, sys
def load(p):
    try:
        return {x["bytes"]: x for x in json.load(open(p))["results"]}
    except Exception:
        return {}
kp, kt, th = (load(p) for p in sys.argv[1:4])
nan = float("nan")
f = lambda d, s: d[s]["busbw_GBps"] if s in d else nan
t = lambda d, s: d[s]["time_us"] if s in d else nan
print("      size   busbw GB/s: kk proc  kk threads  torch   kk proc/torch   time us: kk proc  torch")
for s in sorted(set(kp) | set(kt) | set(th)):
    r = f(kp, s) / f(th, s) if f(th, s) == f(th, s) and f(th, s) > 0 else nan
    print(f"  {s >> 10:7d}K  {f(kp, s):18.1f} {f(kt, s):11.1f} {f(th, s):6.1f}  {r:14.3f}"
          f"  {t(kp, s):16.1f} {t(th, s):6.1f}")
EOF
}
for tp in $tps; do
  [ "$tp" = 1 ] && continue
  ab "$tp"
done
results

echo "== model: ${LAYERS:-2} Llama-3-8B-shaped layers, random bf16"
model=/tmp/kk-llama8b-l${LAYERS:-2}
if [ ! -e "$model/config.json" ]; then
  step make-model timeout "$(tmo 300)" python3 scripts/make_llama_folder.py "$model" --layers "${LAYERS:-2}"
  tail -1 "$LOGS/make-model.txt"
fi

echo "== warm timings (bench/tp_bench.c; ranks started here, torchrun-style)"
for tp in $tps; do
  step bench-tp$tp ranks "$tp" "$LOGS/bench-tp$tp" $b/bench/kk_tp_bench "$model" \
    --prefill 1x4096 --prefill 8x2048 --decode 1 --decode 16 --kv 2048 --steps 64 --reps 10 \
    --overlap off,on
  python3 - "$LOGS/bench-tp$tp-r0.jsonl" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    try:
        r = json.loads(l)
    except Exception:
        print("  ", l.strip()[:300])
        continue
    if r["case"] == "prefill":
        print("  TP %d prefill B=%d S=%d overlap %-3s: %8.3f ms (max |out - off's| %.3g)" % (
            r["tp"], r["batch"], r["tokens"], r["overlap"], r["ms_median"],
            r["max_abs_diff_vs_first_mode"]))
    else:
        print("  TP %d decode B=%d KV %d: %.4f ms" % (r["tp"], r["batch"], r["kv"], r["ms_median"]))
EOF
  head -c 600 "$LOGS/bench-tp$tp-r0.err"
  results
done
python3 -c "import json; print(json.dumps(json.load(open('$out/tp-results.json'))['scaling'], indent=1))"

echo "== tests"
for t in test_comm test_decoder_tp test_cuda_comm; do
  step test-$t timeout "$(tmo 240)" $b/tests/$t
  echo "exit $?" > "$LOGS/test-$t.txt.exit"
  grep -E 'PASSED|FAILED|SKIP|relative L2|overlap' "$LOGS/test-$t.txt" | cut -c1-200 | head -20
done
step test-test_cli_model_tp timeout "$(tmo 240)" bash tests/test_cli_model_tp.sh "$k" . "$b"
echo "exit $?" > "$LOGS/test-test_cli_model_tp.txt.exit"
tail -1 "$LOGS/test-test_cli_model_tp.txt"
results

echo "== kernelkit model --tp N (one process per GPU, launched by the CLI)"
for tp in $tps; do
  step cli-tp$tp timeout "$(tmo 120)" $k model "$model" --device cuda:0 --tp $tp -b 1 -p 4096 -n 16 \
    --no-profile
  grep -E '^prefill|^decode   mean|--tp-overlap' "$LOGS/cli-tp$tp.txt" | tr '\n' ' '
  echo
done
results
echo "== done in $(elapsed)s; results: $out/tp-results.json"
cat "$out/steps.txt"

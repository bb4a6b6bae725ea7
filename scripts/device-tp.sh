#!/usr/bin/env bash
# Issue 21's evidence (tensor parallelism over NCCL) on a lent 2x/4x GPU machine,
# from an export (scripts/export-gpu-tree.sh [--worktree]; cd .gpu-tree first):
#   run(command="cd .gpu-tree && bash scripts/device-tp.sh", carry=[".gpu-tree"],
#       kind="nvidia-h100-x4")            # or nvidia-h100-x2
# Steps: build; NCCL found in torch's install (KK_NCCL_LIBRARY, NCCL_NVLS_ENABLE=0);
# the tests (loopback, TP decoder on the CPU, the CLI's --tp, and test_cuda_comm on
# NCCL and CUDA); a Llama-3-8B-shaped folder (LAYERS layers, default 4: hidden 4096,
# 32 heads, 8 KV heads, head_dim 128, intermediate 14336, random bf16 weights, through
# transformers); `kernelkit model DIR --device cuda:0 --tp N` for N = 1, 2, 4 (as many
# GPUs as nvidia-smi lists: one process per GPU, launched by the CLI); warm timings of
# the same at each N (bench/tp_bench.c, ranks started torchrun-style here: prefill
# B=1 S=4096 and B=8 S=2048, decode steps at KV 2048 for B=1 and B=16); all-reduce
# bus bandwidth of kk_comm (bench/comm_bench.c) beside torch.distributed's NCCL
# all_reduce (bench/tp_allreduce_torch.py), same sizes, nccl-tests arithmetic.
# PART=tests (build + tests) or PART=bench (build + model + runs) splits it in two
# calls when 10 minutes are too few; the build folder ($BUILD, default
# /tmp/kk-build-tp), the model folder and the logs are reused on a warm machine.
# Results: $OUT/tp-results.json (one document); logs: $OUT/tp-logs.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
part=${PART:-all}
LOGS=/tmp/kk-tp
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/tp-logs.tgz" -C /tmp kk-tp' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi topo -m > "$LOGS/nvidia-smi-topo.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
  > "$LOGS/gpus.csv" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
tps=1
[ "$ngpu" -ge 2 ] && tps="1 2"
[ "$ngpu" -ge 4 ] && tps="1 2 4"
# outside the carried tree, so a second call on the same warm machine reuses it
b=${BUILD:-/tmp/kk-build-tp}
case $b in /*) ;; *) b=$PWD/$b ;; esac
echo "== $ngpu GPUs, TP sizes: $tps; commit $(cat .commit 2>/dev/null)"

echo "== build"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_comm test_decoder_tp test_cuda_comm \
  kk_comm_bench kk_tp_bench || exit 1
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
if [ -z "$nccl" ]; then echo "no libnccl.so.2 found (torch's nvidia-nccl wheel?)"; exit 1; fi
export KK_NCCL_LIBRARY=$nccl KK_TEST_NCCL_LIBRARY=$nccl NCCL_NVLS_ENABLE=0
echo "KK_NCCL_LIBRARY=$nccl"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' \
  > "$LOGS/torch-version.txt" 2>&1
cat "$LOGS/torch-version.txt"

declare -A test_rc
if [ "$part" != bench ]; then
  echo "== tests"
  for t in test_comm test_decoder_tp test_cuda_comm; do
    timeout 300 $b/tests/$t > "$LOGS/$t.txt" 2>&1
    test_rc[$t]=$?
    echo "$t: exit ${test_rc[$t]} $(grep -E 'PASSED|FAILED|SKIP|relative L2|nccl op' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-400)"
  done
  timeout 300 bash tests/test_cli_model_tp.sh "$k" . "$b" > "$LOGS/test_cli_model_tp.txt" 2>&1
  test_rc[test_cli_model_tp]=$?
  echo "test_cli_model_tp: exit ${test_rc[test_cli_model_tp]} $(tail -1 "$LOGS/test_cli_model_tp.txt")"
  for t in "${!test_rc[@]}"; do echo "$t ${test_rc[$t]}"; done > "$LOGS/test-exits.txt"
fi

if [ "$part" != tests ]; then
  model=/tmp/kk-llama8b-l${LAYERS:-4}
  if [ ! -e "$model/config.json" ]; then
    echo "== model: ${LAYERS:-4} Llama-3-8B-shaped layers, random bf16"
    timeout 300 python3 scripts/make_llama_folder.py "$model" --layers "${LAYERS:-4}" \
      > "$LOGS/make-model.txt" 2>&1 || { tail -5 "$LOGS/make-model.txt"; exit 1; }
    tail -1 "$LOGS/make-model.txt"
  fi

  echo "== kernelkit model --tp N (one process per GPU, launched by the CLI)"
  np=""  # the cost model's profiling pass (TP 1 only) is not what this measures
  $k model --help 2>&1 | grep -q -- --no-profile && np=--no-profile
  for tp in $tps; do
    timeout 300 $k model "$model" --device cuda:0 --tp $tp -b 1 -p 4096 -n 16 $np \
      > "$LOGS/cli-tp$tp.txt" 2>&1
    echo "$?" > "$LOGS/cli-tp$tp.exit"
    echo "tp $tp: exit $(cat "$LOGS/cli-tp$tp.exit"): $(grep -E '^prefill|^decode   mean' "$LOGS/cli-tp$tp.txt" | tr '\n' ' ')"
  done

  echo "== warm timings (bench/tp_bench.c; ranks started here, torchrun-style)"
  ranks() { # TP NAME ARGS...: one kk_tp_bench per rank, rank r on GPU r
    local tp=$1 name=$2
    shift 2
    rm -f /tmp/kk-tp-comm-id
    for ((r = 0; r < tp; r++)); do
      if [ "$tp" = 1 ]; then
        timeout 300 $b/bench/kk_tp_bench "$model" --device cuda:0 "$@" \
          > "$LOGS/$name-tp$tp-r$r.json" 2> "$LOGS/$name-tp$tp-r$r.err" &
      else
        CUDA_VISIBLE_DEVICES=$r KK_TP_DEVICE=cuda:0 KK_RANK=$r KK_LOCAL_RANK=$r KK_WORLD_SIZE=$tp \
          KK_COMM_ID_FILE=/tmp/kk-tp-comm-id timeout 300 $b/bench/kk_tp_bench "$model" "$@" \
          > "$LOGS/$name-tp$tp-r$r.json" 2> "$LOGS/$name-tp$tp-r$r.err" &
      fi
    done
    wait
    echo "$name tp $tp: $(cat "$LOGS/$name-tp$tp-r0.json" | cut -c1-300) $(head -c 300 "$LOGS/$name-tp$tp-r0.err")"
  }
  for tp in $tps; do
    ranks $tp b1 --batch 1 --prefill 4096 --kv 2048 --decode-batch 1 --steps 32 --reps 5
    ranks $tp b8 --batch 8 --prefill 2048 --kv 2048 --decode-batch 16 --steps 32 --reps 3
  done

  echo "== all-reduce bus bandwidth: kk_comm and torch.distributed (bf16, 1 MiB .. 1 GiB)"
  for tp in $tps; do
    [ "$tp" = 1 ] && continue
    timeout 240 $b/bench/kk_comm_bench --ranks $tp --dtype bf16 --min 1M --max 1G \
      > "$LOGS/allreduce-kk-$tp.json" 2> "$LOGS/allreduce-kk-$tp.err"
    timeout 240 python3 bench/tp_allreduce_torch.py --ranks $tp --dtype bf16 --min 1M --max 1G \
      > "$LOGS/allreduce-torch-$tp.json" 2> "$LOGS/allreduce-torch-$tp.err"
    python3 - "$LOGS/allreduce-kk-$tp.json" "$LOGS/allreduce-torch-$tp.json" <<'EOF'
import json, sys
try:
    kk, th = (json.load(open(p)) for p in sys.argv[1:3])
    for a, c in zip(kk["results"], th["results"]):
        print(f"  {a['bytes'] >> 20:5d} MiB  kk_comm busbw {a['busbw_GBps']:7.1f} GB/s"
              f"  torch {c['busbw_GBps']:7.1f} GB/s  ratio {a['busbw_GBps'] / c['busbw_GBps']:.3f}")
except Exception as e:
    print("  (no comparison:", e, ")")
EOF
  done
fi

echo "== results"
python3 - "$LOGS" "$out/tp-results.json" "$nccl" <<'EOF'
import glob, json, os, re, sys
logs, dest, nccl = sys.argv[1:4]
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
def text(p):
    try:
        return open(p).read()
    except Exception:
        return ""
doc = {"schema": "kernelkit.tp_results/1", "issue": 21,
       "commit": text(".commit").strip() or None,
       "gpus": text(f"{logs}/gpus.csv").strip().splitlines(),
       "nccl_library": nccl, "torch": text(f"{logs}/torch-version.txt").strip(),
       "env": {"NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")},
       "tests": {}, "cli": [], "tp_bench": [], "allreduce": [], "scaling": {}}
for line in text(f"{logs}/test-exits.txt").splitlines():
    name, rc = line.split()
    doc["tests"][name] = int(rc)
for p in sorted(glob.glob(f"{logs}/cli-tp*.txt")):
    tp = int(re.search(r"cli-tp(\d+)", p).group(1))
    t = text(p)
    pre = re.search(r"^prefill  B=(\d+) S=(\d+): +([0-9.]+) ms", t, re.M)
    dec = re.search(r"^decode   mean ([0-9.]+) ms per step", t, re.M)
    doc["cli"].append({"tp": tp, "exit": int(text(p[:-4] + ".exit").strip() or -1),
                       "command": f"kernelkit model DIR --device cuda:0 --tp {tp} -b 1 -p 4096 -n 16",
                       "prefill_ms_first_call": float(pre.group(3)) if pre else None,
                       "decode_ms_mean": float(dec.group(1)) if dec else None,
                       "tensor_parallel_line": next((l.strip() for l in t.splitlines() if "tensor parallel:" in l), None)})
for p in sorted(glob.glob(f"{logs}/*-tp*-r0.json")):
    r = load(p)
    if r:
        r["run"] = os.path.basename(p).split("-tp")[0]
        doc["tp_bench"].append(r)
for p in sorted(glob.glob(f"{logs}/allreduce-*.json")):
    r = load(p)
    if r:
        doc["allreduce"].append(r)
# issue 21's goals: prefill throughput TPn / TP1, decode latency TPn / TP1
for run in ("b1", "b8"):
    by = {r["tp"]: r for r in doc["tp_bench"] if r.get("run") == run}
    if 1 in by:
        for tp, r in by.items():
            if tp == 1:
                continue
            doc["scaling"][f"{run}_tp{tp}"] = {
                "prefill_speedup": round(by[1]["prefill_ms_median"] / r["prefill_ms_median"], 3),
                "decode_latency_ratio": round(r["decode_ms_median"] / by[1]["decode_ms_median"], 3),
                "goal": {"prefill_speedup": 1.8 if tp == 2 else 3.2,
                         "decode_latency_ratio": 0.6 if tp == 2 else None}}
json.dump(doc, open(dest, "w"), indent=1)
print(json.dumps(doc["scaling"], indent=1))
EOF

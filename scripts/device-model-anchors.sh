#!/usr/bin/env bash
# Issue 19's anchors on one lent H100, in one call (from an export:
# scripts/export-gpu-tree.sh; cd .gpu-tree): on a 2-layer Llama-3-8B-shaped
# folder (scripts/make_llama_folder.py, random bf16 weights),
#   1. kernelkit calibrate --device cuda:0 --quick (the read ceiling of the
#      decode goal, this run's);
#   2. kernelkit model at balanced, aggressive and aggressive with KK_FP8=0:
#      prefill B=1 S=4096 and B=8 S=2048 (profiled, then the timed call),
#      decode B=1/16/64 at KV 2048 (24 steps);
#   3. bench/compare_torch_decoder.py on the same folder: transformers' layers
#      eager and under torch.compile (prefill) and a PyTorch eager decode step;
#   4. scripts/compare_transformers.py on cuda:0 (both sides on the GPU):
#      every level against transformers' layers in f32 and bf16.
# Everything in $OUT/model-anchors/ (and a .tgz); summary.txt lists each step.
# Budget: about 8 minutes. DECODE=0 skips the decode runs, HF=0 step 4 (then
# about 4 minutes with a build already there: BUILD=dir).
set -uo pipefail
out=${OUT:-/tmp/kk-out}
LOGS=$out/model-anchors
mkdir -p "$LOGS"
trap 'tar czf "$out/model-anchors.tgz" -C "$out" model-anchors 2>/dev/null' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$LOGS/summary.txt"; }
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit \
  --format=csv > "$LOGS/clocks-before.csv" 2>&1
b=${BUILD:-build-model-anchors}

say "== build ($(cat .commit 2>/dev/null))"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli || { say "build FAILED (see build.log)"; exit 1; }
k=./$b/kernelkit

say "== the folder and the ceilings"
m=/tmp/kk-llama8b-2l
[ -e $m/config.json ] ||
  timeout 240 python3 scripts/make_llama_folder.py $m --layers 2 > "$LOGS/make_folder.txt" 2>&1
[ -e $m/config.json ] || { say "no model folder"; exit 1; }
XDG_CACHE_HOME=/tmp/kk-cache $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1
cp /tmp/kk-cache/kernelkit/ceilings-*.json "$LOGS/" 2>/dev/null
grep -E "gbs|tflops" "$LOGS/calibrate.txt" | head -8 | tee -a "$LOGS/summary.txt"

say "== kernelkit model"
run() { # NAME LEVEL ARGS...
  local name=$1 level=$2
  shift 2
  XDG_CACHE_HOME=/tmp/kk-cache timeout 150 $k model $m --device cuda:0 --level $level "$@" \
    --output "$LOGS/$name.json" > "$LOGS/$name.txt" 2>&1
  say "$name: exit $? $(grep -E '^prefill  .*ms|^decode   mean of' "$LOGS/$name.txt" | tr -s ' ' | tr '\n' ' ')"
}
for lv in balanced aggressive aggressive-nofp8; do
  level=${lv%-nofp8}
  fp8=1
  [ "$lv" = aggressive-nofp8 ] && fp8=0
  export KK_FP8=$fp8
  run prefill-b1-s4096-$lv $level -b 1 -p 4096 -n 0 --no-compare --profile-time 0.2
  run prefill-b8-s2048-$lv $level -b 8 -p 2048 -n 0 --no-compare --profile-time 0.2
  [ "${DECODE:-1}" = 0 ] && continue
  for B in 1 16 64; do run decode-b$B-l2048-$lv $level -b $B -p 2048 -n 24 --no-profile; done
done
unset KK_FP8

say "== PyTorch anchors (bench/compare_torch_decoder.py)"
dec_args=()
[ "${DECODE:-1}" = 0 ] && dec_args=(--decode "")
PYTHONUNBUFFERED=1 timeout 240 python3 bench/compare_torch_decoder.py $m "${dec_args[@]}" \
  --out "$LOGS/torch-decoder.json" > "$LOGS/torch-decoder.txt" 2>&1
say "exit $?"
grep -E "^(eager|prefill|decode|WARN)" "$LOGS/torch-decoder.txt" | tee -a "$LOGS/summary.txt"

[ "${HF:-1}" = 0 ] || say "== against transformers on cuda:0 (scripts/compare_transformers.py)"
[ "${HF:-1}" = 0 ] || for cs in "1 256 1" "2 128 2"; do
  set -- $cs
  PYTHONUNBUFFERED=1 timeout 150 python3 scripts/compare_transformers.py --model $m \
    --work /tmp/kk-hf-$1x$2 --device cuda:0 --batch $1 --prefill $2 --input-seed $3 \
    --cli $k --name "8B-shaped 2 layers B=$1 S=$2 cuda:0" --out "$LOGS/hf-compare-b$1-s$2.json" \
    > "$LOGS/hf-compare-b$1-s$2.txt" 2>&1
  say "hf-compare B=$1 S=$2: exit $?"
  tail -12 "$LOGS/hf-compare-b$1-s$2.txt" | tee -a "$LOGS/summary.txt"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit \
  --format=csv > "$LOGS/clocks-after.csv" 2>&1
say "== done"

#!/usr/bin/env bash
# Issue 19's aggressive level on one lent H100, from an export
# (scripts/export-gpu-tree.sh [--worktree]; cd .gpu-tree first): build; the
# decoder's tests on cuda:0 (test_decoder: every level against the float64
# reference, and test_graph_decode: CUDA-graph decode steps bit-identical to
# eager ones, FP8 against conservative; with KK_TEST_MODEL_DIR also on the
# Llama-shaped folder, relative L2 printed); the FP8 Linear's and memory's GPU
# tests; then kernelkit model on a 2-layer Llama-3-8B-shaped folder (random
# weights by scripts/make_llama_folder.py: torch + transformers) at balanced
# and aggressive (and aggressive without graphs, and KK_FP8=0): prefill B=1
# S=4096 and B=8 S=2048, decode B=1/16/64 at KV 2048. Each step is logged and
# a failing step does not stop the rest; results JSON, reports and logs come
# back in $OUT/model-aggressive/ (and a .tgz). Budget: under 8 minutes.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
LOGS=$out/model-aggressive
mkdir -p "$LOGS"
trap 'tar czf "$out/model-aggressive.tgz" -C "$out" model-aggressive 2>/dev/null' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$LOGS/summary.txt"; }
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
b=${BUILD:-build-model-aggr}

say "== build ($(cat .commit 2>/dev/null))"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_decoder test_cuda_fp8_linear \
  test_cuda_memory || { say "build FAILED (see build.log)"; exit 1; }
k=./$b/kernelkit

say "== a Llama-3-8B-shaped folder, 2 layers, random bf16 weights"
m=/tmp/kk-llama8b-2l
if [ ! -e $m/config.json ]; then
  timeout 240 python3 scripts/make_llama_folder.py $m --layers 2 > "$LOGS/make_folder.txt" 2>&1
  say "make_llama_folder.py: exit $? $(tail -1 "$LOGS/make_folder.txt")"
fi
[ -e $m/config.json ] || m=""

say "== tests"
KK_TF32=0 KK_TEST_DEVICE=cuda:0 KK_TEST_MODEL_DIR=$m KK_LOG=info timeout 300 \
  ./$b/tests/test_decoder > "$LOGS/test_decoder_cuda.txt" 2>&1
say "test_decoder on cuda:0: exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_decoder_cuda.txt" | tr '\n' ' ')"
grep -E "relative L2|graphs:|bit-identical|DIFFER|capture" "$LOGS/test_decoder_cuda.txt" \
  | tee -a "$LOGS/summary.txt" | tail -40
for t in test_cuda_fp8_linear test_cuda_memory; do
  timeout 120 ./$b/tests/$t > "$LOGS/$t.txt" 2>&1
  say "$t: exit $? $(grep -E 'PASSED|FAILED|SKIP' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-160)"
done

[ -n "$m" ] || { say "no model folder: kernelkit model runs skipped"; exit 0; }
say "== kernelkit model (decode profile off to fit the budget; the prefill profiled)"
run() { # NAME LEVEL ARGS...: one kernelkit model run, its JSON and report
  local name=$1 level=$2; shift 2
  timeout 150 $k model $m --device cuda:0 --level $level "$@" --output "$LOGS/$name.json" \
    --report "$LOGS/$name.md" > "$LOGS/$name.txt" 2>&1
  say "$name: exit $?"
  grep -E "^ +total|speedup|^prefill  |^decode   mean|cuda graphs:|fp8:|WARN|rror" "$LOGS/$name.txt" \
    | head -12 | tee -a "$LOGS/summary.txt"
}
for lv in balanced aggressive; do
  run prefill-b1-s4096-$lv $lv -b 1 -p 4096 -n 0 --no-compare --profile-time 0.2
  run prefill-b8-s2048-$lv $lv -b 8 -p 2048 -n 0 --no-compare --profile-time 0.2 --no-profile
done
for B in 1 16 64; do
  for lv in balanced aggressive; do
    run decode-b$B-l2048-$lv $lv -b $B -p 2048 -n 24 --no-profile
  done
  run decode-b$B-l2048-aggressive-nographs aggressive -b $B -p 2048 -n 24 --no-profile --no-graphs
  (export KK_FP8=0; run decode-b$B-l2048-aggressive-nofp8 aggressive -b $B -p 2048 -n 24 --no-profile)
done
say "== done"

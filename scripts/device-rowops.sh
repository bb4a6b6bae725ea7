#!/usr/bin/env bash
# The row kernels' evidence (rmsnorm, layernorm, softmax, rope and the fused
# add_rmsnorm, rmsnorm_fp8, silu_mul, rope_kv_append on CUDA) on a lent GPU, from an export
# (scripts/export-gpu-tree.sh; cd .gpu-tree first):
#   PART=checks  build; the GPU tests; float64-oracle checks on fresh seeds
#                (smoke, correctness, fuzz 500; the ops side by side on the
#                one GPU, so the part stays within ~5 minutes on 16 cores);
#                compute-sanitizer memcheck and racecheck on
#                tests/test_cuda_rowops and tests/test_cuda_fused_rows
#   PART=bench   build; calibrate --quick; the rowops suite beside PyTorch
#                eager and torch.compile (imported with --import); the report
#   PART=all     (default) both. Everything comes back in $OUT/rowops-<part>.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
part=${PART:-all}
LOGS=/tmp/kk-rowops
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/rowops-$part.tgz" -C /tmp kk-rowops' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$LOGS/nvidia-smi-q.txt" 2>&1
b=${BUILD:-build-rowops}

echo "== build ($(cat .commit 2>/dev/null))"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cuda_rowops test_cuda_fused_rows test_cuda_op_run ||
  exit 1
grep -iE "warning" "$LOGS/build.log" | head -5
k=./$b/kernelkit
ops="rmsnorm layernorm softmax rope add_rmsnorm rmsnorm_fp8 silu_mul rope_kv_append"
$k run --list > "$LOGS/run-list.txt" 2>&1

if [ "$part" != bench ]; then
  echo "== GPU tests"
  for t in test_cuda_rowops test_cuda_fused_rows test_cuda_op_run; do
    timeout 300 ./$b/tests/$t > "$LOGS/$t.txt" 2>&1
    echo "$t: exit $? $(grep -E 'PASSED|FAILED' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-160)"
    grep -E "^\s+FAIL|\[  FAILED|FAIL " "$LOGS/$t.txt" | head -5
  done
  echo "== float64-oracle checks, fresh seeds (one job per op and kind, side by side)"
  for op in $ops; do
    s1=$RANDOM s2=$RANDOM
    echo "$s1 $s2" > "$LOGS/seeds-$op.txt"
    timeout 200 $k check --op $op --device cuda:0 --suite smoke,correctness --seed $s1 > "$LOGS/check-$op.txt" 2>&1 &
    timeout 200 $k check --op $op --device cuda:0 --fuzz 500 --seed $s2 > "$LOGS/fuzz-$op.txt" 2>&1 &
  done
  wait
  for op in $ops; do
    read -r s1 s2 < "$LOGS/seeds-$op.txt"
    echo "$op smoke+correctness seed $s1: $(tail -1 "$LOGS/check-$op.txt")"; grep FAIL "$LOGS/check-$op.txt" | head -3
    echo "$op fuzz 500 seed $s2: $(tail -1 "$LOGS/fuzz-$op.txt")"; grep FAIL "$LOGS/fuzz-$op.txt" | head -3
  done
  echo "== compute-sanitizer (quick variant of the tests, side by side)"
  for t in test_cuda_rowops test_cuda_fused_rows; do
    for tool in memcheck racecheck; do
      KK_TEST_QUICK=1 timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 ./$b/tests/$t \
        > "$LOGS/san-$tool-$t.txt" 2>&1 &
    done
  done
  wait
  for t in test_cuda_rowops test_cuda_fused_rows; do
    for tool in memcheck racecheck; do
      echo "$tool $t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/san-$tool-$t.txt" | tail -1) $(tail -1 "$LOGS/san-$tool-$t.txt")"
    done
  done
fi

if [ "$part" != checks ]; then
  echo "== ceilings"
  $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1; tail -7 "$LOGS/calibrate.txt"
  cp "${XDG_CACHE_HOME:-$HOME/.cache}"/kernelkit/ceilings-*.json "$LOGS/" 2>/dev/null
  echo "== rowops beside PyTorch eager and torch.compile"
  $k bench --device cuda:0 --suite rowops --time-budget "${BUDGET:-4}" -o "$LOGS/rowops-kernelkit.json" \
    > "$LOGS/bench-rowops.txt" 2>&1
  echo "kernelkit bench: exit $?"; grep median "$LOGS/bench-rowops.txt" | sed 's/  CI \[[^]]*\]//'
  (cd bench && timeout 400 python3 compare_torch_rowops.py suites/rowops.json /tmp/rowops-samples.json) \
    > "$LOGS/torch-rowops.txt" 2>&1
  echo "torch anchors: exit $? ($(grep -c median "$LOGS/torch-rowops.txt") timed)"; grep skip "$LOGS/torch-rowops.txt" | head -3
  $k bench --device cuda:0 --import /tmp/rowops-samples.json -o "$LOGS/rowops-torch.json" \
    > "$LOGS/import-rowops.txt" 2>&1
  echo "import: exit $?"; grep median "$LOGS/import-rowops.txt" | sed 's/  CI \[[^]]*\]//'
  $k report "$LOGS/rowops-kernelkit.json" "$LOGS/rowops-torch.json" --output "$LOGS/rowops-report.md" \
    > "$LOGS/report.txt" 2>&1
  echo "report: exit $?"
fi

#!/usr/bin/env bash
# f32 gemm and linear on a lent GPU (the TF32 and exact FMA kernels), from an
# export (bash scripts/export-gpu-tree.sh; cd .gpu-tree): build;
# tests/test_cuda_gemm; smoke+correctness and --fuzz 300 in f32 with KK_TF32=1
# and KK_TF32=0 on fresh seeds; compute-sanitizer memcheck and racecheck on
# f32 cases both ways; the f32 cases of bench/suites/gemm.json timed both ways
# beside PyTorch (allow_tf32 on and off). Results in $OUT/gemm-f32.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
LOGS=/tmp/kk-gemm-f32
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/gemm-f32.tgz" -C /tmp kk-gemm-f32' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
b=${BUILD:-build-gemm}
echo "== build $(cat .commit 2>/dev/null)"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cuda_gemm || exit 1
k=./$b/kernelkit

echo "== tests/test_cuda_gemm"
timeout 300 ./$b/tests/test_cuda_gemm > "$LOGS/test_cuda_gemm.txt" 2>&1
echo "exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_cuda_gemm.txt" | tr '\n' ' ')"
grep -E "^\s+(FAIL|ERROR)|\[  FAILED|TF32 under|FMA under|K-1 under|f32 (TF32|FMA), pad" \
  "$LOGS/test_cuda_gemm.txt" | head -20

if [ "${PART:-all}" != bench ]; then
  echo "== float64-oracle checks in f32, fresh seeds, KK_TF32=1 and 0"
  for t in 1 0; do
    for op in gemm linear; do
      s=$RANDOM
      KK_TF32=$t timeout 200 $k check --op $op --device cuda:0 --suite smoke,correctness --dtype f32 \
        --seed $s > "$LOGS/check-$op-tf32=$t.txt" 2>&1
      echo "KK_TF32=$t $op smoke+correctness seed $s: $(tail -1 "$LOGS/check-$op-tf32=$t.txt")"
      grep FAIL "$LOGS/check-$op-tf32=$t.txt" | head -3
      s=$RANDOM
      KK_TF32=$t timeout 300 $k check --op $op --device cuda:0 --fuzz 300 --dtype f32 --seed $s \
        > "$LOGS/fuzz-$op-tf32=$t.txt" 2>&1
      echo "KK_TF32=$t $op fuzz 300 seed $s: $(tail -1 "$LOGS/fuzz-$op-tf32=$t.txt")"
      grep FAIL "$LOGS/fuzz-$op-tf32=$t.txt" | head -3
    done
  done
  echo "== compute-sanitizer on f32 cases"
  for t in 1 0; do
    for tool in memcheck racecheck synccheck; do
      KK_TF32=$t timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op gemm,linear \
        --device cuda:0 --suite smoke --dtype f32 > "$LOGS/san-$tool-tf32=$t.txt" 2>&1
      echo "KK_TF32=$t $tool smoke f32: exit $? $(tail -1 "$LOGS/san-$tool-tf32=$t.txt")"
    done
  done
fi

if [ "${PART:-all}" != checks ]; then
  echo "== the f32 cases of the gemm suite, KK_TF32=1 and 0, beside PyTorch"
  for t in 1 0; do
    KK_TF32=$t $k bench --device cuda:0 --suite bench/suites/gemm.json --filter f32 \
      --time-budget ${BUDGET:-3} -o "$LOGS/gemm-f32-tf32=$t.json" 2>&1 | grep median |
      sed 's/  CI \[[^]]*\]//' | sed "s/^/KK_TF32=$t /" | tee -a "$LOGS/bench.txt"
  done
  python3 - > "$LOGS/suite-f32.json" <<'PY'
import json
s = json.load(open("bench/suites/gemm.json"))
s["cases"] = [c for c in s["cases"] if "f32" in c["name"]]
print(json.dumps(s))
PY
  (cd bench && timeout 300 python3 compare_torch_linear.py "$LOGS/suite-f32.json" /tmp/gemm-f32-samples.json) \
    > "$LOGS/torch-f32.txt" 2>&1; grep median "$LOGS/torch-f32.txt"
  $k bench --device cuda:0 --import /tmp/gemm-f32-samples.json -o "$LOGS/gemm-f32-torch.json" > /dev/null 2>&1
fi

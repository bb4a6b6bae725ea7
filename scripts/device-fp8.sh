#!/usr/bin/env bash
# fp8_gemm on a lent H100, from an export (bash scripts/export-gpu-tree.sh;
# cd .gpu-tree): build; tests/test_cuda_fp8_gemm; the float64-oracle checks on
# fresh seeds (smoke+correctness, --fuzz 300); compute-sanitizer memcheck and
# racecheck on the test binary (KK_TEST_QUICK=1: the shapes up to K = 1000);
# the fp8_gemm suite beside torch._scaled_mm (per-tensor and row-wise, with and
# without fast accumulation) in the same run, and KernelKit's non-promoting
# kernel (KK_FP8_FAST_ACCUM=1). PART=checks (about 4 minutes) or PART=bench
# runs half. PART=epilogue (about 4 minutes): the fused TMA-stored epilogue:
# test_cuda_fp8_gemm and test_cuda_fp8_linear, fuzz of both on fresh seeds,
# memcheck and racecheck on fp8_linear with bias, GELU and residual, then
# bench/suites/fp8-epilogue.json with the TMA epilogue and the register one
# (KK_GEMM_EPILOGUE=regs) beside torch._scaled_mm in the same run.
# Results in $OUT/fp8-<part>.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
part=${PART:-all}
LOGS=/tmp/kk-fp8
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/fp8-$part.tgz" -C /tmp kk-fp8' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
b=${BUILD:-build-fp8}
echo "== build $(cat .commit 2>/dev/null)"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cuda_fp8_gemm test_cuda_fp8_linear || exit 1
k=./$b/kernelkit

if [ "$part" = epilogue ]; then
  for t in test_cuda_fp8_gemm test_cuda_fp8_linear; do
    timeout 120 ./$b/tests/$t > "$LOGS/$t.txt" 2>&1
    echo "$t: exit $? $(grep -E 'PASSED|FAILED' "$LOGS/$t.txt" | tr '\n' ' ')"
    grep -E "^\s+(FAIL|ERROR)|\[  FAILED|expected" "$LOGS/$t.txt" | head -6
  done
  for op in fp8_gemm fp8_linear; do
    s=$RANDOM
    timeout 90 $k check --op $op --device cuda:0 --fuzz 150 --seed $s > "$LOGS/fuzz-$op.txt" 2>&1
    echo "$op fuzz 150 seed $s: $(tail -1 "$LOGS/fuzz-$op.txt")"; grep FAIL "$LOGS/fuzz-$op.txt" | head -3
  done
  for tool in memcheck racecheck; do
    for dt in bf16 f32; do
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op fp8_linear \
        --device cuda:0 --params "M=200 N=264 K=256 scaling=block activation=gelu_tanh bias=1 residual=1 dtype=$dt" \
        > "$LOGS/san-$tool-$dt.txt" 2>&1
      echo "$tool fp8_linear $dt: exit $? $(tail -1 "$LOGS/san-$tool-$dt.txt")"
    done
  done
  $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1
  $k bench --device cuda:0 --suite bench/suites/fp8-epilogue.json --time-budget ${BUDGET:-1} \
    -o "$LOGS/fp8-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//' > "$LOGS/bench-tma.txt"
  KK_GEMM_EPILOGUE=regs $k bench --device cuda:0 --suite bench/suites/fp8-epilogue.json \
    --time-budget ${BUDGET:-1} -o "$LOGS/fp8-regs.json" 2>&1 | grep median |
    sed 's/  CI \[[^]]*\]//' > "$LOGS/bench-regs.txt"
  (cd bench && timeout 120 python3 compare_torch_fp8.py suites/fp8-epilogue.json /tmp/fp8-samples.json) \
    > "$LOGS/torch-fp8.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/fp8-samples.json -o "$LOGS/fp8-torch.json" > /dev/null 2>&1
  $k report "$LOGS/fp8-kernelkit.json" "$LOGS/fp8-torch.json" --output "$LOGS/fp8-report.md" > /dev/null 2>&1
  echo "(TFLOP/s: regs, tma, tma/regs)"
  kk_dev_ab "$LOGS/bench-regs.txt" "$LOGS/bench-tma.txt" | tee "$LOGS/regs-vs-tma.txt"
  grep -E "TFLOP" "$LOGS/torch-fp8.txt" | head -12
  exit 0
fi

if [ "$part" != bench ]; then
  echo "== tests/test_cuda_fp8_gemm"
  timeout 120 ./$b/tests/test_cuda_fp8_gemm > "$LOGS/test_cuda_fp8_gemm.txt" 2>&1
  echo "exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_cuda_fp8_gemm.txt" | tr '\n' ' ')"
  grep -E "^\s+(FAIL|ERROR)|\[  FAILED|fast accumulation|promoted" -A1 "$LOGS/test_cuda_fp8_gemm.txt" | head -16
  echo "== float64-oracle checks, fresh seeds"
  s=$RANDOM
  timeout 60 $k check --op fp8_gemm --device cuda:0 --suite smoke,correctness --seed $s > "$LOGS/check.txt" 2>&1
  echo "smoke+correctness seed $s: $(tail -1 "$LOGS/check.txt")"; grep -E "FAIL|SKIP" "$LOGS/check.txt" | head -3
  s=$RANDOM
  timeout 90 $k check --op fp8_gemm --device cuda:0 --fuzz 300 --seed $s > "$LOGS/fuzz.txt" 2>&1
  echo "fuzz 300 seed $s: $(tail -1 "$LOGS/fuzz.txt")"; grep -E "FAIL" "$LOGS/fuzz.txt" | head -3
  echo "== compute-sanitizer (KK_TEST_QUICK=1)"
  for tool in memcheck racecheck; do
    KK_TEST_QUICK=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 \
      ./$b/tests/test_cuda_fp8_gemm > "$LOGS/san-$tool-test.txt" 2>&1
    echo "$tool test_cuda_fp8_gemm: exit $? $(tail -1 "$LOGS/san-$tool-test.txt")"
  done
fi

if [ "$part" != checks ]; then
  echo "== the fp8_gemm suite beside torch._scaled_mm"
  $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1; tail -7 "$LOGS/calibrate.txt"
  $k bench --device cuda:0 --suite bench/suites/fp8_gemm.json --time-budget ${BUDGET:-3} \
    -o "$LOGS/fp8-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//'
  (cd bench && timeout 300 python3 compare_torch_fp8.py suites/fp8_gemm.json /tmp/fp8-samples.json) \
    > "$LOGS/torch-fp8.txt" 2>&1; grep -E "TFLOP|unavailable" "$LOGS/torch-fp8.txt" | head -40
  $k bench --device cuda:0 --import /tmp/fp8-samples.json -o "$LOGS/fp8-torch.json" > /dev/null 2>&1
  KK_FP8_FAST_ACCUM=1 $k bench --device cuda:0 --suite bench/suites/fp8_gemm.json --quick \
    -o "$LOGS/fp8-fast.json" > "$LOGS/bench-fast.txt" 2>&1
  grep median "$LOGS/bench-fast.txt" | sed 's/  CI \[[^]]*\]//' | sed 's/^/fast: /'
  $k report "$LOGS/fp8-kernelkit.json" "$LOGS/fp8-torch.json" --output "$LOGS/fp8-report.md" > /dev/null 2>&1
  grep -E "^\|" "$LOGS/fp8-report.md" | head -50
fi

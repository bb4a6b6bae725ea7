#!/usr/bin/env bash
# gemm and linear on a lent GPU, from an export (bash scripts/export-gpu-tree.sh;
# cd .gpu-tree): build; tests/test_cuda_gemm; the float64-oracle checks on fresh
# seeds (smoke+correctness, --fuzz 500 in bf16 and f16); compute-sanitizer
# memcheck, racecheck and synccheck; the gemm suite beside PyTorch (cuBLAS,
# cuBLASLt's GELU epilogue, eager and compiled SwiGLU) in the same run, and again
# with the Hopper kernel in 2-CTA clusters (KK_GEMM_SM90=cluster) beside it.
# PART=checks or PART=bench runs half; PART=quick (under 3 minutes): build,
# tests/test_cuda_gemm, and three bf16 GEMMs timed single vs cluster.
# PART=epilogue (about 7 minutes): build, tests/test_cuda_gemm, fresh-seed
# checks of gemm and linear (fuzz 300 bf16+f16), memcheck and racecheck on
# the Hopper kernel's epilogues, then bench/suites/gemm-epilogue.json with the
# TMA-stored epilogue (the default) and the register-stored one
# (KK_GEMM_EPILOGUE=regs) beside PyTorch in the same run.
# Results in $OUT/gemm-<part>.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
part=${PART:-all}
LOGS=/tmp/kk-gemm
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/gemm-$part.tgz" -C /tmp kk-gemm' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$LOGS/nvidia-smi-q.txt" 2>&1
b=${BUILD:-build-gemm}
echo "== build $(cat .commit 2>/dev/null)"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cuda_gemm || exit 1
k=./$b/kernelkit

if [ "$part" = quick ]; then
  echo "== tests/test_cuda_gemm"
  timeout 90 ./$b/tests/test_cuda_gemm > "$LOGS/test_cuda_gemm.txt" 2>&1
  echo "exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_cuda_gemm.txt" | tr '\n' ' ')"
  grep -E "^\s+(FAIL|ERROR)|\[  FAILED" "$LOGS/test_cuda_gemm.txt" | head -8
  echo "== gemm bf16, KK_GEMM_SM90=single vs cluster"
  for shape in M=8192,N=8192,K=8192 M=4096,N=14336,K=4096 M=16384,N=4096,K=1024; do
    for v in single cluster; do
      echo "$v $(KK_GEMM_SM90=$v timeout 30 $k bench --device cuda:0 --op gemm \
        --params $shape,dtype=bf16 --time-budget 2 2>&1 | grep median | sed 's/  CI \[[^]]*\]//')"
    done
  done | tee "$LOGS/quick-bench.txt"
  exit 0
fi

if [ "$part" = epilogue ]; then
  echo "== tests/test_cuda_gemm"
  timeout 150 ./$b/tests/test_cuda_gemm > "$LOGS/test_cuda_gemm.txt" 2>&1
  echo "exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_cuda_gemm.txt" | tr '\n' ' ')"
  grep -E "^\s+(FAIL|ERROR)|\[  FAILED|Error|error" "$LOGS/test_cuda_gemm.txt" | head -8
  echo "== fresh seeds"
  for op in gemm linear; do
    s=$RANDOM
    timeout 100 $k check --op $op --device cuda:0 --fuzz 300 --dtype bf16,f16 --seed $s \
      > "$LOGS/fuzz-$op.txt" 2>&1
    echo "$op fuzz 300 seed $s: $(tail -1 "$LOGS/fuzz-$op.txt")"; grep FAIL "$LOGS/fuzz-$op.txt" | head -3
  done
  echo "== compute-sanitizer on the Hopper epilogues (M = 200: tiles past M and N)"
  for tool in memcheck racecheck; do
    for form in "activation=gelu_tanh residual=1" "activation=swiglu residual=1"; do
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op linear \
        --device cuda:0 --params "M=200 N=300 K=136 bias=1 $form dtype=bf16" \
        > "$LOGS/san-$tool-${form%% *}.txt" 2>&1
      echo "$tool ${form%% *}: exit $? $(tail -1 "$LOGS/san-$tool-${form%% *}.txt")"
    done
  done
  echo "== bench/suites/gemm-epilogue.json: TMA epilogue, register epilogue, PyTorch"
  $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1
  $k bench --device cuda:0 --suite bench/suites/gemm-epilogue.json --time-budget ${BUDGET:-1} \
    -o "$LOGS/gemm-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//' > "$LOGS/bench-tma.txt"
  KK_GEMM_EPILOGUE=regs $k bench --device cuda:0 --suite bench/suites/gemm-epilogue.json \
    --time-budget ${BUDGET:-1} -o "$LOGS/gemm-regs.json" 2>&1 | grep median |
    sed 's/  CI \[[^]]*\]//' > "$LOGS/bench-regs.txt"
  (cd bench && timeout 240 python3 compare_torch_linear.py suites/gemm-epilogue.json /tmp/gemm-samples.json) \
    > "$LOGS/torch-gemm.txt" 2>&1; tail -2 "$LOGS/torch-gemm.txt"
  $k bench --device cuda:0 --import /tmp/gemm-samples.json -o "$LOGS/gemm-torch.json" > /dev/null 2>&1
  nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$LOGS/nvidia-smi-q-after.txt" 2>&1
  $k report "$LOGS/gemm-kernelkit.json" "$LOGS/gemm-torch.json" --output "$LOGS/gemm-report.md" > /dev/null 2>&1
  $k report "$LOGS/gemm-regs.json" "$LOGS/gemm-torch.json" --output "$LOGS/gemm-report-regs.md" > /dev/null 2>&1
  echo "(TFLOP/s: regs, tma, tma/regs)"
  kk_dev_ab "$LOGS/bench-regs.txt" "$LOGS/bench-tma.txt" | tee "$LOGS/regs-vs-tma.txt"
  grep -E "^\| .(linear|gemm)/" "$LOGS/gemm-report.md" | awk -F'|' '{print $2, $9, $11}' | head -20
  exit 0
fi

if [ "$part" != bench ]; then
  echo "== tests/test_cuda_gemm"
  ./$b/tests/test_cuda_gemm > "$LOGS/test_cuda_gemm.txt" 2>&1
  echo "exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_cuda_gemm.txt" | tr '\n' ' ')"
  grep -E "^\s+(FAIL|ERROR)" "$LOGS/test_cuda_gemm.txt" | head -5
  echo "== float64-oracle checks, fresh seeds"
  for op in gemm linear; do
    s=$RANDOM
    timeout 150 $k check --op $op --device cuda:0 --suite smoke,correctness --seed $s > "$LOGS/check-$op.txt" 2>&1
    echo "$op smoke+correctness seed $s: $(tail -1 "$LOGS/check-$op.txt")"; grep FAIL "$LOGS/check-$op.txt" | head -3
    s=$RANDOM
    timeout 150 $k check --op $op --device cuda:0 --fuzz 500 --dtype bf16,f16 --seed $s > "$LOGS/fuzz-$op.txt" 2>&1
    echo "$op fuzz 500 seed $s: $(tail -1 "$LOGS/fuzz-$op.txt")"; grep FAIL "$LOGS/fuzz-$op.txt" | head -3
  done
  echo "== compute-sanitizer"
  for tool in memcheck racecheck synccheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 ./$b/tests/test_cuda_gemm \
      > "$LOGS/san-$tool-test.txt" 2>&1
    echo "$tool test_cuda_gemm: exit $? $(tail -1 "$LOGS/san-$tool-test.txt")"
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op linear --device cuda:0 \
      --suite smoke --dtype bf16,f16 > "$LOGS/san-$tool.txt" 2>&1
    echo "$tool linear smoke: exit $? $(tail -1 "$LOGS/san-$tool.txt")"
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op gemm --device cuda:0 \
      --fuzz 20 --dtype bf16 > "$LOGS/san-$tool-gemm.txt" 2>&1
    echo "$tool gemm fuzz 20: exit $? $(tail -1 "$LOGS/san-$tool-gemm.txt")"
  done
fi

if [ "$part" != checks ]; then
  echo "== the gemm suite beside PyTorch"
  $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1; tail -7 "$LOGS/calibrate.txt"
  $k bench --device cuda:0 --suite bench/suites/gemm.json --time-budget ${BUDGET:-3} \
    -o "$LOGS/gemm-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//' |
    tee "$LOGS/bench-single.txt"
  (cd bench && timeout 300 python3 compare_torch_linear.py suites/gemm.json /tmp/gemm-samples.json) \
    > "$LOGS/torch-gemm.txt" 2>&1; tail -3 "$LOGS/torch-gemm.txt"
  $k bench --device cuda:0 --import /tmp/gemm-samples.json -o "$LOGS/gemm-torch.json" > /dev/null 2>&1
  KK_GEMM_KERNEL=sm80 $k bench --device cuda:0 --suite bench/suites/gemm.json --quick \
    -o "$LOGS/gemm-sm80.json" > "$LOGS/bench-sm80.txt" 2>&1
  echo "== the suite with KK_GEMM_SM90=cluster (TFLOP/s: single, cluster, cluster/single)"
  KK_GEMM_SM90=cluster $k bench --device cuda:0 --suite bench/suites/gemm.json --time-budget ${BUDGET:-3} \
    -o "$LOGS/gemm-cluster.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//' > "$LOGS/bench-cluster.txt"
  kk_dev_ab "$LOGS/bench-single.txt" "$LOGS/bench-cluster.txt" | tee "$LOGS/single-vs-cluster.txt"
  $k report "$LOGS/gemm-kernelkit.json" "$LOGS/gemm-torch.json" --output "$LOGS/gemm-report.md" > /dev/null 2>&1
  $k report "$LOGS/gemm-cluster.json" "$LOGS/gemm-torch.json" --output "$LOGS/gemm-report-cluster.md" \
    > /dev/null 2>&1
  if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then # one launch of the 8192^3 GEMM, profiled
    timeout 240 ncu --clock-control none --kernel-name regex:gemm --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      $k bench --device cuda:0 --op gemm --params M=8192,N=8192,K=8192,dtype=bf16 --time-budget 1 \
      > "$LOGS/ncu-8192.txt" 2>&1
    grep -E "Throughput|Duration|Busy|Stall|Bandwidth|Hit Rate|Warp Cycles" "$LOGS/ncu-8192.txt" | head -40
  fi
  grep -E "^\|" "$LOGS/gemm-report.md" | head -40
fi

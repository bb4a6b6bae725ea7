#!/usr/bin/env bash
# attention_backward on a lent H100, from an export (bash scripts/export-gpu-tree.sh;
# cd .gpu-tree): build; tests/test_cuda_attention_backward with the Hopper kernel and
# with the sm_80 one (KK_ATTN_BWD_KERNEL=sm80); the float64-oracle fuzz on a fresh
# seed; compute-sanitizer memcheck and racecheck on the test binary (KK_TEST_QUICK=1);
# then the cases of bench/suites/attention-backward.json whose names match CASES (a
# grep -E pattern; default the points up to S = 4096) with both kernels, beside
# PyTorch SDPA's backward (flash, cuDNN) in the same run. PART=checks or PART=bench
# runs half; KERNELS="hopper" (default "hopper sm80") picks the kernels. PART=ncu: Nsight
# Compute's issue, pipe, memory and stall metrics of the Hopper kernel on NCU_CASES
# (`kernelkit run` parameters, comma-separated; default D = 128 and 64 at S = 2048). Results
# in $OUT/attn-bwd-<part>.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
part=${PART:-all}
LOGS=/tmp/kk-bwd
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/attn-bwd-$part.tgz" -C /tmp kk-bwd' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
b=${BUILD:-build-bwd}
echo "== build $(cat .commit 2>/dev/null)"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cuda_attention_backward || exit 1
k=./$b/kernelkit
t=./$b/tests/test_cuda_attention_backward

if [ "$part" = ncu ]; then
  M=gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
  for x in lsu xu; do M="$M,sm__inst_executed_pipe_$x.avg.pct_of_peak_sustained_active"; done
  for x in alu fma; do M="$M,sm__pipe_${x}_cycles_active.avg.pct_of_peak_sustained_active"; done
  M="$M,lts__t_sectors_op_red.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
  M="$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second"
  for x in barrier long_scoreboard short_scoreboard wait math_pipe_throttle lg_throttle \
    mio_throttle membar sleeping dispatch_stall no_instruction selected not_selected branch_resolving; do
    M="$M,smsp__average_warps_issue_stalled_${x}_per_issue_active.ratio"
  done
  for c in ${NCU_CASES:-B=8,Hq=16,Hkv=16,Sq=2048,Sk=2048,D=128,dtype=bf16 B=8,Hq=32,Hkv=32,Sq=2048,Sk=2048,D=64,dtype=bf16}; do
    echo "== $c"
    timeout 200 ncu --clock-control none --kernel-name regex:attention_bwd_hopper --launch-count 1 \
      --metrics "$M" $k run attention_backward --params "$c" --random 1 --device cuda:0 2>&1 |
      grep -E "sm__|smsp__|lts__|dram__|gpu__|ERR|rror" |
      sed 's/^ *//;s/smsp__average_warps_issue_stalled_//;s/_per_issue_active.ratio//'
  done | tee "$LOGS/ncu.txt"
  exit 0
fi

if [ "$part" != bench ]; then
  for kern in ${KERNELS:-hopper sm80}; do
    sel=""; [ $kern = sm80 ] && sel=sm80
    KK_ATTN_BWD_KERNEL=$sel KK_TEST_QUICK=1 timeout 240 $t > "$LOGS/test-$kern.txt" 2>&1
    echo "test ($kern): exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test-$kern.txt" | tr '\n' ' ')"
    grep -E "^\s+(FAIL|ERROR)|\[  FAILED" "$LOGS/test-$kern.txt" | head -6
  done
  s=$RANDOM
  timeout 200 $k check --op attention_backward --device cuda:0 --fuzz ${FUZZ:-200} --dtype bf16,f16 \
    --seed $s > "$LOGS/fuzz.txt" 2>&1
  echo "fuzz seed $s: $(tail -1 "$LOGS/fuzz.txt")"; grep -E "^FAIL" "$LOGS/fuzz.txt" | head -4
  for tool in memcheck racecheck; do
    KK_TEST_QUICK=1 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $t \
      > "$LOGS/san-$tool.txt" 2>&1
    echo "$tool: exit $? $(tail -1 "$LOGS/san-$tool.txt")"
  done
fi

if [ "$part" != checks ]; then
  python3 - "${CASES:-S512|S2048|S4096|seeds}" > /tmp/bwd-ab.json <<'PY'
import json, re, sys
s = json.load(open("bench/suites/attention-backward.json"))
s["cases"] = [c for c in s["cases"] if re.search(sys.argv[1], c["name"])]
print(json.dumps(s))
PY
  $k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1
  for kern in ${KERNELS:-hopper sm80}; do
    sel=""; [ $kern = sm80 ] && sel=sm80
    KK_ATTN_BWD_KERNEL=$sel $k bench --device cuda:0 --suite /tmp/bwd-ab.json \
      --time-budget ${BUDGET:-1} -o "$LOGS/bwd-$kern.json" 2>&1 | grep median |
      sed 's/  CI \[[^]]*\]//' > "$LOGS/bench-$kern.txt"
  done
  (cd bench && timeout 200 python3 compare_torch_attention.py /tmp/bwd-ab.json /tmp/bwd-torch.json) \
    > "$LOGS/torch.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/bwd-torch.json -o "$LOGS/bwd-torch.json" > /dev/null 2>&1
  $k report "$LOGS/bwd-hopper.json" "$LOGS/bwd-torch.json" --output "$LOGS/bwd-report.md" \
    > /dev/null 2>&1
  if [ -s "$LOGS/bench-sm80.txt" ]; then
    echo "(TFLOP/s: sm80, hopper, hopper/sm80)"
    kk_dev_ab "$LOGS/bench-sm80.txt" "$LOGS/bench-hopper.txt" | tee "$LOGS/sm80-vs-hopper.txt"
  else
    sed 's/  */ /g' "$LOGS/bench-hopper.txt"
  fi
  grep -E "vs anchors|torch_sdpa" "$LOGS/bwd-report.md" | grep -oE "^\| \`[^\`]*\`|[0-9.]+× vs \`torch_sdpa_[a-z]+\`" |
    paste -sd' ' | sed 's/| `/\n/g' | head -20
fi

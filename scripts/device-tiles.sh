#!/usr/bin/env bash
# Hopper attention tilings on a lent GPU in one call, from the -DKK_ATTN_TUNING
# build scripts/dev-build.sh stages in .devbin/ (carried):
#  - float64-oracle checks per tiling (CHECK_TILES),
#  - the attention suite's cases matching POINTS (a regex, default the short
#    sequences) per tiling (TILES), beside PyTorch SDPA (flash, cuDNN),
#  - compute-sanitizer memcheck and racecheck per tiling (SAN_TILES),
#  - Nsight Compute on one case per tiling (NCU_TILES, NCU_CASE) when ncu is there.
# Run: bash scripts/device-tiles.sh (the device tool's working copy), with
# carry = [".devbin"].
set -uo pipefail
R=${OUT:-/tmp/kk-out}; L=/tmp/kk-tiles; mkdir -p "$R" "$L"
trap 'tar czf "$R/tiles-logs.tgz" -C /tmp kk-tiles' EXIT
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
nvidia-smi > "$L/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
k=./.devbin/kernelkit
echo "build: $(cat .devbin/commit | tr '\n' ' ')"
$k --version 2>&1 | head -1 || { echo "no usable $k"; ldd $k | grep "not found"; exit 1; }

python3 - "${POINTS:-S512|S2048|seeds}" <<'PY'
import json, re, sys
s = json.load(open("bench/suites/attention.json"))
s["cases"] = [c for c in s["cases"] if re.search(sys.argv[1], c["name"])]
json.dump(s, open("/tmp/attention-points.json", "w"), indent=2)
print("points:", " ".join(c["name"].split("/")[1] for c in s["cases"]))
PY

use() { if [ "$1" = default ]; then unset KK_ATTN_HOPPER_TILES; else export KK_ATTN_HOPPER_TILES=$1; fi; }

# A first check per tiling, short: one that fails or hangs leaves the lists.
echo "== first check per tiling"
ok=""
for t in $(echo ${TILES:-} ${CHECK_TILES:-} ${SAN_TILES:-} | tr ' ' '\n' | sort -u); do
  use $t
  timeout 30 $k check --op attention --device cuda:0 --params "B=2,Hq=4,Hkv=2,Sq=300,Sk=517,D=128,causal=1,dtype=bf16" > "$L/first-$t.txt" 2>&1 &&
  timeout 30 $k check --op attention --device cuda:0 --params "B=1,Hq=2,Hkv=2,Sq=1000,Sk=1000,D=64,dtype=f16" >> "$L/first-$t.txt" 2>&1
  rc=$?; echo "$t: exit $rc $(tail -1 "$L/first-$t.txt")"
  [ $rc = 0 ] && ok="$ok $t"
done
keep() { local r=""; for t in "$@"; do case " $ok " in *" $t "*) r="$r $t";; esac; done; echo $r; }
TILES=$(keep ${TILES:-}); CHECK_TILES=$(keep ${CHECK_TILES:-}); SAN_TILES=$(keep ${SAN_TILES:-})
use default

echo "== timings (median us, TFLOP/s)"
for t in default ${TILES:-}; do
  use $t
  timeout 150 $k bench --device cuda:0 --suite /tmp/attention-points.json --time-budget ${BUDGET:-2} -o "$L/t-$t.json" > "$L/t-$t.txt" 2>&1
  python3 - "$L/t-$t.json" "$t" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], " ".join("%s=%.1f/%.0f" % (b["name"].split("fwd-")[-1].split("/")[-1], b["summary"]["median"] * 1e6,
      b["throughput"]["tflops"]) for b in d["benchmarks"]))
PY
done
use default
if [ "${TORCH:-1}" = 1 ]; then
  (cd bench && timeout 150 python3 compare_torch_attention.py /tmp/attention-points.json /tmp/points-torch.json) > "$L/torch.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/points-torch.json -o "$L/torch.json" > /dev/null 2>&1
  python3 - "$L/torch.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for be in ("flash", "cudnn"):
    print(be, " ".join("%s=%.1f" % (b["name"].split("/")[-1].replace("fwd-", ""), b["summary"]["median"] * 1e6)
          for b in d["benchmarks"] if be in b["name"]))
PY
fi

echo "== checks (bf16, f16; fresh seeds)"
for t in ${CHECK_TILES:-}; do
  use $t
  timeout ${CHECK_TIMEOUT:-60} $k check --op attention --device cuda:0 --suite smoke,correctness,attention-fuzz27 --dtype bf16,f16 --max-ref-gflop ${MAX_REF_GFLOP:-20} --seed $RANDOM > "$L/check-$t.txt" 2>&1
  echo "$t suites: $(tail -1 "$L/check-$t.txt")"; grep -E "FAIL" "$L/check-$t.txt" | head -3
  timeout ${CHECK_TIMEOUT:-60} $k check --op attention --device cuda:0 --fuzz ${FUZZ:-200} --dtype bf16,f16 --seed $RANDOM > "$L/fuzz-$t.txt" 2>&1
  echo "$t fuzz: $(tail -1 "$L/fuzz-$t.txt")"; grep -E "FAIL" "$L/fuzz-$t.txt" | head -3
done

echo "== compute-sanitizer (attention smoke + correctness, bf16)"
for tool in memcheck racecheck synccheck; do for t in ${SAN_TILES:-}; do
  use $t
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op attention --device cuda:0 --suite smoke,correctness --dtype bf16 --max-ref-gflop 2 > "$L/san-$tool-$t.txt" 2>&1
  echo "$tool $t: exit $? $(tail -1 "$L/san-$tool-$t.txt")"
done; done
use default

if [ -n "${NCU_TILES:-}" ] && command -v ncu > /dev/null; then
  echo "== Nsight Compute"
  for t in $NCU_TILES; do
    use $t
    case_args=(run attention --params "${NCU_CASE:-B=32,Hq=32,Hkv=32,Sq=512,Sk=512,D=64,dtype=bf16}" --random 1 --device cuda:0)
    timeout 120 ncu --clock-control none --kernel-name regex:attention_hopper --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats --section SchedulerStats $k "${case_args[@]}" > "$L/ncu-$t.txt" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|No Eligible|Grid Size|Waves Per SM" "$L/ncu-$t.txt" | sed "s/^ */$t: /"
    timeout 120 ncu --clock-control none --kernel-name regex:attention_hopper --launch-count 1 --metrics \
      sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio \
      $k "${case_args[@]}" > "$L/ncu-m-$t.txt" 2>&1
    grep -E "sm__|smsp__|ERR" "$L/ncu-m-$t.txt" | sed "s/^ */$t: /"
  done
  use default
fi

#!/usr/bin/env bash
# The A/B rounds of this folder: per round `kernelkit calibrate` (2 threads; CALIBRATE=--quick for the short one: the
# copy bandwidth each round's JSON carries), then cpu-rowops with the base build and
# with this one, the order alternating by round; `kernelkit compare` of each pair.
#   BASE=/tmp/wt-softmax-base-build/kernelkit NEW=/tmp/wt-softmax-build/kernelkit \
#     ROUNDS=5 bench/results/cpu/amd-epyc-f25m17/issue22-softmax-bf16/rounds.sh
set -euo pipefail
cd "$(dirname "$0")"
SUITE=../../../../suites/cpu-rowops.json
export KK_NUM_THREADS=${KK_NUM_THREADS:-2}
for r in $(seq 1 "${ROUNDS:-5}"); do
  echo "== round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$NEW" calibrate --device cpu ${CALIBRATE:-} | grep copy_gbs
  order="before after"; [ $((r % 2)) = 0 ] && order="after before"
  for w in $order; do
    kk=$BASE; [ "$w" = after ] && kk=$NEW
    "$kk" bench --device cpu --suite "$SUITE" --time-budget "${BUDGET:-2}" -o "$w-cpu-rowops-r$r.json" | grep -v '^ *$'
  done
  "$NEW" compare "before-cpu-rowops-r$r.json" "after-cpu-rowops-r$r.json" --markdown "compare-r$r.md" > /dev/null || true
done

#!/usr/bin/env bash
set -u
cd /work/main
OUT=bench/results/cpu/amd-epyc-f25m17/linear-bf16-pass2
export KK_NUM_THREADS=2
S=bench/suites/cpu-linear-bf16.json
for r in ${ROUNDS:-1 2 3 4}; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    echo "== round $r $v $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $v = old ]; then LD_LIBRARY_PATH=/tmp/lin-old /tmp/lin-old/kernelkit bench --device cpu --suite $S --time-budget 3 -o $OUT/before-cpu-linear-bf16-r$r.json
    else build-lin/kernelkit bench --device cpu --suite $S --time-budget 3 -o $OUT/kernelkit-cpu-linear-bf16-r$r.json; fi
  done
  echo "== round $r torch $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  /tmp/h2torch/bin/python bench/cpu/torch_cpu.py $S --threads 2 --time-budget 3 --output /tmp/lin-raw-r$r.json
  build-lin/kernelkit bench --device cpu --import /tmp/lin-raw-r$r.json -o $OUT/torch-cpu-linear-bf16-r$r.json
  echo "== round $r end $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
done

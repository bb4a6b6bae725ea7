#!/usr/bin/env bash
# Issue 22's AMX evidence on the GPU machine's host CPU (an Intel Xeon with
# AMX; the GPU is not used), from an export (bash scripts/export-gpu-tree.sh
# --worktree; cd .gpu-tree):
#   build    CPU-only Release build (no CUDA), the carried cJSON/cmocka
#   tests    test_cpu_gemm (every level the CPU has, the amx level included:
#            the float64 checks, exact products, the tiles counted),
#            test_cpu_gemm_amx_emu, test_cpu_attention_amx_emu,
#            test_cpu_attention, test_calibrate, test_device
#   ceilings kernelkit calibrate --device cpu (--quick) on 2 and 16 threads:
#            fp32, vdpbf16ps and the AMX tiles' rate
#   bench    the SUITES (cpu-linear-bf16) at the amx level, cpu-linear-bf16
#            also capped at avx512_bf16 (KK_CPU_ISA), and PyTorch CPU (the
#            system python's torch, bench/cpu/torch_cpu.py) on the same cases,
#            KK_NUM_THREADS in THREADS_LIST (2 16), ROUNDS rounds (1), BUDGET s
#            a case (1); bench/cpu/ratios.py
#   isa      scripts/cpu-isa-check.sh (FUZZ=100) at ISA_LEVELS (avx512_bf16
#            amx), with what is left of TOTAL seconds (340)
# Everything in $OUT/cpu-amx.tgz, the summary also in $OUT/summary.txt.
#   run(command="cd .gpu-tree && bash scripts/device-cpu-amx.sh", carry=[".gpu-tree"])
set -uo pipefail
start=$(date +%s)
out=${OUT:-/tmp/kk-out}
LOGS=/tmp/kk-cpu-amx
rm -rf "$LOGS"
mkdir -p "$out" "$LOGS"
exec > >(tee "$LOGS/summary.txt") 2>&1
trap 'cp "$LOGS/summary.txt" "$out/summary.txt"; tar czf "$out/cpu-amx.tgz" -C /tmp kk-cpu-amx' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
KK_DEV_CMAKE_ARGS=(-DKK_CUDA=OFF)
b=${BUILD:-build-cpu-amx}
ROUNDS=${ROUNDS:-1}
BUDGET=${BUDGET:-1}
SUITES=${SUITES:-cpu-linear-bf16}
THREADS_LIST=${THREADS_LIST:-2 16}
TOTAL=${TOTAL:-340}
PY=${TORCH_PYTHON:-python3}
elapsed() { echo $(($(date +%s) - start)); }

echo "== CPU"
lscpu > "$LOGS/lscpu.txt" 2>&1
grep -m1 "model name" /proc/cpuinfo
grep -m1 "^flags" /proc/cpuinfo | tr ' ' '\n' | grep -E "^(amx|avx512_bf16|avx512_fp16)" | tr '\n' ' '
echo "(nproc $(nproc); $(uname -r))"

echo "== build $(cat .commit 2>/dev/null) (CPU only)"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cpu_gemm test_cpu_gemm_amx_emu \
  test_cpu_attention_amx_emu test_cpu_attention test_calibrate test_device || exit 1
grep -iE "warning" "$LOGS/build.log" | head -5
k=./$b/kernelkit
$k info > "$LOGS/info.txt" 2>&1
grep -E "SIMD|kernels" "$LOGS/info.txt"
KK_LOG=info $k info 2>&1 | grep -i "amx" | head -3 # a refused arch_prctl is logged at info
echo "(build done at $(elapsed) s)"

echo "== tests"
for t in test_cpu_gemm test_cpu_gemm_amx_emu test_cpu_attention_amx_emu test_cpu_attention \
  test_calibrate test_device; do
  XDG_CACHE_HOME=/tmp/kk-test-cache timeout 240 ./$b/tests/$t > "$LOGS/$t.txt" 2>&1
  echo "$t: exit $? $(grep -E 'PASSED|FAILED|SKIPPED \] [0-9]' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-200)"
  grep -E "\[  FAILED|^\s+FAIL|skipped:|error" "$LOGS/$t.txt" | head -8
done
echo "(tests done at $(elapsed) s)"

have_torch=0
if $PY -c "import torch; torch.set_num_threads(1)" > /dev/null 2>&1; then
  have_torch=1
  echo "torch $($PY -c 'import torch; print(torch.__version__, torch.backends.mkldnn.is_available())' 2>&1)"
else
  echo "no torch in $PY: KernelKit alone"
fi

for threads in $THREADS_LIST; do
  echo "== $threads threads: ceilings, then $SUITES at amx (cpu-linear-bf16 also at avx512_bf16) and PyTorch"
  d=$LOGS/t$threads
  mkdir -p "$d"
  export KK_NUM_THREADS=$threads
  $k calibrate --device cpu --quick > "$d/calibrate.txt" 2>&1
  grep -E "tflops|gbs" "$d/calibrate.txt" | sed 's/  \[[^]]*\]//'
  cp "${XDG_CACHE_HOME:-$HOME/.cache}"/kernelkit/ceilings-*.json "$d/" 2>/dev/null
  for r in $(seq 1 "$ROUNDS"); do
    for suite in $SUITES; do
      $k bench --device cpu --suite bench/suites/$suite.json --time-budget "$BUDGET" \
        -o "$d/kernelkit-$suite-r$r.json" > "$d/bench-$suite-amx-r$r.txt" 2>&1
      echo "$suite amx r$r: exit $? ($(grep -c median "$d/bench-$suite-amx-r$r.txt") timed)"
      if [ "$suite" = cpu-linear-bf16 ]; then
        KK_CPU_ISA=avx512_bf16 $k bench --device cpu --suite bench/suites/$suite.json \
          --time-budget "$BUDGET" -o "$d/kernelkit-$suite-avx512_bf16-r$r.json" \
          > "$d/bench-$suite-avx512_bf16-r$r.txt" 2>&1
        echo "$suite avx512_bf16 r$r: exit $? ($(grep -c median "$d/bench-$suite-avx512_bf16-r$r.txt") timed)"
      fi
      if [ $have_torch = 1 ]; then
        timeout 200 $PY bench/cpu/torch_cpu.py bench/suites/$suite.json --threads "$threads" \
          --time-budget "$BUDGET" --output "$d/torch-raw-$suite-r$r.json" > "$d/torch-$suite-r$r.txt" 2>&1
        echo "$suite torch r$r: exit $? ($(grep -c median "$d/torch-$suite-r$r.txt") timed)"
        $k bench --device cpu --import "$d/torch-raw-$suite-r$r.json" -o "$d/torch-$suite-r$r.json" \
          > "$d/import-$suite-r$r.txt" 2>&1 || echo "import failed: $(tail -2 "$d/import-$suite-r$r.txt")"
      fi
    done
  done
  rm -f "$d"/torch-raw-*.json
  $PY bench/cpu/ratios.py "$d" > "$d/ratios.md" 2>&1 || python3 bench/cpu/ratios.py "$d" > "$d/ratios.md" 2>&1
  cat "$d/ratios.md"
  echo "(done at $(elapsed) s)"
done
unset KK_NUM_THREADS

left=$((TOTAL - $(elapsed)))
if [ $left -ge 40 ]; then
  echo "== cpu-isa-check (FUZZ=100, ${ISA_LEVELS:-avx512_bf16 amx}, at most $left s)"
  BUILD=$b FUZZ=100 LEVELS="${ISA_LEVELS:-avx512_bf16 amx}" timeout $left bash scripts/cpu-isa-check.sh \
    > "$LOGS/cpu-isa-check.txt" 2>&1
  echo "exit $? (124: out of time)"
  cat "$LOGS/cpu-isa-check.txt" | tail -4
else
  echo "== cpu-isa-check skipped: $left s left"
fi
echo "== total $(elapsed) s"

#!/usr/bin/env bash
# The GPU kernels' evidence in one call on a lent GPU machine: build, the GPU
# tests, the float64-oracle checks, the benchmarks side by side with PyTorch
# (same run), compute-sanitizer. Run from an export (scripts/export-gpu-tree.sh):
#   cd .gpu-tree && bash scripts/device-kernels.sh
# PART=checks (build, tests, checks, compute-sanitizer) or PART=bench (build,
# benchmarks) splits it into two calls of the device tool's 10 minutes.
# Results (kernelkit.bench/1 JSON, the report) come back in
# $OUT/kernels-results.tgz (the device tool returns at most 8 files), logs in
# $OUT/kernels-logs.tgz ($OUT: the device tool's folder, else /tmp/kk-out).
set -uo pipefail
out=${OUT:-/tmp/kk-out}
export RESULTS=/tmp/kk-results
LOGS=/tmp/kk-kernels
mkdir -p "$out" "$RESULTS" "$LOGS"
trap 'tar czf "$out/kernels-logs.tgz" -C /tmp kk-kernels; tar czf "$out/kernels-results.tgz" -C /tmp kk-results' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
[ -n "$ob" ] || ob=$deps/lib/libopenblas.so.0
b=build-kernels
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1

echo "== build"
cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF -DKK_CUDA_ARCHS="${KK_CUDA_ARCHS:-90a}" \
  -DKK_GIT_COMMIT_OVERRIDE="$(cat .commit 2>/dev/null)" \
  -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
  -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
  -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" > "$LOGS/build.log" 2>&1 &&
cmake --build $b -j"$(nproc)" --target kernelkit_cli test_cuda_attention test_cuda_nvfp4_gemv \
  >> "$LOGS/build.log" 2>&1 || { grep -E "error" -A3 "$LOGS/build.log" | head -40; exit 1; }
k=./$b/kernelkit

echo "== ceilings"
$k calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1; tail -7 "$LOGS/calibrate.txt"
cp "${XDG_CACHE_HOME:-$HOME/.cache}"/kernelkit/ceilings-*.json "$RESULTS/" 2>/dev/null

part=${PART:-all}
if [ $part != bench ]; then
echo "== GPU tests (fresh seeds)"
for t in test_cuda_nvfp4_gemv test_cuda_attention; do
  ./$b/tests/$t > "$LOGS/$t.txt" 2>&1; echo "$t: exit $? $(grep -E 'seed|PASSED|FAILED' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-200)"
done

echo "== float64-oracle checks"
for op in nvfp4_gemv attention attention_varlen; do
  timeout 150 $k check --op $op --device cuda:0 --suite smoke,correctness --seed $RANDOM > "$LOGS/check-$op.txt" 2>&1
  echo "$op smoke+correctness: $(tail -1 "$LOGS/check-$op.txt")"; grep FAIL "$LOGS/check-$op.txt" | head -5
  dt=""; [ $op != nvfp4_gemv ] && dt="--dtype bf16,f16"
  timeout 150 $k check --op $op --device cuda:0 --fuzz 500 $dt --seed $RANDOM > "$LOGS/fuzz-$op.txt" 2>&1
  echo "$op fuzz: $(sed -n 1p "$LOGS/fuzz-$op.txt") -> $(tail -1 "$LOGS/fuzz-$op.txt")"; grep FAIL "$LOGS/fuzz-$op.txt" | head -5
done
timeout 100 $k check --op nvfp4_gemv --device cuda:0 --suite correctness,performance --dist gpumode --seed $RANDOM > "$LOGS/check-nvfp4-gpumode.txt" 2>&1
echo "nvfp4_gemv correctness+performance, gpumode inputs: $(tail -1 "$LOGS/check-nvfp4-gpumode.txt")"
timeout 100 $k check --op attention --device cuda:0 --suite attention-fuzz27 --max-ref-gflop 100 > "$LOGS/check-fuzz27.txt" 2>&1
echo "attention-fuzz27: $(tail -1 "$LOGS/check-fuzz27.txt")"

fi # checks
if [ $part != checks ]; then
echo "== nvfp4_gemv: variants (cold), then the default beside PyTorch"
for v in ${NVFP4_VARIANTS:-0}; do
  KK_NVFP4_GEMV_VARIANT=$v $k bench --device cuda:0 --suite nvfp4_gemv --cold \
    -o "$LOGS/nvfp4-v$v.json" 2>&1 | grep median | sed "s/^/v$v /; s/  CI \[[^]]*\]//"
done
$k bench --device cuda:0 --suite nvfp4_gemv --cold -o "$RESULTS/nvfp4_gemv-kernelkit.json" > "$LOGS/bench-nvfp4.txt" 2>&1
(cd bench && python3 compare_torch_nvfp4.py suites/nvfp4_gemv.json /tmp/nvfp4-samples.json) > "$LOGS/torch-nvfp4.txt" 2>&1
$k bench --device cuda:0 --import /tmp/nvfp4-samples.json -o "$RESULTS/nvfp4_gemv-torch.json" 2>&1 | grep median

echo "== attention beside PyTorch SDPA (flash, cuDNN): prefill, decode"
for suite in attention attention-decode; do
  $k bench --device cuda:0 --suite $suite -o "$RESULTS/$suite-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//'
  (cd bench && timeout 150 python3 compare_torch_attention.py suites/$suite.json /tmp/$suite-samples.json) > "$LOGS/torch-$suite.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/$suite-samples.json -o "$RESULTS/$suite-torch.json" > /dev/null 2>&1
done
# Decode again with the clean flush (a read sweep: no dirty lines written
# back during the kernel), KernelKit and PyTorch alike.
$k bench --device cuda:0 --suite attention-decode --flush read -o "$RESULTS/attention-decode-flush-read-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//; s/^/read flush: /'
(cd bench && KK_BENCH_FLUSH=read timeout 150 python3 compare_torch_attention.py suites/attention-decode.json /tmp/decode-read-samples.json) > "$LOGS/torch-decode-read.txt" 2>&1
$k bench --device cuda:0 --import /tmp/decode-read-samples.json -o "$RESULTS/attention-decode-flush-read-torch.json" > /dev/null 2>&1
KK_ATTN_KERNEL=sm80 $k bench --device cuda:0 --suite attention --quick -o "$LOGS/attention-sm80.json" > /dev/null 2>&1
$k bench --device cuda:0 --suite attention-varlen -o "$RESULTS/attention-varlen-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//'
$k report "$RESULTS"/nvfp4_gemv-*.json "$RESULTS"/attention-kernelkit.json "$RESULTS"/attention-torch.json \
  "$RESULTS"/attention-decode-*.json --output "$RESULTS/kernels-report.md" > /dev/null 2>&1

fi # bench
if [ $part != bench ]; then
echo "== compute-sanitizer (quick test variants; decode through the correctness suite)"
for tool in memcheck racecheck; do for t in test_cuda_attention test_cuda_nvfp4_gemv; do
  KK_TEST_QUICK=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 ./$b/tests/$t > "$LOGS/san-$tool-$t.txt" 2>&1
  echo "$tool $t: exit $? $(tail -1 "$LOGS/san-$tool-$t.txt")"
done
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op attention --device cuda:0 --suite correctness --dtype bf16 > "$LOGS/san-$tool-check.txt" 2>&1
  echo "$tool attention correctness (decode, hopper, sm80): exit $? $(tail -1 "$LOGS/san-$tool-check.txt")"
done
fi # checks

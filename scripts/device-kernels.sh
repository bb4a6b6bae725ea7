#!/usr/bin/env bash
# The GPU kernels' evidence in one call on a lent GPU machine: build, the GPU
# tests, the float64-oracle checks, the benchmarks side by side with PyTorch
# (same run), compute-sanitizer. Run from an export (scripts/export-gpu-tree.sh):
#   cd .gpu-tree && bash scripts/device-kernels.sh
# Results (kernelkit.bench/1) go to $OUT (the device tool's folder) or /tmp/kk-out;
# logs into $OUT/kernels-logs.tgz.
set -uo pipefail
export RESULTS=${OUT:-/tmp/kk-out}
LOGS=/tmp/kk-kernels
mkdir -p "$RESULTS" "$LOGS"
trap 'tar czf "$RESULTS/kernels-logs.tgz" -C /tmp kk-kernels' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
[ -n "$ob" ] || ob=$deps/lib/libopenblas.so.0
b=build-kernels
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1

echo "== build"
cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF \
  -DKK_GIT_COMMIT_OVERRIDE="$(cat .commit 2>/dev/null)" \
  -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
  -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
  -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" > "$LOGS/build.log" 2>&1 &&
cmake --build $b -j"$(nproc)" --target kernelkit_cli test_cuda_attention test_cuda_nvfp4_gemv \
  >> "$LOGS/build.log" 2>&1 || { grep -E "error" -A3 "$LOGS/build.log" | head -40; exit 1; }
k=./$b/kernelkit

echo "== ceilings"
$k calibrate --device cuda:0 > "$LOGS/calibrate.txt" 2>&1; tail -7 "$LOGS/calibrate.txt"
cp "${XDG_CACHE_HOME:-$HOME/.cache}"/kernelkit/ceilings-*.json "$RESULTS/" 2>/dev/null

echo "== GPU tests (fresh seeds)"
for t in test_cuda_nvfp4_gemv test_cuda_attention; do
  ./$b/tests/$t > "$LOGS/$t.txt" 2>&1; echo "$t: exit $? $(grep -E 'seed|PASSED|FAILED' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-200)"
done

echo "== float64-oracle checks"
for op in nvfp4_gemv attention; do
  $k check --op $op --device cuda:0 --suite smoke,correctness --seed $RANDOM > "$LOGS/check-$op.txt" 2>&1
  echo "$op smoke+correctness: $(tail -1 "$LOGS/check-$op.txt")"
  $k check --op $op --device cuda:0 --fuzz 500 --seed $RANDOM > "$LOGS/fuzz-$op.txt" 2>&1
  echo "$op fuzz: $(sed -n 1p "$LOGS/fuzz-$op.txt") -> $(tail -1 "$LOGS/fuzz-$op.txt")"
done
$k check --op nvfp4_gemv --device cuda:0 --suite correctness,performance --dist gpumode --seed $RANDOM > "$LOGS/check-nvfp4-gpumode.txt" 2>&1
echo "nvfp4_gemv correctness+performance, gpumode inputs: $(tail -1 "$LOGS/check-nvfp4-gpumode.txt")"
$k check --op attention --device cuda:0 --suite attention-fuzz27 --max-ref-gflop 100 > "$LOGS/check-fuzz27.txt" 2>&1
echo "attention-fuzz27: $(tail -1 "$LOGS/check-fuzz27.txt")"

echo "== nvfp4_gemv: variants (cold), then the default beside PyTorch"
for v in 0 1; do for r in 8 4; do
  KK_NVFP4_GEMV_VARIANT=$v KK_NVFP4_GEMV_ROWS=$r $k bench --device cuda:0 --suite nvfp4_gemv --cold \
    -o "$LOGS/nvfp4-v$v-r$r.json" 2>&1 | grep median | sed "s/^/v$v r$r /; s/  CI \[[^]]*\]//"
done; done
$k bench --device cuda:0 --suite nvfp4_gemv --cold -o "$RESULTS/nvfp4_gemv-kernelkit.json" > "$LOGS/bench-nvfp4.txt" 2>&1
(cd bench && python3 compare_torch_nvfp4.py suites/nvfp4_gemv.json /tmp/nvfp4-samples.json) > "$LOGS/torch-nvfp4.txt" 2>&1
$k bench --device cuda:0 --import /tmp/nvfp4-samples.json -o "$RESULTS/nvfp4_gemv-torch.json" 2>&1 | grep median

echo "== attention beside PyTorch SDPA (flash, cuDNN)"
$k bench --device cuda:0 --suite attention -o "$RESULTS/attention-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//'
(cd bench && python3 compare_torch_attention.py suites/attention.json /tmp/attn-samples.json) > "$LOGS/torch-attention.txt" 2>&1
$k bench --device cuda:0 --import /tmp/attn-samples.json -o "$RESULTS/attention-torch.json" > /dev/null 2>&1
$k report "$RESULTS/nvfp4_gemv-kernelkit.json" "$RESULTS/nvfp4_gemv-torch.json" \
  "$RESULTS/attention-kernelkit.json" "$RESULTS/attention-torch.json" --output "$LOGS/report.md" > /dev/null 2>&1

echo "== compute-sanitizer (quick test variants)"
for tool in memcheck racecheck; do for t in test_cuda_nvfp4_gemv test_cuda_attention; do
  KK_TEST_QUICK=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 ./$b/tests/$t > "$LOGS/san-$tool-$t.txt" 2>&1
  echo "$tool $t: exit $? $(tail -1 "$LOGS/san-$tool-$t.txt")"
done; done

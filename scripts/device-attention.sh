#!/usr/bin/env bash
# Attention on a lent GPU in one call: build (sm_90a, tile experiments on),
# the GPU test, the float64-oracle checks, the Hopper kernel beside the
# sm_80-class one, a tile sweep, compute-sanitizer; optionally (TORCH=1) the
# suite beside PyTorch SDPA. Run from an export: cd .gpu-tree && bash scripts/device-attention.sh
set -uo pipefail
export RESULTS=${OUT:-/tmp/kk-out}
LOGS=/tmp/kk-attn
mkdir -p "$RESULTS" "$LOGS"
trap 'tar czf "$RESULTS/attention-logs.tgz" -C /tmp kk-attn' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
[ -n "$ob" ] || ob=$deps/lib/libopenblas.so.0
b=build-attn
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
echo "== build"
cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF -DKK_CUDA_ARCHS=90a \
  -DCMAKE_CUDA_FLAGS="-DKK_ATTN_TUNING" -DKK_GIT_COMMIT_OVERRIDE="$(cat .commit 2>/dev/null)" \
  -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
  -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
  -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" > "$LOGS/build.log" 2>&1 &&
cmake --build $b -j"$(nproc)" --target kernelkit_cli test_cuda_attention >> "$LOGS/build.log" 2>&1 ||
  { grep -E "error" -A3 "$LOGS/build.log" | head -40; exit 1; }
k=./$b/kernelkit
(cuobjdump --dump-resource-usage $b/CMakeFiles/kernelkit_objects.dir/src/cuda/kernels/attention_sm90.cu.o 2>&1 | grep -E "Function|REG" | head -40) > "$LOGS/resources.txt"

echo "== GPU test (fresh seed)"
timeout 300 ./$b/tests/test_cuda_attention > "$LOGS/test.txt" 2>&1; echo "exit $? $(grep -E 'seed|PASSED|FAILED' "$LOGS/test.txt" | tr '\n' ' ' | cut -c1-300)"
grep -B2 -A8 -E "FAILED|Error|error" "$LOGS/test.txt" | head -40

echo "== float64-oracle checks (per Hopper tiling: default and CHECK_TILES)"
for t in default ${CHECK_TILES:-}; do
  [ $t = default ] && unset KK_ATTN_HOPPER_TILES || export KK_ATTN_HOPPER_TILES=$t
  timeout 200 $k check --op attention --device cuda:0 --suite smoke,correctness,attention-fuzz27 --max-ref-gflop 100 --seed $RANDOM > "$LOGS/check-$t.txt" 2>&1
  echo "$t smoke+correctness+fuzz27: $(tail -1 "$LOGS/check-$t.txt")"; grep -E "FAIL" "$LOGS/check-$t.txt" | head -5
  timeout 200 $k check --op attention --device cuda:0 --fuzz ${FUZZ:-500} --dtype bf16,f16 --seed $RANDOM > "$LOGS/fuzz-$t.txt" 2>&1
  echo "$t fuzz: $(sed -n 1p "$LOGS/fuzz-$t.txt") -> $(tail -1 "$LOGS/fuzz-$t.txt")"; grep -E "FAIL" "$LOGS/fuzz-$t.txt" | head -5
done
unset KK_ATTN_HOPPER_TILES

echo "== sm80 baseline (quick)"
KK_ATTN_KERNEL=sm80 $k bench --device cuda:0 --suite attention --quick -o "$LOGS/q-sm80.json" 2>&1 | grep median | sed "s/  CI \[[^]]*\]//" | awk '{print "sm80", $1, $(NF-3), $(NF-2)}'
echo "== hopper tilings (quick)"
for t in default ${TILES:-}; do
  [ $t = default ] && unset KK_ATTN_HOPPER_TILES || export KK_ATTN_HOPPER_TILES=$t
  $k bench --device cuda:0 --suite attention --quick -o "$LOGS/t-$t.json" 2>&1 | grep median | sed "s/  CI \[[^]]*\]//" | awk -v t=$t '{print t, $1, $(NF-3), $(NF-2)}'
done
unset KK_ATTN_HOPPER_TILES
if [ -n "${DECODE_VARIANTS:-}" ]; then
  echo "== decode variants"
  for v in $DECODE_VARIANTS; do
    KK_ATTN_DECODE_VARIANT=$v $k bench --device cuda:0 --suite attention-decode --quick -o "$LOGS/d$v.json" 2>&1 | grep median | sed "s/  CI \[[^]]*\]//" | awk -v v=$v '{print "v" v, $1, $3, $4, $(NF-5), $(NF-4)}'
    KK_ATTN_DECODE_VARIANT=$v timeout 100 $k check --op attention --device cuda:0 --suite smoke,correctness --seed $RANDOM > "$LOGS/dcheck$v.txt" 2>&1; echo "v$v check: $(tail -1 "$LOGS/dcheck$v.txt")"
    for prm in "B=1 Hq=32 Hkv=32 Sq=1 Sk=8192 D=128 dtype=bf16" \
               "B=2 Hq=32 Hkv=8 Sq=2 Sk=5001 D=128 dtype=f16 causal=1 lse=1" \
               "B=1 Hq=8 Hkv=1 Sq=2 Sk=3001 D=64 dtype=bf16 window_left=300 window_right=0 lse=1 dropout=0.1 seed=7"; do
      KK_ATTN_DECODE_VARIANT=$v $k check --op attention --device cuda:0 --params "$prm" 2>&1 | tail -1 | sed "s/^/v$v params: /"; done
  done
fi
if [ "${TORCH:-0}" = 1 ]; then
  echo "== suite beside PyTorch SDPA"
  $k bench --device cuda:0 --suite attention -o "$RESULTS/attention-kernelkit.json" 2>&1 | grep median | sed 's/  CI \[[^]]*\]//'
  (cd bench && python3 compare_torch_attention.py suites/attention.json /tmp/attn-samples.json) > "$LOGS/torch.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/attn-samples.json -o "$RESULTS/attention-torch.json" > /dev/null 2>&1
  $k report "$RESULTS/attention-kernelkit.json" "$RESULTS/attention-torch.json" --output "$RESULTS/attention-report.md" > /dev/null 2>&1
fi
echo "== compute-sanitizer"
for tool in memcheck racecheck; do for t in default ${SAN_TILES:-}; do
  [ $t = default ] && unset KK_ATTN_HOPPER_TILES || export KK_ATTN_HOPPER_TILES=$t
  KK_TEST_QUICK=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 ./$b/tests/test_cuda_attention > "$LOGS/san-$tool-$t.txt" 2>&1
  echo "$tool $t: exit $? $(tail -1 "$LOGS/san-$tool-$t.txt")"
done; done
if [ -n "${SAN_DECODE:-}" ]; then
  for tool in memcheck racecheck; do
    KK_ATTN_DECODE_VARIANT=$SAN_DECODE timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op attention --device cuda:0 --suite correctness --dtype bf16 > "$LOGS/san-decode-$tool.txt" 2>&1
    echo "decode v$SAN_DECODE $tool: exit $? $(tail -1 "$LOGS/san-decode-$tool.txt")"
  done
fi

#!/usr/bin/env bash
# Follow-up measurements on a lent GPU in one call (a -DKK_ATTN_TUNING build):
#  - attention: Hopper tilings at the short-sequence points beside PyTorch SDPA
#    (checks first for each tiling),
#  - the two L2 flush modes (write: GPU MODE's memset; read: a read sweep that
#    leaves the L2 clean) on decode and nvfp4_gemv, KernelKit and PyTorch alike,
#  - nvfp4_gemv variants (NVFP4_VARIANTS), checked and timed cold,
#  - compute-sanitizer on what changed.
# Run from an export: cd .gpu-tree && bash scripts/device-followup.sh
set -uo pipefail
R=${OUT:-/tmp/kk-out}; L=/tmp/kk-followup; mkdir -p "$R" "$L"
trap 'tar czf "$R/followup-logs.tgz" -C /tmp kk-followup' EXIT
deps=$PWD/.deps; export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}'); [ -n "$ob" ] || ob=$deps/lib/libopenblas.so.0
b=build-followup
nvidia-smi > "$L/nvidia-smi.txt" 2>&1
echo "== build"
cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF -DKK_CUDA_ARCHS=90a \
  -DCMAKE_CUDA_FLAGS="-DKK_ATTN_TUNING" -DKK_GIT_COMMIT_OVERRIDE="$(cat .commit 2>/dev/null)" \
  -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
  -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
  -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" > "$L/build.log" 2>&1 &&
cmake --build $b -j"$(nproc)" --target kernelkit_cli test_cuda_measure test_cuda_nvfp4_gemv >> "$L/build.log" 2>&1 ||
  { grep -E "error" -A3 "$L/build.log" | head -30; exit 1; }
k=./$b/kernelkit
$k calibrate --device cuda:0 --quick > "$L/calibrate.txt" 2>&1; grep -E "read_gbs|copy_gbs" "$L/calibrate.txt"
cp "${XDG_CACHE_HOME:-$HOME/.cache}"/kernelkit/ceilings-*.json "$L/" 2>/dev/null

echo "== tests"
for t in test_cuda_measure test_cuda_nvfp4_gemv; do
  timeout 200 ./$b/tests/$t > "$L/$t.txt" 2>&1; echo "$t: exit $? $(grep -E 'PASSED|FAILED' "$L/$t.txt" | tr '\n' ' ')"
done

echo "== attention: tilings at S = 512 (checks, then beside PyTorch)"
python3 - <<'PY'
import json
s = json.load(open("bench/suites/attention.json"))
s["cases"] = [c for c in s["cases"] if "S512" in c["name"] or "seeds" in c["name"]]
json.dump(s, open("/tmp/attention-short.json", "w"), indent=2)
PY
for t in default ${TILES:-}; do
  [ $t = default ] && unset KK_ATTN_HOPPER_TILES || export KK_ATTN_HOPPER_TILES=$t
  if [ $t != default ]; then
    timeout 90 $k check --op attention --device cuda:0 --suite smoke,correctness,attention-fuzz27 --dtype bf16,f16 --seed $RANDOM > "$L/check-$t.txt" 2>&1
    echo "$t check: $(tail -1 "$L/check-$t.txt")"
  fi
  $k bench --device cuda:0 --suite /tmp/attention-short.json --time-budget 3 -o "$L/short-$t.json" 2>&1 | grep median | sed "s/  CI \[[^]]*\]//" | awk -v t=$t '{print t, $1, $3, $4, $(NF-3), $(NF-2)}'
done
unset KK_ATTN_HOPPER_TILES
(cd bench && timeout 100 python3 compare_torch_attention.py /tmp/attention-short.json /tmp/short-torch.json) > "$L/torch-short.txt" 2>&1
$k bench --device cuda:0 --import /tmp/short-torch.json -o "$L/short-torch.json" 2>&1 | grep median | awk '{print $1, $3, $4}'

echo "== L2 flush modes: decode, nvfp4_gemv (KernelKit and PyTorch)"
for mode in write read; do
  $k bench --device cuda:0 --suite attention-decode --flush $mode -o "$L/decode-$mode.json" 2>&1 | grep median | sed "s/  CI \[[^]]*\]//" | awk -v m=$mode '{print m, $1, $3, $4, $5, $6}'
  (cd bench && KK_BENCH_FLUSH=$mode timeout 100 python3 compare_torch_attention.py suites/attention-decode.json /tmp/decode-torch-$mode.json) > "$L/torch-decode-$mode.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/decode-torch-$mode.json -o "$L/decode-torch-$mode.json" 2>&1 | grep median | awk -v m=$mode '{print m, $1, $3, $4}'
  for v in ${NVFP4_VARIANTS:-2}; do
    KK_NVFP4_GEMV_VARIANT=$v $k bench --device cuda:0 --suite nvfp4_gemv --cold --flush $mode -o "$L/nvfp4-v$v-$mode.json" 2>&1 | grep median | sed "s/  CI \[[^]]*\]//" | awk -v m=$mode -v v=$v '{print m, "v" v, $1, $3, $4, $5, $6}'
  done
  (cd bench && KK_BENCH_FLUSH=$mode timeout 60 python3 compare_torch_nvfp4.py suites/nvfp4_gemv.json /tmp/nvfp4-torch-$mode.json) > "$L/torch-nvfp4-$mode.txt" 2>&1
  $k bench --device cuda:0 --import /tmp/nvfp4-torch-$mode.json -o "$L/nvfp4-torch-$mode.json" 2>&1 | grep median | awk -v m=$mode '{print m, $1, $3, $4}'
done

echo "== nvfp4_gemv variants: checks"
for v in ${NVFP4_VARIANTS:-2}; do
  KK_NVFP4_GEMV_VARIANT=$v timeout 60 $k check --op nvfp4_gemv --device cuda:0 --suite smoke,correctness --seed $RANDOM > "$L/nv-check-$v.txt" 2>&1
  KK_NVFP4_GEMV_VARIANT=$v timeout 60 $k check --op nvfp4_gemv --device cuda:0 --fuzz 100 --seed $RANDOM > "$L/nv-fuzz-$v.txt" 2>&1
  echo "v$v: $(tail -1 "$L/nv-check-$v.txt") / fuzz $(tail -1 "$L/nv-fuzz-$v.txt")"
done

echo "== compute-sanitizer"
for tool in memcheck racecheck; do
  KK_TEST_QUICK=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 ./$b/tests/test_cuda_nvfp4_gemv > "$L/san-$tool-nvfp4.txt" 2>&1
  echo "$tool test_cuda_nvfp4_gemv: exit $? $(tail -1 "$L/san-$tool-nvfp4.txt")"
  for t in ${SAN_TILES:-}; do
    KK_ATTN_HOPPER_TILES=$t timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $k check --op attention --device cuda:0 --suite smoke --dtype bf16,f16 > "$L/san-$tool-$t.txt" 2>&1
    echo "$tool attention smoke $t: exit $? $(tail -1 "$L/san-$tool-$t.txt")"
  done
done

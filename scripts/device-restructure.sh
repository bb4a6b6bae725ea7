#!/usr/bin/env bash
# Behaviour unchanged across a restructure, on a lent GPU, from an export made
# with `bash scripts/export-gpu-tree.sh --before COMMIT` (cd .gpu-tree first):
#   PART=checks  build HEAD; every test (the GPU ones too); the float64-oracle
#                checks of every op with a CUDA kernel on fresh seeds;
#                compute-sanitizer memcheck and racecheck on the CUDA tests
#   PART=bench   build COMMIT (before/) and HEAD; the attention and nvfp4_gemv
#                suites with each, alternating; kernelkit compare before after;
#                HEAD's host overhead (kk_op_run and each typed entry point)
# Everything comes back in $OUT/restructure-<part>.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
part=${PART:-checks}
LOGS=/tmp/kk-restructure
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/restructure-$part.tgz" -C /tmp kk-restructure' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
[ -n "$ob" ] || ob=$deps/lib/libopenblas.so.0
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$LOGS/nvidia-smi-q.txt" 2>&1

# build DIR TREE TARGETS...: configure TREE into DIR (sm_90a) and build TARGETS
build() {
  local dir=$1 tree=$2; shift 2
  cmake -S "$tree" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF -DKK_CUDA_ARCHS=90a \
    -DKK_GIT_COMMIT_OVERRIDE="$(cat "$tree/.commit" 2>/dev/null)" \
    -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
    -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
    -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" > "$LOGS/build-$(basename "$dir").log" 2>&1 &&
  cmake --build "$dir" -j"${JOBS:-$(nproc)}" "$@" >> "$LOGS/build-$(basename "$dir").log" 2>&1 ||
    { grep -E "error" -A3 "$LOGS/build-$(basename "$dir").log" | head -30; return 1; }
}

if [ "$part" = checks ]; then
  echo "== build HEAD ($(cat .commit))"
  build build-after . || exit 1
  k=./build-after/kernelkit
  echo "== every test"
  ctest --test-dir build-after --output-on-failure -j4 > "$LOGS/ctest.txt" 2>&1
  grep -E "tests passed|\*\*\*Failed|Skipped" "$LOGS/ctest.txt" | tail -12
  echo "== float64-oracle checks, fresh seeds"
  for op in attention attention_varlen nvfp4_gemv convert; do
    s=$RANDOM
    timeout 120 $k check --op $op --device cuda:0 --suite smoke,correctness --seed $s > "$LOGS/check-$op.txt" 2>&1
    echo "$op smoke+correctness seed $s: $(tail -1 "$LOGS/check-$op.txt")"; grep FAIL "$LOGS/check-$op.txt" | head -3
    dt=""; case $op in attention*) dt="--dtype bf16,f16";; esac
    s=$RANDOM
    timeout 120 $k check --op $op --device cuda:0 --fuzz 500 $dt --seed $s > "$LOGS/fuzz-$op.txt" 2>&1
    echo "$op fuzz 500 seed $s: $(tail -1 "$LOGS/fuzz-$op.txt")"; grep FAIL "$LOGS/fuzz-$op.txt" | head -3
  done
  timeout 100 $k check --op attention --device cuda:0 --suite attention-fuzz27 --max-ref-gflop 100 > "$LOGS/check-fuzz27.txt" 2>&1
  echo "attention-fuzz27: $(tail -1 "$LOGS/check-fuzz27.txt")"
  echo "== compute-sanitizer"
  for tool in memcheck racecheck; do
    for t in test_cuda_attention test_cuda_nvfp4_gemv test_cuda_op_run test_cuda_quant; do
      KK_TEST_QUICK=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 ./build-after/tests/$t > "$LOGS/san-$tool-$t.txt" 2>&1
      echo "$tool $t: exit $? $(tail -1 "$LOGS/san-$tool-$t.txt")"
    done
  done
fi

if [ "$part" = bench ]; then
  echo "== build before ($(cat before/.commit)) and HEAD ($(cat .commit)), side by side"
  half=$(( $(nproc) / 2 ))
  JOBS=$half build build-before before --target kernelkit_cli & pb=$!
  JOBS=$half build build-after . --target kernelkit_cli & pa=$!
  wait $pb || exit 1
  wait $pa || exit 1
  ./build-after/kernelkit calibrate --device cuda:0 --quick > "$LOGS/calibrate.txt" 2>&1; tail -7 "$LOGS/calibrate.txt"
  for suite in nvfp4_gemv attention; do
    extra=""; [ $suite = nvfp4_gemv ] && extra=--cold
    for side in before after; do
      tree=.; [ $side = before ] && tree=before
      ./build-$side/kernelkit bench --device cuda:0 --suite "$tree/bench/suites/$suite.json" $extra \
        --time-budget ${BUDGET:-4} -o "$LOGS/$suite-$side.json" > "$LOGS/bench-$suite-$side.txt" 2>&1
      echo "$suite $side: exit $? $(grep -c median "$LOGS/bench-$suite-$side.txt") benchmarks"
    done
    ./build-after/kernelkit compare "$LOGS/$suite-before.json" "$LOGS/$suite-after.json" \
      --json "$LOGS/compare-$suite.json" > "$LOGS/compare-$suite.txt" 2>&1
    echo "compare $suite: exit $?"; tail -8 "$LOGS/compare-$suite.txt"
  done
  ./build-after/kernelkit bench --device cuda:0 --host-overhead -o "$LOGS/host-overhead.json" \
    > "$LOGS/host-overhead.txt" 2>&1
  echo "host overhead: exit $?"; cat "$LOGS/host-overhead.txt"
fi

#!/usr/bin/env bash
# Build, test and gather evidence on a lent GPU machine in one call.
# The machine has nvcc and cmake but no cJSON/cmocka and no package registry,
# so their headers and .so files travel in .deps/ (see docs/backends/nvidia.md).
# Results go under $OUT (the device tool's output folder), or /tmp/kk-out.
set -uo pipefail
# The device tool brings back at most 8 files: logs go into one tarball.
export RESULTS=${OUT:-/tmp/kk-out}
OUT=/tmp/kk-logs
mkdir -p "$RESULTS" "$OUT"
trap 'tar czf "$RESULTS/device-logs.tgz" -C /tmp kk-logs; cp "$OUT"/info.json "$RESULTS"/ 2>/dev/null' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
build=build-gpu

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi -q -d CLOCK,POWER,TEMPERATURE,PERFORMANCE > "$OUT/nvidia-smi-q.txt" 2>&1

echo "== build"
commit=$(cat .commit 2>/dev/null || echo "")
# OpenBLAS's library is the machine's own (any name the loader knows), its
# headers came in .deps/include/openblas (export-gpu-tree.sh).
openblas_lib=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
# ...or, on a machine without one, the copy that travelled in .deps/lib.
[ -n "$openblas_lib" ] || openblas_lib=$deps/lib/libopenblas.so.0
echo "OpenBLAS: $openblas_lib"
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DKK_GIT_COMMIT_OVERRIDE="$commit" \
  -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
  -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
  -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$openblas_lib" \
  > "$OUT/build.log" 2>&1 &&
cmake --build $build -j"$(nproc)" >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }

echo "== kernelkit info"
./$build/kernelkit info | tee "$OUT/info.txt"
./$build/kernelkit info --json > "$OUT/info.json"
echo "== kernelkit (main job)"
(cd "$OUT" && KK_LOG=info "$OLDPWD/$build/kernelkit" 2>&1 | tee "$OUT/selftest.txt")

echo "== ctest"
ctest --test-dir $build --output-on-failure -j4 > "$OUT/ctest.txt" 2>&1
tail -25 "$OUT/ctest.txt"

echo "== memory-manager benchmark"
if [ -x $build/bench/kk_alloc_bench ]; then
  ./$build/bench/kk_alloc_bench --device cuda:0 --output "$RESULTS/alloc-bench-cuda0.json" > "$OUT/alloc-bench.txt" 2>&1
  tail -12 "$OUT/alloc-bench.txt"
fi

echo "== calibrate and bench"
# Ceilings first (stored where bench looks for them), then the bench suites
# named in BENCH_SUITES (default: smoke), each into its own results file.
./$build/kernelkit calibrate --device cuda:0 > "$OUT/calibrate.txt" 2>&1
echo "calibrate: exit $?"; tail -8 "$OUT/calibrate.txt"
cp "${XDG_CACHE_HOME:-$HOME/.cache}"/kernelkit/ceilings-*.json "$RESULTS/" 2>/dev/null
for suite in ${BENCH_SUITES:-smoke}; do
  ./$build/kernelkit bench --device cuda:0 --suite "$suite" ${BENCH_ARGS:-} -o "$RESULTS/bench-$suite.json" > "$OUT/bench-$suite.txt" 2>&1
  echo "bench $suite: exit $?"; tail -12 "$OUT/bench-$suite.txt"
done
./$build/kernelkit bench --device cuda:0 --host-overhead -o "$RESULTS/host-overhead.json" > "$OUT/host-overhead.txt" 2>&1
echo "host overhead: exit $?"; cat "$OUT/host-overhead.txt"
[ -n "${EXTRA:-}" ] && { echo "== extra: $EXTRA"; bash -c "$EXTRA" 2>&1 | tee "$OUT/extra.txt" | tail -60; }

echo "== compute-sanitizer (SANITIZE=0 skips; SANITIZE_ONLY=regex limits the binaries)"
[ "${SANITIZE:-1}" = 0 ] && exit 0
for tool in memcheck racecheck; do
  # test_cuda_measure's 10 s blocking-kernel paths are too slow under the sanitizer.
  for t in $build/kernelkit $(ls $build/tests/test_cuda_* | grep -v test_cuda_measure | grep -E "${SANITIZE_ONLY:-.}"); do
    KK_TEST_QUICK=1 timeout ${SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 9 $t > "$OUT/sanitizer-$tool-$(basename $t).txt" 2>&1
    echo "$tool $(basename $t): exit $? $(tail -1 "$OUT/sanitizer-$tool-$(basename $t).txt")"
  done
done

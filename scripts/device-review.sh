#!/usr/bin/env bash
# A quick recheck on a lent GPU after host-side changes to the CUDA slots, from
# an export (cd .gpu-tree): the GPU tests of gemm, the row ops and attention,
# the oracle checks' smoke and correctness suites of their ops, one 8192^3 GEMM
# timed, and test_cuda_gemm of a build with sm_80 code only (the Hopper kernel
# must not be taken there). Logs in $OUT/review.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
L=/tmp/kk-review
mkdir -p "$out" "$L"
trap 'tar czf "$out/review.tgz" -C /tmp kk-review' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
build() { # DIR ARCHS TARGETS...
  local d=$1 archs=$2; shift 2
  cmake -S . -B "$d" -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF -DKK_CUDA_ARCHS="$archs" \
    -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
    -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
    -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" > "$L/build-$archs.log" 2>&1 &&
  cmake --build "$d" -j8 --target "$@" >> "$L/build-$archs.log" 2>&1 || { grep error -A3 "$L/build-$archs.log" | head; return 1; }
}
nvidia-smi -L
build b90 90a kernelkit_cli test_cuda_gemm test_cuda_rowops test_cuda_attention & p1=$!
build b80 80 test_cuda_gemm & p2=$!
wait $p1 || exit 1
for t in test_cuda_gemm test_cuda_rowops test_cuda_attention; do
  ./b90/tests/$t > "$L/$t.txt" 2>&1; echo "$t: exit $? $(grep -E 'PASSED|FAILED' "$L/$t.txt" | tr '\n' ' ')"
done
for op in gemm linear rmsnorm layernorm softmax rope attention; do
  timeout 100 ./b90/kernelkit check --op $op --device cuda:0 --suite smoke,correctness --seed $RANDOM \
    > "$L/check-$op.txt" 2>&1; echo "$op: $(head -1 "$L/check-$op.txt" | grep -o 'seed [0-9]*') $(tail -1 "$L/check-$op.txt")"
done
./b90/kernelkit bench --device cuda:0 --op gemm --params M=8192,N=8192,K=8192,dtype=bf16 --time-budget 2 2>&1 | grep median
wait $p2 || exit 1
./b80/tests/test_cuda_gemm > "$L/test_cuda_gemm-sm80-build.txt" 2>&1
echo "test_cuda_gemm, sm_80-only build: exit $? $(grep -E 'PASSED|FAILED' "$L/test_cuda_gemm-sm80-build.txt" | tr '\n' ' ')"

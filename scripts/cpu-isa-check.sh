#!/usr/bin/env bash
# The CPU kernels at every instruction-set level this CPU has (KK_CPU_ISA caps
# the level: generic, avx2, avx512, avx512_bf16, amx), each against the float64
# references: the smoke and correctness suites and FUZZ fresh random cases per
# op on a new seed each run, for the ops with per-level kernels.
#
#   scripts/cpu-isa-check.sh                 # build/, 100 fuzz cases per op and level
#   BUILD=build-cpu FUZZ=300 scripts/cpu-isa-check.sh
#   LEVELS="avx512_bf16 amx" scripts/cpu-isa-check.sh   # only those levels
#
# Prints one summary line per level and exits non-zero when any case failed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FUZZ=${FUZZ:-100}
KK=$BUILD/kernelkit
[ -x "$KK" ] || { echo "cpu-isa-check: $KK not found: build first" >&2; exit 2; }
OPS=attention,attention_varlen,gemm,linear,fp8_gemm,nvfp4_gemv,nvfp4_gemm,rmsnorm,layernorm,softmax,rope,add_rmsnorm,rmsnorm_fp8,silu_mul,rope_kv_append
top=$("$KK" info 2>/dev/null | sed -n 's/^ *kernels *\([a-z0-9_]*\).*/\1/p' | head -1)
levels=${LEVELS:-generic avx2 avx512 avx512_bf16 amx}
status=0
for isa in $levels; do
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  line=$(KK_CPU_ISA=$isa "$KK" check --device cpu --op "$OPS" --suite smoke,correctness \
    --fuzz "$FUZZ" --seed "$seed" 2>&1 | tail -1) || status=1
  echo "$isa (seed $seed): $line"
  [ "$isa" = "$top" ] && break
done
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), kernels up to $top"
exit $status

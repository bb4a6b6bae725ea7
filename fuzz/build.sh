#!/bin/sh
# Build the .npy libFuzzer target and its seed corpus (not part of the CMake build).
#   fuzz/build.sh            -> build-fuzz/npy_fuzz, build-fuzz/seeds/, build-fuzz/npy.dict
# Then, for example (fuzz/README.md has the details):
#   build-fuzz/npy_fuzz -dict=build-fuzz/npy.dict -max_len=4096 -runs=3000000 \
#       build-fuzz/corpus build-fuzz/seeds
# Needs clang with libFuzzer (Debian: clang and libclang-rt-<N>-dev).
set -eu
cd "$(dirname "$0")/.."
OUT=${OUT:-build-fuzz}
CC=${CC:-clang}
mkdir -p "$OUT/seeds" "$OUT/corpus"

# The library sources the reader needs, compiled straight in.
$CC -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
    -Iinclude -Isrc \
    fuzz/npy_fuzz.c src/core/npy.c src/core/status.c \
    -o "$OUT/npy_fuzz"

# Seeds: every fixture numpy wrote (good and bad files alike).
cp tests/data/npy/*.npy "$OUT/seeds/"

# Tokens of the format, for -dict.
cat > "$OUT/npy.dict" <<'DICT'
magic="\x93NUMPY"
v1="\x01\x00"
v2="\x02\x00"
v3="\x03\x00"
k_descr="'descr'"
k_fortran="'fortran_order'"
k_shape="'shape'"
k_descr2="\"descr\""
t_true="True"
t_false="False"
t_none="None"
sep=": "
comma=", "
tuple1="(1,)"
tuple0="()"
d_f4="'<f4'"
d_f8="'>f8'"
d_c16="'<c16'"
d_b1="'|b1'"
d_u1="'|u1'"
d_i8="'=i8'"
d_v2="'<V2'"
d_f1="'<f1'"
d_bf16="'bfloat16'"
d_e4m3="'float8_e4m3fn'"
d_e5m2="'float8_e5m2'"
d_e2m1="'float4_e2m1fn'"
d_struct="[('a', '<i4')]"
long="3L"
big="281474976710656"
nl="\x0a"
DICT
echo "built $OUT/npy_fuzz; seeds in $OUT/seeds, dictionary $OUT/npy.dict"

#!/usr/bin/env bash
# labels: unit cpu
# kernelkit check and kernelkit run: exit codes, messages, and a .npy round trip
# through `run` (the inputs are made by `run --random` itself: no Python needed).
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_check.sh"

# ---- check ----
check smoke          0 "^49 passed, 0 failed, 0 skipped"   -- "$cli" check --op convert --device cpu --suite smoke
check fuzz           0 "^20 passed, 0 failed"              -- "$cli" check --fuzz 20 --seed 7 --device cpu
check fuzz-line      0 "PASS  fuzz/convert/3  convert n=[0-9]+ src=[a-z0-9_]+ dst=[a-z0-9_]+  dtype=[a-z0-9_]+ seed=[0-9]+  max_abs=0" \
                                                           -- "$cli" check --fuzz 5 --seed 7 --device cpu --op convert
check default-ops    0 "^98 passed, 0 failed, 0 skipped"   -- "$cli" check --device cpu
check no-kernel      2 "attention: no backend implements it yet" -- "$cli" check --op attention --device cpu
check no-kernel-none 2 "nothing could run on cpu"          -- "$cli" check --op attention --device cpu
check some-skipped   0 "^49 passed, 0 failed, 6 skipped"   -- "$cli" check --op convert,gemm --device cpu --suite smoke
check case           0 "^1 passed"                         -- "$cli" check --device cpu --case smoke/convert/n37-f32-bf16
check case-seed      0 "seed=12345 "                       -- "$cli" check --device cpu --case smoke/convert/n37-f32-e2m1 --seed 12345
check params         0 "PASS  params/convert  convert n=9 src=f16 dst=fp8_e4m3 .* seed=5 " \
                                                           -- "$cli" check --device cpu --op convert --params n=9,src=f16,dst=fp8_e4m3 --seed 5
check dtype-filter   0 "^7 passed"                         -- "$cli" check --device cpu --op convert --suite smoke --dtype e2m1
check gpumode-dist   0 "passed, 0 failed"                  -- "$cli" check --device cpu --op convert --suite smoke --dist gpumode
check list           0 "attention-fuzz27/attention/S640-B48-H16  attention B=48 Hq=16" \
                                                           -- "$cli" check --device cpu --suite all --list --op attention
check bad-option     2 "unknown option '--bogus'"          -- "$cli" check --bogus
check bad-suite      2 "bad --suite"                       -- "$cli" check --suite fast
check bad-op         2 "bad --op: .*expected one of"       -- "$cli" check --op frobnicate
check bad-case       2 "bad --case"                        -- "$cli" check --device cpu --case smoke/convert/nope
check bad-fuzz       2 "bad --fuzz"                        -- "$cli" check --fuzz -3
check bad-seed       2 "bad --seed"                        -- "$cli" check --seed x1
check bad-device     2 "bad --device"                      -- "$cli" check --device gpu:7
check bad-dtype      2 "bad --dtype"                       -- "$cli" check --dtype f12
check bad-combo      2 "cannot be combined"                -- "$cli" check --case smoke/convert/n37-f32-bf16 --suite smoke
check params-one-op  2 "exactly one --op"                  -- "$cli" check --params n=3
check big-no-fuzz    2 "--big needs --fuzz"                -- "$cli" check --big
check json           0 "passed"                            -- "$cli" check --device cpu --op convert --suite smoke --json "$tmp/check.json"
if grep -q '"summary": {"passed": 49, "failed": 0, "skipped": 0}' "$tmp/check.json" &&
   grep -q '"name":"smoke/convert/n37-f32-bf16"' "$tmp/check.json"; then
  echo "ok   json-content"
else
  echo "FAIL json-content"; head -c 600 "$tmp/check.json"; fails=$((fails+1))
fi
if command -v python3 >/dev/null && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["cases"]) == 49 and d["exit_code"] == 0' "$tmp/check.json" 2>/dev/null; then
  echo "ok   json-valid"
elif command -v python3 >/dev/null; then
  echo "FAIL json-valid"; fails=$((fails+1))
fi
if ! "$cli" info | grep -qE "^  cuda +available"; then
  check no-gpu       2 "cannot use cuda:0"                 -- "$cli" check --device cuda:0
else # the CUDA convert kernel: every pair, fuzzed sizes, and the same bytes as the reference
  check gpu-smoke    0 "^49 passed, 0 failed, 0 skipped"   -- "$cli" check --op convert --device cuda:0 --suite smoke
  check gpu-fuzz     0 "^50 passed, 0 failed"              -- "$cli" check --op convert --device cuda:0 --fuzz 50 --seed 3
fi

# ---- run: the reference and the CPU kernel agree byte for byte ----
p=n=5,src=f32,dst=bf16
check run-random     0 "^$"                                -- "$cli" run convert --params $p --random 7 --device reference --output "x=$tmp/x.npy" --output "y=$tmp/yref.npy"
check run-cpu        0 "^$"                                -- "$cli" run convert --params $p --input "x=$tmp/x.npy" --device cpu --output "y=$tmp/ycpu.npy"
if cmp -s "$tmp/yref.npy" "$tmp/ycpu.npy" && [ -s "$tmp/ycpu.npy" ]; then
  echo "ok   run-roundtrip"
else
  echo "FAIL run-roundtrip: reference and cpu outputs differ"; fails=$((fails+1))
fi
if "$cli" info | grep -qE "^  cuda +available"; then
  check run-gpu      0 "^$"                                -- "$cli" run convert --params $p --input "x=$tmp/x.npy" --device cuda:0 --output "y=$tmp/ygpu.npy"
  if cmp -s "$tmp/yref.npy" "$tmp/ygpu.npy"; then echo "ok   run-gpu-roundtrip"; else
    echo "FAIL run-gpu-roundtrip: reference and cuda outputs differ"; fails=$((fails+1)); fi
fi
check run-summary    0 "^y \[5\] bf16: min .* max .* mean "  -- "$cli" run convert --param n=5 --param src=f32 --param dst=bf16 --input "x=$tmp/x.npy" --device cpu
check run-list       0 "convert: y = x converted"          -- "$cli" run --list
check run-missing    2 "missing input: x \[5\] f32"        -- "$cli" run convert --params $p --device cpu
check run-shape      1 "wrong shape: .* has \[5\], expected \[6\]" -- "$cli" run convert --params n=6,src=f32,dst=bf16 --input "x=$tmp/x.npy" --device cpu
check run-dtype      1 "wrong dtype: .* holds f32, expected f16" -- "$cli" run convert --params n=5,src=f16,dst=bf16 --input "x=$tmp/x.npy" --device cpu
check run-param      2 "convert: foo = 1: expected a parameter of n, src, dst" -- "$cli" run convert --params $p,foo=1 --input "x=$tmp/x.npy"
check run-bad-value  2 "convert: dst = int8: expected one of" -- "$cli" run convert --params n=5,dst=int8 --input "x=$tmp/x.npy"
check run-unknown-in 2 "unknown input 'z': convert takes x \[5\] f32, output y \[5\] bf16" -- "$cli" run convert --params $p --input "z=$tmp/x.npy"
check run-no-file    1 "input x: "                         -- "$cli" run convert --params $p --input "x=$tmp/none.npy" --device cpu
check run-unknown-op 2 "unknown op"                        -- "$cli" run frobnicate
check run-no-kernel  2 "gemm has no cpu kernel .*--device reference" -- "$cli" run gemm --params M=2,N=2,K=2 --random 1 --device cpu
check run-reference  0 "^c \[2,2\] bf16: min"               -- "$cli" run gemm --params M=2,N=2,K=2 --random 1 --device reference
check run-no-op      2 "which op"                          -- "$cli" run

echo "$fails failed"
[ "$fails" -eq 0 ]

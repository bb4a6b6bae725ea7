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
# smoke's convert cases: n37 in all 49 (src, dst) pairs, and the two 1Mi ones
check smoke          0 "^51 passed, 0 failed, 0 skipped"   -- "$cli" check --op convert --device cpu --suite smoke
# every op with a CPU kernel takes part: the counts come from --list
nfuzz=$("$cli" check --fuzz 20 --seed 7 --device cpu --list | grep -c '^fuzz/')
ndefault=$("$cli" check --device cpu --list | grep -c '^correctness/')
check fuzz           0 "^$nfuzz passed, 0 failed"          -- "$cli" check --fuzz 20 --seed 7 --device cpu
check fuzz-line      0 "PASS  fuzz/convert/3  convert n=[0-9]+ src=[a-z0-9_]+ dst=[a-z0-9_]+  dtype=[a-z0-9_]+ seed=[0-9]+  max_abs=0" \
                                                           -- "$cli" check --fuzz 5 --seed 7 --device cpu --op convert
check default-ops    0 "^$ndefault passed, 0 failed, 0 skipped" -- "$cli" check --device cpu
# Every op has a CPU kernel now: "no kernel" (exit 2) is tested in test_runner.c
# with a copy of a row that has none.
check two-ops        0 "^59 passed, 0 failed, 0 skipped"   -- "$cli" check --op convert,gemm --device cpu --suite smoke
# 100 FLOPs: gemm 1x1x1 runs, 5x7x33 (3 dtypes) and 256^3 (2) are skipped
check ref-limit      0 "^54 passed, 0 failed, 5 skipped"   -- "$cli" check --op convert,gemm --device cpu --suite smoke --max-ref-gflop 0.0000001
check case           0 "^1 passed"                         -- "$cli" check --device cpu --case smoke/convert/n37-f32-bf16
check case-seed      0 "seed=12345 "                       -- "$cli" check --device cpu --case smoke/convert/n37-f32-e2m1 --seed 12345
check params         0 "PASS  params/convert  convert n=9 src=f16 dst=fp8_e4m3 .* seed=5 " \
                                                           -- "$cli" check --device cpu --op convert --params n=9,src=f16,dst=fp8_e4m3 --seed 5
check dtype-filter   0 "^8 passed"                         -- "$cli" check --device cpu --op convert --suite smoke --dtype e2m1
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
check bad-combo      2 "cannot be combined"                -- "$cli" check --op convert --params n=3 --suite smoke
check bad-combo-fuzz 2 "cannot be combined"                -- "$cli" check --case smoke/convert/n37-f32-bf16 --fuzz 3
# --case with --suite: looked for in those suites only; the rerun line says them
check case-in-suite  0 "rerun: kernelkit check --device cpu --suite smoke --case smoke/convert/n37-f32-bf16 --seed 18225643434663463300$" \
                                                           -- "$cli" check --device cpu --case smoke/convert/n37-f32-bf16 --suite smoke -v
check case-not-in-suite 2 "bad --case: smoke/convert/n37-f32-bf16: no such case in --suite correctness" \
                                                           -- "$cli" check --device cpu --case smoke/convert/n37-f32-bf16 --suite correctness
# A case from a suite other than its name's first part (cpu-linear.json)
check case-any-suite 0 "^gemm/2048x1024x1024-f32  gemm M=2048" -- "$cli" check --device cpu --case gemm/2048x1024x1024-f32 --list
# two suites at once; every case's reference over the limit: skipped, exit 2
check suites-skip    2 "^0 passed, 0 failed, 34 skipped"   -- "$cli" check --device cpu --suite smoke,attention-fuzz27 --op attention --max-ref-gflop 0.0000001
# Suites from any folder: a path, $KK_SUITES_DIR, $KK_BENCH_SUITES, and by name
# with neither set (the source tree this binary was built from)
printf '{"name": "mine", "cases": [{"name": "mine/convert/n5", "op": "convert", "params": "n=5 src=f32"}]}' >"$tmp/mine.json"
check suite-path     0 "^7 passed, 0 failed, 0 skipped"    -- "$cli" check --device cpu --suite "$tmp/mine.json"
check suite-env      0 "^mine/convert/n5-bf16  convert"    -- env KK_SUITES_DIR="/nonexistent:$tmp" "$cli" check --device cpu --suite mine --list
check suite-env-old  0 "^mine/convert/n5-e2m1  convert"    -- env -u KK_SUITES_DIR KK_BENCH_SUITES="$tmp" "$cli" check --device cpu --suite mine --list
check suite-any-dir  0 "^smoke/convert/n37-f32-bf16  convert" -- bash -c "cd '$tmp' && env -u KK_SUITES_DIR -u KK_BENCH_SUITES '$cli' check --device cpu --suite smoke --list"
check suite-missing  2 "no suite 'mine' \(looked for mine.json in: .*/bench/suites" \
                                                           -- env -u KK_SUITES_DIR -u KK_BENCH_SUITES "$cli" check --device cpu --suite mine
printf '{"cases": [{"name": "a", "op": "convert", "params": "n=0"}]}' >"$tmp/bad.json"
check suite-bad      2 "bad --suite: kk_suite_load: bad suite file $tmp/bad.json: cases\[0\]\.params: " \
                                                           -- "$cli" check --device cpu --suite "$tmp/bad.json"
check params-one-op  2 "exactly one --op"                  -- "$cli" check --params n=3
check big-no-fuzz    2 "--big needs --fuzz"                -- "$cli" check --big
check json           0 "passed"                            -- "$cli" check --device cpu --op convert --suite smoke --json "$tmp/check.json"
if grep -q '"summary": {"passed": 51, "failed": 0, "skipped": 0}' "$tmp/check.json" &&
   grep -q '"name":"smoke/convert/n37-f32-bf16"' "$tmp/check.json"; then
  echo "ok   json-content"
else
  echo "FAIL json-content"; head -c 600 "$tmp/check.json"; fails=$((fails+1))
fi
if command -v python3 >/dev/null && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["cases"]) == 51 and d["exit_code"] == 0' "$tmp/check.json" 2>/dev/null; then
  echo "ok   json-valid"
elif command -v python3 >/dev/null; then
  echo "FAIL json-valid"; fails=$((fails+1))
fi
if ! "$cli" info | grep -qE "^  cuda +available"; then
  check no-gpu       2 "cannot use cuda:0"                 -- "$cli" check --device cuda:0
else # the CUDA convert kernel: every pair, fuzzed sizes, and the same bytes as the reference
  check gpu-smoke    0 "^51 passed, 0 failed, 0 skipped"   -- "$cli" check --op convert --device cuda:0 --suite smoke
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
check run-reference  0 "^c \[2,2\] bf16: min"               -- "$cli" run gemm --params M=2,N=2,K=2 --random 1 --device reference
check run-no-op      2 "which op"                          -- "$cli" run

# ---- run: norms, softmax, rope and nvfp4_gemm on .npy files (issue 5) ----
# The reference writes random inputs and its y; the CPU kernel reads those
# inputs back and its y must match the reference's within the dtype's
# rounding (4 units: 2^-22 for f32, 2^-6 for bf16, plus a small floor).
npy_close() { # FILE_A FILE_B: f32 or bf16 arrays, same shape, close
  python3 - "$1" "$2" <<'PY'
import ast, struct, sys
def load(path):
    b = open(path, "rb").read()
    hlen = struct.unpack("<H", b[8:10])[0]
    h = ast.literal_eval(b[10:10 + hlen].decode())
    raw = b[10 + hlen:]
    if h["descr"] == "<f4":
        return h["shape"], 2.0**-22, list(struct.unpack("<%df" % (len(raw) // 4), raw))
    bits = struct.unpack("<%dH" % (len(raw) // 2), raw)
    return h["shape"], 2.0**-6, [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in bits]
sa, tol, a = load(sys.argv[1])
sb, _, b = load(sys.argv[2])
bad = [i for i in range(len(a)) if abs(a[i] - b[i]) > 1e-5 + tol * abs(b[i])]
sys.exit(0 if sa == sb and a and any(a) and not bad else 1)
PY
}
for spec in "rmsnorm rows=3,n=37,eps=0.01,dtype=f32 x w" "layernorm rows=3,n=300,dtype=f32 x w b" \
            "softmax rows=4,n=37,scale=0.5,dtype=f32 x" "rope B=1,H=2,S=3,D=10,rotary_dim=6,style=gptj,offset=7,dtype=f32 x" \
            "nvfp4_gemm M=2,N=5,K=128,global=1 x w sw gw"; do
  set -- $spec; op=$1; prm=$2; shift 2
  outs=(); ins=()
  for t in "$@"; do outs+=(--output "$t=$tmp/$op-$t.npy"); ins+=(--input "$t=$tmp/$op-$t.npy"); done
  check run-$op-ref  0 "^$" -- "$cli" run $op --params $prm --random 11 --device reference "${outs[@]}" --output "y=$tmp/$op-yref.npy"
  check run-$op-cpu  0 "^$" -- "$cli" run $op --params $prm "${ins[@]}" --device cpu --output "y=$tmp/$op-ycpu.npy"
  if ! command -v python3 >/dev/null; then
    [ -s "$tmp/$op-ycpu.npy" ] && echo "ok   run-$op-written" || { echo "FAIL run-$op-written"; fails=$((fails+1)); }
  elif npy_close "$tmp/$op-ycpu.npy" "$tmp/$op-yref.npy"; then
    echo "ok   run-$op-matches-reference"
  else
    echo "FAIL run-$op-matches-reference: cpu y differs from the reference's"; fails=$((fails+1))
  fi
done

# ---- run: attention_varlen on .npy files, the offsets as data ----
# The reference writes random inputs (cu_seqlens from the lengths 5:0:17 and
# 9:4:17); the CPU kernel reads them back with the lengths left to the files
# (seqlens none: what a caller with their own data gives).
vp="Hq=2,Hkv=1,D=32,causal=1,dtype=f32"
vouts=(); vins=()
for t in q k v cu_seqlens_q cu_seqlens_k; do vouts+=(--output "$t=$tmp/avl-$t.npy"); vins+=(--input "$t=$tmp/avl-$t.npy"); done
check run-varlen-ref 0 "^$" -- "$cli" run attention_varlen --params "$vp,seqlens_q=5:0:17,seqlens_k=9:4:17" --random 13 --device reference "${vouts[@]}" --output "o=$tmp/avl-oref.npy"
vdata="$vp,nseq=3,total_q=22,total_k=30,max_seqlen_q=17,max_seqlen_k=17,seqlens_q=none,seqlens_k=none"
check run-varlen-cpu 0 "^$" -- "$cli" run attention_varlen --params "$vdata" "${vins[@]}" --device cpu --output "o=$tmp/avl-ocpu.npy"
if command -v python3 >/dev/null && ! npy_close "$tmp/avl-ocpu.npy" "$tmp/avl-oref.npy"; then
  echo "FAIL run-varlen-matches-reference: cpu o differs from the reference's"; fails=$((fails+1))
else
  echo "ok   run-varlen-matches-reference"
fi
check run-varlen-max 1 "cu_seqlens_q\[3\] = 22: expected at most cu_seqlens_q\[2\] \+ max_seqlen_q = 21" -- "$cli" run attention_varlen --params "${vdata/max_seqlen_q=17/max_seqlen_q=16}" "${vins[@]}" --device cpu

echo "$fails failed"
[ "$fails" -eq 0 ]

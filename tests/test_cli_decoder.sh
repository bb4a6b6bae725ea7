#!/usr/bin/env bash
# labels: unit cpu
# kernelkit model: a one-layer model written here (hidden 32, two heads of 16,
# one KV head; safetensors by hand, zero weights) run at each level on the
# CPU: the plan, the prefill and decode lines; usage and run-time errors;
# --input/--save (.npy by hand): with zero weights a layer adds nothing to the
# residual stream, so the saved output equals the input (f32 and bf16 files).
set -uo pipefail
cli=$1
. "$(dirname "$0")/cli_check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

model=$tmp/model
write_tiny_llama "$model" 1

# --no-profile: the cost model and profile are test_cli_model_cost.sh's
check plan-cons    0 "18  residual +kk_add_rmsnorm"           -- "$cli" model "$model" --level conservative --no-profile
check plan-bal     0 "rope \+ kv append +kk_rope_kv_append"   -- "$cli" model "$model" --no-profile
check plan-aggr    0 "level aggressive: balanced.s fusions, FP8 projections" -- "$cli" model "$model" -l aggressive --no-profile
check prefill      0 "^prefill  B=2 S=5: +[0-9.]+ ms"          -- "$cli" model "$model" -b 2 -p 5 -n 3 --no-profile
check decode       0 "^decode   step 3/3 \(position 7\): +[0-9.]+ ms" -- "$cli" model "$model" -b 2 -p 5 -n 3 --no-profile
check decode-mean  0 "^decode   mean [0-9.]+ ms per step"      -- "$cli" model "$model" -n 2 --no-profile
check no-decode    0 "^prefill  B=1 S=16"                       -- "$cli" model "$model" --decode 0 --no-profile
check listed       0 "  model +run a model's decoder layers"   -- "$cli" --help
check help         0 "Usage: kernelkit model DIR"              -- "$cli" model --help
check no-dir       2 "missing DIR"                             -- "$cli" model
check bad-level    2 "bad --level 'fast'"                      -- "$cli" model "$model" --level fast
check bad-batch    2 "bad --batch '0'"                         -- "$cli" model "$model" --batch 0
check bad-opt      2 "unknown option '--bogus'"                -- "$cli" model --bogus "$model"
check no-value     2 "--batch needs a value"                   -- "$cli" model "$model" --batch
check bad-device   1 "building the decoder"                    -- "$cli" model "$model" --device tpu
check missing      1 "nope/config.json: cannot open"           -- "$cli" model "$tmp/nope"

# write_npy FILE DESCR SHAPE BYTE... : a .npy 1.0 file, the element bytes
# repeated for every element of SHAPE ("1, 4, 32").
write_npy() {
  local f=$1 descr=$2 shape=$3 n=1 d elem hdr; shift 3
  for d in ${shape//,/ }; do n=$((n * d)); done
  hdr="{'descr': '$descr', 'fortran_order': False, 'shape': ($shape), }"
  while (((10 + ${#hdr} + 1) % 64)); do hdr+=" "; done
  printf '\x93NUMPY\x01\x00' >"$f"
  printf "$(printf '\\%03o' $(((${#hdr} + 1) & 255)) $(((${#hdr} + 1) >> 8)))" >>"$f"
  printf '%s\n' "$hdr" >>"$f"
  elem=$(printf '\\%03o' "$@")
  for ((d = 0; d < n; d++)); do printf "$elem"; done >>"$f"
}
write_npy "$tmp/x.npy" "<f4" "1, 4, 32" 0 0 192 63      # 1.5f
write_npy "$tmp/xb.npy" "<V2" "1, 4, 32" 192 63         # 1.5 in bf16 (np.save of ml_dtypes)
write_npy "$tmp/xi.npy" "<i4" "1, 4, 32" 1 0 0 0
check input-save   0 "^prefill  B=1 S=4"  -- "$cli" model "$model" -p 4 -n 1 --no-profile --input "$tmp/x.npy" --save "$tmp/y.npy"
check input-same   0 "^same$" -- bash -c "cmp <(tail -c 512 '$tmp/y.npy') <(tail -c 512 '$tmp/x.npy') && grep -qa \"'shape': (1, 4, 32)\" '$tmp/y.npy' && echo same"
check input-bf16   0 "^prefill  B=1 S=4"  -- "$cli" model "$model" -l conservative -p 4 -n 0 --no-profile --input "$tmp/xb.npy" --save "$tmp/yb.npy"
check bf16-same    0 "^same$" -- bash -c "cmp '$tmp/yb.npy' '$tmp/y.npy' && echo same"
check input-shape  2 "--input .*x.npy: shape \[1, 4, 32\], expected \[2, 4, 32\] \(--batch, --prefill" -- "$cli" model "$model" -b 2 -p 4 --no-profile --input "$tmp/x.npy"
check input-dtype  1 "--input .*xi.npy: dtype '<i4': expected float32, bfloat16 or float16" -- "$cli" model "$model" -p 4 --no-profile --input "$tmp/xi.npy"
check input-none   1 "--input .*nope.npy: " -- "$cli" model "$model" -p 4 --no-profile --input "$tmp/nope.npy"
check save-bad     1 "--save .*nodir/y.npy: " -- "$cli" model "$model" -p 4 --no-profile --input "$tmp/x.npy" --save "$tmp/nodir/y.npy"
check input-tp     2 "--input: not with --tp" -- "$cli" model "$model" --tp 2 --input "$tmp/x.npy"
echo "$((25 - fails)) passed, $fails failed"
[ $fails = 0 ]

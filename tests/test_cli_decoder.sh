#!/usr/bin/env bash
# labels: unit cpu
# kernelkit model: a one-layer model written here (hidden 32, two heads of 16,
# one KV head; safetensors by hand, zero weights) run at each level on the
# CPU: the plan, the prefill and decode lines; usage and run-time errors.
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
echo "$((16 - fails)) passed, $fails failed"
[ $fails = 0 ]

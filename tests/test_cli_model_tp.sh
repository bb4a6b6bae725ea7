#!/usr/bin/env bash
# labels: unit cpu
# kernelkit model --tp N (docs/distributed.md): a one-layer model written here
# (hidden 32, two heads of 16, two KV heads; safetensors by hand, zero
# weights) at TP 2 on the CPU (ranks as threads over the loopback): the plan
# with its all-reduces, the prefill and decode lines, --tp-overlap (a split
# prefill runs); and the errors of bad --tp and --tp-overlap values (the
# argument named, or the model field that does not divide).
# The numbers themselves are checked by tests/test_decoder_tp.c.
set -uo pipefail
cli=$1
. "$(dirname "$0")/cli_check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

model=$tmp/model
write_tiny_llama "$model" 2

check tp-plan     0 "tensor parallel: rank 0 of 2 \(loopback comm\): heads 1 of 2" -- "$cli" model "$model" --tp 2
check tp-reduce   0 "all_reduce mlp +kk_comm_all_reduce h -> h"  -- "$cli" model "$model" --tp 2
check tp-cons     0 "all_reduce attn +kk_comm_all_reduce proj"   -- "$cli" model "$model" -t 2 -l conservative
check tp-prefill  0 "^prefill  B=2 S=5: +[0-9.]+ ms"             -- "$cli" model "$model" --tp 2 -b 2 -p 5 -n 3
check tp-decode   0 "^decode   step 3/3 \(position 7\): +[0-9.]+ ms" -- "$cli" model "$model" --tp 2 -b 2 -p 5 -n 3
check tp-ovl-on   0 "overlap of the all-reduces \(--tp-overlap\): on" -- "$cli" model "$model" --tp 2 -p 5 --tp-overlap on
check tp-ovl-run  0 "^decode   step 3/3 \(position 7\): +[0-9.]+ ms" -- "$cli" model "$model" --tp 2 -b 1 -p 5 -n 3 --tp-overlap on
check tp-ovl-def  0 "overlap of the all-reduces \(--tp-overlap\): auto" -- "$cli" model "$model" --tp 2
check tp-ovl-bad  2 "bad --tp-overlap 'yes': expected auto, off or on" -- "$cli" model "$model" --tp 2 --tp-overlap yes
check tp-one      0 "^prefill  B=1 S=16"                          -- "$cli" model "$model" --tp 1
check tp-help     0 "--tp N +tensor parallel over N ranks"        -- "$cli" model --help
check tp-zero     2 "bad --tp '0': expected an integer 1 .. 64"   -- "$cli" model "$model" --tp 0
check tp-big      2 "bad --tp '65'"                               -- "$cli" model "$model" --tp 65
check tp-text     2 "bad --tp 'two'"                              -- "$cli" model "$model" --tp two
check tp-novalue  2 "--tp needs a value"                          -- "$cli" model "$model" --tp
check tp-divide   1 "num_attention_heads = 2: expected a multiple of the tensor-parallel size 4" \
                                                                   -- "$cli" model "$model" --tp 4
# On a machine without (enough) GPUs the launcher refuses before starting anything.
n=$("$cli" info 2>/dev/null | grep -cE "^ *cuda:[0-9]" || true)
if [ "$n" -lt 2 ]; then
  check tp-gpus   2 "bad --tp 2: needs GPUs cuda:0 .. cuda:1"     -- "$cli" model "$model" --tp 2 --device cuda:0
  total=17
else
  total=16
fi
echo "$((total - fails)) passed, $fails failed"
[ $fails = 0 ]

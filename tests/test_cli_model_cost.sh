#!/usr/bin/env bash
# labels: unit cpu
# kernelkit model's cost model and profile (docs/model.md, "Cost model") on a
# one-layer model written here (hidden 32, two heads of 16, one KV head,
# intermediate 32; zero weights): the step tables with and without stored
# ceilings, the work of known steps (hand-computed below), the speedup over
# conservative, the results JSON (read back by kernelkit report) and the
# markdown report, the options' errors; a wrong cost is caught.
set -uo pipefail
cli=$1
. "$(dirname "$0")/cli_check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KK_NUM_THREADS=1 XDG_CACHE_HOME=$tmp/none # one thread: a loaded CI machine

model=$tmp/model
write_tiny_llama "$model" 1

run=("$cli" model "$model" -b 2 -p 5 -n 2 --profile-time 0.05)
# B=2, S=5: T = 10 tokens. q_proj 2*10*32*32 FLOPs = 0.02048 MFLOP, x (10x32) and
# W (32x32) read, 10x32 written: 6656 B. Attention, causal from nothing cached:
# 5*6/2 = 15 pairs per sequence and head, 4*2*2*16*15 = 3840 FLOPs; at the
# decode step after 5 cached, 6 keys: 4*2*2*16*6 = 1536.
q='^ +2  q_proj +kk_linear +1 +0\.02048 +0\.006656 '
check no-ceilings 0 "No ceilings stored for cpu: run .kernelkit calibrate"   -- "${run[@]}"
"${run[@]}" >"$tmp/plain.txt" 2>&1 # one run, several checks
check no-pred     0 "^ +4  attention +kk_attention +1 +0\.00384 .* - +[0-9.]+ +[0-9.]+% +- *$" -- cat "$tmp/plain.txt"
check work        0 "$q"                                                     -- cat "$tmp/plain.txt"
check decode-attn 0 "^ +4  attention +kk_attention +1 +0\.001536 "           -- cat "$tmp/plain.txt"
check skipped     0 "^ +5  layout q +kk_tensor_copy +0 +0 +0 +- +- +- +- +- *$" -- cat "$tmp/plain.txt"
check speedup-m   0 "^prefill speedup of balanced over conservative: measured [0-9.]+x, predicted -" -- cat "$tmp/plain.txt"
check floor       0 "launch floor: [0-9.]+ us per op call \(measured"        -- cat "$tmp/plain.txt"

XDG_CACHE_HOME=$tmp/cache "$cli" calibrate --device cpu --quick >/dev/null 2>&1 ||
  { echo "FAIL calibrate --quick"; fails=$((fails + 1)); }
cp "$tmp"/cache/kernelkit/ceilings-*.json "$tmp/c.json" 2>/dev/null
export XDG_CACHE_HOME=$tmp/cache
"${run[@]}" >"$tmp/ceil.txt" 2>&1
check ceilings    0 "^ceilings: copy [0-9.e+]+ GB/s"                         -- cat "$tmp/ceil.txt"
check predicted   0 "^ +2  q_proj +kk_linear +1 +0\.02048 +0\.006656 +(memory|compute|launch) +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ *$" -- cat "$tmp/ceil.txt"
check total       0 "^ +total +[0-9.]+ +[0-9.]+ +100% +[0-9.]+ *$"           -- cat "$tmp/ceil.txt"
check speedup     0 "^decode speedup of balanced over conservative: measured [0-9.]+x, predicted [0-9.]+x" -- cat "$tmp/ceil.txt"
check given-floor 0 "launch floor: 250.00 us per op call \(--launch-floor-us"  -- "${run[@]}" --launch-floor-us 250
check launch-bnd  0 "^ +1  input_norm +kk_rmsnorm +1 .* launch +2[5-9][0-9]\.[0-9] " -- "${run[@]}" --launch-floor-us 250
check ceil-file   0 "^ceilings: copy"        -- env XDG_CACHE_HOME="$tmp/none" "${run[@]}" --ceilings "$tmp/c.json"
check conservative 0 "decode profile, level conservative" -- "${run[@]}" --level conservative
out=$("${run[@]}" --level conservative 2>&1)
if grep -q "speedup" <<<"$out"; then echo "FAIL conservative: a speedup over itself"; fails=$((fails + 1)); fi
out=$("${run[@]}" --no-compare 2>&1)
if grep -q "level conservative" <<<"$out"; then echo "FAIL no-compare: profiled conservative"; fails=$((fails + 1)); fi
check no-profile  0 "^prefill  B=1 S=16"                                     -- "$cli" model "$model" --no-profile
out=$("$cli" model "$model" --no-profile 2>&1)
if grep -q "profile, level" <<<"$out"; then echo "FAIL no-profile: profiled"; fails=$((fails + 1)); fi

# the results file and the report
check output      0 "wrote 50 step benchmark\(s\) to"   -- "${run[@]}" --output "$tmp/r.json" --report "$tmp/r.md"
check json-model  0 '"phases":'                         -- cat "$tmp/r.json"
check json-step   0 '"name":	"model/balanced/prefill/02 qkv_proj"' -- cat "$tmp/r.json"
check json-flops  0 '"flops":	3840,'                  -- cat "$tmp/r.json"
check json-speed  0 '"speedups":'                       -- cat "$tmp/r.json"
check read-back   0 "wrote $tmp/rep.md"                  -- "$cli" report "$tmp/r.json" --output "$tmp/rep.md"
check md-phase    0 "^## prefill: balanced, B=2 S=5 after 0 cached, 1 layers, f32 on cpu" -- cat "$tmp/r.md"
check md-row      0 "^\| 4 \| attention \| .kk_attention. \| 1 \| 0\.00384 \|" -- cat "$tmp/r.md"
check md-speedup  0 "^\| decode \| balanced \| [0-9.]+x \| [0-9.]+x \|" -- cat "$tmp/r.md"

# a wrong cost is caught: attention without the causal halving (7680 FLOPs)
before=$fails
check wrong-cost  0 '"flops":	7680,' -- cat "$tmp/r.json" >/dev/null
if [ $fails = $((before + 1)) ]; then fails=$before; echo "ok   a wrong cost fails its check"; else
  echo "FAIL a wrong cost passed"; fails=$((before + 1)); fi

check bad-floor   2 "bad --launch-floor-us 'x'"         -- "${run[@]}" --launch-floor-us x
check bad-time    2 "bad --profile-time '0'"            -- "${run[@]}" --profile-time 0
check no-file     1 "loading --ceilings"                -- "${run[@]}" --ceilings "$tmp/nope.json"
check help        0 "--launch-floor-us X"               -- "$cli" model --help
echo "$fails failed"
[ $fails = 0 ]

#!/usr/bin/env bash
# labels: unit cpu
# kernelkit bench: a quick smoke suite on the CPU whose results compare accepts,
# the host-overhead benchmark, cases too large for memory, bad options and bad
# suite files.
set -uo pipefail
cli=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_check.sh"

suites=$src/bench/suites
check smoke          0 "^smoke/convert/1Mi-f32-bf16 +median .* GB/s  n=[0-9]+  stop=" \
      -- "$cli" bench --device cpu --suite "$suites/smoke.json" --quick --time-budget 0.3 \
         --filter convert -o "$tmp/r.json"
check results-file   0 "kernelkit.bench/1"  -- cat "$tmp/r.json"
check compare        0 "2 compared"         -- "$cli" compare "$tmp/r.json" "$tmp/r.json"
check by-name        0 "^1 ran, 0 failed, 0 skipped" \
      -- env KK_BENCH_SUITES="$suites" "$cli" bench --device cpu --suite smoke --quick \
         --time-budget 0.2 --filter 1Mi-f32-bf16
check op-params      0 "^convert/n=1000,src=f32,dst=bf16 +median" \
      -- "$cli" bench --device cpu --op convert --params n=1000 --time-budget 0.2
# 2^34 f64 elements in and out: 256 GiB, more than any machine that runs this.
check too-big        2 "skip convert/.*: needs [0-9.]+ GiB, cpu has .* free" \
      -- "$cli" bench --device cpu --op convert --params n=17179869184,src=f64,dst=f64
for f in "$suites"/*.json; do # every suite file loads (nothing selected)
  s=$(basename "$f" .json)
  check "suite-$s"   2 "no case selected" -- "$cli" bench --device cpu --suite "$f" --filter '#'
done
# smoke's tiny cases ("bench": false) are checked, never timed
check untimed        2 "no case selected" -- "$cli" bench --device cpu --suite smoke --filter n37
check two-suites     0 "^2 ran, 0 failed, 0 skipped" \
      -- "$cli" bench --device cpu --suite smoke,convert --quick --time-budget 0.2 --filter 1Mi-f32-bf16
check host-overhead  0 "^host-overhead/convert/dispatch +median .* n=200 x 64 calls  goal < 5 us: (met|MISSED)" \
      -- "$cli" bench --device cpu --host-overhead --op convert -o "$tmp/h.json"
check host-file      0 '"op":[[:space:]]+"host_overhead"' -- cat "$tmp/h.json"
# the typed entry point (kk_convert) beside kk_op_run, in the table and the file
check host-entry     0 "^host-overhead/convert/entry +median .* n=200 x 64 calls  goal < 5 us: (met|MISSED)" \
      -- "$cli" bench --device cpu --host-overhead --op convert
check host-entry-file 0 '"name":[[:space:]]+"host-overhead/convert/entry"' -- cat "$tmp/h.json"
check host-every-op  0 "^host-overhead/convert/dispatch" -- "$cli" bench --device cpu --host-overhead
# every op has an entry point: one entry row per dispatch row
check host-entry-every-op 0 "^([1-9][0-9]*) entry rows for \\1 dispatch rows$" -- bash -c "'$cli' bench --device cpu --host-overhead | awk '/^host-overhead\/.*\/dispatch /{d++} /^host-overhead\/.*\/entry /{e++} END{print e \" entry rows for \" d \" dispatch rows\"}'"
check host-suite     2 "--host-overhead takes --op or no case" \
      -- "$cli" bench --device cpu --host-overhead --suite smoke
# --import: samples timed elsewhere become anchors paired with KernelKit's entries
printf '{"benchmarks": [{"name": "anchor/torch/convert", "op": "convert", "params": "n=1000 src=f32 dst=bf16", "implementation": "torch_x", "samples": [1e-6, 1.2e-6, 0.9e-6], "cold": true}]}' >"$tmp/raw.json"
check import         0 "anchor/torch/convert +median 1.000 us" -- "$cli" bench --device cpu --import "$tmp/raw.json" -o "$tmp/anchor.json"
check import-pairs   0 "vs .torch_x." -- bash -c "'$cli' bench --device cpu --op convert --params n=1000 --time-budget 0.2 -o '$tmp/own.json' >/dev/null && '$cli' report '$tmp/own.json' '$tmp/anchor.json' --output '$tmp/pair.md' >/dev/null && cat '$tmp/pair.md'"
printf '{"benchmarks": [{"name": "a", "op": "convert", "params": "n=0", "implementation": "t", "samples": [1]}]}' >"$tmp/raw2.json"
check import-params  2 "raw2.json: benchmarks\[0\].params" -- "$cli" bench --device cpu --import "$tmp/raw2.json" -o "$tmp/x.json"
printf '{"benchmarks": [{"name": "a", "op": "convert", "params": "n=8", "implementation": "kernelkit", "samples": [1]}]}' >"$tmp/raw3.json"
check import-impl    2 "benchmarks\[0\].implementation" -- "$cli" bench --device cpu --import "$tmp/raw3.json" -o "$tmp/x.json"
printf '{"benchmarks": [{"name": "a", "op": "convert", "params": "n=8", "implementation": "t", "samples": [1, -2]}]}' >"$tmp/raw4.json"
check import-sample  2 "benchmarks\[0\].samples\[1\]" -- "$cli" bench --device cpu --import "$tmp/raw4.json" -o "$tmp/x.json"
check import-no-out  2 "--import needs -o" -- "$cli" bench --device cpu --import "$tmp/raw.json"
check import-suite   2 "--import takes no --suite" -- "$cli" bench --device cpu --import "$tmp/raw.json" --suite smoke -o "$tmp/x.json"
check cold           0 "^convert/n=1000,src=f32,dst=bf16 +median" -- "$cli" bench --device cpu --op convert --params n=1000 --cold --time-budget 0.2
check cold-read      0 '"flush_mode":[[:space:]]+"read"' -- bash -c "'$cli' bench --device cpu --op convert --params n=1000 --cold --flush read --time-budget 0.2 -o '$tmp/read.json' >/dev/null && cat '$tmp/read.json'"
check flush-default  0 '"flush_mode":[[:space:]]+"write"' -- cat "$tmp/own.json"
check flush-compare  0 "L2 flush modes differ for 1 cold benchmark" -- bash -c "'$cli' bench --device cpu --op convert --params n=1000 --cold --time-budget 0.2 -o '$tmp/write.json' >/dev/null && '$cli' compare '$tmp/write.json' '$tmp/read.json'; true"
check bad-flush      2 "bad --flush: 'erase' \\(expected write or read\\)" -- "$cli" bench --device cpu --op convert --flush erase
check no-flush-value 2 "option '--flush' needs a value" -- "$cli" bench --device cpu --op convert --flush
check import-flush-opt 2 "--import takes no --flush" -- "$cli" bench --device cpu --import "$tmp/raw.json" --flush read -o "$tmp/x.json"
check flush-bytes    0 '"flush_bytes":[[:space:]]+3145728,' -- bash -c "'$cli' bench --device cpu --op convert --params n=1000 --cold --flush-bytes 3M --time-budget 0.2 -o '$tmp/fb.json' >/dev/null && cat '$tmp/fb.json'"
check flush-bytes-plain 0 '"flush_bytes":[[:space:]]+70000,' -- bash -c "'$cli' bench --device cpu --op convert --params n=1000 --cold --flush-bytes 70000 --time-budget 0.2 -o '$tmp/fb2.json' >/dev/null && cat '$tmp/fb2.json'"
for bad in 0 -5 12Q 2T 1025G x; do
  check "bad-flush-bytes-$bad" 2 "bad --flush-bytes: '$bad' \\(expected bytes from 1 to 2\\^40" -- "$cli" bench --device cpu --op convert --cold --flush-bytes "$bad"
done
check flush-bytes-hot 2 "--flush-bytes needs --cold" -- "$cli" bench --device cpu --op convert --flush-bytes 1M
printf '{"benchmarks": [{"name": "anchor/torch/convert", "op": "convert", "params": "n=1000 src=f32 dst=bf16", "implementation": "torch_x", "samples": [1e-6, 1.2e-6], "cold": true, "flush": "read"}]}' >"$tmp/raw5.json"
check import-flush   0 '"flush_mode":[[:space:]]+"read"' -- bash -c "'$cli' bench --device cpu --import '$tmp/raw5.json' -o '$tmp/anchor5.json' >/dev/null && cat '$tmp/anchor5.json'"
check import-flush-pair 0 "vs .torch_x. \\(L2 flush write vs read\\)" -- bash -c "'$cli' report '$tmp/write.json' '$tmp/anchor5.json' --output '$tmp/pair5.md' >/dev/null && cat '$tmp/pair5.md'"
printf '{"benchmarks": [{"name": "a", "op": "convert", "params": "n=8", "implementation": "t", "samples": [1], "flush": "erase"}]}' >"$tmp/raw6.json"
check import-bad-flush 2 "raw6.json: benchmarks\[0\].flush: expected \"write\" or \"read\"" -- "$cli" bench --device cpu --import "$tmp/raw6.json" -o "$tmp/x.json"
check no-cuda        2 "cuda.*unavailable" -- env CUDA_VISIBLE_DEVICES= "$cli" bench --device cuda:0 --op convert
check no-selection   2 "no case selected"   -- "$cli" bench --device cpu --suite "$suites/smoke.json" --filter nope
check unknown-opt    2 "unknown option"     -- "$cli" bench --device cpu --bogus
check both           2 "either --suite or --op" -- "$cli" bench --device cpu
check bad-budget     2 "bad --time-budget"  -- "$cli" bench --device cpu --op convert --time-budget x
check bad-params     2 "bad --params"       -- "$cli" bench --device cpu --op convert --params n=0
check bad-device     2 "bad --device"       -- "$cli" bench --device tpu --op convert
check no-suite       2 "no suite 'nope'"    -- "$cli" bench --device cpu --suite nope

printf '{"cases": [{"name": "a", "op": "convert", "params": "n=8"}, {"name": "b", "op": "nosuchop"}]}' >"$tmp/bad1.json"
check bad-suite-op   2 "bad suite file $tmp/bad1.json: cases\[1\]\.op" \
      -- "$cli" bench --device cpu --suite "$tmp/bad1.json"
printf '{"cases": 3}' >"$tmp/bad2.json"
check bad-suite-cases 2 "bad suite file $tmp/bad2.json: cases: expected an array" \
      -- "$cli" bench --device cpu --suite "$tmp/bad2.json"
printf '{"cases": [' >"$tmp/bad3.json"
check bad-suite-json 2 "bad suite file $tmp/bad3.json: \(document\)" \
      -- "$cli" bench --device cpu --suite "$tmp/bad3.json"
printf '{"cases": [{"name": "a", "op": "convert", "params": "n=x"}]}' >"$tmp/bad4.json"
check bad-suite-params 2 "$tmp/bad4.json: cases\[0\]\.params" \
      -- "$cli" bench --device cpu --suite "$tmp/bad4.json"
check missing-suite  2 "bad --suite: kk_suite_load: cannot read suite file $tmp/none.json: No such file" \
      -- "$cli" bench --device cpu --suite "$tmp/none.json"

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"

#!/usr/bin/env bash
# labels: unit cpu
# kernelkit bench: a quick smoke suite on the CPU whose results compare accepts,
# skipped ops, bad options and bad suite files.
set -uo pipefail
cli=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_check.sh"

suites=$src/bench/suites
check smoke          0 "^smoke/convert/64Ki-f32-bf16 +median .* GB/s  n=[0-9]+  stop=" \
      -- "$cli" bench --device cpu --suite "$suites/smoke.json" --quick -o "$tmp/r.json"
check results-file   0 "kernelkit.bench/1"  -- cat "$tmp/r.json"
check compare        0 "4 compared"         -- "$cli" compare "$tmp/r.json" "$tmp/r.json"
check by-name        0 "^1 ran, 0 failed, 0 skipped" \
      -- env KK_BENCH_SUITES="$suites" "$cli" bench --device cpu --suite smoke --quick \
         --time-budget 0.2 --filter 64Ki-bf16-f32
check op-params      0 "^convert/n=1000,src=f32,dst=bf16 +median" \
      -- "$cli" bench --device cpu --op convert --params n=1000 --time-budget 0.2
check op-no-kernel   2 "no cpu kernel for attention" -- "$cli" bench --device cpu --op attention
check suite-no-kernel 2 "nothing could run on cpu" \
      -- "$cli" bench --device cpu --suite "$suites/nvfp4_gemv.json"
for s in attention gemm nvfp4_gemv; do # every suite file parses; nothing runs on the CPU
  check "suite-$s"   2 "skip .*: no cpu kernel" -- "$cli" bench --device cpu --suite "$suites/$s.json"
done
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
check missing-suite  2 "bad suite file $tmp/none.json: file" \
      -- "$cli" bench --device cpu --suite "$tmp/none.json"

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"

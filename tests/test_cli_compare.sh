#!/usr/bin/env bash
# labels: unit cpu
# kernelkit compare and kernelkit report on the fixture results files
# (tests/data/results, see fixtures.h there): exit codes 0 / 1 / 2, the
# markdown table on stdout, warnings on stderr, --json that parses, and a
# report written as both markdown and HTML.
set -uo pipefail
cli=$1
data=$2/tests/data/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME EXPECTED_RC PATTERN -- command...
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; echo "$out" | head -30; fails=$((fails+1)); return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | head -30; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}
ok()   { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails+1)); }

# ---- compare: exit codes ----
check slower       1 'Summary: 12 compared: 1 SLOWER, 1 FASTER'  -- "$cli" compare "$data/base.json" "$data/new.json"
check slower-row   1 '^\| `gemm/M=2048,N=2048,K=2048` \| [0-9.]+ µs \| [0-9.]+ µs \| 1\.[0-9]+ \[1\.[0-9]+, 1\.[0-9]+\] \| [^|]+ \| \+[0-9.]+ \(large\) \| 3% \| \*\*SLOWER\*\* \|$' -- "$cli" compare "$data/base.json" "$data/new.json"
check table-head   1 '^\| benchmark \| base median \| new median \| ratio \[95% CI\] \| p \| delta \(magnitude\) \| threshold \| verdict \|$' -- "$cli" compare "$data/base.json" "$data/new.json"
check only-in      1 'Only in base \(1, not compared\): `nvfp4_gemv'  -- "$cli" compare "$data/base.json" "$data/new.json"
check same         0 'Summary: 13 compared: 0 SLOWER, 0 FASTER, 13 SAME.*PASS' -- "$cli" compare "$data/base.json" "$data/base.json"
check swapped      1 'FAIL'                                     -- "$cli" compare "$data/new.json" "$data/base.json"
check threshold    0 'PASS'                                     -- "$cli" compare --threshold 20% "$data/base.json" "$data/new.json"
check threshold2   0 '\| 20% \| SAME'                           -- "$cli" compare --threshold 0.2 "$data/base.json" "$data/new.json"
check seed         1 'seed 7;'                                  -- "$cli" compare --seed 7 --resamples 2000 "$data/base.json" "$data/new.json"
check alpha        1 'alpha 0.01'                               -- "$cli" compare --alpha 0.01 "$data/base.json" "$data/new.json"
# another device: warned about on stderr, not a failure
check other-device 0 'warning: devices differ: base NVIDIA H200' -- "$cli" compare "$data/base.json" "$data/base_h100.json"
check other-clocks 0 'warning: maximum SM clocks differ'        -- "$cli" compare "$data/base.json" "$data/base_h100.json"
# the warnings also appear in the markdown (stdout), as a quote
if "$cli" compare "$data/base.json" "$data/base_h100.json" 2>/dev/null | grep -q '^> \*\*Warning:\*\* devices differ'; then
  ok warnings-in-markdown
else fail warnings-in-markdown; fi

# ---- compare: usage errors and unreadable files are 2, with a clear message ----
check no-args      2 'needs two results files'                  -- "$cli" compare
check one-arg      2 'needs two results files'                  -- "$cli" compare "$data/base.json"
check three-args   2 "unexpected argument"                      -- "$cli" compare "$data/base.json" "$data/base.json" "$data/new.json"
check bad-opt      2 "unknown option '--bogus'"                 -- "$cli" compare --bogus "$data/base.json" "$data/new.json"
check bad-thresh   2 "bad --threshold 'x'"                      -- "$cli" compare --threshold x "$data/base.json" "$data/new.json"
check big-thresh   2 "bad --threshold '2'"                      -- "$cli" compare --threshold 2 "$data/base.json" "$data/new.json"
check bad-alpha    2 "bad --alpha '1'"                          -- "$cli" compare --alpha 1 "$data/base.json" "$data/new.json"
check bad-resamp   2 "bad --resamples '10'"                     -- "$cli" compare --resamples 10 "$data/base.json" "$data/new.json"
check no-value     2 "needs a value"                            -- "$cli" compare "$data/base.json" "$data/new.json" --json
check missing      2 "base results file $tmp/nope.json: .*No such file" -- "$cli" compare "$tmp/nope.json" "$data/new.json"
echo '{"schema": "kernelkit.bench/1", "environment": {}}' > "$tmp/broken.json"
check broken       2 "new results file $tmp/broken.json: .*environment" -- "$cli" compare "$data/base.json" "$tmp/broken.json"
echo 'not json' > "$tmp/text.json"
check not-json     2 "not valid JSON"                           -- "$cli" compare "$tmp/text.json" "$data/new.json"
check help         0 "Usage: kernelkit compare BASE.json NEW.json" -- "$cli" compare --help
check unwritable   2 "cannot write $tmp/no/such/dir.json"       -- "$cli" compare --json "$tmp/no/such/dir.json" "$data/base.json" "$data/base.json"

# ---- compare: --json and --markdown files ----
"$cli" compare --json "$tmp/cmp.json" --markdown "$tmp/cmp.md" "$data/base.json" "$data/new.json" >"$tmp/stdout.md" 2>/dev/null
rc=$?
[ "$rc" = 1 ] && ok json-rc || fail "json-rc: exit $rc, expected 1"
cmp -s "$tmp/cmp.md" "$tmp/stdout.md" && ok markdown-file || fail markdown-file
if command -v python3 >/dev/null; then
  if python3 - "$tmp/cmp.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "kernelkit.compare/1"
assert d["summary"]["slower"] == 1 and d["summary"]["pass"] is False
rows = {r["name"]: r for r in d["benchmarks"]}
s = rows["gemm/M=2048,N=2048,K=2048"]
assert s["verdict"] == "SLOWER" and s["ratio_ci_low"] > 1.03 and s["p_value"] < 0.05
assert rows["linear/M=4096,N=16384,K=4096"]["threshold"] == 0.1
assert rows["linear/M=4096,N=16384,K=4096"]["threshold_source"] == "new"
assert d["only_in_base"] == ["nvfp4_gemv/M=7168,K=16384,L=1"]
assert d["only_in_new"] == ["attention_decode/B=16,KV=8192"]
PY
  then ok json-parses; else fail json-parses; fi
else
  grep -q '"schema": "kernelkit.compare/1"' "$tmp/cmp.json" && grep -q '"slower": 1' "$tmp/cmp.json" \
    && ok json-grep || fail json-grep
fi

# ---- report ----
check report-both 0 "wrote $tmp/r.md" -- "$cli" report "$data/base.json" "$data/base_h100.json" --output "$tmp/r.html" -o "$tmp/r.md"
[ -s "$tmp/r.html" ] && grep -q '<svg ' "$tmp/r.html" && grep -q '</html>' "$tmp/r.html" && ok report-html || fail report-html
grep -q '^## Executive summary' "$tmp/r.md" && grep -q 'NVIDIA H100 80GB HBM3' "$tmp/r.md" && ok report-md || fail report-md
check report-stdout 0 '^\| `.*base.json` \| \*\*NVIDIA H200\*\*' -- "$cli" report "$data/base.json"
check report-title  0 '^# Nightly$'                           -- "$cli" report --title Nightly "$data/base.json"
check report-noargs 2 'needs at least one results file'       -- "$cli" report
check report-ext    2 "bad --output '$tmp/r.pdf'"              -- "$cli" report "$data/base.json" --output "$tmp/r.pdf"
check report-miss   2 "cannot use the results file $tmp/nope.json" -- "$cli" report "$data/base.json" "$tmp/nope.json"
check report-unwr   1 "cannot write $tmp/no/dir/r.html"        -- "$cli" report "$data/base.json" --output "$tmp/no/dir/r.html"
check report-help   0 'Usage: kernelkit report FILE'           -- "$cli" report --help
if "$cli" report "$data/hostile.json" -o "$tmp/h.html" 2>/dev/null && ! grep -qi '<script' "$tmp/h.html"; then
  ok report-escaped
else fail report-escaped; fi

echo "$fails failed"
[ "$fails" -eq 0 ]

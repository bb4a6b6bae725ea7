#!/usr/bin/env bash
# labels: unit cpu
# The CLI's conventions: help, version, exit codes, clear messages for bad input.
set -uo pipefail
cli=$1
. "$(dirname "$0")/cli_check.sh"
check help           0 "Usage: kernelkit"                -- "$cli" --help
check help-short     0 "Commands:"                       -- "$cli" -h
check help-cmd       0 "Usage: kernelkit info"           -- "$cli" help info
check cmd-help       0 "Usage: kernelkit info"           -- "$cli" info --help
check version        0 "^kernelkit [0-9]+\.[0-9]+\.[0-9]+"  -- "$cli" --version
check unknown-cmd    2 "unknown command 'frobnicate'"    -- "$cli" frobnicate
check unknown-opt    2 "unknown option '--bogus'"        -- "$cli" --bogus
check unknown-subopt 2 "kernelkit info: unknown option '--bogus'" -- "$cli" info --bogus
check missing-value  2 "needs a value"                   -- "$cli" info --device
check bad-device     2 "bad --device"                    -- "$cli" info --device gpu:7
check bad-log        2 "bad --log value"                 -- "$cli" --log loud info
check extra-arg      2 "unexpected argument 'extra'"     -- "$cli" info extra
check info           0 "Best device: (cpu|cuda:0)"       -- "$cli" info
check info-cpu       0 "cpu: "                           -- "$cli" info --device cpu
check info-json      0 '"best_device"'                   -- "$cli" info --json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check selftest       0 "\[2/3\] Smoke correctness suite on cpu" -- "$cli" selftest --device cpu --no-bench
check selftest-sum   0 "^  convert +[1-9][0-9]* +0 +0 "  -- "$cli" selftest --device cpu --no-bench
check selftest-bad   2 "unknown option '--bogus'"        -- "$cli" selftest --bogus
check selftest-dev   2 "bad --device"                    -- "$cli" selftest --device tpu
check selftest-suite 1 "no suite 'nope'"                 -- "$cli" selftest --device cpu --suite nope
# The main job as `make run` runs it, from an empty folder: the suites are found
# next to the sources, the results and reports land in ./kernelkit-out.
check main-job       0 "Wrote kernelkit-out/results.json" -- bash -c "cd '$tmp' && KK_NUM_THREADS=2 '$cli'"
check main-job-files 0 "report.html"                     -- ls "$tmp/kernelkit-out"
check main-job-json  0 '"schema":[[:space:]]+"kernelkit.bench/1"'   -- cat "$tmp/kernelkit-out/results.json"
check config         0 '"safety_margin"'                 -- "$cli" config
check config-level   0 '"fp8_enabled":[[:space:]]+true'  -- "$cli" config --level aggressive
check config-valid   0 "full.json: valid"                -- "$cli" config --validate "$2/tests/data/config/full.json"
check config-invalid 1 'hardware.nvidia.architecture: "pentium"' -- "$cli" config --validate "$2/tests/data/config/bad_arch.json"
check config-env-bad 1 "KK_OPT_LEVEL=loud"               -- env KK_OPT_LEVEL=loud "$cli" config
check config-bad-opt 2 "bad --mode"                      -- "$cli" config --mode fast
check log-info       0 "INFO kernelkit"                  -- env KK_LOG=info "$cli" info

# info --json must be valid JSON with the documented top-level members.
if command -v python3 >/dev/null; then
  if "$cli" info --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert {"build","backends","devices","best_device"} <= d.keys(); assert d["devices"][0]["device"]=="cpu"; assert "cache_hits" in d["devices"][0]["memory_manager"]'; then
    echo "ok   info-json-valid"
  else
    echo "FAIL info-json-valid"; fails=$((fails+1))
  fi
fi

# Without a GPU, the CUDA backend must say why, and asking for it must fail cleanly.
if ! "$cli" info | grep -qE "^  cuda +available"; then
  check no-gpu-reason 0 "cuda +unavailable: .+"           -- "$cli" info
  check no-gpu-device 1 "cuda:0"                          -- "$cli" info --device cuda:0
fi

echo "$((fails)) failed"
[ "$fails" -eq 0 ]

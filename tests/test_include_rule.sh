#!/usr/bin/env bash
# labels: unit
# The include rule holds on the source tree, and the checker catches a
# planted break (a core/ file including the harness).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)/src
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
if ! out=$(bash "$here/check_includes.sh" "$src"); then
  echo "FAIL: the source tree breaks the include rule:"; echo "$out" | grep FAIL; fails=$((fails + 1))
else
  echo "ok   tree: $(tail -n 1 <<<"$out")"
fi
cp -r "$src" "$tmp/src"
printf '#include "harness/check/check_internal.h"\n' >>"$tmp/src/core/status.c"
if out=$(bash "$here/check_includes.sh" "$tmp/src"); then
  echo "FAIL: a planted core -> harness include passed"; fails=$((fails + 1))
elif grep -q "FAIL: core/status.c includes harness/" <<<"$out"; then
  echo "ok   planted break caught"
else
  echo "FAIL: planted break not named:"; echo "$out" | tail -n 3; fails=$((fails + 1))
fi
echo "$((2 - fails)) passed, $fails failed"
[ $fails = 0 ]

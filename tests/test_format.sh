#!/usr/bin/env bash
# labels: unit
# Every C and CUDA file is in the house style (.clang-format), checked with
# the clang-format the style was written for (14, Debian's); another version
# may break lines differently, so the test skips there.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
command -v clang-format >/dev/null || { echo "no clang-format: skipped"; exit 77; }
major=$(clang-format --version | sed -nE 's/.*version ([0-9]+).*/\1/p')
[ "$major" = 14 ] || { echo "clang-format $major, not 14: skipped"; exit 77; }
[ -d "$src/.git" ] || [ -f "$src/.git" ] || { echo "not a git checkout: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
(cd "$src" && bash scripts/format.sh --check) || fails=$((fails + 1))
# the check can fail: a planted two-space indent differs from the style
printf 'int f(void) {\n  return 1;\n}\n' >"$tmp/planted.c"
cp "$src/.clang-format" "$tmp/"
if (cd "$tmp" && clang-format planted.c | cmp -s - planted.c); then
  echo "FAIL: a mis-indented file passed"; fails=$((fails + 1))
fi
echo "$((2 - fails)) passed, $fails failed"
[ $fails = 0 ]

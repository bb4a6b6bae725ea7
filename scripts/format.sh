#!/usr/bin/env bash
# Apply the house style (.clang-format) to every C and CUDA file, or with
# --check list the files that differ and fail. The generated wgmma.cuh
# (scripts/gen_wgmma.py) is left as generated, and vendored code (third_party/)
# as its authors wrote it.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
files=$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cu' '*.cuh' |
  grep -v -e '^src/cuda/kernels/wgmma.cuh$' -e '^third_party/')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in $files; do
    clang-format "$f" | cmp -s - "$f" || { echo "not formatted: $f"; bad=1; }
  done
  exit $bad
fi
clang-format -i $files

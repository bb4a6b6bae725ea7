#!/usr/bin/env bash
# labels: unit
# The include rule of docs/architecture.md: a folder of src/ includes only
# itself and the folders below it. Lists every #include "folder/..." that
# breaks it and fails when one is not in the known exceptions below.
set -uo pipefail
src=${1:-$(dirname "$0")/../src}
declare -A may=(
  [core]="core"
  [opdef]="core opdef"
  [backend]="core opdef backend"
  [cpu]="core opdef backend cpu"
  [cuda]="core opdef backend cuda"
  [cuda_off]="core opdef backend cuda cuda_off"
  [ops]="core opdef backend ops"
  [dist]="core opdef backend ops dist"
  [harness]="core opdef backend ops dist harness"
  [model]="core opdef backend ops dist harness model"
  [cli]="cli"
)
# Known exceptions (docs/architecture.md says why each stays).
known=(
  "core/tensor.c backend"
)
bad=0
checked=0
while IFS= read -r line; do
  file=${line%%:*}
  rel=${file#"$src"/}
  folder=${rel%%/*}
  inc=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"${line#*:}")
  [ -d "$src/$inc" ] || continue # kernelkit/ (public) or a system header
  checked=$((checked + 1))
  ok=0
  for f in ${may[$folder]:-}; do [ "$f" = "$inc" ] && ok=1; done
  [ $ok = 1 ] && continue
  for k in "${known[@]}"; do [ "$k" = "$rel $inc" ] && ok=2; done
  if [ $ok = 2 ]; then echo "known: $rel includes $inc/"; continue; fi
  echo "FAIL: $rel includes $inc/ (a $folder/ file may include: ${may[$folder]:-nothing})"
  bad=$((bad + 1))
done < <(grep -rnE '^#include "[a-z_]+/' "$src" --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' | sed -E 's/:[0-9]+:/:/')
echo "$checked includes checked, $bad breaking the rule"
[ "$checked" -gt 100 ] || { echo "FAIL: too few includes seen under $src"; exit 1; }
[ $bad = 0 ]

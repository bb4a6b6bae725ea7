#!/usr/bin/env bash
# Export the committed tree (HEAD) plus the build dependencies the GPU machine
# lacks (cJSON, cmocka) into .gpu-tree/, for the device tool to carry:
#   run(command="cd .gpu-tree && bash scripts/device-check.sh", carry=[".gpu-tree"])
# --worktree: the working tree (tracked and untracked, not ignored) instead of
# HEAD, to try uncommitted changes. --before COMMIT: also that commit's tree in
# .gpu-tree/before/ (no bench/results, docs), for device-restructure.sh.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx "/.gpu-tree/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/.gpu-tree/" >> .git/info/exclude; }
rm -rf .gpu-tree && mkdir .gpu-tree
before=""
if [ "${1:-}" = --before ]; then
  before=$(git rev-parse --short=12 "${2:?--before needs a commit}")
  shift 2
fi
if [ "${1:-}" = --worktree ]; then
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -c | tar -x -C .gpu-tree
  echo "$(git rev-parse --short=12 HEAD)+worktree" > .gpu-tree/.commit
else
  git archive HEAD | tar -x -C .gpu-tree
  git rev-parse --short=12 HEAD > .gpu-tree/.commit
fi
mkdir -p .gpu-tree/.deps/include .gpu-tree/.deps/lib
cp -r /usr/include/cjson /usr/include/cmocka.h .gpu-tree/.deps/include/
for lib in libcjson.so.1 libcmocka.so.0; do
  src=$(readlink -f /usr/lib/x86_64-linux-gnu/$lib)
  cp "$src" ".gpu-tree/.deps/lib/$lib"
  cp "$src" ".gpu-tree/.deps/lib/${lib%.*}"   # the unversioned name the linker wants
done
# OpenBLAS (the CPU GEMM): the GPU machine may lack its headers (and its
# library): the headers travel, and device-check.sh uses the machine's own
# library when ldconfig knows one.
cfg=$( (ls /usr/include/*/openblas_config.h /usr/include/openblas_config.h 2>/dev/null || true) | head -1)
[ -n "$cfg" ] || { echo "OpenBLAS headers not found: apt-get install libopenblas-dev" >&2; exit 1; }
ob=$(dirname "$(readlink -f "$cfg")")
mkdir -p .gpu-tree/.deps/include/openblas
cp "$ob/cblas.h" "$ob/openblas_config.h" .gpu-tree/.deps/include/openblas/
# ...and, for a machine whose loader knows none, the library with the two
# runtime libraries it needs (device-check.sh uses them only then).
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .gpu-tree/.deps/lib/ 2>/dev/null || true
done
if [ -n "$before" ]; then
  mkdir .gpu-tree/before
  git archive "$before" | tar -x -C .gpu-tree/before --exclude=bench/results --exclude=docs
  echo "$before" > .gpu-tree/before/.commit
  rm -rf .gpu-tree/bench/results .gpu-tree/docs # not needed there: the tree travels lighter
fi
echo "exported $(cat .gpu-tree/.commit) to .gpu-tree/ ($(du -sh .gpu-tree | cut -f1))"

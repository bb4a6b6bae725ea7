#!/usr/bin/env bash
# Export the committed tree (HEAD) plus the build dependencies the GPU machine
# lacks (cJSON, cmocka) into .gpu-tree/, for the device tool to carry:
#   run(command="cd .gpu-tree && bash scripts/device-check.sh", carry=[".gpu-tree"])
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx "/.gpu-tree/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/.gpu-tree/" >> .git/info/exclude; }
rm -rf .gpu-tree && mkdir .gpu-tree
git archive HEAD | tar -x -C .gpu-tree
git rev-parse --short=12 HEAD > .gpu-tree/.commit
mkdir -p .gpu-tree/.deps/include .gpu-tree/.deps/lib
cp -r /usr/include/cjson /usr/include/cmocka.h .gpu-tree/.deps/include/
for lib in libcjson.so.1 libcmocka.so.0; do
  src=$(readlink -f /usr/lib/x86_64-linux-gnu/$lib)
  cp "$src" ".gpu-tree/.deps/lib/$lib"
  cp "$src" ".gpu-tree/.deps/lib/${lib%.*}"   # the unversioned name the linker wants
done
# OpenBLAS (the CPU GEMM): the GPU machine has its shared library but maybe not
# its headers, so only the headers travel (the library is 36 MB);
# device-check.sh finds the library there.
cfg=$( (ls /usr/include/*/openblas_config.h /usr/include/openblas_config.h 2>/dev/null || true) | head -1)
[ -n "$cfg" ] || { echo "OpenBLAS headers not found: apt-get install libopenblas-dev" >&2; exit 1; }
ob=$(dirname "$(readlink -f "$cfg")")
mkdir -p .gpu-tree/.deps/include/openblas
cp "$ob/cblas.h" "$ob/openblas_config.h" .gpu-tree/.deps/include/openblas/
echo "exported $(cat .gpu-tree/.commit) to .gpu-tree/ ($(du -sh .gpu-tree | cut -f1))"

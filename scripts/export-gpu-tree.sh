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
echo "exported $(cat .gpu-tree/.commit) to .gpu-tree/ ($(du -sh .gpu-tree | cut -f1))"

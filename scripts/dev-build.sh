#!/usr/bin/env bash
# Build here, for a lent GPU: a -DKK_ATTN_TUNING sm_90a build of the CLI and
# the attention test (build-dev/), staged with the shared libraries they load
# that the GPU machine lacks (libkernelkit, cJSON, cmocka) in .devbin/. Carry
# that folder: device tool run(command="bash scripts/device-tiles.sh", carry=[".devbin"])
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF -DKK_CUDA_ARCHS=90a \
  -DCMAKE_CUDA_FLAGS="-DKK_ATTN_TUNING" > /dev/null
cmake --build build-dev -j"$(nproc)" --target kernelkit_cli test_cuda_attention
rm -rf .devbin && mkdir .devbin
cp build-dev/kernelkit build-dev/tests/test_cuda_attention .devbin/
for lib in $(ldd build-dev/kernelkit build-dev/tests/test_cuda_attention |
             awk '/libkernelkit|libcjson|libcmocka/ {print $3}' | sort -u); do
  cp -L "$lib" .devbin/
done
git rev-parse --short=12 HEAD > .devbin/commit
git diff --quiet HEAD || echo "+worktree" >> .devbin/commit
du -sh .devbin && ls .devbin

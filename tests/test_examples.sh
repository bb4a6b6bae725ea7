#!/usr/bin/env bash
# labels: unit cpu
# The examples users copy from must build (they are part of the build) and run.
set -euo pipefail
bin=$3
[ -d "$bin/examples" ] || { echo "SKIP: examples not built (KK_BUILD_EXAMPLES=OFF)"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin/examples/example_device_info" | grep -q "selftest on .*: ok"
"$bin/examples/example_quantize_nvfp4" "$out" | tee "$out/log"
grep -q "relative L2 error 0\.[01]" "$out/log"   # NVFP4 on random data: about 0.1
[ -s "$out/nvfp4_data.npy" ] && [ -s "$out/nvfp4_scales.npy" ]
echo "examples: ok"

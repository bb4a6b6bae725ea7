#!/usr/bin/env bash
# labels: slow cpu
# `make install` layout, then build examples/device_info.c against the installed
# package twice: through CMake's find_package(KernelKit) and through pkg-config.
set -euo pipefail
cli=$1 src=$2 bin=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$bin" --prefix "$prefix" >/dev/null
for f in include/kernelkit/kernelkit.h include/kernelkit/status.h include/kernelkit/version.h \
         lib/libkernelkit.so lib/libkernelkit.a bin/kernelkit \
         lib/cmake/KernelKit/KernelKitConfig.cmake lib/pkgconfig/kernelkit.pc; do
  [ -e "$prefix/$f" ] || { echo "missing installed file: $f"; exit 1; }
done
"$prefix/bin/kernelkit" --version | grep -q "kernelkit " || { echo "installed CLI does not run"; exit 1; }

# The suites are installed, and the installed library finds them next to itself
# (share/kernelkit/suites under whatever prefix), from any folder, with no
# variable set: a suite that exists only there is found.
for f in smoke correctness performance attention-fuzz27 gemm; do
  [ -f "$prefix/share/kernelkit/suites/$f.json" ] || { echo "missing installed suite: $f.json"; exit 1; }
done
printf '{"cases": [{"name": "probe/convert/n3", "op": "convert", "params": "n=3 src=f32 dst=f16"}]}' \
  >"$prefix/share/kernelkit/suites/install-probe.json"
(cd "$work" && env -u KK_SUITES_DIR -u KK_BENCH_SUITES "$prefix/bin/kernelkit" check --device cpu \
  --suite install-probe --list) | grep -q "^probe/convert/n3 " ||
  { echo "the installed CLI does not find its installed suites"; exit 1; }

# find_package
mkdir -p "$work/consumer"
cat > "$work/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(KernelKit REQUIRED)
add_executable(device_info "$src/examples/device_info.c")
target_link_libraries(device_info PRIVATE KernelKit::kernelkit)
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer/build/device_info" | tee "$work/out1"
grep -q "best device:" "$work/out1"
grep -q "selftest on .*: ok" "$work/out1"

# pkg-config (the GPU machines have no pkg-config: skip that half there)
if ! command -v pkg-config >/dev/null || ! command -v cc >/dev/null; then
  echo "install + find_package: ok (pkg-config or cc not installed: pkg-config half skipped)"
  exit 0
fi
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc "$src/examples/device_info.c" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs kernelkit) -o "$work/di2"
LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/di2" | grep -q "best device:"
echo "install + find_package + pkg-config: ok"

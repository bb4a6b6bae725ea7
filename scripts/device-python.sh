#!/usr/bin/env bash
# The Python package's GPU evidence on a lent GPU, from an export
# (scripts/export-gpu-tree.sh; cd .gpu-tree first), with the machine's own
# python3 (PyTorch, transformers, CuPy, JAX):
#   1. build with CUDA (in BUILD, default build-py; an existing build is reused);
#   2. python/tests against BUILD/libkernelkit.so: torch CUDA tensors, streams,
#      CUDA graphs, torch.compile, the tiny Llama;
#   3. examples/python/llama_kernelkit.py on CUDA in bf16 against SDPA;
#   4. bench/python_host_overhead.py --device cuda -> $OUT/python-host-overhead.json;
#   5. `pip install .` into a fresh virtualenv (system site packages for torch;
#      scikit-build-core from the wheels in .whl/, since nothing can be fetched
#      there), then `import kernelkit` and the tests against the installed wheel.
# Logs in $OUT/python.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
L=/tmp/kk-python
mkdir -p "$out" "$L"
trap 'tar czf "$out/python.tgz" -C /tmp kk-python' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
b=${BUILD:-build-py}
py=python3
$py -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" | tee "$L/versions.txt"

echo "== build ($(cat .commit 2>/dev/null)) in $b"
kk_dev_build "$b" "$L/build.log" kernelkit kernelkit_cli || exit 1
lib=$PWD/$b/libkernelkit.so
export PYTHONUNBUFFERED=1

echo "== python/tests against $lib"
KERNELKIT_LIBRARY=$lib PYTHONPATH=$PWD/python timeout 400 $py -m pytest -q -rs -p no:cacheprovider \
  python/tests > "$L/pytest-build.txt" 2>&1
echo "pytest: exit $? $(tail -1 "$L/pytest-build.txt")"
grep -E "^(FAILED|ERROR)" "$L/pytest-build.txt" | head -20

echo "== tiny Llama on CUDA, bf16, kernelkit attention against SDPA"
KERNELKIT_LIBRARY=$lib PYTHONPATH=$PWD/python timeout 200 $py examples/python/llama_kernelkit.py \
  --device cuda --dtype bfloat16 > "$L/llama-cuda-bf16.txt" 2>&1
echo "llama: exit $?"; tail -4 "$L/llama-cuda-bf16.txt"

echo "== host overhead on CUDA"
KERNELKIT_LIBRARY=$lib PYTHONPATH=$PWD/python timeout 300 $py bench/python_host_overhead.py \
  --device cuda --out "$out/python-host-overhead.json" > "$L/host-overhead.txt" 2>&1
echo "overhead: exit $?"; tail -8 "$L/host-overhead.txt"

if [ "${INSTALL:-1}" = 1 ]; then
  echo "== pip install . in a fresh virtualenv"
  v=/tmp/kk-venv
  # The machine's python3 is itself a virtualenv (torch, pytest, transformers): the
  # fresh one sees its packages through a .pth file, and gets kernelkit of its own.
  site=$($py -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  rm -rf "$v" && $py -m venv "$v" &&
  echo "$site" > "$("$v/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/machine-site.pth" &&
  "$v/bin/pip" install -q --no-index --no-deps --find-links .whl scikit-build-core pathspec > "$L/pip.txt" 2>&1 &&
  timeout 500 "$v/bin/pip" install -v --no-index --no-deps --no-build-isolation --find-links .whl \
    -C cmake.define.KK_CUDA_ARCHS="${KK_CUDA_ARCHS:-90a}" \
    -C cmake.define.CJSON_INCLUDE_DIR="$deps/include" -C cmake.define.CJSON_LIBRARY="$deps/lib/libcjson.so" \
    -C cmake.define.OPENBLAS_INCLUDE_DIR="$deps/include/openblas" -C cmake.define.OPENBLAS_LIBRARY="$ob" . >> "$L/pip.txt" 2>&1
  echo "pip install: exit $?"; grep -E "Successfully|error|Error" "$L/pip.txt" | tail -5
  (cd /tmp && "$v/bin/python" -c "import kernelkit, json; print(kernelkit.__file__); i = kernelkit.info(); print(i['best_device'], [b['name'] for b in i['backends']])") 2>&1 | tee "$L/installed-info.txt"
  (cd /tmp && timeout 300 "$v/bin/python" -m pytest -q -rs -p no:cacheprovider "$OLDPWD/python/tests") \
    > "$L/pytest-installed.txt" 2>&1
  echo "pytest (installed wheel): exit $? $(tail -1 "$L/pytest-installed.txt")"
fi

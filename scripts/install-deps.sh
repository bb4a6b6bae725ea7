#!/usr/bin/env bash
# Installs what building and testing KernelKit needs on a Debian/Ubuntu machine.
# As root it runs apt-get itself; otherwise it prints the exact command and fails.
# The CUDA toolkit is not installed here: without nvcc the build turns CUDA off.
set -euo pipefail

missing=()
need_cmd() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need_file() { [ -e "$1" ] || missing+=("$2"); }

need_cmd cmake cmake
need_cmd make make
need_cmd gcc gcc
need_cmd pkg-config pkg-config
need_file /usr/include/cjson/cJSON.h libcjson-dev
need_file /usr/include/cmocka.h libcmocka-dev
# OpenBLAS (the CPU GEMM); its OpenMP build shares libgomp's threads with the
# CPU kernels instead of spinning its own pthreads beside them.
have_openblas=0
for f in /usr/include/openblas_config.h /usr/include/*/openblas_config.h /usr/include/*/openblas*/openblas_config.h; do
  [ -e "$f" ] && have_openblas=1
done
[ $have_openblas -eq 1 ] || missing+=(libopenblas-openmp-dev libopenblas-dev)
# Python 3 with venv and pip: `make test` runs the Python package's tests in a
# virtualenv (scripts/python-test.sh); .ci/run also checks `pip install .`.
if ! command -v python3 >/dev/null 2>&1; then
  missing+=(python3 python3-venv)
elif ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
# OpenMP for clang (gcc ships its own libgomp): `make clang` builds with it.
if command -v clang >/dev/null 2>&1; then
  ls /usr/lib/llvm-*/lib/libomp.so >/dev/null 2>&1 || missing+=(libomp-dev)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "kernelkit: missing build dependencies: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "kernelkit: installing them with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "kernelkit: installed ${missing[*]}" >&2
else
  echo "kernelkit: run this, then try again:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

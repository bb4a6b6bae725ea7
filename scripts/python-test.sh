#!/usr/bin/env bash
# The Python package's tests (python/tests) against the library just built, with no
# second compile: `make test` runs it after ctest. The package is imported from the
# source tree (PYTHONPATH=python) and loads BUILD/libkernelkit.so (KERNELKIT_LIBRARY).
#
#   scripts/python-test.sh [BUILD]       # default: build
#   KERNELKIT_TEST_PYTHON=/path/python scripts/python-test.sh build
#       # an interpreter of your own instead of BUILD/pyenv (e.g. one with torch and
#       # transformers, so that their tests run rather than skip)
#
# Without KERNELKIT_TEST_PYTHON it makes the virtualenv BUILD/pyenv (once) with numpy,
# ml_dtypes and pytest from PyPI; when that fails (no python3-venv, no network) it says
# so and fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
lib="$(cd "$BUILD" && pwd)/libkernelkit.so"
[ -e "$lib" ] || { echo "kernelkit: $lib not found: build first (make build)" >&2; exit 1; }

py=${KERNELKIT_TEST_PYTHON:-}
if [ -z "$py" ]; then
  env="$BUILD/pyenv"
  py="$env/bin/python"
  if ! "$py" -c "import numpy, ml_dtypes, pytest" >/dev/null 2>&1; then
    echo "kernelkit: making the Python test environment $env (numpy, ml_dtypes, pytest from PyPI)"
    if ! python3 -m venv "$env"; then
      echo "kernelkit: cannot create a virtualenv with 'python3 -m venv $env':" \
           "install python3 and python3-venv (apt-get install python3-venv), or set" \
           "KERNELKIT_TEST_PYTHON to an interpreter that has numpy and pytest" >&2
      exit 1
    fi
    if ! "$env/bin/pip" install -q --disable-pip-version-check numpy ml_dtypes pytest; then
      echo "kernelkit: 'pip install numpy ml_dtypes pytest' into $env failed (is PyPI" \
           "reachable?); the Python tests cannot run without them" >&2
      exit 1
    fi
  fi
fi
echo "== Python tests (python/tests) against $lib"
KERNELKIT_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$py" -m pytest -q -rs -p no:cacheprovider python/tests

#!/usr/bin/env bash
# `pip install .` of the Python package in a fresh virtualenv, CPU-only
# (KERNELKIT_CUDA=0), then `import kernelkit` and the pytest suite against the
# installed package (run from outside the source tree, no KERNELKIT_LIBRARY).
# .ci/run calls it; it needs python3-venv and PyPI (scikit-build-core, numpy,
# ml_dtypes, pytest). Takes about a minute and a half on 2 cores (one Release build
# of the library without tests or examples).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
unset KERNELKIT_LIBRARY KERNELKIT_CLI
KERNELKIT_CUDA=0 "$py" -m pip install -q --disable-pip-version-check "$repo[test]"
cd "$tmp"
"$py" -c "import kernelkit; print(kernelkit.info())"
"$tmp/venv/bin/kernelkit" --version
"$py" -m pytest -q -rs -p no:cacheprovider --rootdir="$tmp" "$repo/python/tests"

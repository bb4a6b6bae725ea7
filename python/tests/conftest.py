"""Shared fixtures of the kernelkit Python tests.

Run against a build tree without installing:
    KERNELKIT_LIBRARY=build/libkernelkit.so PYTHONPATH=python python -m pytest python/tests
or against the installed package (pip install .): python -m pytest python/tests.
`make test` does the former (after ctest), .ci/run the latter too."""

import os
import sys

import pytest

np = pytest.importorskip("numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("KERNELKIT_LIBRARY") and os.path.join(HERE, "..") not in sys.path:
    sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..")))

import kernelkit  # noqa: E402
from kernelkit import _lib, _tensors  # noqa: E402

try:
    import ml_dtypes  # noqa: F401

    HAVE_ML_DTYPES = True
except ImportError:
    HAVE_ML_DTYPES = False

needs_ml_dtypes = pytest.mark.skipif(not HAVE_ML_DTYPES, reason="ml_dtypes not installed")


def has_dlpack() -> bool:
    return _lib.lib().has_dlpack


@pytest.fixture(params=["auto", "wrap", "dlpack"])
def array_path(request):
    """Each test using it runs three times: arrays read from their data
    pointer with descriptors filled in place (auto) or made by kk_tensor_wrap
    (wrap), and through __dlpack__ (dlpack)."""
    if request.param == "dlpack" and not has_dlpack():
        pytest.skip("this libkernelkit has no DLPack API")
    old = kernelkit.set_array_path(request.param)
    yield request.param
    kernelkit.set_array_path(old)


def ptr(a) -> int:
    """The data pointer of a NumPy array."""
    return a.__array_interface__["data"][0]


class Capture:
    """Wraps one C function of the loaded library to record the kk_tensor
    arguments at `positions` that it receives (data pointer, shape, strides,
    dtype), then calls it."""

    def __init__(self, name, positions):
        self.name = name
        self.positions = positions
        self.lib = _lib.lib()
        self.fn = getattr(self.lib, name)
        self.calls = []

    def _record(self, args):
        seen = []
        for i in self.positions:
            a = args[i]
            if not a:
                seen.append(None)
                continue
            t = _lib.Tensor.from_address(a)
            seen.append(
                {
                    "data": t.data or 0,
                    "shape": tuple(t.shape[: t.ndim]),
                    "strides": tuple(t.strides[: t.ndim]),
                    "dtype": _tensors.DTYPE_NAMES[t.dtype],
                }
            )
        self.calls.append(seen)

    def __enter__(self):
        fn = self.fn

        def wrapper(*args):
            self._record(args)
            return fn(*args)

        setattr(self.lib, self.name, wrapper)
        # kernelkit.attention's torch fast path calls its own function object
        self.fast = None
        if self.name == "kk_attention":
            from kernelkit import _fastpath

            self.fast = _fastpath._c_attention or _fastpath._c_function()
            fast = self.fast

            def fast_wrapper(*args):
                self._record(args)
                return fast(*args)

            _fastpath._c_attention = fast_wrapper
        return self

    def __exit__(self, *exc):
        setattr(self.lib, self.name, self.fn)
        if self.fast is not None:
            from kernelkit import _fastpath

            _fastpath._c_attention = self.fast


def pytest_report_header(config):
    return (f"kernelkit: {os.path.dirname(kernelkit.__file__)}, library {_lib.library_path()}, "
            f"array path {kernelkit.get_array_path()}")

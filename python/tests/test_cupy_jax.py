"""CuPy and JAX arrays on the GPU: inputs read where they lie (checked by
pointer), outputs of the caller's own library (CuPy: cupy.empty on the same
device; JAX, whose arrays cannot be written: a KernelKit tensor handed over
through DLPack), results against NumPy on the CPU kernels. Skipped where CuPy
or JAX has no GPU (always on the CPU-only CI machine)."""

import os

import numpy as np
import pytest

# JAX would otherwise take 75% of the GPU's memory on first use, away from the
# torch tests in the same process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import kernelkit
from conftest import Capture


def _cupy():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no GPU")
    except Exception:
        pytest.skip("CuPy sees no GPU")
    if "cuda" not in [b["name"] for b in kernelkit.info()["backends"]]:
        pytest.skip("this libkernelkit has no CUDA backend")
    return cp


def _jax_gpu():
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except Exception:
        gpus = []
    if not gpus:
        pytest.skip("JAX sees no GPU")
    if "cuda" not in [b["name"] for b in kernelkit.info()["backends"]]:
        pytest.skip("this libkernelkit has no CUDA backend")
    return jax, gpus[0]


def _inputs():
    r = np.random.default_rng(11)
    q = r.standard_normal((1, 4, 5, 64), dtype=np.float32)
    k = r.standard_normal((1, 2, 9, 64), dtype=np.float32)
    v = r.standard_normal((1, 2, 9, 64), dtype=np.float32)
    x = r.standard_normal((7, 96), dtype=np.float32)
    w = r.standard_normal(96, dtype=np.float32)
    return q, k, v, x, w


def test_cupy_arrays_in_place_and_out():
    cp = _cupy()
    q, k, v, x, w = _inputs()
    dq, dk, dv, dx, dw = (cp.asarray(a) for a in (q, k, v, x, w))
    with Capture("kk_attention", (0, 1, 2, 3)) as cap:
        o = kernelkit.attention(dq, dk, dv, causal=True)
    (tq, tk, tv, to), = cap.calls
    assert (tq["data"], tk["data"], tv["data"]) == (dq.data.ptr, dk.data.ptr, dv.data.ptr)
    assert isinstance(o, cp.ndarray) and to["data"] == o.data.ptr
    ref = kernelkit.attention(q, k, v, causal=True)  # the CPU kernel
    np.testing.assert_allclose(cp.asnumpy(o), ref, atol=2e-5, rtol=2e-5)
    y = cp.full_like(dx, cp.nan)
    assert kernelkit.rmsnorm(dx, dw, out=y) is y
    np.testing.assert_allclose(cp.asnumpy(y), kernelkit.rmsnorm(x, w), atol=1e-5, rtol=1e-5)


def test_cupy_explicit_stream():
    cp = _cupy()
    q, k, v, _, _ = _inputs()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        dq, dk, dv = (cp.asarray(a) for a in (q, k, v))
        o = kernelkit.attention(dq, dk, dv)  # CuPy's current stream: s
    s.synchronize()
    np.testing.assert_allclose(cp.asnumpy(o), kernelkit.attention(q, k, v), atol=2e-5, rtol=2e-5)


def test_jax_arrays():
    jax, gpu = _jax_gpu()
    q, k, v, x, w = _inputs()
    jq, jk, jv, jx, jw = (jax.device_put(a, gpu) for a in (q, k, v, x, w))
    o = kernelkit.attention(jq, jk, jv, causal=True)
    assert isinstance(o, jax.Array)
    assert list(o.devices())[0] == gpu
    np.testing.assert_allclose(np.asarray(o), kernelkit.attention(q, k, v, causal=True),
                               atol=2e-5, rtol=2e-5)
    y = kernelkit.rmsnorm(jx, jw)
    np.testing.assert_allclose(np.asarray(y), kernelkit.rmsnorm(x, w), atol=1e-5, rtol=1e-5)

"""Zero copies, views and array types: what the C function receives is the
caller's memory (checked by pointer, with the C entry point wrapped to record
its kk_tensor arguments), outputs are the out= array or a new one, strided and
offset views are taken as they are or refused, never copied."""

import numpy as np
import pytest

import kernelkit
from conftest import Capture, needs_ml_dtypes, ptr


def rng():
    return np.random.default_rng(5)


def test_inputs_are_not_copied(array_path):
    r = rng()
    q = r.standard_normal((1, 2, 8, 16), dtype=np.float32)
    k = r.standard_normal((1, 2, 12, 16), dtype=np.float32)
    v = r.standard_normal((1, 2, 12, 16), dtype=np.float32)
    with Capture("kk_attention", (0, 1, 2, 3)) as cap:
        o = kernelkit.attention(q, k, v, causal=True)
    (tq, tk, tv, to), = cap.calls
    assert (tq["data"], tk["data"], tv["data"]) == (ptr(q), ptr(k), ptr(v))
    assert to["data"] == ptr(o)
    assert ptr(o) not in (ptr(q), ptr(k), ptr(v))


def test_out_is_written_in_place(array_path):
    r = rng()
    x = r.standard_normal((6, 40), dtype=np.float32)
    w = r.standard_normal(40, dtype=np.float32)
    y = np.full_like(x, np.nan)
    with Capture("kk_rmsnorm", (0, 1, 2)) as cap:
        res = kernelkit.rmsnorm(x, w, 1e-6, out=y)
    assert res is y
    assert cap.calls[0][2]["data"] == ptr(y)
    assert np.allclose(y, kernelkit.rmsnorm(x, w, 1e-6), atol=0, rtol=0)


def test_offset_views(array_path):
    """A slice that starts inside a buffer: the pointer handed over is the
    slice's own (base + offset), and the result equals the result on a copy."""
    r = rng()
    big = r.standard_normal((10, 64), dtype=np.float32)
    x = big[3:7]  # contiguous, offset by 3 rows
    w = r.standard_normal(64, dtype=np.float32)
    out_big = np.zeros((12, 64), dtype=np.float32)
    y = out_big[5:9]
    with Capture("kk_rmsnorm", (0, 1, 2)) as cap:
        kernelkit.rmsnorm(x, w, out=y)
    assert cap.calls[0][0]["data"] == ptr(big) + 3 * 64 * 4
    assert cap.calls[0][2]["data"] == ptr(out_big) + 5 * 64 * 4
    assert np.array_equal(y, kernelkit.rmsnorm(x.copy(), w))
    assert not out_big[:5].any() and not out_big[9:].any()


def test_strided_attention_views(array_path):
    """q, k, v as [B,H,S,D] views of [B,S,H,D] buffers (transformers' layout):
    taken as they are (the CPU kernel reads strides), the same result as on
    contiguous copies."""
    r = rng()
    qb = r.standard_normal((2, 9, 4, 32), dtype=np.float32)
    kb = r.standard_normal((2, 11, 2, 32), dtype=np.float32)
    vb = r.standard_normal((2, 11, 2, 32), dtype=np.float32)
    q, k, v = (a.transpose(0, 2, 1, 3) for a in (qb, kb, vb))
    assert not q.flags.c_contiguous
    with Capture("kk_attention", (0, 1, 2, 3)) as cap:
        o = kernelkit.attention(q, k, v, causal=True)
    tq = cap.calls[0][0]
    assert tq["data"] == ptr(qb)
    assert tq["strides"] == (9 * 4 * 32, 32, 4 * 32, 1)
    ref = kernelkit.attention(*(np.ascontiguousarray(a) for a in (q, k, v)), causal=True)
    assert np.array_equal(o, ref)
    # a strided output too: o written into a [B,S,H,D] buffer
    ob = np.zeros((2, 9, 4, 32), dtype=np.float32)
    kernelkit.attention(q, k, v, causal=True, out=ob.transpose(0, 2, 1, 3))
    assert np.array_equal(ob.transpose(0, 2, 1, 3), ref)


def test_strided_row_op_is_refused_not_copied(array_path):
    """rmsnorm's kernels read contiguous rows: a column slice is the library's
    KK_ERR_INVALID_ARGUMENT naming the tensor, never a silent copy."""
    r = rng()
    x = r.standard_normal((4, 128), dtype=np.float32)[:, ::2]
    w = np.ones(64, dtype=np.float32)
    with pytest.raises(kernelkit.InvalidArgumentError) as e:
        kernelkit.rmsnorm(x, w)
    assert "x" in str(e.value) and "contiguous" in str(e.value)


def test_negative_strides_are_unsupported(array_path):
    x = np.ones((4, 8), dtype=np.float32)[::-1]
    with pytest.raises(kernelkit.UnsupportedError):
        kernelkit.rmsnorm(x, np.ones(8, dtype=np.float32))


def test_nd_row_ops_and_linear(array_path):
    """[B,S,n] arrays through row ops and linear: one [rows,n] view, no copy."""
    r = rng()
    x = r.standard_normal((2, 3, 32), dtype=np.float32)
    w = r.standard_normal(32, dtype=np.float32)
    y = kernelkit.rmsnorm(x, w)
    assert y.shape == x.shape
    assert np.array_equal(y.reshape(6, 32), kernelkit.rmsnorm(x.reshape(6, 32), w))
    wl = r.standard_normal((5, 32), dtype=np.float32)
    z = kernelkit.linear(x, wl, activation="gelu_tanh")
    assert z.shape == (2, 3, 5)
    assert np.array_equal(z.reshape(6, 5), kernelkit.linear(x.reshape(6, 32), wl,
                                                             activation="gelu_tanh"))
    # a 3-D view whose rows cannot be one [rows, n] view without a copy
    xb = r.standard_normal((3, 2, 32), dtype=np.float32).transpose(1, 0, 2)
    with pytest.raises(kernelkit.InvalidArgumentError):
        kernelkit.rmsnorm(xb, w)


def test_in_place_residual_update():
    """add_rmsnorm with residual_out=residual: h written over the residual stream."""
    r = rng()
    x = r.standard_normal((4, 16), dtype=np.float32)
    res = r.standard_normal((4, 16), dtype=np.float32)
    w = r.standard_normal(16, dtype=np.float32)
    y0, h0 = kernelkit.add_rmsnorm(x, res.copy(), w)
    y, h = kernelkit.add_rmsnorm(x, res, w, residual_out=res)
    assert h is res and np.array_equal(h, h0) and np.array_equal(y, y0)


@needs_ml_dtypes
def test_bf16_and_reinterpret():
    import ml_dtypes

    r = rng()
    x = r.standard_normal((4, 32)).astype(ml_dtypes.bfloat16)
    w = r.standard_normal(32).astype(ml_dtypes.bfloat16)
    y = kernelkit.rmsnorm(x, w)
    assert y.dtype == ml_dtypes.bfloat16
    # the same bytes as uint16, read as bf16; out= as raw bits too
    out = np.empty((4, 32), dtype=np.uint16)
    kernelkit.rmsnorm(kernelkit.reinterpret(x.view(np.uint16), "bf16"),
                      kernelkit.reinterpret(w.view(np.uint16), "bfloat16"),
                      out=kernelkit.reinterpret(out, "bf16"))
    assert np.array_equal(out, y.view(np.uint16))
    with pytest.raises(kernelkit.InvalidArgumentError):
        kernelkit.rmsnorm(kernelkit.reinterpret(x.view(np.uint16), "f32"), w)


def test_generic_dlpack_producer():
    """An array type the package does not know (only __dlpack__ and
    __dlpack_device__, as JAX's): read through DLPack, outputs made by
    KernelKit and handed back through the type's namespace (here NumPy's
    from_dlpack), sharing the memory."""
    if not kernelkit.info()["build"]["dlpack"]:
        pytest.skip("no DLPack API in this library")

    class Foreign:
        def __init__(self, a):
            self.a = a
            self.shape = a.shape
            self.dtype = a.dtype

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

        def __array_namespace__(self):
            return np

    r = rng()
    x = r.standard_normal((3, 16), dtype=np.float32)
    w = r.standard_normal(16, dtype=np.float32)
    y = kernelkit.rmsnorm(Foreign(x), Foreign(w))
    assert isinstance(y, np.ndarray)
    assert np.array_equal(y, kernelkit.rmsnorm(x, w))
    # the producer's array is still intact and alive
    assert np.isfinite(x).all()


def test_kkarray_export_and_lifetime():
    if not kernelkit.info()["build"]["dlpack"]:
        pytest.skip("no DLPack API in this library")
    from ctypes import byref, c_int64, c_void_p

    from kernelkit import _lib, _tensors

    L = _lib.lib()
    t = c_void_p()
    _lib.check(L.kk_tensor_create(b"cpu", 1, 2, (c_int64 * 2)(3, 4), byref(t)))
    a = _tensors.KKArray(t.value)
    n = np.from_dlpack(a)
    assert n.shape == (3, 4) and n.dtype == np.float32
    n[:] = 7
    del a  # the export keeps the memory alive
    import gc

    gc.collect()
    assert (n == 7).all()
    # an unconsumed capsule is freed by its destructor (no crash, no leak)
    t2 = c_void_p()
    _lib.check(L.kk_tensor_create(b"cpu", 1, 1, (c_int64 * 1)(5), byref(t2)))
    b = _tensors.KKArray(t2.value)
    cap = b.__dlpack__()
    cap2 = b.__dlpack__(max_version=(1, 1))
    del cap, cap2, b
    gc.collect()


def test_capsule_is_marked_used():
    """After the C side takes a capsule over, it is renamed used_dltensor (the
    producer's destructor then leaves it alone) and the producer's deleter
    runs once, when the kk_tensor is destroyed."""
    if not kernelkit.info()["build"]["dlpack"]:
        pytest.skip("no DLPack API in this library")
    import sys

    from kernelkit import _tensors

    caps = []

    class Recorder:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            c = self.a.__dlpack__(**kw)
            caps.append(c)
            return c

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = np.ones((2, 3), dtype=np.float32)
    refs = sys.getrefcount(x)
    t = _tensors.from_dlpack(Recorder(x), None)
    assert sys.getrefcount(x) == refs + 1  # held by the managed tensor
    name = _tensors._py.PyCapsule_GetName(caps[0])
    assert name in (b"used_dltensor", b"used_dltensor_versioned")
    from kernelkit import _lib

    _lib.lib().kk_tensor_destroy(t)
    assert sys.getrefcount(x) == refs  # the deleter ran


def test_descriptors_equal_kk_tensor_wrap():
    """The kk_tensor descriptors the "auto" path fills in place are byte for
    byte what kk_tensor_wrap makes for the same array."""
    import ctypes

    from kernelkit import _lib, _tensors

    if not _tensors._DESC_OK:
        pytest.skip("descriptor layout not recognised: every array goes through kk_tensor_wrap")
    base = np.zeros((5, 6, 8), dtype=np.float32)
    for a in (base, base[1:4, ::2], base.transpose(2, 0, 1), base[0], np.zeros(3, np.int32),
              np.zeros((2, 2), np.float16)[1:]):
        spec = _tensors._numpy_tensor(a, "x", None, False)
        c = _tensors.Call()
        t_desc = c._make(*spec)
        t_wrap = _tensors._wrap(*spec[:4], spec[4] or None)
        try:
            n = ctypes.sizeof(_lib.Tensor)
            assert ctypes.string_at(t_desc, n) == ctypes.string_at(t_wrap, n)
        finally:
            _lib.lib().kk_tensor_destroy(t_wrap)
            c.close()

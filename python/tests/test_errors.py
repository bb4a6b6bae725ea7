"""Every error path raises the kernelkit.Error subclass of its kk_status with
the library's own message (kk_last_error), or, for what Python checks before
any C call, the same classes with a message of their own."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kernelkit
from kernelkit import _errors, _lib, harness
from conftest import needs_ml_dtypes  # noqa: E402


def last_message():
    return _lib.lib().kk_last_error_message().decode()


def f32(*shape):
    return np.zeros(shape, dtype=np.float32)


def test_tree_matches_the_library():
    """Each class's code, name and parent are the C library's (kk_status_name,
    kk_status_parent)."""
    L = _lib.lib()
    for code, cls in _errors.BY_STATUS.items():
        assert cls.status == code
        assert L.kk_status_name(code).decode() == cls.status_name
        parent = L.kk_status_parent(code)
        if parent:
            assert issubclass(cls, _errors.BY_STATUS[parent])
    assert issubclass(kernelkit.InvalidArgumentError, ValueError)
    assert issubclass(kernelkit.OutOfMemoryError, MemoryError)
    assert issubclass(kernelkit.OutOfMemoryError, kernelkit.AllocationError)
    # an unknown code: its nearest known ancestor, else the root
    assert _errors.class_for(123456, L.kk_status_parent) is kernelkit.Error


def test_shape_mismatch_carries_the_library_message(array_path):
    with pytest.raises(kernelkit.InvalidArgumentError) as e:
        kernelkit.rmsnorm(f32(2, 64), f32(63))
    assert e.value.message == last_message()
    assert e.value.message.startswith("rmsnorm: w")
    assert e.value.argument == "w"
    assert e.value.status == 400 and e.value.status_name == "KK_ERR_INVALID_ARGUMENT"
    assert str(e.value) == e.value.message


def test_attention_errors(array_path):
    q = f32(1, 2, 4, 32)
    with pytest.raises(kernelkit.InvalidArgumentError, match=r"attention: k = shape \[1,2,4,16\]: expected shape \[1,2,4,32\]"):
        kernelkit.attention(q, f32(1, 2, 4, 16), f32(1, 2, 4, 32))
    with pytest.raises(kernelkit.InvalidArgumentError, match="D = 8"):
        kernelkit.attention(f32(1, 1, 4, 8), f32(1, 1, 4, 8), f32(1, 1, 4, 8))
    with pytest.raises(kernelkit.InvalidArgumentError, match="dropout") as e:
        kernelkit.attention(q, q, q, dropout=2.0)
    assert e.value.message == last_message()
    with pytest.raises(kernelkit.InvalidArgumentError):
        kernelkit.attention(q, q.astype(np.float16), q)  # mixed dtypes


def test_option_errors():
    x = f32(2, 16)
    with pytest.raises(kernelkit.InvalidArgumentError, match="eps"):
        kernelkit.rmsnorm(x, f32(16), eps=0.0)
    with pytest.raises(kernelkit.InvalidArgumentError, match="activation"):
        kernelkit.linear(x, f32(4, 16), activation="tanh")
    with pytest.raises(kernelkit.InvalidArgumentError, match="style"):
        kernelkit.rope(f32(1, 1, 2, 16), style="sideways")
    with pytest.raises(kernelkit.InvalidArgumentError, match="theta"):
        kernelkit.rope(f32(1, 1, 2, 16), theta=0.0)
    with pytest.raises(kernelkit.InvalidArgumentError, match="layout"):
        kernelkit.quantize(x, layout="4x4")


def test_varlen_offsets_are_checked():
    q = f32(10, 2, 16)
    cu_bad = np.array([0, 6, 4, 10], dtype=np.int32)
    with pytest.raises(kernelkit.InvalidArgumentError, match=r"cu_seqlens_q\[2\]"):
        kernelkit.attention_varlen(q, q, q, cu_bad, cu_bad, 10, 10)


def test_rope_kv_append_overflow_is_refused_before_writing():
    q = f32(1, 2, 2, 16)
    k = np.ones((1, 1, 2, 16), dtype=np.float32)
    kc = f32(1, 1, 4, 16)
    seq = np.array([3], dtype=np.int32)
    with pytest.raises(kernelkit.InvalidArgumentError, match="cache_seqlens"):
        kernelkit.rope_kv_append(q, k, k, seq, kc, kc.copy())
    assert not kc.any()


def test_unsupported_dtypes(array_path):
    for dt in (np.complex64, np.bool_, np.int16, np.int64):
        x = np.zeros((2, 4), dtype=dt)
        with pytest.raises(kernelkit.UnsupportedError):
            kernelkit.rmsnorm(x, x[0])


def test_not_an_array():
    with pytest.raises(kernelkit.InvalidArgumentError, match="not an array"):
        kernelkit.rmsnorm([[1.0, 2.0]], [1.0, 2.0])


def test_read_only_output(array_path):
    y = f32(2, 16)
    y.flags.writeable = False
    with pytest.raises(kernelkit.InvalidArgumentError):
        kernelkit.rmsnorm(f32(2, 16), np.ones(16, np.float32), out=y)


def test_read_only_input_is_fine(array_path):
    x = np.ones((2, 16), dtype=np.float32)
    x.flags.writeable = False
    w = np.ones(16, dtype=np.float32)
    w.flags.writeable = False
    try:
        y = kernelkit.rmsnorm(x, w)
    except kernelkit.UnsupportedError:
        # NumPy's DLPack 0.x export cannot say read-only and refuses
        assert array_path == "dlpack"
        return
    assert np.allclose(y, 1.0, atol=1e-6)


@needs_ml_dtypes  # NumPy alone has no fp8 dtype for the new outputs
def test_quantization_errors():
    with pytest.raises(kernelkit.QuantizationError) as e:
        kernelkit.rmsnorm_fp8(np.full((2, 128), np.inf, np.float32), np.ones(128, np.float32))
    assert e.value.message == last_message()
    with pytest.raises(kernelkit.QuantizationError, match="NaN"):
        kernelkit.quantize(np.full(128, np.nan, np.float32))


def test_cuda_unavailable():
    if kernelkit.info()["backends"][1]["available"]:
        pytest.skip("CUDA is available here")
    with pytest.raises(kernelkit.CudaUnavailableError) as e:
        kernelkit.synchronize("cuda:0")
    assert isinstance(e.value, kernelkit.DeviceError)
    with pytest.raises(kernelkit.CudaUnavailableError):
        kernelkit.bench("gemm", "M=4 N=4 K=4", device="cuda")


def test_out_of_memory():
    L = _lib.lib()
    params = "M=96 N=80 K=72 dtype=f32"
    inputs = harness.fill_inputs("gemm", params)
    _lib.check(L.kk_mem_empty_cache(b"cpu"))  # no cached block may serve it
    _lib.check(L.kk_mem_set_limit(b"cpu", 1024))
    try:
        with pytest.raises(kernelkit.OutOfMemoryError) as e:
            harness.run_kernel("gemm", params, inputs)
    finally:
        _lib.check(L.kk_mem_set_limit(b"cpu", 0))
    assert isinstance(e.value, MemoryError)
    assert "out of memory" in str(e.value)


def test_harness_errors():
    with pytest.raises(kernelkit.InvalidArgumentError, match="gemm: M = 0"):
        kernelkit.check("gemm", "M=0")
    with pytest.raises(kernelkit.InvalidArgumentError, match="nope"):
        kernelkit.check("nope")
    with pytest.raises(kernelkit.InvalidArgumentError, match="dist"):
        kernelkit.check("gemm", "M=4", dist="uniform")
    with pytest.raises(kernelkit.InvalidArgumentError):
        kernelkit.bench("gemm", "M=4", flush="sideways")


def test_bad_library_path():
    """KERNELKIT_LIBRARY naming no file: a FileIOError on first use."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        "import kernelkit\n"
        "try:\n"
        "    kernelkit.info()\n"
        "except kernelkit.FileIOError as e:\n"
        "    print('FileIOError', e)\n"
    )
    env = dict(os.environ, KERNELKIT_LIBRARY="/nonexistent/libkernelkit.so")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(here, ".."), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.startswith("FileIOError KERNELKIT_LIBRARY"), out.stdout + out.stderr

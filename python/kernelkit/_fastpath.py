"""The fast path for the hottest call: kernelkit.attention(q, k, v) on plain
torch tensors, with no out=, lse, stream= or reinterpretation.

The general path (_tensors.Call) handles every array library and every
argument form; on torch CUDA tensors it costs about twice SDPA's own host time
(docs/python.md, "Host overhead"). Here the four kk_tensor descriptors (q, k, v
and the new o) are packed by one struct.pack_into into a reused buffer, the
stream is torch's raw current-stream handle, and the output is made with
Tensor.new_empty. Anything unusual (another dtype, a layout or device the
general path must judge, a lazily negated view) returns None, and the caller
takes the general path, which raises the precise error. The bytes packed are
the same as the general path's (python/tests/test_arrays.py checks that).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from typing import Any, Optional

from . import _lib, _tensors

# KERNELKIT_FASTPATH=0 (or enabled = False) sends every call the general way.
enabled = os.environ.get("KERNELKIT_FASTPATH", "1") != "0"
# One 4-D kk_tensor: dtype, ndim, shape[8], strides[8], data, device kind and
# index, device name, storage; the unused dimensions' slots are zero pad bytes.
_ONE = "ii4q32x4q32xQii16sQ"
_DESC4 = struct.Struct("=" + _ONE * 4)
_DSIZE = _tensors._DSIZE
_OK = _tensors._DESC_OK and _DESC4.size == 4 * _DSIZE
_Buf = ctypes.c_char * (4 * _DSIZE)
_bufs: list = []

_tensor_type: Any = None  # torch.Tensor, once torch has been imported by someone
_codes: dict = {}  # torch dtype -> kk code (f32, f16, bf16)
_devices: dict = {}  # torch device index (-1: CPU) -> (kind, index, name) or None
_raw_stream: Any = None


def tensor_type() -> Any:
    """torch.Tensor if torch is imported (never imports it), else None."""
    global _tensor_type
    if _tensor_type is None:
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "Tensor"):
            _init(torch)
    return _tensor_type


def _init(torch: Any) -> None:
    global _tensor_type, _raw_stream
    _codes.update({torch.float32: _tensors.F32, torch.float16: _tensors.F16,
                   torch.bfloat16: _tensors.BF16})
    _raw_stream = _tensors._torch_raw_stream
    _tensor_type = torch.Tensor


def _device(index: int):
    """(kind, index, name bytes) of torch device `index` if this build has it."""
    if index in _devices:
        return _devices[index]
    name = _tensors._CPU if index < 0 else f"cuda:{index}".encode()
    ok = _tensors._device_ok(name)
    v = None if ok is None else (ok[0], ok[1], name)
    _devices[index] = v
    return v


def _c_function() -> Any:
    """kk_attention with every argument a plain address: ctypes converts ints
    to void pointers fastest (the general path's prototype takes a
    POINTER(AttentionOptions), which needs a byref object per call)."""
    global _c_attention
    fn = (_lib._lib or _lib.lib()).dll["kk_attention"]
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 7
    _c_attention = fn
    return fn


_c_attention: Any = None  # tests wrap it to see the descriptors (conftest.Capture)


def attention(q: Any, k: Any, v: Any, opt: Any) -> Optional[Any]:
    """o, or None when the general path must take the call."""
    if not (_OK and enabled) or _tensors._array_path != "auto":
        return None
    dt = q.dtype
    code = _codes.get(dt)
    if code is None or k.dtype is not dt or v.dtype is not dt:
        return None
    qs, ks, vs = q.shape, k.shape, v.shape
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or q.is_neg() or k.is_neg() or v.is_neg():
        return None
    try:  # a layout other than strided (sparse, mkldnn) has no strides: the general path
        qt, kt, vt = q.stride(), k.stride(), v.stride()
        qp, kp, vp = q.data_ptr(), k.data_ptr(), v.data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    di = q.get_device()
    if k.get_device() != di or v.get_device() != di:
        return None
    dev = _devices.get(di) if di in _devices else _device(di)
    if dev is None:
        return None
    kind, index, name = dev
    b, h, sq, d = qs[0], qs[1], qs[2], vs[3]
    o = q.new_empty((b, h, sq, d))
    entry = _bufs.pop() if _bufs else _new_buf()
    try:
        buf, base = entry
        _DESC4.pack_into(buf, 0,
                         code, 4, *qs, *qt, qp, kind, index, name, 0,
                         code, 4, *ks, *kt, kp, kind, index, name, 0,
                         code, 4, *vs, *vt, vp, kind, index, name, 0,
                         code, 4, b, h, sq, d, h * sq * d, sq * d, d, 1, o.data_ptr(), kind, index,
                         name, 0)
        fn = _c_attention or _c_function()
        st = fn(base, base + _DSIZE, base + 2 * _DSIZE, base + 3 * _DSIZE, None,
                ctypes.addressof(opt), _raw_stream(di) if di >= 0 else None)
    finally:
        if len(_bufs) < 8:
            _bufs.append(entry)
    if st:
        raise _lib.error_from_last(st)
    return o


def _new_buf():
    buf = _Buf()
    return buf, ctypes.addressof(buf)

"""Arrays in and out: how a Python array becomes a kk_tensor for one call, and
how new outputs are made.

Inputs (never copied; a layout the op cannot take is an error, not a copy):
  * NumPy arrays: a view of the array's own memory from ``__array_interface__``
    (data pointer, shape, byte strides); this also takes ml_dtypes' bfloat16
    and float8 arrays, which NumPy's DLPack export refuses.
  * torch tensors: a view from ``data_ptr()``, ``shape`` and ``stride()`` (the
    fast path; docs/python.md has its measured cost beside the DLPack one).
    For both, the kk_tensor descriptor of borrowed memory is filled in place
    (see _DESC), or made by kk_tensor_wrap with set_array_path("wrap").
  * anything else with ``__dlpack__`` (CuPy, JAX, ...), and every array when
    the path is set to "dlpack" (``set_array_path("dlpack")`` or the
    environment variable KERNELKIT_ARRAY_PATH=dlpack): the DLPack capsule is
    handed to kk_tensor_from_dlpack(_versioned), which takes ownership; the
    capsule is then renamed "used_dltensor" as the protocol requires. On CUDA
    the capsule is asked for with ``__dlpack__(stream=S)``, S the stream the
    call runs on, so the producer orders its pending work before ours.
Packed formats: an argument that must be e2m1 (NVFP4 data) or fp8 (NVFP4
scales) also takes a uint8 array of the raw bytes (e2m1: two values per byte,
low nibble first, so the last dimension is half the logical one);
``reinterpret(x, dtype)`` says the same for any argument.

Outputs: ``out=`` arrays are written in place; otherwise a new array is made
with the first array argument's own library (numpy.empty, torch.empty on the
same device, cupy.empty on the same device). Libraries whose arrays cannot be
written (JAX) get a KernelKit-allocated tensor handed over through DLPack
(``<namespace>.from_dlpack``). e2m1 outputs are uint8 arrays of packed bytes.

Streams (CUDA): an explicit ``stream=`` (an int cudaStream_t, a
torch.cuda.Stream or a cupy Stream) wins; otherwise torch tensors run on
``torch.cuda.current_stream(device)``, CuPy arrays on CuPy's current stream,
and other arrays (JAX) on the legacy default stream followed by a
synchronization before the call returns. The call does not wait for the GPU
otherwise, as torch's own ops do not.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from ctypes import byref, c_int64, c_void_p
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _errors, _lib

# kk_dtype codes (dtype.h)
F64, F32, F16, BF16, E4M3, E5M2, E2M1, I8, U8, I32 = range(10)
DTYPE_NAMES = ("f64", "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "e2m1", "int8", "uint8", "int32")
DTYPE_BITS = (64, 32, 16, 16, 8, 8, 4, 8, 8, 32)

_PATHS = ("auto", "wrap", "dlpack")
_array_path = os.environ.get("KERNELKIT_ARRAY_PATH", "auto") or "auto"
if _array_path not in _PATHS:
    _array_path = "auto"


def set_array_path(path: str) -> str:
    """How arrays are read: "auto" (NumPy and torch from their data pointer,
    shape and strides, the kk_tensor descriptors filled in place; everything
    else through DLPack), "wrap" (the same, each descriptor made by
    kk_tensor_wrap) or "dlpack" (every caller's array through ``__dlpack__``).
    Returns the previous setting. The default comes from the environment
    variable KERNELKIT_ARRAY_PATH."""
    global _array_path
    if path not in _PATHS:
        raise _errors.InvalidArgumentError(
            f"set_array_path: path = {path!r}: expected one of {', '.join(_PATHS)}"
        )
    old, _array_path = _array_path, path
    return old


def get_array_path() -> str:
    """The current setting of set_array_path."""
    return _array_path


# ---- dtypes ----


def dtype_code(d: Any) -> int:
    """A kk_dtype code from a name ("bf16", "bfloat16", "float8_e4m3fn", ...), a
    code, a NumPy dtype or a torch dtype."""
    if isinstance(d, int) and 0 <= d < len(DTYPE_NAMES):
        return d
    if isinstance(d, str):
        L = _lib.lib()
        out = ctypes.c_int()
        _lib.check(L.kk_dtype_parse(d.encode(), byref(out)))
        return out.value
    mod = type(d).__module__
    if mod.startswith("torch"):
        code = _torch_codes().get(d)
        if code is not None:
            return code
    try:
        import numpy as np

        code = _numpy_codes().get(np.dtype(d))
        if code is not None:
            return code
    except (ImportError, TypeError):
        pass
    raise _errors.UnsupportedError(f"dtype {d!r}: KernelKit has no such dtype (expected one of "
                                   f"{', '.join(DTYPE_NAMES)})")


def dtype_name(code: int) -> str:
    return DTYPE_NAMES[code]


_np_codes = None
_np_dtypes = None


def _numpy_codes():
    global _np_codes, _np_dtypes
    if _np_codes is None:
        import numpy as np

        codes = {
            np.dtype(np.float64): F64,
            np.dtype(np.float32): F32,
            np.dtype(np.float16): F16,
            np.dtype(np.int8): I8,
            np.dtype(np.uint8): U8,
            np.dtype(np.int32): I32,
        }
        dts = {F64: np.float64, F32: np.float32, F16: np.float16, I8: np.int8, U8: np.uint8,
               I32: np.int32, E2M1: np.uint8}
        try:
            import ml_dtypes

            for name, code in (("bfloat16", BF16), ("float8_e4m3fn", E4M3), ("float8_e5m2", E5M2)):
                t = getattr(ml_dtypes, name, None)
                if t is not None:
                    codes[np.dtype(t)] = code
                    dts[code] = t
        except ImportError:
            pass
        _np_codes, _np_dtypes = codes, dts
    return _np_codes


def numpy_dtype(code: int):
    """The NumPy dtype of kk dtype `code` (ml_dtypes for bf16 and fp8; uint8 of
    packed bytes for e2m1)."""
    _numpy_codes()
    t = _np_dtypes.get(code)
    if t is None:
        raise _errors.UnsupportedError(
            f"NumPy has no {DTYPE_NAMES[code]} dtype: pip install ml_dtypes, or pass out= "
            f"as a uint{DTYPE_BITS[code]} array wrapped in kernelkit.reinterpret(out, "
            f"'{DTYPE_NAMES[code]}')"
        )
    return t


_t_codes = None
_t_dtypes = None


def _torch_codes():
    global _t_codes, _t_dtypes
    if _t_codes is None:
        import torch

        codes = {
            torch.float64: F64,
            torch.float32: F32,
            torch.float16: F16,
            torch.bfloat16: BF16,
            torch.int8: I8,
            torch.uint8: U8,
            torch.int32: I32,
        }
        for name, code in (("float8_e4m3fn", E4M3), ("float8_e5m2", E5M2)):
            t = getattr(torch, name, None)
            if t is not None:
                codes[t] = code
        dts = {v: k for k, v in codes.items()}
        dts[E2M1] = torch.uint8
        fp4 = getattr(torch, "float4_e2m1fn_x2", None)
        if fp4 is not None:
            codes[fp4] = -E2M1  # packed pairs: read as e2m1 with the last dim doubled
        _t_codes, _t_dtypes = codes, dts
    return _t_codes


def torch_dtype(code: int):
    _torch_codes()
    return _t_dtypes[code]


# ---- reinterpretation ----


class Reinterpreted:
    """An array whose bytes are read as another KernelKit dtype (see
    :func:`reinterpret`)."""

    __slots__ = ("base", "code")

    def __init__(self, base: Any, code: int) -> None:
        self.base = base
        self.code = code

    def __repr__(self) -> str:
        return f"kernelkit.reinterpret({self.base!r}, {DTYPE_NAMES[self.code]!r})"


def reinterpret(x: Any, dtype: Any) -> Reinterpreted:
    """Read the bytes of array `x` as KernelKit dtype `dtype`, without a copy:
    an element type of the same width (uint8 as fp8_e4m3 or fp8_e5m2, uint16 or
    int16 as bf16 or f16, ...), or a uint8 array of packed bytes as e2m1, whose
    logical last dimension is then twice the array's. Works for inputs and for
    ``out=`` arrays; the result is only an argument for kernelkit's functions."""
    if isinstance(x, Reinterpreted):
        x = x.base
    return Reinterpreted(x, dtype_code(dtype))


# ---- array kinds ----

NUMPY, TORCH, CUPY, OTHER = range(4)
_kind_cache: dict = {}


def _kind_of(x: Any) -> int:
    t = type(x)
    k = _kind_cache.get(t)
    if k is not None:
        return k
    k = OTHER
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    cupy = sys.modules.get("cupy")
    if np is not None and isinstance(x, np.ndarray):
        k = NUMPY
    elif torch is not None and isinstance(x, torch.Tensor):
        k = TORCH
    elif cupy is not None and isinstance(x, cupy.ndarray):
        k = CUPY
    elif not hasattr(x, "__dlpack__"):
        raise _errors.InvalidArgumentError(
            f"{t.__module__}.{t.__qualname__} is not an array: expected an object with "
            "__dlpack__ (NumPy, torch, CuPy, JAX arrays)"
        )
    _kind_cache[t] = k
    return k


# ---- DLPack ----


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(c_int64)),
        ("strides", ctypes.POINTER(c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_py = ctypes.pythonapi
_py.PyCapsule_GetPointer.restype = c_void_p
_py.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_SetName.restype = ctypes.c_int
_py.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_GetName.restype = ctypes.c_char_p
_py.PyCapsule_GetName.argtypes = [ctypes.py_object]
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
# In a capsule's destructor the capsule is being freed: it is passed as a bare
# pointer, never as a Python object (which would revive it).
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _py))
_GetPointerRaw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _py)
)

_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"


def _capsule_destructor(cap: int) -> None:
    # An unconsumed capsule of ours: call the DLManagedTensor's deleter.
    for name, cls in ((b"dltensor", DLManagedTensor), (b"dltensor_versioned",
                                                       DLManagedTensorVersioned)):
        if _IsValid(cap, name):
            p = _GetPointerRaw(cap, name)
            if p:
                m = cls.from_address(p)
                if m.deleter:
                    m.deleter(p)
            return


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)(_capsule_destructor)
_CAPSULE_DESTRUCTOR_PTR = ctypes.cast(_CAPSULE_DESTRUCTOR, c_void_p).value

_CPU_DEVICES = (1, 3)  # kDLCPU, kDLCUDAHost
_CUDA = 2  # kDLCUDA


def _dlpack_stream_arg(dev_type: int, stream: Optional[int]):
    if dev_type in _CPU_DEVICES:
        return None
    # kDLCUDA: the stream we run on; the legacy default stream is 1, not 0
    return 1 if not stream else stream


# kk dtype -> DLPack (type code, bits)
_DL_TYPES = {F64: (2, 64), F32: (2, 32), F16: (2, 16), BF16: (4, 16), E4M3: (10, 8),
             E5M2: (12, 8), I8: (0, 8), U8: (1, 8), I32: (0, 32)}


def _patch_dtype(dl: DLTensor, want: Optional[int]) -> None:
    """reinterpret() through DLPack: the managed tensor is ours once taken, so
    its element type is rewritten to `want` when the widths agree (uint16 bits
    as bf16, uint8 as fp8); packed e2m1 is a view made after the import."""
    if want is None or want == E2M1 or dl.dtype.lanes != 1:
        return
    code, bits = _DL_TYPES[want]
    if dl.dtype.bits == bits and dl.dtype.code in (0, 1, 2, 4, 10, 12):
        dl.dtype.code = code


def from_dlpack(x: Any, stream: Optional[int], reinterpret_as: Optional[int] = None) -> int:
    """A kk_tensor for x through its DLPack capsule (ownership handed to the
    kk_tensor, whose destruction calls the producer's deleter)."""
    L = _lib.lib()
    if not L.has_dlpack:
        raise _errors.UnsupportedError(
            f"{L.path} has no DLPack API (kk_tensor_from_dlpack): rebuild it from this source tree"
        )
    try:
        dev_type = int(x.__dlpack_device__()[0])
    except AttributeError:
        dev_type = 1
    sarg = _dlpack_stream_arg(dev_type, stream)
    try:
        cap = x.__dlpack__(stream=sarg, max_version=(1, 1))
    except TypeError:  # a producer of the DLPack 0.x protocol
        cap = x.__dlpack__(stream=sarg) if sarg is not None else x.__dlpack__()
    except BufferError as e:
        raise _errors.UnsupportedError(f"{type(x).__name__}.__dlpack__: {e}") from None
    name = _py.PyCapsule_GetName(cap)
    out = c_void_p()
    if name == b"dltensor_versioned":
        ptr = _py.PyCapsule_GetPointer(cap, name)
        if reinterpret_as is not None:
            _patch_dtype(DLManagedTensorVersioned.from_address(ptr).dl_tensor, reinterpret_as)
        st = L.kk_tensor_from_dlpack_versioned(ptr, 1, byref(out))
        used = _USED_V
    elif name == b"dltensor":
        ptr = _py.PyCapsule_GetPointer(cap, name)
        if reinterpret_as is not None:
            _patch_dtype(DLManagedTensor.from_address(ptr).dl_tensor, reinterpret_as)
        st = L.kk_tensor_from_dlpack(ptr, 1, byref(out))
        used = _USED
    else:
        raise _errors.InvalidArgumentError(
            f"{type(x).__name__}.__dlpack__ returned a capsule named {name!r}: expected "
            "'dltensor' or 'dltensor_versioned' (already consumed?)"
        )
    if st:
        # not taken: the capsule keeps it and its destructor frees it
        raise _lib.error_from_last(st)
    _py.PyCapsule_SetName(cap, used)
    return out.value


class KKArray:
    """A tensor KernelKit allocated, handed to other libraries through DLPack
    (``numpy.from_dlpack(a)``, ``jax.numpy.from_dlpack(a)``, ...). Holds a
    kk_tensor until it is garbage collected; every export is a view that keeps
    the memory alive on its own."""

    def __init__(self, t: int) -> None:
        self._t = t
        s = _lib.Tensor.from_address(t)
        self.shape = tuple(s.shape[: s.ndim])
        self.dtype = DTYPE_NAMES[s.dtype]
        self.device = s.device.decode()
        self._dev = (1, 0) if s.device_kind == 0 else (_CUDA, s.device_index)

    def __del__(self) -> None:
        t, self._t = getattr(self, "_t", None), None
        if t and _lib._lib is not None:
            _lib._lib.kk_tensor_destroy(t)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._dev

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None):
        L = _lib.lib()
        if not L.has_dlpack:
            raise BufferError(f"{L.path} has no DLPack API (kk_tensor_to_dlpack)")
        if copy:
            raise BufferError("KKArray exports without a copy only")
        if self._dev[0] == _CUDA and stream not in (None, 1, 2):
            # our work ran on the legacy default stream and was synchronized
            pass
        out = c_void_p()
        if max_version is not None and tuple(max_version)[0] >= 1:
            _lib.check(L.kk_tensor_to_dlpack_versioned(self._t, byref(out)))
            name = b"dltensor_versioned"
        else:
            _lib.check(L.kk_tensor_to_dlpack(self._t, byref(out)))
            name = b"dltensor"
        return _py.PyCapsule_New(out.value, name, _CAPSULE_DESTRUCTOR_PTR)

    def __repr__(self) -> str:
        return f"KKArray(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"


# ---- the fast paths ----

_CPU = b"cpu"
_cuda_names: dict = {}


def _wrap(device: bytes, code: int, shape: Sequence[int], strides: Sequence[int], ptr: int) -> int:
    n = len(shape)
    if n > 8:
        raise _errors.UnsupportedError(
            f"{n} dimensions: KernelKit tensors have at most 8 (KK_TENSOR_MAX_DIMS)"
        )
    out = c_void_p()
    st = _lib.lib().kk_tensor_wrap(device, code, n, (c_int64 * n)(*shape), (c_int64 * n)(*strides),
                                   ptr, byref(out))
    if st:
        raise _lib.error_from_last(st)
    return out.value


# kk_tensor descriptors filled in place. A kk_tensor of borrowed memory (what
# kk_tensor_wrap makes: storage NULL) is a plain public struct
# (include/kernelkit/tensor.h); filling it here costs one struct.pack_into
# instead of a ctypes call with two int64 arrays and a kk_tensor_destroy. The
# layout is checked against the ctypes mirror at import (and the mirror against
# the C compiler by python/tests/test_layout.py); test_arrays.py checks that the
# bytes equal kk_tensor_wrap's. e2m1 views and unvalidated devices still go
# through kk_tensor_wrap, which applies their rules.
_DESC = struct.Struct("=ii8q8qQii16sQ")
_DSIZE = ctypes.sizeof(_lib.Tensor)
_DESC_OK = (
    _DESC.size == _DSIZE
    and _lib.Tensor.shape.offset == 8
    and _lib.Tensor.strides.offset == 72
    and _lib.Tensor.data.offset == 136
    and _lib.Tensor.device_kind.offset == 144
    and _lib.Tensor.device_index.offset == 148
    and _lib.Tensor.device.offset == 152
    and _lib.Tensor.storage.offset == 168
)
_PADS = tuple((0,) * (8 - n) for n in range(9))
_MAX_DESC = 16
_DescBuf = ctypes.c_char * (_DSIZE * _MAX_DESC)
_devices_ok: dict = {_CPU: (0, 0)}
_free_bufs: list = []


def _device_ok(device: bytes):
    """(backend kind, index) of a device this build has and that is present, or
    None (then kk_tensor_wrap names the problem)."""
    v = _devices_ok.get(device)
    if v is None and device not in _devices_ok:
        kind, index = ctypes.c_int(), ctypes.c_int()
        L = _lib.lib()
        if L.kk_device_parse(device, byref(kind), byref(index)) == 0:
            v = (kind.value, index.value)
        else:
            L.kk_clear_error()
        _devices_ok[device] = v
    return v


def _e2m1_view(name: str, shape: Sequence[int], strides: Sequence[int]):
    """Packed bytes [..., K/2] as e2m1 [..., K] (strides in elements)."""
    if not shape:
        raise _errors.InvalidArgumentError(f"{name}: packed e2m1 needs at least one dimension")
    if shape[-1] > 1 and strides[-1] != 1:
        raise _errors.InvalidArgumentError(
            f"{name}: packed e2m1 bytes need a contiguous last dimension (stride 1), got "
            f"strides {tuple(strides)}"
        )
    return tuple(shape[:-1]) + (shape[-1] * 2,), tuple(s * 2 for s in strides[:-1]) + (1,)


def _as(name: str, have: int, want: Optional[int], itembits: int):
    """The dtype to read an array of dtype `have` as, for an argument that wants
    `want` (None: as it is)."""
    if want is None or want == have or have < 0:
        return have
    if want == E2M1 and have in (U8, I8):
        return -E2M1
    if want != E2M1 and DTYPE_BITS[want] == itembits and have in (U8, I8, -1):
        return want
    return have  # the C entry point names the mismatch


def _forced(name: str, have: str, itembits: int, want: int) -> int:
    """The code to read elements of `itembits` bits as, for reinterpret(x, want)."""
    if want == E2M1 and itembits == 8:
        return -E2M1
    if want != E2M1 and DTYPE_BITS[want] == itembits:
        return want
    raise _errors.InvalidArgumentError(
        f"{name}: cannot read {have} elements as {DTYPE_NAMES[want]} (reinterpret needs the "
        "same width, or 8-bit bytes for packed e2m1)"
    )


def _numpy_tensor(x: Any, name: str, want: Optional[int], output: bool, force: bool = False):
    codes = _np_codes if _np_codes is not None else _numpy_codes()
    dt = x.dtype
    code = _forced(name, str(dt), dt.itemsize * 8, want) if force else codes.get(dt)
    if code is None:
        if want is not None and dt.kind in "uiV" and dt.itemsize * 8 == DTYPE_BITS[want]:
            code = -1  # raw bits of the wanted width
        else:
            raise _errors.UnsupportedError(
                f"{name}: NumPy dtype {dt} is not supported (KernelKit takes float64, float32, "
                "float16, int8, uint8, int32, and ml_dtypes' bfloat16, float8_e4m3fn, "
                "float8_e5m2; reinterpret() reads raw bits as another dtype)"
            )
    if not force:
        code = _as(name, code, want, dt.itemsize * 8)
    if code == -1:
        raise _errors.UnsupportedError(f"{name}: NumPy dtype {dt} is not supported")
    ai = x.__array_interface__
    ptr, readonly = ai["data"]
    if output and readonly:
        raise _errors.InvalidArgumentError(f"{name}: the output array is read-only")
    shape = x.shape
    item = dt.itemsize
    if ai["strides"] is None:
        strides = []
        acc = 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        strides.reverse()
    else:
        strides = []
        for s in x.strides:
            if s < 0:  # as kk_tensor_from_dlpack says of them: KernelKit views have none
                raise _errors.UnsupportedError(
                    f"{name}: negative strides {x.strides}: KernelKit views have none; pass a "
                    "copy (numpy.ascontiguousarray)"
                )
            if s % item:
                raise _errors.InvalidArgumentError(
                    f"{name}: byte strides {x.strides} are not multiples of the {item}-byte "
                    "element: pass a copy (numpy.ascontiguousarray)"
                )
            strides.append(s // item)
    if code == -E2M1:
        shape, strides = _e2m1_view(name, shape, strides)
        code = E2M1
    return (_CPU, code, shape, strides, ptr)


def _torch_device(x: Any) -> bytes:
    if x.is_cuda:
        i = x.get_device()
        b = _cuda_names.get(i)
        if b is None:
            b = _cuda_names[i] = f"cuda:{i}".encode()
        return b
    if x.is_cpu:
        return _CPU
    raise _errors.UnsupportedError(
        f"torch device {x.device}: KernelKit runs on 'cpu' and 'cuda' tensors only"
    )


def _torch_tensor(x: Any, name: str, want: Optional[int], output: bool, force: bool = False):
    codes = _t_codes if _t_codes is not None else _torch_codes()
    if _torch_strided is None:
        _torch_init()
    if force:
        code = _forced(name, str(x.dtype), x.element_size() * 8, want)
    else:
        code = codes.get(x.dtype)
    if code is None:
        raise _errors.UnsupportedError(
            f"{name}: torch dtype {x.dtype} is not supported (KernelKit takes float64, float32, "
            "float16, bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn_x2, int8, uint8, int32)"
        )
    if not force:
        code = _as(name, code, want, x.element_size() * 8)
    if x.layout is not _torch_strided:
        raise _errors.UnsupportedError(f"{name}: torch layout {x.layout}: expected torch.strided")
    if x.is_neg():  # (complex dtypes, the only ones with a conj bit, are refused above)
        raise _errors.InvalidArgumentError(
            f"{name}: a lazily negated torch view: call .resolve_neg() first"
        )
    if output and x.requires_grad and _torch_grad_enabled():
        raise _errors.InvalidArgumentError(f"{name}: an output that requires grad")
    shape = x.shape
    strides = x.stride()
    if code == -E2M1:
        shape, strides = _e2m1_view(name, shape, strides)
        code = E2M1
    return (_torch_device(x), code, shape, strides, x.data_ptr())


_torch_strided = None
_torch_grad_enabled = None
_torch_raw = None


def _torch_raw_stream(index: int) -> int:
    """torch's current stream on CUDA device `index`, as a cudaStream_t: the raw
    handle (what torch.compile's generated code uses) costs a fraction of
    torch.cuda.current_stream(...).cuda_stream, which builds a Stream object."""
    global _torch_raw
    if _torch_raw is None:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_raw = raw if raw is not None else (
            lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _torch_raw(index)


def _torch_init() -> None:
    global _torch_strided, _torch_grad_enabled
    import torch

    _torch_strided = torch.strided
    _torch_grad_enabled = torch.is_grad_enabled


# ---- one call ----


def stream_value(stream: Any) -> Optional[int]:
    """A cudaStream_t as an int from an int, a torch.cuda.Stream (cuda_stream)
    or a CuPy stream (ptr); None stays None."""
    if stream is None or isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise _errors.InvalidArgumentError(
        f"stream = {stream!r}: expected an int (cudaStream_t), a torch.cuda.Stream or a CuPy stream"
    )


class Call:
    """The kk_tensors of one call: made from arrays, destroyed at the end.

    The first array given decides the library new outputs are made with and,
    on CUDA, the stream (unless the caller gave one)."""

    __slots__ = ("tensors", "ref", "ref_kind", "stream", "user_stream", "sync", "device",
                 "_exports", "_buf", "_base", "_n")

    def __init__(self, stream: Any = None) -> None:
        self.tensors: List[int] = []
        self._buf = None
        self._base = 0
        self._n = 0
        self.ref = None
        self.ref_kind = -1
        self.user_stream = stream is not None
        self.stream = stream_value(stream)
        self.sync = False
        self.device: Optional[bytes] = None
        self._exports = None

    # -- inputs --

    def _first(self, x: Any, kind: int) -> None:
        self.ref = x
        self.ref_kind = kind
        if kind == TORCH:
            if _torch_strided is None:
                _torch_init()
            if x.is_cuda and not self.user_stream:
                self.stream = _torch_raw_stream(x.get_device())
        elif kind == CUPY:
            if not self.user_stream:
                import cupy

                self.stream = cupy.cuda.get_current_stream().ptr
        elif kind == OTHER:
            try:
                dev = int(x.__dlpack_device__()[0])
            except Exception:
                dev = 1
            if dev == _CUDA and not self.user_stream:
                self.stream = 0  # the legacy default stream, then synchronize
                self.sync = True

    def tensor(self, x: Any, name: str, want: Optional[int] = None, output: bool = False) -> int:
        """A kk_tensor viewing array x (x None: NULL)."""
        if x is None:
            return None
        if isinstance(x, Reinterpreted):
            base = x.base
            want = x.code
            force = True
        else:
            base = x
            force = False
        kind = _kind_of(base)
        if self.ref is None:
            self._first(base, kind)
        if _array_path == "dlpack" or kind >= CUPY:
            t = from_dlpack(base, self.stream, want if force else None)
            self.tensors.append(t)
            if force or want is not None:
                t = self._retype(t, name, want, force)
            return t
        return self._make(*(_numpy_tensor if kind == NUMPY else _torch_tensor)(
            base, name, want, output, force))

    def _make(self, device: bytes, code: int, shape: Sequence[int], strides: Sequence[int],
              ptr: int) -> int:
        """A kk_tensor of borrowed memory: a descriptor filled in place, or one
        made by kk_tensor_wrap (see _DESC)."""
        n = len(shape)
        dev = _devices_ok.get(device) if device in _devices_ok else _device_ok(device)
        if (_array_path == "wrap" or code == E2M1 or n > 8 or not _DESC_OK or dev is None
                or self._n >= _MAX_DESC):
            t = _wrap(device, code, shape, strides, ptr or None)
            self.tensors.append(t)
            return t
        if self._buf is None:
            # descriptor buffers are reused: a list's pop/append are atomic under the GIL
            self._buf = _free_bufs.pop() if _free_bufs else _DescBuf()
            self._base = ctypes.addressof(self._buf)
        i = self._n
        self._n = i + 1
        pad = _PADS[n]
        _DESC.pack_into(self._buf, i * _DSIZE, code, n, *shape, *pad, *strides, *pad, ptr or 0,
                        dev[0], dev[1], device, 0)
        return self._base + i * _DSIZE

    def _retype(self, t: int, name: str, want: int, force: bool) -> int:
        """A view of kk_tensor t read as dtype `want` (same bits; or uint8 as
        packed e2m1)."""
        s = _lib.Tensor.from_address(t)
        have = s.dtype
        if have == want:
            return t
        shape = list(s.shape[: s.ndim])
        strides = list(s.strides[: s.ndim])
        if want == E2M1 and have in (U8, I8):
            shape, strides = _e2m1_view(name, shape, strides)
        elif want != E2M1 and DTYPE_BITS[want] == DTYPE_BITS[have] and (force or have in (U8, I8)):
            pass
        elif not force:
            return t  # the C entry point names the mismatch
        else:
            raise _errors.InvalidArgumentError(
                f"{name}: cannot read {DTYPE_NAMES[have]} elements as {DTYPE_NAMES[want]} "
                f"(reinterpret needs the same width, or uint8 bytes for packed e2m1)"
            )
        v = _wrap(bytes(s.device).rstrip(b"\0"), want, shape, strides, s.data)
        self.tensors.append(v)
        return v

    # -- outputs --

    def output(self, given: Any, name: str, shape: Sequence[int], code: int) -> Tuple[Any, int]:
        """The output array and its kk_tensor: `given` (out=) written in place, or a
        new array of the first argument's library."""
        if given is not None:
            return given, self.tensor(given, name, code, output=True)
        arr = self.new(shape, code)
        if isinstance(arr, KKArray):
            return arr, arr._t
        # an array made here is plain: read directly, whatever the path setting
        # (NumPy cannot export ml_dtypes' bf16/fp8 through DLPack)
        if self.ref_kind == NUMPY:
            return arr, self._make(*_numpy_tensor(arr, name, code, True))
        if self.ref_kind == TORCH:
            return arr, self._make(*_torch_tensor(arr, name, code, True))
        return arr, self.tensor(arr, name, code, output=True)

    def new(self, shape: Sequence[int], code: int) -> Any:
        shape = tuple(int(d) for d in shape)
        if code == E2M1:
            if not shape or (shape[-1] % 2 and len(shape) > 1):
                raise _errors.InvalidArgumentError(
                    f"a new e2m1 output of shape {shape}: packed bytes need an even last "
                    "dimension (pass out= a uint8 array wrapped in kernelkit.reinterpret)"
                )
            shape = shape[:-1] + ((shape[-1] + 1) // 2,)
        k = self.ref_kind
        ref = self.ref
        if k == NUMPY:
            import numpy as np

            return np.empty(shape, dtype=numpy_dtype(code))
        if k == TORCH:
            import torch

            return torch.empty(shape, dtype=torch_dtype(code), device=ref.device)
        if k == CUPY:
            import cupy

            with ref.device:
                return cupy.empty(shape, dtype=numpy_dtype(code))
        return self._new_exported(shape, code)

    def _new_exported(self, shape: Sequence[int], code: int) -> Any:
        """A KernelKit tensor on the inputs' device, handed to the caller's library
        through DLPack after the call (see finish)."""
        dev = self.device_of_first()
        n = len(shape)
        out = c_void_p()
        _lib.check(_lib.lib().kk_tensor_create(dev, code, n, (c_int64 * n)(*shape), byref(out)))
        arr = KKArray(out.value)
        if self._exports is None:
            self._exports = []
        self._exports.append(arr)
        return arr

    def device_of_first(self) -> bytes:
        for t in self.tensors:
            s = _lib.Tensor.from_address(t)
            return bytes(s.device).rstrip(b"\0")
        return _CPU

    def result(self, arr: Any) -> Any:
        """What the caller gets for output `arr`: itself, or (a KKArray) the
        caller's library's array made from it through DLPack."""
        if not isinstance(arr, KKArray):
            return arr
        ns = None
        ref = self.ref
        try:
            ns = ref.__array_namespace__()
        except Exception:
            ns = None
        mod = type(ref).__module__.split(".")[0]
        if ns is None and mod in ("jax", "jaxlib"):
            import jax.numpy as ns  # noqa: F811
        if ns is not None and hasattr(ns, "from_dlpack"):
            return ns.from_dlpack(arr)
        import numpy as np

        return np.from_dlpack(arr)

    # -- running --

    def run(self, fn: Callable[..., int], *args: Any) -> None:
        st = fn(*args)
        if st:
            raise _lib.error_from_last(st)
        if self.sync:
            dev = self.device_of_first()
            _lib.check(_lib.lib().kk_op_synchronize(dev, None))

    def close(self) -> None:
        ts, self.tensors = self.tensors, []
        if ts:
            L = _lib._lib
            for t in reversed(ts):
                L.kk_tensor_destroy(t)
        if self._buf is not None:
            if len(_free_bufs) < 8:
                _free_bufs.append(self._buf)
            self._buf = None

    def __enter__(self) -> "Call":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def tensor_info(t: int) -> _lib.Tensor:
    return _lib.Tensor.from_address(t)


def reshape2d(call: Call, t: int, name: str) -> int:
    """A [rows, n] view of an N-D kk_tensor (rows = the product of the leading
    dimensions) without a copy; a view that would need one is the library's
    KK_ERR_INVALID_ARGUMENT naming the dimensions."""
    if t is None:
        return t
    s = _lib.Tensor.from_address(t)
    if s.ndim == 2:
        return t
    if s.ndim < 2:
        return t  # the entry point names the rank
    n = s.shape[s.ndim - 1]
    rows = 1
    for i in range(s.ndim - 1):
        rows *= s.shape[i]
    out = c_void_p()
    st = _lib.lib().kk_tensor_reshape(t, 2, (c_int64 * 2)(rows, n), byref(out))
    if st:
        raise _lib.error_from_last(st)
    call.tensors.append(out.value)
    return out.value


def shape_of(x: Any) -> Tuple[int, ...]:
    if isinstance(x, Reinterpreted):
        s = tuple(x.base.shape)
        if x.code == E2M1 and s:
            s = s[:-1] + (s[-1] * 2,)
        return s
    s = tuple(x.shape)
    if s and str(getattr(x, "dtype", "")) == "torch.float4_e2m1fn_x2":
        s = s[:-1] + (s[-1] * 2,)  # packed pairs
    return s


def dtype_of(x: Any) -> int:
    """The KernelKit dtype code of array x (raw uint8 stays uint8)."""
    if isinstance(x, Reinterpreted):
        return x.code
    kind = _kind_of(x)
    if kind == NUMPY:
        c = _numpy_codes().get(x.dtype)
    elif kind == TORCH:
        c = _torch_codes().get(x.dtype)
        if c is not None and c < 0:
            c = E2M1
    else:
        c = None
        try:
            c = dtype_code(getattr(x, "dtype", None))
        except Exception:
            c = None
    if c is None:
        raise _errors.UnsupportedError(f"dtype {getattr(x, 'dtype', '?')} is not supported")
    return c

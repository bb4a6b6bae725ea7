"""The kernelkit.Error hierarchy: one class per kk_status code of
include/kernelkit/status.h, in the same tree (src/core/status.c), so that
``except kernelkit.DeviceError`` catches every device error as
``kk_status_is(code, KK_ERR_DEVICE)`` does in C.

Every exception raised for a failed C call carries the library's own detail of
the failure (``kk_last_error()``): ``message`` (the whole line, also ``str(e)``),
``function``, ``argument``, ``value``, ``expected``, ``cuda_error``, and
``status`` (the code) and ``status_name`` ("KK_ERR_INVALID_ARGUMENT").
Checks made in Python before any C call (an object that is not an array, an
array type the package does not know) raise the same classes with a message
of their own.

Two classes also derive from a builtin, so generic Python code can catch them:
InvalidArgumentError is a ValueError, OutOfMemoryError a MemoryError.
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Type

__all__ = [
    "Error",
    "DeviceError",
    "CudaUnavailableError",
    "DeviceFailureError",
    "KernelLaunchError",
    "InvalidComputeCapabilityError",
    "InvalidArchitectureError",
    "MemoryManagerError",
    "AllocationError",
    "OutOfMemoryError",
    "ConfigError",
    "InvalidArgumentError",
    "UnsupportedError",
    "QuantizationError",
    "AttentionError",
    "ModelOptimizationError",
    "FileIOError",
    "InternalError",
]


class Error(Exception):
    """Root of every KernelKit error (KK_ERR_BACKEND and all below it)."""

    status: int = 1
    status_name: str = "KK_ERR_BACKEND"

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        status_name: Optional[str] = None,
        function: str = "",
        argument: str = "",
        value: str = "",
        expected: str = "",
        cuda_error: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name
        self.function = function
        self.argument = argument
        self.value = value
        self.expected = expected
        self.cuda_error = cuda_error

    def __str__(self) -> str:
        return self.message


class DeviceError(Error):
    """KK_ERR_DEVICE: a device problem."""

    status, status_name = 100, "KK_ERR_DEVICE"


class CudaUnavailableError(DeviceError):
    """KK_ERR_CUDA_UNAVAILABLE: no driver, no GPU, or a build without CUDA."""

    status, status_name = 101, "KK_ERR_CUDA_UNAVAILABLE"


class DeviceFailureError(DeviceError):
    """KK_ERR_DEVICE_FAILURE: a CUDA call on a present device failed."""

    status, status_name = 102, "KK_ERR_DEVICE_FAILURE"


class KernelLaunchError(DeviceError):
    """KK_ERR_KERNEL_LAUNCH: a kernel failed to launch or to run."""

    status, status_name = 103, "KK_ERR_KERNEL_LAUNCH"


class InvalidComputeCapabilityError(DeviceError):
    """KK_ERR_INVALID_COMPUTE_CAPABILITY: the device is too old for what was asked."""

    status, status_name = 104, "KK_ERR_INVALID_COMPUTE_CAPABILITY"


class InvalidArchitectureError(DeviceError):
    """KK_ERR_INVALID_ARCHITECTURE: unknown or mismatched GPU architecture."""

    status, status_name = 105, "KK_ERR_INVALID_ARCHITECTURE"


class MemoryManagerError(Error):
    """KK_ERR_MEMORY: a memory error (host or device)."""

    status, status_name = 200, "KK_ERR_MEMORY"


class AllocationError(MemoryManagerError):
    """KK_ERR_ALLOCATION: an allocation failed."""

    status, status_name = 201, "KK_ERR_ALLOCATION"


class OutOfMemoryError(AllocationError, builtins.MemoryError):
    """KK_ERR_OUT_OF_MEMORY (also a builtin MemoryError)."""

    status, status_name = 202, "KK_ERR_OUT_OF_MEMORY"


class ConfigError(Error):
    """KK_ERR_CONFIG: a bad configuration value or file."""

    status, status_name = 300, "KK_ERR_CONFIG"


class InvalidArgumentError(Error, ValueError):
    """KK_ERR_INVALID_ARGUMENT (also a ValueError): a bad tensor, shape, dtype or option."""

    status, status_name = 400, "KK_ERR_INVALID_ARGUMENT"


class UnsupportedError(Error):
    """KK_ERR_UNSUPPORTED: a valid request this build or device cannot do."""

    status, status_name = 500, "KK_ERR_UNSUPPORTED"


class QuantizationError(Error):
    """KK_ERR_QUANTIZATION: FP8/NVFP4 scaling or conversion failure (inf/NaN input)."""

    status, status_name = 600, "KK_ERR_QUANTIZATION"


class AttentionError(Error):
    """KK_ERR_ATTENTION: an attention-specific failure."""

    status, status_name = 700, "KK_ERR_ATTENTION"


class ModelOptimizationError(Error):
    """KK_ERR_MODEL_OPTIMIZATION."""

    status, status_name = 800, "KK_ERR_MODEL_OPTIMIZATION"


class FileIOError(Error):
    """KK_ERR_IO: a file could not be opened, read or written."""

    status, status_name = 900, "KK_ERR_IO"


class InternalError(Error):
    """KK_ERR_INTERNAL: a bug in KernelKit: please report it."""

    status, status_name = 1000, "KK_ERR_INTERNAL"


BY_STATUS: Dict[int, Type[Error]] = {
    cls.status: cls
    for cls in (
        Error,
        DeviceError,
        CudaUnavailableError,
        DeviceFailureError,
        KernelLaunchError,
        InvalidComputeCapabilityError,
        InvalidArchitectureError,
        MemoryManagerError,
        AllocationError,
        OutOfMemoryError,
        ConfigError,
        InvalidArgumentError,
        UnsupportedError,
        QuantizationError,
        AttentionError,
        ModelOptimizationError,
        FileIOError,
        InternalError,
    )
}


def class_for(status: int, parent_of=None) -> Type[Error]:
    """The class of a status code: its own, else its nearest ancestor's (asked of
    the library through ``parent_of``, kk_status_parent), else Error."""
    seen = 0
    code = status
    while code and seen < 16:
        cls = BY_STATUS.get(code)
        if cls is not None:
            return cls
        if parent_of is None:
            break
        code = parent_of(code)
        seen += 1
    return Error

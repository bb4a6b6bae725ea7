"""KernelKit from Python: the C library's kernels called on NumPy, PyTorch,
CuPy and JAX arrays without copies.

    import numpy as np, kernelkit
    q = np.random.randn(1, 8, 128, 64).astype(np.float32)
    o = kernelkit.attention(q, q, q, causal=True)      # a new numpy array
    kernelkit.rmsnorm(x, w, 1e-6, out=y)               # written into y

The kernels and all their logic are the C library's (libkernelkit, loaded with
ctypes: no extension module, nothing built against a particular torch); this
package only hands it the arrays' memory. See docs/python.md.

  ops        gemm, linear, swiglu, silu_mul, attention, attention_varlen,
             nvfp4_gemv, nvfp4_gemm, rmsnorm, add_rmsnorm, rmsnorm_fp8,
             layernorm, softmax, rope, rope_kv_append, fp8_gemm, convert,
             quantize, dequantize
  harness    info(), check(op, params), bench(op, params), synchronize()
  errors     kernelkit.Error and its subclasses (one per kk_status code)
  arrays     reinterpret(x, dtype), set_array_path("auto" | "dlpack")
  torch      kernelkit.torch: torch.library custom ops (torch.compile, CUDA
             graphs) and the "kernelkit" attention of Hugging Face transformers
"""

from ._errors import (
    AllocationError,
    AttentionError,
    ConfigError,
    CudaUnavailableError,
    DeviceError,
    DeviceFailureError,
    Error,
    FileIOError,
    InternalError,
    InvalidArchitectureError,
    InvalidArgumentError,
    InvalidComputeCapabilityError,
    KernelLaunchError,
    MemoryManagerError,
    ModelOptimizationError,
    OutOfMemoryError,
    QuantizationError,
    UnsupportedError,
)
from ._lib import cli_path, library_path
from ._tensors import KKArray, get_array_path, reinterpret, set_array_path
from .harness import bench, check, info, synchronize, version
from .ops import (
    add_rmsnorm,
    attention,
    attention_varlen,
    convert,
    dequantize,
    fp8_gemm,
    gemm,
    layernorm,
    linear,
    nvfp4_gemm,
    nvfp4_gemv,
    quantize,
    rmsnorm,
    rmsnorm_fp8,
    rope,
    rope_kv_append,
    silu_mul,
    softmax,
    swiglu,
)



def __getattr__(name: str):
    if name == "__version__":  # the library's own (kk_version), read when asked
        return version()
    raise AttributeError(f"module 'kernelkit' has no attribute {name!r}")


__all__ = [
    "Error", "DeviceError", "CudaUnavailableError", "DeviceFailureError", "KernelLaunchError",
    "InvalidComputeCapabilityError", "InvalidArchitectureError", "MemoryManagerError",
    "AllocationError", "OutOfMemoryError", "ConfigError", "InvalidArgumentError",
    "UnsupportedError", "QuantizationError", "AttentionError", "ModelOptimizationError",
    "FileIOError", "InternalError",
    "gemm", "linear", "swiglu", "silu_mul", "attention", "attention_varlen", "nvfp4_gemv",
    "nvfp4_gemm", "rmsnorm", "add_rmsnorm", "rmsnorm_fp8", "layernorm", "softmax", "rope",
    "rope_kv_append", "fp8_gemm", "convert", "quantize", "dequantize",
    "info", "check", "bench", "synchronize", "version",
    "reinterpret", "set_array_path", "get_array_path", "KKArray",
    "library_path", "cli_path",
]

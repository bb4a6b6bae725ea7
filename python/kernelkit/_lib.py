"""Loads libkernelkit with ctypes and declares the C functions and structs the
package calls.

Where the library is looked for, first found wins:
  1. the path in the environment variable KERNELKIT_LIBRARY (a build tree's
     build/libkernelkit.so: the tests run against a build without installing);
  2. next to the package: kernelkit/lib/libkernelkit.so (what ``pip install .``
     puts in the wheel), then kernelkit/libkernelkit.so.
The ``kernelkit`` CLI is looked for the same way (KERNELKIT_CLI, kernelkit/bin/,
then next to the library, as in a build tree).

Every ctypes.Structure here mirrors a C struct of include/kernelkit/*.h field
for field; python/tests/test_layout.py compiles a C program that prints the
sizes and offsets and compares them with these.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (
    POINTER,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint,
    c_uint64,
    c_void_p,
)
from typing import Optional

from . import _errors

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB_NAMES = ("libkernelkit.so", "libkernelkit.so.0", "libkernelkit.dylib")

MAX_DIMS = 8  # KK_TENSOR_MAX_DIMS
OP_MAX_PARAMS = 24
OP_MAX_LISTS = 2
OP_LIST_MAX = 64
OP_MAX_TENSORS = 12


def library_path() -> str:
    """The path of the libkernelkit this package loads (see the module doc)."""
    env = os.environ.get("KERNELKIT_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise _errors.FileIOError(
                f"KERNELKIT_LIBRARY = {env!r}: no such file (expected the path of "
                "libkernelkit.so, e.g. build/libkernelkit.so)"
            )
        return env
    for sub in ("lib", "lib64", ""):
        for name in _LIB_NAMES:
            p = os.path.join(_HERE, sub, name)
            if os.path.exists(p):
                return p
    raise _errors.FileIOError(
        "libkernelkit.so not found next to the kernelkit package "
        f"({os.path.join(_HERE, 'lib')}): install the package with 'pip install .' "
        "from the repository root, or set KERNELKIT_LIBRARY to a built "
        "build/libkernelkit.so"
    )


def cli_path() -> Optional[str]:
    """The packaged ``kernelkit`` executable, or None when there is none."""
    env = os.environ.get("KERNELKIT_CLI")
    if env:
        return env
    cands = [os.path.join(_HERE, "bin", "kernelkit")]
    try:
        libdir = os.path.dirname(os.path.abspath(library_path()))
        cands += [os.path.join(libdir, "kernelkit"), os.path.join(libdir, "..", "bin", "kernelkit")]
    except _errors.Error:
        pass
    for p in cands:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.normpath(p)
    return None


# ---- structs (mirrors of the C headers) ----


class ErrorInfo(ctypes.Structure):  # kk_error_info (status.h)
    _fields_ = [
        ("status", c_int),
        ("function", c_char_p),
        ("argument", c_char_p),
        ("value", c_char_p),
        ("expected", c_char_p),
        ("cuda_error", c_char_p),
        ("message", c_char_p),
    ]


class Tensor(ctypes.Structure):  # kk_tensor (tensor.h): read-only fields
    _fields_ = [
        ("dtype", c_int),
        ("ndim", c_int),
        ("shape", c_int64 * MAX_DIMS),
        ("strides", c_int64 * MAX_DIMS),
        ("data", c_void_p),
        ("device_kind", c_int),
        ("device_index", c_int),
        ("device", c_char * 16),
        ("storage", c_void_p),
    ]


class AttentionOptions(ctypes.Structure):  # kk_attention_options (ops.h)
    _fields_ = [
        ("causal", c_int),
        ("window_left", c_int64),
        ("window_right", c_int64),
        ("scale", c_double),
        ("dropout", c_double),
        ("seed", c_uint64),
        ("offset", c_uint64),
    ]


class RopeOptions(ctypes.Structure):  # kk_rope_options (ops.h)
    _fields_ = [
        ("rotary_dim", c_int64),
        ("offset", c_int64),
        ("theta", c_double),
        ("style", c_int),
        ("positions", c_void_p),  # const kk_tensor *
        ("scaling", c_int),
        ("factor", c_double),
        ("low_freq_factor", c_double),
        ("high_freq_factor", c_double),
        ("original_max_position", c_int64),
    ]


class QTensor(ctypes.Structure):  # kk_qtensor (quant.h)
    _fields_ = [
        ("layout", c_int),
        ("data", c_void_p),
        ("scales", c_void_p),
        ("global_scale", c_void_p),
    ]


class QuantOptions(ctypes.Structure):  # kk_quant_options (quant.h)
    _fields_ = [("history", c_void_p), ("amax", POINTER(c_float))]


class DeviceInfo(ctypes.Structure):  # kk_device_info (device.h)
    _fields_ = [
        ("backend", c_int),
        ("index", c_int),
        ("spec", c_char * 32),
        ("name", c_char * 256),
        ("cc_major", c_int),
        ("cc_minor", c_int),
        ("arch", c_int),
        ("sm_count", c_int),
        ("mem_total_bytes", c_uint64),
        ("mem_free_bytes", c_uint64),
        ("l2_bytes", c_uint64),
        ("smem_per_block_optin_bytes", c_uint64),
        ("sm_clock_max_mhz", c_int),
        ("mem_clock_max_mhz", c_int),
        ("mem_bus_width_bits", c_int),
        ("mem_bandwidth_theoretical_gbs", c_double),
        ("device_count_in_backend", c_int),
        ("pci_bus_id", c_char * 32),
        ("cpu_cores", c_int),
        ("cpu_threads", c_int),
        ("cpu_features", c_uint),
        ("host_mem_total_bytes", c_uint64),
        ("host_mem_available_bytes", c_uint64),
    ]


class GpuTelemetry(ctypes.Structure):  # kk_gpu_telemetry (device.h)
    _fields_ = [
        ("available", c_int),
        ("unavailable_reason", c_char * 192),
        ("temperature_c", c_double),
        ("sm_clock_mhz", c_int),
        ("sm_clock_max_mhz", c_int),
        ("mem_clock_mhz", c_int),
        ("power_w", c_double),
        ("power_limit_w", c_double),
        ("utilization_gpu_pct", c_int),
        ("utilization_mem_pct", c_int),
        ("throttle_reasons", c_uint64),
        ("throttle_text", c_char * 256),
        ("driver_version", c_char * 64),
    ]


class OpParam(ctypes.Structure):  # kk_op_param (op.h)
    _fields_ = [
        ("name", c_char_p),
        ("kind", c_int),
        ("min", c_int64),
        ("max", c_int64),
        ("multiple", c_int64),
        ("fmin", c_double),
        ("fmax", c_double),
        ("def_", c_int64),
        ("fdef", c_double),
        ("choices", POINTER(c_char_p)),
        ("help", c_char_p),
        ("def_list", c_char_p),
    ]


class OpParams(ctypes.Structure):  # kk_op_params (op.h)
    _fields_ = [
        ("op", c_void_p),
        ("i", c_int64 * OP_MAX_PARAMS),
        ("f", c_double * OP_MAX_PARAMS),
        ("lists", (c_int32 * OP_LIST_MAX) * OP_MAX_LISTS),
    ]


class OpTensor(ctypes.Structure):  # kk_op_tensor (op.h)
    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_int),
        ("ndim", c_int),
        ("shape", c_int64 * MAX_DIMS),
        ("numel", c_int64),
        ("is_output", c_int),
    ]


class Tolerance(ctypes.Structure):  # kk_tolerance (op.h)
    _fields_ = [
        ("dtype", c_int),
        ("atol", c_double),
        ("rtol", c_double),
        ("l2", c_double),
        ("criteria", c_uint),
        ("flags", c_uint),
        ("acc", c_double),
    ]


class CheckResult(ctypes.Structure):  # kk_check_result (check.h)
    _fields_ = [
        ("pass_", c_int),
        ("count", c_size_t),
        ("max_abs_err", c_double),
        ("max_abs_index", c_size_t),
        ("max_rel_err", c_double),
        ("rel_l2_err", c_double),
        ("bad_count", c_size_t),
        ("nonfinite_count", c_size_t),
        ("first_bad", c_int64),
        ("first_bad_out", c_double),
        ("first_bad_ref", c_double),
        ("tol", Tolerance),
    ]


CASE_NAME_MAX = 96


class Case(ctypes.Structure):  # kk_case (cases.h)
    _fields_ = [
        ("name", c_char * CASE_NAME_MAX),
        ("params", OpParams),
        ("seed", c_uint64),
        ("dist", c_int),
        ("no_bench", c_int),
    ]


class CaseOutput(ctypes.Structure):  # kk_case_output (cases.h)
    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_int),
        ("check", CheckResult),
        ("unwritten", c_size_t),
        ("first_unwritten", c_int64),
    ]


class CaseResult(ctypes.Structure):  # kk_case_result (cases.h)
    _fields_ = [
        ("status", c_int),
        ("noutputs", c_int),
        ("outputs", CaseOutput * OP_MAX_TENSORS),
        ("max_abs_err", c_double),
        ("max_rel_err", c_double),
        ("rel_l2_err", c_double),
        ("first_bad_tensor", c_char_p),
        ("first_bad", c_int64),
        ("first_bad_out", c_double),
        ("first_bad_ref", c_double),
        ("kernel_runs", c_int),
        ("kernel_ms", c_double),
        ("reference_ms", c_double),
        ("message", c_char * 512),
    ]


class RunOptions(ctypes.Structure):  # kk_run_options (cases.h)
    _fields_ = [
        ("device", c_char_p),
        ("max_ref_flops", c_double),
        ("check_memory", c_int),
    ]


class BenchOptions(ctypes.Structure):  # kk_bench_options (bench.h)
    _fields_ = [
        ("rse_target", c_double),
        ("min_samples", c_size_t),
        ("max_samples", c_size_t),
        ("min_time_s", c_double),
        ("time_budget_s", c_double),
        ("warmup_runs", c_size_t),
        ("warmup_time_s", c_double),
        ("batch", c_size_t),
        ("batch_threshold_s", c_double),
        ("batch_target_s", c_double),
        ("cold", c_int),
        ("flush_bytes", c_uint64),
        ("flush_mode", c_int),
        ("throttle_fraction", c_double),
        ("pin_cpu", c_int),
        ("check_every", c_size_t),
        ("rse_resamples", c_int),
        ("seed", c_uint64),
        ("blocking_kernel", c_int),
        ("stream", c_void_p),
    ]


class BenchMeasurement(ctypes.Structure):  # kk_bench_measurement (bench.h)
    _fields_ = [
        ("device", c_char * 32),
        ("samples", POINTER(c_double)),
        ("n", c_size_t),
        ("warmup_runs", c_size_t),
        ("dropped_throttle", c_size_t),
        ("batch", c_size_t),
        ("cold", c_int),
        ("flush_bytes", c_uint64),
        ("flush_mode", c_int),
        ("blocking_kernel", c_int),
        ("stop", c_int),
        ("final_rse", c_double),
        ("sampled_time_s", c_double),
        ("wall_time_s", c_double),
        ("pinned_cpu", c_int),
        ("throttle_detection", c_int),
        ("throttle_note", c_char * 192),
        ("sm_clock_min_mhz", c_int),
        ("sm_clock_mean_mhz", c_double),
        ("telemetry_start", GpuTelemetry),
        ("telemetry_end", GpuTelemetry),
        ("options", BenchOptions),
    ]


class BenchSwitch(ctypes.Structure):  # kk_bench_switch (bench.h)
    _fields_ = [("name", c_char * 64), ("value", c_char * 128)]


BENCH_MAX_SWITCHES = 32


class BenchEnvironment(ctypes.Structure):  # kk_bench_environment (bench.h)
    _fields_ = [
        ("device", c_char * 32),
        ("device_index", c_int),
        ("device_name", c_char * 256),
        ("cc_major", c_int),
        ("cc_minor", c_int),
        ("sm_count", c_int),
        ("l2_bytes", c_uint64),
        ("mem_total_bytes", c_uint64),
        ("sm_clock_max_mhz", c_int),
        ("mem_clock_max_mhz", c_int),
        ("pci_bus_id", c_char * 32),
        ("driver_version", c_char * 64),
        ("cuda_runtime_version", c_int),
        ("cuda_driver_version", c_int),
        ("cpu_model", c_char * 256),
        ("cpu_governor", c_char * 64),
        ("cpu_simd", c_char * 256),
        ("cpu_isa", c_char * 32),
        ("hostname", c_char * 256),
        ("os", c_char * 512),
        ("kk_version", c_char * 32),
        ("git_commit", c_char * 64),
        ("build_cuda", c_char * 32),
        ("timestamp_utc", c_char * 32),
        ("argc", c_int),
        ("argv", POINTER(c_char_p)),
        ("nswitches", c_int),
        ("switches", BenchSwitch * BENCH_MAX_SWITCHES),
    ]


class BenchSpec(ctypes.Structure):  # kk_bench_spec (bench.h), params left out
    _fields_ = [
        ("name", c_char_p),
        ("op", c_char_p),
        ("dtype", c_char_p),
        ("params", c_void_p),
        ("nparams", c_int),
        ("flops", c_double),
        ("bytes", c_double),
        ("threshold", c_double),
        ("resamples", c_int),
        ("seed", c_uint64),
    ]


# ---- the library ----

T = c_void_p  # kk_tensor *
ST = c_int  # kk_status
PT = POINTER(c_void_p)

# name: (restype, argtypes)
_PROTOTYPES = {
    # status.h
    "kk_status_str": (c_char_p, [c_int]),
    "kk_status_name": (c_char_p, [c_int]),
    "kk_status_parent": (c_int, [c_int]),
    "kk_last_error": (POINTER(ErrorInfo), []),
    "kk_last_error_message": (c_char_p, []),
    "kk_clear_error": (None, []),
    # kernelkit.h
    "kk_version": (c_char_p, []),
    "kk_git_commit": (c_char_p, []),
    "kk_built_with_cuda": (c_int, []),
    # dtype.h
    "kk_dtype_name": (c_char_p, [c_int]),
    "kk_dtype_parse": (ST, [c_char_p, POINTER(c_int)]),
    "kk_dtype_bits": (c_int, [c_int]),
    # tensor.h
    "kk_tensor_create": (ST, [c_char_p, c_int, c_int, POINTER(c_int64), PT]),
    "kk_tensor_wrap": (ST, [c_char_p, c_int, c_int, POINTER(c_int64), POINTER(c_int64), c_void_p, PT]),
    "kk_tensor_destroy": (None, [T]),
    "kk_tensor_reshape": (ST, [T, c_int, POINTER(c_int64), PT]),
    "kk_tensor_nbytes": (c_size_t, [T]),
    # memory.h
    "kk_mem_set_limit": (ST, [c_char_p, c_uint64]),
    "kk_mem_empty_cache": (ST, [c_char_p]),
    # device.h
    "kk_backend_name": (c_char_p, [c_int]),
    "kk_backend_available": (c_int, [c_int]),
    "kk_backend_unavailable_reason": (c_char_p, [c_int]),
    "kk_backend_device_count": (c_int, [c_int]),
    "kk_device_get_info": (ST, [c_char_p, POINTER(DeviceInfo)]),
    "kk_device_parse": (ST, [c_char_p, POINTER(c_int), POINTER(c_int)]),
    "kk_device_best": (c_char_p, []),
    "kk_cpu_features_str": (c_char_p, [c_uint, c_char_p, c_size_t]),
    "kk_cpu_isa": (c_char_p, []),
    "kk_cpu_num_threads": (c_int, []),
    "kk_cpu_set_num_threads": (ST, [c_int]),
    "kk_arch_name": (c_char_p, [c_int]),
    # ops.h
    "kk_gemm": (ST, [T, T, T, c_void_p]),
    "kk_linear": (ST, [T, T, T, T, c_int, c_void_p]),
    "kk_linear_residual": (ST, [T, T, T, T, T, c_int, c_void_p]),
    "kk_swiglu": (ST, [T, T, T, T, T, T, c_void_p]),
    "kk_silu_mul": (ST, [T, T, T, c_void_p]),
    "kk_attention": (ST, [T, T, T, T, T, POINTER(AttentionOptions), c_void_p]),
    "kk_attention_varlen": (
        ST,
        [T, T, T, T, T, c_int64, c_int64, T, T, POINTER(AttentionOptions), c_void_p],
    ),
    "kk_nvfp4_gemv": (ST, [T, T, T, T, T, T, T, c_void_p]),
    "kk_rmsnorm": (ST, [T, T, T, c_double, c_void_p]),
    "kk_add_rmsnorm": (ST, [T, T, T, T, T, c_double, c_void_p]),
    "kk_rmsnorm_fp8": (ST, [T, T, T, T, c_double, c_int, c_void_p]),
    "kk_layernorm": (ST, [T, T, T, T, c_double, c_void_p]),
    "kk_softmax": (ST, [T, T, c_double, c_void_p]),
    "kk_softmax_masked": (ST, [T, T, c_double, c_int, c_int64, c_void_p]),
    "kk_rope": (ST, [T, T, POINTER(RopeOptions), c_void_p]),
    "kk_rope_kv_append": (ST, [T, T, T, T, T, T, T, POINTER(RopeOptions), c_void_p]),
    "kk_fp8_gemm": (ST, [T, T, T, T, T, c_void_p]),
    "kk_nvfp4_gemm": (ST, [T, T, T, T, T, c_void_p]),
    "kk_convert": (ST, [T, T, c_void_p]),
    # quant.h
    "kk_qtensor_scale_shape": (ST, [c_int, c_int, c_int, POINTER(c_int64), POINTER(c_int), POINTER(c_int64)]),
    "kk_quantize": (ST, [T, POINTER(QTensor), POINTER(QuantOptions)]),
    "kk_dequantize": (ST, [POINTER(QTensor), T]),
    # op.h
    "kk_op_count": (c_int, []),
    "kk_op_at": (c_void_p, [c_int]),
    "kk_op_find": (ST, [c_char_p, PT]),
    "kk_op_name": (c_char_p, [c_void_p]),
    "kk_op_summary": (c_char_p, [c_void_p]),
    "kk_op_backends_format": (ST, [c_void_p, c_char_p, c_size_t]),
    "kk_op_param_count": (c_int, [c_void_p]),
    "kk_op_param_at": (POINTER(OpParam), [c_void_p, c_int]),
    "kk_op_params_parse": (ST, [c_void_p, c_char_p, POINTER(OpParams)]),
    "kk_op_params_format": (ST, [POINTER(OpParams), c_char_p, c_size_t]),
    "kk_op_params_list": (c_int, [POINTER(OpParams), c_char_p, POINTER(POINTER(c_int32))]),
    "kk_op_tensors": (ST, [POINTER(OpParams), POINTER(OpTensor), POINTER(c_int)]),
    "kk_op_tolerance": (ST, [c_void_p, c_int, POINTER(Tolerance)]),
    "kk_op_flops": (c_double, [POINTER(OpParams)]),
    "kk_op_bytes": (c_double, [POINTER(OpParams)]),
    "kk_op_synchronize": (ST, [c_char_p, c_void_p]),
    # cases.h
    "kk_input_dist_parse": (ST, [c_char_p, POINTER(c_int)]),
    "kk_case_seed": (c_uint64, [c_uint64, c_char_p]),
    "kk_case_dtype": (c_int, [POINTER(OpParams)]),
    "kk_case_fill_inputs": (ST, [POINTER(OpParams), c_uint64, c_int, POINTER(c_void_p)]),
    "kk_case_fuzz": (ST, [c_void_p, c_uint64, c_int, c_int, c_void_p, POINTER(Case)]),
    "kk_suite_case_find": (ST, [c_char_p, c_uint64, c_int, POINTER(Case)]),
    "kk_case_run": (ST, [POINTER(Case), POINTER(RunOptions), POINTER(CaseResult)]),
    "kk_case_result_json": (ST, [POINTER(Case), POINTER(CaseResult), POINTER(c_void_p)]),
    "kk_run_kernel_host": (ST, [POINTER(OpParams), c_char_p, POINTER(c_void_p)]),
    "kk_run_reference_host": (ST, [POINTER(OpParams), POINTER(c_void_p)]),
    "kk_case_bench": (ST, [POINTER(Case), c_char_p, POINTER(BenchOptions), POINTER(BenchMeasurement)]),
    # bench.h
    "kk_bench_options_default": (None, [POINTER(BenchOptions)]),
    "kk_bench_flush_parse": (ST, [c_char_p, POINTER(c_int)]),
    "kk_bench_measurement_free": (None, [POINTER(BenchMeasurement)]),
    "kk_bench_environment_capture": (
        ST,
        [c_char_p, c_int, POINTER(c_char_p), c_void_p, c_int, POINTER(BenchEnvironment)],
    ),
    "kk_bench_environment_free": (None, [POINTER(BenchEnvironment)]),
    "kk_bench_results_create": (ST, [POINTER(BenchEnvironment), PT]),
    "kk_bench_results_free": (None, [c_void_p]),
    "kk_bench_results_add": (ST, [c_void_p, POINTER(BenchSpec), POINTER(BenchMeasurement)]),
    "kk_bench_results_to_json": (ST, [c_void_p, POINTER(c_void_p)]),
}

# The DLPack API (include/kernelkit/dlpack.h): optional, so that a library
# built before it still loads; the DLPack path then raises UnsupportedError.
_OPTIONAL = {
    "kk_tensor_from_dlpack": (ST, [c_void_p, c_int, PT]),
    "kk_tensor_from_dlpack_versioned": (ST, [c_void_p, c_int, PT]),
    "kk_tensor_to_dlpack": (ST, [T, PT]),
    "kk_tensor_to_dlpack_versioned": (ST, [T, PT]),
}


class _Lib:
    """The loaded library: every function of _PROTOTYPES as an attribute."""

    def __init__(self) -> None:
        self.path = library_path()
        try:
            self.dll = ctypes.CDLL(self.path)
        except OSError as e:
            raise _errors.FileIOError(f"cannot load {self.path}: {e}") from None
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(self.dll, name)
            fn.restype = res
            fn.argtypes = args
            setattr(self, name, fn)
        self.has_dlpack = True
        for name, (res, args) in _OPTIONAL.items():
            fn = getattr(self.dll, name, None)
            if fn is None:
                self.has_dlpack = False
                setattr(self, name, None)
                continue
            fn.restype = res
            fn.argtypes = args
            setattr(self, name, fn)
        libc = ctypes.CDLL(None)
        self.free = libc.free
        self.free.restype = None
        self.free.argtypes = [c_void_p]


_lib: Optional[_Lib] = None


def lib() -> _Lib:
    """The library, loaded on first use."""
    global _lib
    if _lib is None:
        _lib = _Lib()
    return _lib


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def error_from_last(status: int) -> _errors.Error:
    """The exception for a failed call: its class from the status, its message
    and fields from kk_last_error() (what the library recorded)."""
    L = lib()
    info = L.kk_last_error()
    cls = _errors.class_for(status, L.kk_status_parent)
    if info and info.contents.status == status:
        e = info.contents
        msg = _s(e.message) or _s(L.kk_status_str(status))
        return cls(
            msg,
            status=status,
            status_name=_s(L.kk_status_name(status)),
            function=_s(e.function),
            argument=_s(e.argument),
            value=_s(e.value),
            expected=_s(e.expected),
            cuda_error=_s(e.cuda_error),
        )
    msg = _s(L.kk_last_error_message()) or _s(L.kk_status_str(status))
    return cls(msg, status=status, status_name=_s(L.kk_status_name(status)))


def check(status: int) -> None:
    """Raise the kernelkit.Error of a non-zero kk_status."""
    if status:
        raise error_from_last(status)


def take_string(ptr: int) -> str:
    """A malloc'd C string as str; frees it."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib().free(ptr)

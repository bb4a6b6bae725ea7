"""The library's devices and its harness, from Python: ``info()``, ``check()``
and ``bench()`` call the same C functions as ``kernelkit info``, ``kernelkit
check --params`` and ``kernelkit bench --op --params`` (kk_device_get_info,
kk_case_run, kk_case_bench), and return what the CLI would write as JSON, as
dicts. The op registry (``ops()``, ``op_tensors()``) and the host-buffer
runners (``run_kernel()``, ``run_reference()``) let a test feed the C harness
the very inputs a Python call used.
"""

from __future__ import annotations

import ctypes
import json
from ctypes import byref, c_int, c_void_p
from typing import Any, Dict, List, Optional, Sequence

from . import _errors, _lib
from ._tensors import DTYPE_BITS, DTYPE_NAMES, numpy_dtype

__all__ = [
    "info",
    "version",
    "check",
    "bench",
    "ops",
    "op_params",
    "op_tensors",
    "tolerance",
    "fill_inputs",
    "run_kernel",
    "run_reference",
    "synchronize",
]


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def version() -> str:
    """The library's version ("0.1.0")."""
    return _s(_lib.lib().kk_version())


def info() -> Dict[str, Any]:
    """The build, the backends and every device, as ``kernelkit info --json``
    has them (kk_device_get_info and the backend queries)."""
    L = _lib.lib()
    out: Dict[str, Any] = {
        "build": {
            "version": _s(L.kk_version()),
            "commit": _s(L.kk_git_commit()),
            "cuda": bool(L.kk_built_with_cuda()),
            "library": L.path,
            "dlpack": bool(L.has_dlpack),
        },
        "backends": [],
        "devices": [],
        "best_device": _s(L.kk_device_best()),
    }
    specs = ["cpu"]
    for kind in (0, 1):
        n = L.kk_backend_device_count(kind)
        out["backends"].append(
            {
                "name": _s(L.kk_backend_name(kind)),
                "available": bool(L.kk_backend_available(kind)),
                "unavailable_reason": _s(L.kk_backend_unavailable_reason(kind)),
                "devices": n,
            }
        )
        if kind == 1:
            specs += [f"cuda:{i}" for i in range(n)]
    for spec in specs:
        d = _lib.DeviceInfo()
        _lib.check(L.kk_device_get_info(spec.encode(), byref(d)))
        dev: Dict[str, Any] = {
            "device": _s(d.spec),
            "backend": _s(L.kk_backend_name(d.backend)),
            "index": d.index,
            "name": _s(d.name),
        }
        if d.backend == 0:
            buf = ctypes.create_string_buffer(256)
            dev.update(
                cores=d.cpu_cores,
                threads=d.cpu_threads,
                simd=_s(L.kk_cpu_features_str(d.cpu_features, buf, 256)),
                kernel_isa=_s(L.kk_cpu_isa()),
                kernel_threads=L.kk_cpu_num_threads(),
                memory_total_bytes=d.host_mem_total_bytes,
                memory_available_bytes=d.host_mem_available_bytes,
            )
        else:
            dev.update(
                compute_capability=f"{d.cc_major}.{d.cc_minor}",
                arch=_s(L.kk_arch_name(d.arch)),
                sm_count=d.sm_count,
                memory_total_bytes=d.mem_total_bytes,
                memory_free_bytes=d.mem_free_bytes,
                l2_bytes=d.l2_bytes,
                smem_per_block_optin_bytes=d.smem_per_block_optin_bytes,
                sm_clock_max_mhz=d.sm_clock_max_mhz,
                mem_clock_max_mhz=d.mem_clock_max_mhz,
                mem_bus_width_bits=d.mem_bus_width_bits,
                mem_bandwidth_theoretical_gbs=d.mem_bandwidth_theoretical_gbs,
                pci_bus_id=_s(d.pci_bus_id),
            )
        out["devices"].append(dev)
    return out


def synchronize(device: str = "cuda:0", stream: Any = None) -> None:
    """Wait for the work KernelKit enqueued on `stream` of `device`
    (kk_op_synchronize; "cpu" returns at once)."""
    from ._tensors import stream_value

    _lib.check(_lib.lib().kk_op_synchronize(device.encode(), stream_value(stream)))


# ---- the op registry ----


def _op(name: str) -> int:
    L = _lib.lib()
    p = c_void_p()
    _lib.check(L.kk_op_find(name.encode(), byref(p)))
    return p.value


def ops() -> List[str]:
    """The names of every op in the registry."""
    L = _lib.lib()
    return [_s(L.kk_op_name(L.kk_op_at(i))) for i in range(L.kk_op_count())]


def _params(op: str, params: str) -> _lib.OpParams:
    p = _lib.OpParams()
    _lib.check(_lib.lib().kk_op_params_parse(_op(op), (params or "").encode(), byref(p)))
    return p


def op_params(op: str, params: str = "") -> Dict[str, Any]:
    """Every parameter of `op` with `params` ("M=5 N=7 K=33") applied over the
    defaults, validated: {name: value} (dtypes and enums as names, lists as
    lists)."""
    L = _lib.lib()
    p = _params(op, params)
    out: Dict[str, Any] = {}
    nlist = 0
    for k in range(L.kk_op_param_count(p.op)):
        d = L.kk_op_param_at(p.op, k).contents
        name = _s(d.name)
        if d.kind == 1:  # FLOAT
            out[name] = p.f[k]
        elif d.kind == 2:  # BOOL
            out[name] = bool(p.i[k])
        elif d.kind == 3:  # ENUM
            out[name] = _s(d.choices[p.i[k]])
        elif d.kind == 4:  # DTYPE
            out[name] = DTYPE_NAMES[p.i[k]]
        elif d.kind == 5:  # LIST
            out[name] = list(p.lists[nlist][: p.i[k]])
            nlist += 1
        else:
            out[name] = p.i[k]
    return out


def op_tensors(op: str, params: str = "") -> List[Dict[str, Any]]:
    """The tensors `op` takes for `params`, in the harness's order (inputs, then
    outputs): [{name, dtype, shape, numel, is_output}]."""
    L = _lib.lib()
    p = _params(op, params)
    arr = (_lib.OpTensor * _lib.OP_MAX_TENSORS)()
    n = c_int()
    _lib.check(L.kk_op_tensors(byref(p), arr, byref(n)))
    return [
        {
            "name": _s(t.name),
            "dtype": DTYPE_NAMES[t.dtype],
            "shape": tuple(t.shape[: t.ndim]),
            "numel": t.numel,
            "is_output": bool(t.is_output),
        }
        for t in arr[: n.value]
    ]


def tolerance(op: str, dtype: str) -> Dict[str, Any]:
    """The checker's tolerance for an output of `dtype` of `op`: atol, rtol, l2,
    acc (times the op's per-element magnitude; 0 when it has none), and which of
    them decide (elementwise, l2)."""
    from ._tensors import dtype_code

    t = _lib.Tolerance()
    _lib.check(_lib.lib().kk_op_tolerance(_op(op), dtype_code(dtype), byref(t)))
    return {
        "atol": t.atol,
        "rtol": t.rtol,
        "l2": t.l2,
        "acc": t.acc,
        "elementwise": bool(t.criteria & 1),
        "l2_criterion": bool(t.criteria & 2),
        "allow_nonfinite": bool(t.flags & 1),
    }


def _host_array(t: Dict[str, Any]):
    import numpy as np

    if t["dtype"] == "e2m1":
        return np.zeros((t["numel"] + 1) // 2, dtype=np.uint8)
    code = DTYPE_NAMES.index(t["dtype"])
    try:
        dt = numpy_dtype(code)
    except _errors.UnsupportedError:  # bf16 / fp8 without ml_dtypes: the raw bits
        dt = np.uint16 if DTYPE_BITS[code] == 16 else np.uint8
    return np.zeros(t["shape"], dtype=dt)


def _buffers(arrays: Sequence[Any]):
    ptrs = (c_void_p * len(arrays))()
    for i, a in enumerate(arrays):
        if not a.flags.c_contiguous:
            raise _errors.InvalidArgumentError(f"host buffer {i}: expected a C-contiguous array")
        ptrs[i] = a.__array_interface__["data"][0]
    return ptrs


def fill_inputs(op: str, params: str = "", seed: int = 1, dist: str = "full") -> Dict[str, Any]:
    """The inputs the harness draws for (op, params, seed, dist)
    (kk_case_fill_inputs), as NumPy arrays by name: contiguous, of the op's
    dtypes (ml_dtypes for bf16/fp8 when installed, else raw uint16/uint8
    bits; e2m1 as flat packed bytes)."""
    L = _lib.lib()
    p = _params(op, params)
    ts = [t for t in op_tensors(op, params) if not t["is_output"]]
    arrays = [_host_array(t) for t in ts]
    d = c_int()
    _lib.check(L.kk_input_dist_parse(dist.encode(), byref(d)))
    _lib.check(L.kk_case_fill_inputs(byref(p), seed, d.value, _buffers(arrays)))
    return {t["name"]: a for t, a in zip(ts, arrays)}


def _run_host(op: str, params: str, inputs: Dict[str, Any], device: Optional[str]):
    L = _lib.lib()
    p = _params(op, params)
    ts = op_tensors(op, params)
    arrays = []
    outs = {}
    for t in ts:
        if t["is_output"]:
            a = _host_array(t)
            outs[t["name"]] = a
        else:
            a = inputs[t["name"]]
        arrays.append(a)
    bufs = _buffers(arrays)
    if device is None:
        _lib.check(L.kk_run_reference_host(byref(p), bufs))
    else:
        _lib.check(L.kk_run_kernel_host(byref(p), device.encode(), bufs))
    return outs


def run_kernel(op: str, params: str, inputs: Dict[str, Any], device: str = "cpu") -> Dict[str, Any]:
    """Run `op`'s kernel for `device`'s backend on host inputs (contiguous NumPy
    arrays by name, as fill_inputs gives them) through the harness
    (kk_run_kernel_host: copied in, outputs poisoned, copied back); returns the
    outputs by name."""
    return _run_host(op, params, inputs, device)


def run_reference(op: str, params: str, inputs: Dict[str, Any]) -> Dict[str, Any]:
    """The op's float64 reference on the same inputs, each output rounded to its
    dtype (kk_run_reference_host)."""
    return _run_host(op, params, inputs, None)


# ---- check and bench ----


def _case(op: str, params: str, seed: Optional[int], dist: str, name: Optional[str]) -> _lib.Case:
    L = _lib.lib()
    c = _lib.Case()
    c.params = _params(op, params)
    c.name = (name or f"params/{op}").encode()[: _lib.CASE_NAME_MAX - 1]
    c.seed = L.kk_case_seed(1, c.name) if seed is None else int(seed)
    d = c_int()
    _lib.check(L.kk_input_dist_parse(dist.encode(), byref(d)))
    c.dist = d.value
    return c


def check(
    op: str,
    params: str = "",
    *,
    device: Optional[str] = None,
    seed: int = 1,
    dist: str = "full",
    max_ref_gflop: float = 64.0,
    fuzz: int = 0,
) -> Any:
    """Run one correctness case of `op` as ``kernelkit check --op OP --params
    PARAMS --seed SEED --json`` does (kk_case_run): the inputs drawn from the
    seed, the kernel of `device`'s backend (None: the best device) on poisoned
    outputs, checked against the float64 reference with the op's tolerance.
    Returns the case's JSON object as a dict ("status": "PASS", "FAIL",
    "ERROR" or "SKIP", the errors, the outputs' checks, "message"). With fuzz=N,
    `params` is ignored and N random valid cases (kk_case_fuzz, run seed
    `seed`) are run: a list of such dicts."""
    L = _lib.lib()
    opt = _lib.RunOptions(device=device.encode() if device else None,
                          max_ref_flops=float(max_ref_gflop) * 1e9, check_memory=1)
    cases = []
    if fuzz:
        d = c_int()
        _lib.check(L.kk_input_dist_parse(dist.encode(), byref(d)))
        o = _op(op)
        for i in range(int(fuzz)):
            c = _lib.Case()
            _lib.check(L.kk_case_fuzz(o, seed, i, d.value, None, byref(c)))
            cases.append(c)
    else:
        cases.append(_case(op, params, seed, dist, None))
    results = []
    for c in cases:
        r = _lib.CaseResult()
        _lib.check(L.kk_case_run(byref(c), byref(opt), byref(r)))
        js = c_void_p()
        _lib.check(L.kk_case_result_json(byref(c), byref(r), byref(js)))
        results.append(json.loads(_lib.take_string(js.value)))
    return results if fuzz else results[0]


def bench(
    op: str,
    params: str = "",
    *,
    device: Optional[str] = None,
    quick: bool = False,
    time_budget: Optional[float] = None,
    cold: bool = False,
    flush: str = "write",
) -> Dict[str, Any]:
    """Time `op`'s kernel on `device` (None: the best device) for `params`, as
    ``kernelkit bench --op OP --params PARAMS`` does (kk_case_bench with the
    adaptive sampler, the same options as the CLI's --quick, --time-budget,
    --cold and --flush). Returns the results document (schema
    "kernelkit.bench/1", docs/harness-results.md) as a dict: "environment" and
    "benchmarks" (one entry: samples, summary with the median and its CI,
    GB/s, TFLOP/s)."""
    L = _lib.lib()
    dev = (device or _s(L.kk_device_best())).encode()
    name = f"{op}/{params}".strip("/") if params else op
    c = _case(op, params, None, "full", name)
    bo = _lib.BenchOptions()
    L.kk_bench_options_default(byref(bo))
    if quick:
        bo.rse_target = 0.05
        bo.min_samples = 5
        bo.min_time_s = 0.05
        bo.warmup_time_s = 0.01
        bo.time_budget_s = 1.0
    if cold:
        bo.cold = 1
        bo.batch = 1
    fm = c_int()
    _lib.check(L.kk_bench_flush_parse(flush.encode(), byref(fm)))
    bo.flush_mode = fm.value
    if time_budget is not None and time_budget > 0:
        bo.time_budget_s = time_budget
        bo.min_time_s = min(bo.min_time_s, time_budget / 2)
        bo.warmup_time_s = min(bo.warmup_time_s, time_budget / 4)
    m = _lib.BenchMeasurement()
    _lib.check(L.kk_case_bench(byref(c), dev, byref(bo), byref(m)))
    env = _lib.BenchEnvironment()
    results = c_void_p()
    try:
        argv = (ctypes.c_char_p * 3)(b"python", b"kernelkit.bench", None)
        _lib.check(L.kk_bench_environment_capture(dev, 2, argv, None, 0, byref(env)))
        try:
            _lib.check(L.kk_bench_results_create(byref(env), byref(results)))
        finally:
            L.kk_bench_environment_free(byref(env))
        spec = _lib.BenchSpec(
            name=name.encode(),
            op=op.encode(),
            dtype=_s(L.kk_dtype_name(L.kk_case_dtype(byref(c.params)))).encode(),
            params=None,
            nparams=0,
            flops=L.kk_op_flops(byref(c.params)),
            bytes=L.kk_op_bytes(byref(c.params)),
        )
        _lib.check(L.kk_bench_results_add(results, byref(spec), byref(m)))
        js = c_void_p()
        _lib.check(L.kk_bench_results_to_json(results, byref(js)))
        doc = json.loads(_lib.take_string(js.value))
    finally:
        L.kk_bench_measurement_free(byref(m))
        if results.value:
            L.kk_bench_results_free(results)
    for b in doc.get("benchmarks", []):
        b["params"] = op_params(op, params)
    return doc

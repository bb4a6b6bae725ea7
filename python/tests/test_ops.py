"""Every op of kernelkit.ops on NumPy arrays against the C library itself.

For each case (op, params): the harness draws the inputs (kernelkit.harness.
fill_inputs = kk_case_fill_inputs), the C harness runs the op's CPU kernel on
them (run_kernel = kk_run_kernel_host: its own contiguous copies, poisoned
outputs), and the Python function runs on the same arrays. The outputs must be
the same bits; and both must be within the op's tolerance of the float64
reference (run_reference = kk_run_reference_host). Each case runs twice: arrays
read from their pointers ("auto") and through __dlpack__ ("dlpack"), where
bf16/fp8 inputs, which NumPy cannot export, go as raw bits wrapped in
kernelkit.reinterpret."""

import numpy as np
import pytest

import kernelkit
from kernelkit import harness
from conftest import HAVE_ML_DTYPES

CASES = [
    ("gemm", "M=5 N=7 K=33 dtype=f32"),
    ("gemm", "M=16 N=24 K=40 dtype=bf16"),
    ("gemm", "M=3 N=9 K=17 dtype=f16"),
    ("linear", "M=5 N=12 K=33 dtype=f32 activation=gelu_tanh"),
    ("linear", "M=6 N=10 K=20 dtype=f16 activation=silu"),
    ("linear", "M=6 N=10 K=20 dtype=f32 residual=1 bias=0 activation=relu"),
    ("linear", "M=4 N=16 K=32 dtype=bf16 activation=swiglu"),
    ("linear", "M=3 N=8 K=16 dtype=f32 activation=swiglu bias=0"),
    ("attention", "B=2 Hq=4 Hkv=2 Sq=9 Sk=17 D=32 causal=1 dtype=f32 lse=1"),
    ("attention", "B=1 Hq=2 Hkv=1 Sq=16 Sk=16 D=64 dtype=bf16 window_left=4 window_right=2"),
    ("attention", "B=1 Hq=2 Hkv=2 Sq=8 Sk=8 D=16 dtype=f16 dropout=0.2 seed=7 scale=0.3"),
    ("attention_varlen", "Hq=4 Hkv=2 D=32 seqlens_q=5:0:9 seqlens_k=7:3:9 causal=1 dtype=f32 lse=1"),
    ("attention_varlen", "Hq=2 Hkv=2 D=16 seqlens_q=4:6 seqlens_k=4:6 dtype=bf16"),
    ("nvfp4_gemv", "M=16 K=128 L=2"),
    ("nvfp4_gemv", "M=130 K=64 L=1 global=1 scale_layout=blocked"),
    ("nvfp4_gemm", "M=3 N=16 K=128 global=1"),
    ("fp8_gemm", "M=5 N=7 K=32 a_dtype=fp8_e4m3 b_dtype=fp8_e5m2 c_dtype=f32"),
    ("fp8_gemm", "M=8 N=8 K=16 c_dtype=bf16"),
    ("convert", "n=37 src=f32 dst=bf16"),
    ("convert", "n=64 src=bf16 dst=fp8_e4m3"),
    ("convert", "n=40 src=f32 dst=e2m1"),
    ("convert", "n=40 src=e2m1 dst=f32"),
    ("convert", "n=33 src=fp8_e5m2 dst=f16"),
    ("convert", "n=50 src=f64 dst=f32"),
    ("rmsnorm", "rows=7 n=65 dtype=f32"),
    ("rmsnorm", "rows=4 n=128 dtype=bf16"),
    ("add_rmsnorm", "rows=5 n=48 dtype=bf16"),
    ("add_rmsnorm", "rows=3 n=33 dtype=f32"),
    ("rmsnorm_fp8", "rows=4 n=256 group=128 dtype=bf16"),
    ("rmsnorm_fp8", "rows=3 n=64 group=0 dtype=f32"),
    ("layernorm", "rows=6 n=50 dtype=f32"),
    ("layernorm", "rows=4 n=64 affine=0 dtype=f16"),
    ("softmax", "rows=6 n=33 scale=0.5 dtype=f32"),
    ("softmax", "rows=8 n=16 causal=1 sq=4 dtype=bf16"),
    ("rope", "B=2 H=2 S=5 D=16 dtype=f32 offset=3"),
    ("rope", "B=1 H=2 S=4 D=32 rotary_dim=16 style=gptj dtype=bf16 positions=1"),
    ("rope", "B=1 H=1 S=6 D=64 scaling=llama3 theta=500000 dtype=f32"),
    ("silu_mul", "M=4 N=20 packed=1 dtype=f32"),
    ("silu_mul", "M=3 N=16 packed=0 dtype=bf16"),
    ("rope_kv_append", "B=2 Hq=4 Hkv=2 S=2 S_max=8 D=16 dtype=f32"),
    ("rope_kv_append", "B=1 Hq=2 Hkv=1 S=1 S_max=4 D=32 dtype=bf16 style=gptj"),
]


def _opt(p, name, default=None):
    v = p.get(name, default)
    return v


def _call(op, p, a):
    """The kernelkit function of `op` on the inputs `a` (by the harness's
    names), with the scalar parameters of `p`; returns the outputs by name."""
    k = kernelkit
    if op == "gemm":
        return {"c": k.gemm(a["a"], a["b"])}
    if op == "linear":
        if p["activation"] == "swiglu":
            return {"y": k.swiglu(a["x"], a["w_gate"], a["w_up"], a.get("bias_gate"),
                                  a.get("bias_up"))}
        return {"y": k.linear(a["x"], a["w"], a.get("bias"), activation=p["activation"],
                              residual=a.get("residual"))}
    if op == "attention":
        kw = dict(causal=p["causal"], window_left=p["window_left"],
                  window_right=p["window_right"], scale=p["scale"] or None,
                  dropout=p["dropout"], seed=p["seed"], offset=p["offset"])
        if p["lse"]:
            o, lse = k.attention(a["q"], a["k"], a["v"], return_lse=True, **kw)
            return {"o": o, "lse": lse}
        return {"o": k.attention(a["q"], a["k"], a["v"], **kw)}
    if op == "attention_varlen":
        mq = max(p["seqlens_q"] + [1])
        mk = max(p["seqlens_k"] + [1])
        kw = dict(causal=p["causal"], window_left=p["window_left"],
                  window_right=p["window_right"], scale=p["scale"] or None,
                  dropout=p["dropout"], seed=p["seed"], offset=p["offset"])
        r = k.attention_varlen(a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["cu_seqlens_k"], mq,
                               mk, return_lse=p["lse"], **kw)
        return {"o": r[0], "lse": r[1]} if p["lse"] else {"o": r}
    if op == "nvfp4_gemv":
        return {"c": k.nvfp4_gemv(a["a"], a["sa"], a["b"], a["sb"], a.get("ga"), a.get("gb"))}
    if op == "nvfp4_gemm":
        return {"y": k.nvfp4_gemm(a["x"], a["w"], a["sw"], a.get("gw"))}
    if op == "fp8_gemm":
        return {"c": k.fp8_gemm(a["a"], a["b"], a["scale_a"], a["scale_b"],
                                out_dtype=p["c_dtype"])}
    if op == "convert":
        return {"y": k.convert(a["x"], p["dst"])}
    if op == "rmsnorm":
        return {"y": k.rmsnorm(a["x"], a["w"], p["eps"])}
    if op == "add_rmsnorm":
        y, h = k.add_rmsnorm(a["x"], a["residual"], a["w"], p["eps"])
        return {"y": y, "h": h}
    if op == "rmsnorm_fp8":
        q, s = k.rmsnorm_fp8(a["x"], a["w"], p["eps"], p["group"])
        return {"q": q, "scales": s}
    if op == "layernorm":
        return {"y": k.layernorm(a["x"], a.get("w"), a.get("b"), p["eps"])}
    if op == "softmax":
        return {"y": k.softmax(a["x"], p["scale"], causal=p["causal"], sq=p["sq"])}
    if op == "rope":
        return {"y": k.rope(a["x"], rotary_dim=p["rotary_dim"], offset=p["offset"],
                            theta=p["theta"], style=p["style"], positions=a.get("pos"),
                            scaling=p["scaling"], factor=p["factor"],
                            low_freq_factor=p["low_freq_factor"],
                            high_freq_factor=p["high_freq_factor"],
                            original_max_position=p["original_max_position"])}
    if op == "silu_mul":
        if p["packed"]:
            return {"y": k.silu_mul(a["gu"])}
        return {"y": k.silu_mul(a["g"], a["u"])}
    if op == "rope_kv_append":
        kc = a["k_cache_in"].copy()
        vc = a["v_cache_in"].copy()
        qo = k.rope_kv_append(a["q"], a["k"], a["v"], a["cache_seqlens"], _raw(kc), _raw(vc),
                              rotary_dim=p["rotary_dim"], theta=p["theta"], style=p["style"],
                              scaling=p["scaling"], factor=p["factor"],
                              low_freq_factor=p["low_freq_factor"],
                              high_freq_factor=p["high_freq_factor"],
                              original_max_position=p["original_max_position"])
        return {"q_out": qo, "k_cache": kc, "v_cache": vc}
    raise AssertionError(op)


_DLPACK = {"on": False}


def _raw(x):
    """What the test hands kernelkit for array x: itself, or, in the DLPack run
    for an ml_dtypes array, its raw bits in kernelkit.reinterpret."""
    if not _DLPACK["on"] or x.dtype.kind not in "V" and x.dtype.name not in (
            "bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return x
    raw = x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)
    name = {"bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}[x.dtype.name]
    return kernelkit.reinterpret(raw, name)


def _inputs_for_python(op, params, inputs):
    tensors = {t["name"]: t for t in harness.op_tensors(op, params)}
    out = {}
    for name, arr in inputs.items():
        t = tensors[name]
        if t["dtype"] == "e2m1":
            shape = t["shape"]
            packed = arr.reshape(shape[:-1] + (shape[-1] // 2,)) if len(shape) > 1 else arr
            out[name] = kernelkit.reinterpret(packed, "e2m1") if op == "convert" else packed
        elif name in ("k_cache_in", "v_cache_in"):
            out[name] = arr  # copied by _call, then passed through _raw
        else:
            out[name] = _raw(arr)
    return out


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(-1)


def _close(out, ref, tol):
    o = np.asarray(out).astype(np.float64).reshape(-1)
    r = np.asarray(ref).astype(np.float64).reshape(-1)
    both = ~np.isfinite(r)
    if both.any():
        assert tol["allow_nonfinite"]
        assert np.array_equal(np.isnan(o[both]), np.isnan(r[both]))
        fin = ~np.isnan(r) & both
        assert np.array_equal(o[fin], r[fin])
    m = np.isfinite(r)
    o, r = o[m], r[m]
    assert np.isfinite(o).all()
    if tol["elementwise"]:
        bad = np.abs(o - r) > tol["atol"] + tol["rtol"] * np.abs(r)
        assert not bad.any(), f"{bad.sum()} of {bad.size} outside atol/rtol"
    if tol["l2_criterion"]:
        nr = np.linalg.norm(r)
        if nr > 0:
            assert np.linalg.norm(o - r) / nr <= tol["l2"]


@pytest.mark.parametrize("op,params", CASES, ids=[f"{o}[{p}]" for o, p in CASES])
def test_op_matches_library(op, params, array_path):
    tensors = harness.op_tensors(op, params)
    if not HAVE_ML_DTYPES and any(t["dtype"] in ("bf16", "fp8_e4m3", "fp8_e5m2")
                                  for t in tensors):
        pytest.skip("bf16/fp8 NumPy arrays need ml_dtypes")
    p = harness.op_params(op, params)
    inputs = harness.fill_inputs(op, params, seed=11)
    before = {k: v.copy() for k, v in inputs.items()}
    expected = harness.run_kernel(op, params, inputs, "cpu")
    reference = harness.run_reference(op, params, inputs)
    _DLPACK["on"] = array_path == "dlpack"
    try:
        got = _call(op, p, _inputs_for_python(op, params, inputs))
    finally:
        _DLPACK["on"] = False
    # the inputs are untouched
    for k, v in inputs.items():
        assert np.array_equal(_bits(v), _bits(before[k])), f"input {k} changed"
    by_name = {t["name"]: t for t in tensors}
    assert set(got) == set(expected)
    for name, arr in got.items():
        t = by_name[name]
        assert isinstance(arr, np.ndarray)
        if t["dtype"] == "e2m1":
            assert np.array_equal(_bits(arr), _bits(expected[name]))
            continue
        assert arr.shape == t["shape"], name
        assert arr.dtype == expected[name].dtype, name
        # the same kernel on the same inputs: the same bits
        assert np.array_equal(_bits(arr), _bits(expected[name])), f"{name}: not the C result"
        _close(arr, reference[name], harness.tolerance(op, t["dtype"]))

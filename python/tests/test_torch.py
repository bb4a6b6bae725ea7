"""torch tensors (CPU here; the same tests on CUDA tensors on a GPU machine):
the ops, zero copies by data_ptr, both array paths, the torch.library custom
ops (opcheck, fake tensors, torch.compile). Skipped when torch is absent."""

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kernelkit  # noqa: E402
import kernelkit.torch  # noqa: E402,F401  (registers torch.ops.kernelkit.*)
from conftest import Capture  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _sdpa_ref(q, k, v, causal):
    hq, hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hkv, 1)
    v = v.repeat_interleave(hq // hkv, 1)
    mask = None
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                            attn_mask=mask)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_matches_sdpa(device, array_path):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 9, 64, generator=g).to(device)
    k = torch.randn(2, 2, 13, 64, generator=g).to(device)
    v = torch.randn(2, 2, 13, 64, generator=g).to(device)
    o = kernelkit.attention(q, k, v, causal=True)
    assert isinstance(o, torch.Tensor) and o.device == q.device and o.dtype == q.dtype
    torch.testing.assert_close(o, _sdpa_ref(q, k, v, True), atol=2e-5, rtol=2e-5)
    for dt, tol in ((torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
        o = kernelkit.attention(q.to(dt), k.to(dt), v.to(dt), causal=True)
        assert o.dtype == dt
        torch.testing.assert_close(o.float(), _sdpa_ref(q, k, v, True), atol=tol, rtol=tol)


def test_zero_copy_pointers(array_path):
    """The C function sees the tensors' own data_ptr (views included)."""
    buf = torch.randn(2, 9, 4, 32)
    q = buf.transpose(1, 2)  # [B,H,S,D] view of [B,S,H,D]
    with Capture("kk_attention", (0, 1, 2, 3)) as cap:
        o = kernelkit.attention(q, q, q)
    tq, _, _, to = cap.calls[0]
    assert tq["data"] == buf.data_ptr()
    assert tq["strides"] == tuple(q.stride())
    assert to["data"] == o.data_ptr()
    out = torch.empty_like(q)
    r = kernelkit.attention(q, q, q, out=out)
    assert r is out
    torch.testing.assert_close(out, o, atol=0, rtol=0)


def test_row_ops_and_linear_on_torch():
    x = torch.randn(2, 5, 64, dtype=torch.bfloat16)
    w = torch.randn(64, dtype=torch.bfloat16)
    y = kernelkit.rmsnorm(x, w, 1e-6)
    ref = torch.nn.functional.rms_norm(x.float(), (64,), w.float(), 1e-6)
    torch.testing.assert_close(y.float(), ref, atol=3e-2, rtol=2e-2)
    wl = torch.randn(24, 64)
    b = torch.randn(24)
    z = kernelkit.linear(x.float(), wl, b, activation="silu")
    torch.testing.assert_close(z, torch.nn.functional.silu(x.float() @ wl.T + b), atol=1e-4,
                               rtol=1e-4)
    x2 = torch.randn(2, 5, 256, dtype=torch.bfloat16)
    q8, s = kernelkit.rmsnorm_fp8(x2, torch.ones(256, dtype=torch.bfloat16), 1e-6, 128)
    assert q8.dtype == torch.float8_e4m3fn and q8.shape == x2.shape and s.shape == (2, 5, 2)


def test_torch_fp4_packed_dtype():
    """torch.float4_e2m1fn_x2 tensors are read as packed e2m1."""
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("no float4_e2m1fn_x2 in this torch")
    from kernelkit import harness

    params = "M=16 K=128 L=1"
    inp = harness.fill_inputs("nvfp4_gemv", params, seed=4)
    exp = harness.run_kernel("nvfp4_gemv", params, inp)
    a = torch.from_numpy(inp["a"].reshape(1, 16, 64)).view(torch.float4_e2m1fn_x2)
    b = torch.from_numpy(inp["b"].reshape(1, 1, 64))
    sa = torch.from_numpy(inp["sa"].view(np.uint8))
    sb = torch.from_numpy(inp["sb"].view(np.uint8))
    c = kernelkit.nvfp4_gemv(a, sa, b, sb)
    assert c.dtype == torch.float16
    assert np.array_equal(c.numpy().view(np.uint16), exp["c"].view(np.uint16))


@pytest.mark.parametrize("device", DEVICES)
def test_custom_ops_opcheck(device):
    q = torch.randn(1, 2, 5, 32, device=device)
    k = torch.randn(1, 1, 7, 32, device=device)
    torch.library.opcheck(torch.ops.kernelkit.attention.default, (q, k, k, True))
    x = torch.randn(3, 32, device=device)
    w = torch.randn(32, device=device)
    torch.library.opcheck(torch.ops.kernelkit.rmsnorm.default, (x, w, 1e-6))
    torch.library.opcheck(torch.ops.kernelkit.linear.default,
                          (x, torch.randn(8, 32, device=device), None, "gelu_tanh", None))
    torch.library.opcheck(torch.ops.kernelkit.add_rmsnorm.default, (x, x.clone(), w, 1e-6))
    torch.library.opcheck(torch.ops.kernelkit.softmax.default, (x, 0.5, False, 0))
    torch.library.opcheck(torch.ops.kernelkit.rope.default,
                          (torch.randn(1, 2, 3, 16, device=device),))
    torch.library.opcheck(torch.ops.kernelkit.convert.default, (x, torch.bfloat16))


def test_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 8, 5, 64)
        k = torch.empty(2, 2, 9, 64)
        o = torch.ops.kernelkit.attention(q, k, k, True)
        assert o.shape == (2, 8, 5, 64)
        o, lse = torch.ops.kernelkit.attention_lse(q, k, k)
        assert lse.shape == (2, 8, 5) and lse.dtype == torch.float32
        y = torch.ops.kernelkit.swiglu(torch.empty(3, 4, 16), torch.empty(32, 16),
                                       torch.empty(32, 16))
        assert y.shape == (3, 4, 32)


COMPILE_MODES = [("cpu", "default")] + (
    [("cuda", "default"), ("cuda", "reduce-overhead")] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device,mode", COMPILE_MODES)
def test_torch_compile(device, mode):
    """fullgraph torch.compile around the custom ops; on CUDA also
    mode="reduce-overhead", whose CUDA graphs replay the ops' launches. On
    CUDA in bf16: a call the CUDA kernels decline (f32 attention) runs on the
    CPU through host copies, which no CUDA graph can capture."""

    def f(x, w, q, k, v):
        h = torch.ops.kernelkit.rmsnorm(x, w, 1e-6) * 2
        return h, torch.ops.kernelkit.attention(q, k, v, True) + 1

    dt = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(4, 32, device=device, dtype=dt)
    w = torch.randn(32, device=device, dtype=dt)
    q = torch.randn(1, 2, 6, 32, device=device, dtype=dt)
    k = torch.randn(1, 2, 6, 32, device=device, dtype=dt)
    cf = torch.compile(f, fullgraph=True, mode=mode)
    for _ in range(3):  # reduce-overhead records its graph on a later call
        h, o = cf(x, w, q, k, k)
        h0, o0 = f(x, w, q, k, k)
        torch.testing.assert_close(h, h0)
        torch.testing.assert_close(o, o0)
        x.copy_(torch.randn_like(x))
        q.copy_(torch.randn_like(q))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_stream_and_graph():  # GPU machine only (not run on the CPU here)
    q = torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    from kernelkit import _fastpath

    fn = _fastpath._c_attention or _fastpath._c_function()
    streams = []

    def spy(*args):
        streams.append(args[6])
        return fn(*args)

    _fastpath._c_attention = spy
    try:
        with torch.cuda.stream(s):
            o = kernelkit.attention(q, q, q, causal=True)
            o2 = kernelkit.attention(q, q, q, causal=True, stream=torch.cuda.current_stream())
    finally:
        _fastpath._c_attention = fn
    s.synchronize()
    torch.testing.assert_close(o.float(), _sdpa_ref(q, q, q, True), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(o2, o, atol=0, rtol=0)
    assert streams == [s.cuda_stream]  # the fast path ran on torch's current stream
    # a CUDA graph of the custom op
    static_q = q.clone()
    g = torch.cuda.CUDAGraph()
    torch.ops.kernelkit.attention(static_q, static_q, static_q, True)  # warm up
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        static_o = torch.ops.kernelkit.attention(static_q, static_q, static_q, True)
    static_q.copy_(torch.randn_like(static_q))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_o.float(), _sdpa_ref(static_q, static_q, static_q, True),
                               atol=2e-2, rtol=2e-2)


def _descriptors(positions, call):
    """The raw kk_tensor bytes kk_attention receives at `positions` (through
    the general path's function or the fast path's)."""
    from kernelkit import _fastpath, _lib

    seen = []
    lib = _lib.lib()
    size = ctypes.sizeof(_lib.Tensor)
    slow_fn = lib.kk_attention
    fast_fn = _fastpath._c_attention or _fastpath._c_function()

    def spy(fn):
        def wrapper(*args):
            seen.append([ctypes.string_at(args[i], size) for i in positions])
            return fn(*args)

        return wrapper

    lib.kk_attention = spy(slow_fn)
    _fastpath._c_attention = spy(fast_fn)
    try:
        out = call()
    finally:
        lib.kk_attention = slow_fn
        _fastpath._c_attention = fast_fn
    return seen[0], out


@pytest.mark.parametrize("device", DEVICES)
def test_attention_fast_path_same_descriptors(device):
    """The torch fast path (_fastpath.attention) is taken for plain tensors and
    hands the C function the same q, k, v descriptors, byte for byte, as the
    general path; o's differs only in its data pointer; results equal."""
    from kernelkit import _fastpath

    g = torch.Generator().manual_seed(5)
    buf = torch.randn(2, 11, 4, 32, generator=g).to(device)
    q = buf.transpose(1, 2)  # a strided view
    k = torch.randn(2, 2, 7, 32, generator=g).to(device)
    v = torch.randn(2, 2, 7, 32, generator=g).to(device)
    taken = []
    real = _fastpath.attention

    def spy(*a):
        r = real(*a)
        taken.append(r is not None)
        return r

    _fastpath.attention = spy
    try:
        fast, o_fast = _descriptors((0, 1, 2, 3),
                                    lambda: kernelkit.attention(q, k, v, causal=True))
    finally:
        _fastpath.attention = real
    assert taken == [True]
    old = kernelkit.set_array_path("wrap")
    try:
        slow, o_slow = _descriptors((0, 1, 2, 3),
                                    lambda: kernelkit.attention(q, k, v, causal=True))
    finally:
        kernelkit.set_array_path(old)
    assert fast[:3] == slow[:3]
    data = _lib_tensor_field_offset("data")
    assert fast[3][:data] == slow[3][:data] and fast[3][data + 8:] == slow[3][data + 8:]
    if device == "cuda":
        torch.cuda.synchronize()
    torch.testing.assert_close(o_fast, o_slow, atol=0, rtol=0)


def _lib_tensor_field_offset(name):
    from kernelkit import _lib

    return getattr(_lib.Tensor, name).offset


def test_attention_fast_path_declines_to_general_errors():
    """What the fast path does not take goes to the general path, whose errors
    name the argument: a lazily negated view, mixed dtypes, float64."""
    from kernelkit import _fastpath

    q = torch.randn(1, 2, 3, 16)
    assert _fastpath.attention(torch._neg_view(q), q, q, None) is None
    assert _fastpath.attention(q, q.half(), q, None) is None
    assert _fastpath.attention(q.double(), q.double(), q.double(), None) is None
    assert _fastpath.attention(q[0], q[0], q[0], None) is None
    with pytest.raises(kernelkit.InvalidArgumentError, match="negated"):
        kernelkit.attention(torch._neg_view(q), q, q)
    with pytest.raises(kernelkit.Error, match="k"):
        kernelkit.attention(q, q.half(), q)
    with pytest.raises(kernelkit.Error, match="q"):
        kernelkit.attention(q[0], q[0], q[0])

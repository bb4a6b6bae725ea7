"""The ops, one function per typed C entry point of include/kernelkit/ops.h
(and kk_quantize / kk_dequantize of quant.h).

Every function takes arrays (NumPy, torch, CuPy, JAX or anything with
``__dlpack__``; see kernelkit._tensors for the rules), reads nothing but their
memory, and returns new arrays of the first argument's library, or writes the
``out=`` arrays given. Shapes, dtypes and options are checked by the C library,
whose errors are raised as kernelkit.Error subclasses with its own message
("attention: k: expected shape [2,4,300,64], got shape [2,4,300,32]").

Row ops (rmsnorm, layernorm, softmax, add_rmsnorm, rmsnorm_fp8, silu_mul) and the
matrix products (gemm, linear, swiglu) take N-D arrays too: the leading
dimensions are one [rows, n] view (kk_tensor_reshape), which needs no copy;
a layout that would need one is an InvalidArgumentError.

On CUDA a call enqueues its work on the stream (``stream=`` or the caller's
current stream, see docs/python.md) and returns without waiting.
"""

from __future__ import annotations

from ctypes import byref, c_int, c_int64
from typing import Any, Optional, Tuple, Union

from . import _errors, _fastpath, _lib
from ._tensors import (
    BF16,
    E2M1,
    E4M3,
    F16,
    F32,
    Call,
    dtype_code,
    dtype_of,
    reshape2d,
    shape_of,
)

Array = Any  # any array type the package takes (numpy.ndarray, torch.Tensor, ...)
Stream = Any  # None, an int cudaStream_t, a torch.cuda.Stream or a CuPy stream

__all__ = [
    "gemm",
    "linear",
    "swiglu",
    "silu_mul",
    "attention",
    "attention_varlen",
    "nvfp4_gemv",
    "nvfp4_gemm",
    "rmsnorm",
    "add_rmsnorm",
    "rmsnorm_fp8",
    "layernorm",
    "softmax",
    "rope",
    "rope_kv_append",
    "fp8_gemm",
    "convert",
    "quantize",
    "dequantize",
]

ACTIVATIONS = {
    None: 0,
    "none": 0,
    "relu": 1,
    "gelu": 2,
    "gelu_erf": 2,
    "gelu_tanh": 3,
    "silu": 4,
}
ROPE_STYLES = {"neox": 0, "gptj": 1}
ROPE_SCALINGS = {None: 0, "none": 0, "llama3": 1}
SCALE_LAYOUTS = {"per_tensor": 0, "1x128": 1, "128x128": 2, "nvfp4": 3, "nvfp4_blocked": 4}


def _choice(table: dict, value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value in table.values():
        return value
    try:
        return table[value.lower() if isinstance(value, str) else value]
    except (KeyError, TypeError):
        names = ", ".join(k for k in table if isinstance(k, str))
        raise _errors.InvalidArgumentError(f"{what} = {value!r}: expected one of {names}") from None


def _rows_shape(x: Array, n: int) -> Tuple[int, ...]:
    s = shape_of(x)
    return s[:-1] + (n,) if s else (n,)


def _lib_fn(name: str):
    return getattr(_lib._lib or _lib.lib(), name)


# ---- matrix products ----


def gemm(a: Array, b: Array, *, out: Optional[Array] = None, stream: Stream = None) -> Array:
    """c = a . b^T: a [M,K] (or [..., K]), b [N,K], c [M,N] ([..., N]); one
    dtype, f32, f16 or bf16; f32 accumulation (kk_gemm)."""
    with Call(stream) as c:
        ta = c.tensor(a, "a")
        tb = c.tensor(b, "b")
        n = shape_of(b)[0] if len(shape_of(b)) else 0
        res, tc = c.output(out, "c", _rows_shape(a, n), dtype_of(a))
        c.run(_lib_fn("kk_gemm"), reshape2d(c, ta, "a"), tb, reshape2d(c, tc, "c"), c.stream)
        return c.result(res)


def linear(
    x: Array,
    w: Array,
    bias: Optional[Array] = None,
    *,
    activation: Union[str, int, None] = "none",
    residual: Optional[Array] = None,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """y = act(x . w^T + bias) (+ residual): x [M,K] (or [..., K]), w [N,K], bias
    [N] or None, residual [M,N] or None (added after the activation, the
    o_proj/down_proj pattern; it may be ``out`` itself for y += ...); one dtype,
    f32, f16 or bf16. activation: "none", "relu", "gelu" (erf), "gelu_tanh",
    "silu" (kk_linear, kk_linear_residual)."""
    act = _choice(ACTIVATIONS, activation, "activation")
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tw = c.tensor(w, "w")
        tb = c.tensor(bias, "bias")
        tr = c.tensor(residual, "residual")
        n = shape_of(w)[0] if len(shape_of(w)) else 0
        res, ty = c.output(out, "y", _rows_shape(x, n), dtype_of(x))
        tx2 = reshape2d(c, tx, "x")
        ty2 = reshape2d(c, ty, "y")
        if residual is None:
            c.run(_lib_fn("kk_linear"), tx2, tw, tb, ty2, act, c.stream)
        else:
            c.run(_lib_fn("kk_linear_residual"), tx2, tw, tb, reshape2d(c, tr, "residual"), ty2,
                  act, c.stream)
        return c.result(res)


def swiglu(
    x: Array,
    w_gate: Array,
    w_up: Array,
    bias_gate: Optional[Array] = None,
    bias_up: Optional[Array] = None,
    *,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """y = silu(x . w_gate^T + bias_gate) * (x . w_up^T + bias_up) in one call:
    x [M,K] (or [..., K]), w_gate and w_up [N,K], biases [N] both or neither
    (kk_swiglu)."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tg = c.tensor(w_gate, "w_gate")
        tu = c.tensor(w_up, "w_up")
        tbg = c.tensor(bias_gate, "bias_gate")
        tbu = c.tensor(bias_up, "bias_up")
        n = shape_of(w_gate)[0] if len(shape_of(w_gate)) else 0
        res, ty = c.output(out, "y", _rows_shape(x, n), dtype_of(x))
        c.run(_lib_fn("kk_swiglu"), reshape2d(c, tx, "x"), tg, tu, tbg, tbu,
              reshape2d(c, ty, "y"), c.stream)
        return c.result(res)


def silu_mul(g: Array, u: Optional[Array] = None, *, out: Optional[Array] = None,
             stream: Stream = None) -> Array:
    """y = silu(g) * u: g, u, y [M,N] (or [..., N]); or u None and g the packed
    [M,2N] output of a fused gate_up projection (kk_silu_mul)."""
    with Call(stream) as c:
        tg = c.tensor(g, "g")
        tu = c.tensor(u, "u")
        gs = shape_of(g)
        n = (gs[-1] if u is not None else gs[-1] // 2) if gs else 0
        res, ty = c.output(out, "y", _rows_shape(g, n), dtype_of(g))
        c.run(_lib_fn("kk_silu_mul"), reshape2d(c, tg, "g"), reshape2d(c, tu, "u"),
              reshape2d(c, ty, "y"), c.stream)
        return c.result(res)


# ---- attention ----


_attn_opts: dict = {}


def _attn_opt(causal, window_left, window_right, scale, dropout, seed, offset):
    key = (causal, window_left, window_right, scale, dropout, seed, offset)
    try:
        return _attn_opts[key]  # read-only for the C call: shared
    except (KeyError, TypeError):
        pass
    opt = _make_attn_opt(causal, window_left, window_right, scale, dropout, seed, offset)
    if len(_attn_opts) < 256:
        try:
            _attn_opts[key] = opt
        except TypeError:
            pass
    return opt


def _make_attn_opt(causal, window_left, window_right, scale, dropout, seed, offset):
    return _lib.AttentionOptions(
        causal=1 if causal else 0,
        window_left=int(window_left),
        window_right=int(window_right),
        scale=0.0 if scale is None else float(scale),
        dropout=float(dropout),
        seed=int(seed) & 0xFFFFFFFFFFFFFFFF,
        offset=int(offset) & 0xFFFFFFFFFFFFFFFF,
    )


def attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    scale: Optional[float] = None,
    dropout: float = 0.0,
    seed: int = 0,
    offset: int = 0,
    return_lse: bool = False,
    out: Optional[Array] = None,
    lse: Optional[Array] = None,
    stream: Stream = None,
) -> Union[Array, Tuple[Array, Array]]:
    """o = softmax(scale . q k^T + mask) v per head (kk_attention).

    q [B,Hq,Sq,D], k and v [B,Hkv,Sk,D] (Hq a multiple of Hkv: GQA, MQA), o
    [B,Hq,Sq,D]; one dtype, f32, f16 or bf16; D 16..256. Strided views are
    taken as they are (the last dimension contiguous), e.g. q of a [B,S,H,D]
    buffer transposed to [B,H,S,D]. causal: query i sees keys j <= i + Sk - Sq
    (bottom-right aligned); window_left/right: -1 = unlimited; scale None =
    1/sqrt(D); dropout with Philox (seed, offset). With return_lse (or lse=
    given) returns (o, lse), lse f32 [B,Hq,Sq] the natural log-sum-exp of each
    row's scaled scores."""
    opt = _attn_opt(causal, window_left, window_right, scale, dropout, seed, offset)
    tt = _fastpath._tensor_type or _fastpath.tensor_type()
    if (tt is not None and type(q) is tt and type(k) is tt and type(v) is tt and out is None
            and lse is None and not return_lse and stream is None):
        o = _fastpath.attention(q, k, v, opt)
        if o is not None:
            return o
    with Call(stream) as c:
        tq = c.tensor(q, "q")
        tk = c.tensor(k, "k")
        tv = c.tensor(v, "v")
        qs = shape_of(q)
        vs = shape_of(v)
        res, to = c.output(out, "o", qs[:-1] + vs[-1:] if qs and vs else qs, dtype_of(q))
        want_lse = return_lse or lse is not None
        lres, tl = (None, None)
        if want_lse:
            lres, tl = c.output(lse, "lse", qs[:3], F32)
        c.run(_lib_fn("kk_attention"), tq, tk, tv, to, tl, byref(opt), c.stream)
        if want_lse:
            return c.result(res), c.result(lres)
        return c.result(res)


def attention_varlen(
    q: Array,
    k: Array,
    v: Array,
    cu_seqlens_q: Array,
    cu_seqlens_k: Array,
    max_seqlen_q: int,
    max_seqlen_k: int,
    *,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    scale: Optional[float] = None,
    dropout: float = 0.0,
    seed: int = 0,
    offset: int = 0,
    return_lse: bool = False,
    out: Optional[Array] = None,
    lse: Optional[Array] = None,
    stream: Stream = None,
) -> Union[Array, Tuple[Array, Array]]:
    """Attention over a packed batch of variable-length sequences, as
    FlashAttention's flash_attn_varlen_func (kk_attention_varlen).

    q, o [total_q,Hq,D] (FlashAttention's layout) or [1,Hq,total_q,D]; k, v
    [total_k,Hkv,D] or [1,Hkv,total_k,D]; cu_seqlens_q/k int32 [nseq+1] on the
    same device; max_seqlen_q/k at least the longest sequence. lse (with
    return_lse) f32 [Hq,total_q] or [1,Hq,total_q]."""
    opt = _attn_opt(causal, window_left, window_right, scale, dropout, seed, offset)
    with Call(stream) as c:
        tq = c.tensor(q, "q")
        tk = c.tensor(k, "k")
        tv = c.tensor(v, "v")
        tcq = c.tensor(cu_seqlens_q, "cu_seqlens_q")
        tck = c.tensor(cu_seqlens_k, "cu_seqlens_k")
        qs = shape_of(q)
        res, to = c.output(out, "o", qs, dtype_of(q))
        want_lse = return_lse or lse is not None
        lres, tl = (None, None)
        if want_lse:
            lshape = (qs[1], qs[0]) if len(qs) == 3 else qs[:3]
            lres, tl = c.output(lse, "lse", lshape, F32)
        c.run(_lib_fn("kk_attention_varlen"), tq, tk, tv, tcq, tck, int(max_seqlen_q),
              int(max_seqlen_k), to, tl, byref(opt), c.stream)
        if want_lse:
            return c.result(res), c.result(lres)
        return c.result(res)


# ---- NVFP4 and FP8 ----


def nvfp4_gemv(
    a: Array,
    sa: Array,
    b: Array,
    sb: Array,
    ga: Optional[Array] = None,
    gb: Optional[Array] = None,
    *,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """NVFP4 block-scaled GEMV (GPU MODE's nvfp4_gemv, kk_nvfp4_gemv):
    c[l,m] = sum_k (a*sa*ga)[l,m,k] (b*sb*gb)[l,0,k].

    a e2m1 [L,M,K], b e2m1 [L,1,K]: uint8 arrays of packed bytes [L,M,K/2]
    (two values per byte, low nibble first) or torch.float4_e2m1fn_x2; K a
    multiple of 64. sa, sb: e4m3 scales (float8_e4m3fn, or uint8 bytes), plain
    [L,rows,K/16] or 128x4 blocked [L,ceil(rows/128),K/64,512]. ga, gb: f32 [1]
    global scales, both or neither. Returns c, f16 [L,M,1]."""
    with Call(stream) as c:
        ta = c.tensor(a, "a", E2M1)
        tsa = c.tensor(sa, "sa", E4M3)
        tb = c.tensor(b, "b", E2M1)
        tsb = c.tensor(sb, "sb", E4M3)
        tga = c.tensor(ga, "ga")
        tgb = c.tensor(gb, "gb")
        s = _lib.Tensor.from_address(ta)
        L_, M = (s.shape[0], s.shape[1]) if s.ndim >= 2 else (0, 0)
        res, tc = c.output(out, "c", (L_, M, 1), F16)
        c.run(_lib_fn("kk_nvfp4_gemv"), ta, tsa, tb, tsb, tga, tgb, tc, c.stream)
        return c.result(res)


def nvfp4_gemm(
    x: Array,
    w: Array,
    sw: Array,
    gw: Optional[Array] = None,
    *,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """NVFP4 weights times bf16 activations (kk_nvfp4_gemm): y[m,n] = sum_k
    x[m,k] w[n,k] sw[n,k/16] gw. x bf16 [M,K], M <= 64, K a multiple of 64; w
    e2m1 [N,K] (uint8 packed bytes [N,K/2]); sw e4m3 [N,K/16]; gw f32 [1] or
    None. Returns y, bf16 [M,N]."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tw = c.tensor(w, "w", E2M1)
        tsw = c.tensor(sw, "sw", E4M3)
        tgw = c.tensor(gw, "gw")
        m = shape_of(x)[0] if shape_of(x) else 0
        n = shape_of(w)[0] if shape_of(w) else 0
        res, ty = c.output(out, "y", (m, n), BF16)
        c.run(_lib_fn("kk_nvfp4_gemm"), tx, tw, tsw, tgw, ty, c.stream)
        return c.result(res)


def fp8_gemm(
    a: Array,
    b: Array,
    scale_a: Array,
    scale_b: Array,
    *,
    out_dtype: Any = "bf16",
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """FP8 GEMM with per-tensor scales, as torch._scaled_mm(a, b.t(), scale_a,
    scale_b) (kk_fp8_gemm): c = (scale_a * scale_b) a . b^T. a [M,K] and b
    [N,K] fp8_e4m3 or fp8_e5m2 (not both e5m2; raw uint8 bytes need
    kernelkit.reinterpret), scale_a, scale_b f32 [1]; c [M,N] of out_dtype,
    bf16 or f32 (out's dtype when out= is given)."""
    with Call(stream) as c:
        ta = c.tensor(a, "a")
        tb = c.tensor(b, "b")
        tsa = c.tensor(scale_a, "scale_a")
        tsb = c.tensor(scale_b, "scale_b")
        m = shape_of(a)[0] if shape_of(a) else 0
        n = shape_of(b)[0] if shape_of(b) else 0
        code = dtype_of(out) if out is not None else dtype_code(out_dtype)
        res, tc = c.output(out, "c", (m, n), code)
        c.run(_lib_fn("kk_fp8_gemm"), ta, tb, tsa, tsb, tc, c.stream)
        return c.result(res)


# ---- row ops ----


def rmsnorm(x: Array, w: Array, eps: float = 1e-6, *, out: Optional[Array] = None,
            stream: Stream = None) -> Array:
    """y = x / sqrt(mean(x^2) + eps) * w along the last dimension
    (torch.nn.RMSNorm with its weight, kk_rmsnorm): x, y [rows,n] (or [..., n]),
    w [n]; one dtype, f32, f16 or bf16; eps in 1e-12..1."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tw = c.tensor(w, "w")
        res, ty = c.output(out, "y", shape_of(x), dtype_of(x))
        c.run(_lib_fn("kk_rmsnorm"), reshape2d(c, tx, "x"), tw, reshape2d(c, ty, "y"), float(eps),
              c.stream)
        return c.result(res)


def add_rmsnorm(
    x: Array,
    residual: Array,
    w: Array,
    eps: float = 1e-6,
    *,
    out: Optional[Array] = None,
    residual_out: Optional[Array] = None,
    stream: Stream = None,
) -> Tuple[Array, Array]:
    """The residual add and RMSNorm of a pre-norm decoder layer in one pass
    (kk_add_rmsnorm): h = x + residual (rounded to the dtype), y = rmsnorm(h) *
    w. Returns (y, h). residual_out may be ``residual`` or ``x`` itself (the
    in-place update of the residual stream); out must be an array of its own."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tr = c.tensor(residual, "residual")
        tw = c.tensor(w, "w")
        code = dtype_of(x)
        hres, th = c.output(residual_out, "h", shape_of(x), code)
        res, ty = c.output(out, "y", shape_of(x), code)
        c.run(_lib_fn("kk_add_rmsnorm"), reshape2d(c, tx, "x"), reshape2d(c, tr, "residual"), tw,
              reshape2d(c, th, "h"), reshape2d(c, ty, "y"), float(eps), c.stream)
        return c.result(res), c.result(hres)


def rmsnorm_fp8(
    x: Array,
    w: Array,
    eps: float = 1e-6,
    group: int = 128,
    *,
    out: Optional[Array] = None,
    scales: Optional[Array] = None,
    stream: Stream = None,
) -> Tuple[Array, Array]:
    """RMSNorm quantized to fp8 for an FP8 GEMM (kk_rmsnorm_fp8): returns (q,
    scales), q fp8_e4m3 of x's shape, scales f32 [rows, n/group] ([rows,1] for
    group 0: one scale per row); dequantized value = q * scale."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tw = c.tensor(w, "w")
        xs = shape_of(x)
        n = xs[-1] if xs else 0
        ng = (n // group if group else 1) if group >= 0 else 0
        res, tq = c.output(out, "q", xs, E4M3)
        sres, ts = c.output(scales, "scales", _rows_shape(x, ng), F32)
        c.run(_lib_fn("kk_rmsnorm_fp8"), reshape2d(c, tx, "x"), tw, reshape2d(c, tq, "q"),
              reshape2d(c, ts, "scales"), float(eps), int(group), c.stream)
        return c.result(res), c.result(sres)


def layernorm(
    x: Array,
    w: Optional[Array] = None,
    b: Optional[Array] = None,
    eps: float = 1e-5,
    *,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """y = (x - mean) / sqrt(var + eps) * w + b along the last dimension, biased
    variance (torch.nn.LayerNorm, kk_layernorm): w, b [n] both or neither."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        tw = c.tensor(w, "w")
        tb = c.tensor(b, "b")
        res, ty = c.output(out, "y", shape_of(x), dtype_of(x))
        c.run(_lib_fn("kk_layernorm"), reshape2d(c, tx, "x"), tw, tb, reshape2d(c, ty, "y"),
              float(eps), c.stream)
        return c.result(res)


def softmax(
    x: Array,
    scale: float = 1.0,
    *,
    causal: bool = False,
    sq: int = 0,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """y = softmax(scale * x) along the last dimension (kk_softmax). With
    causal, x holds score matrices of sq queries by n keys (sq 0 = all rows)
    and query i = row % sq sees keys j <= i + n - sq (kk_softmax_masked)."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        res, ty = c.output(out, "y", shape_of(x), dtype_of(x))
        tx2 = reshape2d(c, tx, "x")
        ty2 = reshape2d(c, ty, "y")
        if causal or sq:
            c.run(_lib_fn("kk_softmax_masked"), tx2, ty2, float(scale), 1 if causal else 0,
                  int(sq), c.stream)
        else:
            c.run(_lib_fn("kk_softmax"), tx2, ty2, float(scale), c.stream)
        return c.result(res)


def _rope_opt(c: Call, rotary_dim, offset, theta, style, positions, scaling, factor,
              low_freq_factor, high_freq_factor, original_max_position) -> _lib.RopeOptions:
    return _lib.RopeOptions(
        rotary_dim=int(rotary_dim),
        offset=int(offset),
        theta=float(theta),
        style=_choice(ROPE_STYLES, style, "style"),
        positions=c.tensor(positions, "positions"),
        scaling=_choice(ROPE_SCALINGS, scaling, "scaling"),
        factor=float(factor),
        low_freq_factor=float(low_freq_factor),
        high_freq_factor=float(high_freq_factor),
        original_max_position=int(original_max_position),
    )


def rope(
    x: Array,
    *,
    rotary_dim: int = 0,
    offset: int = 0,
    theta: float = 10000.0,
    style: str = "neox",
    positions: Optional[Array] = None,
    scaling: Optional[str] = None,
    factor: float = 8.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position: int = 8192,
    out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """Rotary position embedding as HF transformers applies it (kk_rope): x, y
    [B,H,S,D]; position offset + s, or positions[b,s] (int32 [B,S]); the first
    rotary_dim (0 = D) dimensions rotated in pairs, style "neox" (rotate_half)
    or "gptj" (interleaved); scaling None or "llama3" (with factor,
    low_freq_factor, high_freq_factor, original_max_position)."""
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        opt = _rope_opt(c, rotary_dim, offset, theta, style, positions, scaling, factor,
                        low_freq_factor, high_freq_factor, original_max_position)
        res, ty = c.output(out, "y", shape_of(x), dtype_of(x))
        c.run(_lib_fn("kk_rope"), tx, ty, byref(opt), c.stream)
        return c.result(res)


def rope_kv_append(
    q: Array,
    k: Array,
    v: Array,
    cache_seqlens: Array,
    k_cache: Array,
    v_cache: Array,
    *,
    rotary_dim: int = 0,
    theta: float = 10000.0,
    style: str = "neox",
    scaling: Optional[str] = None,
    factor: float = 8.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position: int = 8192,
    q_out: Optional[Array] = None,
    stream: Stream = None,
) -> Array:
    """The decode step's bookkeeping (kk_rope_kv_append): q and k rotated at
    positions cache_seqlens[b] + s, k and v written into k_cache and v_cache
    (in place) at rows cache_seqlens[b] + s. q [B,Hq,S,D], k, v [B,Hkv,S,D],
    caches [B,Hkv,S_max,D], cache_seqlens int32 [B] (not updated). Returns the
    rotated q."""
    with Call(stream) as c:
        tq = c.tensor(q, "q")
        tk = c.tensor(k, "k")
        tv = c.tensor(v, "v")
        tcs = c.tensor(cache_seqlens, "cache_seqlens")
        tkc = c.tensor(k_cache, "k_cache", output=True)
        tvc = c.tensor(v_cache, "v_cache", output=True)
        opt = _rope_opt(c, rotary_dim, 0, theta, style, None, scaling, factor, low_freq_factor,
                        high_freq_factor, original_max_position)
        res, tqo = c.output(q_out, "q_out", shape_of(q), dtype_of(q))
        c.run(_lib_fn("kk_rope_kv_append"), tq, tk, tv, tcs, tkc, tvc, tqo, byref(opt), c.stream)
        return c.result(res)


# ---- conversion and quantization ----


def convert(x: Array, dtype: Any, *, out: Optional[Array] = None, stream: Stream = None) -> Array:
    """x converted to `dtype` element by element (kk_convert), bit for bit as
    kk_convert_host: any of f64, f32, f16, bf16, fp8_e4m3, fp8_e5m2, e2m1 to
    any. An e2m1 result is a uint8 array of packed bytes (x's last dimension
    even, or x 1-D); an e2m1 x is given as kernelkit.reinterpret(bytes, "e2m1")."""
    code = dtype_of(out) if out is not None and dtype is None else dtype_code(dtype)
    with Call(stream) as c:
        tx = c.tensor(x, "x")
        res, ty = c.output(out, "y", shape_of(x), code)
        c.run(_lib_fn("kk_convert"), tx, ty, c.stream)
        return c.result(res)


def _scale_shape(code: int, layout: int, shape) -> Tuple[int, ...]:
    n = len(shape)
    sn = c_int()
    ss = (c_int64 * _lib.MAX_DIMS)()
    _lib.check(_lib.lib().kk_qtensor_scale_shape(code, layout, n, (c_int64 * max(n, 1))(*shape),
                                                  byref(sn), ss))
    return tuple(ss[: sn.value])


def quantize(
    x: Array,
    layout: str = "1x128",
    dtype: Any = None,
    *,
    out: Optional[Array] = None,
    scales: Optional[Array] = None,
    global_scale: Optional[Array] = None,
) -> Tuple[Array, ...]:
    """Quantize x (f32, bf16 or f16, contiguous) with current scaling
    (kk_quantize). layout: "per_tensor", "1x128", "128x128" (fp8; dtype
    fp8_e4m3 by default, or fp8_e5m2) or "nvfp4", "nvfp4_blocked" (e2m1).
    Returns (data, scales) for fp8, (data, scales, global_scale) for NVFP4;
    dequantized value = data * scale (NVFP4: * block scale * global scale).
    NVFP4 data is uint8 packed bytes. A NaN or inf in x is a QuantizationError."""
    lay = _choice(SCALE_LAYOUTS, layout, "layout")
    nvfp4 = lay >= 3
    code = dtype_code(dtype) if dtype is not None else (E2M1 if nvfp4 else E4M3)
    with Call(None) as c:
        tx = c.tensor(x, "x")
        xs = shape_of(x)
        dres, td = c.output(out, "data", xs, code)
        sres, ts = c.output(scales, "scales", _scale_shape(code, lay, xs), E4M3 if nvfp4 else F32)
        gres, tg = (None, None)
        if nvfp4:
            gres, tg = c.output(global_scale, "global_scale", (1,), F32)
        q = _lib.QTensor(layout=lay, data=td, scales=ts, global_scale=tg)
        c.run(_lib_fn("kk_quantize"), tx, byref(q), None)
        if nvfp4:
            return c.result(dres), c.result(sres), c.result(gres)
        return c.result(dres), c.result(sres)


def dequantize(
    data: Array,
    scales: Array,
    global_scale: Optional[Array] = None,
    *,
    layout: str,
    dtype: Any = "f32",
    out: Optional[Array] = None,
) -> Array:
    """Dequantize (kk_dequantize): y = data * scale (NVFP4: * block scale *
    global scale) in f32, rounded to `dtype` (f32, bf16 or f16). data: fp8, or
    e2m1 as uint8 packed bytes for the NVFP4 layouts; layout as quantize's."""
    lay = _choice(SCALE_LAYOUTS, layout, "layout")
    nvfp4 = lay >= 3
    code = dtype_of(out) if out is not None else dtype_code(dtype)
    with Call(None) as c:
        td = c.tensor(data, "data", E2M1 if nvfp4 else None)
        ts = c.tensor(scales, "scales", E4M3 if nvfp4 else None)
        tg = c.tensor(global_scale, "global_scale")
        ds = _lib.Tensor.from_address(td)
        res, ty = c.output(out, "y", tuple(ds.shape[: ds.ndim]), code)
        q = _lib.QTensor(layout=lay, data=td, scales=ts, global_scale=tg)
        c.run(_lib_fn("kk_dequantize"), byref(q), ty)
        return c.result(res)

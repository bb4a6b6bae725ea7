"""PyTorch integration: KernelKit's ops as torch.library custom ops, and the
"kernelkit" attention of Hugging Face transformers.

    import kernelkit.torch                       # registers everything below
    o = torch.ops.kernelkit.attention(q, k, v, causal=True)
    f = torch.compile(lambda q, k, v: torch.ops.kernelkit.attention(q, k, v, True))

Custom ops (namespace "kernelkit"; each has a fake implementation, so it can be
traced by torch.compile and captured in CUDA graphs: it runs on the current
stream and allocates its outputs with torch.empty): attention,
attention_lse, attention_varlen, gemm, linear, swiglu, silu_mul, rmsnorm,
add_rmsnorm, rmsnorm_fp8, layernorm, softmax, rope, rope_kv_append (mutates
k_cache and v_cache), fp8_gemm, nvfp4_gemv, nvfp4_gemm, convert. They are
forward-only (no autograd formula): use them for inference.

transformers: ``register_transformers()`` (called on import when transformers
was imported before; otherwise call it once) adds "kernelkit" to AttentionInterface, so a model loaded with
``attn_implementation="kernelkit"`` calls kernelkit attention in every layer
(examples/python/llama_kernelkit.py). Masks: the causal mask (and sliding
windows) are KernelKit's own; an explicit mask (a padded batch) has no
KernelKit kernel: those calls fall back to torch's
scaled_dot_product_attention, once logged.
"""

from __future__ import annotations

import logging
import sys
from typing import List, Optional, Tuple

import torch

from . import ops as _ops

Tensor = torch.Tensor
_log = logging.getLogger("kernelkit.torch")

__all__ = ["register_transformers", "transformers_attention"]


def _lib_op(name, mutates_args=()):
    return torch.library.custom_op(f"kernelkit::{name}", mutates_args=mutates_args)


# ---- attention ----


@_lib_op("attention")
def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    scale: Optional[float] = None,
    dropout: float = 0.0,
    seed: int = 0,
    offset: int = 0,
) -> Tensor:
    """kernelkit.attention: q [B,Hq,Sq,D], k, v [B,Hkv,Sk,D] -> o [B,Hq,Sq,D]."""
    return _ops.attention(q, k, v, causal=causal, window_left=window_left,
                          window_right=window_right, scale=scale, dropout=dropout, seed=seed,
                          offset=offset)


@attention.register_fake
def _(q, k, v, causal=False, window_left=-1, window_right=-1, scale=None, dropout=0.0, seed=0,
      offset=0):
    return q.new_empty(q.shape[:-1] + v.shape[-1:])


@_lib_op("attention_lse")
def attention_lse(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    scale: Optional[float] = None,
) -> Tuple[Tensor, Tensor]:
    """kernelkit.attention with return_lse: (o, lse f32 [B,Hq,Sq])."""
    return _ops.attention(q, k, v, causal=causal, window_left=window_left,
                          window_right=window_right, scale=scale, return_lse=True)


@attention_lse.register_fake
def _(q, k, v, causal=False, window_left=-1, window_right=-1, scale=None):
    return (q.new_empty(q.shape[:-1] + v.shape[-1:]),
            q.new_empty(q.shape[:3], dtype=torch.float32))


@_lib_op("attention_varlen")
def attention_varlen(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    scale: Optional[float] = None,
) -> Tensor:
    """kernelkit.attention_varlen (FlashAttention's flash_attn_varlen_func)."""
    return _ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                 causal=causal, window_left=window_left,
                                 window_right=window_right, scale=scale)


@attention_varlen.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
      window_left=-1, window_right=-1, scale=None):
    return torch.empty_like(q)


# ---- matrix products ----


def _rows(x: Tensor, n: int) -> List[int]:
    return list(x.shape[:-1]) + [n]


@_lib_op("gemm")
def gemm(a: Tensor, b: Tensor) -> Tensor:
    """kernelkit.gemm: a . b^T."""
    return _ops.gemm(a, b)


@gemm.register_fake
def _(a, b):
    return a.new_empty(_rows(a, b.shape[0]))


@_lib_op("linear")
def linear(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, activation: str = "none",
           residual: Optional[Tensor] = None) -> Tensor:
    """kernelkit.linear: act(x . w^T + bias) (+ residual)."""
    return _ops.linear(x, w, bias, activation=activation, residual=residual)


@linear.register_fake
def _(x, w, bias=None, activation="none", residual=None):
    return x.new_empty(_rows(x, w.shape[0]))


@_lib_op("swiglu")
def swiglu(x: Tensor, w_gate: Tensor, w_up: Tensor, bias_gate: Optional[Tensor] = None,
           bias_up: Optional[Tensor] = None) -> Tensor:
    """kernelkit.swiglu: silu(x . w_gate^T) * (x . w_up^T)."""
    return _ops.swiglu(x, w_gate, w_up, bias_gate, bias_up)


@swiglu.register_fake
def _(x, w_gate, w_up, bias_gate=None, bias_up=None):
    return x.new_empty(_rows(x, w_gate.shape[0]))


@_lib_op("silu_mul")
def silu_mul(g: Tensor, u: Optional[Tensor] = None) -> Tensor:
    """kernelkit.silu_mul: silu(g) * u (u None: g packed [.., 2N])."""
    return _ops.silu_mul(g, u)


@silu_mul.register_fake
def _(g, u=None):
    return g.new_empty(_rows(g, g.shape[-1] if u is not None else g.shape[-1] // 2))


@_lib_op("fp8_gemm")
def fp8_gemm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor,
             out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """kernelkit.fp8_gemm: (scale_a * scale_b) a . b^T, as torch._scaled_mm."""
    return _ops.fp8_gemm(a, b, scale_a, scale_b, out_dtype=out_dtype)


@fp8_gemm.register_fake
def _(a, b, scale_a, scale_b, out_dtype=torch.bfloat16):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)


@_lib_op("nvfp4_gemv")
def nvfp4_gemv(a: Tensor, sa: Tensor, b: Tensor, sb: Tensor, ga: Optional[Tensor] = None,
               gb: Optional[Tensor] = None) -> Tensor:
    """kernelkit.nvfp4_gemv: c f16 [L,M,1] (a, b packed e2m1 bytes)."""
    return _ops.nvfp4_gemv(a, sa, b, sb, ga, gb)


@nvfp4_gemv.register_fake
def _(a, sa, b, sb, ga=None, gb=None):
    return a.new_empty((a.shape[0], a.shape[1], 1), dtype=torch.float16)


@_lib_op("nvfp4_gemm")
def nvfp4_gemm(x: Tensor, w: Tensor, sw: Tensor, gw: Optional[Tensor] = None) -> Tensor:
    """kernelkit.nvfp4_gemm: y bf16 [M,N] (w packed e2m1 bytes [N,K/2])."""
    return _ops.nvfp4_gemm(x, w, sw, gw)


@nvfp4_gemm.register_fake
def _(x, w, sw, gw=None):
    return x.new_empty((x.shape[0], w.shape[0]), dtype=torch.bfloat16)


# ---- row ops ----


@_lib_op("rmsnorm")
def rmsnorm(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    """kernelkit.rmsnorm."""
    return _ops.rmsnorm(x, w, eps)


@rmsnorm.register_fake
def _(x, w, eps=1e-6):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_lib_op("add_rmsnorm")
def add_rmsnorm(x: Tensor, residual: Tensor, w: Tensor, eps: float = 1e-6) -> Tuple[Tensor, Tensor]:
    """kernelkit.add_rmsnorm: (y, h = x + residual)."""
    return _ops.add_rmsnorm(x, residual, w, eps)


@add_rmsnorm.register_fake
def _(x, residual, w, eps=1e-6):
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(x, memory_format=torch.contiguous_format))


@_lib_op("rmsnorm_fp8")
def rmsnorm_fp8(x: Tensor, w: Tensor, eps: float = 1e-6, group: int = 128) -> Tuple[Tensor, Tensor]:
    """kernelkit.rmsnorm_fp8: (q float8_e4m3fn, scales f32)."""
    return _ops.rmsnorm_fp8(x, w, eps, group)


@rmsnorm_fp8.register_fake
def _(x, w, eps=1e-6, group=128):
    n = x.shape[-1]
    return (x.new_empty(x.shape, dtype=torch.float8_e4m3fn),
            x.new_empty(_rows(x, n // group if group else 1), dtype=torch.float32))


@_lib_op("layernorm")
def layernorm(x: Tensor, w: Optional[Tensor] = None, b: Optional[Tensor] = None,
              eps: float = 1e-5) -> Tensor:
    """kernelkit.layernorm."""
    return _ops.layernorm(x, w, b, eps)


@layernorm.register_fake
def _(x, w=None, b=None, eps=1e-5):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_lib_op("softmax")
def softmax(x: Tensor, scale: float = 1.0, causal: bool = False, sq: int = 0) -> Tensor:
    """kernelkit.softmax (kk_softmax_masked with causal)."""
    return _ops.softmax(x, scale, causal=causal, sq=sq)


@softmax.register_fake
def _(x, scale=1.0, causal=False, sq=0):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_lib_op("rope")
def rope(
    x: Tensor,
    rotary_dim: int = 0,
    offset: int = 0,
    theta: float = 10000.0,
    style: str = "neox",
    positions: Optional[Tensor] = None,
    scaling: str = "none",
    factor: float = 8.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position: int = 8192,
) -> Tensor:
    """kernelkit.rope: x [B,H,S,D]."""
    return _ops.rope(x, rotary_dim=rotary_dim, offset=offset, theta=theta, style=style,
                     positions=positions, scaling=scaling, factor=factor,
                     low_freq_factor=low_freq_factor, high_freq_factor=high_freq_factor,
                     original_max_position=original_max_position)


@rope.register_fake
def _(x, rotary_dim=0, offset=0, theta=10000.0, style="neox", positions=None, scaling="none",
      factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_lib_op("rope_kv_append", mutates_args=("k_cache", "v_cache"))
def rope_kv_append(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cache_seqlens: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    rotary_dim: int = 0,
    theta: float = 10000.0,
    style: str = "neox",
    scaling: str = "none",
    factor: float = 8.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position: int = 8192,
) -> Tensor:
    """kernelkit.rope_kv_append: returns the rotated q; k_cache, v_cache written."""
    return _ops.rope_kv_append(q, k, v, cache_seqlens, k_cache, v_cache, rotary_dim=rotary_dim,
                               theta=theta, style=style, scaling=scaling, factor=factor,
                               low_freq_factor=low_freq_factor,
                               high_freq_factor=high_freq_factor,
                               original_max_position=original_max_position)


@rope_kv_append.register_fake
def _(q, k, v, cache_seqlens, k_cache, v_cache, rotary_dim=0, theta=10000.0, style="neox",
      scaling="none", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
      original_max_position=8192):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@_lib_op("convert")
def convert(x: Tensor, dtype: torch.dtype) -> Tensor:
    """kernelkit.convert to a torch dtype (bit for bit as kk_convert)."""
    return _ops.convert(x, dtype)


@convert.register_fake
def _(x, dtype):
    return x.new_empty(x.shape, dtype=dtype)


# ---- transformers ----

_fallback_logged = False


def transformers_attention(
    module: torch.nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Optional[Tensor],
    dropout: float = 0.0,
    scaling: Optional[float] = None,
    sliding_window: Optional[int] = None,
    is_causal: Optional[bool] = None,
    **kwargs,
) -> Tuple[Tensor, None]:
    """The attention function transformers calls for attn_implementation
    "kernelkit": query [B,Hq,Sq,D], key and value [B,Hkv,Sk,D] (GQA taken as
    it is, no repeat_kv); returns (output [B,Sq,Hq,D], None), as
    transformers' sdpa_attention_forward does."""
    global _fallback_logged
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    if dropout and module.training:
        raise NotImplementedError("kernelkit attention is forward-only (inference)")
    if attention_mask is not None:
        # A padded batch: an explicit mask KernelKit has no kernel for.
        if not _fallback_logged:
            _log.warning("kernelkit attention: explicit attention masks run on torch's "
                         "scaled_dot_product_attention")
            _fallback_logged = True
        hq, hkv = query.shape[1], key.shape[1]
        if hq != hkv:
            key = key.repeat_interleave(hq // hkv, dim=1)
            value = value.repeat_interleave(hq // hkv, dim=1)
        mask = attention_mask[:, :, :, : key.shape[-2]]
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                                               scale=scaling)
        return out.transpose(1, 2).contiguous(), None
    causal = bool(is_causal) and query.shape[2] > 1
    wl = -1
    if sliding_window is not None and sliding_window > 0:
        wl = int(sliding_window) - 1
    out = torch.ops.kernelkit.attention(query, key, value, causal, wl, -1, scaling)
    return out.transpose(1, 2).contiguous(), None


def register_transformers() -> bool:
    """Register "kernelkit" with transformers' AttentionInterface (and its mask
    interface, as SDPA's masks: None when the causal mask alone will do).
    Returns False when transformers is not installed."""
    try:
        from transformers import AttentionInterface
    except ImportError:
        return False
    AttentionInterface.register("kernelkit", transformers_attention)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

        ALL_MASK_ATTENTION_FUNCTIONS.register("kernelkit", sdpa_mask)
    except (ImportError, AttributeError):
        pass
    return True


if "transformers" in sys.modules:  # imported first: register now (else call it yourself)
    register_transformers()

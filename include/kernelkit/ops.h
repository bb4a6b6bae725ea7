/* The ops, as a C user calls them: tensors in, tensors out.
 *
 * Each function reads the sizes from the tensors' shapes, checks every tensor
 * (dtype, shape, contiguity, one device for all) and runs the op where the
 * tensors live, through the op registry (kk_op_run in kernelkit/harness.h),
 * so what `kernelkit check` proves and `kernelkit bench` measures is exactly
 * what these call. On a CUDA device the work is enqueued on `stream` (NULL =
 * the legacy default stream) and the call returns without waiting: call
 * kk_op_synchronize or cudaStreamSynchronize before reading the outputs. When
 * the device's backend has no kernel for the op, it runs on the CPU instead
 * (synchronously, with one logged warning per op). A bad tensor is
 * KK_ERR_INVALID_ARGUMENT naming it: "attention: k: expected shape
 * [2,4,300,64], got shape [2,4,300,32]".
 *
 *   kk_tensor *x, *w, *b, *y;   // x [M,K], w [N,K], b [N], y [M,N], bf16, on "cuda:0"
 *   kk_linear(x, w, b, y, KK_ACT_GELU_TANH, NULL);
 *   kk_op_synchronize("cuda:0", NULL);
 */
#ifndef KERNELKIT_OPS_H
#define KERNELKIT_OPS_H

#include <stdint.h>

#include "kernelkit/status.h"
#include "kernelkit/memory.h"
#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* c = a . b^T: a [M,K], b [N,K], c [M,N]; one dtype, f32, f16 or bf16; f32
 * accumulation. */
KK_API kk_status kk_gemm(const kk_tensor *a, const kk_tensor *b, kk_tensor *c, kk_stream stream);

typedef enum kk_activation {
    KK_ACT_NONE = 0,
    KK_ACT_RELU,
    KK_ACT_GELU_ERF,  /* x * Phi(x) */
    KK_ACT_GELU_TANH, /* the tanh approximation */
    KK_ACT_SILU,      /* x * sigmoid(x) */
    KK_ACT_COUNT
} kk_activation;

/* y = act(x . w^T + bias): x [M,K], w [N,K], bias [N] or NULL, y [M,N]; one
 * dtype, f32, f16 or bf16; f32 accumulation, the epilogue fused. */
KK_API kk_status kk_linear(const kk_tensor *x, const kk_tensor *w, const kk_tensor *bias,
                           kk_tensor *y, kk_activation act, kk_stream stream);

/* y = act(x . w^T + bias) + residual: the o_proj / down_proj pattern of a
 * decoder layer, the residual [M,N] added after the activation in the same
 * epilogue. residual may be y itself (y += ...). */
KK_API kk_status kk_linear_residual(const kk_tensor *x, const kk_tensor *w, const kk_tensor *bias,
                                    const kk_tensor *residual, kk_tensor *y, kk_activation act,
                                    kk_stream stream);

/* SwiGLU in one call: y = silu(x . w_gate^T + bias_gate) * (x . w_up^T + bias_up);
 * w_gate, w_up [N,K]; the biases [N] both or neither (NULL). */
KK_API kk_status kk_swiglu(const kk_tensor *x, const kk_tensor *w_gate, const kk_tensor *w_up,
                           const kk_tensor *bias_gate, const kk_tensor *bias_up, kk_tensor *y,
                           kk_stream stream);

/* SwiGLU's elementwise part on projections already made: y = silu(g) * u,
 * silu(v) = v / (1 + exp(-v)) in f32. g, u, y [M,N]; or u NULL and g the
 * packed [M,2N] output of a fused gate_up projection (each row's first N
 * columns the gate, the last N the up). One dtype, f32, f16 or bf16. */
KK_API kk_status kk_silu_mul(const kk_tensor *g, const kk_tensor *u, kk_tensor *y,
                             kk_stream stream);

typedef struct kk_attention_options {
    int causal;            /* query i sees keys j <= i + Sk - Sq (bottom-right aligned) */
    int64_t window_left;   /* keys j >= i + Sk - Sq - window_left only; -1 = unlimited */
    int64_t window_right;  /* keys j <= i + Sk - Sq + window_right only; -1 = unlimited */
    double scale;          /* softmax scale; 0 = 1/sqrt(D) */
    double dropout;        /* drop probability of each softmax weight, 0 .. 0.99 */
    uint64_t seed, offset; /* dropout's Philox key and counter offset (src/core/philox.h) */
} kk_attention_options;

/* No mask, no window, scale 1/sqrt(D), no dropout. */
#define KK_ATTENTION_OPTIONS_INIT                                                                  \
    { 0, -1, -1, 0.0, 0.0, 0, 0 }
KK_API void kk_attention_options_init(kk_attention_options *opt);

/* o = softmax(scale . q k^T + mask) v per head. q [B,Hq,Sq,D], k and v
 * [B,Hkv,Sk,D] with Hq a multiple of Hkv (GQA, MQA), o [B,Hq,Sq,D]; one dtype,
 * f32, f16 or bf16; D 16..256. lse (NULL or f32 [B,Hq,Sq]) receives the
 * natural log-sum-exp of each row's scaled scores (-inf on a fully masked
 * row, whose o is 0). opt NULL = KK_ATTENTION_OPTIONS_INIT. */
KK_API kk_status kk_attention(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                              kk_tensor *o, kk_tensor *lse, const kk_attention_options *opt,
                              kk_stream stream);

/* The backward pass of kk_attention: dq, dk, dv from q, k, v, the forward's o
 * and its lse (f32 [B,Hq,Sq], as kk_attention wrote it: P is recomputed as
 * exp(scale q.k - lse)) and dout = dL/do [B,Hq,Sq,D]. dq has q's shape, dk and
 * dv k's; for GQA a kv head's dk, dv sum over the query heads of its group. opt
 * must be the forward's (mask, windows, scale, dropout p, seed and offset: the
 * same Philox mask is applied). Rows that saw no key get zero dq. One dtype,
 * f32, f16 or bf16, with f32 accumulation. On CUDA bf16 and f16 with head
 * dims that are multiples of 8 up to 128 (a Hopper kernel at sm_90, an
 * sm_80-class one elsewhere); other cases run on the CPU (kk_op_run's
 * fallback). docs/kernels/attention.md, "Backward". */
KK_API kk_status kk_attention_backward(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                                       const kk_tensor *o, const kk_tensor *dout,
                                       const kk_tensor *lse, kk_tensor *dq, kk_tensor *dk,
                                       kk_tensor *dv, const kk_attention_options *opt,
                                       kk_stream stream);

/* Attention over a packed batch of variable-length sequences, as
 * FlashAttention's flash_attn_varlen_func: sequence s holds query rows
 * cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 and keys cu_seqlens_k[s] ..
 * cu_seqlens_k[s+1]-1, and each sequence is one kk_attention of its own
 * lengths (the causal mask and windows bottom-right aligned per sequence;
 * empty sequences allowed; a query row with no key gets o = 0, lse = -inf).
 *   q, o: [total_q,Hq,D] (FlashAttention's layout) or [1,Hq,total_q,D]
 *         (strided views welcome: the head dim contiguous);
 *   k, v: [total_k,Hkv,D] or [1,Hkv,total_k,D], the same rank as q;
 *   cu_seqlens_q, cu_seqlens_k: int32 [nseq+1], 0, nondecreasing, the last
 *         = total_q (total_k), on the tensors' device;
 *   max_seqlen_q, max_seqlen_k: at least the longest sequence's length (1 ..
 *         2^20): the CUDA grid is sized by max_seqlen_q, as FlashAttention's;
 *   lse: NULL, or f32 [Hq,total_q] or [1,Hq,total_q], contiguous.
 * Dropout (opt): the Philox mask of src/core/philox.h with the sequence index
 * as its batch and rows and keys counted inside the sequence, so sequence s
 * drops what batch s of a kk_attention with B > s and the same seed and
 * offset drops; with equal lengths the packed batch is a kk_attention with
 * B = nseq, bit for bit on the CPU.
 * On the CPU the offsets are checked (KK_ERR_INVALID_ARGUMENT naming the bad
 * element, e.g. "cu_seqlens_q[3] = 40: expected at least cu_seqlens_q[2] =
 * 57"); on a GPU they are device data the host does not read: offsets that do
 * not fit the tensors leave that sequence unwritten, and rows past
 * max_seqlen_q are not computed, as in FlashAttention. */
KK_API kk_status kk_attention_varlen(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                                     const kk_tensor *cu_seqlens_q, const kk_tensor *cu_seqlens_k,
                                     int64_t max_seqlen_q, int64_t max_seqlen_k, kk_tensor *o,
                                     kk_tensor *lse, const kk_attention_options *opt,
                                     kk_stream stream);

/* The backward pass of kk_attention_varlen: dq, dk, dv of a packed batch,
 * each sequence exactly kk_attention_backward of its own lengths (the causal
 * mask and windows bottom-right aligned per sequence). q, o, dout, dq in q's
 * layout and k, v, dk, dv in k's, as kk_attention_varlen takes them
 * ([total_q,Hq,D] and [total_k,Hkv,D], or [1,H,total,D]; strided views with
 * the head dim contiguous); lse f32 [Hq,total_q] or [1,Hq,total_q] as
 * kk_attention_varlen wrote it; cu_seqlens_q, cu_seqlens_k and max_seqlen_q,
 * max_seqlen_k as there. opt must be the forward's: dropout applies the same
 * Philox mask (the sequence index as its batch, rows and keys counted inside
 * the sequence). For GQA a kv head's dk, dv sum over the query heads of its
 * group; rows that saw no key get dq = 0 and keys no row saw dk = dv = 0. One
 * dtype, f32, f16 or bf16, with f32 accumulation. The offsets are checked as
 * kk_attention_varlen's on the CPU. CPU only (kk_op_run's CPU fallback
 * serves other devices). docs/kernels/attention.md, "Varlen backward". */
KK_API kk_status kk_attention_varlen_backward(
    const kk_tensor *q, const kk_tensor *k, const kk_tensor *v, const kk_tensor *o,
    const kk_tensor *dout, const kk_tensor *lse, const kk_tensor *cu_seqlens_q,
    const kk_tensor *cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, kk_tensor *dq,
    kk_tensor *dk, kk_tensor *dv, const kk_attention_options *opt, kk_stream stream);

/* NVFP4 block-scaled GEMV (GPU MODE's nvfp4_gemv): c[l,m] = sum_k
 * (a*sa*ga)[l,m,k] (b*sb*gb)[l,0,k]. a e2m1 [L,M,K], b e2m1 [L,1,K], K a
 * multiple of 64; sa, sb e4m3 scales per 16 K-elements, plain [L,rows,K/16] or
 * 128x4 blocked [L,ceil(rows/128),K/64,512] (the layout is read from their
 * shape); ga, gb f32 [1] global scales, both or neither (NULL); c f16
 * [L,M,1]. */
KK_API kk_status kk_nvfp4_gemv(const kk_tensor *a, const kk_tensor *sa, const kk_tensor *b,
                               const kk_tensor *sb, const kk_tensor *ga, const kk_tensor *gb,
                               kk_tensor *c, kk_stream stream);

/* y = x / sqrt(mean(x^2) + eps) * w along the last dimension (torch.nn.RMSNorm
 * with its weight): x, y [rows,n], w [n]; one dtype, f32, f16 or bf16; eps in
 * 1e-12..1 (1e-6 is usual). A tensor of more dimensions is normalized as the
 * [rows,n] view kk_tensor_reshape gives. */
KK_API kk_status kk_rmsnorm(const kk_tensor *x, const kk_tensor *w, kk_tensor *y, double eps,
                            kk_stream stream);

/* The residual add and RMSNorm of a pre-norm decoder layer in one pass:
 * h = x + residual, rounded to the dtype (the new residual stream), then
 * y = rmsnorm(h) * w as kk_rmsnorm computes it from that rounded h. x,
 * residual, h, y [rows,n], w [n]; one dtype, f32, f16 or bf16. h may be
 * residual or x itself (the in-place residual update); y must be a tensor of
 * its own. */
KK_API kk_status kk_add_rmsnorm(const kk_tensor *x, const kk_tensor *residual, const kk_tensor *w,
                                kk_tensor *h, kk_tensor *y, double eps, kk_stream stream);

/* RMSNorm quantized to fp8 for an FP8 GEMM: y = rmsnorm(x) * w in f32 (not
 * rounded), then per group of `group` elements of a row (128: DeepSeek's 1x128
 * activation scales; 0: one scale per row) scale = amax|y| / 448 (1 for an
 * all-zero group) and q = e4m3(y / scale), bit for bit kk_quantize's 1x128 /
 * per-tensor rules on that y (kernelkit/quant.h). x [rows,n], w [n] f32, f16
 * or bf16; q fp8_e4m3 [rows,n]; scales f32 [rows, n/group] ([rows,1] for
 * group 0); n a multiple of group. Dequantized: q * scale. A non-finite y is
 * KK_ERR_QUANTIZATION, as in kk_quantize. */
KK_API kk_status kk_rmsnorm_fp8(const kk_tensor *x, const kk_tensor *w, kk_tensor *q,
                                kk_tensor *scales, double eps, int group, kk_stream stream);

/* y = (x - mean) / sqrt(var + eps) * w + b along the last dimension, with the
 * biased variance (torch.nn.LayerNorm): x, y [rows,n]; w, b [n] both, or both
 * NULL for no affine transform; one dtype, f32, f16 or bf16; eps in 1e-12..1
 * (1e-5 is usual). */
KK_API kk_status kk_layernorm(const kk_tensor *x, const kk_tensor *w, const kk_tensor *b,
                              kk_tensor *y, double eps, kk_stream stream);

/* y = softmax(scale * x) along the last dimension: x, y [rows,n]; one dtype,
 * f32, f16 or bf16; scale in 0..1e4 (1 for the plain softmax, 1/temperature
 * otherwise; 0 gives the uniform 1/n). */
KK_API kk_status kk_softmax(const kk_tensor *x, kk_tensor *y, double scale, kk_stream stream);

/* kk_softmax over attention scores, with the causal mask: x, y [rows,n] hold
 * rows / sq matrices of sq queries by n keys (x viewed as [B*H*sq, n]); sq a
 * divisor of rows, 0 = rows. With causal nonzero, query i = r % sq sees keys
 * j <= i + n - sq (bottom-right aligned, as kk_attention's mask); the others
 * get probability 0, and a row that sees no key is all zeros. causal 0 is
 * kk_softmax. CUDA kernels take causal 0 only; causal rows run on the CPU. */
KK_API kk_status kk_softmax_masked(const kk_tensor *x, kk_tensor *y, double scale, int causal,
                                   int64_t sq, kk_stream stream);

typedef enum kk_rope_style {
    KK_ROPE_NEOX = 0, /* pairs (i, i + R/2): rotate_half, GPT-NeoX and LLaMA in HF */
    KK_ROPE_GPTJ      /* pairs (2i, 2i + 1): interleaved, GPT-J */
} kk_rope_style;

typedef enum kk_rope_scaling {
    KK_ROPE_SCALING_NONE = 0,
    KK_ROPE_SCALING_LLAMA3 /* HF rope_type "llama3" (Llama 3.1, 3.2) */
} kk_rope_scaling;

typedef struct kk_rope_options {
    int64_t rotary_dim; /* R, the dimensions rotated: even, <= D; 0 = D (D even) */
    int64_t offset;     /* position of s = 0 (the cache length when decoding), 0..2^24 */
    double theta;       /* frequency base: f_i = theta^(-2i/R), 1..1e9 */
    kk_rope_style style;
    /* NULL, or int32 [B,S] on the tensors' device: token (b, s) is at
     * positions[b,s] and offset is not used (packed batches, decode steps of
     * sequences at different lengths) */
    const kk_tensor *positions;
    /* Llama-3 scaling of f_i, as HF's _compute_llama3_parameters: wavelengths
     * 2 pi / f_i above original_max_position / low_freq_factor are slowed by
     * factor, those below original_max_position / high_freq_factor kept, the
     * band between blended; the four fields are read with LLAMA3 only */
    kk_rope_scaling scaling;
    double factor;                 /* 8 (Llama 3.1), 32 (3.2); 1e-3..1e4 */
    double low_freq_factor;        /* 1 */
    double high_freq_factor;       /* 4; more than low_freq_factor */
    int64_t original_max_position; /* 8192, original_max_position_embeddings */
} kk_rope_options;

/* Every dimension rotated, positions from 0, theta 10000, NeoX pairs, no
 * scaling (the llama3 fields at Llama 3.1's values). */
#define KK_ROPE_OPTIONS_INIT                                                                       \
    { 0, 0, 10000.0, KK_ROPE_NEOX, NULL, KK_ROPE_SCALING_NONE, 8.0, 1.0, 4.0, 8192 }
KK_API void kk_rope_options_init(kk_rope_options *opt);

/* Rotary position embedding as HF transformers applies it: x, y [B,H,S,D], one
 * dtype, f32, f16 or bf16; position p = offset + s (or opt->positions[b,s]),
 * each pair (a, b) of the first R dimensions rotated by p * f_i to
 * (a cos - b sin, b cos + a sin), the rest copied. opt NULL =
 * KK_ROPE_OPTIONS_INIT. CUDA kernels take neither positions nor scaling yet:
 * those calls run on the CPU. */
KK_API kk_status kk_rope(const kk_tensor *x, kk_tensor *y, const kk_rope_options *opt,
                         kk_stream stream);

/* The decode step's bookkeeping in one call: q and k rotated at positions
 * cache_seqlens[b] + s, k and v appended to the caches in place. q, q_out
 * [B,Hq,S,D], k, v [B,Hkv,S,D], k_cache, v_cache [B,Hkv,S_max,D], one dtype
 * (f32, f16, bf16); cache_seqlens int32 [B], each sequence's length before
 * the call (not updated: add S yourself). Rows cache_seqlens[b] + s (s < S)
 * of the caches get rotated k and plain v; the rest is untouched. opt:
 * rotary_dim, theta, style and the scaling as kk_rope; offset must be 0 and
 * positions NULL. cache_seqlens[b] + S > S_max is KK_ERR_INVALID_ARGUMENT
 * naming the element, before anything is written. It runs on the CPU (from a
 * GPU's tensors too, copied). */
KK_API kk_status kk_rope_kv_append(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                                   const kk_tensor *cache_seqlens, kk_tensor *k_cache,
                                   kk_tensor *v_cache, kk_tensor *q_out, const kk_rope_options *opt,
                                   kk_stream stream);

/* FP8 GEMM with per-tensor scales, as torch._scaled_mm(a, b.t(), scale_a,
 * scale_b) and cuBLASLt's TN layout: c = (scale_a * scale_b) a . b^T; a [M,K]
 * and b [N,K] fp8_e4m3 or fp8_e5m2 (not both e5m2), scale_a, scale_b f32 [1],
 * c [M,N] bf16 or f32 (its dtype is the output's); f32 accumulation. */
KK_API kk_status kk_fp8_gemm(const kk_tensor *a, const kk_tensor *b, const kk_tensor *scale_a,
                             const kk_tensor *scale_b, kk_tensor *c, kk_stream stream);

/* How kk_fp8_gemm_scaled's scales apply (the `scaling` parameter of the
 * fp8_gemm op). G = ceil(K/128); a last group shorter than 128 (K not a
 * multiple) has its own scale like any other.
 *   TENSOR   scale_a, scale_b [1]: c[m,n] = sa sb sum_k a[m,k] b[n,k]
 *   ROWWISE  scale_a [M] (a token each), scale_b [N] (an output channel each):
 *            c[m,n] = sa[m] sb[n] sum_k a[m,k] b[n,k]
 *   BLOCK    scale_a [M,G] (1x128 groups of a), scale_b [ceil(N/128),G]
 *            (128x128 blocks of b), DeepSeek-V3's: c[m,n] = sum_g sa[m,g]
 *            sb[n/128,g] sum_{k in group g} a[m,k] b[n,k]. These are the
 *            scales kk_quantize writes for KK_SCALE_1X128 (a) and
 *            KK_SCALE_128X128 (b), so its output can be passed as is. */
typedef enum kk_fp8_scaling {
    KK_FP8_SCALING_TENSOR = 0,
    KK_FP8_SCALING_ROWWISE,
    KK_FP8_SCALING_BLOCK
} kk_fp8_scaling;

/* kk_fp8_gemm with the scales of `scaling` (kk_fp8_scaling above); the other
 * arguments as kk_fp8_gemm's, which is this call with KK_FP8_SCALING_TENSOR.
 * Backends without a kernel for a mode return KK_ERR_UNSUPPORTED. */
KK_API kk_status kk_fp8_gemm_scaled(const kk_tensor *a, const kk_tensor *b,
                                    const kk_tensor *scale_a, const kk_tensor *scale_b,
                                    kk_tensor *c, kk_fp8_scaling scaling, kk_stream stream);

/* Linear with FP8 compute (the `fp8_linear` op): x quantized to fp8_e4m3 on
 * the fly exactly as kk_quantize would, then
 *   y = act(dequant(x_q) . dequant(w)^T + bias) [+ residual]
 * x [M,K], bias [N] or NULL, residual [M,N] or NULL (may be y itself), y
 * [M,N]: one dtype, f32, f16 or bf16. w fp8_e4m3 [N,K] quantized ahead, with
 * w_scales f32 as `scaling` says:
 *   ROWWISE  x one scale per row (token), w_scales [N] (per output channel)
 *   BLOCK    x one scale per 1x128 group, w_scales [ceil(N/128),ceil(K/128)]:
 *            kk_quantize's KK_SCALE_128X128 of w, passed as is
 * f32 accumulation; KK_FP8_SCALING_TENSOR is not taken. inf/NaN in x:
 * KK_ERR_QUANTIZATION. Runs regardless of hardware.nvidia.fp8_enabled (an
 * explicit call is the caller's choice; docs/configuration.md). */
KK_API kk_status kk_fp8_linear(const kk_tensor *x, const kk_tensor *w, const kk_tensor *w_scales,
                               const kk_tensor *bias, const kk_tensor *residual, kk_tensor *y,
                               kk_activation act, kk_fp8_scaling scaling, kk_stream stream);

/* NVFP4 weights times bf16 activations (a Linear layer with NVFP4 weights at
 * decode time): y[m,n] = sum_k x[m,k] w[n,k] sw[n,k/16] gw. x bf16 [M,K] with
 * M <= 64, K a multiple of 64; w e2m1 [N,K] (two per byte, low nibble first);
 * sw e4m3 [N,K/16]; gw f32 [1] or NULL (1); y bf16 [M,N]; f32 accumulation. */
KK_API kk_status kk_nvfp4_gemm(const kk_tensor *x, const kk_tensor *w, const kk_tensor *sw,
                               const kk_tensor *gw, kk_tensor *y, kk_stream stream);

/* y = x converted to y's dtype, element by element, bit for bit as
 * kk_convert_host (kernelkit/dtype.h): any of f64, f32, f16, bf16, fp8_e4m3,
 * fp8_e5m2, e2m1 to any; x and y of any shapes with the same element count
 * (at least 1), contiguous. */
KK_API kk_status kk_convert(const kk_tensor *x, kk_tensor *y, kk_stream stream);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_OPS_H */

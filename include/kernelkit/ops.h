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

/* SwiGLU in one call: y = silu(x . w_gate^T + bias_gate) * (x . w_up^T + bias_up);
 * w_gate, w_up [N,K]; the biases [N] both or neither (NULL). */
KK_API kk_status kk_swiglu(const kk_tensor *x, const kk_tensor *w_gate, const kk_tensor *w_up,
                           const kk_tensor *bias_gate, const kk_tensor *bias_up, kk_tensor *y,
                           kk_stream stream);

typedef struct kk_attention_options {
    int causal;           /* query i sees keys j <= i + Sk - Sq (bottom-right aligned) */
    int64_t window_left;  /* keys j >= i + Sk - Sq - window_left only; -1 = unlimited */
    int64_t window_right; /* keys j <= i + Sk - Sq + window_right only; -1 = unlimited */
    double scale;         /* softmax scale; 0 = 1/sqrt(D) */
    double dropout;       /* drop probability of each softmax weight, 0 .. 0.99 */
    uint64_t seed, offset; /* dropout's Philox key and counter offset (src/core/philox.h) */
} kk_attention_options;

/* No mask, no window, scale 1/sqrt(D), no dropout. */
#define KK_ATTENTION_OPTIONS_INIT {0, -1, -1, 0.0, 0.0, 0, 0}
KK_API void kk_attention_options_init(kk_attention_options *opt);

/* o = softmax(scale . q k^T + mask) v per head. q [B,Hq,Sq,D], k and v
 * [B,Hkv,Sk,D] with Hq a multiple of Hkv (GQA, MQA), o [B,Hq,Sq,D]; one dtype,
 * f32, f16 or bf16; D 16..256. lse (NULL or f32 [B,Hq,Sq]) receives the
 * natural log-sum-exp of each row's scaled scores (-inf on a fully masked
 * row, whose o is 0). opt NULL = KK_ATTENTION_OPTIONS_INIT. */
KK_API kk_status kk_attention(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                              kk_tensor *o, kk_tensor *lse, const kk_attention_options *opt,
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

/* NVFP4 block-scaled GEMV (GPU MODE's nvfp4_gemv): c[l,m] = sum_k
 * (a*sa*ga)[l,m,k] (b*sb*gb)[l,0,k]. a e2m1 [L,M,K], b e2m1 [L,1,K], K a
 * multiple of 64; sa, sb e4m3 scales per 16 K-elements, plain [L,rows,K/16] or
 * 128x4 blocked [L,ceil(rows/128),K/64,512] (the layout is read from their
 * shape); ga, gb f32 [1] global scales, both or neither (NULL); c f16
 * [L,M,1]. */
KK_API kk_status kk_nvfp4_gemv(const kk_tensor *a, const kk_tensor *sa, const kk_tensor *b,
                               const kk_tensor *sb, const kk_tensor *ga, const kk_tensor *gb,
                               kk_tensor *c, kk_stream stream);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_OPS_H */

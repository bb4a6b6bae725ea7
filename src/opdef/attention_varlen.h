/* Internal: the `attention_varlen` op's registry row (src/opdef/attention_varlen.c)
 * and its kernels (src/cpu/attention_varlen_cpu.c, src/cuda/kernels/attention_varlen.cu).
 *
 * Attention over a packed batch of variable-length sequences, FlashAttention's
 * varlen forward: q, o [1,Hq,total_q,D] (the strided view of a [total_q,Hq,D]
 * buffer, or contiguous), k, v [1,Hkv,total_k,D], int32 cu_seqlens_q and
 * cu_seqlens_k [nseq+1] (0, nondecreasing, the last = total): sequence s holds
 * query rows cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 and keys cu_seqlens_k[s] ..
 * cu_seqlens_k[s+1]-1. Each sequence is one attention of the `attention` op
 * (B = 1, Sq and Sk its own lengths): the mask is bottom-right aligned per
 * sequence, lse [1,Hq,total_q] f32 (the memory of FlashAttention's
 * [Hq,total_q]). Dropout takes the sequence index as the batch of
 * src/core/philox.h (bh = s * Hq + h) and the row and key inside the
 * sequence, as FlashAttention's varlen kernels do.
 *
 * The lengths are data, but a case carries them: seqlens_q and seqlens_k
 * (LIST parameters, "5:0:17") fill the cu_seqlens tensors of the harness's
 * inputs, and the FLOP count uses them. Without the lists (kk_attention_varlen
 * and `kernelkit run` with the caller's tensors) nseq, total_q and total_k must
 * be given; the harness then takes the even split (sequence s holds rows
 * floor(s T / n) .. floor((s+1) T / n) - 1). nseq, total_q, total_k,
 * max_seqlen_q and max_seqlen_k at 0 are taken from the lists. */
#ifndef KK_OPDEF_ATTENTION_VARLEN_H
#define KK_OPDEF_ATTENTION_VARLEN_H

#include "opdef/attention.h"

enum {
    KK__AVL_NSEQ,
    KK__AVL_HQ,
    KK__AVL_HKV,
    KK__AVL_TQ,
    KK__AVL_TK,
    KK__AVL_MAXQ,
    KK__AVL_MAXK,
    KK__AVL_D,
    KK__AVL_CAUSAL,
    KK__AVL_WL,
    KK__AVL_WR,
    KK__AVL_SCALE,
    KK__AVL_LSE,
    KK__AVL_DTYPE,
    KK__AVL_DROPOUT,
    KK__AVL_SEED,
    KK__AVL_OFFSET,
    KK__AVL_LENS_Q,
    KK__AVL_LENS_K,
    KK__AVL_NPARAMS
};

/* Tensor order: the kernels' t[]. */
enum { KK__AVL_T_Q, KK__AVL_T_K, KK__AVL_T_V, KK__AVL_T_CUQ, KK__AVL_T_CUK, KK__AVL_T_O, KK__AVL_T_LSE };

/* The sizes the parameters resolve to (0s taken from the lists). */
typedef struct kk__varlen_dims {
    int64_t nseq, total_q, total_k, max_q, max_k;
} kk__varlen_dims;

extern const kk_op_param kk__attention_varlen_params[KK__AVL_NPARAMS];
void kk__attention_varlen_dims(const kk_op_params *p, kk__varlen_dims *d);
/* Length of sequence s (which 0: queries, 1: keys) as the case has it: the
 * list's value, else the even split. */
int64_t kk__attention_varlen_len(const kk_op_params *p, int which, int64_t s);
/* The `attention` op's parameters for one sequence of lq queries and lk keys
 * (B = 1, the mask, scale and dropout of p): what kk__attention_key_range and
 * the reference's rows take. Not validated (lk may be 0). */
void kk__attention_varlen_seq_params(const kk_op_params *p, int64_t lq, int64_t lk,
                                     kk_op_params *out);
/* Checks cu [nseq+1] of tensor `name` ("cu_seqlens_q"): cu[0] = 0,
 * nondecreasing, cu[nseq] = total, no length above max_len. The error names
 * the tensor, the element and its value. */
kk_status kk__attention_varlen_check_cu(const char *name, const int64_t *cu, int64_t nseq,
                                        int64_t total, int64_t max_len, const char *max_name);
kk_status kk__attention_varlen_validate(const kk_op_params *p);
int kk__attention_varlen_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__attention_varlen_flops(const kk_op_params *p);
kk_status kk__attention_varlen_reference(const kk_op_params *p, const double *const *in,
                                         double *const *out);

/* The `attention` row's tolerances: the same arithmetic per sequence. */

extern const kk_op kk__op_attention_varlen;

#endif

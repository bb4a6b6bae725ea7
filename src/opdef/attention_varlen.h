/* Internal: the `attention_varlen` op's registry row (src/opdef/attention_varlen.c)
 * and its kernels (src/cpu/attention_varlen_cpu.c, src/cuda/kernels/attention_varlen.cu):
 * attention over a packed batch of variable-length sequences, FlashAttention's
 * varlen forward, each sequence one `attention` with B = 1. Layouts, cu_seqlens,
 * dropout and the seqlens lists: docs/kernels/attention.md, "Variable-length batches". */
#ifndef KK_OPDEF_ATTENTION_VARLEN_H
#define KK_OPDEF_ATTENTION_VARLEN_H

#include "opdef/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

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
enum {
    KK__AVL_T_Q,
    KK__AVL_T_K,
    KK__AVL_T_V,
    KK__AVL_T_CUQ,
    KK__AVL_T_CUK,
    KK__AVL_T_O,
    KK__AVL_T_LSE
};

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

#ifdef __cplusplus
}
#endif
#endif

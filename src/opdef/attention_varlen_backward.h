/* Internal: the `attention_varlen_backward` op (src/opdef/attention_varlen_backward.c)
 * and its CPU kernel (src/cpu/attention_varlen_backward_cpu.c): dq, dk, dv of
 * `attention_varlen`, each sequence of the packed batch exactly
 * `attention_backward` of its own lengths. docs/kernels/attention.md,
 * "Varlen backward". */
#ifndef KK_OPDEF_ATTENTION_VARLEN_BACKWARD_H
#define KK_OPDEF_ATTENTION_VARLEN_BACKWARD_H

#include "opdef/attention_backward.h"
#include "opdef/attention_varlen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The forward's indices up to the scale (so the forward's sizes, lists and
 * checks read these parameters as their own), then dtype, dropout and the
 * lists; no lse flag: the backward always takes lse. */
enum {
    KK__AVB_NSEQ = KK__AVL_NSEQ,
    KK__AVB_HQ = KK__AVL_HQ,
    KK__AVB_HKV = KK__AVL_HKV,
    KK__AVB_TQ = KK__AVL_TQ,
    KK__AVB_TK = KK__AVL_TK,
    KK__AVB_MAXQ = KK__AVL_MAXQ,
    KK__AVB_MAXK = KK__AVL_MAXK,
    KK__AVB_D = KK__AVL_D,
    KK__AVB_CAUSAL = KK__AVL_CAUSAL,
    KK__AVB_WL = KK__AVL_WL,
    KK__AVB_WR = KK__AVL_WR,
    KK__AVB_SCALE = KK__AVL_SCALE,
    KK__AVB_DTYPE,
    KK__AVB_DROPOUT,
    KK__AVB_SEED,
    KK__AVB_OFFSET,
    KK__AVB_LENS_Q,
    KK__AVB_LENS_K,
    KK__AVB_NPARAMS
};

/* Tensors, in kk_op_tensors order: attention_backward's inputs (the same
 * indices), the offsets, then the gradients. */
enum {
    KK__AVB_T_Q = KK__ATB_T_Q,
    KK__AVB_T_K = KK__ATB_T_K,
    KK__AVB_T_V = KK__ATB_T_V,
    KK__AVB_T_O = KK__ATB_T_O,
    KK__AVB_T_DO = KK__ATB_T_DO,
    KK__AVB_T_LSE = KK__ATB_T_LSE,
    KK__AVB_T_CUQ,
    KK__AVB_T_CUK,
    KK__AVB_T_DQ,
    KK__AVB_T_DK,
    KK__AVB_T_DV,
    KK__AVB_T_COUNT
};

/* The forward op's (`attention_varlen`, lse on) parameters of the same case:
 * what produced o and lse. */
void kk__attention_varlen_backward_forward_params(const kk_op_params *p, kk_op_params *fwd);
/* The `attention_backward` parameters of one sequence of lq query rows and
 * lk keys (B = 1, p's heads, mask, scale and dropout). Not validated (lq or
 * lk may be 0). */
void kk__attention_varlen_backward_seq_params(const kk_op_params *p, int64_t lq, int64_t lk,
                                              kk_op_params *out);

extern const kk_op kk__op_attention_varlen_backward;

#ifdef __cplusplus
}
#endif
#endif

/* Internal: the `attention_backward` op (src/opdef/attention_backward.c): dq,
 * dk, dv of the forward `attention` from q, k, v, o, dO and the forward's lse. */
#ifndef KK_OPDEF_ATTENTION_BACKWARD_H
#define KK_OPDEF_ATTENTION_BACKWARD_H

#include "opdef/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The forward's indices up to the scale (so kk__attention_key_range reads
 * these parameters as its own), then dtype and dropout; no lse flag: the
 * backward always takes lse. */
enum {
    KK__ATB_B = KK__ATT_B,
    KK__ATB_HQ = KK__ATT_HQ,
    KK__ATB_HKV = KK__ATT_HKV,
    KK__ATB_SQ = KK__ATT_SQ,
    KK__ATB_SK = KK__ATT_SK,
    KK__ATB_D = KK__ATT_D,
    KK__ATB_CAUSAL = KK__ATT_CAUSAL,
    KK__ATB_WL = KK__ATT_WL,
    KK__ATB_WR = KK__ATT_WR,
    KK__ATB_SCALE = KK__ATT_SCALE,
    KK__ATB_DTYPE,
    KK__ATB_DROPOUT,
    KK__ATB_SEED,
    KK__ATB_OFFSET,
    KK__ATB_NPARAMS
};

/* Tensors, in kk_op_tensors order. */
enum {
    KK__ATB_T_Q,
    KK__ATB_T_K,
    KK__ATB_T_V,
    KK__ATB_T_O,
    KK__ATB_T_DO,
    KK__ATB_T_LSE,
    KK__ATB_T_DQ,
    KK__ATB_T_DK,
    KK__ATB_T_DV,
};

/* The forward op's parameters of the same case (lse on): what produced o and
 * lse. */
void kk__attention_backward_forward_params(const kk_op_params *p, kk_op_params *fwd);

extern const kk_op kk__op_attention_backward;

#ifdef __cplusplus
}
#endif
#endif

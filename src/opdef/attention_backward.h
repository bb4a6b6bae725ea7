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
/* The other way: this op's parameters for the `attention` parameters fwd
 * (its lse flag dropped). Not validated (Sk may be 0: a varlen sequence). */
void kk__attention_backward_params_of(const kk_op_params *fwd, kk_op_params *out);

/* One kv group of the reference, for this op and attention_varlen_backward
 * (per sequence): the query heads kvh*G .. (kvh+1)*G-1 of one batch of p's
 * Sq rows and Sk keys. Row i of query head h of q, o, dO and dq starts at
 * element h * hs + i * D of the pointer; key j of the group's k, v, dk, dv at
 * j * D (rows of D, contiguous). b: the dropout mask's batch (bh = b * Hq + h).
 * mag = 0: the gradients; mag = 1: their error scales (the magnitude hook).
 * s, f: Sk scratch doubles each. */
typedef struct kk__atb_ref_rows {
    const double *q, *o, *dO, *k, *v;
    double *dq, *dk, *dv;
    int64_t hs; /* head stride of q, o, dO and dq, in elements */
} kk__atb_ref_rows;
void kk__attention_backward_ref_group(const kk_op_params *p, const kk__atb_ref_rows *rows, int mag,
                                      int64_t b, int64_t kvh, double *s, double *f);

/* The inputs of a backward case (this op's and attention_varlen_backward's,
 * whose q, k, v, o, dO and lse are tensors 0..5 in this op's order): q, k, v
 * drawn from the case's parameters, o and lse made from them by `forward`,
 * the forward op's float64 reference; dO drawn from the case seed as usual.
 * docs/kernels/attention.md, "Backward", "Inputs". */
typedef struct kk__atb_inputs {
    kk_dtype dt;          /* of q, k, v, o */
    int64_t nq, nk, nlse; /* elements of q (and o), of k (and v), of lse */
    kk_status (*forward)(const kk_op_params *p, const double *q, const double *k, const double *v,
                         double *o, double *lse);
} kk__atb_inputs;
void kk__attention_backward_write_input(const kk_op_params *p, const kk__atb_inputs *x, int t,
                                        void *buf, int64_t n);

/* The tolerance rows (the forward's plus KK__ACC_F32 times the magnitude)
 * and the CUDA kernel's widening: attention_varlen_backward's too. */
#define KK__ATB_TOLERANCES                                                                         \
    .ntolerances = 3,                                                                              \
    .tolerances = {KK__TOL_ACC(KK_DTYPE_F32, 1e-5, 1e-4, 1e-5, KK__BOTH, 0, KK__ACC_F32),          \
                   KK__TOL_ACC(KK_DTYPE_F16, 2e-3, 4e-3, 5e-3, KK__BOTH, 0, KK__ACC_F32),          \
                   KK__TOL_ACC(KK_DTYPE_BF16, 1e-2, 2e-2, 1e-2, KK__BOTH, 0, KK__ACC_F32)}
void kk__attention_backward_tolerance_on(kk_backend_kind backend, kk_tolerance *t);

extern const kk_op kk__op_attention_backward;

#ifdef __cplusplus
}
#endif
#endif

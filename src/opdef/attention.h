/* Internal: the `attention` op (src/opdef/attention.c), the forward pass. */
#ifndef KK_OPDEF_ATTENTION_H
#define KK_OPDEF_ATTENTION_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__ATT_B,
    KK__ATT_HQ,
    KK__ATT_HKV,
    KK__ATT_SQ,
    KK__ATT_SK,
    KK__ATT_D,
    KK__ATT_CAUSAL,
    KK__ATT_WL,
    KK__ATT_WR,
    KK__ATT_SCALE,
    KK__ATT_LSE,
    KK__ATT_DTYPE,
    KK__ATT_DROPOUT,
    KK__ATT_SEED,
    KK__ATT_OFFSET,
    KK__ATT_NPARAMS
};
kk_status kk__attention_validate(const kk_op_params *p);
int kk__attention_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__attention_flops(const kk_op_params *p);
kk_status kk__attention_reference(const kk_op_params *p, const double *const *in,
                                  double *const *out);
/* The magnitude hook: o's per-element error scale, lse's 0 (attend_row). */
kk_status kk__attention_magnitude(const kk_op_params *p, const double *const *in,
                                  double *const *out);
/* Keys [*lo, *hi] query row i may see (empty when *hi < *lo): the one
 * definition of the mask, used by the reference and the FLOP count. */
void kk__attention_key_range(const kk_op_params *p, int64_t i, int64_t *lo, int64_t *hi);
/* One row of the reference: o[D] and *lse of query row i from q[D] and the
 * kv head's rows k, v [Sk,D] (contiguous rows; s: Sk scratch doubles); bh
 * is the dropout mask's batch * Hq + head. e: NULL, or Sk more scratch
 * doubles, and o, *lse get the row's magnitude instead. attention_varlen's
 * reference and magnitude run it per sequence. */
void kk__attention_ref_row(const kk_op_params *p, int64_t bh, int64_t i, double scale,
                           const double *q, const double *k, const double *v, double *s, double *e,
                           double *o, double *lse);

/* The fuzzer's draw for attention, which attention_varlen's builds on. */
void kk__attention_fuzz(kk__rng *r, kk_op_params *p, int big);

extern const kk_op kk__op_attention;

#ifdef __cplusplus
}
#endif
#endif

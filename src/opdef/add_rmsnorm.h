/* Internal: the `add_rmsnorm` op's registry row (src/opdef/add_rmsnorm.c) and
 * its CPU kernel (src/cpu/add_rmsnorm_cpu.c).
 *
 *   h[r,:] = x[r,:] + residual[r,:]                        rounded to dtype
 *   y[r,:] = h[r,:] / sqrt(mean(h[r,:]^2) + eps) * w       from the rounded h
 *
 * The residual add and RMSNorm of a pre-norm decoder layer in one pass: h is
 * the new residual stream, y the normalized input of the next block. */
#ifndef KK_OPDEF_ADD_RMSNORM_H
#define KK_OPDEF_ADD_RMSNORM_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__ARN_ROWS, KK__ARN_N, KK__ARN_EPS, KK__ARN_DTYPE, KK__ARN_NPARAMS };

/* Tolerances: rmsnorm's (KK__NORM_TOLERANCES, opdef/rmsnorm.h), for both
 * outputs. h is one rounding of x + residual, which the reference makes too
 * (f32 inputs add exactly in f64; a kernel adding in f32 then rounding to
 * bf16 differs from it only at rare double-rounding ties, by one unit). y is
 * rmsnorm's arithmetic on that h. A y normalized from the unrounded sum
 * moves by at most u (2^-8 in bf16) and passes these tolerances: the
 * test compares y bit for bit with rmsnorm of the stored h instead
 * (tests/test_cpu_fused_rows.c). */
extern const kk_op kk__op_add_rmsnorm;

#ifdef __cplusplus
}
#endif
#endif

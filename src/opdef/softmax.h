/* Internal: the `softmax` op's registry row (src/opdef/softmax.c) and its
 * CPU kernel (src/cpu/softmax_cpu.c).
 *
 *   y[r,:] = softmax(x[r,:] * scale)      x, y [rows, n]
 *
 * along the last dimension, numerically stable (the row's maximum is
 * subtracted first), as torch.softmax(x * scale, dim=-1). With causal=1 the
 * rows are attention probabilities: row r is query i = r % sq of a matrix of
 * n keys, and keys j > i + n - sq are masked (probability 0), bottom-right
 * aligned as attention's causal mask; a row that sees no key is all zeros. */
#ifndef KK_OPDEF_SOFTMAX_H
#define KK_OPDEF_SOFTMAX_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__SMX_ROWS,
    KK__SMX_N,
    KK__SMX_SCALE,
    KK__SMX_DTYPE,
    KK__SMX_CAUSAL,
    KK__SMX_SQ,
    KK__SMX_NPARAMS
};

extern const kk_op_param kk__softmax_params[KK__SMX_NPARAMS];
kk_status kk__softmax_validate(const kk_op_params *p);
/* The keys row r sees: 0 .. visible - 1 (n without the mask, 0 for a row
 * that sees none). */
int64_t kk__softmax_visible(const kk_op_params *p, int64_t r);
int kk__softmax_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__softmax_flops(const kk_op_params *p);
kk_status kk__softmax_reference(const kk_op_params *p, const double *const *in, double *const *out);

/* Tolerances. Every y is positive and nothing cancels, so the error is
 * relative: with t = scale * (x - max x) (computed in that order, so t's own
 * rounding is u|t|), exp, the row sum and one division give y(1 + e) with
 * |e| <= u(2|t| + ~6), u = 2^-24 in f32. Since y|t| = e^-|t| |t| <= 1/e, the
 * absolute error never exceeds a few u however large the scale, and the
 * relative error of every y above 1e-6 (|t| < 14) stays below 2e-6: f32
 * takes rtol 1e-5 and atol 1e-6 (a floor for the tiny tails, not a slack:
 * softmax values are <= 1, so a gemm-like atol of 1e-4 would hide wrong
 * tails). f16 and bf16 add one rounding of y: rtol 4u as the float ops; f16's
 * subnormals below 6e-5 are 6e-8 apart, inside the 1e-6 floor. A kernel that
 * ignores scale or misses an element of the max or the sum fails. */
#define KK__SOFTMAX_TOLERANCES                                                                     \
    .ntolerances = 3, .tolerances = {{.dtype = KK_DTYPE_F32,                                       \
                                      .atol = 1e-6,                                                \
                                      .rtol = 1e-5,                                                \
                                      .l2 = 1e-5,                                                  \
                                      .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2},             \
                                     {.dtype = KK_DTYPE_F16,                                       \
                                      .atol = 1e-6,                                                \
                                      .rtol = 2e-3,                                                \
                                      .l2 = 5e-3,                                                  \
                                      .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2},             \
                                     {.dtype = KK_DTYPE_BF16,                                      \
                                      .atol = 1e-6,                                                \
                                      .rtol = 1.6e-2,                                              \
                                      .l2 = 1e-2,                                                  \
                                      .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2}}

extern const kk_op kk__op_softmax;

#ifdef __cplusplus
}
#endif
#endif

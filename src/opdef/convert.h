/* Internal: the `convert` op's registry row (src/opdef/convert.c). convert
 * turns n elements of one float dtype into another (packed e2m1 included),
 * bit for bit as kk_convert_host does, with a kernel on every backend. The row
 * is a macro so that registry.c's table takes it with one line. */
#ifndef KK_OPDEF_CONVERT_H
#define KK_OPDEF_CONVERT_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__CVT_N, KK__CVT_SRC, KK__CVT_DST, KK__CVT_NPARAMS };

extern const kk_op_param kk__convert_params[KK__CVT_NPARAMS];
int kk__convert_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__convert_flops(const kk_op_params *p);
double kk__convert_bytes(const kk_op_params *p);
kk_status kk__convert_reference(const kk_op_params *p, const double *const *in, double *const *out);

/* Exact: the output must be the reference rounded to dst, which the reference
 * already is, so atol = rtol = 0. NaN and inf inputs convert to NaN and inf in
 * f64/f32/f16/bf16/e5m2 (e4m3 has NaN only), hence ALLOW_NONFINITE. */
#define KK__CVT_TOL(dt)                                                                            \
    {                                                                                              \
        .dtype = dt, .atol = 0.0, .rtol = 0.0, .l2 = 0.0, .criteria = KK_CHECK_ELEMENTWISE,        \
        .flags = KK_CHECK_ALLOW_NONFINITE                                                          \
    }

/* What convert's kernels check first: the two tensors are what the params
 * describe, contiguous, on the kernel's own backend (a harness bug must not
 * turn into a wild write). */
kk_status kk__convert_check_tensors(const kk_op_params *p, kk_tensor *const *t,
                                    kk_backend_kind kind);

extern const kk_op kk__op_convert;

#ifdef __cplusplus
}
#endif
#endif

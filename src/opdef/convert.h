/* Internal: the `convert` op's registry row (src/harness/op_convert.c).
 *
 * convert turns n elements of one float dtype into another (packed e2m1
 * included), bit for bit as kk_convert_host does. It is the first op with a
 * kernel on every backend, so `kernelkit check`, `run` and `bench` have
 * something real to run before the transformer kernels exist. The row itself is
 * a macro so that registry.c's table takes it with one line. */
#ifndef KK_HARNESS_OP_CONVERT_H
#define KK_HARNESS_OP_CONVERT_H

#include "kernelkit/harness.h"

enum { KK__CVT_N, KK__CVT_SRC, KK__CVT_DST, KK__CVT_NPARAMS };

extern const kk_op_param kk__convert_params[KK__CVT_NPARAMS];
int kk__convert_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__convert_flops(const kk_op_params *p);
double kk__convert_bytes(const kk_op_params *p);
kk_status kk__convert_reference(const kk_op_params *p, const double *const *in, double *const *out);
kk_status kk__convert_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream);
kk_status kk__convert_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream stream);

/* Exact: the output must be the reference rounded to dst, which the reference
 * already is, so atol = rtol = 0. NaN and inf inputs convert to NaN and inf in
 * f64/f32/f16/bf16/e5m2 (e4m3 has NaN only), hence ALLOW_NONFINITE. */
#define KK__CVT_TOL(dt)                                                                            \
    {                                                                                              \
        .dtype = dt, .atol = 0.0, .rtol = 0.0, .l2 = 0.0, .criteria = KK_CHECK_ELEMENTWISE,        \
        .flags = KK_CHECK_ALLOW_NONFINITE                                                          \
    }

#define KK__CONVERT_ROW                                                                            \
    {                                                                                              \
        .name = "convert",                                                                         \
        .summary = "y = x converted from src to dst (kk_convert_host's rounding); x, y [n]",       \
        .nparams = KK__CVT_NPARAMS, .params = kk__convert_params,                                  \
        .describe = kk__convert_describe, .flops = kk__convert_flops, .bytes = kk__convert_bytes,  \
        .reference = kk__convert_reference, .ntolerances = 7,                                      \
        .tolerances = {KK__CVT_TOL(KK_DTYPE_F64),      KK__CVT_TOL(KK_DTYPE_F32),                  \
                       KK__CVT_TOL(KK_DTYPE_F16),      KK__CVT_TOL(KK_DTYPE_BF16),                 \
                       KK__CVT_TOL(KK_DTYPE_FP8_E4M3), KK__CVT_TOL(KK_DTYPE_FP8_E5M2),             \
                       KK__CVT_TOL(KK_DTYPE_E2M1)},                                                \
        .kernels = {                                                                               \
            [KK_BACKEND_CPU] = kk__convert_cpu,                                                    \
            [KK_BACKEND_CUDA] = kk__convert_cuda                                                   \
        }                                                                                          \
    }

#endif

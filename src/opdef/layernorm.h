/* Internal: the `layernorm` op's registry row (src/harness/op_layernorm.c)
 * and its CPU kernel (src/cpu/layernorm_cpu.c).
 *
 *   y[r,:] = (x[r,:] - mean) / sqrt(var + eps) * w + b     x, y [rows, n]
 *
 * with the biased variance (divided by n), as torch.nn.LayerNorm over the last
 * dimension; w [n] and b [n] only with affine=1 (elementwise_affine). */
#ifndef KK_HARNESS_OP_LAYERNORM_H
#define KK_HARNESS_OP_LAYERNORM_H

#include "harness/op_rmsnorm.h" /* KK__NORM_TOLERANCES: the reasoning is there */
#include "kernelkit/harness.h"

enum { KK__LN_ROWS, KK__LN_N, KK__LN_EPS, KK__LN_AFFINE, KK__LN_DTYPE, KK__LN_NPARAMS };

extern const kk_op_param kk__layernorm_params[KK__LN_NPARAMS];
int kk__layernorm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__layernorm_flops(const kk_op_params *p);
kk_status kk__layernorm_reference(const kk_op_params *p, const double *const *in,
                                  double *const *out);
kk_status kk__layernorm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream);

#define KK__LAYERNORM_ROW                                                                          \
    {                                                                                              \
        .name = "layernorm",                                                                       \
        .summary = "y = (x - mean) / sqrt(var + eps) * w + b per row; x, y [rows,n], w, b [n]",    \
        .nparams = KK__LN_NPARAMS, .params = kk__layernorm_params,                                 \
        .describe = kk__layernorm_describe, .flops = kk__layernorm_flops,                          \
        .bytes = kk__op_bytes_io, .reference = kk__layernorm_reference, KK__NORM_TOLERANCES,       \
        .kernels = {[KK_BACKEND_CPU] = kk__layernorm_cpu }                                         \
    }

#endif

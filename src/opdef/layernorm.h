/* Internal: the `layernorm` op's registry row (src/opdef/layernorm.c)
 * and its CPU kernel (src/cpu/layernorm_cpu.c).
 *
 *   y[r,:] = (x[r,:] - mean) / sqrt(var + eps) * w + b     x, y [rows, n]
 *
 * with the biased variance (divided by n), as torch.nn.LayerNorm over the last
 * dimension; w [n] and b [n] only with affine=1 (elementwise_affine). */
#ifndef KK_OPDEF_LAYERNORM_H
#define KK_OPDEF_LAYERNORM_H

#include "opdef/opdef.h"

#include "opdef/rmsnorm.h" /* KK__NORM_TOLERANCES: the reasoning is there */

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__LN_ROWS, KK__LN_N, KK__LN_EPS, KK__LN_AFFINE, KK__LN_DTYPE, KK__LN_NPARAMS };

extern const kk_op_param kk__layernorm_params[KK__LN_NPARAMS];
int kk__layernorm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__layernorm_flops(const kk_op_params *p);
kk_status kk__layernorm_reference(const kk_op_params *p, const double *const *in,
                                  double *const *out);

extern const kk_op kk__op_layernorm;

#ifdef __cplusplus
}
#endif
#endif

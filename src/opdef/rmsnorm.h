/* Internal: the `rmsnorm` op's registry row (src/opdef/rmsnorm.c) and its
 * CPU kernel (src/cpu/rmsnorm_cpu.c).
 *
 *   y[r,:] = x[r,:] / sqrt(mean(x[r,:]^2) + eps) * w      x, y [rows, n], w [n]
 *
 * as torch.nn.RMSNorm (and the T5/LLaMA RMSNorm) with one rounding of y at the
 * end. The row is a macro so that registry.c's table takes it with one line. */
#ifndef KK_OPDEF_RMSNORM_H
#define KK_OPDEF_RMSNORM_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__RMS_ROWS, KK__RMS_N, KK__RMS_EPS, KK__RMS_DTYPE, KK__RMS_NPARAMS };

extern const kk_op_param kk__rmsnorm_params[KK__RMS_NPARAMS];
int kk__rmsnorm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__rmsnorm_flops(const kk_op_params *p);
kk_status kk__rmsnorm_reference(const kk_op_params *p, const double *const *in, double *const *out);

/* Tolerances of the norms (rmsnorm, layernorm). The reference sees the
 * kernel's exact inputs, so the error is the kernel's f32 arithmetic plus the
 * final rounding of y. The f32 kernel's row statistics are exact to a few
 * units of f32 roundoff u = 2^-24 (chunks of 256 summed in f32, the chunks in
 * f64), and y = (x - mean) * r * w adds a few more: about 8u = 5e-7 relative,
 * so f32 allows rtol 1e-5 (20x margin) with an atol of 1e-5 for outputs that
 * cancel to near zero (x close to the mean: the mean's own error times r,
 * with |x| <= ~5 for normal inputs). f16 and bf16 are dominated by the one
 * rounding of y (u = 2^-11, 2^-8) and take the float ops' rows: rtol about
 * 4u. A kernel that ignores eps (eps = 0.1: r off by 5%) or forgets the mean
 * fails all three. Relative L2 as for every float op. */
#define KK__NORM_TOLERANCES KK__ROW_OP_TOLERANCES

extern const kk_op kk__op_rmsnorm;

#ifdef __cplusplus
}
#endif
#endif

/* Internal: the `nvfp4_gemm` op's registry row (src/opdef/nvfp4_gemm.c) and its
 * CPU kernel (src/cpu/nvfp4_gemm_cpu.c): y[m,n] = sum_k x[m,k] * (w[n,k] *
 * sw[n,k/16] * gw), NVFP4 weights times bf16 activations for small batch
 * (M <= 64), as a Linear layer with NVFP4 weights runs at decode time. The
 * layouts: docs/harness.md, "Op registry"; docs/backends/cpu.md. */
#ifndef KK_OPDEF_NVFP4_GEMM_H
#define KK_OPDEF_NVFP4_GEMM_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__NVG_M, KK__NVG_N, KK__NVG_K, KK__NVG_GLOBAL, KK__NVG_NPARAMS };

extern const kk_op_param kk__nvfp4_gemm_params[KK__NVG_NPARAMS];
int kk__nvfp4_gemm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__nvfp4_gemm_flops(const kk_op_params *p);
kk_status kk__nvfp4_gemm_reference(const kk_op_params *p, const double *const *in,
                                   double *const *out);

/* Tolerance: y is bf16, so its one rounding (u = 2^-8, at most 2^-9 = 0.2%
 * relative) dominates; rtol 1.6e-2 = 4u and the relative L2 limit 1e-2 are
 * the bf16 rows of the float ops. The reference dequantizes exactly; the
 * kernel's only other error is f32: the product sw * gw (u_f32 relative) and
 * the accumulation over K, about u_f32 sqrt(K) sum|terms| / sqrt(K) in
 * practice, 3e-4 absolute at K = 16k with the harness's inputs (|x| ~ 1,
 * |w sw gw| <= 6 * 4), under the atol of 1e-2 that covers outputs which
 * cancel to near zero. A scale from the wrong block, or a global scale
 * ignored (gw is drawn from [0.25, 0.75)), moves y by O(|y|) and fails. */

extern const kk_op kk__op_nvfp4_gemm;

#ifdef __cplusplus
}
#endif
#endif

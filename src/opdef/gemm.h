/* Internal: the `gemm` op (src/opdef/gemm.c): c[M,N] = a[M,K] . b[N,K]^T. */
#ifndef KK_OPDEF_GEMM_H
#define KK_OPDEF_GEMM_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__GEMM_M, KK__GEMM_N, KK__GEMM_K, KK__GEMM_DTYPE, KK__GEMM_NPARAMS };
int kk__gemm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__gemm_flops(const kk_op_params *p);
kk_status kk__gemm_reference(const kk_op_params *p, const double *const *in, double *const *out);
kk_status kk__gemm_magnitude(const kk_op_params *p, const double *const *in, double *const *out);

extern const kk_op kk__op_gemm;

#ifdef __cplusplus
}
#endif
#endif

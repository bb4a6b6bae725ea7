/* Internal: the `nvfp4_gemv` op (src/opdef/nvfp4_gemv.c), GPU MODE's problem. */
#ifndef KK_OPDEF_NVFP4_GEMV_H
#define KK_OPDEF_NVFP4_GEMV_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__GEMV_M, KK__GEMV_K, KK__GEMV_L, KK__GEMV_LAYOUT, KK__GEMV_GLOBAL, KK__GEMV_NPARAMS };
enum { KK__GEMV_PLAIN, KK__GEMV_BLOCKED };
int kk__nvfp4_gemv_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__nvfp4_gemv_flops(const kk_op_params *p);
double kk__nvfp4_gemv_bytes(const kk_op_params *p);
kk_status kk__nvfp4_gemv_reference(const kk_op_params *p, const double *const *in,
                                   double *const *out);

extern const kk_op kk__op_nvfp4_gemv;

#ifdef __cplusplus
}
#endif
#endif

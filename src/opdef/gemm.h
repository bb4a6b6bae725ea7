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

/* TF32's f32 row (docs/kernels/gemm.md, "The f32 tolerance"): each input
 * rounded to 10 mantissa bits (relative error <= 2^-11), so a product is off
 * by at most (2 * 2^-11 + 2^-22) |a b|; with the f32 accumulation's
 * KK__ACC_F32, acc = 2^-10 + 2^-21. L2: one product's expected relative error
 * is at most sqrt(2) 2^-11 = 6.9e-4 for inputs of random sign; 3e-3 leaves
 * room for SwiGLU's two products and an activation's slope (the checker's L2
 * floor acc * ||m|| is as loose as the elementwise rule with this acc). */
#define KK__ACC_TF32 (0x1p-10 + 0x1p-21)
#define KK__L2_TF32 3e-3
/* The f32 row widened to TF32's (acc and l2; atol and rtol kept). */
void kk__gemm_tf32_row(kk_tolerance *t);
/* gemm's and linear's tolerance_on hook: f32 on CUDA with the active
 * configuration's tf32_allowed on takes kk__gemm_tf32_row. */
void kk__gemm_tolerance_on(kk_backend_kind backend, kk_tolerance *t);

extern const kk_op kk__op_gemm;

#ifdef __cplusplus
}
#endif
#endif

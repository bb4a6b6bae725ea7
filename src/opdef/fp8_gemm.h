/* Internal: the `fp8_gemm` op's registry row (src/opdef/fp8_gemm.c):
 * c[M,N] = (sa * sb) * sum_k a[m,k] * b[n,k], fp8 a [M,K] and b [N,K] (e5m2 x
 * e5m2 refused, as cuBLASLt does), per-tensor f32 scales, f32 accumulation, c
 * bf16 or f32: cuBLASLt's FP8 GEMM in the TN layout. The row is a macro so
 * that registry.c's table takes it with one line. */
#ifndef KK_OPDEF_FP8_GEMM_H
#define KK_OPDEF_FP8_GEMM_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__FP8_M,
    KK__FP8_N,
    KK__FP8_K,
    KK__FP8_A_DTYPE,
    KK__FP8_B_DTYPE,
    KK__FP8_C_DTYPE,
    KK__FP8_NPARAMS
};

extern const kk_op_param kk__fp8_gemm_params[KK__FP8_NPARAMS];
kk_status kk__fp8_gemm_validate(const kk_op_params *p);
int kk__fp8_gemm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__fp8_gemm_flops(const kk_op_params *p);
double kk__fp8_gemm_bytes(const kk_op_params *p);
kk_status kk__fp8_gemm_reference(const kk_op_params *p, const double *const *in,
                                 double *const *out);

/* The inputs are exact (fp8 products are exact in f32), so the error is f32
 * accumulation and the one rounding of c (docs/harness.md, "Tolerances"):
 * f32 as the GEMMs' f32 row; bf16 two unit roundoffs (2^-7), half the GEMMs'
 * bf16 rtol, which allows for a second rounding that fp8_gemm never has. */
#define KK__FP8_GEMM_TOLERANCES                                                                    \
    .ntolerances = 2, .tolerances = {{.dtype = KK_DTYPE_F32,                                       \
                                      .atol = 1e-4,                                                \
                                      .rtol = 1e-4,                                                \
                                      .l2 = 1e-5,                                                  \
                                      .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2},             \
                                     {.dtype = KK_DTYPE_BF16,                                      \
                                      .atol = 1e-3,                                                \
                                      .rtol = 7.8125e-3,                                           \
                                      .l2 = 5e-3,                                                  \
                                      .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2}}

extern const kk_op kk__op_fp8_gemm;

#ifdef __cplusplus
}
#endif
#endif

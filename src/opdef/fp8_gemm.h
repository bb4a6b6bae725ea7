/* Internal: the `fp8_gemm` op's registry row (src/opdef/fp8_gemm.c):
 * c[M,N] = sum_k a[m,k] * b[n,k] scaled, fp8 a [M,K] and b [N,K] (e5m2 x e5m2
 * refused, as cuBLASLt does), f32 scales per tensor, per row (token / output
 * channel) or per block (1x128 of a, 128x128 of b, DeepSeek-V3), f32
 * accumulation, c bf16 or f32: cuBLASLt's FP8 GEMM in the TN layout. */
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
    KK__FP8_SCALING,
    KK__FP8_NPARAMS
};

/* Values of `scaling`: the same numbers as kk_fp8_scaling (kernelkit/ops.h). */
enum { KK__FP8_TENSOR, KK__FP8_ROWWISE, KK__FP8_BLOCK };
#define KK__FP8_GROUP 128 /* block scaling: 1x128 groups of a, 128x128 blocks of b */

/* Block scaling: the groups along K, ceil(K/128). */
static inline int64_t kk__fp8_groups(int64_t K) { return (K + KK__FP8_GROUP - 1) / KK__FP8_GROUP; }

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
 * bf16 rtol, which allows for a second rounding that fp8_gemm never has.
 * The same rows hold for every scaling. Tensor and row-wise: the scales are an
 * epilogue, two f32 roundings (2u = 1.2e-7 relative). Block: c = sum_g w_g
 * S_g, w_g = sa[m,g] sb[n/128,g], S_g the group sums of exact products; the
 * CPU kernel computes each S_g in f32 (one sgemm per 128 of K), rounds w_g
 * once and adds w_g S_g in f32 over the G = ceil(K/128) groups (DeepGEMM's
 * promotion, the reference's order): (128 + G + 2) u of sum |terms| at
 * worst, about sqrt(K) u typically, the f32 accumulation the GEMMs' f32 row
 * bounds over K up to 16k. The terms are the tensor mode's times |w_g|
 * (normal(0, 1) scales in the harness), so the atol floors keep their
 * meaning: K = 16384 measures 2.6e-4 abs at most (on outputs of |c| ~ 100),
 * relative L2 2.1e-7. Folding the scales into the operands instead (a *
 * sa, b * sb rounded, then one product) makes no product exact and failed
 * the f32 atol on small outputs (|c| ~ 0.5) at K = 8192 (2 of 9 seeds). */
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

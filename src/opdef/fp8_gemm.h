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

/* The inputs are exact (fp8 products are exact in f32), so the error is the
 * accumulation and the one rounding of c (docs/harness.md, "Tolerances";
 * docs/kernels/fp8_gemm.md, "Tolerance"). The rows below are the CPU
 * kernel's, which accumulates in f32 (one sgemm per 128 of K for blocks): the
 * GEMMs' f32 accumulation term (KK__ACC_F32 times the magnitude m = sum_k
 * |w_k a_mk b_nk|, kk__fp8_gemm_magnitude) and rel L2 1e-5 in f32 (measured
 * 2.1e-7 at K = 16384); bf16 two unit roundoffs (2^-7, half the GEMMs' bf16
 * rtol: fp8_gemm rounds once). On CUDA (kk__fp8_gemm_tolerance_on) Hopper's
 * FP8 tensor cores add each k32 step's products into an accumulator aligned to
 * the largest exponent and kept to about 14 bits, so a 128-K block (4 steps,
 * then promoted into f32 registers with its scales, as DeepGEMM does) errs by
 * up to 4 * 2^-13 = 2^-11 of its sum |w a b|: acc 2^-11 in both rows, and rel
 * L2 1e-3 in f32 (measured on the H100 with promotion: 1.2e-4 at K =
 * 128..16384; without it, KK_FP8_FAST_ACCUM=1, 1.3e-3 at K = 4096, which the
 * row refuses on purpose). */
#define KK__ACC_FP8_TENSOR_CORES 0x1p-11
#define KK__L2_FP8_TENSOR_CORES 1e-3
#define KK__FP8_GEMM_TOLERANCES                                                                    \
    .ntolerances = 2,                                                                              \
    .tolerances = {KK__TOL_ACC(KK_DTYPE_F32, 1e-4, 1e-4, 1e-5, KK__BOTH, 0, KK__ACC_F32),          \
                   KK__TOL_ACC(KK_DTYPE_BF16, 1e-3, 7.8125e-3, 5e-3, KK__BOTH, 0, KK__ACC_F32)}

/* The CUDA kernel's rows: the tensor cores' accumulation (above). */
void kk__fp8_gemm_tolerance_on(kk_backend_kind backend, kk_tolerance *t);

extern const kk_op kk__op_fp8_gemm;

#ifdef __cplusplus
}
#endif
#endif

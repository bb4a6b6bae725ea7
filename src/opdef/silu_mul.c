/* The `silu_mul` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/silu_mul_cpu.c).
 *
 *   y[m,j] = g[m,j] / (1 + exp(-g[m,j])) * u[m,j]
 *
 * packed=1: one input gu [M, 2N], g = gu[:, :N], u = gu[:, N:]; packed=0:
 * g [M, N] and u [M, N]. y [M, N]; one dtype (f32, f16, bf16). */
#include <math.h>

#include "opdef/silu_mul.h"

static const kk_op_param params[KK__SILU_NPARAMS] = {
    [KK__SILU_M] = KK__P_INT("M", 1, KK__DIM_MAX, 0, 256, "rows (tokens)"),
    [KK__SILU_N] = KK__P_INT("N", 1, KK__DIM_MAX, 0, 1024, "columns of y (intermediate size)"),
    [KK__SILU_PACKED] = KK__P_BOOL("packed", 1,
                                   "1: one input gu [M,2N], g then u in each row; "
                                   "0: two inputs g, u [M,N]"),
    [KK__SILU_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of every tensor"),
};

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__SILU_M], N = p->i[KK__SILU_N];
    const kk_dtype dt = (kk_dtype)p->i[KK__SILU_DTYPE];
    int k = 0;
    if (p->i[KK__SILU_PACKED]) {
        k += kk__tensor(&out[k], "gu", dt, 0, 2, (int64_t[]){M, 2 * N});
    } else {
        k += kk__tensor(&out[k], "g", dt, 0, 2, (int64_t[]){M, N});
        k += kk__tensor(&out[k], "u", dt, 0, 2, (int64_t[]){M, N});
    }
    k += kk__tensor(&out[k], "y", dt, 1, 2, (int64_t[]){M, N});
    return k;
}

/* Per element: exp (counted as one), the add, the division, the product. */
static double flops(const kk_op_params *p) {
    return 4.0 * (double)p->i[KK__SILU_M] * (double)p->i[KK__SILU_N];
}

static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t M = p->i[KK__SILU_M], N = p->i[KK__SILU_N];
    const int packed = (int)p->i[KK__SILU_PACKED];
    double *y = out[0];
    for (int64_t m = 0; m < M; m++) {
        const double *g = packed ? in[0] + m * 2 * N : in[0] + m * N;
        const double *u = packed ? g + N : in[1] + m * N;
        for (int64_t j = 0; j < N; j++) y[m * N + j] = g[j] / (1.0 + exp(-g[j])) * u[j];
    }
    return KK_OK;
}

/* Tolerances: the row ops' (KK__ROW_OP_TOLERANCES). The kernel's silu is
 * cpu_gemm_internal.h's kk__silu, within 1e-6 relative of libm's on
 * [-20, 20] (tests/test_cpu_gemm.c), then one product by u: f32 allows 1e-5
 * (an atol of 1e-5 for products near zero); f16 and bf16 are the one
 * rounding of y. Nothing cancels, so a wrong function (sigmoid alone, gate
 * and up swapped, the halves of gu mixed up) moves y by O(|y|). */
const kk_op kk__op_silu_mul = {
    .id = KK__OP_ID_silu_mul,
    .name = "silu_mul",
    .summary = "y = silu(g) * u; g, u [M,N] or packed gu [M,2N]; y [M,N]",
    .nparams = KK__SILU_NPARAMS,
    .params = params,
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    KK__ROW_OP_TOLERANCES,
};

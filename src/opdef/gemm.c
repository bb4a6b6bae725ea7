/* GEMM: c = a . b^T with a [M,K], b [N,K], c [M,N], all row-major: the "TN"
 * layout of cuBLASLt and of a Linear layer's weight (ANCHORS: y = x.W^T).
 * The reference is the definition, one dot product per output in float64. */
#include <math.h>

#include "core/config_active.h"
#include "opdef/gemm.h"

int kk__gemm_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__GEMM_M], N = p->i[KK__GEMM_N], K = p->i[KK__GEMM_K];
    const kk_dtype dt = (kk_dtype)p->i[KK__GEMM_DTYPE];
    int n = 0;
    n += kk__tensor(&out[n], "a", dt, 0, 2, (int64_t[]){M, K});
    n += kk__tensor(&out[n], "b", dt, 0, 2, (int64_t[]){N, K});
    n += kk__tensor(&out[n], "c", dt, 1, 2, (int64_t[]){M, N});
    return n;
}

/* 2MNK: one multiply and one add per (m, n, k). */
double kk__gemm_flops(const kk_op_params *p) {
    return 2.0 * (double)p->i[KK__GEMM_M] * (double)p->i[KK__GEMM_N] * (double)p->i[KK__GEMM_K];
}

kk_status kk__gemm_reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t M = p->i[KK__GEMM_M], N = p->i[KK__GEMM_N], K = p->i[KK__GEMM_K];
    const double *a = in[0], *b = in[1];
    double *c = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += a[m * K + k] * b[n * K + k];
            c[m * N + n] = acc;
        }
    return KK_OK;
}

/* The error scale of each output: m[m,n] = sum_k |a_mk * b_nk|, what an f32
 * accumulation's error is proportional to (docs/harness.md, "Tolerances"). */
kk_status kk__gemm_magnitude(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t M = p->i[KK__GEMM_M], N = p->i[KK__GEMM_N], K = p->i[KK__GEMM_K];
    const double *a = in[0], *b = in[1];
    double *c = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += fabs(a[m * K + k] * b[n * K + k]);
            c[m * N + n] = acc;
        }
    return KK_OK;
}

void kk__gemm_tf32_row(kk_tolerance *t) {
    if (t->dtype != KK_DTYPE_F32) return;
    t->acc = KK__ACC_TF32;
    t->l2 = KK__L2_TF32;
}

/* The CUDA kernels of f32 read the same configuration at each launch
 * (gemm_f32.cu); the CPU's are exact whatever it says. */
void kk__gemm_tolerance_on(kk_backend_kind backend, kk_tolerance *t) {
    if (backend == KK_BACKEND_CUDA && t->dtype == KK_DTYPE_F32 && kk__config_tf32_allowed())
        kk__gemm_tf32_row(t);
}

static const kk_op_param gemm_params[KK__GEMM_NPARAMS] = {
    [KK__GEMM_M] = KK__P_INT("M", 1, KK__DIM_MAX, 1, 256, "rows of a and c"),
    [KK__GEMM_N] = KK__P_INT("N", 1, KK__DIM_MAX, 1, 256, "rows of b, columns of c"),
    [KK__GEMM_K] =
        KK__P_INT("K", 1, KK__DIM_MAX, 1, 256, "the reduced dimension: columns of a and b"),
    [KK__GEMM_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of a, b and c"),
};

const kk_op kk__op_gemm = {
    .id = KK__OP_ID_gemm,
    .name = "gemm",
    .summary = "c = a . b^T; a [M,K], b [N,K], c [M,N]",
    .nparams = KK__GEMM_NPARAMS,
    .params = gemm_params,
    .describe = kk__gemm_describe,
    .flops = kk__gemm_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__gemm_reference,
    .magnitude = kk__gemm_magnitude,
    KK__FLOAT_TOLERANCES(0),
    .tolerance_on = kk__gemm_tolerance_on,
    .grow_param = "M",
};

/* GEMM: c = a . b^T with a [M,K], b [N,K], c [M,N], all row-major: the "TN"
 * layout of cuBLASLt and of a Linear layer's weight (ANCHORS: y = x.W^T).
 * The reference is the definition, one dot product per output in float64. */
#include "harness/harness_internal.h"

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

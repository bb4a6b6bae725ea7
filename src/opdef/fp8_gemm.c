/* The `fp8_gemm` op: parameters, tensors, work counts and the float64
 * reference (its row is KK__FP8_GEMM_ROW in fp8_gemm.h; the CPU kernel is
 * src/cpu/fp8_gemm_cpu.c): c[m,n] = (sa * sb) * sum_k a[m,k] * b[n,k], a and b
 * K-major ("TN", as cuBLASLt takes them), the definition in float64 on the
 * exactly decoded fp8 values. */
#include "opdef/fp8_gemm.h"

#include "core/error.h"
#include "opdef/opdef.h"

static const char *const fp8_dtypes[] = {"fp8_e4m3", "fp8_e5m2", NULL};
static const char *const out_dtypes[] = {"bf16", "f32", NULL};

#define DIM(nm, h)                                                                                 \
    { .name = nm, .kind = KK_PARAM_INT, .min = 1, .max = INT64_C(1) << 24, .def = 256, .help = h }

const kk_op_param kk__fp8_gemm_params[KK__FP8_NPARAMS] = {
    [KK__FP8_M] = DIM("M", "rows of a and c"),
    [KK__FP8_N] = DIM("N", "rows of b, columns of c"),
    [KK__FP8_K] = DIM("K", "the reduced dimension: columns of a and b"),
    [KK__FP8_A_DTYPE] = {.name = "a_dtype",
                         .kind = KK_PARAM_DTYPE,
                         .choices = fp8_dtypes,
                         .def = KK_DTYPE_FP8_E4M3,
                         .help = "element type of a"},
    [KK__FP8_B_DTYPE] = {.name = "b_dtype",
                         .kind = KK_PARAM_DTYPE,
                         .choices = fp8_dtypes,
                         .def = KK_DTYPE_FP8_E4M3,
                         .help = "element type of b (not e5m2 when a is e5m2)"},
    [KK__FP8_C_DTYPE] = {.name = "c_dtype",
                         .kind = KK_PARAM_DTYPE,
                         .choices = out_dtypes,
                         .def = KK_DTYPE_BF16,
                         .help = "element type of c"},
};

/* cuBLASLt has no e5m2 x e5m2 FP8 GEMM; neither has KernelKit, so that a
 * problem accepted here runs on every backend. */
kk_status kk__fp8_gemm_validate(const kk_op_params *p) {
    if (p->i[KK__FP8_A_DTYPE] == KK_DTYPE_FP8_E5M2 && p->i[KK__FP8_B_DTYPE] == KK_DTYPE_FP8_E5M2)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "fp8_gemm", "b_dtype",
                             "fp8_e4m3 when a_dtype is fp8_e5m2 (e5m2 x e5m2 is not an FP8 GEMM "
                             "cuBLASLt offers)",
                             "fp8_e5m2");
    return KK_OK;
}

int kk__fp8_gemm_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N], K = p->i[KK__FP8_K], one = 1;
    int n = 0;
    n += kk__tensor(&out[n], "a", (kk_dtype)p->i[KK__FP8_A_DTYPE], 0, 2, (int64_t[]){M, K});
    n += kk__tensor(&out[n], "b", (kk_dtype)p->i[KK__FP8_B_DTYPE], 0, 2, (int64_t[]){N, K});
    n += kk__tensor(&out[n], "scale_a", KK_DTYPE_F32, 0, 1, &one);
    n += kk__tensor(&out[n], "scale_b", KK_DTYPE_F32, 0, 1, &one);
    n += kk__tensor(&out[n], "c", (kk_dtype)p->i[KK__FP8_C_DTYPE], 1, 2, (int64_t[]){M, N});
    return n;
}

/* 2MNK, as for gemm; the scaling is an epilogue and not counted. */
double kk__fp8_gemm_flops(const kk_op_params *p) {
    return 2.0 * (double)p->i[KK__FP8_M] * (double)p->i[KK__FP8_N] * (double)p->i[KK__FP8_K];
}

double kk__fp8_gemm_bytes(const kk_op_params *p) { return kk__op_bytes_io(p); }

kk_status kk__fp8_gemm_reference(const kk_op_params *p, const double *const *in,
                                 double *const *out) {
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N], K = p->i[KK__FP8_K];
    const double *a = in[0], *b = in[1], scale = in[2][0] * in[3][0];
    double *c = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += a[m * K + k] * b[n * K + k];
            c[m * N + n] = scale * acc;
        }
    return KK_OK;
}

const kk_op kk__op_fp8_gemm = {
    .id = KK__OP_ID_fp8_gemm,
    .name = "fp8_gemm",
    .summary = "c = (sa.sb) a . b^T; fp8 a [M,K], b [N,K], f32 sa, sb [1]; c bf16/f32 [M,N]",
    .nparams = KK__FP8_NPARAMS,
    .params = kk__fp8_gemm_params,
    .validate = kk__fp8_gemm_validate,
    .describe = kk__fp8_gemm_describe,
    .flops = kk__fp8_gemm_flops,
    .bytes = kk__fp8_gemm_bytes,
    .reference = kk__fp8_gemm_reference,
    KK__FP8_GEMM_TOLERANCES,
    .grow_param = "M",
};

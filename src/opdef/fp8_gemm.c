/* The `fp8_gemm` op: parameters, tensors, work counts and the float64
 * reference (the CPU kernel is src/cpu/fp8_gemm_cpu.c): c[m,n] = sum_k
 * a[m,k] * b[n,k] scaled per tensor (sa * sb), per row (sa[m] * sb[n]) or per
 * block (sa[m,g] * sb[n/128,g] on the sum over group g = k/128), a and b
 * K-major ("TN", as cuBLASLt takes them), the definition in float64 on the
 * exactly decoded fp8 values. */
#include "opdef/fp8_gemm.h"

#include <math.h>

#include "core/error.h"
#include "opdef/opdef.h"

static const char *const fp8_dtypes[] = {"fp8_e4m3", "fp8_e5m2", NULL};
static const char *const out_dtypes[] = {"bf16", "f32", NULL};
static const char *const scalings[] = {"tensor", "rowwise", "block", NULL};

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
    [KK__FP8_SCALING] = KK__P_ENUM("scaling", scalings, KK__FP8_TENSOR,
                                   "tensor: scale_a, scale_b [1]; rowwise: scale_a [M], scale_b "
                                   "[N]; block: scale_a [M,ceil(K/128)] (1x128 groups), scale_b "
                                   "[ceil(N/128),ceil(K/128)] (128x128 blocks), kk_quantize's "
                                   "1x128 and 128x128 layouts"),
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
    const int64_t G = kk__fp8_groups(K), NB = kk__fp8_groups(N);
    int n = 0;
    n += kk__tensor(&out[n], "a", (kk_dtype)p->i[KK__FP8_A_DTYPE], 0, 2, (int64_t[]){M, K});
    n += kk__tensor(&out[n], "b", (kk_dtype)p->i[KK__FP8_B_DTYPE], 0, 2, (int64_t[]){N, K});
    switch (p->i[KK__FP8_SCALING]) {
    case KK__FP8_ROWWISE:
        n += kk__tensor(&out[n], "scale_a", KK_DTYPE_F32, 0, 1, &M);
        n += kk__tensor(&out[n], "scale_b", KK_DTYPE_F32, 0, 1, &N);
        break;
    case KK__FP8_BLOCK:
        n += kk__tensor(&out[n], "scale_a", KK_DTYPE_F32, 0, 2, (int64_t[]){M, G});
        n += kk__tensor(&out[n], "scale_b", KK_DTYPE_F32, 0, 2, (int64_t[]){NB, G});
        break;
    default:
        n += kk__tensor(&out[n], "scale_a", KK_DTYPE_F32, 0, 1, &one);
        n += kk__tensor(&out[n], "scale_b", KK_DTYPE_F32, 0, 1, &one);
        break;
    }
    n += kk__tensor(&out[n], "c", (kk_dtype)p->i[KK__FP8_C_DTYPE], 1, 2, (int64_t[]){M, N});
    return n;
}

/* 2MNK, as for gemm; the scaling is not counted (an epilogue; with block
 * scales 2MN ceil(K/128) more, under 1/128 of the product, as DeepGEMM
 * counts too). */
double kk__fp8_gemm_flops(const kk_op_params *p) {
    return 2.0 * (double)p->i[KK__FP8_M] * (double)p->i[KK__FP8_N] * (double)p->i[KK__FP8_K];
}

double kk__fp8_gemm_bytes(const kk_op_params *p) { return kk__op_bytes_io(p); }

kk_status kk__fp8_gemm_reference(const kk_op_params *p, const double *const *in,
                                 double *const *out) {
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N], K = p->i[KK__FP8_K];
    const int64_t G = kk__fp8_groups(K);
    const double *a = in[0], *b = in[1], *sa = in[2], *sb = in[3];
    const int64_t scaling = p->i[KK__FP8_SCALING];
    double *c = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double *am = a + m * K, *bn = b + n * K;
            double acc = 0.0;
            if (scaling == KK__FP8_BLOCK) { /* each group's exact sum, then its scales */
                for (int64_t g = 0; g < G; g++) {
                    const int64_t k1 = (g + 1) * KK__FP8_GROUP < K ? (g + 1) * KK__FP8_GROUP : K;
                    double sum = 0.0;
                    for (int64_t k = g * KK__FP8_GROUP; k < k1; k++) sum += am[k] * bn[k];
                    acc += sa[m * G + g] * sb[(n / KK__FP8_GROUP) * G + g] * sum;
                }
                c[m * N + n] = acc;
                continue;
            }
            for (int64_t k = 0; k < K; k++) acc += am[k] * bn[k];
            c[m * N + n] = scaling == KK__FP8_ROWWISE ? sa[m] * sb[n] * acc : sa[0] * sb[0] * acc;
        }
    return KK_OK;
}

/* The error scale of each output: m[m,n] = sum_k |w * a_mk * b_nk|, w the
 * scales that multiply the term (per tensor, row or 128-block), what the
 * accumulation's error is proportional to. */
kk_status kk__fp8_gemm_magnitude(const kk_op_params *p, const double *const *in,
                                 double *const *out) {
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N], K = p->i[KK__FP8_K];
    const int64_t G = kk__fp8_groups(K), scaling = p->i[KK__FP8_SCALING];
    const double *a = in[0], *b = in[1], *sa = in[2], *sb = in[3];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double *am = a + m * K, *bn = b + n * K;
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double w = sa[0] * sb[0];
                if (scaling == KK__FP8_ROWWISE) w = sa[m] * sb[n];
                if (scaling == KK__FP8_BLOCK) {
                    const int64_t g = k / KK__FP8_GROUP;
                    w = sa[m * G + g] * sb[(n / KK__FP8_GROUP) * G + g];
                }
                acc += fabs(w * am[k] * bn[k]);
            }
            out[0][m * N + n] = acc;
        }
    return KK_OK;
}

void kk__fp8_gemm_tolerance_on(kk_backend_kind backend, kk_tolerance *t) {
    if (backend != KK_BACKEND_CUDA) return;
    t->acc = KK__ACC_FP8_TENSOR_CORES;
    if (t->dtype == KK_DTYPE_F32 && t->l2 < KK__L2_FP8_TENSOR_CORES)
        t->l2 = KK__L2_FP8_TENSOR_CORES;
}

const kk_op kk__op_fp8_gemm = {
    .id = KK__OP_ID_fp8_gemm,
    .name = "fp8_gemm",
    .summary = "c = a . b^T, f32 scales per tensor/row/block; fp8 a [M,K], b [N,K]; c bf16/f32",
    .nparams = KK__FP8_NPARAMS,
    .params = kk__fp8_gemm_params,
    .validate = kk__fp8_gemm_validate,
    .describe = kk__fp8_gemm_describe,
    .flops = kk__fp8_gemm_flops,
    .bytes = kk__fp8_gemm_bytes,
    .reference = kk__fp8_gemm_reference,
    .magnitude = kk__fp8_gemm_magnitude,
    .tolerance_on = kk__fp8_gemm_tolerance_on, /* the FP8 tensor cores' accumulation */
    KK__FP8_GEMM_TOLERANCES,
    .grow_param = "M",
};

/* NVFP4 block-scaled GEMV, the GPU MODE nvfp4_gemv problem: the op's row and
 * its float64 reference, c[l,m] = sum_k (a*sa*ga)[l,m,k] * (b*sb*gb)[l,0,k].
 * The inputs arrive decoded to their exact values, so the reference only
 * dequantizes and takes the dot product. Layouts (plain and 128x4 blocked
 * scales): docs/kernels/nvfp4_gemv.md, "Semantics". */
#include "opdef/nvfp4_gemv.h"
#include "kernelkit/quant.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The scale tensor of a matrix of `rows` rows: plain or blocked. */
static int scale_tensor(kk_op_tensor *t, const char *name, int blocked, int64_t L, int64_t rows,
                        int64_t K) {
    if (blocked)
        return kk__tensor(t, name, KK_DTYPE_FP8_E4M3, 0, 4,
                          (int64_t[]){L, cdiv(rows, 128), K / 64, 512});
    return kk__tensor(t, name, KK_DTYPE_FP8_E4M3, 0, 3, (int64_t[]){L, rows, K / 16});
}

int kk__nvfp4_gemv_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__GEMV_M], K = p->i[KK__GEMV_K], L = p->i[KK__GEMV_L];
    const int blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED;
    int n = 0;
    n += kk__tensor(&out[n], "a", KK_DTYPE_E2M1, 0, 3, (int64_t[]){L, M, K});
    n += kk__tensor(&out[n], "b", KK_DTYPE_E2M1, 0, 3, (int64_t[]){L, 1, K});
    n += scale_tensor(&out[n], "sa", blocked, L, M, K);
    n += scale_tensor(&out[n], "sb", blocked, L, 1, K);
    if (p->i[KK__GEMV_GLOBAL]) {
        n += kk__tensor(&out[n], "ga", KK_DTYPE_F32, 0, 1, (int64_t[]){1});
        n += kk__tensor(&out[n], "gb", KK_DTYPE_F32, 0, 1, (int64_t[]){1});
    }
    n += kk__tensor(&out[n], "c", KK_DTYPE_F16, 1, 3, (int64_t[]){L, M, 1});
    return n;
}

/* A multiply-add per element of a. The op is memory-bound: bytes matter. */
double kk__nvfp4_gemv_flops(const kk_op_params *p) {
    return 2.0 * (double)p->i[KK__GEMV_M] * (double)p->i[KK__GEMV_K] * (double)p->i[KK__GEMV_L];
}

/* ANCHORS' bytes: a and its scales (M*K*L/2 + M*K*L/16), b and its scales,
 * c in f16, the global scales. Only the scales that exist count: the padding
 * of the blocked layout is never read for a result. */
double kk__nvfp4_gemv_bytes(const kk_op_params *p) {
    const double M = (double)p->i[KK__GEMV_M], K = (double)p->i[KK__GEMV_K];
    const double L = (double)p->i[KK__GEMV_L];
    const double globals = p->i[KK__GEMV_GLOBAL] ? 8.0 : 0.0;
    return M * K * L / 2 + M * K * L / 16 + K * L / 2 + K * L / 16 + 2 * M * L + globals;
}

/* Scale of (batch l, row i, scale column j) of a matrix of `rows` rows. */
static double scale_at(const double *s, int blocked, int64_t rows, int64_t K, int64_t l, int64_t i,
                       int64_t j) {
    if (blocked) return s[kk_nvfp4_blocked_offset(rows, K / 16, l, i, j)];
    return s[(l * rows + i) * (K / 16) + j];
}

kk_status kk__nvfp4_gemv_reference(const kk_op_params *p, const double *const *in,
                                   double *const *out) {
    const int64_t M = p->i[KK__GEMV_M], K = p->i[KK__GEMV_K], L = p->i[KK__GEMV_L];
    const int blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED;
    const int global = (int)p->i[KK__GEMV_GLOBAL];
    const double *a = in[0], *b = in[1], *sa = in[2], *sb = in[3];
    const double ga = global ? in[4][0] : 1.0, gb = global ? in[5][0] : 1.0;
    double *c = out[0];
    for (int64_t l = 0; l < L; l++)
        for (int64_t m = 0; m < M; m++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t j = k / 16;
                const double sav = scale_at(sa, blocked, M, K, l, m, j);
                const double av = a[(l * M + m) * K + k] * sav * ga;
                const double bv = b[l * K + k] * scale_at(sb, blocked, 1, K, l, 0, j) * gb;
                acc += av * bv;
            }
            c[l * M + m] = acc;
        }
    return KK_OK;
}

static const char *const scale_layouts[] = {"plain", "blocked", NULL};
static const kk_op_param gemv_params[KK__GEMV_NPARAMS] = {
    [KK__GEMV_M] = KK__P_INT("M", 1, KK__DIM_MAX, 1, 128, "rows of a and c"),
    [KK__GEMV_K] =
        KK__P_INT("K", 64, KK__DIM_MAX, 64, 256, "the reduced dimension, a multiple of 64"),
    [KK__GEMV_L] = KK__P_INT("L", 1, 4096, 1, 1, "batch (outermost)"),
    [KK__GEMV_LAYOUT] =
        KK__P_ENUM("scale_layout", scale_layouts, KK__GEMV_PLAIN, "plain or cuBLAS 128x4 blocked"),
    [KK__GEMV_GLOBAL] =
        KK__P_BOOL("global", 0, "f32 global scales ga and gb multiply a's and b's scales"),
};

/* A batch of one half of the time. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    kk__fuzz_set_int(p, "L", kk__rng_below(r, 2) ? 1 : kk__fuzz_size(r, 4));
}

/* Scales for long K: keep c = sum of K products inside f16's range. */
static int scale_shift(const kk_op_params *p) {
    int shift = 0;
    for (int64_t k = p->i[KK__GEMV_K]; k > 16384; k /= 4) shift++;
    return shift;
}

/* e2m1 codes, e4m3 scales, f32 global scales (see kk__fill). */
static kk__fill_rule fill(const kk_op_params *p, int k) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    p->op->describe(p, t);
    if (t[k].dtype == KK_DTYPE_E2M1) return (kk__fill_rule){KK__FILL_NVFP4_CODES, 0};
    if (t[k].dtype == KK_DTYPE_FP8_E4M3)
        return (kk__fill_rule){KK__FILL_NVFP4_SCALES, scale_shift(p)};
    return (kk__fill_rule){KK__FILL_GLOBAL_SCALE, 0};
}

const kk_op kk__op_nvfp4_gemv = {
    .id = KK__OP_ID_nvfp4_gemv,
    .name = "nvfp4_gemv",
    .summary = "c[l,m] = sum_k a*sa*ga * b*sb*gb; e2m1 a [L,M,K], b [L,1,K]; c f16",
    .nparams = KK__GEMV_NPARAMS,
    .params = gemv_params,
    .describe = kk__nvfp4_gemv_describe,
    .flops = kk__nvfp4_gemv_flops,
    .bytes = kk__nvfp4_gemv_bytes,
    .reference = kk__nvfp4_gemv_reference,
    .ntolerances = 1,
    .tolerances = {KK__TOL(KK_DTYPE_F16, 1e-3, 1e-3, 0.0, KK_CHECK_ELEMENTWISE,
                           KK_CHECK_ALLOW_NONFINITE)},
    .fuzz = fuzz,
    .grow_param = "M",
    .fill = fill,
};

/* The `softmax` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/softmax_cpu.c):
 *   y[r,i] = exp(s[r,i] - max_j s[r,j]) / sum_j exp(s[r,j] - max_k s[r,k]),  s = x * scale
 * x, y [rows, n] of one dtype; scale >= 0 (0 gives the uniform 1/n); with
 * causal=1, j and k run over the keys row r sees (softmax.h). */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "opdef/softmax.h"

const kk_op_param kk__softmax_params[KK__SMX_NPARAMS] = {
    [KK__SMX_ROWS] = {.name = "rows",
                      .kind = KK_PARAM_INT,
                      .min = 1,
                      .max = INT64_C(1) << 24,
                      .def = 256,
                      .help = "rows of x and y"},
    [KK__SMX_N] = {.name = "n",
                   .kind = KK_PARAM_INT,
                   .min = 1,
                   .max = INT64_C(1) << 24,
                   .def = 1024,
                   .help = "the softmax dimension: columns of x and y"},
    [KK__SMX_SCALE] = {.name = "scale",
                       .kind = KK_PARAM_FLOAT,
                       .fmin = 0.0,
                       .fmax = 1e4,
                       .fdef = 1.0,
                       .help = "x is multiplied by it before the softmax"},
    [KK__SMX_DTYPE] = {.name = "dtype",
                       .kind = KK_PARAM_DTYPE,
                       .choices = kk__float_dtypes,
                       .def = KK_DTYPE_BF16,
                       .help = "element type of x and y"},
    [KK__SMX_CAUSAL] = KK__P_BOOL("causal", 0,
                                  "row r is query i = r % sq of n keys; keys j > i + n - sq get 0 "
                                  "(bottom-right aligned, as attention)"),
    [KK__SMX_SQ] = KK__P_INT("sq", 0, INT64_C(1) << 24, 1, 0,
                             "rows per attention matrix (queries), a divisor of rows; 0 = rows"),
};

kk_status kk__softmax_validate(const kk_op_params *p) {
    const int64_t rows = p->i[KK__SMX_ROWS], sq = p->i[KK__SMX_SQ];
    if (sq == 0 || rows % sq == 0) return KK_OK;
    char expected[96];
    snprintf(expected, sizeof expected, "a divisor of rows = %lld (0 = rows)", (long long)rows);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "softmax", "sq", expected, "%lld", (long long)sq);
}

/* Query i of a matrix sees keys j <= i + n - sq: kk__attention_key_range's
 * causal bound with Sq = sq, Sk = n. */
int64_t kk__softmax_visible(const kk_op_params *p, int64_t r) {
    const int64_t n = p->i[KK__SMX_N];
    if (!p->i[KK__SMX_CAUSAL]) return n;
    const int64_t sq = p->i[KK__SMX_SQ] ? p->i[KK__SMX_SQ] : p->i[KK__SMX_ROWS];
    const int64_t v = r % sq + n - sq + 1;
    return v < 0 ? 0 : v > n ? n : v;
}

int kk__softmax_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t shape[2] = {p->i[KK__SMX_ROWS], p->i[KK__SMX_N]};
    const kk_dtype dt = (kk_dtype)p->i[KK__SMX_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 2, shape);
    k += kk__tensor(&out[k], "y", dt, 1, 2, shape);
    return k;
}

/* Per visible element: the max, the subtraction and scaling, exp (as one),
 * the sum and the normalization. Query i of a causal matrix sees
 * max(0, i + c) keys, c = n - sq + 1: an arithmetic series from i0. */
double kk__softmax_flops(const kk_op_params *p) {
    const double rows = (double)p->i[KK__SMX_ROWS], n = (double)p->i[KK__SMX_N];
    if (!p->i[KK__SMX_CAUSAL]) return 5.0 * rows * n;
    const int64_t sq = p->i[KK__SMX_SQ] ? p->i[KK__SMX_SQ] : p->i[KK__SMX_ROWS];
    const int64_t c = p->i[KK__SMX_N] - sq + 1, i0 = c < 1 ? 1 - c : 0;
    const double per_matrix = (double)(sq - i0) * (double)(i0 + c + p->i[KK__SMX_N]) / 2.0;
    return 5.0 * per_matrix * (rows / (double)sq);
}

kk_status kk__softmax_reference(const kk_op_params *p, const double *const *in,
                                double *const *out) {
    const int64_t rows = p->i[KK__SMX_ROWS], n = p->i[KK__SMX_N];
    const double scale = p->f[KK__SMX_SCALE];
    const double *x = in[0];
    double *y = out[0];
    for (int64_t r = 0; r < rows; r++) {
        const int64_t v = kk__softmax_visible(p, r); /* keys past v are masked: 0 */
        double m = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < v; i++) m = fmax(m, x[r * n + i] * scale);
        for (int64_t i = 0; i < v; i++) sum += exp(x[r * n + i] * scale - m);
        for (int64_t i = 0; i < n; i++)
            y[r * n + i] = i < v ? exp(x[r * n + i] * scale - m) / sum : 0.0;
    }
    return KK_OK;
}

/* Scales other than 1 half of the time; with the causal mask (drawn half of
 * the time), 1 to 4 matrices of sq rows, so sq is below, at or above n. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (kk__rng_below(r, 2)) kk__fuzz_set_float(p, "scale", 0.05 + 4.0 * kk__rng_uniform(r));
    if (!p->i[KK__SMX_CAUSAL]) return;
    const int64_t m = 1 + kk__rng_below(r, 4), sq = p->i[KK__SMX_ROWS] / m;
    kk__fuzz_set_int(p, "sq", sq > 0 ? sq : 1);
    kk__fuzz_set_int(p, "rows", (sq > 0 ? sq : 1) * m);
}

const kk_op kk__op_softmax = {
    .id = KK__OP_ID_softmax,
    .name = "softmax",
    .summary = "y = softmax(x * scale) along the last dim, optionally causal; x, y [rows,n]",
    .nparams = KK__SMX_NPARAMS,
    .params = kk__softmax_params,
    .validate = kk__softmax_validate,
    .describe = kk__softmax_describe,
    .flops = kk__softmax_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__softmax_reference,
    KK__SOFTMAX_TOLERANCES,
    .fuzz = fuzz,
};

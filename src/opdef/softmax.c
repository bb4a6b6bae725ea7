/* The `softmax` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/softmax_cpu.c):
 *   y[r,i] = exp(s[r,i] - max_j s[r,j]) / sum_j exp(s[r,j] - max_k s[r,k]),  s = x * scale
 * x, y [rows, n] of one dtype; scale >= 0 (0 gives the uniform 1/n). */
#include <math.h>

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
};

int kk__softmax_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t shape[2] = {p->i[KK__SMX_ROWS], p->i[KK__SMX_N]};
    const kk_dtype dt = (kk_dtype)p->i[KK__SMX_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 2, shape);
    k += kk__tensor(&out[k], "y", dt, 1, 2, shape);
    return k;
}

/* Per element: the max, the subtraction and scaling, exp (as one), the sum
 * and the normalization. */
double kk__softmax_flops(const kk_op_params *p) {
    return 5.0 * (double)p->i[KK__SMX_ROWS] * (double)p->i[KK__SMX_N];
}

kk_status kk__softmax_reference(const kk_op_params *p, const double *const *in,
                                double *const *out) {
    const int64_t rows = p->i[KK__SMX_ROWS], n = p->i[KK__SMX_N];
    const double scale = p->f[KK__SMX_SCALE];
    const double *x = in[0];
    double *y = out[0];
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < n; i++) m = fmax(m, x[r * n + i] * scale);
        for (int64_t i = 0; i < n; i++) sum += exp(x[r * n + i] * scale - m);
        for (int64_t i = 0; i < n; i++) y[r * n + i] = exp(x[r * n + i] * scale - m) / sum;
    }
    return KK_OK;
}

/* Scales other than 1 half of the time. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (kk__rng_below(r, 2)) kk__fuzz_set_float(p, "scale", 0.05 + 4.0 * kk__rng_uniform(r));
}

const kk_op kk__op_softmax = {
    .id = KK__OP_ID_softmax,
    .name = "softmax",
    .summary = "y = softmax(x * scale) along the last dim; x, y [rows,n]",
    .nparams = KK__SMX_NPARAMS,
    .params = kk__softmax_params,
    .describe = kk__softmax_describe,
    .flops = kk__softmax_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__softmax_reference,
    KK__SOFTMAX_TOLERANCES,
    .fuzz = fuzz,
};

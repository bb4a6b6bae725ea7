/* The `layernorm` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/layernorm_cpu.c):
 *   y[r,i] = (x[r,i] - mean) / sqrt(var + eps) * w[i] + b[i]
 * with the biased variance; x, y [rows, n]; w, b [n] with affine=1, else y is
 * the normalized x. All of one dtype. */
#include <math.h>

#include "opdef/opdef.h"
#include "opdef/layernorm.h"

const kk_op_param kk__layernorm_params[KK__LN_NPARAMS] = {
    [KK__LN_ROWS] = {.name = "rows",
                     .kind = KK_PARAM_INT,
                     .min = 1,
                     .max = INT64_C(1) << 24,
                     .def = 256,
                     .help = "rows of x and y (tokens)"},
    [KK__LN_N] = {.name = "n",
                  .kind = KK_PARAM_INT,
                  .min = 1,
                  .max = INT64_C(1) << 24,
                  .def = 1024,
                  .help = "the normalized dimension: columns of x and y"},
    [KK__LN_EPS] =
        {.name = "eps",
         .kind = KK_PARAM_FLOAT,
         .fmin = 1e-12,
         .fmax = 1.0,
         .fdef = 1e-5,
         .help = "added to the variance inside the square root; > 0, so a constant row gives 0"},
    [KK__LN_AFFINE] = {.name = "affine",
                       .kind = KK_PARAM_BOOL,
                       .min = 0,
                       .max = 1,
                       .def = 1,
                       .help = "scale by w [n] and shift by b [n]"},
    [KK__LN_DTYPE] = {.name = "dtype",
                      .kind = KK_PARAM_DTYPE,
                      .choices = kk__float_dtypes,
                      .def = KK_DTYPE_BF16,
                      .help = "element type of x, w, b and y"},
};

int kk__layernorm_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t rows = p->i[KK__LN_ROWS], n = p->i[KK__LN_N];
    const kk_dtype dt = (kk_dtype)p->i[KK__LN_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 2, (int64_t[]){rows, n});
    if (p->i[KK__LN_AFFINE]) {
        k += kk__tensor(&out[k], "w", dt, 0, 1, (int64_t[]){n});
        k += kk__tensor(&out[k], "b", dt, 0, 1, (int64_t[]){n});
    }
    k += kk__tensor(&out[k], "y", dt, 1, 2, (int64_t[]){rows, n});
    return k;
}

/* Per element: an add for the mean, a subtract, square and add for the
 * variance, a subtract and multiply for y, and with affine a multiply-add. */
double kk__layernorm_flops(const kk_op_params *p) {
    const double per = p->i[KK__LN_AFFINE] ? 8.0 : 6.0;
    return per * (double)p->i[KK__LN_ROWS] * (double)p->i[KK__LN_N];
}

kk_status kk__layernorm_reference(const kk_op_params *p, const double *const *in,
                                  double *const *out) {
    const int64_t rows = p->i[KK__LN_ROWS], n = p->i[KK__LN_N];
    const double eps = p->f[KK__LN_EPS];
    const int affine = (int)p->i[KK__LN_AFFINE];
    const double *x = in[0], *w = affine ? in[1] : NULL, *b = affine ? in[2] : NULL;
    double *y = out[0];
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < n; i++) mean += xr[i];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean);
        const double inv = 1.0 / sqrt(var / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            const double v = (xr[i] - mean) * inv;
            y[r * n + i] = affine ? v * w[i] + b[i] : v;
        }
    }
    return KK_OK;
}

/* eps sometimes large enough that a kernel ignoring it fails. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (kk__rng_below(r, 2)) kk__fuzz_set_float(p, "eps", ldexp(1.0, -(int)kk__rng_below(r, 20)));
}

const kk_op kk__op_layernorm = {
    .id = KK__OP_ID_layernorm,
    .name = "layernorm",
    .summary = "y = (x - mean) / sqrt(var + eps) * w + b per row; x, y [rows,n], w, b [n]",
    .nparams = KK__LN_NPARAMS,
    .params = kk__layernorm_params,
    .describe = kk__layernorm_describe,
    .flops = kk__layernorm_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__layernorm_reference,
    KK__NORM_TOLERANCES,
    .fuzz = fuzz,
};

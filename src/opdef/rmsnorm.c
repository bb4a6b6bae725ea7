/* The `rmsnorm` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/rmsnorm_cpu.c).
 *
 *   y[r,i] = x[r,i] / sqrt(mean_j(x[r,j]^2) + eps) * w[i]
 *
 * x, y [rows, n] and w [n], all of one dtype (f32, f16 or bf16). This is
 * torch.nn.RMSNorm with its weight; eps is added inside the square root. */
#include <math.h>

#include "opdef/opdef.h"
#include "opdef/rmsnorm.h"

const kk_op_param kk__rmsnorm_params[KK__RMS_NPARAMS] = {
    [KK__RMS_ROWS] = {.name = "rows",
                      .kind = KK_PARAM_INT,
                      .min = 1,
                      .max = INT64_C(1) << 24,
                      .def = 256,
                      .help = "rows of x and y (tokens)"},
    [KK__RMS_N] = {.name = "n",
                   .kind = KK_PARAM_INT,
                   .min = 1,
                   .max = INT64_C(1) << 24,
                   .def = 1024,
                   .help = "the normalized dimension: columns of x and y, length of w"},
    [KK__RMS_EPS] =
        {.name = "eps",
         .kind = KK_PARAM_FLOAT,
         .fmin = 1e-12,
         .fmax = 1.0,
         .fdef = 1e-6,
         .help = "added to mean(x^2) inside the square root; > 0, so a zero row gives 0, not NaN"},
    [KK__RMS_DTYPE] = {.name = "dtype",
                       .kind = KK_PARAM_DTYPE,
                       .choices = kk__float_dtypes,
                       .def = KK_DTYPE_BF16,
                       .help = "element type of x, w and y"},
};

int kk__rmsnorm_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t rows = p->i[KK__RMS_ROWS], n = p->i[KK__RMS_N];
    const kk_dtype dt = (kk_dtype)p->i[KK__RMS_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 2, (int64_t[]){rows, n});
    k += kk__tensor(&out[k], "w", dt, 0, 1, (int64_t[]){n});
    k += kk__tensor(&out[k], "y", dt, 1, 2, (int64_t[]){rows, n});
    return k;
}

/* Per element: a square and an add for the mean, two multiplies for y. The
 * square root and division per row are not counted. */
double kk__rmsnorm_flops(const kk_op_params *p) {
    return 4.0 * (double)p->i[KK__RMS_ROWS] * (double)p->i[KK__RMS_N];
}

kk_status kk__rmsnorm_reference(const kk_op_params *p, const double *const *in,
                                double *const *out) {
    const int64_t rows = p->i[KK__RMS_ROWS], n = p->i[KK__RMS_N];
    const double eps = p->f[KK__RMS_EPS];
    const double *x = in[0], *w = in[1];
    double *y = out[0];
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += x[r * n + i] * x[r * n + i];
        const double inv = 1.0 / sqrt(sum / (double)n + eps);
        for (int64_t i = 0; i < n; i++) y[r * n + i] = x[r * n + i] * inv * w[i];
    }
    return KK_OK;
}

/* eps sometimes large enough that a kernel ignoring it fails. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (kk__rng_below(r, 2)) kk__fuzz_set_float(p, "eps", ldexp(1.0, -(int)kk__rng_below(r, 20)));
}

const kk_op kk__op_rmsnorm = {
    .id = KK__OP_ID_rmsnorm,
    .name = "rmsnorm",
    .summary = "y = x / sqrt(mean(x^2) + eps) * w per row; x, y [rows,n], w [n]",
    .nparams = KK__RMS_NPARAMS,
    .params = kk__rmsnorm_params,
    .describe = kk__rmsnorm_describe,
    .flops = kk__rmsnorm_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__rmsnorm_reference,
    KK__NORM_TOLERANCES,
    .fuzz = fuzz,
};

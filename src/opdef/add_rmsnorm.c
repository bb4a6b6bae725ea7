/* The `add_rmsnorm` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/add_rmsnorm_cpu.c).
 *
 *   h[r,i] = dtype(x[r,i] + residual[r,i])
 *   y[r,i] = h[r,i] / sqrt(mean_j(h[r,j]^2) + eps) * w[i]
 *
 * x, residual, h, y [rows, n] and w [n], all of one dtype (f32, f16, bf16).
 * y is normalized from h as stored (rounded), as PyTorch computes
 * `h = x + residual; y = rmsnorm(h)` with h held in bf16. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "kernelkit/dtype.h"
#include "opdef/add_rmsnorm.h"
#include "opdef/rmsnorm.h"

static const kk_op_param params[KK__ARN_NPARAMS] = {
    [KK__ARN_ROWS] =
        KK__P_INT("rows", 1, KK__DIM_MAX, 0, 256, "rows of x, residual, h, y (tokens)"),
    [KK__ARN_N] = KK__P_INT("n", 1, KK__DIM_MAX, 0, 1024,
                            "the normalized dimension: columns of x, residual, h, y; length of w"),
    [KK__ARN_EPS] =
        KK__P_FLOAT("eps", 1e-12, 1.0, 1e-6, "added to mean(h^2) inside the square root; > 0"),
    [KK__ARN_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of every tensor"),
};

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t rows = p->i[KK__ARN_ROWS], n = p->i[KK__ARN_N];
    const kk_dtype dt = (kk_dtype)p->i[KK__ARN_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 2, (int64_t[]){rows, n});
    k += kk__tensor(&out[k], "residual", dt, 0, 2, (int64_t[]){rows, n});
    k += kk__tensor(&out[k], "w", dt, 0, 1, (int64_t[]){n});
    k += kk__tensor(&out[k], "h", dt, 1, 2, (int64_t[]){rows, n});
    k += kk__tensor(&out[k], "y", dt, 1, 2, (int64_t[]){rows, n});
    return k;
}

/* The add, then rmsnorm's four per element (square, add; two multiplies). */
static double flops(const kk_op_params *p) {
    return 5.0 * (double)p->i[KK__ARN_ROWS] * (double)p->i[KK__ARN_N];
}

/* h is rounded to the dtype with the library's conversion (one correct
 * rounding of the exact sum), then normalized in float64. */
static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t rows = p->i[KK__ARN_ROWS], n = p->i[KK__ARN_N];
    const double eps = p->f[KK__ARN_EPS];
    const kk_dtype dt = (kk_dtype)p->i[KK__ARN_DTYPE];
    const double *x = in[0], *res = in[1], *w = in[2];
    double *h = out[0], *y = out[1];
    void *narrow = malloc((size_t)n * sizeof(float));
    if (!narrow)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "add_rmsnorm", "no host memory for a row of %lld",
                         (long long)n);
    kk_status st = KK_OK;
    for (int64_t r = 0; r < rows && st == KK_OK; r++) {
        double *hr = h + r * n;
        for (int64_t i = 0; i < n; i++) hr[i] = x[r * n + i] + res[r * n + i];
        st = kk_convert_host(hr, KK_DTYPE_F64, narrow, dt, (size_t)n);
        if (st == KK_OK) st = kk_convert_host(narrow, dt, hr, KK_DTYPE_F64, (size_t)n);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += hr[i] * hr[i];
        const double inv = 1.0 / sqrt(sum / (double)n + eps);
        for (int64_t i = 0; i < n; i++) y[r * n + i] = hr[i] * inv * w[i];
    }
    free(narrow);
    return st;
}

/* eps sometimes large enough that a kernel ignoring it fails. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (kk__rng_below(r, 2)) p->f[KK__ARN_EPS] = ldexp(1.0, -(int)kk__rng_below(r, 20));
}

const kk_op kk__op_add_rmsnorm = {
    .id = KK__OP_ID_add_rmsnorm,
    .name = "add_rmsnorm",
    .summary = "h = x + residual (rounded); y = h / sqrt(mean(h^2) + eps) * w per row",
    .nparams = KK__ARN_NPARAMS,
    .params = params,
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    KK__NORM_TOLERANCES,
    .fuzz = fuzz,
};

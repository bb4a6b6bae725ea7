/* The `rmsnorm_fp8` op: parameters, tensors, work counts, tolerances and the
 * float64 reference (the kernel is src/cpu/rmsnorm_fp8_cpu.c).
 *
 *   y[r,i] = x[r,i] / sqrt(mean_j(x[r,j]^2) + eps) * w[i]
 *   scales[r,g] = max |y[r, group g]| / 448, or 1 when that is 0
 *   q[r,i] = e4m3(y[r,i] / scales[r, i / group])
 *
 * x [rows, n] and w [n] of one dtype (f32, f16, bf16), q [rows, n] fp8 e4m3,
 * scales f32 [rows, n / group] ([rows, 1] for group 0). */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "core/quant_math.h"
#include "opdef/rmsnorm_fp8.h"

static const kk_op_param params[KK__RFP8_NPARAMS] = {
    [KK__RFP8_ROWS] = KK__P_INT("rows", 1, KK__DIM_MAX, 0, 256, "rows of x and q (tokens)"),
    [KK__RFP8_N] = KK__P_INT("n", 1, KK__DIM_MAX, 0, 1024,
                             "the normalized dimension: columns of x and q, length of w"),
    [KK__RFP8_EPS] =
        KK__P_FLOAT("eps", 1e-12, 1.0, 1e-6, "added to mean(x^2) inside the square root; > 0"),
    [KK__RFP8_GROUP] = KK__P_INT("group", 0, KK__FP8_BLOCK, KK__FP8_BLOCK, KK__FP8_BLOCK,
                                 "elements per scale: 128 (1x128 groups) or 0 (one per row)"),
    [KK__RFP8_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of x and w"),
};

static kk_status validate(const kk_op_params *p) {
    const int64_t n = p->i[KK__RFP8_N], group = p->i[KK__RFP8_GROUP];
    if (group && n % group) {
        char expected[96];
        snprintf(expected, sizeof expected,
                 "a multiple of group = %lld (group = 0: one scale per row)", (long long)group);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rmsnorm_fp8", "n", expected, "%lld",
                             (long long)n);
    }
    return KK_OK;
}

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t rows = p->i[KK__RFP8_ROWS], n = p->i[KK__RFP8_N];
    const kk_dtype dt = (kk_dtype)p->i[KK__RFP8_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 2, (int64_t[]){rows, n});
    k += kk__tensor(&out[k], "w", dt, 0, 1, (int64_t[]){n});
    k += kk__tensor(&out[k], "q", KK_DTYPE_FP8_E4M3, 1, 2, (int64_t[]){rows, n});
    k += kk__tensor(&out[k], "scales", KK_DTYPE_F32, 1, 2,
                    (int64_t[]){rows, n / kk__rmsnorm_fp8_group(p)});
    return k;
}

/* rmsnorm's four per element, then the amax and the division by the scale. */
static double flops(const kk_op_params *p) {
    return 6.0 * (double)p->i[KK__RFP8_ROWS] * (double)p->i[KK__RFP8_N];
}

/* q's reference is y / scale unrounded: the tolerance below allows the one
 * e4m3 rounding the kernel makes. */
static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t rows = p->i[KK__RFP8_ROWS], n = p->i[KK__RFP8_N];
    const int64_t group = kk__rmsnorm_fp8_group(p), ngroups = n / group;
    const double eps = p->f[KK__RFP8_EPS];
    const double *x = in[0], *w = in[1];
    double *q = out[0], *scales = out[1];
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += xr[i] * xr[i];
        const double inv = 1.0 / sqrt(sum / (double)n + eps);
        for (int64_t g = 0; g < ngroups; g++) {
            double amax = 0.0;
            for (int64_t i = g * group; i < (g + 1) * group; i++)
                amax = fmax(amax, fabs(xr[i] * inv * w[i]));
            double s = amax / (double)KK__E4M3_MAX;
            if (!((float)s > 0.0f)) s = 1.0; /* kk__fp8_scale: zero, or an f32 underflow */
            scales[r * ngroups + g] = s;
            for (int64_t i = g * group; i < (g + 1) * group; i++)
                q[r * n + i] = xr[i] * inv * w[i] / s;
        }
    }
    return KK_OK;
}

/* Both groupings, n fitted to the group; eps sometimes large enough that a
 * kernel ignoring it gets every scale wrong. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (kk__rng_below(r, 2)) p->f[KK__RFP8_EPS] = ldexp(1.0, -(int)kk__rng_below(r, 20));
    p->i[KK__RFP8_GROUP] = kk__rng_below(r, 2) ? KK__FP8_BLOCK : 0;
    if (p->i[KK__RFP8_GROUP])
        p->i[KK__RFP8_N] = (p->i[KK__RFP8_N] + KK__FP8_BLOCK - 1) / KK__FP8_BLOCK * KK__FP8_BLOCK;
}

/* Tolerances. q: the reference is y / scale unrounded, so the error is one
 * e4m3 rounding: half a step, at most 2^-4 |q| where q is normal (|q| >=
 * 2^-6) and 2^-10 (half the subnormal step 2^-9) below, as docs/formats.md
 * ("Error bounds") derives; atol 2^-10 + rtol 2^-4 holds both. The kernel's
 * f32 arithmetic moves y / scale by a few units of 2^-24 (the row's 1/rms
 * cancels between y and its amax), which can flip a tie to the other
 * neighbour: still within 2^-4 |q| / (1 + 2^-4) + 2^-22. Relative L2 of the
 * rounding alone is about 0.02-0.04 (the step is 1/16-1/8 of |q|, its RMS
 * error step / sqrt(12)); the bound 2^-4 holds. A scale from the wrong group,
 * a missing weight or a q not divided by its scale moves q by O(|q|).
 * scales: f32 amax / 448, a ratio of magnitudes with rmsnorm's f32 error (a
 * few u; KK__NORM_TOLERANCES' 1e-5), never a cancellation, so no atol; an
 * all-zero group is 1 on both sides. eps ignored (eps = 0.1) moves every
 * scale by 5%. */
const kk_op kk__op_rmsnorm_fp8 = {
    .id = KK__OP_ID_rmsnorm_fp8,
    .name = "rmsnorm_fp8",
    .summary = "q, scales = fp8 e4m3 of rmsnorm(x) * w per 1x128 group or per row; x [rows,n]",
    .nparams = KK__RFP8_NPARAMS,
    .params = params,
    .validate = validate,
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    .ntolerances = 2,
    .tolerances = {KK__TOL(KK_DTYPE_FP8_E4M3, 0x1p-10, 0x1p-4, 0x1p-4, KK__BOTH, 0),
                   KK__TOL(KK_DTYPE_F32, 0.0, 1e-5, 1e-5, KK__BOTH, 0)},
    .fuzz = fuzz,
};

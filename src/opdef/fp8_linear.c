/* The `fp8_linear` op: parameters, tensors, work counts, tolerances and the
 * float64 reference (the CPU kernel is src/cpu/fp8_linear_cpu.c):
 *
 *   xq, sx = quantize(x)          e4m3 codes, f32 scales, as kk_quantize writes
 *                                 them: rowwise one per row of x (its per-tensor
 *                                 rule on each row), block one per 1x128 group
 *   h[m,n] = sum_k xq sx[m,.] * w[n,k] sw[.]   (fp8_gemm's rowwise / block)
 *   y = act(h + bias) [+ r]
 *
 * x, bias, r and y of one dtype (f32, f16, bf16), w fp8_e4m3 [N,K], w_scales
 * f32 [N] (rowwise) or [ceil(N/128), ceil(K/128)] (block, 128x128 blocks).
 * The reference quantizes x with the library's own encoder (the codes are
 * small integers times powers of two, exact in double), then computes the
 * product of the dequantized operands and the epilogue in float64. */
#include "opdef/fp8_linear.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "kernelkit/dtype.h"
#include "opdef/linear.h"
/* Last: its KK__FP8_BLOCK (128) shadows fp8_gemm.h's scaling value of that
 * name, which this file therefore reads through kk__fp8_linear_block. */
#include "core/quant_math.h"

static const char *const activations[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu", NULL};
static const char *const scalings[] = {"rowwise", "block", NULL};

static const kk_op_param params[KK__FL_NPARAMS] = {
    [KK__FL_M] = KK__P_INT("M", 1, KK__DIM_MAX, 1, 256, "rows of x and y (tokens)"),
    [KK__FL_N] = KK__P_INT("N", 1, KK__DIM_MAX, 1, 256, "output features: rows of w"),
    [KK__FL_K] = KK__P_INT("K", 1, KK__DIM_MAX, 1, 256, "input features"),
    [KK__FL_BIAS] = KK__P_BOOL("bias", 1, "add a bias vector [N] of x's dtype"),
    [KK__FL_ACT] = KK__P_ENUM("activation", activations, KK__ACT_NONE, "applied after the bias"),
    [KK__FL_DTYPE] = KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16,
                                 "element type of x, bias, residual and y"),
    [KK__FL_RESIDUAL] = KK__P_BOOL("residual", 0, "add a residual r [M,N] after the activation"),
    [KK__FL_SCALING] = KK__P_ENUM("scaling", scalings, 1,
                                  "rowwise: x per token (scale per row), w_scales [N] (per output "
                                  "channel); block: x per 1x128 group, w_scales "
                                  "[ceil(N/128),ceil(K/128)] (128x128 blocks): kk_quantize's "
                                  "KK_SCALE_1X128 and KK_SCALE_128X128"),
};

kk__fp8_linear_layout kk__fp8_linear_layout_of(const kk_op_params *p) {
    kk__fp8_linear_layout l = {.x = 0, .w = 1, .w_scales = 2, .bias = -1, .residual = -1};
    int n = 3;
    if (p->i[KK__FL_BIAS]) l.bias = n++;
    if (p->i[KK__FL_RESIDUAL]) l.residual = n++;
    l.y = n++;
    l.count = n;
    return l;
}

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__FL_M], N = p->i[KK__FL_N], K = p->i[KK__FL_K];
    const kk_dtype dt = (kk_dtype)p->i[KK__FL_DTYPE];
    int n = 0;
    n += kk__tensor(&out[n], "x", dt, 0, 2, (int64_t[]){M, K});
    n += kk__tensor(&out[n], "w", KK_DTYPE_FP8_E4M3, 0, 2, (int64_t[]){N, K});
    if (kk__fp8_linear_block(p))
        n += kk__tensor(&out[n], "w_scales", KK_DTYPE_F32, 0, 2,
                        (int64_t[]){kk__fp8_groups(N), kk__fp8_groups(K)});
    else
        n += kk__tensor(&out[n], "w_scales", KK_DTYPE_F32, 0, 1, &N);
    if (p->i[KK__FL_BIAS]) n += kk__tensor(&out[n], "bias", dt, 0, 1, &N);
    if (p->i[KK__FL_RESIDUAL]) n += kk__tensor(&out[n], "residual", dt, 0, 2, (int64_t[]){M, N});
    n += kk__tensor(&out[n], "y", dt, 1, 2, (int64_t[]){M, N});
    return n;
}

/* 2MNK, as linear and fp8_gemm count; the quantization of x and the
 * epilogue are not counted. */
static double flops(const kk_op_params *p) {
    return 2.0 * (double)p->i[KK__FL_M] * (double)p->i[KK__FL_N] * (double)p->i[KK__FL_K];
}

/* x quantized as the op defines it, in the library's f32 arithmetic
 * (core/quant_math.h, kk_f32_to_e4m3): xq the decoded codes, sx [M, G] the
 * scales (G = 1 rowwise). Both exact in double. */
static kk_status quantize_x(const kk_op_params *p, const double *x, double **xq, double **sx) {
    const int64_t M = p->i[KK__FL_M], K = p->i[KK__FL_K], G = kk__fp8_linear_x_groups(p);
    const int64_t width = G == 1 ? K : KK__FP8_GROUP;
    *xq = malloc((size_t)(M * K) * sizeof(double));
    *sx = malloc((size_t)(M * G) * sizeof(double));
    if (!*xq || !*sx) {
        free(*xq);
        free(*sx);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "fp8_linear", "no host memory for the reference");
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t g = 0; g < G; g++) {
            const int64_t lo = m * K + g * width,
                          hi = lo + (K - g * width < width ? K - g * width : width);
            float amax = 0.0f;
            for (int64_t i = lo; i < hi; i++) amax = fmaxf(amax, fabsf((float)x[i]));
            const float s = kk__fp8_scale(amax, KK__E4M3_MAX);
            (*sx)[m * G + g] = s;
            for (int64_t i = lo; i < hi; i++)
                (*xq)[i] = kk_e4m3_to_f32(kk_f32_to_e4m3(kk__q_ratio((float)x[i], s)));
        }
    return KK_OK;
}

/* h = the scaled product of row m of xq and row n of w, plus the bias; *mag
 * = sum_k |scale * xq * w| + |bias|, the size of its terms. */
static double product(const kk_op_params *p, const double *xq, const double *sx, const double *w,
                      const double *sw, const double *bias, int64_t m, int64_t n, double *mag) {
    const int64_t K = p->i[KK__FL_K], G = kk__fp8_linear_x_groups(p);
    const int block = kk__fp8_linear_block(p);
    const double *xm = xq + m * K, *wn = w + n * K;
    double h = 0.0, mg = 0.0;
    if (block) {
        for (int64_t g = 0; g < G; g++) {
            const int64_t k1 = (g + 1) * KK__FP8_GROUP < K ? (g + 1) * KK__FP8_GROUP : K;
            const double s = sx[m * G + g] * sw[(n / KK__FP8_GROUP) * G + g];
            double sum = 0.0, abs_sum = 0.0;
            for (int64_t k = g * KK__FP8_GROUP; k < k1; k++) {
                sum += xm[k] * wn[k];
                abs_sum += fabs(xm[k] * wn[k]);
            }
            h += s * sum;
            mg += fabs(s) * abs_sum;
        }
    } else {
        double sum = 0.0, abs_sum = 0.0;
        for (int64_t k = 0; k < K; k++) {
            sum += xm[k] * wn[k];
            abs_sum += fabs(xm[k] * wn[k]);
        }
        h = sx[m] * sw[n] * sum;
        mg = fabs(sx[m] * sw[n]) * abs_sum;
    }
    if (bias) {
        h += bias[n];
        mg += fabs(bias[n]);
    }
    *mag = mg;
    return h;
}

/* One function for both hooks: the output (magnitude 0) or its error scale. */
static kk_status evaluate(const kk_op_params *p, const double *const *in, double *out,
                          int magnitude) {
    const int64_t M = p->i[KK__FL_M], N = p->i[KK__FL_N];
    const int act = (int)p->i[KK__FL_ACT];
    const kk__fp8_linear_layout l = kk__fp8_linear_layout_of(p);
    const double *bias = l.bias >= 0 ? in[l.bias] : NULL;
    const double *r = l.residual >= 0 ? in[l.residual] : NULL;
    double *xq, *sx;
    kk_status st = quantize_x(p, in[l.x], &xq, &sx);
    if (st != KK_OK) return st;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double mh;
            const double h = product(p, xq, sx, in[l.w], in[l.w_scales], bias, m, n, &mh);
            if (!magnitude) {
                out[m * N + n] = kk__activation_f64(act, h) + (r ? r[m * N + n] : 0.0);
                continue;
            }
            /* as linear's: the first-order propagation through the activation,
             * relu's kink judged within the widest row's error (the FP8
             * tensor cores'); the residual is one exact add */
            const double slope =
                act == KK__ACT_RELU && h < 0.0 && h >= -KK__ACC_FP8_TENSOR_CORES * mh
                    ? 1.0
                    : kk__activation_slope_f64(act, h);
            out[m * N + n] = fabs(slope) * mh;
        }
    free(xq);
    free(sx);
    return KK_OK;
}

static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    return evaluate(p, in, out[0], 0);
}

static kk_status magnitude(const kk_op_params *p, const double *const *in, double *const *out) {
    return evaluate(p, in, out[0], 1);
}

/* Block scaling is where the groups matter: K often several groups with a
 * ragged last one, N across a 128-row block of w. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    if (p->i[KK__FL_SCALING] && kk__rng_below(r, 2)) {
        kk__fuzz_set_int(p, "K",
                         KK__FP8_GROUP * (1 + (int64_t)kk__rng_below(r, 3)) +
                             (int64_t)kk__rng_below(r, KK__FP8_GROUP));
        kk__fuzz_set_int(p, "N", KK__FP8_GROUP + 1 + (int64_t)kk__rng_below(r, 64));
    }
}

/* Tolerances (docs/kernels/fp8_gemm.md, "FP8 Linear"). x's quantization is
 * bit-exact in both the kernel and the reference, so what is left is
 * fp8_gemm's: the products of the decoded operands are exact, the f32
 * accumulation errs by KK__ACC_F32 of the magnitude (the hook above, taken
 * through the activation as linear's), and y is rounded once. f32 and bf16
 * are fp8_gemm's rows (bf16 rtol 2^-7: two unit roundoffs, the epilogue's f32
 * arithmetic far below); f16 linear's. The epilogue's f32 activation (about
 * 1e-6 relative for GELU's erf) and residual add sit inside the atol. On CUDA
 * the FP8 tensor cores' accumulation, fp8_gemm's tolerance_on hook: acc
 * 2^-11, rel L2 1e-3 in f32. */
const kk_op kk__op_fp8_linear = {
    .id = KK__OP_ID_fp8_linear,
    .name = "fp8_linear",
    .summary = "y = act(dq(q(x)) . dq(w)^T + bias) [+ r]; x quantized per token/1x128, w e4m3",
    .nparams = KK__FL_NPARAMS,
    .params = params,
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    .magnitude = magnitude,
    .tolerance_on = kk__fp8_gemm_tolerance_on, /* the FP8 tensor cores' accumulation */
    .ntolerances = 3,
    .tolerances = {KK__TOL_ACC(KK_DTYPE_F32, 1e-4, 1e-4, 1e-5, KK__BOTH, 0, KK__ACC_F32),
                   KK__TOL_ACC(KK_DTYPE_F16, 1e-3, 2e-3, 5e-3, KK__BOTH, 0, KK__ACC_F32),
                   KK__TOL_ACC(KK_DTYPE_BF16, 1e-3, 7.8125e-3, 5e-3, KK__BOTH, 0, KK__ACC_F32)},
    .fuzz = fuzz,
    .grow_param = "M",
};

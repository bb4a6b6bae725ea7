/* Linear + bias + activation [+ residual]: y = act(x . W^T + bias) + r, x [M,K],
 * W [N,K], bias [N], r and y [M,N] (ANCHORS' Linear; r is a decoder layer's
 * residual stream for o_proj and down_proj). SwiGLU takes two separate weights,
 * gate and up, each [N,K] (and with bias=1 two biases, each [N]):
 *   y = silu(x . Wg^T + bg) * (x . Wu^T + bu)
 * which is what a Linear to 2N features followed by SwiGLU computes, with the
 * halves stored as two tensors so no kernel has to guess the interleaving. */
#include <math.h>

#include "opdef/gemm.h"
#include "opdef/linear.h"

kk__linear_layout kk__linear_layout_of(const kk_op_params *p) {
    const int swiglu = p->i[KK__LIN_ACT] == KK__ACT_SWIGLU, bias = (int)p->i[KK__LIN_BIAS];
    kk__linear_layout l = {.x = 0, .w = 1, .w_up = -1, .bias = -1, .bias_up = -1, .residual = -1};
    int n = 2;
    if (swiglu) l.w_up = n++;
    if (bias) l.bias = n++;
    if (bias && swiglu) l.bias_up = n++;
    if (p->i[KK__LIN_RESIDUAL]) l.residual = n++;
    l.y = n++;
    l.count = n;
    return l;
}

int kk__linear_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__LIN_M], N = p->i[KK__LIN_N], K = p->i[KK__LIN_K];
    const kk_dtype dt = (kk_dtype)p->i[KK__LIN_DTYPE];
    const int swiglu = p->i[KK__LIN_ACT] == KK__ACT_SWIGLU, bias = (int)p->i[KK__LIN_BIAS];
    int n = 0;
    n += kk__tensor(&out[n], "x", dt, 0, 2, (int64_t[]){M, K});
    n += kk__tensor(&out[n], swiglu ? "w_gate" : "w", dt, 0, 2, (int64_t[]){N, K});
    if (swiglu) n += kk__tensor(&out[n], "w_up", dt, 0, 2, (int64_t[]){N, K});
    if (bias) n += kk__tensor(&out[n], swiglu ? "bias_gate" : "bias", dt, 0, 1, &N);
    if (bias && swiglu) n += kk__tensor(&out[n], "bias_up", dt, 0, 1, &N);
    if (p->i[KK__LIN_RESIDUAL]) n += kk__tensor(&out[n], "residual", dt, 0, 2, (int64_t[]){M, N});
    n += kk__tensor(&out[n], "y", dt, 1, 2, (int64_t[]){M, N});
    return n;
}

/* 2MNK per GEMM (SwiGLU has two); the bias and the activation are not
 * counted, as cuBLASLt and ANCHORS count an epilogue. */
double kk__linear_flops(const kk_op_params *p) {
    const double gemms = p->i[KK__LIN_ACT] == KK__ACT_SWIGLU ? 2.0 : 1.0;
    return gemms * 2.0 * (double)p->i[KK__LIN_M] * (double)p->i[KK__LIN_N] *
           (double)p->i[KK__LIN_K];
}

double kk__activation_f64(int act, double x) {
    const double sqrt_half = 0.70710678118654752440, sqrt_2_over_pi = 0.79788456080286535588;
    switch (act) {
    case KK__ACT_RELU: return x > 0.0 ? x : 0.0;
    /* 1 + erf and 1 + tanh cancel for x far below 0 (1 + tanh(-38) is 0 in
     * double, the true value 2e-33): erfc and the sigmoid form do not */
    case KK__ACT_GELU_ERF: return 0.5 * x * erfc(-x * sqrt_half);
    case KK__ACT_GELU_TANH: /* 0.5 (1 + tanh u) = sigmoid(2u) */
        return x / (1.0 + exp(-2.0 * sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
    case KK__ACT_SILU:
    case KK__ACT_SWIGLU: return x / (1.0 + exp(-x)); /* x * sigmoid(x); -inf.. gives -0 */
    default: return x;
    }
}

/* x[m,:] . w[n,:] + (bias ? bias[n] : 0) */
static double dot_bias(const double *x, const double *w, const double *bias, int64_t m, int64_t n,
                       int64_t K) {
    double acc = 0.0;
    for (int64_t k = 0; k < K; k++) acc += x[m * K + k] * w[n * K + k];
    return bias ? acc + bias[n] : acc;
}

kk_status kk__linear_reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t M = p->i[KK__LIN_M], N = p->i[KK__LIN_N], K = p->i[KK__LIN_K];
    const int act = (int)p->i[KK__LIN_ACT], swiglu = act == KK__ACT_SWIGLU;
    const kk__linear_layout l = kk__linear_layout_of(p);
    const double *x = in[l.x], *w = in[l.w], *w_up = swiglu ? in[l.w_up] : NULL;
    const double *bias = l.bias >= 0 ? in[l.bias] : NULL;
    const double *bias_up = l.bias_up >= 0 ? in[l.bias_up] : NULL;
    const double *r = l.residual >= 0 ? in[l.residual] : NULL;
    double *y = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double h = dot_bias(x, w, bias, m, n, K);
            y[m * N + n] =
                (swiglu ? kk__activation_f64(KK__ACT_SILU, h) * dot_bias(x, w_up, bias_up, m, n, K)
                        : kk__activation_f64(act, h)) +
                (r ? r[m * N + n] : 0.0);
        }
    return KK_OK;
}

/* d act / dx, exact in double (relu: 0 or 1, 1 at 0). */
double kk__activation_slope_f64(int act, double x) {
    const double sqrt_half = 0.70710678118654752440, sqrt_2_over_pi = 0.79788456080286535588;
    const double inv_sqrt_2pi = 0.39894228040143267794;
    switch (act) {
    case KK__ACT_RELU: return x >= 0.0 ? 1.0 : 0.0;
    case KK__ACT_GELU_ERF: return 0.5 * erfc(-x * sqrt_half) + x * inv_sqrt_2pi * exp(-0.5 * x * x);
    case KK__ACT_GELU_TANH: { /* t = tanh u = 2s - 1, s = sigmoid(2u): no cancellation */
        const double s = 1.0 / (1.0 + exp(-2.0 * sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
        return s + 2.0 * x * s * (1.0 - s) * sqrt_2_over_pi * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case KK__ACT_SILU:
    case KK__ACT_SWIGLU: {
        const double s = 1.0 / (1.0 + exp(-x)); /* sigmoid; silu' = s (1 + x (1 - s)) */
        return s * (1.0 + x * (1.0 - s));
    }
    default: return 1.0;
    }
}

/* sum_k |x[m,k] * w[n,k]| + |bias[n]|: the size of the terms of dot_bias. */
static double dot_bias_magnitude(const double *x, const double *w, const double *bias, int64_t m,
                                 int64_t n, int64_t K) {
    double acc = 0.0;
    for (int64_t k = 0; k < K; k++) acc += fabs(x[m * K + k] * w[n * K + k]);
    return bias ? acc + fabs(bias[n]) : acc;
}

/* The error scale of each y (docs/harness.md, "Tolerances"): the magnitude mh
 * of h = x.W^T + b propagated to first order through the activation,
 * m = |act'(h)| mh (relu: 1 also just below its kink); SwiGLU y = silu(g) u:
 * m = |silu(g)| m_u + |u silu'(g)| m_g.
 * The residual is one exact add: nothing accumulates, so it adds nothing. */
kk_status kk__linear_magnitude(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t M = p->i[KK__LIN_M], N = p->i[KK__LIN_N], K = p->i[KK__LIN_K];
    const int act = (int)p->i[KK__LIN_ACT], swiglu = act == KK__ACT_SWIGLU;
    const kk__linear_layout l = kk__linear_layout_of(p);
    const double *x = in[l.x], *w = in[l.w], *w_up = swiglu ? in[l.w_up] : NULL;
    const double *bias = l.bias >= 0 ? in[l.bias] : NULL;
    const double *bias_up = l.bias_up >= 0 ? in[l.bias_up] : NULL;
    double *my = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double h = dot_bias(x, w, bias, m, n, K);
            const double mh = dot_bias_magnitude(x, w, bias, m, n, K);
            if (!swiglu) {
                /* relu's kink: within the widest row's error of 0 (TF32's,
                 * KK__ACC_TF32 mh), h may land on either side, and relu is
                 * 1-Lipschitz: slope 1 there, not the one-sided 0. */
                const double slope = act == KK__ACT_RELU && h < 0.0 && h >= -KK__ACC_TF32 * mh
                                         ? 1.0
                                         : kk__activation_slope_f64(act, h);
                my[m * N + n] = fabs(slope) * mh;
                continue;
            }
            const double u = dot_bias(x, w_up, bias_up, m, n, K);
            const double mu = dot_bias_magnitude(x, w_up, bias_up, m, n, K);
            my[m * N + n] = fabs(kk__activation_f64(KK__ACT_SILU, h)) * mu +
                            fabs(u * kk__activation_slope_f64(KK__ACT_SILU, h)) * mh;
        }
    return KK_OK;
}

static const char *const activations[] = {"none", "relu",   "gelu_erf", "gelu_tanh",
                                          "silu", "swiglu", NULL};
static const kk_op_param linear_params[KK__LIN_NPARAMS] = {
    [KK__LIN_M] = KK__P_INT("M", 1, KK__DIM_MAX, 1, 256, "rows of x and y (tokens)"),
    [KK__LIN_N] = KK__P_INT("N", 1, KK__DIM_MAX, 1, 256, "output features: rows of W"),
    [KK__LIN_K] = KK__P_INT("K", 1, KK__DIM_MAX, 1, 256, "input features"),
    [KK__LIN_BIAS] = KK__P_BOOL("bias", 1, "add a bias vector [N] (two for swiglu: gate and up)"),
    [KK__LIN_ACT] = KK__P_ENUM("activation", activations, KK__ACT_NONE, "applied after the bias"),
    [KK__LIN_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of every tensor"),
    [KK__LIN_RESIDUAL] = KK__P_BOOL("residual", 0, "add a residual r [M,N] after the activation"),
};

const kk_op kk__op_linear = {
    .id = KK__OP_ID_linear,
    .name = "linear",
    .summary = "y = act(x . W^T + bias) [+ r]; swiglu: silu(x.Wg^T + bg) * (x.Wu^T + bu)",
    .nparams = KK__LIN_NPARAMS,
    .params = linear_params,
    .describe = kk__linear_describe,
    .flops = kk__linear_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__linear_reference,
    .magnitude = kk__linear_magnitude,
    KK__FLOAT_TOLERANCES(0),
    .tolerance_on = kk__gemm_tolerance_on, /* f32 on CUDA: TF32's row when allowed */
    .grow_param = "M",
};

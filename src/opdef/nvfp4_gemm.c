/* The `nvfp4_gemm` op: parameters, tensors, work counts and the float64
 * reference (the kernel is src/cpu/nvfp4_gemm_cpu.c). Semantics and layout:
 * nvfp4_gemm.h. The inputs arrive decoded (e2m1 and e4m3 codes to their
 * exact values, as kk_e2m1_to_f32 / kk_e4m3_to_f32 give them), so the
 * reference only dequantizes each weight and takes the dot products. */
#include "opdef/opdef.h"
#include "opdef/nvfp4_gemm.h"

const kk_op_param kk__nvfp4_gemm_params[KK__NVG_NPARAMS] = {
    [KK__NVG_M] = {.name = "M",
                   .kind = KK_PARAM_INT,
                   .min = 1,
                   .max = 64,
                   .def = 16,
                   .help = "rows of x and y (tokens; small batch)"},
    [KK__NVG_N] = {.name = "N",
                   .kind = KK_PARAM_INT,
                   .min = 1,
                   .max = INT64_C(1) << 24,
                   .def = 256,
                   .help = "output features: rows of w, columns of y"},
    [KK__NVG_K] = {.name = "K",
                   .kind = KK_PARAM_INT,
                   .min = 64,
                   .max = INT64_C(1) << 24,
                   .multiple = 64,
                   .def = 256,
                   .help = "input features, a multiple of 64"},
    [KK__NVG_GLOBAL] = {.name = "global",
                        .kind = KK_PARAM_BOOL,
                        .min = 0,
                        .max = 1,
                        .def = 0,
                        .help = "an f32 global scale gw multiplies w's scales"},
};

int kk__nvfp4_gemm_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t M = p->i[KK__NVG_M], N = p->i[KK__NVG_N], K = p->i[KK__NVG_K];
    int k = kk__tensor(&out[0], "x", KK_DTYPE_BF16, 0, 2, (int64_t[]){M, K});
    k += kk__tensor(&out[k], "w", KK_DTYPE_E2M1, 0, 2, (int64_t[]){N, K});
    k += kk__tensor(&out[k], "sw", KK_DTYPE_FP8_E4M3, 0, 2, (int64_t[]){N, K / 16});
    if (p->i[KK__NVG_GLOBAL]) k += kk__tensor(&out[k], "gw", KK_DTYPE_F32, 0, 1, (int64_t[]){1});
    k += kk__tensor(&out[k], "y", KK_DTYPE_BF16, 1, 2, (int64_t[]){M, N});
    return k;
}

double kk__nvfp4_gemm_flops(const kk_op_params *p) {
    return 2.0 * (double)p->i[KK__NVG_M] * (double)p->i[KK__NVG_N] * (double)p->i[KK__NVG_K];
}

kk_status kk__nvfp4_gemm_reference(const kk_op_params *p, const double *const *in,
                                   double *const *out) {
    const int64_t M = p->i[KK__NVG_M], N = p->i[KK__NVG_N], K = p->i[KK__NVG_K];
    const int global = (int)p->i[KK__NVG_GLOBAL];
    const double *x = in[0], *w = in[1], *sw = in[2];
    const double gw = global ? in[3][0] : 1.0;
    double *y = out[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += x[m * K + k] * (w[n * K + k] * sw[n * (K / 16) + k / 16] * gw);
            y[m * N + n] = acc;
        }
    return KK_OK;
}

/* w, sw and gw drawn as nvfp4_gemv's; x (bf16) normal. */
static kk__fill_rule fill(const kk_op_params *p, int k) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    p->op->describe(p, t);
    if (t[k].dtype == KK_DTYPE_BF16) return (kk__fill_rule){KK__FILL_NORMAL, 0};
    if (t[k].dtype == KK_DTYPE_E2M1) return (kk__fill_rule){KK__FILL_NVFP4_CODES, 0};
    if (t[k].dtype == KK_DTYPE_FP8_E4M3) return (kk__fill_rule){KK__FILL_NVFP4_SCALES, 0};
    return (kk__fill_rule){KK__FILL_GLOBAL_SCALE, 0};
}

const kk_op kk__op_nvfp4_gemm = {
    .id = KK__OP_ID_nvfp4_gemm,
    .name = "nvfp4_gemm",
    .summary = "y = x . (w*sw*gw)^T; x bf16 [M<=64,K], w e2m1 [N,K], sw e4m3 [N,K/16]",
    .nparams = KK__NVG_NPARAMS,
    .params = kk__nvfp4_gemm_params,
    .describe = kk__nvfp4_gemm_describe,
    .flops = kk__nvfp4_gemm_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__nvfp4_gemm_reference,
    .ntolerances = 1,
    .tolerances = {{.dtype = KK_DTYPE_BF16,
                    .atol = 1e-2,
                    .rtol = 1.6e-2,
                    .l2 = 1e-2,
                    .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2}},
    .grow_param = "N",
    .fill = fill,
};

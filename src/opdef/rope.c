/* The `rope` op: parameters, tensors, work counts and the float64 reference
 * (the kernel is src/cpu/rope_cpu.c). Semantics: rope.h. */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "opdef/rope.h"

static const char *const rope_styles[] = {"neox", "gptj", NULL};

const kk_op_param kk__rope_params[KK__ROPE_NPARAMS] = {
    [KK__ROPE_B] =
        {.name = "B", .kind = KK_PARAM_INT, .min = 1, .max = 65536, .def = 1, .help = "batch"},
    [KK__ROPE_H] =
        {.name = "H", .kind = KK_PARAM_INT, .min = 1, .max = 1024, .def = 8, .help = "heads"},
    [KK__ROPE_S] = {.name = "S",
                    .kind = KK_PARAM_INT,
                    .min = 1,
                    .max = INT64_C(1) << 20,
                    .def = 128,
                    .help = "sequence length"},
    [KK__ROPE_D] = {.name = "D",
                    .kind = KK_PARAM_INT,
                    .min = 2,
                    .max = 1024,
                    .def = 64,
                    .help = "head dimension"},
    [KK__ROPE_ROTARY] =
        {.name = "rotary_dim",
         .kind = KK_PARAM_INT,
         .min = 0,
         .max = 1024,
         .def = 0,
         .help = "dimensions rotated: even, <= D; 0 = D (then D even); the rest are copied"},
    [KK__ROPE_OFFSET] = {.name = "offset",
                         .kind = KK_PARAM_INT,
                         .min = 0,
                         .max = INT64_C(1) << 24,
                         .def = 0,
                         .help = "position of s = 0 (the cache length when decoding)"},
    [KK__ROPE_THETA] = {.name = "theta",
                        .kind = KK_PARAM_FLOAT,
                        .fmin = 1.0,
                        .fmax = 1e9,
                        .fdef = 10000.0,
                        .help = "frequency base: f_i = theta^(-2i/rotary_dim)"},
    [KK__ROPE_STYLE] = {.name = "style",
                        .kind = KK_PARAM_ENUM,
                        .choices = rope_styles,
                        .def = KK__ROPE_NEOX,
                        .help = "neox: pairs (i, i + R/2), rotate_half; gptj: pairs (2i, 2i + 1)"},
    [KK__ROPE_DTYPE] = {.name = "dtype",
                        .kind = KK_PARAM_DTYPE,
                        .choices = kk__float_dtypes,
                        .def = KK_DTYPE_BF16,
                        .help = "element type of x and y"},
};

int64_t kk__rope_rotary_dim(const kk_op_params *p) {
    const int64_t r = p->i[KK__ROPE_ROTARY];
    return r ? r : p->i[KK__ROPE_D];
}

kk_status kk__rope_validate(const kk_op_params *p) {
    const int64_t d = p->i[KK__ROPE_D], r = p->i[KK__ROPE_ROTARY];
    if (r % 2 == 0 && r <= d && (r > 0 || d % 2 == 0)) return KK_OK;
    char expected[96];
    snprintf(expected, sizeof expected, "an even number <= D = %lld (0 = D, with D even)",
             (long long)d);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope", "rotary_dim", expected, "%lld",
                         (long long)r);
}

int kk__rope_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t shape[4] = {p->i[KK__ROPE_B], p->i[KK__ROPE_H], p->i[KK__ROPE_S],
                              p->i[KK__ROPE_D]};
    const kk_dtype dt = (kk_dtype)p->i[KK__ROPE_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 4, shape);
    k += kk__tensor(&out[k], "y", dt, 1, 4, shape);
    return k;
}

/* Per rotated element: two multiplies and an add. Copies and the angles
 * (per position, not per element) are not counted. */
double kk__rope_flops(const kk_op_params *p) {
    return 3.0 * (double)p->i[KK__ROPE_B] * (double)p->i[KK__ROPE_H] * (double)p->i[KK__ROPE_S] *
           (double)kk__rope_rotary_dim(p);
}

kk_status kk__rope_reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t S = p->i[KK__ROPE_S], D = p->i[KK__ROPE_D], R = kk__rope_rotary_dim(p);
    const int64_t rows = p->i[KK__ROPE_B] * p->i[KK__ROPE_H] * S;
    const int gptj = p->i[KK__ROPE_STYLE] == KK__ROPE_GPTJ;
    const double theta = p->f[KK__ROPE_THETA];
    for (int64_t row = 0; row < rows; row++) {
        const double *x = in[0] + row * D;
        double *y = out[0] + row * D;
        const double pos = (double)(p->i[KK__ROPE_OFFSET] + row % S);
        for (int64_t i = 0; i < R / 2; i++) {
            const double angle = pos * pow(theta, -2.0 * (double)i / (double)R);
            const int64_t ia = gptj ? 2 * i : i, ib = gptj ? 2 * i + 1 : i + R / 2;
            y[ia] = x[ia] * cos(angle) - x[ib] * sin(angle);
            y[ib] = x[ib] * cos(angle) + x[ia] * sin(angle);
        }
        for (int64_t d = R; d < D; d++) y[d] = x[d];
    }
    return KK_OK;
}

/* rope: rotary_dim even and <= D (0 = all of D, then D even), positions from
 * 0 or far out, the usual thetas. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    static const double thetas[4] = {10000.0, 500000.0, 1e6, 100.0};
    const int64_t d = kk_op_params_int(p, "D");
    if (kk__rng_below(r, 2)) {
        kk__fuzz_set_int(p, "rotary_dim", 0);
        kk__fuzz_set_int(p, "D", d + (d & 1));
    } else {
        const uint32_t pairs = (uint32_t)(d / 2 > 0 ? d / 2 : 1);
        kk__fuzz_set_int(p, "rotary_dim", 2 * (1 + (int64_t)kk__rng_below(r, pairs)));
    }
    const uint32_t far = kk__rng_below(r, 3);
    kk__fuzz_set_int(p, "offset",
                     far == 0   ? 0
                     : far == 1 ? kk__fuzz_size(r, 5000)
                                : (int64_t)kk__rng_below(r, 1u << 20));
    kk__fuzz_set_float(p, "theta", thetas[kk__rng_below(r, 4)]);
}

const kk_op kk__op_rope = {
    .id = KK__OP_ID_rope,
    .name = "rope",
    .summary = "rotary embedding of x [B,H,S,D] at positions offset+s; neox or gptj pairs",
    .nparams = KK__ROPE_NPARAMS,
    .params = kk__rope_params,
    .validate = kk__rope_validate,
    .describe = kk__rope_describe,
    .flops = kk__rope_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__rope_reference,
    KK__ROPE_TOLERANCES,
    .fuzz = fuzz,
};

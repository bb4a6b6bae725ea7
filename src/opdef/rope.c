/* The `rope` op: parameters, tensors, work counts and the float64 reference
 * (the kernel is src/cpu/rope_cpu.c), and the harness's positions. Semantics:
 * rope.h. */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "opdef/rope.h"

static const char *const rope_styles[] = {"neox", "gptj", NULL};
static const char *const rope_scalings[] = {"none", "llama3", NULL};

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
    [KK__ROPE_POSITIONS] =
        KK__P_BOOL("positions", 0,
                   "1: an int32 input pos [B,S] holds each token's position (packed batches, "
                   "decode steps); the kernel ignores offset, the harness draws pos from it up"),
    [KK__ROPE_SCALING] = KK__P_ENUM("scaling", rope_scalings, KK__ROPE_SCALING_NONE,
                                    "frequency scaling: none, or llama3 (HF rope_type llama3)"),
    [KK__ROPE_FACTOR] =
        KK__P_FLOAT("factor", 1e-3, 1e4, 8.0, "llama3: low frequencies are divided by it"),
    [KK__ROPE_LOW] = KK__P_FLOAT("low_freq_factor", 1e-3, 1e4, 1.0,
                                 "llama3: wavelengths above original_max_position / it are "
                                 "divided by factor"),
    [KK__ROPE_HIGH] = KK__P_FLOAT("high_freq_factor", 1e-3, 1e4, 4.0,
                                  "llama3: wavelengths below original_max_position / it are kept; "
                                  "more than low_freq_factor"),
    [KK__ROPE_OLD_LEN] = KK__P_INT("original_max_position", 1, INT64_C(1) << 24, 1, 8192,
                                   "llama3: the pretraining context length "
                                   "(original_max_position_embeddings)"),
};

int64_t kk__rope_rotary_dim(const kk_op_params *p) {
    const int64_t r = p->i[KK__ROPE_ROTARY];
    return r ? r : p->i[KK__ROPE_D];
}

kk_status kk__rope_check(const kk_op_params *p, const char *op) {
    const int64_t d = p->i[KK__ROPE_D], r = p->i[KK__ROPE_ROTARY];
    char expected[96];
    if (!(r % 2 == 0 && r <= d && (r > 0 || d % 2 == 0))) {
        snprintf(expected, sizeof expected, "an even number <= D = %lld (0 = D, with D even)",
                 (long long)d);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "rotary_dim", expected, "%lld",
                             (long long)r);
    }
    const double low = p->f[KK__ROPE_LOW], high = p->f[KK__ROPE_HIGH];
    if (p->i[KK__ROPE_SCALING] == KK__ROPE_SCALING_LLAMA3 && !(high > low)) {
        snprintf(expected, sizeof expected, "more than low_freq_factor = %g", low);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "high_freq_factor", expected, "%g", high);
    }
    return KK_OK;
}

kk_status kk__rope_validate(const kk_op_params *p) { return kk__rope_check(p, "rope"); }

int kk__rope_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t shape[4] = {p->i[KK__ROPE_B], p->i[KK__ROPE_H], p->i[KK__ROPE_S],
                              p->i[KK__ROPE_D]};
    const kk_dtype dt = (kk_dtype)p->i[KK__ROPE_DTYPE];
    int k = kk__tensor(&out[0], "x", dt, 0, 4, shape);
    if (p->i[KK__ROPE_POSITIONS])
        k += kk__tensor(&out[k], "pos", KK_DTYPE_INT32, 0, 2,
                        (int64_t[]){p->i[KK__ROPE_B], p->i[KK__ROPE_S]});
    k += kk__tensor(&out[k], "y", dt, 1, 4, shape);
    return k;
}

/* HF's _compute_llama3_parameters, term by term: wavelengths past the old
 * context / low_freq_factor are slowed by factor, those under old / high kept,
 * and the band between blends the two linearly in old / wavelen. */
void kk__rope_inv_freq(const kk_op_params *p, double *inv_freq) {
    const int64_t R = kk__rope_rotary_dim(p);
    const double theta = p->f[KK__ROPE_THETA], factor = p->f[KK__ROPE_FACTOR];
    const double low = p->f[KK__ROPE_LOW], high = p->f[KK__ROPE_HIGH];
    const double old = (double)p->i[KK__ROPE_OLD_LEN];
    const int llama3 = p->i[KK__ROPE_SCALING] == KK__ROPE_SCALING_LLAMA3;
    for (int64_t i = 0; i < R / 2; i++) {
        double f = pow(theta, -2.0 * (double)i / (double)R);
        if (llama3) {
            const double wavelen = 2.0 * 3.14159265358979323846 / f;
            if (wavelen > old / low) {
                f /= factor;
            } else if (!(wavelen < old / high)) {
                const double smooth = (old / wavelen - low) / (high - low);
                f = (1.0 - smooth) * f / factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}

void kk__rope_ref_row(const kk_op_params *p, const double *inv_freq, double pos, const double *x,
                      double *y) {
    const int64_t D = p->i[KK__ROPE_D], R = kk__rope_rotary_dim(p);
    const int gptj = p->i[KK__ROPE_STYLE] == KK__ROPE_GPTJ;
    for (int64_t i = 0; i < R / 2; i++) {
        const double angle = pos * inv_freq[i];
        const int64_t ia = gptj ? 2 * i : i, ib = gptj ? 2 * i + 1 : i + R / 2;
        y[ia] = x[ia] * cos(angle) - x[ib] * sin(angle);
        y[ib] = x[ib] * cos(angle) + x[ia] * sin(angle);
    }
    for (int64_t d = R; d < D; d++) y[d] = x[d];
}

/* Per rotated element: two multiplies and an add. Copies and the angles
 * (per position, not per element) are not counted. */
double kk__rope_flops(const kk_op_params *p) {
    return 3.0 * (double)p->i[KK__ROPE_B] * (double)p->i[KK__ROPE_H] * (double)p->i[KK__ROPE_S] *
           (double)kk__rope_rotary_dim(p);
}

kk_status kk__rope_reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t S = p->i[KK__ROPE_S], D = p->i[KK__ROPE_D], HS = p->i[KK__ROPE_H] * S;
    const int64_t rows = p->i[KK__ROPE_B] * HS;
    const double *pos = p->i[KK__ROPE_POSITIONS] ? in[1] : NULL; /* int32: exact */
    double inv_freq[512];                                        /* R / 2 <= D / 2 <= 512 */
    kk__rope_inv_freq(p, inv_freq);
    for (int64_t row = 0; row < rows; row++) {
        const int64_t s = row % S, b = row / HS;
        const double at = pos ? pos[b * S + s] : (double)(p->i[KK__ROPE_OFFSET] + s);
        kk__rope_ref_row(p, inv_freq, at, in[0] + row * D, out[0] + row * D);
    }
    return KK_OK;
}

/* rope: rotary_dim even and <= D (0 = all of D, then D even), positions from
 * 0 or far out, the usual thetas; positions and llama3 (drawn half of the
 * time each) with Llama 3.1's and 3.2's scalings or others, the old context
 * short enough that positions cross every band. Parameters by name, for
 * rope_kv_append too. */
void kk__rope_fuzz(kk__rng *r, kk_op_params *p, int big) {
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
    const int sc = kk_op_param_index(p->op, "scaling");
    if (sc < 0 || p->i[sc] != KK__ROPE_SCALING_LLAMA3) return;
    static const double factors[4][3] = {{8, 1, 4}, {32, 1, 4}, {4, 0.5, 2}, {16, 2, 8}};
    const double *f = factors[kk__rng_below(r, 4)];
    static const int64_t old[4] = {8192, 2048, 256, 64};
    kk__fuzz_set_float(p, "factor", f[0]);
    kk__fuzz_set_float(p, "low_freq_factor", f[1]);
    kk__fuzz_set_float(p, "high_freq_factor", f[2]);
    kk__fuzz_set_int(p, "original_max_position", old[kk__rng_below(r, 4)]);
}

/* pos is not drawn: write_input writes it from the parameters. */
static kk__fill_rule fill(const kk_op_params *p, int k) {
    return (kk__fill_rule){p->i[KK__ROPE_POSITIONS] && k == 1 ? KK__FILL_BY_OP : KK__FILL_NORMAL,
                           0};
}

/* The harness's positions: each batch row packs sequences of 1 to 16 tokens,
 * each counting up from offset plus a start in 0..4999 (a decode step, S = 1,
 * is one token at a scattered length), so neither offset + s nor one start
 * per row gives them. */
static void write_input(const kk_op_params *p, int k, void *buf, int64_t n) {
    (void)k;
    const int64_t S = p->i[KK__ROPE_S], offset = p->i[KK__ROPE_OFFSET];
    int32_t *pos = buf;
    uint64_t h = 0x9E3779B97F4A7C15u;
    for (int64_t at = 0; at < n;) {
        h = h * 6364136223846793005u + 1442695040888963407u; /* an LCG: fixed, no seed */
        const int64_t len = 1 + (int64_t)((h >> 33) % 16),
                      start = offset + (int64_t)(h >> 45) % 5000;
        for (int64_t j = 0; j < len && at < n; j++) {
            pos[at] = (int32_t)(start + j);
            if (++at % S == 0) break; /* a batch row starts a new sequence */
        }
    }
}

const kk_op kk__op_rope = {
    .id = KK__OP_ID_rope,
    .name = "rope",
    .summary = "rotary embedding of x [B,H,S,D] at positions offset+s or pos [B,S]; neox or "
               "gptj pairs; llama3 scaling",
    .nparams = KK__ROPE_NPARAMS,
    .params = kk__rope_params,
    .validate = kk__rope_validate,
    .describe = kk__rope_describe,
    .flops = kk__rope_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__rope_reference,
    KK__ROPE_TOLERANCES,
    .fuzz = kk__rope_fuzz,
    .fill = fill,
    .write_input = write_input,
};

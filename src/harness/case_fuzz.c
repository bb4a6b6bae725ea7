/* Fuzzing: random valid parameters for any op.
 *
 * Every integer size is drawn from a mixture that kernels get wrong: 1, small
 * odd sizes, sizes at and next to multiples of the usual tiles (16, 64, 128),
 * and uniform sizes. Booleans, enums and dtypes are uniform over their
 * choices. A few ops get fix-ups where the generic draw is poor: attention
 * (Hq a multiple of Hkv, windows, custom scales and dropout only sometimes,
 * the usual head dims most of the time), convert (longer vectors), nvfp4_gemv (small L).
 *
 * Default sizes stay small, so the float64 reference takes milliseconds on a
 * CPU: the largest size parameter is halved (odd sizes stay odd) until every
 * tensor holds <= 2^18 elements and the reference needs <= 2^25 FLOPs. With
 * --big one size per op grows until the case fills the memory budget, the
 * reference capped at 2^35 FLOPs (about 20 s on one CPU core). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "harness/rng.h"
#include "kernelkit/harness_run.h"

#define SMALL_CAP 256
#define BIG_OTHER_CAP 32
#define SMALL_NUMEL (INT64_C(1) << 18)
#define SMALL_FLOPS 0x1p25
#define BIG_FLOPS 0x1p35
#define PARAM_STREAM UINT64_C(0x46555a5a50415241) /* "FUZZPARA" */

static int64_t fuzz_size(kk__rng *r, int64_t hi) {
    static const int64_t tiles[3] = {16, 64, 128};
    const uint32_t pick = kk__rng_below(r, 8);
    int64_t v;
    if (pick == 0) {
        v = 1;
    } else if (pick <= 2) {
        v = 2 + kk__rng_below(r, 15); /* 2..16 */
    } else if (pick <= 4) {           /* a tile multiple, or one off it */
        const int64_t t = tiles[kk__rng_below(r, 3)];
        const int64_t k = 1 + kk__rng_below(r, (uint32_t)(hi / t > 1 ? hi / t : 1));
        v = k * t + (int64_t)kk__rng_below(r, 3) - 1;
    } else {
        v = 1 + (int64_t)kk__rng_below(r, (uint32_t)hi);
    }
    return v < 1 ? 1 : v > hi ? hi : v;
}

/* v clamped to the parameter's range and rounded to its multiple. */
static int64_t fit_int(const kk_op_param *d, int64_t v) {
    const int64_t m = d->multiple > 1 ? d->multiple : 1;
    v = v / m * m;
    if (v < d->min) v = (d->min + m - 1) / m * m;
    if (v > d->max) v = d->max / m * m;
    return v;
}

static int count_choices(const char *const *c) {
    int n = 0;
    while (c && c[n]) n++;
    return n;
}

static void sample_generic(kk__rng *r, kk_op_params *p, int64_t cap) {
    for (int i = 0; i < p->op->nparams; i++) {
        const kk_op_param *d = &p->op->params[i];
        const int nc = count_choices(d->choices);
        kk_dtype dt;
        switch (d->kind) {
        case KK_PARAM_INT: /* parameters that may be < 1 (windows) keep their default */
            if (d->min >= 1)
                p->i[i] = fit_int(d, d->multiple > 1 ? d->multiple * fuzz_size(r, 32)
                                                     : fuzz_size(r, cap));
            break;
        case KK_PARAM_BOOL: p->i[i] = kk__rng_below(r, 2); break;
        case KK_PARAM_ENUM: p->i[i] = nc > 0 ? kk__rng_below(r, (uint32_t)nc) : p->i[i]; break;
        case KK_PARAM_DTYPE:
            if (nc > 0 && kk_dtype_parse(d->choices[kk__rng_below(r, (uint32_t)nc)], &dt) == KK_OK)
                p->i[i] = dt;
            break;
        case KK_PARAM_FLOAT: break; /* defaults: ops pick their own below */
        case KK_PARAM_LIST: break;  /* data: the op's fix-up draws it */
        }
    }
}

static void set_int(kk_op_params *p, const char *name, int64_t v) {
    const int i = kk_op_param_index(p->op, name);
    if (i >= 0) p->i[i] = fit_int(&p->op->params[i], v);
}

static void fix_attention(kk__rng *r, kk_op_params *p, int big) {
    static const int64_t dims[9] = {16, 32, 64, 80, 96, 128, 160, 192, 256};
    const int64_t hkv = 1 + kk__rng_below(r, big ? 2 : 4);
    const int64_t sk = fuzz_size(r, 300);
    set_int(p, "B", fuzz_size(r, big ? 2 : 3));
    set_int(p, "Hkv", hkv);
    set_int(p, "Hq", hkv * (1 + kk__rng_below(r, big ? 2 : 4)));
    set_int(p, "Sq", fuzz_size(r, big ? 16 : 300));
    set_int(p, "Sk", sk);
    set_int(p, "D", kk__rng_below(r, 4) ? dims[kk__rng_below(r, 9)] : 16 + kk__rng_below(r, 241));
    set_int(p, "window_left",
            kk__rng_below(r, 4) ? -1 : (int64_t)kk__rng_below(r, (uint32_t)sk + 1));
    set_int(p, "window_right",
            kk__rng_below(r, 4) ? -1 : (int64_t)kk__rng_below(r, (uint32_t)sk + 1));
    const int s = kk_op_param_index(p->op, "scale");
    if (s >= 0 && kk__rng_below(r, 8) == 0) p->f[s] = 0.05 + 0.45 * kk__rng_uniform(r);
    /* dropout in one case of four, with any seed and offset (the Philox
     * mask's key and counter: the high words matter too) */
    const int dp = kk_op_param_index(p->op, "dropout");
    if (dp >= 0) p->f[dp] = kk__rng_below(r, 4) == 0 ? 0.05 + 0.55 * kk__rng_uniform(r) : 0.0;
    set_int(p, "seed", (int64_t)(kk__rng_next(r) >> 1));
    set_int(p, "offset", (int64_t)(kk__rng_next(r) >> 1));
}

/* attention_varlen: 1 to 6 sequences of 0 to 64 query rows and keys each
 * (zero-length sequences one time in five, Sq != Sk per sequence), the
 * attention draw's heads, head dims, windows, scale and dropout; max_seqlen
 * at 0 (the longest) or, one time in four, above it as FlashAttention's
 * callers often give it. --big: Hkv = 1, so that Hq can grow. */
static void fix_attention_varlen(kk__rng *r, kk_op_params *p, int big) {
    fix_attention(r, p, big);
    if (big) set_int(p, "Hkv", 1);
    const int n = 1 + (int)kk__rng_below(r, 6);
    char text[2][256] = {"", ""};
    int64_t total[2] = {0, 0}, longest[2] = {0, 0};
    for (int s = 0; s < n; s++)
        for (int w = 0; w < 2; w++) {
            int64_t len = kk__rng_below(r, 5) == 0 ? 0 : fuzz_size(r, 64);
            if (s == n - 1 && total[w] == 0 && len == 0) len = 1; /* some row somewhere */
            total[w] += len;
            longest[w] = len > longest[w] ? len : longest[w];
            snprintf(text[w] + strlen(text[w]), sizeof text[w] - strlen(text[w]), "%s%lld",
                     s ? ":" : "", (long long)len);
        }
    kk_op_params_set(p, "seqlens_q", text[0]);
    kk_op_params_set(p, "seqlens_k", text[1]);
    set_int(p, "nseq", 0);
    set_int(p, "total_q", 0);
    set_int(p, "total_k", 0);
    set_int(p, "max_seqlen_q", kk__rng_below(r, 4) ? 0 : longest[0] + kk__rng_below(r, 50));
    set_int(p, "max_seqlen_k", kk__rng_below(r, 4) ? 0 : longest[1] + kk__rng_below(r, 50));
    set_int(p, "window_left",
            kk__rng_below(r, 4) ? -1 : (int64_t)kk__rng_below(r, (uint32_t)longest[1] + 1));
    set_int(p, "window_right",
            kk__rng_below(r, 4) ? -1 : (int64_t)kk__rng_below(r, (uint32_t)longest[1] + 1));
}

static void set_float(kk_op_params *p, const char *name, double v) {
    const int i = kk_op_param_index(p->op, name);
    if (i >= 0) p->f[i] = v;
}

/* rope: rotary_dim even and <= D (0 = all of D, then D even), positions from
 * 0 or far out, the usual thetas. */
static void fix_rope(kk__rng *r, kk_op_params *p) {
    static const double thetas[4] = {10000.0, 500000.0, 1e6, 100.0};
    const int64_t d = kk_op_params_int(p, "D");
    if (kk__rng_below(r, 2)) {
        set_int(p, "rotary_dim", 0);
        set_int(p, "D", d + (d & 1));
    } else {
        const uint32_t pairs = (uint32_t)(d / 2 > 0 ? d / 2 : 1);
        set_int(p, "rotary_dim", 2 * (1 + (int64_t)kk__rng_below(r, pairs)));
    }
    const uint32_t far = kk__rng_below(r, 3);
    set_int(p, "offset",
            far == 0 ? 0 : far == 1 ? fuzz_size(r, 5000) : (int64_t)kk__rng_below(r, 1u << 20));
    set_float(p, "theta", thetas[kk__rng_below(r, 4)]);
}

/* Norms, softmax, rope (issue 5): eps sometimes large enough that a kernel
 * ignoring it fails; softmax scales other than 1. */
static void fix_row_ops(kk__rng *r, kk_op_params *p) {
    const char *name = p->op->name;
    const int norm = strcmp(name, "rmsnorm") == 0 || strcmp(name, "layernorm") == 0;
    if (norm && kk__rng_below(r, 2)) set_float(p, "eps", ldexp(1.0, -(int)kk__rng_below(r, 20)));
    if (strcmp(name, "softmax") == 0 && kk__rng_below(r, 2))
        set_float(p, "scale", 0.05 + 4.0 * kk__rng_uniform(r));
    if (strcmp(name, "rope") == 0) fix_rope(r, p);
}

static void fix_op(kk__rng *r, kk_op_params *p, int big) {
    const char *name = p->op->name;
    fix_row_ops(r, p);
    if (strcmp(name, "attention") == 0) fix_attention(r, p, big);
    if (strcmp(name, "attention_varlen") == 0) fix_attention_varlen(r, p, big);
    if (strcmp(name, "convert") == 0) set_int(p, "n", fuzz_size(r, 5000));
    if (strcmp(name, "nvfp4_gemv") == 0) set_int(p, "L", kk__rng_below(r, 2) ? 1 : fuzz_size(r, 4));
}

/* ---- keeping small cases small ---- */

static int64_t max_numel(const kk_op_params *p) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    int64_t most = 0;
    if (kk_op_tensors(p, t, &n) != KK_OK) return INT64_MAX;
    for (int k = 0; k < n; k++) most = t[k].numel > most ? t[k].numel : most;
    return most;
}

static int too_big(const kk_op_params *p) {
    return max_numel(p) > SMALL_NUMEL || !(kk_op_flops(p) <= SMALL_FLOPS);
}

/* Halve the largest size parameter whose halving keeps the params valid
 * (ceil, so odd stays odd); 0 when none can shrink. */
static int shrink_once(kk_op_params *p) {
    unsigned tried = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < p->op->nparams; i++) {
            const kk_op_param *d = &p->op->params[i];
            if (d->kind != KK_PARAM_INT || d->min < 1 || (tried >> i & 1u) || p->i[i] <= d->min)
                continue;
            if (best < 0 || p->i[i] > p->i[best]) best = i;
        }
        if (best < 0) return 0;
        kk_op_params q = *p;
        const int64_t m = p->op->params[best].multiple > 1 ? p->op->params[best].multiple : 1;
        q.i[best] = fit_int(&p->op->params[best], (p->i[best] / m + 1) / 2 * m);
        if (q.i[best] < p->i[best] && kk_op_params_validate(&q) == KK_OK) {
            *p = q;
            return 1;
        }
        tried |= 1u << best;
    }
}

/* ---- --big: one size grows to fill the budget ---- */

static const char *grow_param(const kk_op *op) {
    static const char *const table[][2] = {
        {"convert", "n"}, {"gemm", "M"}, {"linear", "M"}, {"attention", "Sk"}, {"nvfp4_gemv", "M"},
        {"attention_varlen", "Hq"},
        {"nvfp4_gemm", "N"}, {"fp8_gemm", "M"}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(op->name, table[i][0]) == 0) return table[i][1];
    for (int i = 0; i < op->nparams; i++)
        if (op->params[i].kind == KK_PARAM_INT && op->params[i].min >= 1) return op->params[i].name;
    return NULL;
}

static int fits(const kk_op_params *p, const kk_case_memory *big) {
    kk_case_memory m;
    if (kk_case_memory_need(p, &m) != KK_OK) return 0;
    return (!big->device_bytes || m.device_bytes <= big->device_bytes) &&
           (!big->host_bytes || m.host_bytes <= big->host_bytes) && kk_op_flops(p) <= BIG_FLOPS;
}

/* How many steps of the grown size fit: the largest x with
 * at1 + (x - 1) * (at2 - at1) <= limit, for a cost linear in the size (memory
 * and FLOPs are); infinite when the cost does not grow or there is no limit. */
static double linear_room(double at1, double at2, double limit) {
    const double slope = at2 - at1;
    if (limit <= 0 || slope <= 0) return INFINITY;
    return 1.0 + (limit - at1) / slope;
}

static void grow(kk_op_params *p, int i, const kk_case_memory *big) {
    const kk_op_param *d = &p->op->params[i];
    kk_op_params q1 = *p, q2 = *p;
    kk_case_memory m1, m2;
    q1.i[i] = fit_int(d, d->min);
    q2.i[i] = fit_int(d, q1.i[i] + (d->multiple > 1 ? d->multiple : 1));
    if (kk_case_memory_need(&q1, &m1) != KK_OK || kk_case_memory_need(&q2, &m2) != KK_OK) return;
    const double step = (double)(q2.i[i] - q1.i[i]);
    double room = fmin(
        linear_room((double)m1.device_bytes, (double)m2.device_bytes, (double)big->device_bytes),
        linear_room((double)m1.host_bytes, (double)m2.host_bytes, (double)big->host_bytes));
    room = fmin(room, linear_room(kk_op_flops(&q1), kk_op_flops(&q2), BIG_FLOPS));
    const double v = (double)q1.i[i] + (room - 1.0) * step;
    p->i[i] = fit_int(d, v >= (double)d->max ? d->max : v < 1.0 ? 1 : (int64_t)v);
    while (p->i[i] > q1.i[i] && !fits(p, big)) /* step functions (padding) and rounding */
        p->i[i] = fit_int(d, p->i[i] - p->i[i] / 16 - 1);
}

kk_status kk_case_fuzz(const kk_op *op, uint64_t run_seed, int index, kk_input_dist dist,
                       const kk_case_memory *big, kk_case *out) {
    kk_status st = KK__CHECK_NOT_NULL(op);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st == KK_OK && index < 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "index", ">= 0", "%d", index);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fuzz/%s/%d", op->name, index);
    out->seed = kk_case_seed(run_seed, out->name);
    out->dist = dist;
    kk__rng r;
    kk__rng_seed(&r, out->seed ^ PARAM_STREAM);
    for (int attempt = 0; attempt < 16; attempt++) {
        kk_op_params p;
        kk_op_params_init(op, &p);
        sample_generic(&r, &p, big ? BIG_OTHER_CAP : SMALL_CAP);
        fix_op(&r, &p, big != NULL);
        if (kk_op_params_validate(&p) != KK_OK) continue;
        if (big) {
            const int g = kk_op_param_index(op, grow_param(op));
            if (g >= 0) grow(&p, g, big);
        } else {
            while (too_big(&p) && shrink_once(&p)) {
            }
        }
        if (kk_op_params_validate(&p) != KK_OK) continue;
        out->params = p;
        kk_clear_error();
        return KK_OK;
    }
    kk_clear_error();
    return kk_op_params_init(op, &out->params); /* not reached for the built-in ops */
}

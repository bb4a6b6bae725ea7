/* Attention forward, the naive way, in float64: for every (batch, head, query
 * row) the scores of every visible key, a softmax with the maximum subtracted,
 * and the weighted sum of V; the reference every attention kernel is checked
 * against. Layouts, the bottom-right mask and dropout: docs/harness.md,
 * "References". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/philox.h"
#include "core/threads.h"
#include "opdef/attention.h"

kk_status kk__attention_validate(const kk_op_params *p) {
    const int64_t hq = p->i[KK__ATT_HQ], hkv = p->i[KK__ATT_HKV];
    if (hq % hkv != 0) {
        char expected[64];
        snprintf(expected, sizeof expected, "a divisor of Hq = %lld", (long long)hq);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention", "Hkv", expected, "%lld",
                             (long long)hkv);
    }
    return KK_OK;
}

int kk__attention_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t B = p->i[KK__ATT_B], Hq = p->i[KK__ATT_HQ], Hkv = p->i[KK__ATT_HKV];
    const int64_t Sq = p->i[KK__ATT_SQ], Sk = p->i[KK__ATT_SK], D = p->i[KK__ATT_D];
    const kk_dtype dt = (kk_dtype)p->i[KK__ATT_DTYPE];
    int n = 0;
    n += kk__tensor(&out[n], "q", dt, 0, 4, (int64_t[]){B, Hq, Sq, D});
    n += kk__tensor(&out[n], "k", dt, 0, 4, (int64_t[]){B, Hkv, Sk, D});
    n += kk__tensor(&out[n], "v", dt, 0, 4, (int64_t[]){B, Hkv, Sk, D});
    n += kk__tensor(&out[n], "o", dt, 1, 4, (int64_t[]){B, Hq, Sq, D});
    if (p->i[KK__ATT_LSE])
        n += kk__tensor(&out[n], "lse", KK_DTYPE_F32, 1, 3, (int64_t[]){B, Hq, Sq});
    return n;
}

void kk__attention_key_range(const kk_op_params *p, int64_t i, int64_t *lo, int64_t *hi) {
    const int64_t Sq = p->i[KK__ATT_SQ], Sk = p->i[KK__ATT_SK];
    const int64_t wl = p->i[KK__ATT_WL], wr = p->i[KK__ATT_WR];
    const int64_t c = i + Sk - Sq;
    int64_t l = 0, h = Sk - 1;
    if (p->i[KK__ATT_CAUSAL] && c < h) h = c;
    if (wr >= 0 && c + wr < h) h = c + wr;
    if (wl >= 0 && c - wl > l) l = c - wl;
    *lo = l;
    *hi = h;
}

/* 4 FLOPs per (query, visible key, d): a multiply-add in q.k and one in p.v.
 * Masked pairs are not counted, so causal with Sq = Sk = S counts S(S+1)/2
 * pairs, not ANCHORS' S^2/2 (docs/harness.md). */
double kk__attention_flops(const kk_op_params *p) {
    double pairs = 0.0;
    for (int64_t i = 0; i < p->i[KK__ATT_SQ]; i++) {
        int64_t lo, hi;
        kk__attention_key_range(p, i, &lo, &hi);
        if (hi >= lo) pairs += (double)(hi - lo + 1);
    }
    return 4.0 * (double)p->i[KK__ATT_B] * (double)p->i[KK__ATT_HQ] * (double)p->i[KK__ATT_D] *
           pairs;
}

/* One query row: o[D] (and *lse) from q[D] and the kv head's k, v [Sk,D];
 * bh = b * Hq + h names the row for the dropout mask. With e (Sk more
 * scratch doubles) the row's error scale instead (kk_op_magnitude):
 * o[d] = sum_j P_j e_j (f_j |v_jd| + |o_d|), P_j the softmax weight, f_j the
 * dropout factor (0 or 1/(1 - p)), e_j = 1 + |s_j - max s| + scale
 * sum_d |q_d k_jd| units of P_j's relative error; *lse = 0 (docs/harness.md,
 * "Tolerances"). */
static void attend_row(const kk_op_params *p, int64_t bh, int64_t i, double scale, const double *q,
                       const double *k, const double *v, double *s, double *e, double *o,
                       double *lse) {
    const int64_t D = p->i[KK__ATT_D];
    int64_t lo, hi;
    kk__attention_key_range(p, i, &lo, &hi);
    if (hi < lo) {
        for (int64_t d = 0; d < D; d++) o[d] = 0.0;
        *lse = e ? 0.0 : -INFINITY;
        return;
    }
    double mx = -INFINITY, sum = 0.0, esum = 0.0;
    for (int64_t j = lo; j <= hi; j++) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; d++) dot += q[d] * k[j * D + d];
        s[j] = scale * dot;
        mx = s[j] > mx ? s[j] : mx;
        if (!e) continue;
        double dot_abs = 0.0;
        for (int64_t d = 0; d < D; d++) dot_abs += fabs(q[d] * k[j * D + d]);
        e[j] = 1.0 + scale * dot_abs;
    }
    for (int64_t j = lo; j <= hi; j++) {
        if (e) e[j] += mx - s[j];
        s[j] = exp(s[j] - mx); /* <= 1: no overflow, and the largest term is exactly 1 */
        sum += s[j];
        if (e) esum += s[j] * e[j];
    }
    const double drop = p->f[KK__ATT_DROPOUT];
    if (drop > 0.0) {
        const uint32_t threshold = kk__dropout_threshold(drop);
        const uint64_t seed = (uint64_t)p->i[KK__ATT_SEED], offset = (uint64_t)p->i[KK__ATT_OFFSET];
        for (int64_t j = lo; j <= hi; j++)
            s[j] = kk__dropout_keep(seed, offset, (uint32_t)bh, (uint32_t)i, (uint32_t)j, threshold)
                       ? s[j] / (1.0 - drop)
                       : 0.0;
    }
    for (int64_t d = 0; d < D; d++) {
        double acc = 0.0;
        for (int64_t j = lo; j <= hi; j++) acc += s[j] * v[j * D + d];
        o[d] = acc / sum;
        if (!e) continue;
        double mag = 0.0; /* s_j = P_j f_j sum, esum = sum_j P_j e_j sum */
        for (int64_t j = lo; j <= hi; j++) mag += s[j] * e[j] * fabs(v[j * D + d]);
        o[d] = (mag + fabs(o[d]) * esum) / sum;
    }
    *lse = e ? 0.0 : mx + log(sum);
}

void kk__attention_ref_row(const kk_op_params *p, int64_t bh, int64_t i, double scale,
                           const double *q, const double *k, const double *v, double *s, double *e,
                           double *o, double *lse) {
    attend_row(p, bh, i, scale, q, k, v, s, e, o, lse);
}

/* The reference (mag = 0) or the magnitude (mag = 1) of every row. */
static kk_status run(const kk_op_params *p, const double *const *in, double *const *out, int mag) {
    const int64_t B = p->i[KK__ATT_B], Hq = p->i[KK__ATT_HQ], Hkv = p->i[KK__ATT_HKV];
    const int64_t Sq = p->i[KK__ATT_SQ], Sk = p->i[KK__ATT_SK], D = p->i[KK__ATT_D];
    const double scale = p->f[KK__ATT_SCALE] > 0.0 ? p->f[KK__ATT_SCALE] : 1.0 / sqrt((double)D);
    const int64_t group = Hq / Hkv;
    /* Heads are independent: spread them over the cores (the reference of one
   * of the seeds' fuzz cases is 80 GFLOP). Each row is still the plain loop. */
    int failed = 0;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        double *s = malloc((size_t)Sk * (mag ? 2 : 1) * sizeof *s);
        if (!s) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t bh = 0; bh < B * Hq; bh++) {
            if (!s) continue;
            const int64_t b = bh / Hq, h = bh % Hq, kvh = h / group;
            const double *k = in[1] + (b * Hkv + kvh) * Sk * D;
            const double *v = in[2] + (b * Hkv + kvh) * Sk * D;
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t row = bh * Sq + i;
                double lse;
                attend_row(p, bh, i, scale, in[0] + row * D, k, v, s, mag ? s + Sk : NULL,
                           out[0] + row * D, &lse);
                if (p->i[KK__ATT_LSE]) out[1][row] = lse;
            }
        }
        free(s);
    }
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention", "no memory for %lld scores",
                         (long long)Sk);
    return KK_OK;
}

kk_status kk__attention_reference(const kk_op_params *p, const double *const *in,
                                  double *const *out) {
    return run(p, in, out, 0);
}

kk_status kk__attention_magnitude(const kk_op_params *p, const double *const *in,
                                  double *const *out) {
    return run(p, in, out, 1);
}

static const kk_op_param attention_params[KK__ATT_NPARAMS] = {
    [KK__ATT_B] = KK__P_INT("B", 1, 65536, 1, 1, "batch"),
    [KK__ATT_HQ] = KK__P_INT("Hq", 1, 1024, 1, 4, "query heads"),
    [KK__ATT_HKV] = KK__P_INT("Hkv", 1, 1024, 1, 4, "key/value heads; Hq % Hkv == 0 (GQA)"),
    [KK__ATT_SQ] = KK__P_INT("Sq", 1, KK__SEQ_MAX, 1, 128, "query length"),
    [KK__ATT_SK] = KK__P_INT("Sk", 1, KK__SEQ_MAX, 1, 128, "key length"),
    [KK__ATT_D] = KK__P_INT("D", 16, 256, 1, 64, "head dimension"),
    [KK__ATT_CAUSAL] =
        KK__P_BOOL("causal", 0, "query i sees keys j <= i + Sk - Sq (bottom-right aligned)"),
    [KK__ATT_WL] = KK__P_INT("window_left", -1, KK__SEQ_MAX, 1, -1,
                             "keys j >= i + Sk - Sq - w only; -1 = unlimited"),
    [KK__ATT_WR] = KK__P_INT("window_right", -1, KK__SEQ_MAX, 1, -1,
                             "keys j <= i + Sk - Sq + w only; -1 = unlimited"),
    [KK__ATT_SCALE] = KK__P_FLOAT("scale", 0.0, 1e6, 0.0, "softmax scale; 0 = 1/sqrt(D)"),
    [KK__ATT_LSE] = KK__P_BOOL("lse", 0, "also write the log-sum-exp [B,Hq,Sq] (f32, natural log)"),
    [KK__ATT_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of q, k, v and o"),
    [KK__ATT_DROPOUT] = KK__P_FLOAT("dropout", 0.0, 0.99, 0.0,
                                    "drop probability of each softmax weight (src/core/philox.h)"),
    [KK__ATT_SEED] = KK__P_INT("seed", 0, INT64_MAX, 1, 0, "dropout: Philox key"),
    [KK__ATT_OFFSET] = KK__P_INT("offset", 0, INT64_MAX, 1, 0, "dropout: Philox counter offset"),
};

/* The fuzzer's draw: Hq a multiple of Hkv, the usual head dims most of the
 * time, windows, a custom scale and dropout only sometimes. */
void kk__attention_fuzz(kk__rng *r, kk_op_params *p, int big) {
    static const int64_t dims[9] = {16, 32, 64, 80, 96, 128, 160, 192, 256};
    const int64_t hkv = 1 + kk__rng_below(r, big ? 2 : 4);
    const int64_t sk = kk__fuzz_size(r, 300);
    kk__fuzz_set_int(p, "B", kk__fuzz_size(r, big ? 2 : 3));
    kk__fuzz_set_int(p, "Hkv", hkv);
    kk__fuzz_set_int(p, "Hq", hkv * (1 + kk__rng_below(r, big ? 2 : 4)));
    kk__fuzz_set_int(p, "Sq", kk__fuzz_size(r, big ? 16 : 300));
    kk__fuzz_set_int(p, "Sk", sk);
    kk__fuzz_set_int(p, "D",
                     kk__rng_below(r, 4) ? dims[kk__rng_below(r, 9)] : 16 + kk__rng_below(r, 241));
    kk__fuzz_set_int(p, "window_left",
                     kk__rng_below(r, 4) ? -1 : (int64_t)kk__rng_below(r, (uint32_t)sk + 1));
    kk__fuzz_set_int(p, "window_right",
                     kk__rng_below(r, 4) ? -1 : (int64_t)kk__rng_below(r, (uint32_t)sk + 1));
    const int s = kk_op_param_index(p->op, "scale");
    if (s >= 0 && kk__rng_below(r, 8) == 0) p->f[s] = 0.05 + 0.45 * kk__rng_uniform(r);
    /* dropout in one case of four, with any seed and offset (the Philox
     * mask's key and counter: the high words matter too) */
    const int dp = kk_op_param_index(p->op, "dropout");
    if (dp >= 0) p->f[dp] = kk__rng_below(r, 4) == 0 ? 0.05 + 0.55 * kk__rng_uniform(r) : 0.0;
    kk__fuzz_set_int(p, "seed", (int64_t)(kk__rng_next(r) >> 1));
    kk__fuzz_set_int(p, "offset", (int64_t)(kk__rng_next(r) >> 1));
}

const kk_op kk__op_attention = {
    .id = KK__OP_ID_attention,
    .name = "attention",
    .summary = "o = softmax(scale . q k^T + mask) v per head; GQA, causal, windows",
    .nparams = KK__ATT_NPARAMS,
    .params = attention_params,
    .validate = kk__attention_validate,
    .describe = kk__attention_describe,
    .flops = kk__attention_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__attention_reference,
    .magnitude = kk__attention_magnitude,
    /* f32 adds KK__ACC_F32 times the magnitude: the f32 scores' and sums'
     * error where o cancels (docs/harness.md, "Tolerances"); in f16 and bf16
     * P's rounding to the input type (rtol) dominates. */
    .ntolerances = 3,
    .tolerances = {KK__TOL_ACC(KK_DTYPE_F32, 1e-5, 1e-4, 1e-5, KK__BOTH, KK_CHECK_ALLOW_NONFINITE,
                               KK__ACC_F32),
                   KK__TOL(KK_DTYPE_F16, 2e-3, 4e-3, 5e-3, KK__BOTH, KK_CHECK_ALLOW_NONFINITE),
                   KK__TOL(KK_DTYPE_BF16, 1e-2, 2e-2, 1e-2, KK__BOTH, KK_CHECK_ALLOW_NONFINITE)},
    .fuzz = kk__attention_fuzz,
    .grow_param = "Sk",
};

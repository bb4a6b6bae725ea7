/* The `rope_kv_append` op: parameters, tensors, work counts and the float64
 * reference, built on rope's (its parameters, frequencies and reference row:
 * kk__rope_kv_append_rope_params). What it computes: rope_kv_append.h. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "opdef/rope.h"
#include "opdef/rope_kv_append.h"

static const char *const styles[] = {"neox", "gptj", NULL};
static const char *const scalings[] = {"none", "llama3", NULL};

const kk_op_param kk__rope_kv_append_params[KK__RKV_NPARAMS] = {
    [KK__RKV_B] = KK__P_INT("B", 1, 65536, 1, 4, "batch: sequences"),
    [KK__RKV_HQ] = KK__P_INT("Hq", 1, 1024, 1, 8, "query heads"),
    [KK__RKV_HKV] = KK__P_INT("Hkv", 1, 1024, 1, 2, "key/value heads"),
    [KK__RKV_S] = KK__P_INT("S", 1, KK__SEQ_MAX, 1, 1, "new tokens per sequence (1 when decoding)"),
    [KK__RKV_SMAX] = KK__P_INT("S_max", 1, KK__SEQ_MAX, 1, 256, "cache rows per sequence, >= S"),
    [KK__RKV_D] = KK__P_INT("D", 2, 1024, 1, 64, "head dimension"),
    [KK__RKV_ROTARY] = KK__P_INT("rotary_dim", 0, 1024, 1, 0,
                                 "dimensions rotated: even, <= D; 0 = D (then D even)"),
    [KK__RKV_THETA] =
        KK__P_FLOAT("theta", 1.0, 1e9, 10000.0, "frequency base: f_i = theta^(-2i/rotary_dim)"),
    [KK__RKV_STYLE] = KK__P_ENUM("style", styles, 0, "neox or gptj pairs, as rope"),
    [KK__RKV_DTYPE] = KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16,
                                  "element type of q, k, v and the caches"),
    [KK__RKV_SCALING] = KK__P_ENUM("scaling", scalings, 0, "none or llama3, as rope"),
    [KK__RKV_FACTOR] = KK__P_FLOAT("factor", 1e-3, 1e4, 8.0, "llama3's factor, as rope"),
    [KK__RKV_LOW] = KK__P_FLOAT("low_freq_factor", 1e-3, 1e4, 1.0, "llama3, as rope"),
    [KK__RKV_HIGH] = KK__P_FLOAT("high_freq_factor", 1e-3, 1e4, 4.0, "llama3, as rope"),
    [KK__RKV_OLD_LEN] =
        KK__P_INT("original_max_position", 1, INT64_C(1) << 24, 1, 8192, "llama3, as rope"),
};

void kk__rope_kv_append_rope_params(const kk_op_params *p, kk_op_params *rope) {
    memset(rope, 0, sizeof *rope);
    rope->op = &kk__op_rope;
    rope->i[KK__ROPE_B] = p->i[KK__RKV_B];
    rope->i[KK__ROPE_H] = p->i[KK__RKV_HQ];
    rope->i[KK__ROPE_S] = p->i[KK__RKV_S];
    rope->i[KK__ROPE_D] = p->i[KK__RKV_D];
    rope->i[KK__ROPE_ROTARY] = p->i[KK__RKV_ROTARY];
    rope->f[KK__ROPE_THETA] = p->f[KK__RKV_THETA];
    rope->i[KK__ROPE_STYLE] = p->i[KK__RKV_STYLE];
    rope->i[KK__ROPE_DTYPE] = p->i[KK__RKV_DTYPE];
    rope->i[KK__ROPE_POSITIONS] = 1;
    rope->i[KK__ROPE_SCALING] = p->i[KK__RKV_SCALING];
    rope->f[KK__ROPE_FACTOR] = p->f[KK__RKV_FACTOR];
    rope->f[KK__ROPE_LOW] = p->f[KK__RKV_LOW];
    rope->f[KK__ROPE_HIGH] = p->f[KK__RKV_HIGH];
    rope->i[KK__ROPE_OLD_LEN] = p->i[KK__RKV_OLD_LEN];
}

static kk_status validate(const kk_op_params *p) {
    const int64_t S = p->i[KK__RKV_S], smax = p->i[KK__RKV_SMAX];
    if (S > smax) {
        char expected[64];
        snprintf(expected, sizeof expected, "at most S_max = %lld", (long long)smax);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope_kv_append", "S", expected, "%lld",
                             (long long)S);
    }
    kk_op_params rope;
    kk__rope_kv_append_rope_params(p, &rope);
    return kk__rope_check(&rope, "rope_kv_append");
}

kk_status kk__rope_kv_append_check_len(const kk_op_params *p, int64_t b, int64_t len) {
    const int64_t S = p->i[KK__RKV_S], smax = p->i[KK__RKV_SMAX];
    if (len >= 0 && len <= smax - S) return KK_OK;
    char what[48], expected[128];
    snprintf(what, sizeof what, "cache_seqlens[%lld]", (long long)b);
    snprintf(expected, sizeof expected, "0..%lld (S_max = %lld rows, S = %lld appended)",
             (long long)(smax - S), (long long)smax, (long long)S);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope_kv_append", what, expected, "%lld",
                         (long long)len);
}

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t B = p->i[KK__RKV_B], Hq = p->i[KK__RKV_HQ], Hkv = p->i[KK__RKV_HKV];
    const int64_t S = p->i[KK__RKV_S], smax = p->i[KK__RKV_SMAX], D = p->i[KK__RKV_D];
    const kk_dtype dt = (kk_dtype)p->i[KK__RKV_DTYPE];
    const int64_t *qs = (int64_t[]){B, Hq, S, D}, *ks = (int64_t[]){B, Hkv, S, D};
    const int64_t *cs = (int64_t[]){B, Hkv, smax, D};
    int n = 0;
    n += kk__tensor(&out[n], "q", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "k", dt, 0, 4, ks);
    n += kk__tensor(&out[n], "v", dt, 0, 4, ks);
    n += kk__tensor(&out[n], "cache_seqlens", KK_DTYPE_INT32, 0, 1, (int64_t[]){B});
    n += kk__tensor(&out[n], "k_cache_in", dt, 0, 4, cs);
    n += kk__tensor(&out[n], "v_cache_in", dt, 0, 4, cs);
    n += kk__tensor(&out[n], "q_out", dt, 1, 4, qs);
    n += kk__tensor(&out[n], "k_cache", dt, 1, 4, cs);
    n += kk__tensor(&out[n], "v_cache", dt, 1, 4, cs);
    return n;
}

/* rope's 3 FLOPs per rotated element, for q and k; copies not counted. */
static double flops(const kk_op_params *p) {
    kk_op_params rope;
    kk__rope_kv_append_rope_params(p, &rope);
    return 3.0 * (double)p->i[KK__RKV_B] * (double)(p->i[KK__RKV_HQ] + p->i[KK__RKV_HKV]) *
           (double)p->i[KK__RKV_S] * (double)kk__rope_rotary_dim(&rope);
}

static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    const int64_t B = p->i[KK__RKV_B], Hq = p->i[KK__RKV_HQ], Hkv = p->i[KK__RKV_HKV];
    const int64_t S = p->i[KK__RKV_S], smax = p->i[KK__RKV_SMAX], D = p->i[KK__RKV_D];
    const double *lens = in[KK__RKV_T_LENS]; /* int32: exact */
    for (int64_t b = 0; b < B; b++) {
        const kk_status st = kk__rope_kv_append_check_len(p, b, (int64_t)lens[b]);
        if (st != KK_OK) return st;
    }
    kk_op_params rope;
    kk__rope_kv_append_rope_params(p, &rope);
    double inv_freq[512]; /* R / 2 <= 512 */
    kk__rope_inv_freq(&rope, inv_freq);
    for (int64_t row = 0; row < B * Hq * S; row++)
        kk__rope_ref_row(&rope, inv_freq, lens[row / (Hq * S)] + (double)(row % S),
                         in[KK__RKV_T_Q] + row * D, out[0] + row * D);
    const size_t cache = (size_t)(B * Hkv * smax * D) * sizeof(double);
    double *kc = out[1], *vc = out[2];
    memcpy(kc, in[KK__RKV_T_KC_IN], cache);
    memcpy(vc, in[KK__RKV_T_VC_IN], cache);
    for (int64_t row = 0; row < B * Hkv * S; row++) {
        const int64_t s = row % S, slab = row / S, b = slab / Hkv;
        const int64_t at = (slab * smax + (int64_t)lens[b] + s) * D; /* the row it lands on */
        kk__rope_ref_row(&rope, inv_freq, lens[b] + (double)s, in[KK__RKV_T_K] + row * D, kc + at);
        memcpy(vc + at, in[KK__RKV_T_V] + row * D, (size_t)D * sizeof(double));
    }
    return KK_OK;
}

/* rope's draw (rotary_dim, theta, llama3), then a decode step half of the
 * time, a GQA group of 1 to 8, and a cache from S to S + 299 rows. --big:
 * always a decode step, so that S_max can grow from 1. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    kk__rope_fuzz(r, p, big);
    if (big || kk__rng_below(r, 2)) p->i[KK__RKV_S] = 1;
    kk__fuzz_set_int(p, "Hq", p->i[KK__RKV_HKV] * (1 + (int64_t)kk__rng_below(r, 8)));
    kk__fuzz_set_int(p, "S_max", p->i[KK__RKV_S] + kk__fuzz_size(r, 300) - 1);
}

/* The lengths are not drawn: write_input spreads them over 0..S_max - S. */
static kk__fill_rule fill(const kk_op_params *p, int k) {
    (void)p;
    return (kk__fill_rule){k == KK__RKV_T_LENS ? KK__FILL_BY_OP : KK__FILL_NORMAL, 0};
}

/* Scattered lengths from 0 up, and the last sequence's cache filled to its
 * end (S_max - S), the edge an off-by-one write crosses. */
static void write_input(const kk_op_params *p, int k, void *buf, int64_t n) {
    (void)k;
    const int64_t room = p->i[KK__RKV_SMAX] - p->i[KK__RKV_S];
    int32_t *lens = buf;
    for (int64_t b = 0; b < n; b++) lens[b] = (int32_t)(b == n - 1 ? room : b * 7919 % (room + 1));
}

const kk_op kk__op_rope_kv_append = {
    .id = KK__OP_ID_rope_kv_append,
    .name = "rope_kv_append",
    .summary = "decode step: q, k rotated at cache_seqlens[b]+s; k, v appended to the caches "
               "[B,Hkv,S_max,D]",
    .nparams = KK__RKV_NPARAMS,
    .params = kk__rope_kv_append_params,
    .validate = validate,
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    KK__ROPE_KV_APPEND_TOLERANCES,
    .fuzz = fuzz,
    .grow_param = "S_max",
    .fill = fill,
    .write_input = write_input,
};

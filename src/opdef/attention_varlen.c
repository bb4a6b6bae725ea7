/* The `attention_varlen` op: parameters, tensors, FLOPs and the float64
 * reference (what the op computes: src/opdef/attention_varlen.h). The
 * reference is the `attention` reference's row (kk__attention_ref_row) run
 * for every row of every sequence, on the sequence's own lengths: a packed
 * batch is exactly its sequences, one by one. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/threads.h"
#include "opdef/attention_varlen.h"

static const kk_op_param params[KK__AVL_NPARAMS] = {
    KK__AVL_PARAMS_TO_SCALE,
    [KK__AVL_LSE] =
        KK__P_BOOL("lse", 0, "also write the log-sum-exp [1,Hq,total_q] (f32, natural log)"),
    [KK__AVL_DTYPE] =
        KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16, "element type of q, k, v and o"),
    [KK__AVL_DROPOUT] = KK__P_FLOAT(
        "dropout", 0.0, 0.99, 0.0,
        "drop probability of each softmax weight (src/core/philox.h, batch = sequence)"),
    [KK__AVL_SEED] = KK__AVL_PARAM_SEED,
    [KK__AVL_OFFSET] = KK__AVL_PARAM_OFFSET,
    [KK__AVL_LENS_Q] = KK__AVL_PARAM_SEQLENS_Q,
    [KK__AVL_LENS_K] = KK__AVL_PARAM_SEQLENS_K,
};

/* The op whose errors these are: attention_varlen, or the backward whose
 * sizes are its. */
static const char *op_name(const kk_op_params *p) {
    return p && p->op ? p->op->name : "attention_varlen";
}

/* The list of `which` (0: queries, 1: keys) and its count. */
static int lens(const kk_op_params *p, int which, const int32_t **v) {
    return kk_op_params_list(p, which ? "seqlens_k" : "seqlens_q", v);
}

static int64_t list_sum(const int32_t *v, int n) {
    int64_t s = 0;
    for (int k = 0; k < n; k++) s += v[k];
    return s;
}

static int64_t list_max(const int32_t *v, int n) {
    int64_t m = 0;
    for (int k = 0; k < n; k++) m = v[k] > m ? v[k] : m;
    return m;
}

/* ceil(T / n): the longest sequence of the even split. */
static int64_t even_max(int64_t total, int64_t n) { return n > 0 ? (total + n - 1) / n : 0; }

void kk__attention_varlen_dims(const kk_op_params *p, kk__varlen_dims *d) {
    const int32_t *lq, *lk;
    const int nq = lens(p, 0, &lq), nk = lens(p, 1, &lk);
    d->nseq = p->i[KK__AVL_NSEQ] ? p->i[KK__AVL_NSEQ] : nq;
    d->total_q = p->i[KK__AVL_TQ] ? p->i[KK__AVL_TQ] : list_sum(lq, nq);
    d->total_k = p->i[KK__AVL_TK] ? p->i[KK__AVL_TK] : list_sum(lk, nk);
    d->max_q = p->i[KK__AVL_MAXQ] ? p->i[KK__AVL_MAXQ]
               : nq               ? list_max(lq, nq)
                                  : even_max(d->total_q, d->nseq);
    d->max_k = p->i[KK__AVL_MAXK] ? p->i[KK__AVL_MAXK]
               : nk               ? list_max(lk, nk)
                                  : even_max(d->total_k, d->nseq);
}

int64_t kk__attention_varlen_len(const kk_op_params *p, int which, int64_t s) {
    const int32_t *v;
    const int n = lens(p, which, &v);
    if (n) return s < n ? v[s] : 0;
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t t = which ? d.total_k : d.total_q;
    return (s + 1) * t / d.nseq - s * t / d.nseq;
}

void kk__attention_varlen_seq_params(const kk_op_params *p, int64_t lq, int64_t lk,
                                     kk_op_params *out) {
    const kk_op *att = NULL;
    kk_op_find("attention", &att);
    memset(out, 0, sizeof *out);
    out->op = att;
    out->i[KK__ATT_B] = 1;
    out->i[KK__ATT_HQ] = p->i[KK__AVL_HQ];
    out->i[KK__ATT_HKV] = p->i[KK__AVL_HKV];
    out->i[KK__ATT_SQ] = lq;
    out->i[KK__ATT_SK] = lk;
    out->i[KK__ATT_D] = p->i[KK__AVL_D];
    out->i[KK__ATT_CAUSAL] = p->i[KK__AVL_CAUSAL];
    out->i[KK__ATT_WL] = p->i[KK__AVL_WL];
    out->i[KK__ATT_WR] = p->i[KK__AVL_WR];
    out->f[KK__ATT_SCALE] = p->f[KK__AVL_SCALE];
    out->i[KK__ATT_LSE] = p->i[KK__AVL_LSE];
    out->i[KK__ATT_DTYPE] = p->i[KK__AVL_DTYPE];
    out->f[KK__ATT_DROPOUT] = p->f[KK__AVL_DROPOUT];
    out->i[KK__ATT_SEED] = p->i[KK__AVL_SEED];
    out->i[KK__ATT_OFFSET] = p->i[KK__AVL_OFFSET];
}

/* cu [nseq+1] of tensor `name` ("cu_seqlens_q"): cu[0] = 0, nondecreasing,
 * cu[nseq] = total, no length above max_len. */
static kk_status check_cu(const char *op, const char *name, const int64_t *cu, int64_t nseq,
                          int64_t total, int64_t max_len, const char *max_name) {
    char what[96], expected[160];
    if (cu[0] != 0) {
        snprintf(what, sizeof what, "%s[0]", name);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, what, "0", "%" PRId64, cu[0]);
    }
    for (int64_t s = 0; s < nseq; s++) {
        const int64_t len = cu[s + 1] - cu[s];
        if (len >= 0 && len <= max_len) continue;
        snprintf(what, sizeof what, "%s[%" PRId64 "]", name, s + 1);
        if (len < 0)
            snprintf(expected, sizeof expected,
                     "at least %s[%" PRId64 "] = %" PRId64 " (nondecreasing offsets)", name, s,
                     cu[s]);
        else
            snprintf(expected, sizeof expected,
                     "at most %s[%" PRId64 "] + %s = %" PRId64 " (sequence %" PRId64 " has %" PRId64
                     " rows: raise %s)",
                     name, s, max_name, cu[s] + max_len, s, len, max_name);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, what, expected, "%" PRId64, cu[s + 1]);
    }
    if (cu[nseq] != total) {
        snprintf(what, sizeof what, "%s[%" PRId64 "]", name, nseq);
        snprintf(expected, sizeof expected, "the total %" PRId64 " (the rows of the tensor)",
                 total);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, what, expected, "%" PRId64, cu[nseq]);
    }
    return KK_OK;
}

/* Both offsets' tensors, checked; cq, ck hold them as int64 already. */
static kk_status check_offsets(const kk_op_params *p, const int64_t *cq, const int64_t *ck) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const kk_status st =
        check_cu(op_name(p), "cu_seqlens_q", cq, d.nseq, d.total_q, d.max_q, "max_seqlen_q");
    return st != KK_OK ? st
                       : check_cu(op_name(p), "cu_seqlens_k", ck, d.nseq, d.total_k, d.max_k,
                                  "max_seqlen_k");
}

kk_status kk__attention_varlen_offsets(const kk_op_params *p, const int32_t *cu_q,
                                       const int32_t *cu_k, int64_t *cq, int64_t *ck) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    for (int64_t s = 0; s <= d.nseq; s++) cq[s] = cu_q[s], ck[s] = cu_k[s];
    return check_offsets(p, cq, ck);
}

kk_status kk__attention_varlen_offsets_f64(const kk_op_params *p, const double *cu_q,
                                           const double *cu_k, int64_t *cq, int64_t *ck) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    for (int64_t s = 0; s <= d.nseq; s++) /* int32 values: exact */
        cq[s] = (int64_t)cu_q[s], ck[s] = (int64_t)cu_k[s];
    return check_offsets(p, cq, ck);
}

static kk_status bad(const kk_op_params *p, const char *param, const char *expected,
                     const char *fmt, int64_t v) {
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op_name(p), param, expected, fmt, v);
}

kk_status kk__attention_varlen_validate(const kk_op_params *p) {
    char expected[160];
    const int64_t hq = p->i[KK__AVL_HQ], hkv = p->i[KK__AVL_HKV];
    if (hq % hkv != 0) {
        snprintf(expected, sizeof expected, "a divisor of Hq = %" PRId64, hq);
        return bad(p, "Hkv", expected, "%" PRId64, hkv);
    }
    const int32_t *lq, *lk;
    const int nq = lens(p, 0, &lq), nk = lens(p, 1, &lk);
    if (nq != nk) {
        snprintf(expected, sizeof expected,
                 "as many lengths as seqlens_q (%d); both lists or neither", nq);
        return bad(p, "seqlens_k", expected, "%" PRId64 " lengths", (int64_t)nk);
    }
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    if (nq && d.nseq != nq) {
        snprintf(expected, sizeof expected, "0 or %d, the sequences of seqlens_q", nq);
        return bad(p, "nseq", expected, "%" PRId64, d.nseq);
    }
    if (d.nseq < 1) return bad(p, "nseq", "1..65536 (or seqlens_q and seqlens_k)", "%" PRId64, 0);
    for (int w = 0; w < 2; w++) {
        const int32_t *v = w ? lk : lq;
        const char *tname = w ? "total_k" : "total_q", *mname = w ? "max_seqlen_k" : "max_seqlen_q";
        const int64_t total = w ? d.total_k : d.total_q, mx = w ? d.max_k : d.max_q;
        if (nq && total != list_sum(v, nq)) {
            snprintf(expected, sizeof expected, "0 or %" PRId64 ", the sum of %s", list_sum(v, nq),
                     w ? "seqlens_k" : "seqlens_q");
            return bad(p, tname, expected, "%" PRId64, total);
        }
        if (total < 1)
            return bad(p, tname, "1..16777216 (some sequence of at least one row)", "%" PRId64,
                       total);
        const int64_t longest = nq ? list_max(v, nq) : even_max(total, d.nseq);
        if (mx < longest) {
            snprintf(expected, sizeof expected, "0 or at least %" PRId64 ", the longest sequence",
                     longest);
            return bad(p, mname, expected, "%" PRId64, mx);
        }
    }
    return KK_OK;
}

int kk__attention_varlen_describe(const kk_op_params *p, kk_op_tensor *out) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t Hq = p->i[KK__AVL_HQ], Hkv = p->i[KK__AVL_HKV], D = p->i[KK__AVL_D];
    const kk_dtype dt = (kk_dtype)p->i[KK__AVL_DTYPE];
    int n = 0;
    n += kk__tensor(&out[n], "q", dt, 0, 4, (int64_t[]){1, Hq, d.total_q, D});
    n += kk__tensor(&out[n], "k", dt, 0, 4, (int64_t[]){1, Hkv, d.total_k, D});
    n += kk__tensor(&out[n], "v", dt, 0, 4, (int64_t[]){1, Hkv, d.total_k, D});
    n += kk__tensor(&out[n], "cu_seqlens_q", KK_DTYPE_INT32, 0, 1, (int64_t[]){d.nseq + 1});
    n += kk__tensor(&out[n], "cu_seqlens_k", KK_DTYPE_INT32, 0, 1, (int64_t[]){d.nseq + 1});
    n += kk__tensor(&out[n], "o", dt, 1, 4, (int64_t[]){1, Hq, d.total_q, D});
    if (p->i[KK__AVL_LSE])
        n += kk__tensor(&out[n], "lse", KK_DTYPE_F32, 1, 3, (int64_t[]){1, Hq, d.total_q});
    return n;
}

/* Visible (query, key) pairs of one sequence. */
static double seq_pairs(const kk_op_params *p, int64_t lq, int64_t lk) {
    if (lq == 0 || lk == 0) return 0.0;
    kk_op_params a;
    kk__attention_varlen_seq_params(p, lq, lk, &a);
    double pairs = 0.0;
    for (int64_t i = 0; i < lq; i++) {
        int64_t lo, hi;
        kk__attention_key_range(&a, i, &lo, &hi);
        if (hi >= lo) pairs += (double)(hi - lo + 1);
    }
    return pairs;
}

/* 4 FLOPs per visible pair and head dim element, as `attention`, over the
 * sequences of the case (the lists, or the even split). */
double kk__attention_varlen_flops(const kk_op_params *p) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    double pairs = 0.0;
    for (int64_t s = 0; s < d.nseq; s++)
        pairs += seq_pairs(p, kk__attention_varlen_len(p, 0, s), kk__attention_varlen_len(p, 1, s));
    return 4.0 * (double)p->i[KK__AVL_HQ] * (double)p->i[KK__AVL_D] * pairs;
}

/* The reference (mag = 0) or the magnitude (mag = 1) of every row. */
static kk_status run(const kk_op_params *p, const double *const *in, double *const *out, int mag) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t Hq = p->i[KK__AVL_HQ], Hkv = p->i[KK__AVL_HKV], D = p->i[KK__AVL_D];
    const int64_t group = Hq / Hkv, TQ = d.total_q, TK = d.total_k;
    const double scale = p->f[KK__AVL_SCALE] > 0.0 ? p->f[KK__AVL_SCALE] : 1.0 / sqrt((double)D);
    int64_t *cu = malloc((size_t)(2 * (d.nseq + 1)) * sizeof *cu);
    if (!cu)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen",
                         "no memory for %" PRId64 " offsets", 2 * (d.nseq + 1));
    int64_t *cq = cu, *ck = cu + d.nseq + 1;
    const kk_status st =
        kk__attention_varlen_offsets_f64(p, in[KK__AVL_T_CUQ], in[KK__AVL_T_CUK], cq, ck);
    if (st != KK_OK) {
        free(cu);
        return st;
    }
    double *o = out[0], *lse = p->i[KK__AVL_LSE] ? out[1] : NULL;
    int failed = 0;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        const int64_t ns = d.max_k > 0 ? d.max_k : 1;
        double *s = malloc((size_t)ns * (mag ? 2 : 1) * sizeof *s);
        if (!s) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t sh = 0; sh < d.nseq * Hq; sh++) {
            const int64_t seq = sh / Hq, h = sh % Hq, kvh = h / group;
            const int64_t q0 = cq[seq], lq = cq[seq + 1] - q0, k0 = ck[seq], lk = ck[seq + 1] - k0;
            if (!s || lq == 0) continue;
            kk_op_params a;
            kk__attention_varlen_seq_params(p, lq, lk, &a);
            const double *k = in[KK__AVL_T_K] + (kvh * TK + k0) * D;
            const double *v = in[KK__AVL_T_V] + (kvh * TK + k0) * D;
            for (int64_t i = 0; i < lq; i++) {
                const int64_t row = h * TQ + q0 + i;
                double l;
                /* the sequence is the dropout mask's batch: bh = seq * Hq + h */
                kk__attention_ref_row(&a, seq * Hq + h, i, scale, in[KK__AVL_T_Q] + row * D, k, v,
                                      s, mag ? s + ns : NULL, o + row * D, &l);
                if (lse) lse[row] = l;
            }
        }
        free(s);
    }
    free(cu);
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen",
                         "no memory for %" PRId64 " scores", d.max_k);
    return KK_OK;
}

kk_status kk__attention_varlen_reference(const kk_op_params *p, const double *const *in,
                                         double *const *out) {
    return run(p, in, out, 0);
}

static kk_status magnitude(const kk_op_params *p, const double *const *in, double *const *out) {
    return run(p, in, out, 1);
}

/* A packed batch: 1 to 6 sequences of 0 to 64 query rows and keys each
 * (zero-length sequences one time in five, Sq != Sk per sequence), the
 * attention draw's heads, head dims, windows, scale and dropout; max_seqlen
 * at 0 (the longest) or, one time in four, above it as FlashAttention's
 * callers often give it. --big: Hkv = 1, so that Hq can grow. */
void kk__attention_varlen_fuzz(kk__rng *r, kk_op_params *p, int big) {
    kk__attention_fuzz(r, p, big);
    if (big) kk__fuzz_set_int(p, "Hkv", 1);
    const int n = 1 + (int)kk__rng_below(r, 6);
    char text[2][256] = {"", ""};
    int64_t total[2] = {0, 0}, longest[2] = {0, 0};
    for (int s = 0; s < n; s++)
        for (int w = 0; w < 2; w++) {
            int64_t len = kk__rng_below(r, 5) == 0 ? 0 : kk__fuzz_size(r, 64);
            if (s == n - 1 && total[w] == 0 && len == 0) len = 1; /* some row somewhere */
            total[w] += len;
            longest[w] = len > longest[w] ? len : longest[w];
            snprintf(text[w] + strlen(text[w]), sizeof text[w] - strlen(text[w]), "%s%lld",
                     s ? ":" : "", (long long)len);
        }
    kk_op_params_set(p, "seqlens_q", text[0]);
    kk_op_params_set(p, "seqlens_k", text[1]);
    kk__fuzz_set_int(p, "nseq", 0);
    kk__fuzz_set_int(p, "total_q", 0);
    kk__fuzz_set_int(p, "total_k", 0);
    kk__fuzz_set_int(p, "max_seqlen_q",
                     kk__rng_below(r, 4) ? 0 : longest[0] + kk__rng_below(r, 50));
    kk__fuzz_set_int(p, "max_seqlen_k",
                     kk__rng_below(r, 4) ? 0 : longest[1] + kk__rng_below(r, 50));
    kk__fuzz_set_int(p, "window_left",
                     kk__rng_below(r, 4) ? -1
                                         : (int64_t)kk__rng_below(r, (uint32_t)longest[1] + 1));
    kk__fuzz_set_int(p, "window_right",
                     kk__rng_below(r, 4) ? -1
                                         : (int64_t)kk__rng_below(r, (uint32_t)longest[1] + 1));
}

/* The offsets are not drawn: they are the case's sequence lengths (its
 * seqlens lists, or the even split), summed. */
static kk__fill_rule fill(const kk_op_params *p, int k) {
    (void)p;
    return (kk__fill_rule){
        k == KK__AVL_T_CUQ || k == KK__AVL_T_CUK ? KK__FILL_BY_OP : KK__FILL_NORMAL, 0};
}

void kk__attention_varlen_write_cu(const kk_op_params *p, int keys, int32_t *cu, int64_t n) {
    cu[0] = 0;
    for (int64_t s = 0; s + 1 < n; s++)
        cu[s + 1] = cu[s] + (int32_t)kk__attention_varlen_len(p, keys, s);
}

static void write_input(const kk_op_params *p, int k, void *buf, int64_t n) {
    kk__attention_varlen_write_cu(p, k == KK__AVL_T_CUK, buf, n);
}

const kk_op kk__op_attention_varlen = {
    .id = KK__OP_ID_attention_varlen,
    .name = "attention_varlen",
    .summary = "attention per sequence of a packed batch (cu_seqlens_q, cu_seqlens_k); "
               "GQA, causal, windows",
    .nparams = KK__AVL_NPARAMS,
    .params = params,
    .validate = kk__attention_varlen_validate,
    .describe = kk__attention_varlen_describe,
    .flops = kk__attention_varlen_flops,
    .bytes = kk__op_bytes_io,
    .reference = kk__attention_varlen_reference,
    .magnitude = magnitude, /* attention's, per sequence; its rows too */
    .ntolerances = 3,
    .tolerances = {{.dtype = KK_DTYPE_F32,
                    .atol = 1e-5,
                    .rtol = 1e-4,
                    .l2 = 1e-5,
                    .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2,
                    .flags = KK_CHECK_ALLOW_NONFINITE,
                    .acc = KK__ACC_F32},
                   {.dtype = KK_DTYPE_F16,
                    .atol = 2e-3,
                    .rtol = 4e-3,
                    .l2 = 5e-3,
                    .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2,
                    .flags = KK_CHECK_ALLOW_NONFINITE},
                   {.dtype = KK_DTYPE_BF16,
                    .atol = 1e-2,
                    .rtol = 2e-2,
                    .l2 = 1e-2,
                    .criteria = KK_CHECK_ELEMENTWISE | KK_CHECK_L2,
                    .flags = KK_CHECK_ALLOW_NONFINITE}},
    .fuzz = kk__attention_varlen_fuzz,
    .grow_param = "Hq",
    .fill = fill,
    .write_input = write_input,
};

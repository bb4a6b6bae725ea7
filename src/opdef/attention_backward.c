/* Attention backward in float64: dq, dk, dv of `attention` from the explicit
 * softmax, recomputed from q and k (the lse input is the kernels' shortcut, not
 * the reference's), the forward's Philox dropout mask and the o input:
 *   P = softmax(scale q k^T + mask), M the keep mask, f = M / (1 - p)
 *   dV = (P f)^T dO,   dP = (dO V^T) f,   D_i = dO_i . o_i,
 *   dS = P (dP - D),   dQ = scale dS K,   dK = scale dS^T Q,
 * with o the forward's output after dropout, so that D_i = sum_j P_ij dP_ij.
 * dk, dv of a kv head sum over the query heads of its group; rows that see no
 * key have zero gradients. The definition, the magnitudes the tolerances
 * scale with, and the inputs (o and lse made by the forward reference):
 * docs/kernels/attention.md, "Backward". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/philox.h"
#include "core/threads.h"
#include "kernelkit/dtype.h"
#include "opdef/attention_backward.h"

static kk_status validate(const kk_op_params *p) {
    const int64_t hq = p->i[KK__ATB_HQ], hkv = p->i[KK__ATB_HKV];
    if (hq % hkv == 0) return KK_OK;
    char expected[64];
    snprintf(expected, sizeof expected, "a divisor of Hq = %lld", (long long)hq);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention_backward", "Hkv", expected, "%lld",
                         (long long)hkv);
}

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t B = p->i[KK__ATB_B], Hq = p->i[KK__ATB_HQ], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const kk_dtype dt = (kk_dtype)p->i[KK__ATB_DTYPE];
    const int64_t qs[4] = {B, Hq, Sq, D}, ks[4] = {B, Hkv, Sk, D};
    int n = 0;
    n += kk__tensor(&out[n], "q", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "k", dt, 0, 4, ks);
    n += kk__tensor(&out[n], "v", dt, 0, 4, ks);
    n += kk__tensor(&out[n], "o", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "dO", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "lse", KK_DTYPE_F32, 0, 3, (int64_t[]){B, Hq, Sq});
    n += kk__tensor(&out[n], "dq", dt, 1, 4, qs);
    n += kk__tensor(&out[n], "dk", dt, 1, 4, ks);
    n += kk__tensor(&out[n], "dv", dt, 1, 4, ks);
    return n;
}

/* 10 FLOPs per (query, visible key, d): q.k recomputed, dO.v, and the
 * multiply-adds of dV, dQ and dK: 2.5 times the forward's count. */
static double flops(const kk_op_params *p) { return 2.5 * kk__attention_flops(p); }

static double scale_of(const kk_op_params *p) {
    const double s = p->f[KK__ATB_SCALE];
    return s > 0.0 ? s : 1.0 / sqrt((double)p->i[KK__ATB_D]);
}

void kk__attention_backward_forward_params(const kk_op_params *p, kk_op_params *fwd) {
    memset(fwd, 0, sizeof *fwd);
    fwd->op = &kk__op_attention;
    for (int k = KK__ATT_B; k <= KK__ATT_SCALE; k++) {
        fwd->i[k] = p->i[k];
        fwd->f[k] = p->f[k];
    }
    fwd->i[KK__ATT_LSE] = 1;
    fwd->i[KK__ATT_DTYPE] = p->i[KK__ATB_DTYPE];
    fwd->f[KK__ATT_DROPOUT] = p->f[KK__ATB_DROPOUT];
    fwd->i[KK__ATT_SEED] = p->i[KK__ATB_SEED];
    fwd->i[KK__ATT_OFFSET] = p->i[KK__ATB_OFFSET];
}

void kk__attention_backward_params_of(const kk_op_params *fwd, kk_op_params *out) {
    memset(out, 0, sizeof *out);
    out->op = &kk__op_attention_backward;
    for (int k = KK__ATT_B; k <= KK__ATT_SCALE; k++) {
        out->i[k] = fwd->i[k];
        out->f[k] = fwd->f[k];
    }
    out->i[KK__ATB_DTYPE] = fwd->i[KK__ATT_DTYPE];
    out->f[KK__ATB_DROPOUT] = fwd->f[KK__ATT_DROPOUT];
    out->i[KK__ATB_SEED] = fwd->i[KK__ATT_SEED];
    out->i[KK__ATB_OFFSET] = fwd->i[KK__ATT_OFFSET];
}

/* One kv group (b, kvh): every query head of the group, every row. mag = 0:
 * the gradients; mag = 1: their error scales (kk_op_magnitude), the same sums
 * over absolute values, where each P_ij carries a relative error of
 * e_ij = 1 + |lse_i| + scale sum_d |q_id k_jd| units (the f32 score and the
 * exp(s - lse) of a kernel). s, f: Sk scratch doubles. */
void kk__attention_backward_ref_group(const kk_op_params *p, const kk__atb_ref_rows *rows, int mag,
                                      int64_t b, int64_t kvh, double *s, double *f) {
    const int64_t Hq = p->i[KK__ATB_HQ], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const int64_t G = Hq / Hkv;
    const double scale = scale_of(p), drop = p->f[KK__ATB_DROPOUT];
    const uint32_t threshold = drop > 0.0 ? kk__dropout_threshold(drop) : 0;
    const uint64_t seed = (uint64_t)p->i[KK__ATB_SEED], offset = (uint64_t)p->i[KK__ATB_OFFSET];
    const double *k = rows->k, *v = rows->v;
    double *dk = rows->dk, *dv = rows->dv;
    for (int64_t x = 0; x < Sk * D; x++) dk[x] = dv[x] = 0.0;
    for (int64_t h = kvh * G; h < (kvh + 1) * G; h++) {
        const int64_t bh = b * Hq + h;
        for (int64_t i = 0; i < Sq; i++) {
            const int64_t row = h * rows->hs + i * D;
            const double *q = rows->q + row, *o = rows->o + row, *dO = rows->dO + row;
            double *dq = rows->dq + row;
            for (int64_t d = 0; d < D; d++) dq[d] = 0.0;
            int64_t lo, hi;
            kk__attention_key_range(p, i, &lo, &hi);
            if (hi < lo) continue;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = lo; j <= hi; j++) {
                double dot = 0.0;
                for (int64_t d = 0; d < D; d++) dot += q[d] * k[j * D + d];
                s[j] = scale * dot;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = lo; j <= hi; j++) sum += exp(s[j] - mx);
            const double lse = mx + log(sum);
            for (int64_t j = lo; j <= hi; j++) {
                s[j] = exp(s[j] - lse);
                f[j] = 1.0;
                if (drop > 0.0)
                    f[j] = kk__dropout_keep(seed, offset, (uint32_t)bh, (uint32_t)i, (uint32_t)j,
                                            threshold)
                               ? 1.0 / (1.0 - drop)
                               : 0.0;
            }
            double Di = 0.0, Di_abs = 0.0;
            for (int64_t d = 0; d < D; d++) {
                Di += dO[d] * o[d];
                Di_abs += fabs(dO[d] * o[d]);
            }
            for (int64_t j = lo; j <= hi; j++) {
                const double *kj = k + j * D, *vj = v + j * D;
                double dp = 0.0, dp_abs = 0.0, qk_abs = 0.0;
                for (int64_t d = 0; d < D; d++) {
                    dp += dO[d] * vj[d];
                    dp_abs += fabs(dO[d] * vj[d]);
                    qk_abs += fabs(q[d] * kj[d]);
                }
                const double P = s[j], dpm = dp * f[j], ds = P * (dpm - Di);
                if (!mag) {
                    for (int64_t d = 0; d < D; d++) {
                        dv[j * D + d] += P * f[j] * dO[d];
                        dq[d] += scale * ds * kj[d];
                        dk[j * D + d] += scale * ds * q[d];
                    }
                } else {
                    const double e = 1.0 + fabs(lse) + scale * qk_abs;
                    const double ds_abs = P * (dp_abs * f[j] + Di_abs + fabs(dpm - Di) * e);
                    for (int64_t d = 0; d < D; d++) {
                        dv[j * D + d] += P * f[j] * (1.0 + e) * fabs(dO[d]);
                        dq[d] += scale * ds_abs * fabs(kj[d]);
                        dk[j * D + d] += scale * ds_abs * fabs(q[d]);
                    }
                }
            }
        }
    }
}

static kk_status run(const kk_op_params *p, const double *const *in, double *const *out, int mag) {
    const int64_t B = p->i[KK__ATB_B], Hkv = p->i[KK__ATB_HKV], Sk = p->i[KK__ATB_SK];
    int failed = 0;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        double *s = malloc((size_t)Sk * 2 * sizeof *s);
        if (!s) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t g = 0; g < B * Hkv; g++)
            if (s) {
                const int64_t b = g / Hkv, kvh = g % Hkv, Hq = p->i[KK__ATB_HQ];
                const int64_t Sq = p->i[KK__ATB_SQ], D = p->i[KK__ATB_D];
                const int64_t qoff = b * Hq * Sq * D, kvoff = (b * Hkv + kvh) * Sk * D;
                const kk__atb_ref_rows x = {.q = in[KK__ATB_T_Q] + qoff,
                                            .o = in[KK__ATB_T_O] + qoff,
                                            .dO = in[KK__ATB_T_DO] + qoff,
                                            .k = in[KK__ATB_T_K] + kvoff,
                                            .v = in[KK__ATB_T_V] + kvoff,
                                            .dq = out[0] + qoff,
                                            .dk = out[1] + kvoff,
                                            .dv = out[2] + kvoff,
                                            .hs = Sq * D};
                kk__attention_backward_ref_group(p, &x, mag, b, kvh, s, s + Sk);
            }
        free(s);
    }
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_backward", "no memory for %lld scores",
                         (long long)Sk);
    return KK_OK;
}

static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    return run(p, in, out, 0);
}

static kk_status magnitude(const kk_op_params *p, const double *const *in, double *const *out) {
    return run(p, in, out, 1);
}

/* ---- inputs: q, k, v drawn from the case's parameters, o and lse made from
 * them by the forward reference (a kernel reads lse, so it must be the
 * forward's); dO is drawn from the case seed as usual ---- */

static kk__fill_rule fill(const kk_op_params *p, int k) {
    (void)p;
    return (kk__fill_rule){k == KK__ATB_T_DO ? KK__FILL_NORMAL : KK__FILL_BY_OP, 0};
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double round_to(kk_dtype dt, double x) {
    if (dt == KK_DTYPE_F16) return kk_f16_to_f32(kk_f32_to_f16((float)x));
    if (dt == KK_DTYPE_BF16) return kk_bf16_to_f32(kk_f32_to_bf16((float)x));
    return (float)x;
}

static void store(kk_dtype dt, void *buf, int64_t x, double v) {
    if (dt == KK_DTYPE_F16)
        ((uint16_t *)buf)[x] = kk_f32_to_f16((float)v);
    else if (dt == KK_DTYPE_BF16)
        ((uint16_t *)buf)[x] = kk_f32_to_bf16((float)v);
    else
        ((float *)buf)[x] = (float)v;
}

/* Input t (q, k or v) as the kernels see it: N(0, 1) from a seed of every
 * parameter (a list's values too), rounded to the dtype. */
static void draw(const kk_op_params *p, kk_dtype dt, int t, double *x, int64_t n) {
    uint64_t key = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
    for (int k = 0; k < p->op->nparams; k++) {
        uint64_t bits;
        memcpy(&bits, &p->f[k], sizeof bits);
        key = mix(key ^ (uint64_t)p->i[k]) ^ bits;
        const int32_t *values;
        const int nv = p->op->params[k].kind == KK_PARAM_LIST
                           ? kk_op_params_list(p, p->op->params[k].name, &values)
                           : 0;
        for (int e = 0; e < nv; e++) key = mix(key ^ (uint64_t)(uint32_t)values[e]);
    }
    kk__rng r;
    kk__rng_seed(&r, mix(key));
    for (int64_t e = 0; e < n; e += 2) {
        const double u1 = 1.0 - kk__rng_uniform(&r), u2 = kk__rng_uniform(&r);
        const double rad = sqrt(-2.0 * log(u1));
        x[e] = round_to(dt, rad * cos(6.283185307179586 * u2));
        if (e + 1 < n) x[e + 1] = round_to(dt, rad * sin(6.283185307179586 * u2));
    }
}

/* The lse of the last o this thread made: kk_case_fill_inputs asks for o, then
 * lse, of one case, and one forward reference (minutes at bench sizes) serves
 * both. Any other order or case computes it again. */
static _Thread_local struct {
    kk_op_params p;
    float *lse;
} last;

static int same_case(const kk_op_params *p) {
    const size_t n = (size_t)p->op->nparams;
    return last.lse && last.p.op == p->op && !memcmp(last.p.i, p->i, n * sizeof p->i[0]) &&
           !memcmp(last.p.f, p->f, n * sizeof p->f[0]) &&
           !memcmp(last.p.lists, p->lists, sizeof p->lists);
}

void kk__attention_backward_write_input(const kk_op_params *p, const kk__atb_inputs *x, int t,
                                        void *buf, int64_t n) {
    const kk_dtype dt = x->dt;
    const int64_t nq = x->nq, nk = x->nk, nlse = x->nlse;
    if (t <= KK__ATB_T_V) {
        double *v = malloc((size_t)n * sizeof *v);
        if (v) draw(p, dt, t, v, n);
        for (int64_t e = 0; e < n; e++) store(dt, buf, e, v ? v[e] : 0.0);
        free(v);
        return;
    }
    if (t == KK__ATB_T_LSE && same_case(p)) {
        memcpy(buf, last.lse, (size_t)n * sizeof(float));
        free(last.lse);
        last.lse = NULL;
        return;
    }
    /* o or lse: the forward reference on the drawn q, k, v */
    double *q = malloc((size_t)(nq * 2 + nk * 2 + nlse) * sizeof *q);
    if (!q) { /* a hook cannot fail: zeros, which the check then reports */
        memset(buf, 0, (size_t)n * (t == KK__ATB_T_LSE ? 4 : (size_t)kk_dtype_bytes(dt, 1)));
        return;
    }
    double *k = q + nq, *v = k + nk, *o = v + nk, *lse = o + nq;
    draw(p, dt, KK__ATB_T_Q, q, nq);
    draw(p, dt, KK__ATB_T_K, k, nk);
    draw(p, dt, KK__ATB_T_V, v, nk);
    if (x->forward(p, q, k, v, o, lse) != KK_OK) memset(o, 0, (size_t)(nq + nlse) * sizeof *o);
    for (int64_t e = 0; e < n; e++) {
        if (t == KK__ATB_T_LSE)
            ((float *)buf)[e] = (float)lse[e];
        else
            store(dt, buf, e, o[e]);
    }
    free(last.lse);
    last.lse = t == KK__ATB_T_O ? malloc((size_t)nlse * sizeof(float)) : NULL;
    if (last.lse) {
        for (int64_t e = 0; e < nlse; e++) last.lse[e] = (float)lse[e];
        last.p = *p;
    }
    free(q);
}

static kk_status forward(const kk_op_params *p, const double *q, const double *k, const double *v,
                         double *o, double *lse) {
    kk_op_params fwd;
    kk__attention_backward_forward_params(p, &fwd);
    return kk__attention_reference(&fwd, (const double *const[]){q, k, v},
                                   (double *const[]){o, lse});
}

static void write_input(const kk_op_params *p, int t, void *buf, int64_t n) {
    const int64_t B = p->i[KK__ATB_B], Hq = p->i[KK__ATB_HQ], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const kk__atb_inputs x = {.dt = (kk_dtype)p->i[KK__ATB_DTYPE],
                              .nq = B * Hq * Sq * D,
                              .nk = B * Hkv * Sk * D,
                              .nlse = B * Hq * Sq,
                              .forward = forward};
    kk__attention_backward_write_input(p, &x, t, buf, n);
}

static const kk_op_param params[KK__ATB_NPARAMS] = {
    [KK__ATB_B] = KK__P_INT("B", 1, 65536, 1, 1, "batch"),
    [KK__ATB_HQ] = KK__P_INT("Hq", 1, 1024, 1, 4, "query heads"),
    [KK__ATB_HKV] = KK__P_INT("Hkv", 1, 1024, 1, 4, "key/value heads; Hq % Hkv == 0 (GQA)"),
    [KK__ATB_SQ] = KK__P_INT("Sq", 1, KK__SEQ_MAX, 1, 128, "query length"),
    [KK__ATB_SK] = KK__P_INT("Sk", 1, KK__SEQ_MAX, 1, 128, "key length"),
    [KK__ATB_D] = KK__P_INT("D", 16, 256, 1, 64, "head dimension"),
    [KK__ATB_CAUSAL] =
        KK__P_BOOL("causal", 0, "query i sees keys j <= i + Sk - Sq (bottom-right aligned)"),
    [KK__ATB_WL] = KK__P_INT("window_left", -1, KK__SEQ_MAX, 1, -1,
                             "keys j >= i + Sk - Sq - w only; -1 = unlimited"),
    [KK__ATB_WR] = KK__P_INT("window_right", -1, KK__SEQ_MAX, 1, -1,
                             "keys j <= i + Sk - Sq + w only; -1 = unlimited"),
    [KK__ATB_SCALE] = KK__P_FLOAT("scale", 0.0, 1e6, 0.0, "softmax scale; 0 = 1/sqrt(D)"),
    [KK__ATB_DTYPE] = KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16,
                                  "element type of q, k, v, o, dO and the gradients"),
    [KK__ATB_DROPOUT] = KK__P_FLOAT("dropout", 0.0, 0.99, 0.0,
                                    "the forward's drop probability (src/core/philox.h)"),
    [KK__ATB_SEED] = KK__P_INT("seed", 0, INT64_MAX, 1, 0, "dropout: Philox key"),
    [KK__ATB_OFFSET] = KK__P_INT("offset", 0, INT64_MAX, 1, 0, "dropout: Philox counter offset"),
};

/* The CUDA kernel (src/cuda/kernels/attention_backward.cuh) rounds P f and dS
 * to the input dtype before its tensor-core GEMMs (dV += (P f)^T dO, dK +=
 * dS^T Q, dQ += dS K): one rounding of each term, at most u |term| with u the
 * dtype's unit roundoff (2^-8 bf16, 2^-11 f16), and the magnitudes above sum
 * those |terms| or more (m(dS_ij) >= |dS_ij|), so acc grows by u. The CPU
 * kernel keeps f32 and the plain rows. */
void kk__attention_backward_tolerance_on(kk_backend_kind backend, kk_tolerance *t) {
    if (backend != KK_BACKEND_CUDA) return;
    if (t->dtype == KK_DTYPE_BF16) t->acc += 0x1p-8;
    if (t->dtype == KK_DTYPE_F16) t->acc += 0x1p-11;
}

/* Tolerances: the forward's rows plus KK__ACC_F32 times the magnitude hook's
 * error scale. A kernel accumulates dV and dK over Sq * Hq/Hkv terms, dQ over
 * Sk terms and dP, D_i over D terms in f32; each term's own error is the
 * relative error of P (f32 scores and exp(s - lse): e_ij units) times the
 * term. The magnitudes sum exactly those absolute terms, so a correct f32
 * kernel stays within about a unit roundoff of them while a lost term, a
 * missing scale or mask does not (docs/kernels/attention.md, "Backward"). In
 * f16 and bf16 the output's rounding (rtol) dominates. */
const kk_op kk__op_attention_backward = {
    .id = KK__OP_ID_attention_backward,
    .name = "attention_backward",
    .summary = "dq, dk, dv of attention from q, k, v, o, dO and lse; GQA, causal, windows, dropout",
    .nparams = KK__ATB_NPARAMS,
    .params = params,
    .validate = validate,
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    .magnitude = magnitude,
    KK__ATB_TOLERANCES,
    .tolerance_on = kk__attention_backward_tolerance_on, /* 16-bit P and dS in the CUDA GEMMs */
    .fuzz = kk__attention_fuzz,
    .grow_param = "Sk",
    .fill = fill,
    .write_input = write_input,
};

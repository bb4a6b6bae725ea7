/* One block of query rows, FlashAttention style: walk the key blocks inside
 * the rows' mask range with a running max (log2 units) and sum per row, so
 * only O(BQ x D + BK x D) floats live per thread. Scores are transposed
 * (s[key][query]), so K and V are read straight from f32 tensors and only the
 * query block is transposed. docs/backends/cpu.md, "Attention". */
#include <math.h>
#include <string.h>

#include "core/philox.h"
#include "cpu/attention_cpu.h"
#include "cpu/cpu_rows.h"
#include "opdef/attention.h"

#define LN2 0.69314718055994530942

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* keys of the score and weight buffers: either block size */
#define BK_MAX (KK__ATT_BK > KK__ATT_BK_AMX ? KK__ATT_BK : KK__ATT_BK_AMX)

int64_t kk__att_scratch_floats(int64_t Dp) {
    const int64_t BQ = KK__ATT_BQ, BK = KK__ATT_BK;
    return 3 * round_up(BQ * Dp, 16) + 2 * round_up(BK * Dp, 16) + round_up(BK_MAX * BQ, 16) +
           round_up(Dp, 16) + 4 * round_up(BQ, 16) + 3 * round_up(2 * BQ, 16) +
           round_up(Dp / 2 * BQ, 16) + round_up(BK_MAX / 2 * BQ, 16);
}

void kk__att_scratch_carve(float *base, int64_t Dp, kk__att_scratch *w) {
    const int64_t BQ = KK__ATT_BQ, BK = KK__ATT_BK;
    float *at = base;
#define TAKE(n) (at += round_up(n, 16), at - round_up(n, 16))
    w->qt = TAKE(Dp * BQ);
    w->o = TAKE(BQ * Dp);
    w->o2 = TAKE(BQ * Dp);
    w->carry = TAKE(BQ);
    w->k = TAKE(BK * Dp);
    w->v = TAKE(BK * Dp);
    w->s = TAKE(BK_MAX * BQ);
    w->row = TAKE(Dp);
    w->m = TAKE(BQ);
    w->sum = TAKE(BQ);
    w->alpha = TAKE(BQ);
    w->l = (double *)TAKE(2 * BQ); /* 64-byte aligned, 8-byte elements */
    w->lo = (int64_t *)TAKE(2 * BQ);
    w->hi = (int64_t *)TAKE(2 * BQ);
    w->qp = (uint32_t *)TAKE(Dp / 2 * BQ); /* 32-bit words, as many as floats */
    w->pp = (uint32_t *)TAKE(BK_MAX / 2 * BQ);
#undef TAKE
}

/* n elements from element idx of a q/k/v tensor, as f32. */
static kk_status load_row(const void *base, kk_dtype dt, int64_t idx, int64_t n, float *dst) {
    if (dt == KK_DTYPE_F32) {
        memcpy(dst, (const float *)base + idx, (size_t)n * sizeof(float));
        return KK_OK;
    }
    return kk_convert_host((const char *)base + kk_dtype_bytes(dt, (size_t)idx), dt, dst,
                           KK_DTYPE_F32, (size_t)n);
}

static kk_status store_row(void *base, kk_dtype dt, int64_t idx, int64_t n, const float *src) {
    if (dt == KK_DTYPE_F32) {
        memcpy((float *)base + idx, src, (size_t)n * sizeof(float));
        return KK_OK;
    }
    return kk_convert_host(src, KK_DTYPE_F32, (char *)base + kk_dtype_bytes(dt, (size_t)idx), dt,
                           (size_t)n);
}

/* The query block transposed and scaled: qt[d][r] = q[r][d] * scale log2(e);
 * the padding columns up to ncols are 0. q0: the element index of row 0. */
static kk_status load_q(const kk__att_geom *g, kk__att_scratch *w, int64_t q0, int rows,
                        int ncols) {
    kk_status st = KK_OK;
    for (int r = 0; r < rows && st == KK_OK; r++) {
        st = load_row(g->q, g->dt, q0 + r * g->q_ss, g->D, w->row);
        for (int64_t d = 0; d < g->D; d++) w->qt[d * KK__ATT_BQ + r] = w->row[d] * g->qscale;
    }
    for (int64_t d = 0; d < g->D && rows < ncols; d++)
        memset(w->qt + d * KK__ATT_BQ + rows, 0, (size_t)(ncols - rows) * sizeof(float));
    return st;
}

/* Where the key block of K and V is read from (k0, v0: the element index of
 * its first row): the tensor itself for f32 (V only when D needs no padding)
 * or the call's f32 copies (kv_f32), else a block converted here; *ldk, *ldv:
 * their row strides. */
static kk_status kv_block(const kk__att_geom *g, kk__att_scratch *w, int64_t k0, int64_t v0, int nk,
                          const float **k, int64_t *ldk, const float **v, int64_t *ldv) {
    const int64_t D = g->D, Dp = g->Dp;
    kk_status st = KK_OK;
    const int k_f32 = g->dt == KK_DTYPE_F32 || g->kv_f32;
    *k = k_f32 ? (const float *)g->k + k0 : w->k;
    *ldk = k_f32 ? g->k_ss : D;
    for (int j = 0; j < nk && !k_f32 && st == KK_OK; j++)
        st = load_row(g->k, g->dt, k0 + j * g->k_ss, D, w->k + j * D);
    const int direct = g->kv_f32 || (g->dt == KK_DTYPE_F32 && D == Dp);
    *v = direct ? (const float *)g->v + v0 : w->v;
    *ldv = direct ? g->v_ss : Dp;
    for (int j = 0; j < nk && !direct && st == KK_OK; j++) {
        st = load_row(g->v, g->dt, v0 + j * g->v_ss, D, w->v + j * Dp);
        memset(w->v + j * Dp + D, 0, (size_t)(Dp - D) * sizeof(float));
    }
    return st;
}

/* ---- the bf16 pair path (g->vp): products by vdpbf16ps or on AMX tiles
 * (kern->tile_scores, tile_values), f32 softmax ---- */

/* The query block as pairs along D, unscaled (q is bf16: exact): qp[p][r] =
 * (q[r][2p], q[r][2p + 1]); the padding columns up to ncols are 0. */
static void load_q_pairs(const kk__att_geom *g, kk__att_scratch *w, int64_t q0, int rows,
                         int ncols) {
    const int64_t half = g->D / 2;
    for (int r = 0; r < rows; r++) {
        const uint16_t *row = (const uint16_t *)g->q + q0 + r * g->q_ss;
        for (int64_t p = 0; p < half; p++) memcpy(&w->qp[p * KK__ATT_BQ + r], row + 2 * p, 4);
    }
    for (int64_t p = 0; p < half; p++)
        for (int r = rows; r < ncols; r++) w->qp[p * KK__ATT_BQ + r] = 0;
}

/* s[j][r] = (k_j . q_r) qscale: the keys are read in place as pairs (k_ss
 * even), the products and sums in f32, then scaled into log2 units. */
static void scores_from_pairs(const kk__att_geom *g, kk__att_scratch *w, int64_t kidx, int nk,
                              int ncols) {
    const uint32_t *k = (const uint32_t *)(const void *)((const uint16_t *)g->k + kidx);
    if (g->kern->tile_scores) {
        g->kern->tile_scores(w->s, KK__ATT_BQ, k, g->k_ss / 2, w->qp, KK__ATT_BQ, nk, ncols,
                             (int)(g->D / 2), g->qscale);
        return;
    }
    g->kern->gemm_pairs(w->s, KK__ATT_BQ, k, g->k_ss / 2, 1, w->qp, KK__ATT_BQ, nk, ncols,
                        (int)(g->D / 2), NULL);
    for (int j = 0; j < nk; j++) {
        float *s = w->s + j * KK__ATT_BQ;
        for (int c = 0; c < ncols; c++) s[c] *= g->qscale;
    }
}

/* o = diag(alpha) o + P V with the weights rounded to bf16 pairs of keys (as
 * FlashAttention does on the GPU; l keeps their f32 sum) and V's pairs. On
 * AMX tiles o^T = o^T diag(alpha) + V^T P^T from the same pairs of P (o^T's
 * padding columns, past rows, are computed and never read). */
static void values_from_pairs(const kk__att_geom *g, kk__att_scratch *w, int64_t b, int64_t kvh,
                              int64_t j0, int nk, int rows, int ncols) {
    const uint32_t *vp = g->vp + b * g->vp_bs + kvh * g->vp_hs;
    if (g->kern->tile_values) {
        g->kern->tile_values(w->o, KK__ATT_BQ, vp + j0 / 2, g->vp_ld, w->s, KK__ATT_BQ, w->pp, nk,
                             ncols, (int)g->Dp, w->alpha);
        return;
    }
    const int kp = (nk + 1) / 2;
    for (int p = 0; p < kp; p++) {
        const float *lo = w->s + 2 * p * KK__ATT_BQ, *hi = lo + KK__ATT_BQ;
        uint32_t *out = w->pp + p * KK__ATT_BQ;
        const int second = 2 * p + 1 < nk;
        for (int c = 0; c < ncols; c++)
            out[c] = kk__f32_bf16(lo[c]) | (uint32_t)(second ? kk__f32_bf16(hi[c]) : 0) << 16;
    }
    g->kern->gemm_pairs(w->o, g->Dp, w->pp, 1, KK__ATT_BQ, vp + j0 / 2 * g->Dp, g->Dp, rows,
                        (int)g->Dp, kp, w->alpha);
}

/* -inf for the keys of the block a row may not see (only rows whose range
 * does not cover the whole block). */
static void mask_block(kk__att_scratch *w, int rows, int64_t j0, int nk) {
    for (int r = 0; r < rows; r++) {
        const int64_t lo = w->lo[r] - j0, hi = w->hi[r] - j0; /* block-relative */
        if (lo <= 0 && hi >= nk - 1 && w->hi[r] >= w->lo[r]) continue;
        for (int j = 0; j < nk; j++)
            if (j < lo || j > hi || w->hi[r] < w->lo[r]) w->s[j * KK__ATT_BQ + r] = -INFINITY;
    }
}

/* Zero the weights the Philox mask drops (src/core/philox.h): one call gives
 * the words of four consecutive keys. */
static void apply_dropout(const kk__att_geom *g, kk__att_scratch *w, uint32_t bh, int64_t i0,
                          int rows, int64_t j0, int nk) {
    for (int r = 0; r < rows; r++) {
        const int64_t first = w->lo[r] > j0 ? w->lo[r] : j0;
        const int64_t last = w->hi[r] < j0 + nk - 1 ? w->hi[r] : j0 + nk - 1;
        for (int64_t j = first; j <= last;) {
            const int64_t j4 = j >> 2;
            const kk__philox4 bits =
                kk__dropout_bits(g->seed, g->offset, bh, (uint32_t)(i0 + r), (uint32_t)j4);
            for (; j <= last && (j >> 2) == j4; j++)
                if (bits.v[j & 3] < g->drop_threshold) w->s[(j - j0) * KK__ATT_BQ + r] = 0.0f;
        }
    }
}

/* o2 = carry o2 + o, o = 0: a two-level sum (see KK__ATT_FOLD). carry holds
 * the product of the rescales since the last fold, so both are in the units
 * of the current max. tr: both transposed (AMX tiles). */
static void fold(const kk__att_geom *g, kk__att_scratch *w, int rows, int tr) {
    if (tr) {
        for (int64_t d = 0; d < g->D; d++) {
            float *restrict o2 = w->o2 + d * KK__ATT_BQ;
            float *restrict o = w->o + d * KK__ATT_BQ;
            for (int r = 0; r < rows; r++) {
                o2[r] = o2[r] * w->carry[r] + o[r];
                o[r] = 0.0f;
            }
        }
    } else {
        for (int r = 0; r < rows; r++) {
            float *restrict o2 = w->o2 + r * g->Dp;
            float *restrict o = w->o + r * g->Dp;
            const float c = w->carry[r];
            for (int64_t d = 0; d < g->D; d++) {
                o2[d] = o2[d] * c + o[d];
                o[d] = 0.0f;
            }
        }
    }
    for (int r = 0; r < rows; r++) w->carry[r] = 1.0f;
}

/* o = acc / l (times 1/(1-p) with dropout), lse = ln(sum exp): the row's
 * final values; a row that saw no key gets o = 0 and lse = -inf. o0, lse0:
 * the element indexes of row 0; tr: acc transposed (AMX tiles). */
static kk_status finish_rows(const kk__att_geom *g, kk__att_scratch *w, int64_t o0, int64_t lse0,
                             int rows, int tr) {
    kk_status st = KK_OK;
    for (int r = 0; r < rows && st == KK_OK; r++) {
        float *o = tr ? w->row : w->o2 + r * g->Dp;
        for (int64_t d = 0; d < g->D && tr; d++)
            o[d] = w->o2[d * KK__ATT_BQ + r]; /* o2^T's column */
        double lse = -INFINITY;
        if (w->l[r] > 0.0) {
            const float f = (float)(g->keep_scale / w->l[r]);
            for (int64_t d = 0; d < g->D; d++) o[d] *= f;
            lse = (double)w->m[r] * LN2 + log(w->l[r]);
        } else {
            memset(o, 0, (size_t)g->D * sizeof(float));
        }
        st = store_row(g->o, g->dt, o0 + r * g->o_ss, g->D, o);
        if (g->lse) g->lse[lse0 + r * g->lse_ss] = (float)lse;
    }
    return st;
}

kk_status kk__att_block(const kk__att_geom *g, kk__att_scratch *w, int64_t b, int64_t h,
                        int64_t i0) {
    const int64_t BQ = KK__ATT_BQ, Dp = g->Dp;
    const int rows = (int)(g->Sq - i0 < BQ ? g->Sq - i0 : BQ);
    const int ncols = (int)round_up(rows, KK__ATT_NT);
    const int64_t bh = b * g->Hq + h, kvh = h / (g->Hq / g->Hkv);
    const int64_t k0 = b * g->k_bs + kvh * g->k_hs, v0 = b * g->v_bs + kvh * g->v_hs;
    /* the pair path on AMX tiles: blocks of 64 keys (whole tiles), o and o2
     * transposed, the thread's tiles configured for this item's products */
    const int tiles = g->vp && g->kern->tile_values;
    const int64_t bk = tiles ? KK__ATT_BK_AMX : KK__ATT_BK;

    int64_t jmin = g->Sk, jmax = -1;
    for (int r = 0; r < rows; r++) {
        kk__attention_key_range(g->p, i0 + r, &w->lo[r], &w->hi[r]);
        if (w->hi[r] >= w->lo[r]) {
            jmin = w->lo[r] < jmin ? w->lo[r] : jmin;
            jmax = w->hi[r] > jmax ? w->hi[r] : jmax;
        }
    }
    for (int c = 0; c < ncols; c++) {
        w->m[c] = -INFINITY;
        w->l[c] = 0.0;
    }
    const int64_t acc = tiles ? Dp * BQ : rows * Dp; /* o^T: every column */
    memset(w->o, 0, (size_t)acc * sizeof(float));
    memset(w->o2, 0, (size_t)acc * sizeof(float));
    for (int r = 0; r < rows; r++) w->carry[r] = 1.0f;
    int since_fold = 0;
    const int64_t q0 = b * g->q_bs + h * g->q_hs + i0 * g->q_ss;
    kk_status st = KK_OK;
    if (g->vp)
        load_q_pairs(g, w, q0, rows, ncols);
    else
        st = load_q(g, w, q0, rows, ncols);

    /* the pair path reads V's pairs from an even key: the key before jmin is
     * masked like any other a row may not see */
    if (g->vp) jmin &= ~(int64_t)1;
    if (tiles) g->kern->tiles(1);
    for (int64_t j0 = jmin; j0 <= jmax && st == KK_OK; j0 += bk) {
        const int nk = (int)(jmax + 1 - j0 < bk ? jmax + 1 - j0 : bk);
        int any = 0; /* a key block that no row sees is skipped whole */
        for (int r = 0; r < rows; r++)
            any |= w->hi[r] >= w->lo[r] && w->lo[r] < j0 + nk && w->hi[r] >= j0;
        if (!any) continue;
        const float *k = NULL, *v = NULL;
        int64_t ldk = 0, ldv = 0;
        if (g->vp) {
            scores_from_pairs(g, w, k0 + j0 * g->k_ss, nk, ncols);
        } else {
            st = kv_block(g, w, k0 + j0 * g->k_ss, v0 + j0 * g->v_ss, nk, &k, &ldk, &v, &ldv);
            /* s[j][r] = k_j . q_r (scaled) */
            g->kern->gemm(w->s, BQ, k, ldk, 1, w->qt, BQ, nk, ncols, (int)g->D, NULL);
        }
        mask_block(w, rows, j0, nk);
        g->kern->softmax(w->s, BQ, nk, ncols, w->m, w->sum, w->alpha);
        for (int r = 0; r < rows; r++) {
            w->l[r] = w->l[r] * w->alpha[r] + w->sum[r];
            w->carry[r] *= w->alpha[r];
        }
        if (g->dropout) apply_dropout(g, w, (uint32_t)bh, i0, rows, j0, nk);
        /* o[r] = alpha_r o[r] + sum_j s[j][r] v_j */
        if (g->vp)
            values_from_pairs(g, w, b, kvh, j0, nk, rows, ncols);
        else
            g->kern->gemm(w->o, Dp, w->s, 1, BQ, v, ldv, rows, (int)Dp, nk, w->alpha);
        if (++since_fold == KK__ATT_FOLD) {
            fold(g, w, rows, tiles);
            since_fold = 0;
        }
    }
    if (tiles) g->kern->tiles(0);
    fold(g, w, rows, tiles);
    return st == KK_OK ? finish_rows(g, w, b * g->o_bs + h * g->o_hs + i0 * g->o_ss,
                                     b * g->lse_bs + h * g->lse_hs + i0 * g->lse_ss, rows, tiles)
                       : st;
}

/* The CPU backend's attention backward (the registry's attention_backward
 * slot): per kv group (b, kvh), one OpenMP item, so the GQA sums of dk and dv
 * stay in the thread's own f32 accumulators and need no atomics. Per query head
 * of the group, blocks of KEYS keys are walked against every query row that
 * sees them: P = exp(scale q.k - lse) is recomputed from the forward's lse,
 * dP = dO.v times the forward's Philox mask (core/philox.h, the same function
 * and coordinates as attention_cpu.c), dS = P (dP - D_i) with D_i = dO_i . o_i,
 * then dV += P f dO, dQ += dS k, dK += dS q; the scale is applied once at the
 * end. f32 arithmetic, D_i in f64; the key blocks compiled per instruction-set
 * level (cpu_isa.h). Memory: O(threads x (Sq + Sk) x D) floats.
 * docs/kernels/attention.md, "Backward". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/philox.h"
#include "core/threads.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "opdef/attention_backward.h"

#define KEYS 64

/* n elements of a tensor of dtype dt from element `at` into f (f32). */
static void load(const void *src, kk_dtype dt, int64_t at, float *f, int64_t n) {
    for (int64_t x = 0; x < n; x += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, x);
        kk__row_load(src, dt, at + x, f + x, m);
    }
}

/* n elements of f times s into a tensor of dtype dt from element `at`. */
static void put(void *dst, kk_dtype dt, int64_t at, float *f, float s, int64_t n) {
    for (int64_t x = 0; x < n; x++) f[x] *= s;
    for (int64_t x = 0; x < n; x += KK__ROW_CHUNK)
        kk__row_put(dst, dt, at + x, f + x, kk__row_chunk(n, x), 0);
}

typedef struct scratch {
    float *k, *dk, *dv; /* [Sk, D] */
    float *kt, *vt;     /* [D, Sk]: K and V transposed */
    float *q, *dO, *dq; /* [Sq, D] */
    float *lse, *di;    /* [Sq] */
} scratch;

/* Keys [j0, j1) (at most KEYS) of query head bh against every row of the
 * head that sees them; compiled per instruction-set level (cpu_isa.h). The
 * scores and dP of a row are computed for the whole block from the transposed
 * K and V (kt, vt [D, Sk]), vectorized over the keys, so no dot product ends
 * in a horizontal sum; the updates of dV, dK, dQ run over D. */
KK__ISA_INLINE void block(const kk_op_params *p, const scratch *w, int64_t bh, int64_t j0,
                          int64_t j1) {
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const float scale =
        (float)(p->f[KK__ATB_SCALE] > 0.0 ? p->f[KK__ATB_SCALE] : 1.0 / sqrt((double)D));
    const double drop = p->f[KK__ATB_DROPOUT];
    const uint32_t threshold = drop > 0.0 ? kk__dropout_threshold(drop) : 0;
    const float keep_scale = (float)(1.0 / (1.0 - drop));
    const uint64_t seed = (uint64_t)p->i[KK__ATB_SEED], offset = (uint64_t)p->i[KK__ATB_OFFSET];
    const int n = (int)(j1 - j0);
    float qk[KEYS], dp[KEYS], pf[KEYS], ds[KEYS];
    for (int64_t i = 0; i < Sq; i++) {
        int64_t lo, hi;
        kk__attention_key_range(p, i, &lo, &hi);
        if (lo < j0) lo = j0;
        if (hi > j1 - 1) hi = j1 - 1;
        if (hi < lo) continue;
        const float *q = w->q + i * D, *dO = w->dO + i * D;
        float *dq = w->dq + i * D;
        const float lse = w->lse[i], di = w->di[i];
        for (int c = 0; c < n; c++) qk[c] = dp[c] = 0.0f;
        for (int64_t d = 0; d < D; d++) {
            const float *kt = w->kt + d * Sk + j0, *vt = w->vt + d * Sk + j0;
            const float qd = q[d], od = dO[d];
#pragma omp simd
            for (int c = 0; c < n; c++) {
                qk[c] += qd * kt[c];
                dp[c] += od * vt[c];
            }
        }
        for (int64_t j = lo; j <= hi; j++) {
            const int c = (int)(j - j0);
            const float P = expf(scale * qk[c] - lse);
            float f = 1.0f;
            if (drop > 0.0)
                f = kk__dropout_keep(seed, offset, (uint32_t)bh, (uint32_t)i, (uint32_t)j,
                                     threshold)
                        ? keep_scale
                        : 0.0f;
            pf[c] = P * f;
            ds[c] = P * (dp[c] * f - di);
        }
        for (int64_t j = lo; j <= hi; j++) {
            const int c = (int)(j - j0);
            const float *k = w->k + j * D;
            float *dk = w->dk + j * D, *dv = w->dv + j * D;
            const float pc = pf[c], sc = ds[c];
#pragma omp simd
            for (int64_t d = 0; d < D; d++) {
                dv[d] += pc * dO[d];
                dq[d] += sc * k[d];
                dk[d] += sc * q[d];
            }
        }
    }
}
KK__ISA_CLONES(block, (const kk_op_params *p, const scratch *w, int64_t bh, int64_t j0, int64_t j1),
               (p, w, bh, j0, j1))

static void group(const kk_op_params *p, kk_tensor *const *t, int64_t b, int64_t kvh,
                  const scratch *w) {
    const int64_t Hq = p->i[KK__ATB_HQ], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const int64_t G = Hq / Hkv;
    const kk_dtype dt = (kk_dtype)p->i[KK__ATB_DTYPE];
    const float scale =
        (float)(p->f[KK__ATB_SCALE] > 0.0 ? p->f[KK__ATB_SCALE] : 1.0 / sqrt((double)D));
    void (*const keys)(const kk_op_params *, const scratch *, int64_t, int64_t, int64_t) =
        KK__ISA_PICK(block);
    const int64_t kvoff = (b * Hkv + kvh) * Sk * D;
    load(t[KK__ATB_T_K]->data, dt, kvoff, w->k, Sk * D);
    load(t[KK__ATB_T_V]->data, dt, kvoff, w->dv, Sk * D); /* v, then dv's zeros */
    for (int64_t j = 0; j < Sk; j++)
        for (int64_t d = 0; d < D; d++) {
            w->kt[d * Sk + j] = w->k[j * D + d];
            w->vt[d * Sk + j] = w->dv[j * D + d];
        }
    memset(w->dk, 0, (size_t)(Sk * D) * sizeof(float));
    memset(w->dv, 0, (size_t)(Sk * D) * sizeof(float));
    const float *lse_all = t[KK__ATB_T_LSE]->data;
    for (int64_t h = kvh * G; h < (kvh + 1) * G; h++) {
        const int64_t bh = b * Hq + h, qoff = bh * Sq * D;
        load(t[KK__ATB_T_Q]->data, dt, qoff, w->q, Sq * D);
        load(t[KK__ATB_T_DO]->data, dt, qoff, w->dO, Sq * D);
        memset(w->dq, 0, (size_t)(Sq * D) * sizeof(float));
        for (int64_t i = 0; i < Sq; i++) { /* D_i = dO_i . o_i, o read into dq's row */
            float *o = w->dq + i * D;
            load(t[KK__ATB_T_O]->data, dt, qoff + i * D, o, D);
            double acc = 0.0;
            for (int64_t d = 0; d < D; d++) acc += (double)w->dO[i * D + d] * o[d];
            w->di[i] = (float)acc;
            memset(o, 0, (size_t)D * sizeof(float));
            w->lse[i] = lse_all[bh * Sq + i];
        }
        for (int64_t j0 = 0; j0 < Sk; j0 += KEYS)
            keys(p, w, bh, j0, j0 + KEYS < Sk ? j0 + KEYS : Sk);
        put(t[KK__ATB_T_DQ]->data, dt, qoff, w->dq, scale, Sq * D);
    }
    put(t[KK__ATB_T_DK]->data, dt, kvoff, w->dk, scale, Sk * D);
    put(t[KK__ATB_T_DV]->data, dt, kvoff, w->dv, 1.0f, Sk * D);
}

kk_status kk__attention_backward_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t B = p->i[KK__ATB_B], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const size_t per = (size_t)(5 * Sk * D + 3 * Sq * D + 2 * Sq);
    int failed = 0;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        float *m = malloc(per * sizeof *m);
        scratch w = {0};
        if (m) {
            w.k = m, w.kt = w.k + Sk * D, w.vt = w.kt + Sk * D, w.dk = w.vt + Sk * D;
            w.dv = w.dk + Sk * D;
            w.q = w.dv + Sk * D, w.dO = w.q + Sq * D, w.dq = w.dO + Sq * D;
            w.lse = w.dq + Sq * D, w.di = w.lse + Sq;
        } else {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t g = 0; g < B * Hkv; g++)
            if (m) group(p, t, g / Hkv, g % Hkv, &w);
        free(m);
    }
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_backward",
                         "no memory for the %zu-float scratch of a thread", per);
    return KK_OK;
}

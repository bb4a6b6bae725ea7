/* The CPU backend's attention backward (the registry's attention_backward
 * slot): per kv group (b, kvh), one OpenMP item, so the GQA sums of dk and dv
 * stay in the thread's own f32 accumulators and need no atomics. Per query head
 * of the group, blocks of KEYS keys are walked against every query row that
 * sees them: P = exp(scale q.k - lse) is recomputed from the forward's lse,
 * dP = dO.v times the forward's Philox mask (core/philox.h, the same function
 * and coordinates as attention_cpu.c), dS = P (dP - D_i) with D_i = dO_i . o_i,
 * then dV += P f dO, dQ += dS k, dK += dS q; the scale is applied once at the
 * end. f32 arithmetic, D_i in f64; the key blocks compiled per instruction-set
 * level (cpu_isa.h). Memory: O(threads x (Sq + Sk) x D) floats. The group
 * reads and writes rows through base offsets and strides
 * (kk__attention_backward_cpu_group, attention_backward_cpu.h), so the varlen
 * backward runs the same code per sequence. docs/kernels/attention.md,
 * "Backward". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/philox.h"
#include "core/threads.h"
#include "cpu/attention_backward_cpu.h"
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

size_t kk__atb_scratch_floats(int64_t Sq, int64_t Sk, int64_t D) {
    return (size_t)(5 * Sk * D + 3 * Sq * D + 2 * Sq);
}

void kk__atb_scratch_carve(float *m, int64_t Sq, int64_t Sk, int64_t D, kk__atb_scratch *w) {
    w->k = m, w->kt = w->k + Sk * D, w->vt = w->kt + Sk * D, w->dk = w->vt + Sk * D;
    w->dv = w->dk + Sk * D;
    w->q = w->dv + Sk * D, w->dO = w->q + Sq * D, w->dq = w->dO + Sq * D;
    w->lse = w->dq + Sq * D, w->di = w->lse + Sq;
}

/* Keys [j0, j1) (at most KEYS) of query head bh against every row of the
 * head that sees them; compiled per instruction-set level (cpu_isa.h). The
 * scores and dP of a row are computed for the whole block from the transposed
 * K and V (kt, vt [D, Sk]), vectorized over the keys, so no dot product ends
 * in a horizontal sum; the updates of dV, dK, dQ run over D. */
KK__ISA_INLINE void block(const kk_op_params *p, const kk__atb_scratch *w, int64_t bh, int64_t j0,
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
KK__ISA_CLONES(block,
               (const kk_op_params *p, const kk__atb_scratch *w, int64_t bh, int64_t j0,
                int64_t j1),
               (p, w, bh, j0, j1))

/* Row i of head h of view v (element offset). */
static int64_t row_at(const kk__atb_view *v, int64_t h, int64_t i) {
    return v->at + h * v->hs + i * v->ss;
}

void kk__attention_backward_cpu_group(const kk_op_params *p, const kk__atb_views *x, int64_t b,
                                      int64_t kvh, const kk__atb_scratch *w) {
    const int64_t Hq = p->i[KK__ATB_HQ], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const int64_t G = Hq / Hkv;
    const kk_dtype dt = x->dt;
    const float scale =
        (float)(p->f[KK__ATB_SCALE] > 0.0 ? p->f[KK__ATB_SCALE] : 1.0 / sqrt((double)D));
    void (*const keys)(const kk_op_params *, const kk__atb_scratch *, int64_t, int64_t, int64_t) =
        KK__ISA_PICK(block);
    for (int64_t j = 0; j < Sk; j++) {
        load(x->k.data, dt, row_at(&x->k, kvh, j), w->k + j * D, D);
        load(x->v.data, dt, row_at(&x->v, kvh, j), w->dv + j * D, D); /* v, then dv's zeros */
    }
    for (int64_t j = 0; j < Sk; j++)
        for (int64_t d = 0; d < D; d++) {
            w->kt[d * Sk + j] = w->k[j * D + d];
            w->vt[d * Sk + j] = w->dv[j * D + d];
        }
    memset(w->dk, 0, (size_t)(Sk * D) * sizeof(float));
    memset(w->dv, 0, (size_t)(Sk * D) * sizeof(float));
    const float *lse_all = x->lse.data;
    for (int64_t h = kvh * G; h < (kvh + 1) * G; h++) {
        const int64_t bh = b * Hq + h;
        for (int64_t i = 0; i < Sq; i++) {
            load(x->q.data, dt, row_at(&x->q, h, i), w->q + i * D, D);
            load(x->dO.data, dt, row_at(&x->dO, h, i), w->dO + i * D, D);
        }
        memset(w->dq, 0, (size_t)(Sq * D) * sizeof(float));
        for (int64_t i = 0; i < Sq; i++) { /* D_i = dO_i . o_i, o read into dq's row */
            float *o = w->dq + i * D;
            load(x->o.data, dt, row_at(&x->o, h, i), o, D);
            double acc = 0.0;
            for (int64_t d = 0; d < D; d++) acc += (double)w->dO[i * D + d] * o[d];
            w->di[i] = (float)acc;
            memset(o, 0, (size_t)D * sizeof(float));
            w->lse[i] = lse_all[row_at(&x->lse, h, i)];
        }
        for (int64_t j0 = 0; j0 < Sk; j0 += KEYS)
            keys(p, w, bh, j0, j0 + KEYS < Sk ? j0 + KEYS : Sk);
        for (int64_t i = 0; i < Sq; i++)
            put(x->dq.data, dt, row_at(&x->dq, h, i), w->dq + i * D, scale, D);
    }
    for (int64_t j = 0; j < Sk; j++) {
        put(x->dk.data, dt, row_at(&x->dk, kvh, j), w->dk + j * D, scale, D);
        put(x->dv.data, dt, row_at(&x->dv, kvh, j), w->dv + j * D, 1.0f, D);
    }
}

/* Tensor t of a [B,H,S,D] (lse [B,H,S]) batch b as rows. */
static kk__atb_view batch_view(const kk_tensor *t, int64_t b) {
    return (kk__atb_view){t->data, b * t->strides[0], t->strides[1], t->strides[2]};
}

kk_status kk__attention_backward_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t B = p->i[KK__ATB_B], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const size_t per = kk__atb_scratch_floats(Sq, Sk, D);
    int failed = 0;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        float *m = malloc(per * sizeof *m);
        kk__atb_scratch w = {0};
        if (m) {
            kk__atb_scratch_carve(m, Sq, Sk, D, &w);
        } else {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t g = 0; g < B * Hkv; g++) {
            if (!m) continue;
            const int64_t b = g / Hkv;
            const kk__atb_views x = {.q = batch_view(t[KK__ATB_T_Q], b),
                                     .k = batch_view(t[KK__ATB_T_K], b),
                                     .v = batch_view(t[KK__ATB_T_V], b),
                                     .o = batch_view(t[KK__ATB_T_O], b),
                                     .dO = batch_view(t[KK__ATB_T_DO], b),
                                     .lse = batch_view(t[KK__ATB_T_LSE], b),
                                     .dq = batch_view(t[KK__ATB_T_DQ], b),
                                     .dk = batch_view(t[KK__ATB_T_DK], b),
                                     .dv = batch_view(t[KK__ATB_T_DV], b),
                                     .dt = (kk_dtype)p->i[KK__ATB_DTYPE]};
            kk__attention_backward_cpu_group(p, &x, b, g % Hkv, &w);
        }
        free(m);
    }
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_backward",
                         "no memory for the %zu-float scratch of a thread", per);
    return KK_OK;
}

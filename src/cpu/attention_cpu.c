/* The CPU backend's attention forward (the registry's attention slot).
 *
 * Work is split into items (batch, query head, block of KK__ATT_BQ query
 * rows), spread over kk__cpu_threads() OpenMP threads. Each thread owns one
 * scratch area, allocated once per call: memory is O(threads x block x D),
 * never O(Sq x Sk). The online softmax of a block is attention_cpu_block.c. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/philox.h"
#include "cpu/attention_cpu.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_isa.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/attention.h"

/* tests: the amx kernels on emulated tiles (kk__att_amx_test) */
static _Atomic(const kk__att_kernels *) amx_test;

void kk__att_amx_test(const kk__att_kernels *kernels) { atomic_store(&amx_test, kernels); }

const kk__att_kernels *kk__att_kernels_for(kk__isa isa) {
    const kk__att_kernels *test = atomic_load(&amx_test), *k = NULL;
    if (test && isa >= KK__ISA_AVX512_BF16) return test;
    if (isa >= KK__ISA_AMX) k = kk__att_kernels_amx();
    if (!k && isa >= KK__ISA_AVX512_BF16) k = kk__att_kernels_avx512_bf16();
    if (!k && isa >= KK__ISA_AVX512) k = kk__att_kernels_avx512();
    if (!k && isa >= KK__ISA_AVX2) k = kk__att_kernels_avx2_fma();
    return k ? k : kk__att_kernels_generic();
}

const kk__att_kernels *kk__att_kernels_best(void) { return kk__att_kernels_for(kk__cpu_isa()); }

/* q, k, v and o may be strided views (the row's `strided`: a [B,S,H,D] buffer
 * seen as [B,H,S,D]) with the head dim contiguous: the blocks read rows
 * through the strides; lse is written contiguously. */
#define ATT_STRIDED 0xFu

static kk__att_geom geometry(const kk_op_params *p, kk_tensor *const *t) {
    kk__att_geom g = {.p = p,
                      .B = p->i[KK__ATT_B],
                      .Hq = p->i[KK__ATT_HQ],
                      .Hkv = p->i[KK__ATT_HKV],
                      .Sq = p->i[KK__ATT_SQ],
                      .Sk = p->i[KK__ATT_SK],
                      .D = p->i[KK__ATT_D],
                      .dt = (kk_dtype)p->i[KK__ATT_DTYPE],
                      .q = t[0]->data,
                      .k = t[1]->data,
                      .v = t[2]->data,
                      .o = t[3]->data,
                      .lse = p->i[KK__ATT_LSE] ? (float *)t[4]->data : NULL,
                      .kern = kk__att_kernels_best()};
    const kk_tensor *q = t[0], *k = t[1], *v = t[2], *o = t[3];
    g.q_bs = q->strides[0], g.q_hs = q->strides[1], g.q_ss = q->strides[2];
    g.k_bs = k->strides[0], g.k_hs = k->strides[1], g.k_ss = k->strides[2];
    g.v_bs = v->strides[0], g.v_hs = v->strides[1], g.v_ss = v->strides[2];
    g.o_bs = o->strides[0], g.o_hs = o->strides[1], g.o_ss = o->strides[2];
    g.lse_bs = g.Hq * g.Sq, g.lse_hs = g.Sq, g.lse_ss = 1;
    g.Dp = (g.D + KK__ATT_NT - 1) / KK__ATT_NT * KK__ATT_NT;
    const double scale = p->f[KK__ATT_SCALE] > 0.0 ? p->f[KK__ATT_SCALE] : 1.0 / sqrt((double)g.D);
    g.qscale = (float)(scale * 1.4426950408889634); /* log2(e): scores in log2 units */
    const double drop = p->f[KK__ATT_DROPOUT];
    g.dropout = drop > 0.0;
    g.drop_threshold = g.dropout ? kk__dropout_threshold(drop) : 0;
    g.keep_scale = g.dropout ? 1.0 / (1.0 - drop) : 1.0;
    g.seed = (uint64_t)p->i[KK__ATT_SEED];
    g.offset = (uint64_t)p->i[KK__ATT_OFFSET];
    return g;
}

/* f16/bf16 K and V converted to f32 once per call, not once per query block
 * that reads them (Sq / 48 times): [B][Hkv][Sk][Dp] each, V's padding zero.
 * Not done past KK__ATT_COPY_MAX_BYTES; the blocks then convert what they read. */
static void convert_rows(const void *src, kk_dtype dt, int64_t bs, int64_t hs, int64_t ss,
                         const kk__att_geom *g, float *dst) {
    const int64_t rows = g->B * g->Hkv * g->Sk;
#pragma omp parallel for num_threads(kk__cpu_threads()) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / (g->Hkv * g->Sk), h = r / g->Sk % g->Hkv, j = r % g->Sk;
        float *out = dst + r * g->Dp;
        kk__row_load(src, dt, b * bs + h * hs + j * ss, out, (int)g->D);
        for (int64_t d = g->D; d < g->Dp; d++) out[d] = 0.0f;
    }
}

/* Point g's k and v at f32 copies when that pays and fits; returns the
 * buffer to free (NULL: none made). */
static float *kv_to_f32(kk__att_geom *g) {
    const int64_t nq_blocks = (g->Sq + KK__ATT_BQ - 1) / KK__ATT_BQ;
    const int64_t floats = g->B * g->Hkv * g->Sk * g->Dp;
    if (g->dt == KK_DTYPE_F32 || nq_blocks * g->Hq / g->Hkv < 2 ||
        2 * floats * (int64_t)sizeof(float) > KK__ATT_COPY_MAX_BYTES)
        return NULL;
    float *buf = aligned_alloc(64, (size_t)(2 * floats) * sizeof(float));
    if (!buf) return NULL; /* the blocks convert instead */
    convert_rows(g->k, g->dt, g->k_bs, g->k_hs, g->k_ss, g, buf);
    convert_rows(g->v, g->dt, g->v_bs, g->v_hs, g->v_ss, g, buf + floats);
    g->k = buf;
    g->v = buf + floats;
    g->k_ss = g->v_ss = g->Dp;
    g->k_hs = g->v_hs = g->Sk * g->Dp;
    g->k_bs = g->v_bs = g->Hkv * g->Sk * g->Dp;
    g->kv_f32 = 1;
    return buf;
}

/* The bf16 pair path: where the kernels have gemm_pairs (or tile_values) and
 * q and k can be read as 32-bit pairs along D in place, V is repacked once
 * per call as pairs of rows (g->vp), or for AMX tiles as V^T's rows of pairs
 * of keys, 16 pairs (64 bytes) at a time. */
int kk__att_pairs_ok(const kk__att_geom *g) {
    const int tiles = g->kern->tile_values != NULL;
    const int even = g->D % 2 == 0 && g->q_ss % 2 == 0 && g->q_hs % 2 == 0 && g->q_bs % 2 == 0 &&
                     g->k_ss % 2 == 0 && g->k_hs % 2 == 0 && g->k_bs % 2 == 0 &&
                     (uintptr_t)g->q % 4 == 0 && (uintptr_t)g->k % 4 == 0;
    return g->dt == KK_DTYPE_BF16 && (g->kern->gemm_pairs || tiles) && even && g->Dp <= 256;
}

int64_t kk__att_pairs_layout(kk__att_geom *g) {
    const int tiles = g->kern->tile_values != NULL;
    const int64_t half_sk = (g->Sk + 1) / 2, ld = (half_sk + 15) / 16 * 16;
    g->vp_ld = tiles ? ld : 0;
    g->vp_hs = (tiles ? ld : half_sk) * g->Dp;
    g->vp_bs = g->Hkv * g->vp_hs;
    return g->B * g->vp_bs;
}

int64_t kk__att_pairs_items(const kk__att_geom *g) {
    return g->B * g->Hkv * (((g->Sk + 1) / 2 + 15) / 16);
}

void kk__att_pairs_pack(const kk__att_geom *g, uint32_t *vp, int64_t i) {
    const int64_t chunks = ((g->Sk + 1) / 2 + 15) / 16, bh = i / chunks, j0 = i % chunks * 32;
    const int64_t b = bh / g->Hkv, h = bh % g->Hkv, Dp = g->Dp;
    const uint16_t *head = (const uint16_t *)g->v + b * g->v_bs + h * g->v_hs;
    uint32_t *out = vp + b * g->vp_bs + h * g->vp_hs;
    /* the item's 32 rows of V (zero past Sk and D), then its pairs */
    uint16_t rows[32][256]; /* Dp <= 256 */
    for (int64_t r = 0; r < 32; r++) {
        const int64_t n = j0 + r < g->Sk ? g->D : 0;
        if (n) memcpy(rows[r], head + (j0 + r) * g->v_ss, (size_t)n * sizeof(uint16_t));
        memset(rows[r] + n, 0, (size_t)(Dp - n) * sizeof(uint16_t));
    }
    const int64_t half_sk = (g->Sk + 1) / 2, np = half_sk - j0 / 2 < 16 ? half_sk - j0 / 2 : 16;
    if (g->kern->tile_values) { /* 16 words of each row d of V^T (ld: whole chunks) */
        for (int64_t d = 0; d < Dp; d++) {
            uint32_t *vt = out + d * g->vp_ld + j0 / 2;
            for (int p = 0; p < 16; p++)
                vt[p] = rows[2 * p][d] | (uint32_t)rows[2 * p + 1][d] << 16;
        }
    } else { /* pairs of rows, those that exist */
        for (int64_t p = 0; p < np; p++) {
            uint32_t *pair = out + (j0 / 2 + p) * Dp;
            for (int64_t d = 0; d < Dp; d++)
                pair[d] = rows[2 * p][d] | (uint32_t)rows[2 * p + 1][d] << 16;
        }
    }
}

/* V's pairs for the call (g->vp); returns the buffer to free (NULL: not
 * this path). */
static uint32_t *v_to_pairs(kk__att_geom *g) {
    if (!kk__att_pairs_ok(g)) return NULL;
    const int64_t words = kk__att_pairs_layout(g), items = kk__att_pairs_items(g);
    if (words * (int64_t)sizeof(uint32_t) > KK__ATT_COPY_MAX_BYTES) return NULL;
    uint32_t *vp = aligned_alloc(64, (size_t)words * sizeof(uint32_t));
    if (!vp) return NULL; /* the f32 path instead */
#pragma omp parallel for num_threads(kk__cpu_threads()) schedule(static)
    for (int64_t i = 0; i < items; i++) kk__att_pairs_pack(g, vp, i);
    g->vp = vp;
    return vp;
}

kk_status kk__attention_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = kk__cpu_check_tensors_strided(p, t, ATT_STRIDED);
    if (st != KK_OK) return st;
    kk__att_geom g = geometry(p, t);
    void *kv_copy = v_to_pairs(&g);
    if (!kv_copy) kv_copy = kv_to_f32(&g);
    const int64_t nqb = (g.Sq + KK__ATT_BQ - 1) / KK__ATT_BQ, items = g.B * g.Hq * nqb;
    const int threads = (int)(kk__cpu_threads() < items ? kk__cpu_threads() : items);
    const int64_t per_thread = kk__att_scratch_floats(g.Dp);
    float *pool = aligned_alloc(64, (size_t)(threads * per_thread) * sizeof(float));
    if (!pool) {
        free(kv_copy);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention", "no host memory for %d x %lld floats",
                         threads, (long long)per_thread);
    }
    /* Causal rows further down see more keys: start with the heaviest blocks. */
    const int reverse = p->i[KK__ATT_CAUSAL] != 0;
    atomic_int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        kk__att_scratch w;
#ifdef _OPENMP
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        kk__att_scratch_carve(pool + tid * per_thread, g.Dp, &w);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            if (atomic_load(&failed)) continue;
            const int64_t qb = reverse ? nqb - 1 - it % nqb : it % nqb;
            const kk_status s =
                kk__att_block(&g, &w, it / (g.Hq * nqb), it / nqb % g.Hq, qb * KK__ATT_BQ);
            if (s != KK_OK) atomic_store(&failed, (int)s);
        }
    }
    free(pool);
    free(kv_copy);
    st = (kk_status)atomic_load(&failed);
    /* The worker's last error is its own thread's: name the failure here. */
    return st == KK_OK ? KK_OK
                       : kk__error(st, "attention", "converting a block of q, k or v failed");
}

/* The CPU backend's attention_varlen: the attention kernel's blocks
 * (kk__att_block) run per sequence, with the base pointers moved to the
 * sequence's first row and the sequence's own Sq, Sk and batch index. The
 * offsets are read and checked first: cu_seqlens are data, and a bad one must
 * not become a wild read. bf16 with even D takes attention's pair path, V's
 * pairs repacked per sequence. docs/kernels/attention.md, "Variable-length
 * batches"; docs/backends/cpu.md, "Attention". */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/philox.h"
#include "cpu/attention_cpu.h"
#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/attention_varlen.h"

/* The geometry every sequence shares: the packed tensors' head and sequence
 * strides; the batch strides are 0, as the sequence moves the base pointers. */
static kk__att_geom base_geometry(const kk_op_params *p, kk_tensor *const *t) {
    const kk_tensor *q = t[KK__AVL_T_Q], *k = t[KK__AVL_T_K], *v = t[KK__AVL_T_V],
                    *o = t[KK__AVL_T_O];
    const kk_tensor *lse = p->i[KK__AVL_LSE] ? t[KK__AVL_T_LSE] : NULL;
    kk__att_geom g = {.B = 1,
                      .Hq = p->i[KK__AVL_HQ],
                      .Hkv = p->i[KK__AVL_HKV],
                      .D = p->i[KK__AVL_D],
                      .dt = (kk_dtype)p->i[KK__AVL_DTYPE],
                      .q = q->data,
                      .k = k->data,
                      .v = v->data,
                      .o = o->data,
                      .lse = lse ? (float *)lse->data : NULL,
                      .kern = kk__att_kernels_best()};
    g.Dp = (g.D + KK__ATT_NT - 1) / KK__ATT_NT * KK__ATT_NT;
    g.q_hs = q->strides[1], g.q_ss = q->strides[2];
    g.k_hs = k->strides[1], g.k_ss = k->strides[2];
    g.v_hs = v->strides[1], g.v_ss = v->strides[2];
    g.o_hs = o->strides[1], g.o_ss = o->strides[2];
    g.lse_hs = lse ? lse->strides[1] : 0, g.lse_ss = lse ? lse->strides[2] : 0;
    const double scale = p->f[KK__AVL_SCALE] > 0.0 ? p->f[KK__AVL_SCALE] : 1.0 / sqrt((double)g.D);
    g.qscale = (float)(scale * 1.4426950408889634); /* log2(e): scores in log2 units */
    const double drop = p->f[KK__AVL_DROPOUT];
    g.dropout = drop > 0.0;
    g.drop_threshold = g.dropout ? kk__dropout_threshold(drop) : 0;
    g.keep_scale = g.dropout ? 1.0 / (1.0 - drop) : 1.0;
    g.seed = (uint64_t)p->i[KK__AVL_SEED];
    g.offset = (uint64_t)p->i[KK__AVL_OFFSET];
    return g;
}

/* The sequence whose items include item `it`: first[s] <= it < first[s + 1]. */
static int64_t find_seq(const int64_t *first, int64_t nseq, int64_t it) {
    int64_t lo = 0, hi = nseq - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (first[mid] <= it)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static const void *advance(const void *base, kk_dtype dt, int64_t elements) {
    return (const char *)base + kk_dtype_bytes(dt, (size_t)elements);
}

/* Sequence s as an `attention` of B = 1 (g->p is the caller's); on the pair
 * path its V's pairs at vp + voff[s], batch stride 0 like the others, as the
 * blocks get b = s. */
static void seq_geometry(const kk__att_geom *g0, const int64_t *cq, const int64_t *ck,
                         const uint32_t *vp, const int64_t *voff, int64_t s, kk__att_geom *g) {
    *g = *g0;
    g->Sq = cq[s + 1] - cq[s];
    g->Sk = ck[s + 1] - ck[s];
    g->q = advance(g0->q, g0->dt, cq[s] * g0->q_ss);
    g->k = advance(g0->k, g0->dt, ck[s] * g0->k_ss);
    g->v = advance(g0->v, g0->dt, ck[s] * g0->v_ss);
    g->o = (char *)g0->o + kk_dtype_bytes(g0->dt, (size_t)(cq[s] * g0->o_ss));
    g->lse = g0->lse ? g0->lse + cq[s] * g0->lse_ss : NULL;
    if (vp) {
        kk__att_pairs_layout(g);
        g->vp = vp + voff[s];
        g->vp_bs = 0;
    }
}

/* The bf16 pair path (kk__att_pairs_ok): each sequence's V repacked on its
 * own (its pairs of keys start at its first key, whatever the parity of its
 * offset, so its blocks are a B = 1 attention's), at voff[s] of one buffer;
 * sequences without queries or keys take none. vfirst: the first repack item
 * of each sequence. Returns the buffer (NULL: the f32 products). */
static uint32_t *v_to_pairs(const kk__att_geom *g0, const int64_t *cq, const int64_t *ck,
                            int64_t nseq, int64_t *voff, int64_t *vfirst) {
    if (!kk__att_pairs_ok(g0)) return NULL;
    voff[0] = vfirst[0] = 0;
    for (int64_t s = 0; s < nseq; s++) {
        kk__att_geom g;
        seq_geometry(g0, cq, ck, NULL, NULL, s, &g);
        const int used = g.Sq > 0 && g.Sk > 0;
        voff[s + 1] = voff[s] + (used ? kk__att_pairs_layout(&g) : 0);
        vfirst[s + 1] = vfirst[s] + (used ? kk__att_pairs_items(&g) : 0);
    }
    const int64_t words = voff[nseq];
    if (!words || words * (int64_t)sizeof(uint32_t) > KK__ATT_COPY_MAX_BYTES) return NULL;
    uint32_t *vp = aligned_alloc(64, (size_t)words * sizeof(uint32_t));
    if (!vp) return NULL; /* the f32 products instead */
#pragma omp parallel for num_threads(kk__cpu_threads()) schedule(static)
    for (int64_t it = 0; it < vfirst[nseq]; it++) {
        const int64_t s = find_seq(vfirst, nseq, it);
        kk__att_geom g;
        seq_geometry(g0, cq, ck, vp, voff, s, &g);
        kk__att_pairs_pack(&g, vp + voff[s], it - vfirst[s]);
    }
    return vp;
}

kk_status kk__attention_varlen_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = KK__CHECK_NOT_NULL(p);
    /* the packed q, k, v, o may be strided views, the head dim contiguous
     * (cu_seqlens are 1-D: contiguous either way) */
    if (st == KK_OK) st = kk__cpu_check_tensors_strided(p, t, ~0u);
    if (st != KK_OK) return st;
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    /* cu_q, cu_k, the first item of each sequence (and the total), and on
     * the pair path where its V's pairs start and its first repack item */
    int64_t *buf = malloc((size_t)(5 * (d.nseq + 1)) * sizeof *buf);
    if (!buf)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen",
                         "no host memory for %" PRId64 " offsets", 5 * (d.nseq + 1));
    int64_t *cq = buf, *ck = buf + d.nseq + 1, *first = buf + 2 * (d.nseq + 1);
    int64_t *voff = buf + 3 * (d.nseq + 1), *vfirst = buf + 4 * (d.nseq + 1);
    st = kk__attention_varlen_offsets(p, t[KK__AVL_T_CUQ]->data, t[KK__AVL_T_CUK]->data, cq, ck);
    if (st != KK_OK) {
        free(buf);
        return st;
    }
    const kk__att_geom g0 = base_geometry(p, t);
    first[0] = 0;
    for (int64_t s = 0; s < d.nseq; s++)
        first[s + 1] = first[s] + g0.Hq * ((cq[s + 1] - cq[s] + KK__ATT_BQ - 1) / KK__ATT_BQ);
    const int64_t items = first[d.nseq];
    const int64_t threads64 = kk__cpu_threads() < items ? kk__cpu_threads() : items;
    const int threads = (int)(threads64 > 0 ? threads64 : 1);
    const int64_t per_thread = kk__att_scratch_floats(g0.Dp);
    float *pool = items ? aligned_alloc(64, (size_t)(threads * per_thread) * sizeof(float)) : NULL;
    if (items && !pool) {
        free(buf);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen",
                         "no host memory for %d x %" PRId64 " floats", threads, per_thread);
    }
    uint32_t *vp = items ? v_to_pairs(&g0, cq, ck, d.nseq, voff, vfirst) : NULL;
    atomic_int failed = 0;
#pragma omp parallel num_threads(threads) if (items > 1)
    {
        kk__att_scratch w;
#ifdef _OPENMP
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        if (items) kk__att_scratch_carve(pool + tid * per_thread, g0.Dp, &w);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            if (atomic_load(&failed)) continue;
            const int64_t s = find_seq(first, d.nseq, it), local = it - first[s];
            const int64_t nqb = (first[s + 1] - first[s]) / g0.Hq;
            kk__att_geom g;
            seq_geometry(&g0, cq, ck, vp, voff, s, &g);
            kk_op_params a; /* the sequence as an `attention` of B = 1 */
            kk__attention_varlen_seq_params(p, g.Sq, g.Sk, &a);
            g.p = &a;
            /* b = s: the sequence is the dropout mask's batch (batch strides 0) */
            const kk_status r = kk__att_block(&g, &w, s, local / nqb, local % nqb * KK__ATT_BQ);
            if (r != KK_OK) atomic_store(&failed, (int)r);
        }
    }
    free(pool);
    free(vp);
    free(buf);
    st = (kk_status)atomic_load(&failed);
    return st == KK_OK
               ? KK_OK
               : kk__error(st, "attention_varlen", "converting a block of q, k or v failed");
}

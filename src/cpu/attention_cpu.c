/* The CPU backend's attention forward (the registry's attention slot).
 *
 * Work is split into items (batch, query head, block of KK__ATT_BQ query
 * rows), spread over kk__cpu_threads() OpenMP threads. Each thread owns one
 * scratch area, allocated once per call: memory is O(threads x block x D),
 * never O(Sq x Sk). The online softmax of a block is attention_cpu_block.c. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/philox.h"
#include "cpu/attention_cpu.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/attention.h"
#include "cpu/cpu_kernels.h"

static atomic_int force_generic;

void kk__att_force_generic(int on) { atomic_store(&force_generic, on); }

const kk__att_kernels *kk__att_kernels_best(void) {
    const kk__att_kernels *k = atomic_load(&force_generic) ? NULL : kk__att_kernels_avx2_fma();
    return k ? k : kk__att_kernels_generic();
}

/* kk_op_run has checked the tensors; a harness bug must still not become a
 * wild write, so the cheap checks are repeated. q, k, v and o may be strided
 * views (the row's `strided`: a [B,S,H,D] buffer seen as [B,H,S,D]) with the
 * head dim contiguous: the blocks read rows through the strides; lse is
 * written contiguously. */
static kk_status check_tensors(const kk_op_params *p, kk_tensor *const *t) {
    kk_status st = KK__CHECK_NOT_NULL(p);
    if (st != KK_OK) return st;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    const int n = kk__attention_describe(p, d);
    for (int k = 0; k < n; k++) {
        const int layout_ok =
            t && t[k] &&
            (kk_tensor_is_contiguous(t[k]) || (k < 4 && t[k]->ndim == 4 && t[k]->strides[3] == 1));
        if (!layout_ok || t[k]->dtype != d[k].dtype || kk_tensor_numel(t[k]) != d[k].numel ||
            t[k]->device_kind != KK_BACKEND_CPU)
            return kk__arg_error(
                KK_ERR_INVALID_ARGUMENT, "attention", d[k].name,
                k < 4 ? "a tensor of the described dtype and size on the cpu, its "
                        "last dimension contiguous"
                      : "a contiguous tensor of the described dtype and size on the cpu",
                "%s", t && t[k] ? t[k]->device : "NULL");
    }
    return KK_OK;
}

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

kk_status kk__attention_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk__att_geom g = geometry(p, t);
    const int64_t nqb = (g.Sq + KK__ATT_BQ - 1) / KK__ATT_BQ, items = g.B * g.Hq * nqb;
    const int threads = (int)(kk__cpu_threads() < items ? kk__cpu_threads() : items);
    const int64_t per_thread = kk__att_scratch_floats(g.Dp);
    float *pool = aligned_alloc(64, (size_t)(threads * per_thread) * sizeof(float));
    if (!pool)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention", "no host memory for %d x %lld floats",
                         threads, (long long)per_thread);
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
    st = (kk_status)atomic_load(&failed);
    /* The worker's last error is its own thread's: name the failure here. */
    return st == KK_OK ? KK_OK
                       : kk__error(st, "attention", "converting a block of q, k or v failed");
}

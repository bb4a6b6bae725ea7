/* The CPU backend's attention_varlen_backward: the attention backward's kv
 * group (kk__attention_backward_cpu_group) per (sequence, kv head), one
 * OpenMP item each, on the sequence's rows of the packed tensors (strided
 * views welcome, the head dim contiguous) with the sequence's own Sq, Sk and
 * the sequence as the dropout mask's batch; the longest sequences' items are
 * handed out first. The offsets are read and checked first, as the forward's:
 * cu_seqlens are data, and a bad one must not become a wild read.
 * docs/kernels/attention.md, "Varlen backward". */
#include <inttypes.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/attention_backward_cpu.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "opdef/attention_varlen_backward.h"

/* An item (sequence, kv head) and its cost, to run the longest first. */
typedef struct item {
    int64_t cost, g;
} item;

static int longest_first(const void *a, const void *b) {
    const item *x = a, *y = b;
    return x->cost != y->cost ? (x->cost < y->cost ? 1 : -1) : (x->g > y->g) - (x->g < y->g);
}

/* Tensor t ([1,H,total,D], lse [1,H,total]) from row `first` on. */
static kk__atb_view rows_from(const kk_tensor *t, int64_t first) {
    return (kk__atb_view){t->data, first * t->strides[2], t->strides[1], t->strides[2]};
}

kk_status kk__attention_varlen_backward_cpu(const kk_op_params *p, kk_tensor *const *t,
                                            kk_stream stream) {
    (void)stream;
    kk_status st = KK__CHECK_NOT_NULL(p);
    if (st == KK_OK) st = kk__cpu_check_tensors_strided(p, t, ~0u);
    if (st != KK_OK) return st;
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t Hkv = p->i[KK__AVB_HKV], D = p->i[KK__AVB_D], items = d.nseq * Hkv;
    int64_t *cu = malloc((size_t)(2 * (d.nseq + 1)) * sizeof *cu);
    item *order = malloc((size_t)items * sizeof *order);
    if (!cu || !order) {
        free(cu);
        free(order);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen_backward",
                         "no host memory for %" PRId64 " offsets", 2 * (d.nseq + 1));
    }
    int64_t *cq = cu, *ck = cu + d.nseq + 1;
    st = kk__attention_varlen_offsets(p, t[KK__AVB_T_CUQ]->data, t[KK__AVB_T_CUK]->data, cq, ck);
    if (st != KK_OK) {
        free(cu);
        free(order);
        return st;
    }
    int64_t longest_q = 0, longest_k = 0; /* the scratch's sizes: max_seqlen may be far above */
    for (int64_t s = 0; s < d.nseq; s++) {
        longest_q = cq[s + 1] - cq[s] > longest_q ? cq[s + 1] - cq[s] : longest_q;
        longest_k = ck[s + 1] - ck[s] > longest_k ? ck[s + 1] - ck[s] : longest_k;
    }
    /* the longest sequences first, so that none starts last and runs alone */
    for (int64_t g = 0; g < items; g++) {
        const int64_t s = g / Hkv;
        order[g] = (item){(cq[s + 1] - cq[s] + 1) * (ck[s + 1] - ck[s] + 1), g};
    }
    qsort(order, (size_t)items, sizeof *order, longest_first);
    const int threads = (int)(kk__cpu_threads() < items ? kk__cpu_threads() : items);
    const size_t per = kk__atb_scratch_floats(longest_q, longest_k, D);
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        float *m = malloc(per * sizeof *m);
        kk__atb_scratch w = {0};
        if (m) {
            kk__atb_scratch_carve(m, longest_q, longest_k, D, &w);
        } else {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t it = 0; it < items; it++) {
            if (!m) continue;
            const int64_t g = order[it].g, s = g / Hkv;
            kk_op_params a; /* the sequence as an attention_backward of B = 1 */
            kk__attention_varlen_backward_seq_params(p, cq[s + 1] - cq[s], ck[s + 1] - ck[s], &a);
            const kk__atb_views x = {.q = rows_from(t[KK__AVB_T_Q], cq[s]),
                                     .k = rows_from(t[KK__AVB_T_K], ck[s]),
                                     .v = rows_from(t[KK__AVB_T_V], ck[s]),
                                     .o = rows_from(t[KK__AVB_T_O], cq[s]),
                                     .dO = rows_from(t[KK__AVB_T_DO], cq[s]),
                                     .lse = rows_from(t[KK__AVB_T_LSE], cq[s]),
                                     .dq = rows_from(t[KK__AVB_T_DQ], cq[s]),
                                     .dk = rows_from(t[KK__AVB_T_DK], ck[s]),
                                     .dv = rows_from(t[KK__AVB_T_DV], ck[s]),
                                     .dt = (kk_dtype)p->i[KK__AVB_DTYPE]};
            /* b = s: the sequence is the dropout mask's batch */
            kk__attention_backward_cpu_group(&a, &x, s, g % Hkv, &w);
        }
        free(m);
    }
    free(cu);
    free(order);
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen_backward",
                         "no memory for the %zu-float scratch of a thread", per);
    return KK_OK;
}

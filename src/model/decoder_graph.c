/* CUDA graphs of the decoder's decode step (the aggressive level on CUDA;
 * docs/model.md, "CUDA graphs"). A decode step launches some twenty kernels a
 * layer, each a few microseconds at small batches, so the host's launches are
 * much of its time; a graph replays them with one launch.
 *
 * What is captured: the steps of a call that read nothing the host passes
 * per call. Attention's key range is the cache length L (a host number in its
 * views and its grid), so it runs eagerly between "pieces": the steps from
 * one layer's o_proj to the next layer's rope_kv_append are one graph, and a
 * decode step is layers + 1 graph launches and `layers` attentions (vLLM's
 * piecewise graphs do the same). rope_kv_append reads the lengths on the
 * device: from a buffer of the graphs' own, written before each replay.
 *
 * Per batch size the first decode step runs eagerly (the warm-up: lazy
 * initialization, and the fp8 scratch cached in the graphs' memory pool),
 * then the pieces are captured; later steps replay them. While capturing,
 * kk_op_run may not fall back to the CPU and default-pool allocations come
 * from the held pool (backend/memory_graph.h), so no graph points at memory
 * someone else may own. A capture that fails leaves that batch size eager,
 * with one warning on the "kernelkit.model" logger. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/memory_graph.h"
#include "core/error.h"
#include "core/log_internal.h"
#include "kernelkit/op.h"
#include "model/decoder_internal.h"
#include "ops/dispatch.h"

#define SETS 8 /* batch sizes kept captured; the oldest goes first */

typedef struct kk__dgraphs kk__dgraphs;

typedef struct gset {
    int64_t B;
    int n;       /* pieces */
    void **exec; /* [n] */
} gset;

struct kk__dgraphs {
    const kk__backend *be;
    int index, pool, enabled;
    kk_stream stream;
    kk_tensor *lens; /* int32 [max_batch]: what the captured rope_kv_append reads */
    gset sets[SETS];
    int nsets;
    int64_t failed[SETS]; /* batch sizes whose capture failed: eager */
    int nfailed;
    kk_decoder_graph_stats stats;
};

static const char *const LOGGER = "kernelkit.model";

/* ---- life ---- */

kk_status kk__dgraphs_create(const char *func, kk_decoder *d) {
    kk_backend_kind kind;
    int index = 0;
    kk_status st = kk_device_parse(d->device, &kind, &index);
    if (st != KK_OK) return st;
    const kk__backend *be = kk__backend_get(kind);
    if (!be || !be->graph_begin || !be->streams) return KK_OK;
    kk__dgraphs *g = calloc(1, sizeof *g);
    if (!g) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    g->be = be, g->index = index, g->enabled = 1;
    d->graphs = g;
    if ((st = kk__mem_graph_pool_acquire(d->device, &g->pool)) != KK_OK ||
        (st = be->streams->create(be->context, index, 0, &g->stream, func)) != KK_OK ||
        (st = kk_tensor_create(d->device, KK_DTYPE_INT32, 1, (int64_t[]){d->max_batch},
                               &g->lens)) != KK_OK) {
        kk__dgraphs_free(d);
        return st;
    }
    g->stats.enabled = 1;
    return KK_OK;
}

static void drop_set(kk__dgraphs *g, gset *s) {
    for (int i = 0; i < s->n; i++) g->be->graph_destroy(g->be->context, s->exec[i]);
    free(s->exec);
    memset(s, 0, sizeof *s);
}

/* Every set destroyed, after the work that may replay them. */
static void drop_all(kk_decoder *d) {
    kk__dgraphs *g = d->graphs;
    if (g->stream) (void)kk_op_synchronize(d->device, g->stream);
    for (int i = 0; i < g->nsets; i++) drop_set(g, &g->sets[i]);
    g->nsets = 0;
    g->nfailed = 0;
}

void kk__dgraphs_free(kk_decoder *d) {
    kk__dgraphs *g = d ? d->graphs : NULL;
    if (!g) return;
    drop_all(d);
    kk_tensor_destroy(g->lens);
    if (g->pool) kk__mem_graph_pool_release(d->device, g->pool);
    if (g->stream) g->be->streams->destroy(g->be->context, g->index, g->stream);
    free(g);
    d->graphs = NULL;
}

int kk__dgraphs_on(const kk_decoder *d) { return d->graphs && d->graphs->enabled; }

/* ---- the pieces ---- */

/* Pieces of a call: maximal runs of capturable steps over layers x steps. */
static int count_pieces(const kk_decoder *d) {
    int n = 0, in = 0;
    for (int64_t l = 0; l < d->layers; l++)
        for (int i = 0; i < d->plan.n; i++) {
            const int cap = kk__dstep_capturable(&d->plan.steps[i]);
            n += cap && !in;
            in = cap;
        }
    return n;
}

enum { EAGER, CAPTURE, REPLAY };

/* The call's steps: all run (EAGER); the pieces captured into s->exec and
 * the rest skipped (CAPTURE); the pieces replayed and the rest run (REPLAY). */
static kk_status walk(kk_decoder *d, kk__dcall *c, int mode, gset *s) {
    kk__dgraphs *g = d->graphs;
    const kk__backend *be = g->be;
    kk_status st = KK_OK;
    int piece = -1, in = 0;
    for (int64_t l = 0; st == KK_OK && l < d->layers; l++)
        for (int i = 0; st == KK_OK && i < d->plan.n; i++) {
            const int cap = kk__dstep_capturable(&d->plan.steps[i]);
            if (cap && !in) { /* a piece starts */
                piece++;
                if (mode == CAPTURE)
                    st = be->graph_begin(be->context, g->stream, "kk_decoder_step");
                else if (mode == REPLAY)
                    st =
                        be->graph_launch(be->context, s->exec[piece], g->stream, "kk_decoder_step");
            }
            if (in && !cap && mode == CAPTURE) /* the piece ends before this step */
                st = be->graph_end(be->context, g->stream, &s->exec[piece], "kk_decoder_step");
            in = cap;
            if (st != KK_OK) break;
            if (mode == EAGER || (mode == CAPTURE && cap) || (mode == REPLAY && !cap)) {
                kk_status r = kk__dcall_step(c, l, i);
                if (r != KK_OK && mode == CAPTURE) { /* end the capture, keep the error */
                    char why[256];
                    snprintf(why, sizeof why, "%s", kk_last_error_message());
                    void *x = NULL;
                    (void)be->graph_end(be->context, g->stream, &x, "kk_decoder_step");
                    be->graph_destroy(be->context, x);
                    st = kk__error(r, "kk_decoder_step", "capturing step '%s': %s",
                                   d->plan.steps[i].name, why);
                } else {
                    st = r;
                }
            }
        }
    if (st == KK_OK && in && mode == CAPTURE)
        st = be->graph_end(be->context, g->stream, &s->exec[piece], "kk_decoder_step");
    return st;
}

static gset *find(kk__dgraphs *g, int64_t B) {
    for (int i = 0; i < g->nsets; i++)
        if (g->sets[i].B == B) return &g->sets[i];
    return NULL;
}

static int failed_before(const kk__dgraphs *g, int64_t B) {
    for (int i = 0; i < g->nfailed; i++)
        if (g->failed[i] == B) return 1;
    return 0;
}

/* Capture the pieces for batch B (nothing runs). */
static kk_status capture(kk_decoder *d, kk__dcall *c, int64_t B) {
    kk__dgraphs *g = d->graphs;
    if (g->nsets == SETS) { /* the oldest batch size goes */
        (void)kk_op_synchronize(d->device, g->stream);
        drop_set(g, &g->sets[0]);
        memmove(&g->sets[0], &g->sets[1], (SETS - 1) * sizeof g->sets[0]);
        g->nsets--;
        memset(&g->sets[g->nsets], 0, sizeof g->sets[0]);
    }
    gset s = {B, count_pieces(d), NULL};
    s.exec = calloc((size_t)(s.n ? s.n : 1), sizeof *s.exec);
    if (!s.exec)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_decoder_step", "host allocation failed");
    kk__op_run_set_thread_strict(1);
    kk_status st = walk(d, c, CAPTURE, &s);
    kk__op_run_set_thread_strict(0);
    for (int i = 0; st == KK_OK && i < s.n; i++)
        if (!s.exec[i])
            st = kk__error(KK_ERR_INTERNAL, "kk_decoder_step", "piece %d not captured", i);
    if (st != KK_OK) {
        drop_set(g, &s);
        return st;
    }
    g->sets[g->nsets++] = s;
    return KK_OK;
}

typedef struct job {
    kk_decoder *d;
    kk__dcall *c;
    int64_t B;
} job;

/* The decode call with the device current on this thread (so the per-thread
 * redirection and the no-fallback rule reach every op). */
static kk_status run_on_device(void *arg) {
    job *j = arg;
    kk_decoder *d = j->d;
    kk__dgraphs *g = d->graphs;
    const int64_t B = j->B;
    /* the call's input copy was queued on the default stream, which the
     * graphs' non-blocking stream does not wait for */
    kk_status st = kk_op_synchronize(d->device, NULL);
    if (st != KK_OK) return st;
    /* the lengths the captured rope_kv_append reads: all L */
    int32_t *host = malloc((size_t)B * sizeof *host);
    if (!host) return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_decoder_step", "host allocation failed");
    for (int64_t b = 0; b < B; b++) host[b] = (int32_t)d->length;
    kk_tensor *h = NULL, *dv = NULL;
    st = kk_tensor_wrap("cpu", KK_DTYPE_INT32, 1, &B, NULL, host, &h);
    if (st == KK_OK) st = kk_tensor_slice(g->lens, 0, 0, B, 1, &dv);
    if (st == KK_OK) st = kk_tensor_copy(dv, h); /* synchronous: before the launches */
    kk_tensor_destroy(h), kk_tensor_destroy(dv);
    free(host);
    if (st != KK_OK) return st;
    kk__dcall_set_stream(j->c, g->stream, g->lens);
    gset *s = find(g, B);
    if (s) {
        st = walk(d, j->c, REPLAY, s);
        if (st == KK_OK) g->stats.replays++;
    } else {
        if ((st = kk__mem_graph_redirect(d->device, g->pool)) != KK_OK) return st;
        st = walk(d, j->c, EAGER, NULL); /* the step itself, and the warm-up */
        if (st == KK_OK) st = kk_op_synchronize(d->device, g->stream);
        if (st == KK_OK) g->stats.eager++;
        if (st == KK_OK && !failed_before(g, B)) {
            const kk_status cs = capture(d, j->c, B);
            if (cs == KK_OK) {
                g->stats.captures++;
                KK_LOG(KK_LOG_INFO, LOGGER, "decode step captured as CUDA graphs",
                       KK_F_STR("device", d->device), KK_F_INT("batch", B),
                       KK_F_INT("graphs", find(g, B)->n), KK_F_INT("layers", d->layers));
            } else {
                g->stats.failures++;
                if (g->nfailed < SETS) g->failed[g->nfailed++] = B;
                KK_LOG(KK_LOG_WARN, LOGGER,
                       "CUDA graph capture of the decode step failed; this batch size runs "
                       "eagerly",
                       KK_F_STR("device", d->device), KK_F_INT("batch", B),
                       KK_F_STR("error", kk_last_error_message()));
            }
        }
        (void)kk__mem_graph_redirect(d->device, 0);
    }
    kk_status ss = kk_op_synchronize(d->device, g->stream);
    kk__dcall_set_stream(j->c, NULL, NULL);
    return st != KK_OK ? st : ss;
}

kk_status kk__dgraphs_run(kk_decoder *d, kk__dcall *c, int64_t B) {
    kk__dgraphs *g = d->graphs;
    job j = {d, c, B};
    if (!g->be->call_on_device) return run_on_device(&j);
    return g->be->call_on_device(g->be->context, g->index, run_on_device, &j);
}

/* ---- the public switches ---- */

kk_status kk_decoder_set_graphs(kk_decoder *d, int enable) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (st != KK_OK) return st;
    if (!enable) {
        if (d->graphs) {
            drop_all(d);
            d->graphs->enabled = 0;
            d->graphs->stats.enabled = 0;
        }
        return KK_OK;
    }
    if (!d->graphs)
        return kk__error(KK_ERR_UNSUPPORTED, __func__, "this decoder has no CUDA graphs: %s",
                         d->plan.graphs_why ? d->plan.graphs_why
                                            : "only the aggressive level uses them");
    d->graphs->enabled = d->graphs->stats.enabled = 1;
    return KK_OK;
}

kk_status kk_decoder_graph_stats_get(const kk_decoder *d, kk_decoder_graph_stats *out) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    if (d->graphs) *out = d->graphs->stats;
    return KK_OK;
}

/* What the report says about its documents, before any formatting: which
 * entries are anchors, which anchor measures the same work as which KernelKit
 * entry, and the per-document summary numbers (geometric means). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/report/report_internal.h"

static const kk_bench_param *find_param(const kk_bench_entry *e, const char *name) {
    for (int i = 0; i < e->nparams; i++)
        if (strcmp(e->params[i].name, name) == 0) return &e->params[i];
    return NULL;
}

static void set_impl(char *impl, size_t size, const char *v, size_t len) {
    if (!impl || !size) return;
    if (len >= size) len = size - 1;
    memcpy(impl, v, len);
    impl[len] = 0;
}

int kk_bench_entry_anchor(const kk_bench_entry *e, char *impl, size_t size) {
    if (!e) return 0;
    const kk_bench_param *p = find_param(e, KK_BENCH_IMPL_PARAM);
    /* the parameter wins over the name: it is explicit, and it lets an
     * "anchor/..." name be relabelled without renaming the benchmark */
    if (p && p->kind == KK_BENCH_PARAM_STRING) {
        int anchor = strcmp(p->string, KK_BENCH_IMPL_SELF) != 0 && p->string[0];
        const char *v = anchor ? p->string : KK_BENCH_IMPL_SELF;
        set_impl(impl, size, v, strlen(v));
        return anchor;
    }
    size_t plen = strlen(KK_BENCH_ANCHOR_PREFIX);
    if (strncmp(e->name, KK_BENCH_ANCHOR_PREFIX, plen) == 0) {
        const char *v = e->name + plen;
        size_t len = strcspn(v, "/");
        if (len == 0)
            set_impl(impl, size, "anchor", 6);
        else
            set_impl(impl, size, v, len);
        return 1;
    }
    set_impl(impl, size, KK_BENCH_IMPL_SELF, strlen(KK_BENCH_IMPL_SELF));
    return 0;
}

static int same_param(const kk_bench_param *a, const kk_bench_param *b) {
    if (a->kind != b->kind) return 0;
    if (a->kind == KK_BENCH_PARAM_NUMBER) return a->number == b->number;
    if (a->kind == KK_BENCH_PARAM_BOOL) return a->boolean == b->boolean;
    return strcmp(a->string, b->string) == 0;
}

/* Every parameter but "implementation" present in both with the same value. */
static int params_cover(const kk_bench_entry *a, const kk_bench_entry *b) {
    for (int i = 0; i < a->nparams; i++) {
        const kk_bench_param *p = &a->params[i];
        if (strcmp(p->name, KK_BENCH_IMPL_PARAM) == 0) continue;
        const kk_bench_param *q = find_param(b, p->name);
        if (!q || !same_param(p, q)) return 0;
    }
    return 1;
}

static int same_work(const kk_bench_entry *a, const kk_bench_entry *b) {
    return strcmp(a->op, b->op) == 0 && strcmp(a->dtype, b->dtype) == 0 && params_cover(a, b) &&
           params_cover(b, a);
}

int kk__flush_differs(const kk_bench_entry *a, const kk_bench_entry *b) {
    return a->m.cold && b->m.cold && a->m.flush_mode != b->m.flush_mode;
}

void kk__report_flush_text(const kk_bench_results *r, char *buf, size_t size) {
    size_t hot = 0, mode[KK_BENCH_FLUSH_COUNT] = {0};
    for (size_t i = 0; i < r->count; i++) {
        const kk_bench_measurement *m = &r->entries[i].m;
        if (!m->cold)
            hot++;
        else if (m->flush_mode >= 0 && m->flush_mode < KK_BENCH_FLUSH_COUNT)
            mode[m->flush_mode]++;
    }
    size_t cold = mode[KK_BENCH_FLUSH_WRITE] + mode[KK_BENCH_FLUSH_READ];
    if (!r->count)
        snprintf(buf, size, "no benchmarks");
    else if (!cold)
        snprintf(buf, size, "%zu hot", hot);
    else
        snprintf(buf, size, "%zu cold (L2 flush: %zu write, %zu read), %zu hot", cold,
                 mode[KK_BENCH_FLUSH_WRITE], mode[KK_BENCH_FLUSH_READ], hot);
}

static int has_impl(const kk__anchor_match *m, int n, const char *impl) {
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].impl, impl) == 0) return 1;
    return 0;
}

/* Anchors of document j for e, one per implementation not yet in out;
 * `same_flush`: only those flushed like e. */
static int anchors_in(const kk_bench_results *r, const kk_bench_entry *e, kk__anchor_match *out,
                      int n, int cap, int same_flush) {
    for (size_t i = 0; i < r->count && n < cap; i++) {
        const kk_bench_entry *a = &r->entries[i];
        kk__anchor_match *m = &out[n];
        if (!kk_bench_entry_anchor(a, m->impl, sizeof m->impl) || !same_work(e, a) ||
            !(a->summary.median > 0) || has_impl(out, n, m->impl) ||
            (same_flush && kk__flush_differs(e, a)))
            continue;
        m->anchor = a;
        m->speedup = a->summary.median / e->summary.median;
        n++;
    }
    return n;
}

int kk__report_anchors(const kk_bench_results *const *docs, size_t ndocs, size_t d,
                       const kk_bench_entry *e, kk__anchor_match *out, int cap) {
    if (kk_bench_entry_anchor(e, NULL, 0) || !(e->summary.median > 0)) return 0;
    /* the entry's own document first: an anchor measured in the same run is
     * the fairest comparison; other documents only for implementations it lacks,
     * and only from a device of the same name */
    int n = 0;
    for (int same_flush = 1; same_flush >= 0; same_flush--) {
        n = anchors_in(docs[d], e, out, n, cap, same_flush);
        for (size_t j = 0; j < ndocs && n < cap; j++)
            if (j != d && strcmp(docs[j]->env.device_name, docs[d]->env.device_name) == 0)
                n = anchors_in(docs[j], e, out, n, cap, same_flush);
    }
    return n;
}

typedef struct geo {
    double log_sum;
    size_t n;
} geo;

static void geo_add(geo *g, double v) {
    if (!(v > 0) || !isfinite(v)) return;
    g->log_sum += log(v);
    g->n++;
}

static double geo_mean(const geo *g) { return g->n ? exp(g->log_sum / (double)g->n) : 0; }

void kk__report_summarize(const kk_bench_results *const *docs, size_t ndocs, size_t d,
                          kk__doc_summary *out) {
    memset(out, 0, sizeof *out);
    geo tf = {0}, gb = {0}, sp = {0};
    const kk_bench_results *r = docs[d];
    for (size_t i = 0; i < r->count; i++) {
        const kk_bench_entry *e = &r->entries[i];
        if (kk_bench_entry_anchor(e, NULL, 0)) {
            out->anchors++;
            continue;
        }
        out->benchmarks++;
        geo_add(&tf, e->tflops);
        geo_add(&gb, e->gbs);
        kk__anchor_match m;
        if (kk__report_anchors(docs, ndocs, d, e, &m, 1) == 1) geo_add(&sp, m.speedup);
    }
    out->geo_tflops = geo_mean(&tf);
    out->n_tflops = tf.n;
    out->geo_gbs = geo_mean(&gb);
    out->n_gbs = gb.n;
    out->geo_speedup = geo_mean(&sp);
    out->n_speedup = sp.n;
}

size_t kk__report_ops(const kk_bench_results *r, const char **ops, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < r->count; i++) {
        const char *op = r->entries[i].op;
        size_t j = 0;
        while (j < n && strcmp(ops[j], op) != 0) j++;
        if (j == n && n < cap) ops[n++] = op;
    }
    return n;
}

const char *kk__report_label(const kk_bench_report_options *o, const kk_bench_results *r,
                             size_t d) {
    if (o && o->labels && o->labels[d]) return o->labels[d];
    return r->env.device_name[0] ? r->env.device_name : r->env.device;
}

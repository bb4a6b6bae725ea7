/* Comparing two results documents benchmark by benchmark (kernelkit/compare.h):
 * the statistics are kk_stats_compare's; this file matches entries, picks
 * thresholds and warns about what makes two measurements hard to compare
 * (device, clocks, driver, cold against hot) without failing, since the gate's
 * caller decides. The output formats are compare_format.c. docs/harness.md,
 * "kernelkit compare". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/report/report_internal.h"
#include "kernelkit/compare.h"

#define FUNC "kk_bench_compare"
/* Mean SM clocks further apart than this (relative) get a row note. */
#define CLOCK_NOTE_FRACTION 0.05

void kk_bench_compare_options_default(kk_bench_compare_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    kk_compare_options s;
    kk_compare_options_default(&s);
    o->threshold = s.threshold;
    o->alpha = s.alpha;
    o->confidence = s.confidence;
    o->resamples = s.resamples;
    o->seed = s.seed;
}

static kk_status check_options(const kk_bench_compare_options *o) {
    if (!(o->threshold >= 0 && o->threshold <= 1))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "options.threshold", "0 to 1", "%g",
                             o->threshold);
    if (!(o->alpha > 0 && o->alpha < 1))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "options.alpha",
                             "more than 0 and less than 1", "%g", o->alpha);
    if (!(o->confidence >= 0.5 && o->confidence < 1))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "options.confidence",
                             "0.5 or more and less than 1", "%g", o->confidence);
    if (o->resamples != 0 &&
        (o->resamples < KK_STATS_MIN_RESAMPLES || o->resamples > KK_STATS_MAX_RESAMPLES))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "options.resamples",
                             "0 (default) or 1000 to 1000000", "%d", o->resamples);
    return KK_OK;
}

static void warn(kk_bench_comparison *c, const char *fmt, ...) KK__BUF_PRINTF;

static void warn(kk_bench_comparison *c, const char *fmt, ...) {
    if (c->nwarnings == KK_BENCH_COMPARE_MAX_WARNINGS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->warnings[c->nwarnings++], sizeof c->warnings[0], fmt, ap);
    va_end(ap);
}

/* `clock`: the numbers are MHz and the difference changes timings. */
static void warn_int(kk_bench_comparison *c, const char *what, int a, int b, int clock) {
    if (a <= 0 || b <= 0 || a == b) return; /* unknown on one side: nothing to say */
    warn(c, "%s differ: base %d%s, new %d%s%s", what, a, clock ? " MHz" : "", b,
         clock ? " MHz" : "", clock ? ": timings depend on clocks" : "");
}

/* Differences between the two environments that make timings incomparable. */
static void environment_warnings(kk_bench_comparison *c, const kk_bench_environment *b,
                                 const kk_bench_environment *n) {
    if (strcmp(b->device_name, n->device_name) != 0 || strncmp(b->device, n->device, 3) != 0) {
        warn(c,
             "devices differ: base %.100s (%.31s), new %.100s (%.31s): times from "
             "different devices are not comparable",
             b->device_name, b->device, n->device_name, n->device);
    }
    warn_int(c, "maximum SM clocks", b->sm_clock_max_mhz, n->sm_clock_max_mhz, 1);
    warn_int(c, "maximum memory clocks", b->mem_clock_max_mhz, n->mem_clock_max_mhz, 1);
    if (strcmp(b->cpu_governor, n->cpu_governor) != 0)
        warn(c, "CPU frequency governors differ: base %.60s, new %.60s: CPU clocks may differ",
             b->cpu_governor, n->cpu_governor);
    if (b->cpu_isa[0] && n->cpu_isa[0] && strcmp(b->cpu_isa, n->cpu_isa) != 0)
        warn(c, "CPU kernel instruction sets differ: base %.31s, new %.31s (KK_CPU_ISA)",
             b->cpu_isa, n->cpu_isa);
    if (strcmp(b->driver_version, n->driver_version) != 0)
        warn(c, "driver versions differ: base \"%.60s\", new \"%.60s\"", b->driver_version,
             n->driver_version);
    warn_int(c, "CUDA runtime versions", b->cuda_runtime_version, n->cuda_runtime_version, 0);
}

/* What differs in how one benchmark was measured. */
static void row_note(kk_bench_compare_row *row, const kk_bench_entry *b, const kk_bench_entry *n) {
    double cb = b->m.sm_clock_mean_mhz, cn = n->m.sm_clock_mean_mhz;
    size_t len = strlen(row->note);
    char *p = row->note + len;
    size_t room = sizeof row->note - len;
    if (cb > 0 && cn > 0 && fabs(cn - cb) > CLOCK_NOTE_FRACTION * cb)
        snprintf(p, room, "mean SM clock %.0f vs %.0f MHz", cb, cn);
    else if (b->m.cold != n->m.cold)
        snprintf(p, room, "%s vs %s samples", b->m.cold ? "cold" : "hot",
                 n->m.cold ? "cold" : "hot");
    else if (kk__flush_differs(b, n))
        snprintf(p, room, "L2 flush %s vs %s", kk_bench_flush_name((kk_bench_flush)b->m.flush_mode),
                 kk_bench_flush_name((kk_bench_flush)n->m.flush_mode));
    else if (strcmp(b->device, n->device) != 0)
        snprintf(p, room, "device %.31s vs %.31s", b->device, n->device);
}

static void pick_threshold(const kk_bench_compare_options *o, const kk_bench_entry *b,
                           const kk_bench_entry *n, kk_bench_compare_row *row) {
    row->threshold = o->threshold;
    row->threshold_source = KK_BENCH_THRESHOLD_DEFAULT;
    if (n->threshold > 0) {
        row->threshold = n->threshold;
        row->threshold_source = KK_BENCH_THRESHOLD_NEW;
    } else if (b->threshold > 0) {
        row->threshold = b->threshold;
        row->threshold_source = KK_BENCH_THRESHOLD_BASE;
    }
}

static kk_status compare_pair(const kk_bench_compare_options *o, const kk_bench_entry *b,
                              const kk_bench_entry *n, kk_bench_compare_row *row) {
    memset(row, 0, sizeof *row);
    snprintf(row->name, sizeof row->name, "%s", b->name);
    snprintf(row->op, sizeof row->op, "%s", b->op);
    snprintf(row->dtype, sizeof row->dtype, "%s", b->dtype);
    pick_threshold(o, b, n, row);
    kk_compare_options so;
    kk_compare_options_default(&so);
    so.threshold = row->threshold;
    so.alpha = o->alpha;
    so.confidence = o->confidence;
    so.resamples = o->resamples;
    so.seed = o->seed;
    kk_status st = kk_stats_compare(b->m.samples, b->m.n, n->m.samples, n->m.n, &so, &row->r);
    if (st == KK_OK) {
        row->compared = 1;
        row_note(row, b, n);
        return KK_OK;
    }
    if (st == KK_ERR_OUT_OF_MEMORY) return st;
    /* a sample of 0 s or similar: keep going, say why in the row */
    row->r.verdict = KK_VERDICT_AMBIGUOUS;
    row->r.median_base = b->summary.median;
    row->r.median_cand = n->summary.median;
    row->r.ratio = row->r.ratio_ci_low = row->r.ratio_ci_high = NAN;
    row->r.mwu.p_value = row->r.cliffs_delta = NAN;
    snprintf(row->note, sizeof row->note, "not compared: %.200s", kk_last_error_message());
    kk_clear_error();
    return KK_OK;
}

static void about(char *buf, size_t size, const kk_bench_environment *e) {
    snprintf(buf, size, "%.120s (%.31s), driver %.40s, %.31s, kernelkit %.31s commit %.40s",
             e->device_name[0] ? e->device_name : "unknown device", e->device,
             e->driver_version[0] ? e->driver_version : "none", e->timestamp_utc, e->kk_version,
             e->git_commit);
}

static kk_bench_comparison *alloc_comparison(const kk_bench_results *b, const kk_bench_results *n) {
    kk_bench_comparison *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    size_t nb = b->count ? b->count : 1, nn = n->count ? n->count : 1;
    c->rows = calloc(nb, sizeof *c->rows);
    c->only_base = calloc(nb, sizeof *c->only_base);
    c->only_new = calloc(nn, sizeof *c->only_new);
    if (!c->rows || !c->only_base || !c->only_new) {
        kk_bench_comparison_free(c);
        return NULL;
    }
    return c;
}

static void set_labels(kk_bench_comparison *c, const kk_bench_compare_options *o) {
    c->options = *o;
    snprintf(c->base_label, sizeof c->base_label, "%s", o->base_label ? o->base_label : "base");
    snprintf(c->new_label, sizeof c->new_label, "%s", o->new_label ? o->new_label : "new");
    c->options.base_label = c->base_label;
    c->options.new_label = c->new_label;
}

kk_status kk_bench_compare(const kk_bench_results *base, const kk_bench_results *cand,
                           const kk_bench_compare_options *opt, kk_bench_comparison **out) {
    kk_bench_compare_options o;
    kk_bench_compare_options_default(&o);
    kk_status st = KK__CHECK_NOT_NULL(base);
    if (!st) st = KK__CHECK_NOT_NULL(cand);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (!st && opt) st = check_options(opt);
    if (st) return st;
    if (opt) o = *opt;
    kk_bench_comparison *c = alloc_comparison(base, cand);
    if (!c) return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "cannot allocate the comparison");
    set_labels(c, &o);
    about(c->base_about, sizeof c->base_about, &base->env);
    about(c->new_about, sizeof c->new_about, &cand->env);
    environment_warnings(c, &base->env, &cand->env);
    size_t flush_mismatch = 0;
    const kk_bench_entry *first_mismatch = NULL;
    for (size_t i = 0; i < base->count; i++) {
        const kk_bench_entry *b = &base->entries[i];
        const kk_bench_entry *n = kk_bench_results_find(cand, b->name);
        if (!n) {
            snprintf(c->only_base[c->n_only_base++], sizeof c->only_base[0], "%s", b->name);
            continue;
        }
        if (kk__flush_differs(b, n) && !flush_mismatch++) first_mismatch = b;
        kk_bench_compare_row *row = &c->rows[c->nrows++];
        if ((st = compare_pair(&o, b, n, row))) {
            kk_bench_comparison_free(c);
            return st;
        }
        c->count[row->r.verdict & 3]++;
    }
    if (flush_mismatch) {
        const kk_bench_entry *n = kk_bench_results_find(cand, first_mismatch->name);
        warn(c,
             "L2 flush modes differ for %zu cold benchmark%s (e.g. %.60s: base %s, new %s): "
             "a write flush leaves dirty lines whose write-back is timed, a read flush does "
             "not",
             flush_mismatch, flush_mismatch == 1 ? "" : "s", first_mismatch->name,
             kk_bench_flush_name((kk_bench_flush)first_mismatch->m.flush_mode),
             kk_bench_flush_name((kk_bench_flush)n->m.flush_mode));
    }
    for (size_t i = 0; i < cand->count; i++)
        if (!kk_bench_results_find(base, cand->entries[i].name))
            snprintf(c->only_new[c->n_only_new++], sizeof c->only_new[0], "%s",
                     cand->entries[i].name);
    *out = c;
    return KK_OK;
}

void kk_bench_comparison_free(kk_bench_comparison *c) {
    if (!c) return;
    free(c->rows);
    free(c->only_base);
    free(c->only_new);
    free(c);
}

size_t kk_bench_comparison_slower(const kk_bench_comparison *c) {
    return c ? c->count[KK_VERDICT_SLOWER] : 0;
}

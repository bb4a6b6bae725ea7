/* A comparison as markdown (what `kernelkit compare` prints) and as JSON
 * (schema "kernelkit.compare/1", docs/harness.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/report/report_internal.h"
#include "kernelkit/compare.h"

static const char *const k_sources[] = {"default", "new", "base"};

static const char *source_name(kk_bench_threshold_source s) {
    return (unsigned)s < 3 ? k_sources[s] : "default";
}

kk_status kk_bench_comparison_summary(const kk_bench_comparison *c, char *buf, size_t size) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (!st) st = KK__CHECK_NOT_NULL(buf);
    if (!st && size == 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "size", "at least 1", "0");
    if (st) return st;
    snprintf(buf, size,
             "Summary: %zu compared: %zu SLOWER, %zu FASTER, %zu SAME, %zu AMBIGUOUS; "
             "%zu only in base, %zu only in new; %s",
             c->nrows, c->count[KK_VERDICT_SLOWER], c->count[KK_VERDICT_FASTER],
             c->count[KK_VERDICT_SAME], c->count[KK_VERDICT_AMBIGUOUS], c->n_only_base,
             c->n_only_new, c->count[KK_VERDICT_SLOWER] ? "FAIL (a benchmark is slower)" : "PASS");
    return KK_OK;
}

static void md_header(kk__buf *b, const kk_bench_comparison *c) {
    const kk_bench_compare_options *o = &c->options;
    kk__buf_puts(b, "## Benchmark comparison\n\n- base: ");
    kk__buf_md_code(b, c->base_label);
    kk__buf_puts(b, ": ");
    kk__buf_md_text(b, c->base_about);
    kk__buf_puts(b, "\n- new: ");
    kk__buf_md_code(b, c->new_label);
    kk__buf_puts(b, ": ");
    kk__buf_md_text(b, c->new_about);
    kk__buf_printf(b,
                   "\n- ratio = new median / base median (> 1: slower); %g%% bootstrap CI, "
                   "%d resamples, seed %llu; Mann-Whitney U at alpha %g; threshold %g%% "
                   "unless the results file sets one (marked *)\n\n",
                   o->confidence * 100, o->resamples ? o->resamples : KK_STATS_DEFAULT_RESAMPLES,
                   (unsigned long long)o->seed, o->alpha, o->threshold * 100);
    for (int i = 0; i < c->nwarnings; i++) {
        kk__buf_puts(b, "> **Warning:** ");
        kk__buf_md_text(b, c->warnings[i]);
        kk__buf_puts(b, "\n\n");
    }
}

static void md_row(kk__buf *b, const kk_bench_compare_row *row) {
    char mb[32], mn[32];
    const kk_compare_result *r = &row->r;
    kk__buf_puts(b, "| ");
    kk__buf_md_code(b, row->name);
    kk__buf_printf(b, " | %s | %s | ", kk__fmt_seconds(r->median_base, mb, sizeof mb),
                   kk__fmt_seconds(r->median_cand, mn, sizeof mn));
    if (row->compared)
        kk__buf_printf(b, "%.3f [%.3f, %.3f] | %.2g | %+.2f (%s)", r->ratio, r->ratio_ci_low,
                       r->ratio_ci_high, r->mwu.p_value, r->cliffs_delta,
                       kk_effect_size_name(r->effect));
    else
        kk__buf_puts(b, "- | - | -");
    kk__buf_printf(b, " | %g%%%s | ", row->threshold * 100,
                   row->threshold_source == KK_BENCH_THRESHOLD_DEFAULT ? "" : "*");
    const char *v = kk_verdict_name(r->verdict);
    if (r->verdict == KK_VERDICT_SLOWER || r->verdict == KK_VERDICT_FASTER)
        kk__buf_printf(b, "**%s**", v);
    else
        kk__buf_puts(b, v);
    if (row->note[0]) {
        kk__buf_puts(b, " (");
        kk__buf_md_text(b, row->note);
        kk__buf_puts(b, ")");
    }
    kk__buf_puts(b, " |\n");
}

static void md_only(kk__buf *b, const char *which, char (*names)[256], size_t n) {
    if (!n) return;
    kk__buf_printf(b, "Only in %s (%zu, not compared): ", which, n);
    for (size_t i = 0; i < n; i++) {
        if (i) kk__buf_puts(b, ", ");
        kk__buf_md_code(b, names[i]);
    }
    kk__buf_puts(b, "\n\n");
}

kk_status kk_bench_comparison_markdown(const kk_bench_comparison *c, char **text) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (!st) st = KK__CHECK_NOT_NULL(text);
    if (st) return st;
    kk__buf b = {0};
    md_header(&b, c);
    if (c->nrows) {
        kk__buf_printf(&b,
                       "| benchmark | base median | new median | ratio [%g%% CI] | p | "
                       "delta (magnitude) | threshold | verdict |\n"
                       "|---|---:|---:|---|---:|---|---:|---|\n",
                       c->options.confidence * 100);
        for (size_t i = 0; i < c->nrows; i++) md_row(&b, &c->rows[i]);
        kk__buf_puts(&b, "\n");
    } else {
        kk__buf_puts(&b, "No benchmark is in both documents.\n\n");
    }
    md_only(&b, "base", c->only_base, c->n_only_base);
    md_only(&b, "new", c->only_new, c->n_only_new);
    char line[256];
    kk_bench_comparison_summary(c, line, sizeof line);
    kk__buf_printf(&b, "%s\n", line);
    return kk__buf_finish(&b, __func__, text);
}

/* ---- JSON ----
 * Written through the text buffer rather than cJSON so that an allocation
 * failure anywhere is reported (cJSON's adders drop a member silently). */

static void jstr(kk__buf *b, const char *key, const char *v, int last) {
    kk__buf_printf(b, "\"%s\": ", key);
    kk__buf_json_str(b, v);
    kk__buf_puts(b, last ? "" : ", ");
}

static void jnum(kk__buf *b, const char *key, double v, int last) {
    kk__buf_printf(b, "\"%s\": ", key);
    kk__buf_json_num(b, v);
    kk__buf_puts(b, last ? "" : ", ");
}

static void row_json(kk__buf *b, const kk_bench_compare_row *row, int last) {
    const kk_compare_result *r = &row->r;
    kk__buf_puts(b, "    {");
    jstr(b, "name", row->name, 0);
    jstr(b, "op", row->op, 0);
    jstr(b, "dtype", row->dtype, 0);
    kk__buf_printf(b, "\"compared\": %s, ", row->compared ? "true" : "false");
    jnum(b, "threshold", row->threshold, 0);
    jstr(b, "threshold_source", source_name(row->threshold_source), 0);
    kk__buf_printf(b, "\"n_base\": %zu, \"n_new\": %zu, ", r->n_base, r->n_cand);
    jnum(b, "median_base", r->median_base, 0);
    jnum(b, "median_new", r->median_cand, 0);
    jnum(b, "ratio", r->ratio, 0);
    jnum(b, "ratio_ci_low", r->ratio_ci_low, 0);
    jnum(b, "ratio_ci_high", r->ratio_ci_high, 0);
    jnum(b, "p_value", r->mwu.p_value, 0);
    jstr(b, "mwu_method", r->mwu.method == KK_MWU_EXACT ? "exact" : "asymptotic", 0);
    jnum(b, "cliffs_delta", r->cliffs_delta, 0);
    jstr(b, "effect", kk_effect_size_name(r->effect), 0);
    jstr(b, "verdict", kk_verdict_name(r->verdict), 0);
    jstr(b, "note", row->note, 1);
    kk__buf_puts(b, last ? "}\n" : "},\n");
}

static void names_json(kk__buf *b, const char *key, char (*names)[256], size_t n) {
    kk__buf_printf(b, "  \"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        kk__buf_puts(b, i ? ", " : "");
        kk__buf_json_str(b, names[i]);
    }
    kk__buf_puts(b, "],\n");
}

static void header_json(kk__buf *b, const kk_bench_comparison *c) {
    const kk_bench_compare_options *o = &c->options;
    kk__buf_puts(b, "{\n  ");
    jstr(b, "schema", KK_BENCH_COMPARE_SCHEMA, 1);
    kk__buf_puts(b, ",\n  \"base\": {");
    jstr(b, "label", c->base_label, 0);
    jstr(b, "about", c->base_about, 1);
    kk__buf_puts(b, "},\n  \"new\": {");
    jstr(b, "label", c->new_label, 0);
    jstr(b, "about", c->new_about, 1);
    kk__buf_puts(b, "},\n  \"options\": {");
    jnum(b, "threshold", o->threshold, 0);
    jnum(b, "alpha", o->alpha, 0);
    jnum(b, "confidence", o->confidence, 0);
    kk__buf_printf(b, "\"resamples\": %d, ",
                   o->resamples ? o->resamples : KK_STATS_DEFAULT_RESAMPLES);
    /* a string: JSON numbers are exact only up to 2^53 */
    kk__buf_printf(b, "\"seed\": \"%llu\"},\n  \"warnings\": [", (unsigned long long)o->seed);
    for (int i = 0; i < c->nwarnings; i++) {
        kk__buf_puts(b, i ? ", " : "");
        kk__buf_json_str(b, c->warnings[i]);
    }
    kk__buf_puts(b, "],\n");
}

static void summary_json(kk__buf *b, const kk_bench_comparison *c) {
    kk__buf_printf(b,
                   "  \"summary\": {\"compared\": %zu, \"slower\": %zu, \"faster\": %zu, "
                   "\"same\": %zu, \"ambiguous\": %zu, \"only_in_base\": %zu, "
                   "\"only_in_new\": %zu, \"pass\": %s}\n}\n",
                   c->nrows, c->count[KK_VERDICT_SLOWER], c->count[KK_VERDICT_FASTER],
                   c->count[KK_VERDICT_SAME], c->count[KK_VERDICT_AMBIGUOUS], c->n_only_base,
                   c->n_only_new, c->count[KK_VERDICT_SLOWER] ? "false" : "true");
}

kk_status kk_bench_comparison_json(const kk_bench_comparison *c, char **text) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (!st) st = KK__CHECK_NOT_NULL(text);
    if (st) return st;
    kk__buf b = {0};
    header_json(&b, c);
    kk__buf_puts(&b, "  \"benchmarks\": [\n");
    for (size_t i = 0; i < c->nrows; i++) row_json(&b, &c->rows[i], i + 1 == c->nrows);
    kk__buf_puts(&b, "  ],\n");
    names_json(&b, "only_in_base", c->only_base, c->n_only_base);
    names_json(&b, "only_in_new", c->only_new, c->n_only_new);
    summary_json(&b, c);
    return kk__buf_finish(&b, __func__, text);
}

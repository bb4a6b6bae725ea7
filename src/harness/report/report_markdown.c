/* The markdown report: an executive summary with one row per results
 * document (in the manner of the seeds' hardware report), then per document
 * its environment and one table per op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/report/report_internal.h"

#define DEFAULT_TITLE "KernelKit benchmark report"

kk_status kk__report_check(const char *func, const kk_bench_results *const *docs, size_t ndocs,
                           char **text) {
    if (!docs || !text)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, docs ? "text" : "docs",
                             "a non-NULL pointer", "NULL");
    if (ndocs == 0) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "ndocs", "at least 1", "0");
    for (size_t i = 0; i < ndocs; i++)
        if (!docs[i])
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "docs", "non-NULL documents",
                                 "docs[%zu] = NULL", i);
    return KK_OK;
}

/* "bf16 801 TFLOP/s, copy 4100 GB/s" from the ceilings that are known. */
static void ceilings_text(const kk_bench_results *r, char *buf, size_t size) {
    const kk_bench_ceilings *c = &r->ceilings;
    const struct {
        const char *name;
        double v;
        const char *unit;
    } k[] = {{"bf16", c->bf16_tflops, "TFLOP/s"},
             {"fp8", c->fp8_tflops, "TFLOP/s"},
             {"fp32", c->fp32_tflops, "TFLOP/s"},
             {"copy", c->copy_gbs, "GB/s"},
             {"read", c->read_gbs, "GB/s"}};
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; r->has_ceilings && i < sizeof k / sizeof k[0] && used < size; i++) {
        if (!(k[i].v > 0)) continue;
        char v[32];
        int n = snprintf(buf + used, size - used, "%s%s %s %s", used ? ", " : "", k[i].name,
                         kk__fmt_num(k[i].v, v, sizeof v), k[i].unit);
        if (n > 0) used += (size_t)n;
    }
    if (!buf[0]) snprintf(buf, size, "none (run kernelkit calibrate)");
}

static void summary_row(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                        const kk_bench_report_options *o) {
    const kk_bench_environment *e = &docs[d]->env;
    kk__doc_summary s;
    kk__report_summarize(docs, ndocs, d, &s);
    char cuda[16], tf[32], gb[32], sp[32], ceil[200];
    kk__buf_puts(b, "| ");
    kk__buf_md_code(b, kk__report_label(o, docs[d], d));
    kk__buf_puts(b, " | **");
    kk__buf_md_text(b, e->device_name[0] ? e->device_name : "unknown");
    kk__buf_puts(b, "** | ");
    kk__buf_md_text(b, e->device);
    kk__buf_puts(b, " | ");
    kk__buf_md_text(b, e->driver_version[0] ? e->driver_version : "-");
    kk__buf_printf(b, " | %s | %zu | %zu | ", kk__fmt_cuda(e->cuda_runtime_version, cuda, 16),
                   s.benchmarks, s.anchors);
    kk__buf_printf(b, "%s (%zu) | %s (%zu) | ", kk__fmt_num(s.geo_tflops, tf, sizeof tf),
                   s.n_tflops, kk__fmt_num(s.geo_gbs, gb, sizeof gb), s.n_gbs);
    if (s.n_speedup)
        kk__buf_printf(b, "%s\xc3\x97 (%zu) | ", kk__fmt_num(s.geo_speedup, sp, sizeof sp),
                       s.n_speedup);
    else
        kk__buf_puts(b, "- | ");
    ceilings_text(docs[d], ceil, sizeof ceil);
    kk__buf_md_text(b, ceil);
    kk__buf_puts(b, " |\n");
}

static void executive_summary(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs,
                              const kk_bench_report_options *o) {
    kk__buf_puts(b, "## Executive summary\n\n"
                    "| Results | Device | Backend | Driver | CUDA | Benchmarks | Anchors | "
                    "Geomean TFLOP/s (n) | Geomean GB/s (n) | Speedup vs anchors (n) | Ceilings |\n"
                    "|---|---|---|---|---|---:|---:|---:|---:|---:|---|\n");
    for (size_t d = 0; d < ndocs; d++) summary_row(b, docs, ndocs, d, o);
    kk__buf_puts(b, "\nGeometric means are over KernelKit's own benchmarks (anchors excluded). "
                    "Speedup vs anchors = anchor median / KernelKit median for the same op, dtype "
                    "and parameters on the same device (> 1: KernelKit is faster).\n\n");
}

static void environment(kk__buf *b, const kk_bench_results *r) {
    const kk_bench_environment *e = &r->env;
    char rt[16], dr[16], l2[32], ceil[200];
    snprintf(l2, sizeof l2, "%.1f MiB", (double)e->l2_bytes / 1048576.0);
    kk__buf_puts(b, "- device: ");
    kk__buf_md_text(b, e->device_name);
    kk__buf_printf(b,
                   ", compute capability %d.%d, %d SMs, L2 %s, max clocks SM %d MHz / memory "
                   "%d MHz\n- driver ",
                   e->cc_major, e->cc_minor, e->sm_count, l2, e->sm_clock_max_mhz,
                   e->mem_clock_max_mhz);
    kk__buf_md_text(b, e->driver_version[0] ? e->driver_version : "none");
    kk__buf_printf(b, ", CUDA runtime %s (driver supports %s), built with CUDA ",
                   kk__fmt_cuda(e->cuda_runtime_version, rt, sizeof rt),
                   kk__fmt_cuda(e->cuda_driver_version, dr, sizeof dr));
    kk__buf_md_text(b, e->build_cuda[0] ? e->build_cuda : "-");
    kk__buf_puts(b, "\n- host: ");
    kk__buf_md_text(b, e->hostname);
    kk__buf_puts(b, ", CPU ");
    kk__buf_md_text(b, e->cpu_model);
    kk__buf_puts(b, " (governor ");
    kk__buf_md_text(b, e->cpu_governor);
    if (e->cpu_isa[0]) {
        kk__buf_puts(b, "; CPU kernels ");
        kk__buf_md_text(b, e->cpu_isa);
    }
    kk__buf_puts(b, ")\n- kernelkit ");
    kk__buf_md_text(b, e->kk_version);
    kk__buf_puts(b, ", commit ");
    kk__buf_md_text(b, e->git_commit);
    kk__buf_puts(b, ", measured ");
    kk__buf_md_text(b, e->timestamp_utc);
    ceilings_text(r, ceil, sizeof ceil);
    kk__buf_puts(b, "\n- ceilings: ");
    kk__buf_md_text(b, ceil);
    kk__report_flush_text(r, ceil, sizeof ceil);
    kk__buf_puts(b, "\n- samples: ");
    kk__buf_md_text(b, ceil);
    kk__buf_puts(b, "\n\n");
}

/* "55% bf16, 3.1% read" */
static void shares(kk__buf *b, const kk_bench_entry *e) {
    char v[32];
    int any = 0;
    if (e->share_tflops >= 0) {
        kk__buf_printf(b, "%s%% ", kk__fmt_num(e->share_tflops * 100, v, sizeof v));
        kk__buf_md_text(b, strncmp(e->tflops_ceiling, "bf16", 4) == 0  ? "bf16"
                           : strncmp(e->tflops_ceiling, "fp8", 3) == 0 ? "fp8"
                                                                       : "fp32");
        any = 1;
    }
    if (e->share_read_gbs >= 0)
        kk__buf_printf(b, "%s%s%% read", any++ ? ", " : "",
                       kk__fmt_num(e->share_read_gbs * 100, v, sizeof v));
    else if (e->share_copy_gbs >= 0)
        kk__buf_printf(b, "%s%s%% copy", any++ ? ", " : "",
                       kk__fmt_num(e->share_copy_gbs * 100, v, sizeof v));
    if (!any) kk__buf_puts(b, "-");
}

static void anchors_cell(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                         const kk_bench_entry *e) {
    char impl[64], v[32];
    if (kk_bench_entry_anchor(e, impl, sizeof impl)) {
        kk__buf_puts(b, "anchor ");
        kk__buf_md_code(b, impl);
        return;
    }
    kk__anchor_match m[KK__REPORT_MAX_MATCHES];
    int n = kk__report_anchors(docs, ndocs, d, e, m, KK__REPORT_MAX_MATCHES);
    for (int i = 0; i < n; i++) {
        kk__buf_printf(b, "%s%s\xc3\x97 vs ", i ? ", " : "", kk__fmt_num(m[i].speedup, v, 32));
        kk__buf_md_code(b, m[i].impl);
        if (kk__flush_differs(e, m[i].anchor))
            kk__buf_printf(b, " (L2 flush %s vs %s)", kk_bench_flush_name(e->m.flush_mode),
                           kk_bench_flush_name(m[i].anchor->m.flush_mode));
    }
    if (!n) kk__buf_puts(b, "-");
}

static void entry_row(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                      const kk_bench_entry *e) {
    char params[1024], t[3][32];
    const kk_stats_summary *s = &e->summary;
    kk__fmt_params(e, params, sizeof params);
    kk__buf_puts(b, "| ");
    kk__buf_md_code(b, e->name);
    kk__buf_puts(b, " | ");
    kk__buf_md_code(b, params);
    kk__buf_puts(b, " | ");
    kk__buf_md_text(b, e->dtype[0] ? e->dtype : "-");
    kk__buf_printf(b, " | %s | %s \xe2\x80\x93 %s | ", kk__fmt_seconds(s->median, t[0], 32),
                   kk__fmt_seconds(s->median_ci_low, t[1], 32),
                   kk__fmt_seconds(s->median_ci_high, t[2], 32));
    kk__buf_printf(b, "%s | %s | ", e->tflops > 0 ? kk__fmt_num(e->tflops, t[0], 32) : "-",
                   e->gbs > 0 ? kk__fmt_num(e->gbs, t[1], 32) : "-");
    shares(b, e);
    kk__buf_puts(b, " | ");
    anchors_cell(b, docs, ndocs, d, e);
    kk__buf_printf(b, " | %zu |\n", s->n);
}

static void op_tables(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d) {
    const kk_bench_results *r = docs[d];
    const char **ops = r->count ? malloc(r->count * sizeof *ops) : NULL;
    if (r->count && !ops) {
        b->failed = 1;
        return;
    }
    size_t nops = kk__report_ops(r, ops, r->count);
    for (size_t k = 0; k < nops; k++) {
        kk__buf_puts(b, "### ");
        if (ops[k][0])
            kk__buf_md_code(b, ops[k]);
        else
            kk__buf_puts(b, "(no op)");
        kk__buf_puts(b, "\n\n| benchmark | params | dtype | median | 95% CI | TFLOP/s | GB/s | "
                        "share of ceilings | vs anchors | n |\n"
                        "|---|---|---|---:|---|---:|---:|---|---|---:|\n");
        for (size_t i = 0; i < r->count; i++)
            if (strcmp(r->entries[i].op, ops[k]) == 0) entry_row(b, docs, ndocs, d, &r->entries[i]);
        kk__buf_puts(b, "\n");
    }
    if (!nops) kk__buf_puts(b, "No benchmarks.\n\n");
    free(ops);
}

kk_status kk_bench_report_markdown(const kk_bench_results *const *docs, size_t ndocs,
                                   const kk_bench_report_options *opt, char **text) {
    kk_status st = kk__report_check(__func__, docs, ndocs, text);
    if (st) return st;
    kk__buf b = {0};
    kk__buf_puts(&b, "# ");
    kk__buf_md_text(&b, opt && opt->title ? opt->title : DEFAULT_TITLE);
    kk__buf_printf(&b, "\n\nFrom %zu results file%s.\n\n", ndocs, ndocs == 1 ? "" : "s");
    executive_summary(&b, docs, ndocs, opt);
    for (size_t d = 0; d < ndocs; d++) {
        kk__buf_puts(&b, "## ");
        kk__buf_md_code(&b, kk__report_label(opt, docs[d], d));
        kk__buf_puts(&b, ": ");
        kk__buf_md_text(&b, docs[d]->env.device_name);
        kk__buf_puts(&b, " (");
        kk__buf_md_text(&b, docs[d]->env.device);
        kk__buf_puts(&b, ")\n\n");
        environment(&b, docs[d]);
        op_tables(&b, docs, ndocs, d);
    }
    kk__buf_puts(&b, "Times are medians of the raw samples with percentile-bootstrap 95% "
                     "intervals; throughput is work per run divided by the median.\n");
    return kk__buf_finish(&b, __func__, text);
}

/* The HTML report: one self-contained page (inline style, inline SVG, no
 * script) with the markdown report's tables and the charts of
 * report_charts.c. Every string from a results file goes through
 * kk__buf_html; the tags written here are all closed, so the page is also
 * well-formed enough for a structural test to check tag balance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/report_internal.h"

static const char k_style[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d232a;"
    "margin:24px auto;max-width:1500px;padding:0 16px}\n"
    "h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:32px 0 8px;"
    "border-bottom:2px solid #d7dde3;padding-bottom:4px}h3{font-size:16px;margin:20px 0 6px}\n"
    "table{border-collapse:collapse;margin:8px 0 12px;font-size:13px}\n"
    "th,td{border:1px solid #d7dde3;padding:4px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#eef2f6}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-"
    "nums}\n"
    "tr.anchor td{color:#5b6670;background:#fafbfc}code{font-size:12px}\n"
    ".note{color:#5b6670;font-size:13px}ul.env{margin:4px 0 8px;padding-left:20px}\n"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}\n"
    "svg.chart{border:1px solid #d7dde3;background:#fff;max-width:100%;height:auto}\n"
    "svg .bg{fill:#fbfcfd;stroke:#9aa5b1}svg .grid{stroke:#e3e8ed;stroke-width:1}\n"
    "svg text{font:12px system-ui,sans-serif;fill:#1d232a}svg .ctitle{font-size:14px;"
    "font-weight:600}svg .tick{fill:#5b6670}svg .alabel{font-size:13px}\n"
    "svg .line{fill:none;stroke-width:2}svg .line.anchor{stroke-dasharray:6 4}\n"
    "svg .roof{stroke:#404b57;stroke-width:2}svg .roof.dashed{stroke-dasharray:5 4;"
    "stroke-width:1.5}\nsvg .rlabel{fill:#404b57;font-size:12px}svg .plabel{font-size:11px;"
    "fill:#404b57}svg .legend{font-size:12px}svg .note{fill:#5b6670;font-size:11px}\n"
    "svg .pt:hover{opacity:.7}\n";

static void text(kk__buf *b, const char *s) { kk__buf_html(b, s); }

static void cell(kk__buf *b, const char *s) {
    kk__buf_puts(b, "<td>");
    text(b, s);
    kk__buf_puts(b, "</td>");
}

static void num_cell(kk__buf *b, const char *s) {
    kk__buf_puts(b, "<td class=\"num\">");
    text(b, s);
    kk__buf_puts(b, "</td>");
}

static void ceilings_text(const kk_bench_results *r, char *buf, size_t size) {
    const kk_bench_ceilings *c = &r->ceilings;
    char v[5][32];
    if (!r->has_ceilings) {
        snprintf(buf, size, "none (run kernelkit calibrate)");
        return;
    }
    snprintf(buf, size, "bf16 %s, fp8 %s, fp32 %s TFLOP/s; copy %s, read %s GB/s",
             kk__fmt_num(c->bf16_tflops, v[0], 32), kk__fmt_num(c->fp8_tflops, v[1], 32),
             kk__fmt_num(c->fp32_tflops, v[2], 32), kk__fmt_num(c->copy_gbs, v[3], 32),
             kk__fmt_num(c->read_gbs, v[4], 32));
}

static void summary_row(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                        const kk_bench_report_options *o) {
    const kk_bench_environment *e = &docs[d]->env;
    kk__doc_summary s;
    kk__report_summarize(docs, ndocs, d, &s);
    char v[8][200];
    kk__buf_printf(b, "<tr><td><a href=\"#doc%zu\">", d);
    text(b, kk__report_label(o, docs[d], d));
    kk__buf_puts(b, "</a></td><td><b>");
    text(b, e->device_name[0] ? e->device_name : "unknown");
    kk__buf_puts(b, "</b></td>");
    cell(b, e->device);
    cell(b, e->driver_version[0] ? e->driver_version : "-");
    cell(b, kk__fmt_cuda(e->cuda_runtime_version, v[0], 32));
    snprintf(v[1], 32, "%zu", s.benchmarks);
    snprintf(v[2], 32, "%zu", s.anchors);
    num_cell(b, v[1]);
    num_cell(b, v[2]);
    snprintf(v[3], 64, "%s (%zu)", kk__fmt_num(s.geo_tflops, v[6], 32), s.n_tflops);
    snprintf(v[4], 64, "%s (%zu)", kk__fmt_num(s.geo_gbs, v[6], 32), s.n_gbs);
    if (s.n_speedup)
        snprintf(v[5], 64, "%s\xc3\x97 (%zu)", kk__fmt_num(s.geo_speedup, v[6], 32), s.n_speedup);
    else
        snprintf(v[5], 64, "-");
    num_cell(b, v[3]);
    num_cell(b, v[4]);
    num_cell(b, v[5]);
    ceilings_text(docs[d], v[7], sizeof v[7]);
    cell(b, v[7]);
    kk__buf_puts(b, "</tr>\n");
}

static void executive_summary(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs,
                              const kk_bench_report_options *o) {
    kk__buf_puts(b, "<section><h2>Executive summary</h2>\n<table class=\"summary\"><thead><tr>"
                    "<th>Results</th><th>Device</th><th>Backend</th><th>Driver</th><th>CUDA</th>"
                    "<th>Benchmarks</th><th>Anchors</th><th>Geomean TFLOP/s (n)</th>"
                    "<th>Geomean GB/s (n)</th><th>Speedup vs anchors (n)</th><th>Ceilings</th>"
                    "</tr></thead><tbody>\n");
    for (size_t d = 0; d < ndocs; d++) summary_row(b, docs, ndocs, d, o);
    kk__buf_puts(b, "</tbody></table>\n<p class=\"note\">Geometric means are over KernelKit's "
                    "own benchmarks (anchors excluded). Speedup vs anchors = anchor median / "
                    "KernelKit median for the same op, dtype and parameters on the same device "
                    "(&gt; 1: KernelKit is faster).</p></section>\n");
}

static void env_item(kk__buf *b, const char *label, const char *value) {
    kk__buf_printf(b, "<li>%s: ", label);
    text(b, value);
    kk__buf_puts(b, "</li>");
}

static void environment(kk__buf *b, const kk_bench_results *r) {
    const kk_bench_environment *e = &r->env;
    char v[4][600];
    kk__buf_puts(b, "<ul class=\"env\">");
    snprintf(v[0], 600,
             "%.255s, compute capability %d.%d, %d SMs, L2 %.1f MiB, max clocks SM %d "
             "MHz / memory %d MHz",
             e->device_name, e->cc_major, e->cc_minor, e->sm_count, (double)e->l2_bytes / 1048576.0,
             e->sm_clock_max_mhz, e->mem_clock_max_mhz);
    env_item(b, "device", v[0]);
    char rt[16], dr[16];
    snprintf(v[1], 600, "driver %.63s, CUDA runtime %s (driver supports %s), built with CUDA %.31s",
             e->driver_version[0] ? e->driver_version : "none",
             kk__fmt_cuda(e->cuda_runtime_version, rt, 16),
             kk__fmt_cuda(e->cuda_driver_version, dr, 16), e->build_cuda[0] ? e->build_cuda : "-");
    env_item(b, "software", v[1]);
    snprintf(v[2], 600, "%.200s, CPU %.255s (governor %.63s)", e->hostname, e->cpu_model,
             e->cpu_governor);
    env_item(b, "host", v[2]);
    snprintf(v[3], 600, "kernelkit %.31s, commit %.63s, measured %.31s", e->kk_version,
             e->git_commit, e->timestamp_utc);
    env_item(b, "run", v[3]);
    ceilings_text(r, v[0], 600);
    env_item(b, "ceilings", v[0]);
    kk__report_flush_text(r, v[1], 600);
    env_item(b, "samples", v[1]);
    kk__buf_puts(b, "</ul>\n");
}

static void shares(const kk_bench_entry *e, char *buf, size_t size) {
    char a[32], c[32];
    const char *which = strncmp(e->tflops_ceiling, "bf16", 4) == 0  ? "bf16"
                        : strncmp(e->tflops_ceiling, "fp8", 3) == 0 ? "fp8"
                                                                    : "fp32";
    double bw = e->share_read_gbs >= 0 ? e->share_read_gbs : e->share_copy_gbs;
    const char *bwname = e->share_read_gbs >= 0 ? "read" : "copy";
    if (e->share_tflops >= 0 && bw >= 0)
        snprintf(buf, size, "%s%% %s, %s%% %s", kk__fmt_num(e->share_tflops * 100, a, 32), which,
                 kk__fmt_num(bw * 100, c, 32), bwname);
    else if (e->share_tflops >= 0)
        snprintf(buf, size, "%s%% %s", kk__fmt_num(e->share_tflops * 100, a, 32), which);
    else if (bw >= 0)
        snprintf(buf, size, "%s%% %s", kk__fmt_num(bw * 100, c, 32), bwname);
    else
        snprintf(buf, size, "-");
}

static void anchors_cell(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                         const kk_bench_entry *e) {
    char impl[64], v[32];
    kk__buf_puts(b, "<td>");
    if (kk_bench_entry_anchor(e, impl, sizeof impl)) {
        kk__buf_puts(b, "anchor <code>");
        text(b, impl);
        kk__buf_puts(b, "</code></td>");
        return;
    }
    kk__anchor_match m[KK__REPORT_MAX_MATCHES];
    int n = kk__report_anchors(docs, ndocs, d, e, m, KK__REPORT_MAX_MATCHES);
    for (int i = 0; i < n; i++) {
        kk__buf_printf(b, "%s<b>%s\xc3\x97</b> vs <code>", i ? "<br/>" : "",
                       kk__fmt_num(m[i].speedup, v, 32));
        text(b, m[i].impl);
        kk__buf_puts(b, "</code>");
        if (kk__flush_differs(e, m[i].anchor))
            kk__buf_printf(b, " (L2 flush %s vs %s)", kk_bench_flush_name(e->m.flush_mode),
                           kk_bench_flush_name(m[i].anchor->m.flush_mode));
    }
    kk__buf_puts(b, n ? "</td>" : "-</td>");
}

static void entry_row(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                      const kk_bench_entry *e) {
    char params[1024], t[4][64];
    const kk_stats_summary *s = &e->summary;
    kk__fmt_params(e, params, sizeof params);
    kk__buf_printf(b, "<tr%s><td><code>",
                   kk_bench_entry_anchor(e, NULL, 0) ? " class=\"anchor\"" : "");
    text(b, e->name);
    kk__buf_puts(b, "</code></td><td><code>");
    text(b, params);
    kk__buf_puts(b, "</code></td>");
    cell(b, e->dtype[0] ? e->dtype : "-");
    num_cell(b, kk__fmt_seconds(s->median, t[0], 64));
    char lo[32], hi[32];
    snprintf(t[1], 64, "%s \xe2\x80\x93 %s", kk__fmt_seconds(s->median_ci_low, lo, 32),
             kk__fmt_seconds(s->median_ci_high, hi, 32));
    num_cell(b, t[1]);
    num_cell(b, e->tflops > 0 ? kk__fmt_num(e->tflops, t[2], 64) : "-");
    num_cell(b, e->gbs > 0 ? kk__fmt_num(e->gbs, t[3], 64) : "-");
    shares(e, t[0], 64);
    cell(b, t[0]);
    anchors_cell(b, docs, ndocs, d, e);
    snprintf(t[1], 64, "%zu", s->n);
    num_cell(b, t[1]);
    kk__buf_puts(b, "</tr>\n");
}

static void op_table(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                     const char *op) {
    const kk_bench_results *r = docs[d];
    kk__buf_puts(b, "<h3>");
    text(b, op[0] ? op : "(no op)");
    kk__buf_puts(b, "</h3>\n<table><thead><tr><th>benchmark</th><th>params</th><th>dtype</th>"
                    "<th>median</th><th>95% CI</th><th>TFLOP/s</th><th>GB/s</th>"
                    "<th>share of ceilings</th><th>vs anchors</th><th>n</th></tr></thead>"
                    "<tbody>\n");
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->entries[i].op, op) == 0) entry_row(b, docs, ndocs, d, &r->entries[i]);
    kk__buf_puts(b, "</tbody></table>\n");
}

static void document(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                     const kk_bench_report_options *o) {
    const kk_bench_results *r = docs[d];
    kk__buf_printf(b, "<section id=\"doc%zu\"><h2>", d);
    text(b, kk__report_label(o, r, d));
    kk__buf_puts(b, ": ");
    text(b, r->env.device_name);
    kk__buf_puts(b, " (");
    text(b, r->env.device);
    kk__buf_puts(b, ")</h2>\n");
    environment(b, r);
    const char **ops = r->count ? malloc(r->count * sizeof *ops) : NULL;
    if (r->count && !ops) {
        b->failed = 1;
        return;
    }
    size_t nops = kk__report_ops(r, ops, r->count);
    char id[64];
    kk__buf_puts(b, "<div class=\"charts\">\n");
    snprintf(id, sizeof id, "roof-%zu", d);
    kk__svg_roofline(b, docs, ndocs, d, id);
    for (size_t k = 0; k < nops; k++) {
        snprintf(id, sizeof id, "tp-%zu-%zu", d, k);
        kk__svg_throughput(b, docs, ndocs, d, ops[k], id);
    }
    kk__buf_puts(b, "</div>\n");
    for (size_t k = 0; k < nops; k++) op_table(b, docs, ndocs, d, ops[k]);
    if (!nops) kk__buf_puts(b, "<p>No benchmarks.</p>\n");
    kk__buf_puts(b, "</section>\n");
    free(ops);
}

kk_status kk_bench_report_html(const kk_bench_results *const *docs, size_t ndocs,
                               const kk_bench_report_options *opt, char **out) {
    kk_status st = kk__report_check(__func__, docs, ndocs, out);
    if (st) return st;
    const char *title = opt && opt->title ? opt->title : "KernelKit benchmark report";
    kk__buf b = {0};
    kk__buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
                     "<title>");
    text(&b, title);
    kk__buf_printf(&b, "</title>\n<style>\n%s</style></head>\n<body>\n<header><h1>", k_style);
    text(&b, title);
    kk__buf_printf(&b,
                   "</h1><p class=\"note\">From %zu results file%s. Hover a point for its "
                   "benchmark.</p></header>\n",
                   ndocs, ndocs == 1 ? "" : "s");
    executive_summary(&b, docs, ndocs, opt);
    for (size_t d = 0; d < ndocs; d++) document(&b, docs, ndocs, d, opt);
    kk__buf_puts(&b, "<footer><p class=\"note\">Times are medians of the raw samples with "
                     "percentile-bootstrap 95% intervals; throughput is work per run divided by "
                     "the median. Generated by kernelkit report.</p></footer>\n</body></html>\n");
    return kk__buf_finish(&b, __func__, out);
}

/* Internal: what compare*.c and report*.c share: a growing text buffer,
 * escaping for markdown and HTML, number formatting, and the report's model
 * (documents grouped with their anchors). Public API: kernelkit/compare.h and
 * kernelkit/report.h. */
#ifndef KK_HARNESS_REPORT_INTERNAL_H
#define KK_HARNESS_REPORT_INTERNAL_H

#include <stddef.h>

#include "kernelkit/bench.h"
#include "kernelkit/report.h"

#if defined(__GNUC__)
#define KK__BUF_PRINTF __attribute__((format(printf, 2, 3)))
#else
#define KK__BUF_PRINTF
#endif

/* ---- text buffer (report_text.c) ----
 * Appends never fail visibly: an allocation failure sets `failed`, later
 * appends do nothing, and kk__buf_finish reports KK_ERR_OUT_OF_MEMORY. This
 * keeps the generators free of an error check per line. */
typedef struct kk__buf {
    char *p;
    size_t len, cap;
    int failed;
} kk__buf;

void kk__buf_printf(kk__buf *b, const char *fmt, ...) KK__BUF_PRINTF;
void kk__buf_puts(kk__buf *b, const char *s);
/* `s` as a markdown code span that is safe in a table cell: | is escaped,
 * backticks become ', control characters a space. */
void kk__buf_md_code(kk__buf *b, const char *s);
/* `s` as markdown text: ASCII punctuation that markdown or HTML would
 * interpret is backslash-escaped; control characters become a space. */
void kk__buf_md_text(kk__buf *b, const char *s);
/* `s` escaped for HTML/SVG text and attribute values (& < > " '). */
void kk__buf_html(kk__buf *b, const char *s);
/* `s` as a JSON string literal, quotes included. */
void kk__buf_json_str(kk__buf *b, const char *s);
/* A double as JSON: shortest round-trip form; null for NaN or infinity. */
void kk__buf_json_num(kk__buf *b, double v);
/* Hand the text to the caller (*out, malloc'd) or free it and report. */
kk_status kk__buf_finish(kk__buf *b, const char *func, char **out);
void kk__buf_free(kk__buf *b);

/* "123.4 us"-style times with 4 significant digits; "-" when not > 0. */
const char *kk__fmt_seconds(double s, char *buf, size_t size);
/* A number with about 3-4 significant digits, no exponent for 1e-3..1e6. */
const char *kk__fmt_num(double v, char *buf, size_t size);
/* Parameters as "M=4096 N=4096 causal=true", without "implementation". */
void kk__fmt_params(const kk_bench_entry *e, char *buf, size_t size);

/* ---- the report's model (report_model.c) ---- */

/* 1 when both entries are cold and their L2 flush modes differ: a write
 * flush leaves the cache full of dirty lines whose write-back the sample
 * pays, a read flush does not, so their times are not like for like. */
int kk__flush_differs(const kk_bench_entry *a, const kk_bench_entry *b);
/* How a document's samples were taken: "8 cold (L2 flush: 6 write, 2 read),
 * 3 hot"; "no benchmarks" when empty. */
void kk__report_flush_text(const kk_bench_results *r, char *buf, size_t size);

/* A KernelKit entry and the anchor entries that measure the same thing. */
#define KK__REPORT_MAX_MATCHES 4
typedef struct kk__anchor_match {
    const kk_bench_entry *anchor;
    char impl[64];
    double speedup; /* anchor median / KernelKit median: > 1 means KernelKit is faster */
} kk__anchor_match;

/* Anchors for KernelKit entry `e` of document `d`: at most one per
 * implementation, from `d` itself first, then from the other documents
 * measured on a device of the same name; returns how many (at most `cap`).
 * An anchor flushed like `e` (kk__flush_differs) is preferred; one flushed
 * otherwise is still matched, and the formats say so next to it. */
int kk__report_anchors(const kk_bench_results *const *docs, size_t ndocs, size_t d,
                       const kk_bench_entry *e, kk__anchor_match *out, int cap);

typedef struct kk__doc_summary {
    size_t benchmarks, anchors;
    double geo_tflops; /* geometric mean over KernelKit entries with FLOPs; 0 = none */
    size_t n_tflops;
    double geo_gbs; /* ... with bytes */
    size_t n_gbs;
    double geo_speedup; /* over KernelKit entries with an anchor (first match); 0 = none */
    size_t n_speedup;
} kk__doc_summary;

void kk__report_summarize(const kk_bench_results *const *docs, size_t ndocs, size_t d,
                          kk__doc_summary *out);

/* Distinct ops of a document in first-seen order ("" included); returns count. */
size_t kk__report_ops(const kk_bench_results *r, const char **ops, size_t cap);

/* A short label for document d: the caller's label, else its device name. */
const char *kk__report_label(const kk_bench_report_options *o, const kk_bench_results *r, size_t d);

/* "13.0" from 13000; "-" for 0. */
const char *kk__fmt_cuda(int v, char *buf, size_t size);

/* Argument checks shared by the two report entry points. */
kk_status kk__report_check(const char *func, const kk_bench_results *const *docs, size_t ndocs,
                           char **text);

/* ---- SVG charts (report_svg.c: primitives; report_charts.c: the charts) ---- */

typedef struct kk__axis {
    double lo, hi; /* data range shown */
    int log;       /* 1: log10 scale, lo > 0 */
    double p0, p1; /* pixel of lo and of hi */
} kk__axis;

/* Decades around [min, max] (both > 0). */
void kk__axis_log(kk__axis *a, double min, double max, double p0, double p1);
/* 0 .. a round number >= max. */
void kk__axis_lin(kk__axis *a, double max, double p0, double p1);
double kk__axis_map(const kk__axis *a, double v);

/* Plot area of every chart, in pixels. */
#define KK__SVG_W 660
#define KK__SVG_H 420
#define KK__SVG_LEFT 72
#define KK__SVG_RIGHT 450 /* the legend is to the right of this */
#define KK__SVG_TOP 36
#define KK__SVG_BOTTOM 364

/* <svg>, title, grid, ticks, axis labels and a clip path "clip-<id>" for
 * the plot area; the caller draws inside and calls kk__svg_end. */
void kk__svg_begin(kk__buf *b, const char *id, const char *title, const char *xlabel,
                   const char *ylabel, const kk__axis *x, const kk__axis *y);
void kk__svg_end(kk__buf *b);

/* One plotted benchmark. */
typedef struct kk__point {
    double x, y;
    const kk_bench_entry *e;
    int series;
} kk__point;

#define KK__MAX_SERIES 16
/* Series are implementation + dtype ("kernelkit bf16", "torch_sdpa_flash bf16"). */
typedef struct kk__series {
    char key[96];
    int anchor;
    int used; /* has a point in this chart (the legend lists only these) */
} kk__series;

typedef struct kk__plot {
    kk__point *pts;
    size_t n, cap;
    kk__series series[KK__MAX_SERIES];
    int nseries;
    int failed;
} kk__plot;

/* The series of e, created if new; registering every entry of a document
 * first gives each series the same color in all of the document's charts. */
int kk__plot_series(kk__plot *p, const kk_bench_entry *e);
/* Add entry e at (x, y) to its series (x, y > 0 and finite, else skipped). */
void kk__plot_add(kk__plot *p, const kk_bench_entry *e, double x, double y);
void kk__plot_free(kk__plot *p);
/* Lines through each series' points in x order (with_lines: the throughput
 * chart, whose x already says which benchmark a point is), or else a text
 * label per point when there are few; markers with a <title> tooltip each;
 * the legend. */
void kk__plot_draw(kk__buf *b, kk__plot *p, const kk__axis *x, const kk__axis *y, const char *id,
                   int with_lines);
/* "1k", "10M", "0.01" for axis ticks. */
const char *kk__fmt_tick(double v, char *buf, size_t size);

/* ---- HTML charts (report_charts.c), used by report_html.c ---- */
int kk__svg_throughput(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                       const char *op, const char *id);
int kk__svg_roofline(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                     const char *id);

#endif

/* The report's two charts, as SVG:
 *   - throughput against work per run for one op (log x), one line per
 *     implementation and dtype, so a kernel's scaling and the anchors' show
 *     side by side;
 *   - a roofline per document: arithmetic intensity (FLOP/byte, log x)
 *     against TFLOP/s (log y), with the bandwidth slope and the compute flats
 *     drawn from the document's measured ceilings. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/report/report_internal.h"

/* Decades of TFLOP/s shown below the highest value at most, so one very slow
 * point does not squash the rest. */
#define ROOF_MAX_DECADES 6

typedef void (*add_fn)(kk__plot *p, const kk_bench_entry *e, int want_flops);

/* Entries of document d (with op `op`, or all when NULL), plus the anchors of
 * other documents measured on a device of the same name. */
static void collect(kk__plot *p, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                    const char *op, add_fn add, int arg) {
    for (size_t i = 0; i < docs[d]->count; i++) kk__plot_series(p, &docs[d]->entries[i]);
    for (size_t j = 0; j < ndocs; j++) {
        if (j != d && strcmp(docs[j]->env.device_name, docs[d]->env.device_name) != 0) continue;
        for (size_t i = 0; i < docs[j]->count; i++) {
            const kk_bench_entry *e = &docs[j]->entries[i];
            if (op && strcmp(e->op, op) != 0) continue;
            if (j != d && !kk_bench_entry_anchor(e, NULL, 0)) continue;
            add(p, e, arg);
        }
    }
}

static void add_throughput(kk__plot *p, const kk_bench_entry *e, int want_flops) {
    if (want_flops)
        kk__plot_add(p, e, e->flops, e->tflops);
    else
        kk__plot_add(p, e, e->bytes, e->gbs);
}

static void add_roofline(kk__plot *p, const kk_bench_entry *e, int unused) {
    (void)unused;
    if (e->bytes > 0) kk__plot_add(p, e, e->flops / e->bytes, e->tflops);
}

static void range(const kk__plot *p, double *xmin, double *xmax, double *ymin, double *ymax) {
    *xmin = *ymin = INFINITY;
    *xmax = *ymax = 0;
    for (size_t i = 0; i < p->n; i++) {
        *xmin = fmin(*xmin, p->pts[i].x);
        *xmax = fmax(*xmax, p->pts[i].x);
        *ymin = fmin(*ymin, p->pts[i].y);
        *ymax = fmax(*ymax, p->pts[i].y);
    }
}

int kk__svg_throughput(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                       const char *op, const char *id) {
    int flops = 0;
    for (size_t i = 0; i < docs[d]->count; i++)
        if (strcmp(docs[d]->entries[i].op, op) == 0 && docs[d]->entries[i].tflops > 0) flops = 1;
    kk__plot p = {0};
    collect(&p, docs, ndocs, d, op, add_throughput, flops);
    if (p.failed) b->failed = 1;
    if (p.n == 0 || p.failed) {
        kk__plot_free(&p);
        return 0;
    }
    double xmin, xmax, ymin, ymax;
    range(&p, &xmin, &xmax, &ymin, &ymax);
    kk__axis x, y;
    kk__axis_log(&x, xmin, xmax, KK__SVG_LEFT, KK__SVG_RIGHT);
    kk__axis_lin(&y, ymax * 1.05, KK__SVG_BOTTOM, KK__SVG_TOP);
    char title[160];
    snprintf(title, sizeof title, "%.60s: throughput against work per run", op[0] ? op : "(no op)");
    kk__svg_begin(b, id, title, flops ? "FLOP per run (log scale)" : "bytes per run (log scale)",
                  flops ? "TFLOP/s" : "GB/s", &x, &y);
    kk__plot_draw(b, &p, &x, &y, id, 1);
    kk__svg_end(b);
    kk__plot_free(&p);
    return 1;
}

typedef struct roofs {
    double bw, bw2; /* TFLOP/s per FLOP/byte: read (else copy) bandwidth; copy, dashed */
    const char *bw_name, *bw2_name;
    double peak[3];
    const char *peak_name[3];
} roofs;

static void get_roofs(const kk_bench_results *r, roofs *k) {
    memset(k, 0, sizeof *k);
    if (!r->has_ceilings) return;
    const kk_bench_ceilings *c = &r->ceilings;
    k->bw = (c->read_gbs > 0 ? c->read_gbs : c->copy_gbs) / 1000; /* GB/s -> TB/s */
    k->bw_name = c->read_gbs > 0 ? "read" : "copy";
    if (c->read_gbs > 0 && c->copy_gbs > 0 && c->copy_gbs != c->read_gbs) {
        k->bw2 = c->copy_gbs / 1000;
        k->bw2_name = "copy";
    }
    double peaks[3] = {c->fp8_tflops, c->bf16_tflops, c->fp32_tflops};
    const char *names[3] = {"fp8", "bf16", "fp32"};
    for (int i = 0; i < 3; i++) {
        k->peak[i] = peaks[i] > 0 ? peaks[i] : 0;
        k->peak_name[i] = names[i];
    }
}

/* Widen the data range so every roof's ridge point and flat are in view. */
static void roof_range(const roofs *k, double *xmin, double *xmax, double *ymin, double *ymax) {
    for (int i = 0; i < 3; i++) {
        if (!(k->peak[i] > 0)) continue;
        *ymax = fmax(*ymax, k->peak[i]);
        if (k->bw > 0) {
            *xmin = fmin(*xmin, k->peak[i] / k->bw / 10);
            *xmax = fmax(*xmax, k->peak[i] / k->bw * 10);
        }
    }
    *ymin = fmax(*ymin, *ymax / pow(10, ROOF_MAX_DECADES));
}

/* top: the TFLOP/s where the slope stops mattering (the highest flat roof) */
static void slope(kk__buf *b, const kk__axis *x, const kk__axis *y, double bw, const char *name,
                  double top, int dashed) {
    double x0 = x->lo, x1 = x->hi;
    kk__buf_printf(b, "<line class=\"roof%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                   dashed ? " dashed" : "", kk__axis_map(x, x0), kk__axis_map(y, bw * x0),
                   kk__axis_map(x, x1), kk__axis_map(y, bw * x1));
    /* the label sits beside the middle of the visible part of the slope,
     * turned to match it: above for the main slope, below for the dashed one */
    double enter = fmax(x0, y->lo / bw), leave = fmin(x1, fmin(top, y->hi) / bw);
    double lx = sqrt(enter * fmax(leave, enter)) / 2;
    double px = kk__axis_map(x, lx), py = kk__axis_map(y, bw * lx);
    double angle = atan2(kk__axis_map(y, bw * lx * 10) - py, kk__axis_map(x, lx * 10) - px);
    char v[32];
    kk__buf_printf(b,
                   "<text class=\"rlabel\" x=\"0\" y=\"%d\" transform=\"translate(%.1f %.1f) "
                   "rotate(%.1f)\">%s %s GB/s</text>\n",
                   dashed ? 14 : -6, px, py, angle * 180 / M_PI, name,
                   kk__fmt_num(bw * 1000, v, 32));
}

static void draw_roofs(kk__buf *b, const roofs *k, const kk__axis *x, const kk__axis *y,
                       const char *id) {
    kk__buf_printf(b, "<g clip-path=\"url(#clip-%s)\">\n", id);
    double top = fmax(k->peak[0], fmax(k->peak[1], k->peak[2]));
    if (!(top > 0)) top = y->hi;
    if (k->bw2 > 0) slope(b, x, y, k->bw2, k->bw2_name, top, 1);
    if (k->bw > 0) slope(b, x, y, k->bw, k->bw_name, top, 0);
    for (int i = 0; i < 3; i++) {
        double p = k->peak[i];
        if (!(p > 0)) continue;
        double ridge = k->bw > 0 ? fmin(fmax(p / k->bw, x->lo), x->hi) : x->lo;
        double py = kk__axis_map(y, p);
        kk__buf_printf(b,
                       "<line class=\"roof\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                       kk__axis_map(x, ridge), py, kk__axis_map(x, x->hi), py);
        char v[32];
        kk__buf_printf(b,
                       "<text class=\"rlabel\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s %s "
                       "TFLOP/s</text>\n",
                       KK__SVG_RIGHT - 4, py - 5, k->peak_name[i], kk__fmt_num(p, v, 32));
    }
    kk__buf_puts(b, "</g>\n");
}

int kk__svg_roofline(kk__buf *b, const kk_bench_results *const *docs, size_t ndocs, size_t d,
                     const char *id) {
    kk__plot p = {0};
    collect(&p, docs, ndocs, d, NULL, add_roofline, 0);
    if (p.failed) b->failed = 1;
    if (p.n == 0 || p.failed) {
        kk__plot_free(&p);
        return 0;
    }
    roofs k;
    get_roofs(docs[d], &k);
    double xmin, xmax, ymin, ymax;
    range(&p, &xmin, &xmax, &ymin, &ymax);
    roof_range(&k, &xmin, &xmax, &ymin, &ymax);
    kk__axis x, y;
    kk__axis_log(&x, xmin, xmax, KK__SVG_LEFT, KK__SVG_RIGHT);
    kk__axis_log(&y, ymin, ymax * 1.5, KK__SVG_BOTTOM, KK__SVG_TOP);
    char title[300];
    snprintf(title, sizeof title, "Roofline: %.200s", docs[d]->env.device_name);
    kk__svg_begin(b, id, title, "arithmetic intensity (FLOP per byte, log scale)",
                  "TFLOP/s (log scale)", &x, &y);
    draw_roofs(b, &k, &x, &y, id);
    if (!docs[d]->has_ceilings)
        kk__buf_printf(b,
                       "<text class=\"rlabel\" x=\"%d\" y=\"%d\">no ceilings in this results "
                       "file: run kernelkit calibrate</text>\n",
                       KK__SVG_LEFT + 8, KK__SVG_TOP + 16);
    kk__plot_draw(b, &p, &x, &y, id, 0);
    kk__svg_end(b);
    kk__plot_free(&p);
    return 1;
}

/* SVG drawing for the HTML report: axes (linear and log), the chart frame,
 * and a scatter/line plot with series, tooltips and a legend. Hand-written
 * SVG keeps the page self-contained: no script, no external resource. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/report_internal.h"

static const char *const k_colors[] = {"#1f6fb4", "#d62728", "#2ca02c", "#ff7f0e",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define NCOLORS (sizeof k_colors / sizeof k_colors[0])
/* Points get a text label only when there are this few: more would overlap. */
#define MAX_LABELLED 12

void kk__axis_log(kk__axis *a, double min, double max, double p0, double p1) {
    a->log = 1;
    /* a margin of 1.5x on each side, so no point sits on the frame */
    a->lo = pow(10, floor(log10(min / 1.5)));
    a->hi = pow(10, ceil(log10(max * 1.5)));
    if (!(a->hi > a->lo)) a->hi = a->lo * 10;
    a->p0 = p0;
    a->p1 = p1;
}

void kk__axis_lin(kk__axis *a, double max, double p0, double p1) {
    a->log = 0;
    a->lo = 0;
    if (!(max > 0) || !isfinite(max)) max = 1;
    /* a step of 1, 2 or 5 x 10^k giving about five intervals */
    double raw = max / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    a->hi = ceil(max / step - 1e-9) * step;
    a->p0 = p0;
    a->p1 = p1;
}

double kk__axis_map(const kk__axis *a, double v) {
    double t = a->log ? (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo))
                      : (v - a->lo) / (a->hi - a->lo);
    return a->p0 + t * (a->p1 - a->p0);
}

const char *kk__fmt_tick(double v, char *buf, size_t size) {
    static const struct {
        double scale;
        const char *suffix;
    } k[] = {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (fabs(v) >= k[i].scale) {
            snprintf(buf, size, "%g%s", v / k[i].scale, k[i].suffix);
            return buf;
        }
    snprintf(buf, size, "%g", v);
    return buf;
}

/* Tick values of an axis: decades (every other one when there are many), or
 * the linear steps. Returns how many (at most cap). */
static int ticks(const kk__axis *a, double *t, int cap) {
    int n = 0;
    if (a->log) {
        int d0 = (int)lround(log10(a->lo)), d1 = (int)lround(log10(a->hi));
        int step = d1 - d0 > 8 ? 2 : 1;
        for (int d = d0; d <= d1 && n < cap; d += step) t[n++] = pow(10, d);
        return n;
    }
    double step = (a->hi - a->lo) / 5;
    for (int i = 0; i <= 5 && n < cap; i++) t[n++] = a->lo + i * step;
    return n;
}

static void axis_ticks(kk__buf *b, const kk__axis *a, int vertical) {
    double t[32];
    char label[32];
    int n = ticks(a, t, 32);
    for (int i = 0; i < n; i++) {
        double p = kk__axis_map(a, t[i]);
        kk__fmt_tick(t[i], label, sizeof label);
        if (vertical)
            kk__buf_printf(
                b,
                "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                KK__SVG_LEFT, p, KK__SVG_RIGHT, p, KK__SVG_LEFT - 6, p + 4, label);
        else
            kk__buf_printf(
                b,
                "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                p, KK__SVG_TOP, p, KK__SVG_BOTTOM, p, KK__SVG_BOTTOM + 16, label);
    }
}

void kk__svg_begin(kk__buf *b, const char *id, const char *title, const char *xlabel,
                   const char *ylabel, const kk__axis *x, const kk__axis *y) {
    kk__buf_printf(b,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"%s\" "
                   "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">\n<title>",
                   id, KK__SVG_W, KK__SVG_H, KK__SVG_W, KK__SVG_H);
    kk__buf_html(b, title);
    kk__buf_printf(b,
                   "</title>\n<defs><clipPath id=\"clip-%s\"><rect x=\"%d\" y=\"%d\" width=\"%d\" "
                   "height=\"%d\"/></clipPath></defs>\n"
                   "<rect class=\"bg\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n"
                   "<text class=\"ctitle\" x=\"%d\" y=\"22\">",
                   id, KK__SVG_LEFT, KK__SVG_TOP, KK__SVG_RIGHT - KK__SVG_LEFT,
                   KK__SVG_BOTTOM - KK__SVG_TOP, KK__SVG_LEFT, KK__SVG_TOP,
                   KK__SVG_RIGHT - KK__SVG_LEFT, KK__SVG_BOTTOM - KK__SVG_TOP, KK__SVG_LEFT);
    kk__buf_html(b, title);
    kk__buf_puts(b, "</text>\n");
    axis_ticks(b, x, 0);
    axis_ticks(b, y, 1);
    kk__buf_printf(b, "<text class=\"alabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">",
                   (KK__SVG_LEFT + KK__SVG_RIGHT) / 2, KK__SVG_BOTTOM + 40);
    kk__buf_html(b, xlabel);
    kk__buf_printf(b,
                   "</text>\n<text class=\"alabel\" x=\"16\" y=\"%d\" text-anchor=\"middle\" "
                   "transform=\"rotate(-90 16 %d)\">",
                   (KK__SVG_TOP + KK__SVG_BOTTOM) / 2, (KK__SVG_TOP + KK__SVG_BOTTOM) / 2);
    kk__buf_html(b, ylabel);
    kk__buf_puts(b, "</text>\n");
}

void kk__svg_end(kk__buf *b) { kk__buf_puts(b, "</svg>\n"); }

int kk__plot_series(kk__plot *p, const kk_bench_entry *e) {
    char impl[64], key[96];
    int anchor = kk_bench_entry_anchor(e, impl, sizeof impl);
    snprintf(key, sizeof key, "%s%s%s", impl, e->dtype[0] ? " " : "", e->dtype);
    int s = 0;
    while (s < p->nseries && strcmp(p->series[s].key, key) != 0) s++;
    if (s == p->nseries && p->nseries < KK__MAX_SERIES) {
        snprintf(p->series[s].key, sizeof p->series[s].key, "%s", key);
        p->series[s].anchor = anchor;
        p->nseries++;
    }
    return s < KK__MAX_SERIES ? s : KK__MAX_SERIES - 1; /* too many: the last takes the rest */
}

void kk__plot_add(kk__plot *p, const kk_bench_entry *e, double x, double y) {
    if (!(x > 0 && y > 0 && isfinite(x) && isfinite(y)) || p->failed) return;
    int s = kk__plot_series(p, e);
    p->series[s].used = 1;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 32;
        kk__point *q = realloc(p->pts, cap * sizeof *q);
        if (!q) {
            p->failed = 1;
            return;
        }
        p->pts = q;
        p->cap = cap;
    }
    p->pts[p->n++] = (kk__point){x, y, e, s};
}

void kk__plot_free(kk__plot *p) {
    free(p->pts);
    memset(p, 0, sizeof *p);
}

static int by_series_then_x(const void *a, const void *b) {
    const kk__point *p = a, *q = b;
    if (p->series != q->series) return p->series < q->series ? -1 : 1;
    return (p->x > q->x) - (p->x < q->x);
}

static void lines(kk__buf *b, const kk__plot *p, const kk__axis *x, const kk__axis *y) {
    for (size_t i = 0; i < p->n;) {
        size_t j = i;
        while (j < p->n && p->pts[j].series == p->pts[i].series) j++;
        const kk__series *s = &p->series[p->pts[i].series];
        kk__buf_printf(b, "<polyline class=\"line%s\" stroke=\"%s\" points=\"",
                       s->anchor ? " anchor" : "", k_colors[p->pts[i].series % NCOLORS]);
        for (size_t k = i; k < j; k++)
            kk__buf_printf(b, "%s%.1f,%.1f", k > i ? " " : "", kk__axis_map(x, p->pts[k].x),
                           kk__axis_map(y, p->pts[k].y));
        kk__buf_puts(b, "\"/>\n");
        i = j;
    }
}

static void marker(kk__buf *b, const kk__plot *p, const kk__point *pt, double px, double py) {
    const char *color = k_colors[pt->series % NCOLORS];
    char median[32], v[32];
    if (p->series[pt->series].anchor)
        kk__buf_printf(b,
                       "<g class=\"pt\"><rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" "
                       "fill=\"%s\"/>",
                       px - 4, py - 4, color);
    else
        kk__buf_printf(b, "<g class=\"pt\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>",
                       px, py, color);
    kk__buf_puts(b, "<title>");
    kk__buf_html(b, pt->e->name);
    kk__buf_puts(b, " (");
    kk__buf_html(b, p->series[pt->series].key);
    kk__buf_printf(b, ")\nmedian %s", kk__fmt_seconds(pt->e->summary.median, median, 32));
    if (pt->e->tflops > 0) kk__buf_printf(b, ", %s TFLOP/s", kk__fmt_num(pt->e->tflops, v, 32));
    if (pt->e->gbs > 0) kk__buf_printf(b, ", %s GB/s", kk__fmt_num(pt->e->gbs, v, 32));
    kk__buf_puts(b, "</title></g>\n");
}

static void legend(kk__buf *b, const kk__plot *p) {
    int row = 0;
    for (int s = 0; s < p->nseries; s++) {
        if (!p->series[s].used) continue;
        int y = KK__SVG_TOP + 10 + 20 * row++;
        const char *color = k_colors[s % NCOLORS];
        if (p->series[s].anchor)
            kk__buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"8\" height=\"8\" fill=\"%s\"/>",
                           KK__SVG_RIGHT + 16, y - 4, color);
        else
            kk__buf_printf(b, "<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"%s\"/>",
                           KK__SVG_RIGHT + 20, y, color);
        kk__buf_printf(b, "<text class=\"legend\" x=\"%d\" y=\"%d\">", KK__SVG_RIGHT + 30, y + 4);
        kk__buf_html(b, p->series[s].key);
        kk__buf_puts(b, "</text>\n");
    }
    kk__buf_printf(b,
                   "<text class=\"legend note\" x=\"%d\" y=\"%d\">circle: KernelKit, "
                   "square: anchor</text>\n",
                   KK__SVG_RIGHT + 16, KK__SVG_TOP + 14 + 20 * row);
}

void kk__plot_draw(kk__buf *b, kk__plot *p, const kk__axis *x, const kk__axis *y, const char *id,
                   int with_lines) {
    qsort(p->pts, p->n, sizeof *p->pts, by_series_then_x);
    kk__buf_printf(b, "<g clip-path=\"url(#clip-%s)\">\n", id);
    if (with_lines) lines(b, p, x, y);
    for (size_t i = 0; i < p->n; i++) {
        const kk__point *pt = &p->pts[i];
        double px = kk__axis_map(x, pt->x), py = kk__axis_map(y, pt->y);
        marker(b, p, pt, px, py);
        if (with_lines || p->n > MAX_LABELLED) continue;
        char name[40];
        snprintf(name, sizeof name, "%.28s%s", pt->e->name, strlen(pt->e->name) > 28 ? "..." : "");
        int right = px > (KK__SVG_LEFT + KK__SVG_RIGHT) / 2; /* keep the text inside the plot */
        kk__buf_printf(b, "<text class=\"plabel\" x=\"%.1f\" y=\"%.1f\"%s>", px + (right ? -7 : 7),
                       py - 7, right ? " text-anchor=\"end\"" : "");
        kk__buf_html(b, name);
        kk__buf_puts(b, "</text>\n");
    }
    kk__buf_puts(b, "</g>\n");
    legend(b, p);
}

/* Text building for compare and report: a growing buffer, escaping for
 * markdown and HTML, and number formatting. Names, devices and parameters come
 * from results files, which anyone can write, so every one of them goes
 * through an escape before it lands in markdown or HTML. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/report/report_internal.h"

static int reserve(kk__buf *b, size_t more) {
    if (b->failed) return 0;
    if (b->len + more + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

static void put(kk__buf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void kk__buf_puts(kk__buf *b, const char *s) { put(b, s, strlen(s)); }

void kk__buf_printf(kk__buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static int is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

void kk__buf_md_code(kk__buf *b, const char *s) {
    put(b, "`", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '|')
            put(b, "\\|", 2); /* GFM splits cells on | even in code spans */
        else if (c == '`')
            put(b, "'", 1);
        else if (is_control(c))
            put(b, " ", 1);
        else
            put(b, s, 1);
    }
    put(b, "`", 1);
}

void kk__buf_md_text(kk__buf *b, const char *s) {
    /* CommonMark lets a backslash escape any ASCII punctuation; these are the
     * characters that would start emphasis, code, links, HTML, entities or cells */
    static const char special[] = "\\`*_[]<>|&#!";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (is_control(c)) {
            put(b, " ", 1);
            continue;
        }
        if (strchr(special, c)) put(b, "\\", 1);
        put(b, s, 1);
    }
}

void kk__buf_html(kk__buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': kk__buf_puts(b, "&amp;"); break;
        case '<': kk__buf_puts(b, "&lt;"); break;
        case '>': kk__buf_puts(b, "&gt;"); break;
        case '"': kk__buf_puts(b, "&quot;"); break;
        case '\'': kk__buf_puts(b, "&#39;"); break;
        default:
            /* control characters are not allowed in XML (SVG) text */
            put(b, is_control((unsigned char)*s) && *s != '\n' && *s != '\t' ? " " : s, 1);
        }
    }
}

void kk__buf_json_str(kk__buf *b, const char *s) {
    put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put(b, "\\", 1);
            put(b, s, 1);
        } else if (c < 0x20 || c == 0x7f) {
            kk__buf_printf(b, "\\u%04x", c);
        } else {
            put(b, s, 1);
        }
    }
    put(b, "\"", 1);
}

void kk__buf_json_num(kk__buf *b, double v) {
    if (!isfinite(v)) {
        kk__buf_puts(b, "null");
        return;
    }
    char buf[40];
    for (int p = 15; p <= 17; p++) { /* the shortest form that reads back exactly */
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    kk__buf_puts(b, buf);
}

kk_status kk__buf_finish(kk__buf *b, const char *func, char **out) {
    if (!b->failed && !b->p) reserve(b, 0);
    if (b->failed) {
        kk__buf_free(b);
        return kk__error(KK_ERR_OUT_OF_MEMORY, func, "cannot build the text");
    }
    *out = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return KK_OK;
}

void kk__buf_free(kk__buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

const char *kk__fmt_seconds(double s, char *buf, size_t size) {
    static const struct {
        double scale;
        const char *unit;
    } units[] = {{1, "s"}, {1e-3, "ms"}, {1e-6, "\xc2\xb5s"}, {1e-9, "ns"}};
    if (!(s > 0) || !isfinite(s)) {
        snprintf(buf, size, "-");
        return buf;
    }
    size_t u = 0;
    while (u + 1 < sizeof units / sizeof units[0] && s < units[u].scale * 0.99995) u++;
    /* '#' keeps trailing zeros, so a column of times lines up: 181.0 us */
    int n = snprintf(buf, size, "%#.4g", s / units[u].scale);
    if (n > 0 && (size_t)n < size && buf[n - 1] == '.') buf[--n] = 0;
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " %s", units[u].unit);
    return buf;
}

const char *kk__fmt_num(double v, char *buf, size_t size) {
    double a = fabs(v);
    if (!isfinite(v))
        snprintf(buf, size, "-");
    else if (a == 0)
        snprintf(buf, size, "0");
    else if (a >= 1e6 || a < 1e-3)
        snprintf(buf, size, "%.3g", v);
    else if (a >= 100)
        snprintf(buf, size, "%.0f", v);
    else if (a >= 10)
        snprintf(buf, size, "%.1f", v);
    else if (a >= 1)
        snprintf(buf, size, "%.2f", v);
    else
        snprintf(buf, size, "%.3g", v);
    return buf;
}

void kk__fmt_params(const kk_bench_entry *e, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < e->nparams && used < size; i++) {
        const kk_bench_param *p = &e->params[i];
        if (strcmp(p->name, KK_BENCH_IMPL_PARAM) == 0) continue;
        const char *sep = used ? " " : "";
        int n;
        if (p->kind == KK_BENCH_PARAM_NUMBER)
            n = snprintf(buf + used, size - used, "%s%s=%.10g", sep, p->name, p->number);
        else if (p->kind == KK_BENCH_PARAM_BOOL)
            n = snprintf(buf + used, size - used, "%s%s=%s", sep, p->name,
                         p->boolean ? "true" : "false");
        else
            n = snprintf(buf + used, size - used, "%s%s=%s", sep, p->name, p->string);
        if (n < 0) break;
        used += (size_t)n;
    }
}

const char *kk__fmt_cuda(int v, char *buf, size_t size) {
    if (v <= 0)
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

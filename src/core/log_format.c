/* Formatting one log record as one line, text or JSON. Whatever the input,
 * the result is exactly one line that fits the caller's buffer: control
 * characters are escaped, and output that does not fit is cut between
 * characters, closed, and marked truncated so the JSON stays parseable.
 * docs/logging.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/log.h"

#include "core/log_format.h"

/* Kept back while writing content so that a cut line can always be closed.
 * At most one closing quote goes into it (after that nothing else fits), then
 * ,"truncated":true} and the NUL: 20 bytes. */
enum { CLOSE_RESERVE = 24, MIN_CAP = 128 };

typedef struct writer {
    char *buf;
    size_t len;
    size_t limit; /* content stops here: cap - CLOSE_RESERVE */
    size_t cap;
    int truncated;
} writer;

/* All or nothing, so an escape sequence or a UTF-8 character is never split.
 * Once something did not fit, nothing more is written: the line stays a prefix
 * of what it would have been. */
static int put(writer *w, const char *s, size_t n) {
    /* len may already be past limit: a closing quote may sit in the reserve. */
    if (w->truncated || w->len + n > w->limit) {
        w->truncated = 1;
        return 0;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
    return 1;
}

static int put_str(writer *w, const char *s) { return put(w, s, strlen(s)); }

/* Closing quotes and the truncation marker may use the reserve. */
static void put_closing(writer *w, const char *s) {
    size_t n = strlen(s);
    if (n >= w->cap - w->len) return; /* cannot happen given CLOSE_RESERVE */
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void rollback(writer *w, size_t mark) {
    w->len = mark;
    w->buf[mark] = '\0';
}

/* ---- characters ---- */

/* Length of the valid UTF-8 sequence at s, or 0 when the bytes there are not
 * valid UTF-8 (stray continuation byte, overlong form, surrogate, above
 * U+10FFFF, or cut short by the NUL). Never reads past the NUL. */
static size_t utf8_seq_len(const unsigned char *s) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return n;
}

typedef enum escape_style {
    ESC_BARE,   /* unquoted text (logger, message): only control characters */
    ESC_QUOTED, /* inside text quotes: also " and \ */
    ESC_JSON    /* a JSON string */
} escape_style;

/* The two-character escape for c, or NULL. */
static const char *short_escape(unsigned char c, escape_style style) {
    switch (c) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '"': return style == ESC_BARE ? NULL : "\\\"";
    case '\\': return style == ESC_BARE ? NULL : "\\\\";
    case '\b': return style == ESC_JSON ? "\\b" : NULL;
    case '\f': return style == ESC_JSON ? "\\f" : NULL;
    default: return NULL;
    }
}

/* Writes the character at s, escaped; returns the bytes of s it consumed, or
 * 0 when it did not fit. Invalid UTF-8 becomes U+FFFD in JSON (which must be
 * valid UTF-8) and \xHH in text. */
static size_t put_char(writer *w, const unsigned char *s, escape_style style) {
    char tmp[8];
    const char *esc = short_escape(*s, style);
    if (esc) return put(w, esc, 2) ? 1 : 0;
    if (*s < 0x20 || *s == 0x7F) {
        snprintf(tmp, sizeof tmp, style == ESC_JSON ? "\\u%04x" : "\\x%02x", *s);
        return put_str(w, tmp) ? 1 : 0;
    }
    size_t n = utf8_seq_len(s);
    if (n == 0) {
        if (style == ESC_JSON)
            snprintf(tmp, sizeof tmp, "\\ufffd");
        else
            snprintf(tmp, sizeof tmp, "\\x%02x", *s);
        return put_str(w, tmp) ? 1 : 0;
    }
    return put(w, (const char *)s, n) ? n : 0;
}

static void put_escaped(writer *w, const char *s, escape_style style) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t used = put_char(w, p, style);
        if (!used) return;
        p += used;
    }
}

/* ---- numbers ---- */

/* printf's %g follows LC_NUMERIC, but a log line must not ("9,5" would break
 * JSON and any parser): map whatever the locale used as the decimal point,
 * possibly several bytes, back to '.'. */
static void fix_decimal_point(char *s) {
    char *out = s;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int keep = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   c == '-' || c == '+';
        if (keep)
            *out++ = c;
        else if (out == s || out[-1] != '.')
            *out++ = '.';
    }
    *out = '\0';
}

/* Text: %.6g, as people read it. */
static void format_double_text(char *out, size_t size, double d) {
    snprintf(out, size, "%.6g", d);
    fix_decimal_point(out);
}

/* JSON: the shortest of 15..17 significant digits that reads back as the same
 * double, so machines get the exact value and 0.1 still prints as 0.1. */
static void format_double_json(char *out, size_t size, double d) {
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(out, size, "%.*g", precision, d);
        fix_decimal_point(out);
        if (strtod(out, NULL) == d) return;
    }
}

/* ---- text ---- */

static const char *upper_level_name(kk_log_level level) {
    switch (level) {
    case KK_LOG_ERROR: return "ERROR";
    case KK_LOG_WARN: return "WARN";
    case KK_LOG_INFO: return "INFO";
    case KK_LOG_DEBUG: return "DEBUG";
    case KK_LOG_TRACE: return "TRACE";
    default: return "?";
    }
}

static int text_needs_quotes(const char *s) {
    if (!*s) return 1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == 0x7F || *p == '"' || *p == '=') return 1;
        if (*p >= 0x80) {
            size_t n = utf8_seq_len(p);
            if (n == 0) return 1; /* will be escaped as \xHH */
            p += n - 1;
        }
    }
    return 0;
}

static void text_string(writer *w, const char *s) {
    if (!s) {
        put_str(w, "(null)");
    } else if (!text_needs_quotes(s)) {
        put_str(w, s);
    } else if (put(w, "\"", 1)) {
        put_escaped(w, s, ESC_QUOTED);
        put_closing(w, "\"");
    }
}

/* Keys are identifiers in library code; anything that would make the line
 * ambiguous (space, '=', quotes) is replaced so that key=value stays parseable. */
static void text_key(writer *w, const char *key) {
    if (!key || !*key) key = "_";
    for (const char *p = key; *p; p++) {
        char c = *p;
        int ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) c = '_';
        if (!put(w, &c, 1)) return;
    }
}

/* Non-string values as text; the JSON spelling of a bool and an int is the same. */
static void scalar_text(char *out, size_t size, const kk_log_field *f, int json) {
    switch (f->type) {
    case KK_LOG_FIELD_INT: snprintf(out, size, "%lld", f->v.i); break;
    case KK_LOG_FIELD_UINT: snprintf(out, size, "%llu", f->v.u); break;
    case KK_LOG_FIELD_BOOL: snprintf(out, size, "%s", f->v.b ? "true" : "false"); break;
    case KK_LOG_FIELD_DOUBLE:
        if (!json) {
            format_double_text(out, size, f->v.d);
        } else if (isnan(f->v.d)) {
            snprintf(out, size, "\"nan\""); /* JSON has no NaN or infinity */
        } else if (isinf(f->v.d)) {
            snprintf(out, size, f->v.d > 0 ? "\"inf\"" : "\"-inf\"");
        } else {
            format_double_json(out, size, f->v.d);
        }
        break;
    default: snprintf(out, size, json ? "null" : "?"); break; /* unknown field type */
    }
}

/* A field is written whole or not at all, except that a long string value may
 * be cut (and is then closed). */
static void text_field(writer *w, const kk_log_field *f) {
    size_t mark = w->len;
    char num[40];
    put(w, " ", 1);
    text_key(w, f->key);
    put(w, "=", 1);
    if (w->truncated) {
        rollback(w, mark);
        return;
    }
    size_t value_mark = w->len;
    if (f->type == KK_LOG_FIELD_STR) {
        text_string(w, f->v.s);
    } else {
        scalar_text(num, sizeof num, f, 0);
        put_str(w, num);
    }
    if (w->len == value_mark) rollback(w, mark);
}

static void text_line(writer *w, const kk_log_record *r) {
    put_str(w, upper_level_name(r->level));
    if (r->logger && *r->logger) {
        put(w, " ", 1);
        put_escaped(w, r->logger, ESC_BARE);
    }
    put(w, ":", 1);
    if (r->message && *r->message) {
        put(w, " ", 1);
        put_escaped(w, r->message, ESC_BARE);
    }
    for (size_t i = 0; i < r->field_count; i++) text_field(w, &r->fields[i]);
    if (w->truncated) put_closing(w, " truncated=true");
}

/* ---- JSON ---- */

static void json_string(writer *w, const char *s) {
    if (!s) {
        put_str(w, "null");
    } else if (put(w, "\"", 1)) {
        put_escaped(w, s, ESC_JSON);
        put_closing(w, "\"");
    }
}

/* ,"key":value -- whole or not at all (a cut string value is closed and kept),
 * so the object stays valid wherever the line is cut. */
static void json_member(writer *w, const kk_log_field *f) {
    size_t mark = w->len;
    char num[40];
    put(w, ",", 1);
    json_string(w, f->key ? f->key : "");
    put(w, ":", 1);
    if (w->truncated) {
        rollback(w, mark);
        return;
    }
    size_t value_mark = w->len;
    if (f->type == KK_LOG_FIELD_STR) {
        json_string(w, f->v.s);
    } else {
        scalar_text(num, sizeof num, f, 1);
        put_str(w, num);
    }
    if (w->len == value_mark) rollback(w, mark);
}

static void json_line(writer *w, const kk_log_record *r) {
    char head[96];
    double whole = floor(r->unix_time);
    int ms = (int)((r->unix_time - whole) * 1000.0); /* 0..999: the fraction is < 1 */
    /* Built from integers so that the locale's decimal point cannot creep in. */
    snprintf(head, sizeof head, "{\"ts\":%.0f.%03d,\"level\":\"%s\"", whole, ms,
             kk_log_level_name(r->level));
    put_str(w, head);
    kk_log_field logger = {.key = "logger", .type = KK_LOG_FIELD_STR, .v.s = r->logger};
    kk_log_field msg = {.key = "msg", .type = KK_LOG_FIELD_STR, .v.s = r->message};
    json_member(w, &logger);
    json_member(w, &msg);
    for (size_t i = 0; i < r->field_count; i++) json_member(w, &r->fields[i]);
    if (w->truncated) put_closing(w, ",\"truncated\":true");
    put_closing(w, "}");
}

/* Formats `record` into buf (cap bytes, at least MIN_CAP; less gives ""),
 * without a newline. Returns the length of the line. */
size_t kk__log_format_line(const kk_log_record *record, kk_log_format format, char *buf,
                           size_t cap) {
    if (cap == 0) return 0;
    buf[0] = '\0';
    if (cap < MIN_CAP) return 0;
    writer w = {.buf = buf, .len = 0, .limit = cap - CLOSE_RESERVE, .cap = cap, .truncated = 0};
    if (format == KK_LOG_FORMAT_JSON)
        json_line(&w, record);
    else
        text_line(&w, record);
    return w.len;
}

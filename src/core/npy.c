/* NumPy .npy reading and writing: format versions 1.0, 2.0 and 3.0, C order.
 * The header dict is read by the small parser below, never by anything
 * eval-like, and everything read from a file is checked before it is used
 * (lengths against the file, the shape against KK_NPY_MAX_BYTES before any
 * allocation). docs/npy.md describes the conventions and the errors. */
#include "kernelkit/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define MAX_NESTING 32

/* ---- host byte order ---- */

static int host_is_little(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static uint64_t size_cap(void) {
    return (uint64_t)SIZE_MAX < KK_NPY_MAX_BYTES ? (uint64_t)SIZE_MAX : KK_NPY_MAX_BYTES;
}

/* ---- types ---- */

typedef struct npy_type {
    char kind;                    /* 'b' 'i' 'u' 'f' 'c' 'V', or 'n' for an ml_dtypes name */
    size_t itemsize;              /* bytes per numpy item */
    kk_dtype dtype;               /* or KK_NPY_DTYPE_NONE */
    char canon[KK_NPY_DESCR_MAX]; /* normalized descr of the data in host order */
} npy_type;

typedef struct ml_name {
    const char *name;
    size_t itemsize;
    kk_dtype dtype;
} ml_name;

/* ml_dtypes types by name. np.save never writes these (it writes '<V2', '<V1' or
 * '<f1'); KernelKit writes the first three, and numpy loads them back once
 * ml_dtypes is imported. The others are read as raw bytes. */
static const ml_name k_ml_names[] = {
    {"bfloat16", 2, KK_DTYPE_BF16},
    {"float8_e4m3fn", 1, KK_DTYPE_FP8_E4M3},
    {"float8_e5m2", 1, KK_DTYPE_FP8_E5M2},
    {"float4_e2m1fn", 1, KK_NPY_DTYPE_NONE}, /* one element per byte: not KernelKit's packed e2m1 */
    {"float8_e4m3fnuz", 1, KK_NPY_DTYPE_NONE},
    {"float8_e4m3b11fnuz", 1, KK_NPY_DTYPE_NONE},
    {"float8_e5m2fnuz", 1, KK_NPY_DTYPE_NONE},
    {"float8_e4m3", 1, KK_NPY_DTYPE_NONE},
    {"float8_e3m4", 1, KK_NPY_DTYPE_NONE},
    {"float8_e8m0fnu", 1, KK_NPY_DTYPE_NONE},
    {"float6_e2m3fn", 1, KK_NPY_DTYPE_NONE},
    {"float6_e3m2fn", 1, KK_NPY_DTYPE_NONE},
    {"int1", 1, KK_NPY_DTYPE_NONE},
    {"int2", 1, KK_NPY_DTYPE_NONE},
    {"int4", 1, KK_NPY_DTYPE_NONE},
    {"uint1", 1, KK_NPY_DTYPE_NONE},
    {"uint2", 1, KK_NPY_DTYPE_NONE},
    {"uint4", 1, KK_NPY_DTYPE_NONE},
};
#define N_ML_NAMES (sizeof k_ml_names / sizeof k_ml_names[0])

static void set_canon(npy_type *t) {
    if (t->kind == 'V')
        snprintf(t->canon, sizeof t->canon, "|V%zu", t->itemsize);
    else
        snprintf(t->canon, sizeof t->canon, "%c%c%zu",
                 t->itemsize == 1 ? '|' : (host_is_little() ? '<' : '>'), t->kind, t->itemsize);
}

static void set_ml(npy_type *t, const ml_name *m) {
    t->kind = 'n';
    t->itemsize = m->itemsize;
    t->dtype = m->dtype;
    snprintf(t->canon, sizeof t->canon, "%s", m->name);
}

/* Parse a descr string. *order gets '<', '>' or '=' (native). Returns 0, or -1
 * when the descr is not one KernelKit reads. */
static int parse_descr(const char *s, npy_type *t, char *order) {
    memset(t, 0, sizeof *t);
    t->dtype = KK_NPY_DTYPE_NONE;
    *order = '=';
    for (size_t k = 0; k < N_ML_NAMES; k++)
        if (!strcmp(s, k_ml_names[k].name)) {
            set_ml(t, &k_ml_names[k]);
            return 0;
        }
    const char *p = s;
    if (*p == '<' || *p == '>' || *p == '|' || *p == '=') {
        if (*p != '|') *order = *p;
        p++;
    }
    char kind = *p++;
    if (!kind || *p < '1' || *p > '9') return -1; /* a size, no leading zero */
    size_t size = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        size = size * 10 + (size_t)(*p - '0');
        if (size > 65536) return -1;
    }
    if (*p) return -1;
    t->kind = kind;
    t->itemsize = size;
    switch (kind) {
    case 'b':
        if (size != 1) return -1;
        break;
    case 'i':
    case 'u':
        if (size != 1 && size != 2 && size != 4 && size != 8) return -1;
        if (size == 1) t->dtype = kind == 'i' ? KK_DTYPE_INT8 : KK_DTYPE_UINT8;
        if (size == 4 && kind == 'i') t->dtype = KK_DTYPE_INT32;
        break;
    case 'f':
        if (size == 1) { /* ml_dtypes' float8_e5m2 is saved by np.save as '<f1' */
            set_ml(t, &k_ml_names[2]);
            return 0;
        }
        if (size != 2 && size != 4 && size != 8) return -1;
        t->dtype = size == 2 ? KK_DTYPE_F16 : size == 4 ? KK_DTYPE_F32 : KK_DTYPE_F64;
        break;
    case 'c':
        if (size != 8 && size != 16) return -1;
        break;
    case 'V': break; /* raw bytes, never swapped */
    default: return -1;
    }
    set_canon(t);
    return 0;
}

/* The type a kk_dtype is stored as. Returns -1 for an invalid dtype. */
static int type_for_dtype(kk_dtype d, npy_type *t) {
    memset(t, 0, sizeof *t);
    switch (d) {
    case KK_DTYPE_F64:
        t->kind = 'f';
        t->itemsize = 8;
        break;
    case KK_DTYPE_F32:
        t->kind = 'f';
        t->itemsize = 4;
        break;
    case KK_DTYPE_F16:
        t->kind = 'f';
        t->itemsize = 2;
        break;
    case KK_DTYPE_BF16: set_ml(t, &k_ml_names[0]); return 0;
    case KK_DTYPE_FP8_E4M3: set_ml(t, &k_ml_names[1]); return 0;
    case KK_DTYPE_FP8_E5M2: set_ml(t, &k_ml_names[2]); return 0;
    case KK_DTYPE_E2M1: /* packed: stored as uint8, two elements per byte */
    case KK_DTYPE_UINT8:
        t->kind = 'u';
        t->itemsize = 1;
        break;
    case KK_DTYPE_INT8:
        t->kind = 'i';
        t->itemsize = 1;
        break;
    case KK_DTYPE_INT32:
        t->kind = 'i';
        t->itemsize = 4;
        break;
    default: return -1;
    }
    t->dtype = d;
    set_canon(t);
    return 0;
}

const char *kk_npy_dtype_descr(kk_dtype dtype) {
    static const char *const k_descr[KK_DTYPE_COUNT] = {
        [KK_DTYPE_F64] = "<f8",
        [KK_DTYPE_F32] = "<f4",
        [KK_DTYPE_F16] = "<f2",
        [KK_DTYPE_BF16] = "bfloat16",
        [KK_DTYPE_FP8_E4M3] = "float8_e4m3fn",
        [KK_DTYPE_FP8_E5M2] = "float8_e5m2",
        [KK_DTYPE_E2M1] = "|u1",
        [KK_DTYPE_INT8] = "|i1",
        [KK_DTYPE_UINT8] = "|u1",
        [KK_DTYPE_INT32] = "<i4",
    };
    if ((int)dtype < 0 || dtype >= KK_DTYPE_COUNT) return NULL;
    return k_descr[dtype];
}

/* Element count and data bytes of a shape, with the caps. The shape is in
 * elements of t (logical e2m1 elements when `packed`). Returns 0, or -1 when
 * the array would exceed KK_NPY_MAX_BYTES. */
static int shape_size(const int64_t *shape, int ndim, size_t itemsize, int packed, size_t *count,
                      size_t *nbytes) {
    uint64_t cap = size_cap(), n = 1;
    int zero = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (uint64_t)shape[d] > KK_NPY_MAX_BYTES) return -1;
        if (shape[d] == 0) zero = 1;
    }
    if (zero)
        n = 0;
    else
        for (int d = 0; d < ndim; d++) {
            if (n > cap / (uint64_t)shape[d]) return -1;
            n *= (uint64_t)shape[d];
        }
    uint64_t bytes;
    if (packed) {
        bytes = n / 2;
    } else {
        if (itemsize && n > cap / itemsize) return -1;
        bytes = n * itemsize;
    }
    if (bytes > cap) return -1;
    *count = (size_t)n;
    *nbytes = (size_t)bytes;
    return 0;
}

static void format_shape(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && used < cap; d++)
        used +=
            (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, ndim == 1 ? ",)" : ")");
}

/* Bytes as text for a message: printable ASCII as is, the rest as \xNN. */
static const char *printable(const char *s, size_t n, char *buf, size_t cap) {
    size_t used = 0;
    for (size_t i = 0; i < n && used + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            buf[used++] = (char)ch;
        else
            used += (size_t)snprintf(buf + used, cap - used, "\\x%02x", ch);
    }
    buf[used] = 0;
    return buf;
}

/* ---- errors ---- */

typedef struct rctx {
    const char *function;
    const char *path; /* NULL for memory */
} rctx;

static kk_status fail(const rctx *c, kk_status st, const char *fmt, ...) KK__PRINTF(3, 4);
static kk_status fail(const rctx *c, kk_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->path)
        return kk__set_error(st, c->function, "path", c->path, NULL, NULL, "%.300s: %s", c->path,
                             msg);
    return kk__set_error(st, c->function, NULL, NULL, NULL, NULL, "%s", msg);
}

/* ---- the header parser ---- */

typedef struct hparser {
    const unsigned char *p;
    size_t n;
    size_t i;
    size_t base; /* file offset of p[0], for messages */
    const rctx *c;
    int depth;
} hparser;

typedef struct header_info {
    int have_descr, have_fortran, have_shape;
    int structured; /* descr was not a string */
    char descr[KK_NPY_DESCR_MAX];
    int descr_too_long;
    int fortran;
    int ndim; /* entries in shape, even beyond KK_NPY_MAX_DIMS */
    int64_t shape[KK_NPY_MAX_DIMS];
    int too_large; /* a dimension over KK_NPY_MAX_BYTES */
} header_info;

static kk_status malformed(hparser *h, size_t at, const char *fmt, ...) KK__PRINTF(3, 4);
static kk_status malformed(hparser *h, size_t at, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(h->c, KK_ERR_IO, "malformed .npy header: %s at byte %zu", msg, h->base + at);
}

static int is_ws(unsigned char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; }
static int is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }
static int is_ident(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || is_digit(ch);
}

static void skip_ws(hparser *h) {
    while (h->i < h->n && is_ws(h->p[h->i])) h->i++;
}

static int peek(const hparser *h) { return h->i < h->n ? h->p[h->i] : -1; }

static const char *describe_char(int ch, char *buf, size_t cap) {
    if (ch < 0) return "the end of the header";
    if (ch >= 0x20 && ch < 0x7f)
        snprintf(buf, cap, "'%c'", ch);
    else
        snprintf(buf, cap, "byte 0x%02x", ch);
    return buf;
}

/* A quoted string; the text (up to cap-1 bytes) goes to out when out is set. */
static kk_status parse_string(hparser *h, char *out, size_t cap, int *too_long) {
    size_t start = h->i, len = 0;
    unsigned char q = h->p[h->i++];
    if (too_long) *too_long = 0;
    for (;;) {
        if (h->i >= h->n || h->p[h->i] == '\n') return malformed(h, start, "unterminated string");
        unsigned char ch = h->p[h->i++];
        if (ch == q) break;
        if (ch == '\\') {
            if (h->i >= h->n || h->p[h->i] == '\n')
                return malformed(h, start, "unterminated string");
            ch = h->p[h->i++];
        }
        if (out) {
            if (len + 1 < cap)
                out[len++] = (char)ch;
            else if (too_long)
                *too_long = 1;
        }
    }
    if (out) out[len] = 0;
    return KK_OK;
}

/* A Python int literal: [+-]digits[L]. *value saturates at INT64_MAX (with
 * *overflow set). Leaves h->i after it. */
static kk_status parse_int(hparser *h, int64_t *value, int *negative, int *overflow) {
    size_t start = h->i;
    *negative = 0;
    *overflow = 0;
    if (peek(h) == '+' || peek(h) == '-') {
        *negative = peek(h) == '-';
        h->i++;
    }
    size_t digits = h->i;
    uint64_t v = 0;
    while (h->i < h->n && is_digit(h->p[h->i])) {
        unsigned d = (unsigned)(h->p[h->i++] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            *overflow = 1;
        else
            v = v * 10 + d;
    }
    if (h->i == digits) return malformed(h, start, "expected an integer");
    if (h->p[digits] == '0' && h->i - digits > 1)
        return malformed(h, start, "integer with a leading zero");
    if (h->i < h->n && (h->p[h->i] == 'L' || h->p[h->i] == 'l')) h->i++; /* Python 2 long */
    if (h->i < h->n && (is_ident(h->p[h->i]) || h->p[h->i] == '.'))
        return malformed(h, start, "not an integer");
    *value = *overflow ? INT64_MAX : (int64_t)v;
    return KK_OK;
}

static size_t ident_len(const hparser *h) {
    size_t k = h->i;
    while (k < h->n && is_ident(h->p[k])) k++;
    return k - h->i;
}

static int match_word(hparser *h, const char *word) {
    size_t len = strlen(word);
    if (ident_len(h) == len && !memcmp(h->p + h->i, word, len)) {
        h->i += len;
        return 1;
    }
    return 0;
}

/* Skip any value of the literal subset (used for structured descrs). */
static kk_status skip_value(hparser *h) {
    char tmp[16];
    skip_ws(h);
    int ch = peek(h);
    if (ch == '\'' || ch == '"') return parse_string(h, NULL, 0, NULL);
    if (ch == '+' || ch == '-' || (ch >= 0 && is_digit((unsigned char)ch))) {
        int64_t v;
        int neg, ovf;
        return parse_int(h, &v, &neg, &ovf);
    }
    if (match_word(h, "True") || match_word(h, "False") || match_word(h, "None")) return KK_OK;
    if (ch != '(' && ch != '[' && ch != '{')
        return malformed(h, h->i, "unexpected %s", describe_char(ch, tmp, sizeof tmp));
    if (++h->depth > MAX_NESTING) return malformed(h, h->i, "values nested too deeply");
    int close = ch == '(' ? ')' : ch == '[' ? ']' : '}';
    h->i++;
    for (;;) {
        skip_ws(h);
        if (peek(h) == close) break;
        kk_status st = skip_value(h);
        if (st) return st;
        if (close == '}') {
            skip_ws(h);
            if (peek(h) != ':')
                return malformed(h, h->i, "expected ':', found %s",
                                 describe_char(peek(h), tmp, sizeof tmp));
            h->i++;
            if ((st = skip_value(h))) return st;
        }
        skip_ws(h);
        if (peek(h) == ',') {
            h->i++;
            continue;
        }
        if (peek(h) != close)
            return malformed(h, h->i, "expected ',' or '%c', found %s", close,
                             describe_char(peek(h), tmp, sizeof tmp));
    }
    h->i++;
    h->depth--;
    return KK_OK;
}

static kk_status parse_shape(hparser *h, header_info *info) {
    char tmp[16];
    int ch = peek(h);
    if (ch != '(')
        return malformed(h, h->i, "'shape' must be a tuple of integers, found %s",
                         ch == '[' ? "a list" : describe_char(ch, tmp, sizeof tmp));
    h->i++;
    skip_ws(h);
    info->ndim = 0;
    if (peek(h) == ')') {
        h->i++;
        return KK_OK;
    }
    for (;;) {
        size_t at = h->i;
        ch = peek(h);
        if (!(ch == '+' || ch == '-' || (ch >= 0 && is_digit((unsigned char)ch))))
            return malformed(h, at, "non-integer entry in 'shape': %s",
                             describe_char(ch, tmp, sizeof tmp));
        int64_t v;
        int neg, ovf;
        kk_status st = parse_int(h, &v, &neg, &ovf);
        if (st) return st;
        if (neg && (v != 0 || ovf)) return malformed(h, at, "negative dimension in 'shape'");
        if (ovf || (uint64_t)v > KK_NPY_MAX_BYTES) info->too_large = 1;
        if (info->ndim < KK_NPY_MAX_DIMS) info->shape[info->ndim] = v;
        if (info->ndim < 1000000) info->ndim++;
        skip_ws(h);
        if (peek(h) == ',') {
            h->i++;
            skip_ws(h);
            if (peek(h) == ')') break;
            continue;
        }
        if (peek(h) == ')') {
            if (info->ndim == 1)
                return malformed(h, h->i,
                                 "'shape' is (N) which is not a tuple (a 1-d shape is (N,))");
            break;
        }
        return malformed(h, h->i, "expected ',' or ')' in 'shape', found %s",
                         describe_char(peek(h), tmp, sizeof tmp));
    }
    h->i++;
    return KK_OK;
}

static kk_status parse_header(hparser *h, header_info *info) {
    char tmp[16], key[32], pkey[64];
    memset(info, 0, sizeof *info);
    const void *nul = memchr(h->p, 0, h->n);
    if (nul) return malformed(h, (size_t)((const unsigned char *)nul - h->p), "NUL byte");
    skip_ws(h);
    if (peek(h) != '{')
        return malformed(h, h->i, "expected '{', found %s",
                         describe_char(peek(h), tmp, sizeof tmp));
    h->i++;
    for (;;) {
        skip_ws(h);
        int ch = peek(h);
        if (ch == '}') break;
        if (ch != '\'' && ch != '"')
            return malformed(h, h->i, "expected a quoted key or '}', found %s",
                             describe_char(ch, tmp, sizeof tmp));
        size_t key_at = h->i;
        int key_long = 0;
        kk_status st = parse_string(h, key, sizeof key, &key_long);
        if (st) return st;
        skip_ws(h);
        if (peek(h) != ':')
            return malformed(h, h->i, "expected ':' after a key, found %s",
                             describe_char(peek(h), tmp, sizeof tmp));
        h->i++;
        skip_ws(h);
        int *seen = NULL;
        if (!key_long && !strcmp(key, "descr"))
            seen = &info->have_descr;
        else if (!key_long && !strcmp(key, "fortran_order"))
            seen = &info->have_fortran;
        else if (!key_long && !strcmp(key, "shape"))
            seen = &info->have_shape;
        else
            return malformed(h, key_at,
                             "unexpected key '%s' (the keys are 'descr', 'fortran_order' and "
                             "'shape')",
                             printable(key, strlen(key), pkey, sizeof pkey));
        if (*seen) return malformed(h, key_at, "duplicate key '%s'", key);
        *seen = 1;
        size_t value_at = h->i;
        if (seen == &info->have_descr) {
            ch = peek(h);
            if (ch == '\'' || ch == '"') {
                st = parse_string(h, info->descr, sizeof info->descr, &info->descr_too_long);
            } else if (ch == '[' || ch == '(' || ch == '{') {
                info->structured = 1;
                st = skip_value(h);
            } else {
                return malformed(h, value_at, "'descr' must be a string");
            }
        } else if (seen == &info->have_fortran) {
            if (match_word(h, "True"))
                info->fortran = 1;
            else if (match_word(h, "False"))
                info->fortran = 0;
            else
                return malformed(h, value_at, "'fortran_order' must be True or False");
        } else {
            st = parse_shape(h, info);
        }
        if (st) return st;
        skip_ws(h);
        if (peek(h) == ',') {
            h->i++;
            continue;
        }
        if (peek(h) != '}')
            return malformed(h, h->i, "expected ',' or '}', found %s",
                             describe_char(peek(h), tmp, sizeof tmp));
    }
    size_t close_at = h->i++;
    const char *missing = !info->have_descr     ? "descr"
                          : !info->have_fortran ? "fortran_order"
                          : !info->have_shape   ? "shape"
                                                : NULL;
    if (missing) return malformed(h, close_at, "missing key '%s'", missing);
    for (size_t k = h->i; k < h->n; k++)
        if (!is_ws(h->p[k]))
            return malformed(h, k,
                             "unexpected %s after the dict (only spaces and a '\\n' may follow)",
                             describe_char(h->p[k], tmp, sizeof tmp));
    if (h->n == 0 || h->p[h->n - 1] != '\n')
        return malformed(h, h->n ? h->n - 1 : 0, "the header does not end with '\\n'");
    return KK_OK;
}

/* ---- byte order ---- */

static void swap_bytes(unsigned char *p, size_t n_units, size_t unit) {
    for (size_t k = 0; k < n_units; k++, p += unit)
        for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Bytes per unit to swap for a type (0: never swapped). */
static size_t swap_unit(const npy_type *t) {
    if (t->kind == 'i' || t->kind == 'u' || t->kind == 'f')
        return t->itemsize > 1 ? t->itemsize : 0;
    if (t->kind == 'c') return t->itemsize / 2;
    if (t->kind == 'n' && t->itemsize > 1) return t->itemsize; /* bfloat16: a 16-bit value */
    return 0;
}

/* ---- reading ---- */

typedef struct source {
    const unsigned char *mem; /* memory source, else fp */
    size_t len;
    FILE *fp;
    int sized; /* total size known (memory, regular file) */
    uint64_t size;
    uint64_t pos;
    int read_error; /* errno of a failed read */
} source;

static size_t src_read(source *s, void *dst, size_t n) {
    if (s->mem) {
        size_t left = s->len - (size_t)s->pos, k = n < left ? n : left;
        if (k) memcpy(dst, s->mem + s->pos, k);
        s->pos += k;
        return k;
    }
    size_t got = 0;
    while (got < n) {
        size_t k = fread((unsigned char *)dst + got, 1, n - got, s->fp);
        got += k;
        if (k == 0) {
            if (ferror(s->fp)) s->read_error = errno ? errno : EIO;
            break;
        }
    }
    s->pos += got;
    return got;
}

static uint64_t src_left(const source *s) { return s->size > s->pos ? s->size - s->pos : 0; }

static kk_status read_error(const rctx *c, const source *s) {
    char buf[128];
    return fail(c, KK_ERR_IO, "read failed at byte %llu: %s", (unsigned long long)s->pos,
                strerror_r(s->read_error, buf, sizeof buf));
}

static kk_status not_npy(const rctx *c, const unsigned char *b, size_t n) {
    char hex[64];
    size_t used = 0;
    for (size_t k = 0; k < n && k < 8; k++)
        used += (size_t)snprintf(hex + used, sizeof hex - used, "%s%02x", k ? " " : "", b[k]);
    hex[used] = 0;
    if (n >= 2 && b[0] == 'P' && b[1] == 'K')
        return fail(c, KK_ERR_IO,
                    "not a .npy file: it starts with 'PK' (a zip archive: a .npz holds "
                    ".npy files; extract them first)");
    return fail(c, KK_ERR_IO, "not a .npy file: missing the \\x93NUMPY magic (first bytes: %s)",
                hex);
}

static kk_status read_npy(source *s, const rctx *c, kk_npy_array *out) {
    unsigned char pre[12];
    size_t n = src_read(s, pre, 8);
    if (s->read_error) return read_error(c, s);
    if (n == 0) return fail(c, KK_ERR_IO, "empty file: not a .npy file");
    if (n < NPY_MAGIC_LEN) {
        if (memcmp(pre, NPY_MAGIC, n)) return not_npy(c, pre, n);
        return fail(c, KK_ERR_IO, "truncated: %zu bytes, the file ends inside the .npy magic", n);
    }
    if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN)) return not_npy(c, pre, n);
    if (n < 8)
        return fail(c, KK_ERR_IO, "truncated: the file ends inside the format version (byte 6)");
    unsigned major = pre[6], minor = pre[7];
    if (minor != 0 || major < 1 || major > 3)
        return fail(c, KK_ERR_UNSUPPORTED,
                    "format version %u.%u is not supported (KernelKit reads 1.0, 2.0 and 3.0)",
                    major, minor);
    size_t lenbytes = major == 1 ? 2 : 4;
    n = src_read(s, pre + 8, lenbytes);
    if (s->read_error) return read_error(c, s);
    if (n < lenbytes)
        return fail(c, KK_ERR_IO, "truncated: the file ends inside the header length (byte 8)");
    uint64_t hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
    if (lenbytes == 4) hlen |= (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
    size_t hoff = 8 + lenbytes;
    if (s->sized && hlen > src_left(s))
        return fail(c, KK_ERR_IO,
                    "truncated: the header length says %llu bytes from byte %zu, the file has "
                    "%llu",
                    (unsigned long long)hlen, hoff, (unsigned long long)src_left(s));
    if (hlen > KK_NPY_MAX_HEADER_BYTES)
        return fail(c, KK_ERR_UNSUPPORTED, "header of %llu bytes is over the limit of %zu bytes",
                    (unsigned long long)hlen, (size_t)KK_NPY_MAX_HEADER_BYTES);

    /* the header: in place for memory, read for files */
    unsigned char *hbuf = NULL;
    const unsigned char *hdr;
    if (s->mem) {
        hdr = s->mem + s->pos;
        s->pos += hlen;
    } else {
        hbuf = malloc(hlen ? (size_t)hlen : 1);
        if (!hbuf) return fail(c, KK_ERR_OUT_OF_MEMORY, "cannot allocate the header");
        n = src_read(s, hbuf, (size_t)hlen);
        if (s->read_error || n < hlen) {
            free(hbuf);
            if (s->read_error) return read_error(c, s);
            return fail(c, KK_ERR_IO,
                        "truncated: the header length says %llu bytes from byte %zu, the file "
                        "has %zu",
                        (unsigned long long)hlen, hoff, n);
        }
        hdr = hbuf;
    }
    header_info info;
    hparser h = {hdr, (size_t)hlen, 0, hoff, c, 0};
    kk_status st = parse_header(&h, &info);
    free(hbuf);
    if (st) return st;

    /* what the header says */
    char shp[256], pd[KK_NPY_DESCR_MAX * 4 + 8];
    if (info.structured)
        return fail(c, KK_ERR_UNSUPPORTED,
                    "structured dtypes (a 'descr' list of fields) are not supported; save each "
                    "field as its own array");
    npy_type t;
    char order;
    printable(info.descr, strlen(info.descr), pd, sizeof pd);
    if (info.descr_too_long || parse_descr(info.descr, &t, &order)) {
        const char *why = "";
        char k0 = info.descr[0] == '<' || info.descr[0] == '>' || info.descr[0] == '|' ||
                          info.descr[0] == '='
                      ? info.descr[1]
                      : info.descr[0];
        if (k0 == 'O')
            why = ": object arrays hold pickled Python objects";
        else if (k0 == 'U' || k0 == 'S' || k0 == 'a')
            why = ": string arrays are not numeric";
        else if (k0 == 'M' || k0 == 'm')
            why = ": datetimes are not numeric";
        return fail(c, KK_ERR_UNSUPPORTED,
                    "unsupported dtype '%s'%s (KernelKit reads bool, int8..int64, uint8..uint64, "
                    "float16/32/64, complex64/128, raw void 'V<n>' and the ml_dtypes names)",
                    pd, why);
    }
    if (info.ndim > KK_NPY_MAX_DIMS)
        return fail(c, KK_ERR_UNSUPPORTED, "%d dimensions: at most %d are supported", info.ndim,
                    KK_NPY_MAX_DIMS);
    format_shape(info.shape, info.ndim, shp, sizeof shp);
    size_t count, nbytes;
    if (info.too_large || shape_size(info.shape, info.ndim, t.itemsize, 0, &count, &nbytes))
        return fail(c, KK_ERR_UNSUPPORTED,
                    "array too large: shape %s of '%s' is over the limit of 2^48 bytes", shp, pd);
    if (info.fortran) {
        int big = 0;
        for (int d = 0; d < info.ndim; d++) big += info.shape[d] != 1;
        if (count != 0 && big > 1)
            return fail(c, KK_ERR_UNSUPPORTED,
                        "Fortran-order arrays are not supported (shape %s, fortran_order True); "
                        "save a C-order copy: np.save(path, np.ascontiguousarray(a))",
                        shp);
        /* one axis longer than 1 (or none): the same bytes in either order */
    }
    if (s->sized) {
        uint64_t left = src_left(s);
        if (left < nbytes)
            return fail(c, KK_ERR_IO, "truncated: header says %zu bytes of data, file has %llu",
                        nbytes, (unsigned long long)left);
        if (left > nbytes)
            return fail(c, KK_ERR_IO,
                        "trailing data: header says %zu bytes of data, file has %llu (extra "
                        "bytes after the array are not allowed)",
                        nbytes, (unsigned long long)left);
    }

    void *data = malloc(nbytes ? nbytes : 1);
    if (!data)
        return fail(c, KK_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for shape %s of '%s'",
                    nbytes, shp, pd);
    n = src_read(s, data, nbytes);
    if (s->read_error || n < nbytes) {
        free(data);
        if (s->read_error) return read_error(c, s);
        return fail(c, KK_ERR_IO, "truncated: header says %zu bytes of data, file has %zu", nbytes,
                    n);
    }
    if (!s->sized) {
        unsigned char extra;
        if (src_read(s, &extra, 1) || s->read_error) {
            free(data);
            if (s->read_error) return read_error(c, s);
            return fail(c, KK_ERR_IO,
                        "trailing data: header says %zu bytes of data, file has more (extra "
                        "bytes after the array are not allowed)",
                        nbytes);
        }
    }
    size_t unit = swap_unit(&t);
    int little = host_is_little();
    if (unit && ((order == '<' && !little) || (order == '>' && little)))
        swap_bytes(data, nbytes / unit, unit);

    memset(out, 0, sizeof *out);
    snprintf(out->descr, sizeof out->descr, "%s", t.canon);
    out->dtype = t.dtype;
    out->itemsize = t.itemsize;
    out->ndim = info.ndim;
    memcpy(out->shape, info.shape, sizeof info.shape);
    out->count = count;
    out->nbytes = nbytes;
    out->data = data;
    return KK_OK;
}

kk_status kk_npy_read_memory(const void *buf, size_t len, kk_npy_array *out) {
    kk_status st;
    if ((st = KK__CHECK_NOT_NULL(buf)) || (st = KK__CHECK_NOT_NULL(out))) return st;
    rctx c = {"kk_npy_read_memory", NULL};
    source s = {.mem = buf, .len = len, .sized = 1, .size = len};
    kk_npy_array tmp;
    if ((st = read_npy(&s, &c, &tmp))) return st;
    *out = tmp;
    return KK_OK;
}

static kk_status read_file(const char *function, const char *path, kk_npy_array *out) {
    rctx c = {function, path};
    char buf[128];
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail(&c, KK_ERR_IO, "cannot open: %s", strerror_r(errno, buf, sizeof buf));
    struct stat sb;
    source s = {.fp = fp};
    if (fstat(fileno(fp), &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            fclose(fp);
            return fail(&c, KK_ERR_IO, "cannot read: is a directory");
        }
        if (S_ISREG(sb.st_mode)) {
            s.sized = 1;
            s.size = (uint64_t)sb.st_size;
        }
    }
    kk_npy_array tmp;
    kk_status st = read_npy(&s, &c, &tmp);
    fclose(fp);
    if (st) return st;
    *out = tmp;
    return KK_OK;
}

kk_status kk_npy_read_file(const char *path, kk_npy_array *out) {
    kk_status st;
    if ((st = KK__CHECK_NOT_NULL(path)) || (st = KK__CHECK_NOT_NULL(out))) return st;
    return read_file(__func__, path, out);
}

/* ---- reinterpretation ---- */

static const char *dtype_label(kk_dtype d) {
    static const char *const k_names[KK_DTYPE_COUNT] = {
        [KK_DTYPE_F64] = "f64",           [KK_DTYPE_F32] = "f32",
        [KK_DTYPE_F16] = "f16",           [KK_DTYPE_BF16] = "bf16",
        [KK_DTYPE_FP8_E4M3] = "fp8_e4m3", [KK_DTYPE_FP8_E5M2] = "fp8_e5m2",
        [KK_DTYPE_E2M1] = "e2m1",         [KK_DTYPE_INT8] = "int8",
        [KK_DTYPE_UINT8] = "uint8",       [KK_DTYPE_INT32] = "int32",
    };
    return (int)d >= 0 && d < KK_DTYPE_COUNT ? k_names[d] : "?";
}

static kk_status reinterpret(const char *function, kk_npy_array *arr, kk_dtype dtype) {
    npy_type want;
    if (type_for_dtype(dtype, &want))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "dtype", "a kk_dtype", "%d",
                             (int)dtype);
    if (arr->dtype == dtype) return KK_OK;
    size_t dlen = strnlen(arr->descr, sizeof arr->descr);
    if (dlen == sizeof arr->descr)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->descr",
                             "a NUL-terminated string", "(unterminated)");
    char pd[KK_NPY_DESCR_MAX * 4 + 8];
    printable(arr->descr, dlen, pd, sizeof pd);
    npy_type have;
    char order;
    /* Raw bits: void or integers. Packed e2m1 is stored as integers only: a '|V1'
     * comes from np.save of a one-byte ml_dtypes type, one element per byte. */
    int raw =
        !parse_descr(arr->descr, &have, &order) &&
        (have.kind == 'i' || have.kind == 'u' || (have.kind == 'V' && dtype != KK_DTYPE_E2M1));
    if (!raw || have.itemsize != want.itemsize || arr->itemsize != want.itemsize) {
        if (dtype == KK_DTYPE_E2M1)
            return kk__set_error(KK_ERR_INVALID_ARGUMENT, function, "dtype", "", "", NULL,
                                 "'%s' data cannot be taken as packed e2m1: that needs uint8 "
                                 "('|u1') bytes holding two elements each, low nibble first",
                                 pd);
        return kk__set_error(KK_ERR_INVALID_ARGUMENT, function, "dtype", "", "", NULL,
                             "'%s' data cannot be taken as %s: that needs raw %zu-byte items "
                             "(void, signed or unsigned integers); to convert values use "
                             "kk_convert_host",
                             pd, dtype_label(dtype), want.itemsize);
    }
    int64_t shape[KK_NPY_MAX_DIMS];
    memcpy(shape, arr->shape, sizeof shape);
    size_t count = arr->count;
    if (dtype == KK_DTYPE_E2M1) {
        if (arr->ndim < 1)
            return kk__set_error(KK_ERR_INVALID_ARGUMENT, function, "dtype", "", "", NULL,
                                 "a 0-d array cannot be taken as packed e2m1: it needs a last "
                                 "dimension (two elements per byte)");
        size_t nb;
        if (shape[arr->ndim - 1] < 0 || (uint64_t)shape[arr->ndim - 1] > KK_NPY_MAX_BYTES)
            return kk__set_error(KK_ERR_INVALID_ARGUMENT, function, "dtype", "", "", NULL,
                                 "the array is too large to be taken as packed e2m1");
        shape[arr->ndim - 1] *= 2;
        if (shape_size(shape, arr->ndim, 1, 1, &count, &nb) || nb != arr->nbytes)
            return kk__set_error(KK_ERR_INVALID_ARGUMENT, function, "dtype", "", "", NULL,
                                 "the array is too large to be taken as packed e2m1");
    }
    snprintf(arr->descr, sizeof arr->descr, "%s", want.canon);
    arr->dtype = dtype;
    memcpy(arr->shape, shape, sizeof shape);
    arr->count = count;
    return KK_OK;
}

kk_status kk_npy_reinterpret(kk_npy_array *arr, kk_dtype dtype) {
    kk_status st = KK__CHECK_NOT_NULL(arr);
    if (st) return st;
    if (arr->ndim < 0 || arr->ndim > KK_NPY_MAX_DIMS)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "arr->ndim", "0..8", "%d",
                             arr->ndim);
    return reinterpret(__func__, arr, dtype);
}

static kk_status finish_as(const char *function, kk_npy_array *tmp, kk_dtype dtype,
                           kk_npy_array *out) {
    kk_status st = reinterpret(function, tmp, dtype);
    if (st) {
        kk_npy_free(tmp);
        return st;
    }
    *out = *tmp;
    return KK_OK;
}

kk_status kk_npy_read_file_as(const char *path, kk_dtype dtype, kk_npy_array *out) {
    kk_status st;
    npy_type t;
    if ((st = KK__CHECK_NOT_NULL(path)) || (st = KK__CHECK_NOT_NULL(out))) return st;
    if (type_for_dtype(dtype, &t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dtype", "a kk_dtype", "%d",
                             (int)dtype);
    kk_npy_array tmp;
    if ((st = read_file(__func__, path, &tmp))) return st;
    return finish_as(__func__, &tmp, dtype, out);
}

kk_status kk_npy_read_memory_as(const void *buf, size_t len, kk_dtype dtype, kk_npy_array *out) {
    kk_status st;
    npy_type t;
    if ((st = KK__CHECK_NOT_NULL(buf)) || (st = KK__CHECK_NOT_NULL(out))) return st;
    if (type_for_dtype(dtype, &t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dtype", "a kk_dtype", "%d",
                             (int)dtype);
    rctx c = {__func__, NULL};
    source s = {.mem = buf, .len = len, .sized = 1, .size = len};
    kk_npy_array tmp;
    if ((st = read_npy(&s, &c, &tmp))) return st;
    return finish_as(__func__, &tmp, dtype, out);
}

/* ---- creating and freeing ---- */

static kk_status check_shape_arg(const char *function, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > KK_NPY_MAX_DIMS)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "ndim", "0..8", "%d", ndim);
    if (ndim > 0 && !shape)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "shape",
                             "a non-NULL pointer when ndim > 0", "NULL");
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0) {
            char name[32]; /* "shape[" + an int + "]" always fits */
            snprintf(name, sizeof name, "shape[%d]", d);
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, name, "at least 0", "%lld",
                                 (long long)shape[d]);
        }
    return KK_OK;
}

static kk_status init_array(const char *function, kk_npy_array *arr, const npy_type *t, int ndim,
                            const int64_t *shape) {
    int packed = t->dtype == KK_DTYPE_E2M1;
    int64_t dims[KK_NPY_MAX_DIMS] = {0};
    if (ndim) memcpy(dims, shape, (size_t)ndim * sizeof *dims);
    if (packed && (ndim < 1 || dims[ndim - 1] % 2))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "shape",
                             "a last dimension that is even (e2m1 packs two elements per byte)",
                             "%lld", ndim ? (long long)dims[ndim - 1] : 0LL);
    size_t count, nbytes;
    if (shape_size(dims, ndim, t->itemsize, packed, &count, &nbytes)) {
        char shp[256];
        format_shape(dims, ndim, shp, sizeof shp);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "shape",
                             "at most 2^48 bytes of data", "%s", shp);
    }
    void *data = calloc(nbytes ? nbytes : 1, 1);
    if (!data)
        return kk__error(KK_ERR_OUT_OF_MEMORY, function, "cannot allocate %zu bytes", nbytes);
    memset(arr, 0, sizeof *arr);
    snprintf(arr->descr, sizeof arr->descr, "%s", t->canon);
    arr->dtype = t->dtype;
    arr->itemsize = t->itemsize;
    arr->ndim = ndim;
    memcpy(arr->shape, dims, sizeof dims);
    arr->count = count;
    arr->nbytes = nbytes;
    arr->data = data;
    return KK_OK;
}

kk_status kk_npy_array_init(kk_npy_array *arr, kk_dtype dtype, int ndim, const int64_t *shape) {
    kk_status st;
    npy_type t;
    if ((st = KK__CHECK_NOT_NULL(arr))) return st;
    if (type_for_dtype(dtype, &t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dtype", "a kk_dtype", "%d",
                             (int)dtype);
    if ((st = check_shape_arg(__func__, ndim, shape))) return st;
    return init_array(__func__, arr, &t, ndim, shape);
}

kk_status kk_npy_array_init_descr(kk_npy_array *arr, const char *descr, int ndim,
                                  const int64_t *shape) {
    kk_status st;
    npy_type t;
    char order, pd[KK_NPY_DESCR_MAX * 4 + 8];
    if ((st = KK__CHECK_NOT_NULL(arr)) || (st = KK__CHECK_NOT_NULL(descr))) return st;
    if (strlen(descr) >= KK_NPY_DESCR_MAX || parse_descr(descr, &t, &order))
        return kk__set_error(KK_ERR_UNSUPPORTED, __func__, "descr",
                             printable(descr, strnlen(descr, KK_NPY_DESCR_MAX), pd, sizeof pd),
                             "a numpy numeric descr or an ml_dtypes name", NULL, NULL);
    if ((st = check_shape_arg(__func__, ndim, shape))) return st;
    return init_array(__func__, arr, &t, ndim, shape);
}

void kk_npy_free(kk_npy_array *arr) {
    if (!arr) return;
    free(arr->data);
    memset(arr, 0, sizeof *arr);
    arr->dtype = KK_NPY_DTYPE_NONE;
}

/* ---- writing ---- */

typedef struct write_plan {
    char header[640]; /* magic, version, length, dict, padding, '\n' */
    size_t header_len;
    npy_type t;
    size_t nbytes;
} write_plan;

static kk_status plan_write(const char *function, const kk_npy_array *arr, write_plan *w) {
    char pd[KK_NPY_DESCR_MAX * 4 + 8], shp[256];
    if (arr->ndim < 0 || arr->ndim > KK_NPY_MAX_DIMS)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->ndim", "0..8", "%d",
                             arr->ndim);
    size_t dlen = strnlen(arr->descr, sizeof arr->descr);
    if (dlen == sizeof arr->descr)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->descr",
                             "a NUL-terminated string", "(unterminated)");
    printable(arr->descr, dlen, pd, sizeof pd);
    npy_type given;
    char order;
    if (dlen && parse_descr(arr->descr, &given, &order))
        return kk__arg_error(KK_ERR_UNSUPPORTED, function, "arr->descr",
                             "a numpy numeric descr or an ml_dtypes name", "'%s'", pd);
    if (arr->dtype != KK_NPY_DTYPE_NONE) {
        if (type_for_dtype(arr->dtype, &w->t))
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->dtype",
                                 "a kk_dtype or KK_NPY_DTYPE_NONE", "%d", (int)arr->dtype);
        if (dlen && (given.kind != w->t.kind || given.itemsize != w->t.itemsize ||
                     (given.kind == 'n' && strcmp(given.canon, w->t.canon))))
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->descr",
                                 "empty or the descr of arr->dtype", "'%s' (dtype wants '%s')", pd,
                                 kk_npy_dtype_descr(arr->dtype));
    } else {
        if (!dlen)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->descr",
                                 "a descr when arr->dtype is KK_NPY_DTYPE_NONE", "''");
        w->t = given;
    }
    if (arr->itemsize != w->t.itemsize)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->itemsize", "the descr's",
                             "%zu ('%s' has %zu)", arr->itemsize, w->t.canon, w->t.itemsize);
    for (int d = 0; d < arr->ndim; d++)
        if (arr->shape[d] < 0) {
            char name[24];
            snprintf(name, sizeof name, "arr->shape[%d]", d);
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, name, "at least 0", "%lld",
                                 (long long)arr->shape[d]);
        }
    int packed = w->t.dtype == KK_DTYPE_E2M1;
    int64_t fshape[KK_NPY_MAX_DIMS] = {0};
    if (arr->ndim) memcpy(fshape, arr->shape, (size_t)arr->ndim * sizeof *fshape);
    format_shape(fshape, arr->ndim, shp, sizeof shp);
    if (packed) {
        if (arr->ndim < 1 || fshape[arr->ndim - 1] % 2)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->shape",
                                 "an even last dimension for packed e2m1", "%s", shp);
    }
    size_t count, nbytes;
    if (shape_size(fshape, arr->ndim, w->t.itemsize, packed, &count, &nbytes))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->shape",
                             "at most 2^48 bytes of data", "%s", shp);
    if (arr->count != count)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->count",
                             "the product of the shape", "%zu (shape %s has %zu)", arr->count, shp,
                             count);
    if (arr->nbytes != nbytes)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->nbytes",
                             "the data size of the shape", "%zu (shape %s of '%s' is %zu bytes)",
                             arr->nbytes, shp, w->t.canon, nbytes);
    if (nbytes && !arr->data)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "arr->data", "a non-NULL pointer",
                             "NULL");
    w->nbytes = nbytes;
    if (packed) fshape[arr->ndim - 1] /= 2;

    /* The dict exactly as numpy writes it, then padding as numpy computes it. */
    char descr[KK_NPY_DESCR_MAX];
    snprintf(descr, sizeof descr, "%s", w->t.canon);
    if (descr[0] == '>') descr[0] = '<'; /* written little-endian */
    format_shape(fshape, arr->ndim, shp, sizeof shp);
    char dict[512];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shp);
    if (dl < 0 || (size_t)dl >= sizeof dict)
        return kk__error(KK_ERR_INTERNAL, function, "header too long");
    size_t hlen = (size_t)dl + 1, prefix = 10;
    size_t pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    if (hlen + pad > 65535) { /* never with 8 dimensions; version 2.0 if it were */
        prefix = 12;
        pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    }
    size_t total = hlen + pad; /* the header length field */
    unsigned char *o = (unsigned char *)w->header;
    memcpy(o, NPY_MAGIC, NPY_MAGIC_LEN);
    o[6] = prefix == 10 ? 1 : 2;
    o[7] = 0;
    o[8] = (unsigned char)(total & 0xff);
    o[9] = (unsigned char)(total >> 8 & 0xff);
    if (prefix == 12) {
        o[10] = (unsigned char)(total >> 16 & 0xff);
        o[11] = (unsigned char)(total >> 24 & 0xff);
    }
    memcpy(o + prefix, dict, (size_t)dl);
    memset(o + prefix + dl, ' ', pad);
    o[prefix + total - 1] = '\n';
    w->header_len = prefix + total;
    return KK_OK;
}

/* Copy n bytes of data to dst in little-endian order. */
static void copy_le(unsigned char *dst, const unsigned char *src, size_t n, const npy_type *t) {
    memcpy(dst, src, n);
    size_t unit = swap_unit(t);
    if (unit && !host_is_little()) swap_bytes(dst, n / unit, unit);
}

kk_status kk_npy_write_memory(const kk_npy_array *arr, void **buf, size_t *len) {
    kk_status st;
    if ((st = KK__CHECK_NOT_NULL(arr)) || (st = KK__CHECK_NOT_NULL(buf)) ||
        (st = KK__CHECK_NOT_NULL(len)))
        return st;
    write_plan w;
    if ((st = plan_write(__func__, arr, &w))) return st;
    if (w.nbytes > SIZE_MAX - w.header_len)
        return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "%zu bytes do not fit in memory",
                         w.nbytes);
    unsigned char *out = malloc(w.header_len + w.nbytes);
    if (!out)
        return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "cannot allocate %zu bytes",
                         w.header_len + w.nbytes);
    memcpy(out, w.header, w.header_len);
    if (w.nbytes) copy_le(out + w.header_len, arr->data, w.nbytes, &w.t);
    *buf = out;
    *len = w.header_len + w.nbytes;
    return KK_OK;
}

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

kk_status kk_npy_write_file(const char *path, const kk_npy_array *arr) {
    kk_status st;
    if ((st = KK__CHECK_NOT_NULL(path)) || (st = KK__CHECK_NOT_NULL(arr))) return st;
    rctx c = {__func__, path};
    write_plan w;
    if ((st = plan_write(__func__, arr, &w))) return st;

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 48);
    if (!tmp) return fail(&c, KK_ERR_OUT_OF_MEMORY, "cannot allocate a file name");
    int fd = -1, err = 0;
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, plen + 48, "%s.tmp%ld.%u", path, (long)getpid(), attempt);
        /* 0666 and the umask: the permissions fopen(path, "w") would give. */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    char ebuf[128];
    if (fd < 0) {
        err = errno;
        free(tmp);
        return fail(&c, KK_ERR_IO, "cannot write: %s", strerror_r(err, ebuf, sizeof ebuf));
    }
    err = write_all(fd, w.header, w.header_len);
    if (!err && w.nbytes) {
        if (host_is_little() || !swap_unit(&w.t)) {
            err = write_all(fd, arr->data, w.nbytes);
        } else {
            unsigned char chunk[65536];
            size_t step = sizeof chunk - sizeof chunk % 16;
            for (size_t off = 0; !err && off < w.nbytes; off += step) {
                size_t k = w.nbytes - off < step ? w.nbytes - off : step;
                copy_le(chunk, (const unsigned char *)arr->data + off, k, &w.t);
                err = write_all(fd, chunk, k);
            }
        }
    }
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        free(tmp);
        return fail(&c, KK_ERR_IO, "cannot write: %s", strerror_r(err, ebuf, sizeof ebuf));
    }
    free(tmp);
    return KK_OK;
}

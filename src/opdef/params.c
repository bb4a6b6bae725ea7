/* An op's parameters: defaults, setting one from text, "k=v" parsing,
 * validation with errors that name the accepted range, and formatting back
 * to text. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "opdef/opdef.h"

/* Room for one parameter's value as text: a LIST of KK_OP_LIST_MAX values. */
#define KK__PARAM_TEXT_MAX 1024

/* ---- parameters ---- */

static int count_choices(const char *const *choices) {
    int n = 0;
    while (choices && choices[n]) n++;
    return n;
}

static int dtype_allowed(const kk_op_param *d, int64_t v) {
    if (v < 0 || v >= KK_DTYPE_COUNT) return 0;
    for (int c = 0; d->choices && d->choices[c]; c++)
        if (strcmp(d->choices[c], kk_dtype_name((kk_dtype)v)) == 0) return 1;
    return 0;
}

static int in_range(const kk_op_param *d, int64_t v, double f) {
    switch (d->kind) {
    case KK_PARAM_INT:
        return v >= d->min && v <= d->max && (d->multiple <= 1 || v % d->multiple == 0);
    case KK_PARAM_FLOAT: return isfinite(f) && f >= d->fmin && f <= d->fmax;
    case KK_PARAM_BOOL: return v == 0 || v == 1;
    case KK_PARAM_ENUM: return v >= 0 && v < count_choices(d->choices);
    case KK_PARAM_DTYPE: return dtype_allowed(d, v);
    case KK_PARAM_LIST: /* the count; the values: list_in_range */
        return v >= 0 && v <= KK_OP_LIST_MAX;
    }
    return 0;
}

/* Which of p->lists holds LIST parameter idx: the LIST parameters before it. */
static int list_slot(const kk_op *op, int idx) {
    int n = 0;
    for (int k = 0; k < idx; k++) n += op->params[k].kind == KK_PARAM_LIST;
    return n;
}

/* Index of the first value of LIST parameter idx outside [min, max], -1 when
 * none. */
static int list_bad_value(const kk_op_params *p, int idx) {
    const kk_op_param *d = &p->op->params[idx];
    const int slot = list_slot(p->op, idx);
    for (int k = 0; slot < KK_OP_MAX_LISTS && k < p->i[idx]; k++)
        if (p->lists[slot][k] < d->min || p->lists[slot][k] > d->max) return k;
    return -1;
}

/* What an error says would have been accepted: "16..256", "one of f32, f16,
 * bf16". */
static void expected_text(const kk_op_param *d, char *buf, size_t size) {
    switch (d->kind) {
    case KK_PARAM_INT:
        if (d->multiple > 1)
            snprintf(buf, size, "a multiple of %lld in %lld..%lld", (long long)d->multiple,
                     (long long)d->min, (long long)d->max);
        else
            snprintf(buf, size, "%lld..%lld", (long long)d->min, (long long)d->max);
        return;
    case KK_PARAM_FLOAT: snprintf(buf, size, "a number in %g..%g", d->fmin, d->fmax); return;
    case KK_PARAM_BOOL: snprintf(buf, size, "0 or 1 (or true/false, yes/no, on/off)"); return;
    case KK_PARAM_LIST:
        snprintf(buf, size,
                 "up to %d integers in %lld..%lld separated by ':' (none: the empty list)",
                 KK_OP_LIST_MAX, (long long)d->min, (long long)d->max);
        return;
    default: break;
    }
    snprintf(buf, size, "one of");
    for (int c = 0; d->choices && d->choices[c]; c++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s %s", c ? "," : "", d->choices[c]);
}

static kk_status range_error(const kk_op *op, const kk_op_param *d, const char *value) {
    char expected[256];
    expected_text(d, expected, sizeof expected);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op->name, d->name, expected, "%s", value);
}

static int parse_bool(const char *s, int64_t *v) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                                "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) return (*v = 1), 1;
        if (strcasecmp(s, no[i]) == 0) return (*v = 0), 1;
    }
    return 0;
}

/* Text to a value of kind d->kind; 0 when the text is not one (no range check).
 */
static int parse_value(const kk_op_param *d, const char *s, int64_t *v, double *f) {
    char *end = NULL;
    errno = 0;
    switch (d->kind) {
    case KK_PARAM_INT: *v = strtoll(s, &end, 10); break;
    case KK_PARAM_FLOAT: *f = strtod(s, &end); break;
    case KK_PARAM_BOOL: return parse_bool(s, v);
    case KK_PARAM_ENUM:
        for (int c = 0; d->choices && d->choices[c]; c++)
            if (strcasecmp(d->choices[c], s) == 0) return (*v = c), 1;
        return 0;
    case KK_PARAM_DTYPE: {
        kk_dtype dt;
        if (kk_dtype_parse(s, &dt) != KK_OK) return 0;
        *v = dt;
        return 1;
    }
    case KK_PARAM_LIST: /* parse_list */ return 0;
    }
    return end != s && *end == '\0' && errno == 0;
}

/* "5:0:17" (or "none" or "" for the empty list) into values[]; the count in
 * *n. 0 when the text is not such a list, a value is out of [min, max] or
 * there are more than KK_OP_LIST_MAX. */
static int parse_list(const kk_op_param *d, const char *s, int32_t *values, int64_t *n) {
    *n = 0;
    if (*s == '\0' || strcasecmp(s, "none") == 0) return 1;
    for (;;) {
        char *end = NULL;
        errno = 0;
        const long long v = strtoll(s, &end, 10);
        if (end == s || errno != 0 || v < d->min || v > d->max || *n == KK_OP_LIST_MAX ||
            (*end != ':' && *end != '\0'))
            return 0;
        values[(*n)++] = (int32_t)v;
        if (*end == '\0') return 1;
        s = end + 1;
    }
}

kk_status kk_op_params_init(const kk_op *op, kk_op_params *p) {
    kk_status st = KK__CHECK_NOT_NULL(op);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(p);
    if (st != KK_OK) return st;
    memset(p, 0, sizeof *p);
    p->op = op;
    for (int i = 0; i < op->nparams; i++) {
        p->i[i] = op->params[i].def;
        p->f[i] = op->params[i].fdef;
        if (op->params[i].kind == KK_PARAM_LIST && op->params[i].def_list) {
            const int slot = list_slot(op, i);
            if (slot >= KK_OP_MAX_LISTS ||
                !parse_list(&op->params[i], op->params[i].def_list, p->lists[slot], &p->i[i]))
                return range_error(op, &op->params[i], op->params[i].def_list);
        }
    }
    return KK_OK;
}

kk_status kk_op_params_set(kk_op_params *p, const char *name, const char *value) {
    kk_status st = KK__CHECK_NOT_NULL(p);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(name);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(value);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(p->op);
    if (st != KK_OK) return st;
    const int idx = kk_op_param_index(p->op, name);
    if (idx < 0) {
        char known[256] = "a parameter of";
        for (int i = 0; i < p->op->nparams; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s %s", i ? "," : "",
                     p->op->params[i].name);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, name, known, "%s", value);
    }
    const kk_op_param *d = &p->op->params[idx];
    int64_t v = 0;
    double f = 0.0;
    if (d->kind == KK_PARAM_LIST) {
        const int slot = list_slot(p->op, idx);
        int32_t values[KK_OP_LIST_MAX] = {0};
        if (slot >= KK_OP_MAX_LISTS || !parse_list(d, value, values, &v))
            return range_error(p->op, d, value);
        memcpy(p->lists[slot], values, sizeof values); /* zeros past the count */
        p->i[idx] = v;
        return KK_OK;
    }
    if (!parse_value(d, value, &v, &f) || !in_range(d, v, f)) return range_error(p->op, d, value);
    p->i[idx] = v;
    p->f[idx] = f;
    return KK_OK;
}

static int is_separator(char c) { return c == ',' || isspace((unsigned char)c); }

kk_status kk_op_params_parse(const kk_op *op, const char *text, kk_op_params *p) {
    kk_status st = kk_op_params_init(op, p);
    for (const char *s = text; st == KK_OK && s && *s;) {
        while (*s && is_separator(*s)) s++;
        const char *end = s;
        while (*end && !is_separator(*end)) end++;
        if (end == s) break;
        const char *eq = memchr(s, '=', (size_t)(end - s));
        char key[64], value[KK__PARAM_TEXT_MAX];
        if (!eq || eq == s || eq - s >= (long)sizeof key || end - eq > (long)sizeof value)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op->name, "parameter",
                                 "key=value, e.g. M=128", "%.*s", (int)(end - s), s);
        snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
        snprintf(value, sizeof value, "%.*s", (int)(end - eq - 1), eq + 1);
        st = kk_op_params_set(p, key, value);
        s = end;
    }
    return st == KK_OK ? kk_op_params_validate(p) : st;
}

/* The value of parameter idx as text, as kk_op_params_set reads it. */
static void value_text(const kk_op_params *p, int idx, char *buf, size_t size) {
    const kk_op_param *d = &p->op->params[idx];
    const int64_t v = p->i[idx];
    if (d->kind == KK_PARAM_FLOAT)
        snprintf(buf, size, "%.17g", p->f[idx]);
    else if (d->kind == KK_PARAM_ENUM && v >= 0 && v < count_choices(d->choices))
        snprintf(buf, size, "%s", d->choices[v]);
    else if (d->kind == KK_PARAM_DTYPE && v >= 0 && v < KK_DTYPE_COUNT)
        snprintf(buf, size, "%s", kk_dtype_name((kk_dtype)v));
    else if (d->kind == KK_PARAM_LIST) {
        const int slot = list_slot(p->op, idx);
        snprintf(buf, size, "%s", v > 0 ? "" : "none");
        for (int64_t k = 0; slot < KK_OP_MAX_LISTS && k < v && k < KK_OP_LIST_MAX; k++)
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%d", k ? ":" : "",
                     (int)p->lists[slot][k]);
    } else
        snprintf(buf, size, "%lld", (long long)v);
}

kk_status kk_op_params_validate(const kk_op_params *p) {
    kk_status st = KK__CHECK_NOT_NULL(p);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(p->op);
    if (st != KK_OK) return st;
    for (int i = 0; i < p->op->nparams; i++) {
        const kk_op_param *d = &p->op->params[i];
        if (!in_range(d, p->i[i], p->f[i]) ||
            (d->kind == KK_PARAM_LIST &&
             (list_slot(p->op, i) >= KK_OP_MAX_LISTS || list_bad_value(p, i) >= 0))) {
            char text[KK__PARAM_TEXT_MAX];
            value_text(p, i, text, sizeof text);
            return range_error(p->op, d, text);
        }
    }
    return p->op->validate ? p->op->validate(p) : KK_OK;
}

int64_t kk_op_params_int(const kk_op_params *p, const char *name) {
    const int idx = p ? kk_op_param_index(p->op, name) : -1;
    if (idx < 0) return 0;
    return p->op->params[idx].kind == KK_PARAM_FLOAT ? (int64_t)p->f[idx] : p->i[idx];
}

double kk_op_params_float(const kk_op_params *p, const char *name) {
    const int idx = p ? kk_op_param_index(p->op, name) : -1;
    if (idx < 0) return 0.0;
    return p->op->params[idx].kind == KK_PARAM_FLOAT ? p->f[idx] : (double)p->i[idx];
}

int kk_op_params_list(const kk_op_params *p, const char *name, const int32_t **values) {
    const int idx = p ? kk_op_param_index(p->op, name) : -1;
    if (values) *values = NULL;
    if (idx < 0 || p->op->params[idx].kind != KK_PARAM_LIST) return 0;
    const int slot = list_slot(p->op, idx);
    if (slot >= KK_OP_MAX_LISTS || p->i[idx] < 0 || p->i[idx] > KK_OP_LIST_MAX) return 0;
    if (values) *values = p->lists[slot];
    return (int)p->i[idx];
}

kk_status kk_op_params_format(const kk_op_params *p, char *buf, size_t size) {
    kk_status st = KK__CHECK_NOT_NULL(p);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(p->op);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(buf);
    if (st != KK_OK) return st;
    size_t used = 0;
    for (int i = 0; i < p->op->nparams; i++) {
        char text[KK__PARAM_TEXT_MAX];
        value_text(p, i, text, sizeof text);
        char *at = used < size ? buf + used : NULL; /* past the end: only count */
        int n = snprintf(at, at ? size - used : 0, "%s%s=%s", i ? " " : "", p->op->params[i].name,
                         text);
        used += (size_t)(n > 0 ? n : 0);
    }
    if (size == 0 || used >= size)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "size", "room for the whole text",
                             "%zu", size);
    return KK_OK;
}

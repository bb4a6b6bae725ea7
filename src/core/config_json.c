/* Configuration <-> JSON through one schema table: loading (strict, atomic)
 * and printing. File I/O lives in config_file.c. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_internal.h"
#include "core/log_internal.h"

/* Deeper nesting than this is rejected before cJSON sees the text, so a hostile
 * document cannot drive its recursive parser deep. The schema itself is 3 deep;
 * the slack lets the schema walk name the path for near misses. */
enum { MAX_DEPTH = 8, PATH_LEN = 256 };

/* ---- the schema ---- */

typedef enum kind {
    K_OBJECT,
    K_BOOL,
    K_MARGIN,  /* double */
    K_BYTES,   /* uint64_t, 0 .. 2^53 - 1 */
    K_THREADS, /* int, 0 .. KK_CONFIG_MAX_THREADS */
    K_MODE,
    K_LEVEL,
    K_ARCH,
    K_LOG_LEVEL,
    K_OPS
} kind;

typedef struct field {
    const char *key; /* NULL ends a list */
    kind kind;
    size_t offset;                /* from the start of kk_config */
    const struct field *children; /* K_OBJECT */
} field;

#define AT(member) offsetof(kk_config, member)

static const field k_nvidia[] = {
    {"architecture", K_ARCH, AT(hardware.nvidia.architecture), NULL},
    {"fp8_enabled", K_BOOL, AT(hardware.nvidia.fp8_enabled), NULL},
    {"tf32_allowed", K_BOOL, AT(hardware.nvidia.tf32_allowed), NULL},
    {"deterministic", K_BOOL, AT(hardware.nvidia.deterministic), NULL},
    {NULL, K_OBJECT, 0, NULL},
};
static const field k_cpu[] = {
    {"num_threads", K_THREADS, AT(hardware.cpu.num_threads), NULL},
    {NULL, K_OBJECT, 0, NULL},
};
static const field k_hardware[] = {
    {"nvidia", K_OBJECT, 0, k_nvidia},
    {"cpu", K_OBJECT, 0, k_cpu},
    {NULL, K_OBJECT, 0, NULL},
};
static const field k_memory[] = {
    {"safety_margin", K_MARGIN, AT(memory.safety_margin), NULL},
    {"pool_limit_bytes", K_BYTES, AT(memory.pool_limit_bytes), NULL},
    {"max_pool_bytes", K_BYTES, AT(memory.max_pool_bytes), NULL},
    {"caching_enabled", K_BOOL, AT(memory.caching_enabled), NULL},
    {NULL, K_OBJECT, 0, NULL},
};
static const field k_kernels[] = {
    {"enabled", K_BOOL, AT(kernels.enabled), NULL},
    {"ops", K_OPS, AT(kernels), NULL},
    {NULL, K_OBJECT, 0, NULL},
};
static const field k_debug[] = {
    {"checks", K_BOOL, AT(debug.checks), NULL},
    {"log_level", K_LOG_LEVEL, AT(debug.log_level), NULL},
    {NULL, K_OBJECT, 0, NULL},
};
static const field k_root[] = {
    {"mode", K_MODE, AT(mode), NULL},
    {"optimization_level", K_LEVEL, AT(level), NULL},
    {"hardware", K_OBJECT, 0, k_hardware},
    {"memory", K_OBJECT, 0, k_memory},
    {"kernels", K_OBJECT, 0, k_kernels},
    {"debug", K_OBJECT, 0, k_debug},
    {NULL, K_OBJECT, 0, NULL},
};

#define FIELD_PTR(cfg, f, type) ((type *)(void *)((char *)(cfg) + (f)->offset))
#define FIELD_CPTR(cfg, f, type) ((const type *)(const void *)((const char *)(cfg) + (f)->offset))

/* ---- error context ---- */

typedef struct load_ctx {
    const char *function;
    const char *source; /* file or variable, for messages; may be NULL */
} load_ctx;

#define FAIL(ctx, path, value, expected, ...)                                                      \
    kk__config_fail((ctx)->function, (ctx)->source, (path), (value), (expected), __VA_ARGS__)

static const char *type_name(const cJSON *item) {
    if (cJSON_IsBool(item)) return "boolean";
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsNumber(item)) return "number";
    if (cJSON_IsString(item)) return "string";
    if (cJSON_IsArray(item)) return "array";
    if (cJSON_IsObject(item)) return "object";
    return "invalid value";
}

/* The value as short text: true, 3.5, "abc", [...], {...}. */
static void describe(const cJSON *item, char *buf, size_t size) {
    char tmp[80];
    if (cJSON_IsBool(item)) {
        snprintf(buf, size, "%s", cJSON_IsTrue(item) ? "true" : "false");
    } else if (cJSON_IsNumber(item)) {
        if (isfinite(item->valuedouble))
            kk__config_format_double(buf, size, item->valuedouble);
        else
            snprintf(buf, size, "%s", "(beyond the range of a double)");
    } else if (cJSON_IsString(item)) {
        kk__config_printable(tmp, sizeof tmp, item->valuestring);
        snprintf(buf, size, "\"%s\"", tmp);
    } else if (cJSON_IsArray(item)) {
        snprintf(buf, size, "[...]");
    } else if (cJSON_IsObject(item)) {
        snprintf(buf, size, "{...}");
    } else {
        snprintf(buf, size, "%s", type_name(item));
    }
}

static kk_status type_error(const load_ctx *ctx, const char *path, const cJSON *item,
                            const char *expected) {
    char v[96];
    describe(item, v, sizeof v);
    if (cJSON_IsString(item) || cJSON_IsNumber(item))
        return FAIL(ctx, path, v, expected, "expected %s, found %s %s", expected, type_name(item),
                    v);
    return FAIL(ctx, path, v, expected, "expected %s, found %s", expected, type_name(item));
}

static void child_path(char *out, const char *parent, const char *key) {
    char shown[96];
    kk__config_printable(shown, sizeof shown, key);
    if (parent[0])
        snprintf(out, PATH_LEN, "%.150s.%s", parent, shown);
    else
        snprintf(out, PATH_LEN, "%s", shown);
}

/* ---- scalar fields ---- */

/* A JSON number that must be a whole number in [0, max]. */
static kk_status read_count(const load_ctx *ctx, const char *path, const cJSON *item, double max,
                            const char *range, double *out) {
    char v[96];
    if (!cJSON_IsNumber(item)) return type_error(ctx, path, item, "a non-negative integer");
    double d = item->valuedouble;
    describe(item, v, sizeof v);
    if (!isfinite(d))
        return FAIL(ctx, path, v, range, "number is out of range (overflows a double)");
    if (d != floor(d)) return FAIL(ctx, path, v, range, "%s is not an integer", v);
    if (d < 0) return FAIL(ctx, path, v, range, "%s is negative; expected %s", v, range);
    if (d > max) return FAIL(ctx, path, v, range, "%s is out of range; expected %s", v, range);
    *out = d;
    return KK_OK;
}

static kk_status bad_name(const load_ctx *ctx, const char *path, const cJSON *item,
                          const char *expected) {
    char v[96];
    describe(item, v, sizeof v);
    return FAIL(ctx, path, v, expected, "%s is not one of %s", v, expected);
}

/* Enum-valued strings: mode, level, architecture, log level (any case, as the
 * parse helpers accept; their own error is replaced by one naming the path). */
static kk_status read_enum(const load_ctx *ctx, const char *path, const field *f, const cJSON *item,
                           kk_config *cfg) {
    char archs[256];
    const char *s = cJSON_GetStringValue(item);
    if (!s) return type_error(ctx, path, item, "a string");
    switch (f->kind) {
    case K_MODE:
        if (kk_config_mode_parse(s, FIELD_PTR(cfg, f, kk_config_mode)))
            return bad_name(ctx, path, item, "inference, training, development");
        return KK_OK;
    case K_LEVEL:
        if (kk_opt_level_parse(s, FIELD_PTR(cfg, f, kk_opt_level)))
            return bad_name(ctx, path, item, "conservative, balanced, aggressive");
        return KK_OK;
    case K_ARCH:
        if (kk__config_arch_from_text(s, FIELD_PTR(cfg, f, kk_arch)))
            return bad_name(ctx, path, item, kk__config_arch_expected(archs, sizeof archs));
        return KK_OK;
    case K_LOG_LEVEL:
    default:
        if (kk_log_level_parse(s, FIELD_PTR(cfg, f, kk_log_level)))
            return bad_name(ctx, path, item, "off, error, warn, info, debug, trace");
        return KK_OK;
    }
}

/* kernels.ops: an object op -> impl that replaces the whole table. */
static kk_status read_ops(const load_ctx *ctx, const char *path, const cJSON *item,
                          kk_kernels_config *k) {
    char p[PATH_LEN], v[96];
    if (!cJSON_IsObject(item)) return type_error(ctx, path, item, "an object");
    int n = cJSON_GetArraySize(item);
    if (n > KK_CONFIG_MAX_KERNEL_OPS) {
        snprintf(v, sizeof v, "%d", n);
        return FAIL(ctx, path, v, "at most 32 entries", "%d entries is above 32", n);
    }
    memset(k->ops, 0, sizeof k->ops);
    k->op_count = 0;
    for (const cJSON *c = item->child; c; c = c->next) {
        child_path(p, path, c->string);
        if (!kk__config_op_name_ok(c->string)) {
            kk__config_printable(v, sizeof v, c->string);
            return FAIL(ctx, p, v, "a-z, 0-9 and _, starting with a letter, at most 31",
                        "\"%s\" is not a valid op name", v);
        }
        const char *s = cJSON_GetStringValue(c);
        if (!s) return type_error(ctx, p, c, "a string");
        kk_kernel_impl impl = KK_KERNEL_IMPL_AUTO;
        if (kk_kernel_impl_parse(s, &impl)) return bad_name(ctx, p, c, "auto, cuda, cpu");
        for (size_t j = 0; j < k->op_count; j++)
            if (strcmp(k->ops[j].op, c->string) == 0)
                return FAIL(ctx, p, c->string, "each op at most once", "duplicate key");
        memcpy(k->ops[k->op_count].op, c->string, strlen(c->string));
        k->ops[k->op_count].impl = impl;
        k->op_count++;
    }
    return KK_OK;
}

static kk_status read_object(const load_ctx *ctx, const char *path, const cJSON *obj,
                             const field *fields, kk_config *cfg);

static kk_status read_field(const load_ctx *ctx, const char *path, const field *f,
                            const cJSON *item, kk_config *cfg) {
    double d = 0;
    kk_status st = KK_OK;
    switch (f->kind) {
    case K_OBJECT: return read_object(ctx, path, item, f->children, cfg);
    case K_BOOL:
        if (!cJSON_IsBool(item)) return type_error(ctx, path, item, "a boolean");
        *FIELD_PTR(cfg, f, bool) = cJSON_IsTrue(item);
        return KK_OK;
    case K_MARGIN:
        if (!cJSON_IsNumber(item)) return type_error(ctx, path, item, "a number");
        if (!isfinite(item->valuedouble))
            return FAIL(ctx, path, "(beyond the range of a double)", "1.0 to 10.0",
                        "number is out of range (overflows a double)");
        *FIELD_PTR(cfg, f, double) = item->valuedouble; /* range: kk__config_check */
        return KK_OK;
    case K_BYTES:
        st = read_count(ctx, path, item, (double)KK_CONFIG_MAX_BYTES,
                        "an integer from 0 to 9007199254740991", &d);
        if (!st) *FIELD_PTR(cfg, f, uint64_t) = (uint64_t)d;
        return st;
    case K_THREADS:
        st = read_count(ctx, path, item, KK_CONFIG_MAX_THREADS, "an integer from 0 to 4096", &d);
        if (!st) *FIELD_PTR(cfg, f, int) = (int)d;
        return st;
    case K_OPS: return read_ops(ctx, path, item, FIELD_PTR(cfg, f, kk_kernels_config));
    default: return read_enum(ctx, path, f, item, cfg);
    }
}

/* Keys this object accepts, for the "unknown key" message. */
static void list_keys(const field *fields, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (const field *f = fields; f->key && used < size; f++) {
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "one of ", f->key);
        if (n < 0) break;
        used += (size_t)n;
    }
}

static const field *find_field(const field *fields, const char *key) {
    for (const field *f = fields; f->key; f++)
        if (key && strcmp(f->key, key) == 0) return f;
    return NULL;
}

static kk_status read_object(const load_ctx *ctx, const char *path, const cJSON *obj,
                             const field *fields, kk_config *cfg) {
    char p[PATH_LEN], keys[256];
    unsigned seen = 0; /* one bit per field: catches duplicate keys */
    if (!cJSON_IsObject(obj)) return type_error(ctx, path[0] ? path : "(root)", obj, "an object");
    for (const cJSON *c = obj->child; c; c = c->next) {
        child_path(p, path, c->string);
        const field *f = find_field(fields, c->string);
        if (!f) {
            list_keys(fields, keys, sizeof keys);
            return FAIL(ctx, p, NULL, keys, "unknown key (expected %s)", keys);
        }
        unsigned bit = 1u << (unsigned)(f - fields);
        if (seen & bit) return FAIL(ctx, p, NULL, "each key at most once", "duplicate key");
        seen |= bit;
        kk_status st = read_field(ctx, p, f, c, cfg);
        if (st) return st;
    }
    return KK_OK;
}

/* "mode" and "optimization_level" act as presets: applied before the other
 * keys, whatever their order in the document, so explicit keys win. */
static kk_status apply_document_presets(const load_ctx *ctx, const cJSON *root, kk_config *cfg) {
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "mode");
    const cJSON *level = cJSON_GetObjectItemCaseSensitive(root, "optimization_level");
    kk_status st = KK_OK;
    if (mode) {
        st = read_field(ctx, "mode", find_field(k_root, "mode"), mode, cfg);
        if (!st) st = kk_config_apply_preset(cfg, cfg->mode);
    }
    if (!st && level) {
        st = read_field(ctx, "optimization_level", find_field(k_root, "optimization_level"), level,
                        cfg);
        if (!st) st = kk_config_set_level(cfg, cfg->level);
    }
    return st;
}

/* ---- text checks before parsing ---- */

static void line_col(const char *text, size_t offset, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static kk_status fail_at(const load_ctx *ctx, const char *text, size_t offset, const char *what) {
    size_t line, col;
    line_col(text, offset, &line, &col);
    return FAIL(ctx, NULL, NULL, "a JSON object", "%s at line %zu, column %zu", what, line, col);
}

/* One pass over the raw text: nesting depth outside strings and escaped NULs
 * inside them (cJSON would cut a key at the NUL, so "mode\u0000x" would read
 * as "mode"). *open is set when the text ends inside a string or with
 * unclosed brackets: a truncated document. */
static kk_status scan_text(const load_ctx *ctx, const char *text, size_t len, int *open) {
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\' && i + 1 < len) {
                if (text[i + 1] == 'u' && i + 5 < len && strncmp(text + i + 2, "0000", 4) == 0)
                    return fail_at(ctx, text, i, "escaped NUL character (\\u0000)");
                i++; /* skip the escaped character */
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > MAX_DEPTH) return fail_at(ctx, text, i, "nesting deeper than 8 levels");
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    *open = in_string || depth > 0;
    return KK_OK;
}

static int all_whitespace(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r\n", text[i])) return 0;
    return 1;
}

static kk_status parse_text(const load_ctx *ctx, const char *text, size_t len, cJSON **out) {
    char v[32];
    *out = NULL;
    if (len > KK_CONFIG_MAX_FILE_BYTES) {
        snprintf(v, sizeof v, "%zu", len);
        return FAIL(ctx, NULL, v, "at most 1048576 bytes",
                    "document is %zu bytes; the limit is 1048576 (1 MiB)", len);
    }
    if (all_whitespace(text, len))
        return FAIL(ctx, NULL, NULL, "a JSON object", "document is empty");
    if (memchr(text, 0, len))
        return fail_at(ctx, text, (size_t)((const char *)memchr(text, 0, len) - text), "NUL byte");
    int open = 0;
    kk_status st = scan_text(ctx, text, len, &open);
    if (st) return st;

    const char *end = NULL;
    /* Length includes the NUL: cJSON's "no trailing garbage" check needs it. */
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!root) {
        /* cJSON's error position can be far from the cut; an object left open
         * at the end is the clearer diagnosis. */
        size_t first = strspn(text, " \t\r\n");
        if (open && text[first] == '{')
            return fail_at(ctx, text, len, "truncated JSON: unexpected end");
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        return fail_at(ctx, text, at, "invalid JSON");
    }
    if (!cJSON_IsObject(root)) {
        st = type_error(ctx, "(root)", root, "an object");
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return KK_OK;
}

kk_status kk__config_load_text(const char *text, size_t len, kk_config *cfg, const char *function,
                               const char *source) {
    const load_ctx ctx = {function, source};
    cJSON *root = NULL;
    kk_status st = parse_text(&ctx, text, len, &root);
    if (st) return st;

    kk_config tmp = *cfg; /* all changes go here; *cfg only on success */
    st = apply_document_presets(&ctx, root, &tmp);
    if (!st) st = read_object(&ctx, "", root, k_root, &tmp);
    cJSON_Delete(root);
    if (!st) st = kk__config_check(&tmp, function, source);
    if (!st) *cfg = tmp;
    return st;
}

kk_status kk_config_load_string(const char *json, kk_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(json);
    if (!st) st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    /* strnlen: never walk more than one byte past the limit. */
    size_t len = strnlen(json, (size_t)KK_CONFIG_MAX_FILE_BYTES + 1);
    st = kk__config_load_text(json, len, cfg, __func__, NULL);
    if (!st) KK_LOG0(KK_LOG_DEBUG, KK__CONFIG_LOGGER, "config string applied");
    return st;
}

/* ---- printing ---- */

static cJSON *build_object(const kk_config *cfg, const field *fields);

/* Numbers are printed here, not by cJSON: its printer settles for text that
 * reads back within an epsilon (1.0000000000000002 prints as 1, 2^53 - 1 as
 * 9.00719925474099e+15), and a save/load round trip must be exact. */
static cJSON *raw_double(double d) {
    char buf[48];
    /* The "C" locale for this thread only: a decimal comma is not JSON. */
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
    kk__config_format_double(buf, sizeof buf, d); /* shortest exact form */
    if (c_locale) {
        uselocale(old);
        freelocale(c_locale);
    }
    return cJSON_CreateRaw(buf);
}

static cJSON *raw_integer(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateRaw(buf);
}

static cJSON *build_ops(const kk_kernels_config *k) {
    cJSON *obj = cJSON_CreateObject();
    for (size_t i = 0; obj && i < k->op_count; i++) {
        if (!cJSON_AddStringToObject(obj, k->ops[i].op, kk_kernel_impl_name(k->ops[i].impl))) {
            cJSON_Delete(obj);
            return NULL;
        }
    }
    return obj;
}

static cJSON *build_value(const kk_config *cfg, const field *f) {
    switch (f->kind) {
    case K_OBJECT: return build_object(cfg, f->children);
    case K_BOOL: return cJSON_CreateBool(*FIELD_CPTR(cfg, f, bool));
    /* Byte counts are below 2^53, so they also load back exactly as doubles. */
    case K_MARGIN: return raw_double(*FIELD_CPTR(cfg, f, double));
    case K_BYTES: return raw_integer(*FIELD_CPTR(cfg, f, uint64_t));
    case K_THREADS: return raw_integer((uint64_t)*FIELD_CPTR(cfg, f, int));
    case K_MODE:
        return cJSON_CreateString(kk_config_mode_name(*FIELD_CPTR(cfg, f, kk_config_mode)));
    case K_LEVEL: return cJSON_CreateString(kk_opt_level_name(*FIELD_CPTR(cfg, f, kk_opt_level)));
    case K_ARCH: return cJSON_CreateString(kk__config_arch_text(*FIELD_CPTR(cfg, f, kk_arch)));
    case K_LOG_LEVEL:
        return cJSON_CreateString(kk_log_level_name(*FIELD_CPTR(cfg, f, kk_log_level)));
    case K_OPS: return build_ops(FIELD_CPTR(cfg, f, kk_kernels_config));
    }
    return NULL;
}

static cJSON *build_object(const kk_config *cfg, const field *fields) {
    cJSON *obj = cJSON_CreateObject();
    for (const field *f = fields; obj && f->key; f++) {
        cJSON *v = build_value(cfg, f);
        if (!v || !cJSON_AddItemToObject(obj, f->key, v)) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            return NULL;
        }
    }
    return obj;
}

kk_status kk__config_print(const kk_config *cfg, const char *function, char **out) {
    *out = NULL;
    kk_status st = kk__config_check(cfg, function, NULL); /* only loadable files */
    if (st) return st;
    cJSON *root = build_object(cfg, k_root);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return kk__error(KK_ERR_OUT_OF_MEMORY, function, "cannot allocate the JSON text");
    /* Copy into malloc memory: the caller frees with free() even when the
     * application installed its own cJSON allocator hooks. */
    size_t n = strlen(text);
    char *copy = malloc(n + 1);
    if (copy) memcpy(copy, text, n + 1);
    cJSON_free(text);
    if (!copy) return kk__error(KK_ERR_OUT_OF_MEMORY, function, "cannot allocate the JSON text");
    *out = copy;
    return KK_OK;
}

kk_status kk_config_to_json(const kk_config *cfg, char **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    *out = NULL;
    st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    return kk__config_print(cfg, __func__, out);
}

/* The safetensors header: 8 bytes of little-endian length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}), then
 * the data. Everything a file claims is checked against the bytes it has
 * before any pointer is formed from it (docs/model.md, "Loading"). */
#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_internal.h"
#include "kernelkit/model.h"

typedef struct st_ctx {
    const char *func;
    const char *path;
} st_ctx;

/* "func: path: tensor 'name': detail" (or "func: path: detail" for the whole
 * file); argument is the tensor name, or "header". */
static kk_status fail(const st_ctx *c, kk_status st, const char *tensor, const char *fmt, ...)
    KK__PRINTF(4, 5);
static kk_status fail(const st_ctx *c, kk_status st, const char *tensor, const char *fmt, ...) {
    char body[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (tensor)
        return kk__set_error(st, c->func, tensor, c->path, NULL, NULL,
                             "%.300s: tensor '%.200s': %s", c->path, tensor, body);
    return kk__set_error(st, c->func, "header", c->path, NULL, NULL, "%.300s: %s", c->path, body);
}

/* ---- dtypes ---- */

static const struct {
    const char *name;
    kk_dtype dtype;
} k_dtypes[] = {
    {"F64", KK_DTYPE_F64},   {"F32", KK_DTYPE_F32},          {"F16", KK_DTYPE_F16},
    {"BF16", KK_DTYPE_BF16}, {"F8_E4M3", KK_DTYPE_FP8_E4M3}, {"F8_E5M2", KK_DTYPE_FP8_E5M2},
    {"I8", KK_DTYPE_INT8},   {"U8", KK_DTYPE_UINT8},         {"I32", KK_DTYPE_INT32},
};

/* Valid safetensors dtypes with no kk_dtype: a clean "unsupported", not "bad file". */
static const char *const k_unsupported[] = {
    "BOOL", "I16", "U16", "U32", "I64", "U64", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64", NULL,
};

#define SUPPORTED_LIST "F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I8, U8, I32"

size_t kk__st_elem_bytes(kk_dtype dtype) { return (size_t)kk_dtype_bits(dtype) / 8; }

static kk_status parse_dtype(const st_ctx *c, const char *tensor, const cJSON *v, kk_dtype *out) {
    if (!cJSON_IsString(v))
        return fail(c, KK_ERR_IO, tensor, "\"dtype\" missing or not a string: expected one of %s",
                    SUPPORTED_LIST);
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(v->valuestring, k_dtypes[i].name) == 0) {
            *out = k_dtypes[i].dtype;
            return KK_OK;
        }
    for (int i = 0; k_unsupported[i]; i++)
        if (strcmp(v->valuestring, k_unsupported[i]) == 0)
            return fail(c, KK_ERR_UNSUPPORTED, tensor,
                        "dtype %s is not supported by KernelKit: expected one of %s",
                        v->valuestring, SUPPORTED_LIST);
    return fail(c, KK_ERR_IO, tensor, "unknown dtype \"%.40s\": expected one of %s", v->valuestring,
                SUPPORTED_LIST);
}

/* ---- numbers: JSON integers in [0, 2^53), where a double is exact ---- */

static int json_u53(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d < 9007199254740992.0) || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static kk_status parse_shape(const st_ctx *c, const char *tensor, const cJSON *v, kk__st_entry *e) {
    if (!cJSON_IsArray(v))
        return fail(c, KK_ERR_IO, tensor, "\"shape\" missing or not an array of integers");
    int n = cJSON_GetArraySize(v);
    if (n > KK_TENSOR_MAX_DIMS)
        return fail(c, KK_ERR_UNSUPPORTED, tensor, "shape has %d dimensions: expected at most %d",
                    n, KK_TENSOR_MAX_DIMS);
    int d = 0;
    int64_t numel = 1;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        uint64_t s = 0;
        if (!json_u53(it, &s))
            return fail(c, KK_ERR_IO, tensor,
                        "shape[%d] is not an integer in [0, 2^53): expected sizes >= 0", d);
        e->shape[d++] = (int64_t)s;
        if (!kk__mul_i64(numel, (int64_t)s, &numel))
            return fail(c, KK_ERR_IO, tensor, "shape's element count overflows int64 at shape[%d]",
                        d - 1);
    }
    e->ndim = n;
    e->numel = numel;
    return KK_OK;
}

static void shape_text(const kk__st_entry *e, char *buf, size_t size) {
    int k = snprintf(buf, size, "[");
    for (int d = 0; d < e->ndim && k > 0 && (size_t)k < size; d++)
        k += snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)e->shape[d]);
    if (k > 0 && (size_t)k < size) snprintf(buf + k, size - k, "]");
}

static kk_status parse_offsets(const st_ctx *c, const char *tensor, const cJSON *v,
                               uint64_t data_bytes, kk__st_entry *e) {
    uint64_t b = 0, x = 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !json_u53(v->child, &b) ||
        !json_u53(v->child->next, &x))
        return fail(c, KK_ERR_IO, tensor,
                    "\"data_offsets\" missing or not [begin, end], two integers in [0, 2^53)");
    if (b > x)
        return fail(c, KK_ERR_IO, tensor, "data_offsets [%llu, %llu]: expected begin <= end",
                    (unsigned long long)b, (unsigned long long)x);
    if (x > data_bytes)
        return fail(c, KK_ERR_IO, tensor,
                    "data_offsets [%llu, %llu] end past the data region: expected end <= %llu "
                    "(the bytes after the header)",
                    (unsigned long long)b, (unsigned long long)x, (unsigned long long)data_bytes);
    /* Checked product: numel * element size may not fit, in a file that lies. */
    uint64_t want = 0, size = kk__st_elem_bytes(e->dtype);
    char shape[160];
    shape_text(e, shape, sizeof shape);
    if (__builtin_mul_overflow((uint64_t)e->numel, size, &want) || want != x - b)
        return fail(c, KK_ERR_IO, tensor,
                    "data_offsets [%llu, %llu] hold %llu bytes: expected %lld elements x %llu "
                    "bytes of %s (shape %s)",
                    (unsigned long long)b, (unsigned long long)x, (unsigned long long)(x - b),
                    (long long)e->numel, (unsigned long long)size, kk_dtype_name(e->dtype), shape);
    e->begin = b;
    e->end = x;
    return KK_OK;
}

static kk_status parse_tensor(const st_ctx *c, const cJSON *item, uint64_t data_bytes,
                              kk__st_entry *e) {
    const char *name = item->string;
    if (!name[0]) return fail(c, KK_ERR_IO, NULL, "a tensor has an empty name");
    if (!cJSON_IsObject(item))
        return fail(c, KK_ERR_IO, name,
                    "expected an object {\"dtype\", \"shape\", \"data_offsets\"}");
    kk_status st;
    if ((st = parse_dtype(c, name, cJSON_GetObjectItemCaseSensitive(item, "dtype"), &e->dtype)) ||
        (st = parse_shape(c, name, cJSON_GetObjectItemCaseSensitive(item, "shape"), e)) ||
        (st = parse_offsets(c, name, cJSON_GetObjectItemCaseSensitive(item, "data_offsets"),
                            data_bytes, e)))
        return st;
    if (!(e->name = strdup(name)))
        return kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "host allocation failed");
    return KK_OK;
}

/* __metadata__: a flat object of strings, as the format specifies. */
static kk_status check_metadata(const st_ctx *c, const cJSON *m) {
    if (!cJSON_IsObject(m))
        return fail(c, KK_ERR_IO, NULL, "\"__metadata__\" is not an object of strings");
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        if (!cJSON_IsString(it))
            return fail(c, KK_ERR_IO, NULL,
                        "\"__metadata__\" member \"%.100s\" is not a string: expected an object "
                        "of strings",
                        it->string);
    }
    return KK_OK;
}

/* ---- the whole header ---- */

static int by_name(const void *a, const void *b) {
    return strcmp(((const kk__st_entry *)a)->name, ((const kk__st_entry *)b)->name);
}

static int by_begin(const void *a, const void *b) {
    const kk__st_entry *x = *(const kk__st_entry *const *)a, *y = *(const kk__st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two non-empty tensors share a byte (empty ones occupy none). */
static kk_status check_overlap(const st_ctx *c, const kk__st_header *h) {
    if (h->count < 2) return KK_OK;
    const kk__st_entry **order = malloc(h->count * sizeof *order);
    if (!order) return kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "host allocation failed");
    size_t n = 0;
    for (size_t i = 0; i < h->count; i++)
        if (h->entries[i].end > h->entries[i].begin) order[n++] = &h->entries[i];
    qsort(order, n, sizeof *order, by_begin);
    kk_status st = KK_OK;
    for (size_t i = 1; i < n && !st; i++)
        if (order[i]->begin < order[i - 1]->end)
            st = fail(c, KK_ERR_IO, order[i]->name,
                      "data_offsets [%llu, %llu] overlap tensor '%.200s' [%llu, %llu]: expected "
                      "disjoint byte ranges",
                      (unsigned long long)order[i]->begin, (unsigned long long)order[i]->end,
                      order[i - 1]->name, (unsigned long long)order[i - 1]->begin,
                      (unsigned long long)order[i - 1]->end);
    free(order);
    return st;
}

static kk_status parse_json(const st_ctx *c, const cJSON *root, kk__st_header *h) {
    if (!cJSON_IsObject(root)) return fail(c, KK_ERR_IO, NULL, "header is not a JSON object");
    size_t n = 0;
    int metadata = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) n++;
    if (n && !(h->entries = calloc(n, sizeof *h->entries)))
        return kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "host allocation failed");
    kk_status st;
    cJSON_ArrayForEach(it, root) {
        if (strcmp(it->string, "__metadata__") == 0) {
            if (metadata++) return fail(c, KK_ERR_IO, NULL, "\"__metadata__\" appears twice");
            if ((st = check_metadata(c, it))) return st;
            continue;
        }
        if ((st = parse_tensor(c, it, h->data_bytes, &h->entries[h->count]))) return st;
        h->count++;
    }
    if (h->count) qsort(h->entries, h->count, sizeof *h->entries, by_name);
    for (size_t i = 1; i < h->count; i++)
        if (strcmp(h->entries[i].name, h->entries[i - 1].name) == 0)
            return fail(c, KK_ERR_IO, h->entries[i].name,
                        "appears twice in the header: expected unique names");
    return check_overlap(c, h);
}

kk_status kk__st_parse(const char *func, const char *path, const unsigned char *buf, size_t len,
                       kk__st_header *out) {
    const st_ctx c = {func, path};
    memset(out, 0, sizeof *out);
    if (len < 8)
        return fail(&c, KK_ERR_IO, NULL,
                    "file of %zu bytes is too short: expected an 8-byte header length first", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    if (n < 2 || n > KK_SAFETENSORS_MAX_HEADER_BYTES || n > len - 8)
        return fail(&c, KK_ERR_IO, NULL,
                    "header length %llu: expected 2 to %llu bytes, at most the %zu bytes after "
                    "the length",
                    (unsigned long long)n, (unsigned long long)KK_SAFETENSORS_MAX_HEADER_BYTES,
                    len - 8);
    const char *json = (const char *)buf + 8, *end = NULL;
    if (json[0] != '{')
        return fail(&c, KK_ERR_IO, NULL, "header does not start with '{': expected a JSON object");
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)n, &end, 0);
    if (!root)
        return fail(&c, KK_ERR_IO, NULL, "header is not valid JSON (near byte %lld of the header)",
                    end ? (long long)(end - json) : -1LL);
    /* Writers pad the header with spaces so the data starts aligned. */
    for (const char *p = end; p < json + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return fail(&c, KK_ERR_IO, NULL,
                        "header has bytes after its JSON object at byte %lld: expected only "
                        "space padding",
                        (long long)(p - json));
        }
    out->data_offset = 8 + n;
    out->data_bytes = len - 8 - n;
    kk_status st = parse_json(&c, root, out);
    cJSON_Delete(root);
    if (st) kk__st_free(out);
    return st;
}

void kk__st_free(kk__st_header *h) {
    if (!h) return;
    for (size_t i = 0; i < h->count; i++) free(h->entries[i].name);
    free(h->entries);
    memset(h, 0, sizeof *h);
}

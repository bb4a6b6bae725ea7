/* The backend registry and the public device API on top of it. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"

/* One line per backend. */
static const kk__backend *const k_registry[KK_BACKEND_COUNT] = {
    [KK_BACKEND_CPU] = &kk__cpu_backend,
    [KK_BACKEND_CUDA] = &kk__cuda_backend,
};

static const kk__backend *table(kk_backend_kind kind) {
    if ((int)kind < 0 || kind >= KK_BACKEND_COUNT) return NULL;
    return k_registry[kind];
}

const kk__backend *kk__backend_get(kk_backend_kind kind) {
    const kk__backend *b = table(kind);
    if (b) b->probe(b->context);
    return b;
}

/* ---- backends ---- */

const char *kk_backend_name(kk_backend_kind kind) {
    const kk__backend *b = table(kind);
    return b ? b->name : NULL;
}

int kk_backend_available(kk_backend_kind kind) {
    const kk__backend *b = kk__backend_get(kind);
    return b ? b->available(b->context) != 0 : 0;
}

const char *kk_backend_unavailable_reason(kk_backend_kind kind) {
    const kk__backend *b = kk__backend_get(kind);
    if (!b) return "invalid backend kind";
    if (b->available(b->context)) return "";
    const char *r = b->unavailable_reason(b->context);
    return r ? r : "";
}

int kk_backend_device_count(kk_backend_kind kind) {
    const kk__backend *b = kk__backend_get(kind);
    if (!b || !b->available(b->context)) return 0;
    return b->device_count(b->context);
}

/* ---- device specs ---- */

/* "\"cpu\", \"cuda\" or \"cuda:N\" (N = 0, 1, ...)" from the registry. */
static void accepted_forms(char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        const char *sep = k == 0 ? "" : (k == KK_BACKEND_COUNT - 1 ? " or " : ", ");
        int n = snprintf(buf + used, size - used, "%s%s", sep, k_registry[k]->spec_forms);
        if (n < 0 || (size_t)n >= size - used) return;
        used += (size_t)n;
    }
    snprintf(buf + used, size - used, " (N = device number: 0, 1, ...)");
}

static kk_status bad_spec(const char *func, const char *spec) {
    char expected[200];
    accepted_forms(expected, sizeof expected);
    if (!spec) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "spec", expected, "NULL");
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "spec", expected, "\"%.60s\"", spec);
}

/* Text only: "<name>" or "<name>:<digits>", nothing else (no sign, no blanks,
 * no trailing characters, no index above INT_MAX). */
static kk_status parse_text(const char *func, const char *spec, const kk__backend **out_b,
                            int *out_index) {
    if (!spec) return bad_spec(func, spec);
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        const kk__backend *b = k_registry[k];
        size_t n = strlen(b->name);
        if (strncmp(spec, b->name, n) != 0) continue;
        const char *rest = spec + n;
        if (*rest == 0) {
            *out_b = b;
            *out_index = 0;
            return KK_OK;
        }
        if (*rest != ':') continue;
        rest++;
        if (*rest < '0' || *rest > '9') return bad_spec(func, spec);
        long long v = 0;
        for (; *rest; rest++) {
            if (*rest < '0' || *rest > '9') return bad_spec(func, spec);
            v = v * 10 + (*rest - '0');
            if (v > INT_MAX) return bad_spec(func, spec);
        }
        *out_b = b;
        *out_index = (int)v;
        return KK_OK;
    }
    return bad_spec(func, spec);
}

kk_status kk__device_resolve(const char *func, const char *spec, const kk__backend **backend,
                             int *index) {
    const kk__backend *b = NULL;
    int i = 0;
    kk_status st = parse_text(func, spec, &b, &i);
    if (st) return st;
    if (backend) *backend = b;
    if (index) *index = i;
    b->probe(b->context);
    if (!b->available(b->context)) {
        const char *api_error =
            b->unavailable_error_name ? b->unavailable_error_name(b->context) : NULL;
        return kk__set_error(b->unavailable_status, func, "spec", spec, NULL, api_error,
                             "spec = %.40s: the %s backend is unavailable: %.700s", spec, b->name,
                             b->unavailable_reason(b->context));
    }
    int count = b->device_count(b->context);
    if (i >= count) {
        char expected[96];
        if (count == 1)
            snprintf(expected, sizeof expected, "%s:0 (one %s device is present)", b->name,
                     b->name);
        else
            snprintf(expected, sizeof expected, "an index below %d (%d %s devices are present)",
                     count, count, b->name);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "spec", expected, "\"%.60s\"", spec);
    }
    return KK_OK;
}

kk_status kk_device_parse(const char *spec, kk_backend_kind *backend, int *index) {
    const kk__backend *b = NULL;
    kk_status st = kk__device_resolve(__func__, spec, &b, index);
    if (b && backend) *backend = b->kind;
    return st;
}

kk_status kk_device_get_info(const char *spec, kk_device_info *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    const kk__backend *b = NULL;
    int index = 0;
    st = kk__device_resolve(__func__, spec, &b, &index);
    if (st) return st;
    out->backend = b->kind;
    out->index = index;
    if (b->kind == KK_BACKEND_CPU)
        snprintf(out->spec, sizeof out->spec, "%s", b->name);
    else
        snprintf(out->spec, sizeof out->spec, "%s:%d", b->name, index);
    out->device_count_in_backend = b->device_count(b->context);
    st = b->device_info(b->context, index, out, __func__);
    if (st) return st;
    return KK_OK;
}

kk_status kk_device_selftest(const char *spec) {
    const kk__backend *b = NULL;
    int index = 0;
    kk_status st = kk__device_resolve(__func__, spec, &b, &index);
    if (st) return st;
    if (b->device_usable) {
        st = b->device_usable(b->context, index, __func__);
        if (st) return st;
    }
    return b->selftest ? b->selftest(b->context, index, __func__) : KK_OK;
}

/* ---- best device ---- */

static pthread_once_t g_best_once = PTHREAD_ONCE_INIT;
static char g_best[32] = "cpu";

static void find_best(void) {
    /* The first usable device of the first available accelerator backend, in
     * registry order after the CPU. */
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        if (k == KK_BACKEND_CPU) continue;
        const kk__backend *b = kk__backend_get((kk_backend_kind)k);
        if (!b->available(b->context)) continue;
        int n = b->device_count(b->context);
        for (int i = 0; i < n; i++) {
            if (b->device_usable && b->device_usable(b->context, i, NULL) != KK_OK) continue;
            snprintf(g_best, sizeof g_best, "%s:%d", b->name, i);
            return;
        }
    }
}

const char *kk_device_best(void) {
    pthread_once(&g_best_once, find_best);
    return g_best;
}

/* ---- telemetry ---- */

kk_status kk_gpu_telemetry_read(int index, kk_gpu_telemetry *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    if (index < 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "index",
                             "a CUDA device number (0, 1, ...)", "%d", index);
    const kk__backend *b = kk__backend_get(KK_BACKEND_CUDA);
    if (b->available(b->context) && b->telemetry) {
        int count = b->device_count(b->context);
        if (index >= count) {
            char expected[64];
            snprintf(expected, sizeof expected, "below %d (CUDA devices present)", count);
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "index", expected, "%d", index);
        }
        return b->telemetry(b->context, index, out, __func__);
    }
    /* No CUDA backend (built without it, no usable GPU): NVML's own numbering. */
    return kk__nvml_read_by_index(index, out, __func__);
}

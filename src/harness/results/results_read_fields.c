/* Reading results JSON: typed getters that name the field path on failure,
 * and the environment, telemetry and options objects. Everything a file says
 * is checked for type and range before it lands in a struct, so a hostile
 * file gives KK_ERR_IO with the path, never a crash or a silent truncation. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/results/results_internal.h"

/* A short description of what a file holds at some place. */
static void describe(const cJSON *x, char *buf, size_t size) {
    if (!x)
        snprintf(buf, size, "missing");
    else if (cJSON_IsNumber(x))
        snprintf(buf, size, "%.17g", x->valuedouble);
    else if (cJSON_IsString(x))
        snprintf(buf, size, "\"%.60s\"", x->valuestring);
    else if (cJSON_IsBool(x))
        snprintf(buf, size, "%s", cJSON_IsTrue(x) ? "true" : "false");
    else if (cJSON_IsNull(x))
        snprintf(buf, size, "null");
    else if (cJSON_IsArray(x))
        snprintf(buf, size, "an array");
    else if (cJSON_IsObject(x))
        snprintf(buf, size, "an object");
    else
        snprintf(buf, size, "a value of unknown type");
}

int kk__rd_fail(kk__rd *c, const char *path, const char *key, const char *found,
                const char *expected) {
    if (c->st) return 0; /* keep the first failure */
    char full[320];
    if (path && path[0] && key)
        snprintf(full, sizeof full, "%.200s.%.100s", path, key);
    else
        snprintf(full, sizeof full, "%.200s", key ? key : path ? path : "");
    c->st = kk__set_error(KK_ERR_IO, c->func, full, found, expected, NULL,
                          "%.400s%s%s = %s: expected %s", c->source ? c->source : "",
                          c->source ? ": " : "", full, found, expected);
    return 0;
}

static int bad(kk__rd *c, const char *path, const char *key, const cJSON *x, const char *expected) {
    char found[96];
    describe(x, found, sizeof found);
    return kk__rd_fail(c, path, key, found, expected);
}

const cJSON *kk__rd_get(kk__rd *c, const cJSON *obj, const char *path, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!x) bad(c, path, key, NULL, "present");
    return x;
}

const cJSON *kk__rd_object(kk__rd *c, const cJSON *obj, const char *path, const char *key) {
    const cJSON *x = kk__rd_get(c, obj, path, key);
    if (x && !cJSON_IsObject(x)) return bad(c, path, key, x, "an object"), NULL;
    return x;
}

const cJSON *kk__rd_array(kk__rd *c, const cJSON *obj, const char *path, const char *key) {
    const cJSON *x = kk__rd_get(c, obj, path, key);
    if (x && !cJSON_IsArray(x)) return bad(c, path, key, x, "an array"), NULL;
    return x;
}

int kk__rd_double(kk__rd *c, const cJSON *obj, const char *path, const char *key, double lo,
                  double hi, double *out) {
    const cJSON *x = kk__rd_get(c, obj, path, key);
    if (!x) return 0;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo ||
        x->valuedouble > hi) {
        char expected[96];
        snprintf(expected, sizeof expected, "a finite number in [%g, %g]", lo, hi);
        return bad(c, path, key, x, expected);
    }
    *out = x->valuedouble;
    return 1;
}

int kk__rd_int(kk__rd *c, const cJSON *obj, const char *path, const char *key, double lo, double hi,
               long long *out) {
    const cJSON *x = kk__rd_get(c, obj, path, key);
    if (!x) return 0;
    double v = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    if (!(v >= lo && v <= hi && v == floor(v))) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in [%.0f, %.0f]", lo, hi);
        return bad(c, path, key, x, expected);
    }
    *out = (long long)v;
    return 1;
}

int kk__rd_size(kk__rd *c, const cJSON *obj, const char *path, const char *key, double hi,
                size_t *out) {
    long long v = 0;
    if (!kk__rd_int(c, obj, path, key, 0, hi, &v)) return 0;
    *out = (size_t)v;
    return 1;
}

int kk__rd_u64(kk__rd *c, const cJSON *obj, const char *path, const char *key, uint64_t *out) {
    long long v = 0;
    if (!kk__rd_int(c, obj, path, key, 0, KK__RESULTS_MAX_EXACT, &v)) return 0;
    *out = (uint64_t)v;
    return 1;
}

int kk__rd_bool(kk__rd *c, const cJSON *obj, const char *path, const char *key, int *out) {
    const cJSON *x = kk__rd_get(c, obj, path, key);
    if (!x) return 0;
    if (!cJSON_IsBool(x)) return bad(c, path, key, x, "true or false");
    *out = cJSON_IsTrue(x) ? 1 : 0;
    return 1;
}

static int string_value(kk__rd *c, const cJSON *x, const char *path, const char *key, char *buf,
                        size_t size) {
    if (!cJSON_IsString(x) || !x->valuestring || strlen(x->valuestring) >= size) {
        char expected[64];
        snprintf(expected, sizeof expected, "a string of at most %zu bytes", size - 1);
        return bad(c, path, key, x, expected);
    }
    memcpy(buf, x->valuestring, strlen(x->valuestring) + 1);
    return 1;
}

int kk__rd_string(kk__rd *c, const cJSON *obj, const char *path, const char *key, char *buf,
                  size_t size) {
    const cJSON *x = kk__rd_get(c, obj, path, key);
    return x ? string_value(c, x, path, key, buf, size) : 0;
}

/* Members added later: absent in older files, then "". */
static int optional_string(kk__rd *c, const cJSON *obj, const char *path, const char *key,
                           char *buf, size_t size) {
    buf[0] = 0;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    return x ? string_value(c, x, path, key, buf, size) : 1;
}

int kk__rd_u64_string(kk__rd *c, const cJSON *obj, const char *path, const char *key,
                      uint64_t *out) {
    char buf[24];
    if (!kk__rd_string(c, obj, path, key, buf, sizeof buf)) return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (!buf[0] || buf[strspn(buf, "0123456789")] || errno || (buf[0] == '0' && buf[1]))
        return kk__rd_fail(c, path, key, buf, "an unsigned 64-bit integer as a decimal string");
    *out = (uint64_t)v;
    return 1;
}

/* ---- objects ---- */

static int command_line(kk__rd *c, const cJSON *env, kk_bench_environment *e) {
    const cJSON *a = kk__rd_array(c, env, "environment", "command_line");
    if (!a) return 0;
    int n = cJSON_GetArraySize(a);
    if (n > 4096) return bad(c, "environment", "command_line", a, "at most 4096 arguments");
    if (n && !(e->argv = calloc((size_t)n, sizeof *e->argv)))
        return c->st = kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "out of memory"), 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsString(x) || !x->valuestring)
            return bad(c, "environment", "command_line[]", x, "a string");
        if (!(e->argv[e->argc] = strdup(x->valuestring)))
            return c->st = kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "out of memory"), 0;
        e->argc++;
    }
    return 1;
}

static int switches(kk__rd *c, const cJSON *env, kk_bench_environment *e) {
    const cJSON *o = kk__rd_object(c, env, "environment", "switches");
    if (!o) return 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, o) {
        if (e->nswitches == KK_BENCH_MAX_SWITCHES)
            return bad(c, "environment", "switches", o, "at most 32 switches");
        kk_bench_switch *s = &e->switches[e->nswitches];
        if (!x->string || !x->string[0] || strlen(x->string) >= sizeof s->name)
            return kk__rd_fail(c, "environment", "switches", "a name", "names of 1 to 63 bytes");
        for (int j = 0; j < e->nswitches; j++)
            if (strcmp(e->switches[j].name, x->string) == 0)
                return kk__rd_fail(c, "environment.switches", x->string, "twice", "unique names");
        memcpy(s->name, x->string, strlen(x->string) + 1);
        if (!string_value(c, x, "environment.switches", s->name, s->value, sizeof s->value))
            return 0;
        e->nswitches++;
    }
    return 1;
}

int kk__rd_environment(kk__rd *c, const cJSON *obj, kk_bench_environment *e) {
    const char *p = "environment";
    const cJSON *o = kk__rd_object(c, obj, "", p);
    long long i[7] = {0};
    int ok =
        o && kk__rd_string(c, o, p, "device", e->device, sizeof e->device) &&
        kk__rd_int(c, o, p, "device_index", 0, 1e6, &i[0]) &&
        kk__rd_string(c, o, p, "device_name", e->device_name, sizeof e->device_name) &&
        kk__rd_int(c, o, p, "cc_major", 0, 1000, &i[1]) &&
        kk__rd_int(c, o, p, "cc_minor", 0, 1000, &i[2]) &&
        kk__rd_int(c, o, p, "sm_count", 0, 1e6, &i[3]) &&
        kk__rd_u64(c, o, p, "l2_bytes", &e->l2_bytes) &&
        kk__rd_u64(c, o, p, "mem_total_bytes", &e->mem_total_bytes) &&
        kk__rd_int(c, o, p, "sm_clock_max_mhz", 0, 1e6, &i[4]) &&
        kk__rd_int(c, o, p, "mem_clock_max_mhz", 0, 1e6, &i[5]) &&
        kk__rd_string(c, o, p, "pci_bus_id", e->pci_bus_id, sizeof e->pci_bus_id) &&
        kk__rd_string(c, o, p, "driver_version", e->driver_version, sizeof e->driver_version) &&
        kk__rd_int(c, o, p, "cuda_runtime_version", 0, 1e7, &i[6]);
    long long drv = 0;
    ok = ok && kk__rd_int(c, o, p, "cuda_driver_version", 0, 1e7, &drv) &&
         kk__rd_string(c, o, p, "cpu_model", e->cpu_model, sizeof e->cpu_model) &&
         kk__rd_string(c, o, p, "cpu_governor", e->cpu_governor, sizeof e->cpu_governor) &&
         optional_string(c, o, p, "cpu_simd", e->cpu_simd, sizeof e->cpu_simd) &&
         optional_string(c, o, p, "cpu_isa", e->cpu_isa, sizeof e->cpu_isa) &&
         kk__rd_string(c, o, p, "hostname", e->hostname, sizeof e->hostname) &&
         kk__rd_string(c, o, p, "os", e->os, sizeof e->os) &&
         kk__rd_string(c, o, p, "kernelkit_version", e->kk_version, sizeof e->kk_version) &&
         kk__rd_string(c, o, p, "git_commit", e->git_commit, sizeof e->git_commit) &&
         kk__rd_string(c, o, p, "build_cuda", e->build_cuda, sizeof e->build_cuda) &&
         kk__rd_string(c, o, p, "timestamp_utc", e->timestamp_utc, sizeof e->timestamp_utc) &&
         command_line(c, o, e) && switches(c, o, e);
    if (!ok) return 0;
    e->device_index = (int)i[0];
    e->cc_major = (int)i[1];
    e->cc_minor = (int)i[2];
    e->sm_count = (int)i[3];
    e->sm_clock_max_mhz = (int)i[4];
    e->mem_clock_max_mhz = (int)i[5];
    e->cuda_runtime_version = (int)i[6];
    e->cuda_driver_version = (int)drv;
    return 1;
}

int kk__rd_telemetry(kk__rd *c, const cJSON *obj, const char *parent, const char *key,
                     kk_gpu_telemetry *t) {
    char path[360];
    snprintf(path, sizeof path, "%s.%s", parent, key);
    const cJSON *o = kk__rd_object(c, obj, parent, key);
    long long v[5] = {0};
    int ok =
        o && kk__rd_bool(c, o, path, "available", &t->available) &&
        kk__rd_string(c, o, path, "unavailable_reason", t->unavailable_reason,
                      sizeof t->unavailable_reason) &&
        kk__rd_double(c, o, path, "temperature_c", -300, 1e4, &t->temperature_c) &&
        kk__rd_int(c, o, path, "sm_clock_mhz", 0, 1e6, &v[0]) &&
        kk__rd_int(c, o, path, "sm_clock_max_mhz", 0, 1e6, &v[1]) &&
        kk__rd_int(c, o, path, "mem_clock_mhz", 0, 1e6, &v[2]) &&
        kk__rd_double(c, o, path, "power_w", 0, 1e7, &t->power_w) &&
        kk__rd_double(c, o, path, "power_limit_w", 0, 1e7, &t->power_limit_w) &&
        kk__rd_int(c, o, path, "utilization_gpu_pct", 0, 100, &v[3]) &&
        kk__rd_int(c, o, path, "utilization_mem_pct", 0, 100, &v[4]) &&
        kk__rd_u64(c, o, path, "throttle_reasons", &t->throttle_reasons) &&
        kk__rd_string(c, o, path, "throttle_text", t->throttle_text, sizeof t->throttle_text) &&
        kk__rd_string(c, o, path, "driver_version", t->driver_version, sizeof t->driver_version);
    if (!ok) return 0;
    t->sm_clock_mhz = (int)v[0];
    t->sm_clock_max_mhz = (int)v[1];
    t->mem_clock_mhz = (int)v[2];
    t->utilization_gpu_pct = (int)v[3];
    t->utilization_mem_pct = (int)v[4];
    return 1;
}

int kk__rd_flush_mode(kk__rd *c, const cJSON *obj, const char *path, int *out) {
    *out = KK_BENCH_FLUSH_WRITE;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, "flush_mode");
    if (!x) return 1;
    for (int i = 0; cJSON_IsString(x) && i < KK_BENCH_FLUSH_COUNT; i++)
        if (strcmp(x->valuestring, kk_bench_flush_name((kk_bench_flush)i)) == 0) {
            *out = i;
            return 1;
        }
    return bad(c, path, "flush_mode", x, "\"write\" or \"read\"");
}

int kk__rd_options(kk__rd *c, const cJSON *obj, const char *path, kk_bench_options *o) {
    char p[160];
    snprintf(p, sizeof p, "%s.options", path);
    const cJSON *x = kk__rd_object(c, obj, path, "options");
    long long v[3] = {0};
    int ok = x && kk__rd_double(c, x, p, "rse_target", 0, 1, &o->rse_target) &&
             kk__rd_size(c, x, p, "min_samples", KK_BENCH_MAX_SAMPLES_LIMIT, &o->min_samples) &&
             kk__rd_size(c, x, p, "max_samples", KK_BENCH_MAX_SAMPLES_LIMIT, &o->max_samples) &&
             kk__rd_double(c, x, p, "min_time_s", 0, 86400, &o->min_time_s) &&
             kk__rd_double(c, x, p, "time_budget_s", 0, 86400, &o->time_budget_s) &&
             kk__rd_size(c, x, p, "warmup_runs", 1e6, &o->warmup_runs) &&
             kk__rd_double(c, x, p, "warmup_time_s", 0, 3600, &o->warmup_time_s) &&
             kk__rd_size(c, x, p, "batch", KK_BENCH_MAX_BATCH, &o->batch) &&
             kk__rd_double(c, x, p, "batch_threshold_s", 0, 1, &o->batch_threshold_s) &&
             kk__rd_double(c, x, p, "batch_target_s", 0, 10, &o->batch_target_s) &&
             kk__rd_int(c, x, p, "cold", -1, 1, &v[0]) &&
             kk__rd_u64(c, x, p, "flush_bytes", &o->flush_bytes) &&
             kk__rd_flush_mode(c, x, p, &o->flush_mode) &&
             kk__rd_double(c, x, p, "throttle_fraction", 0, 1, &o->throttle_fraction) &&
             kk__rd_int(c, x, p, "pin_cpu", -1, 1 << 20, &v[1]) &&
             kk__rd_size(c, x, p, "check_every", 1e6, &o->check_every) &&
             kk__rd_int(c, x, p, "rse_resamples", 0, KK_STATS_MAX_RESAMPLES, &v[2]) &&
             kk__rd_u64_string(c, x, p, "seed", &o->seed) &&
             kk__rd_bool(c, x, p, "blocking_kernel", &o->blocking_kernel);
    if (!ok) return 0;
    o->cold = (int)v[0];
    o->pin_cpu = (int)v[1];
    o->rse_resamples = (int)v[2];
    o->stream = NULL;
    if (kk_bench_options_validate(o) != KK_OK) { /* rules between fields */
        /* copies: the last error's strings are overwritten by the next error */
        char arg[64], value[64], why[200];
        snprintf(arg, sizeof arg, "%.63s", kk_last_error()->argument);
        snprintf(value, sizeof value, "%.63s", kk_last_error()->value);
        snprintf(why, sizeof why, "%.199s", kk_last_error()->expected);
        return kk__rd_fail(c, path, arg, value, why);
    }
    return 1;
}

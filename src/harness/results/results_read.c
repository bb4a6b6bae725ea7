/* Reading results JSON back into a kk_bench_results (schema:
 * docs/harness-results.md). The reader is strict: every member the writer
 * writes must be there with its type and range, the counts must agree
 * (summary.n == measurement.samples_kept == the number of samples), names are
 * unique; unknown members are ignored, so a later minor addition to the
 * schema stays readable. Derived numbers (summary, throughput, shares) are
 * taken as written, not recomputed, so a document reads back bit for bit. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "harness/results/results_internal.h"

#define BIG 1.7976931348623157e308

static int read_params(kk__rd *c, const cJSON *o, const char *path, kk_bench_entry *e) {
    const cJSON *params = kk__rd_object(c, o, path, "params");
    if (!params) return 0;
    char p[300];
    snprintf(p, sizeof p, "%s.params", path);
    const cJSON *x;
    cJSON_ArrayForEach(x, params) {
        if (e->nparams == KK_BENCH_MAX_PARAMS)
            return kk__rd_fail(c, path, "params", "more", "at most 32 parameters");
        kk_bench_param *q = &e->params[e->nparams];
        if (!x->string || !x->string[0] || strlen(x->string) >= sizeof q->name)
            return kk__rd_fail(c, p, "(name)", "a name", "names of 1 to 31 bytes");
        for (int j = 0; j < e->nparams; j++)
            if (strcmp(e->params[j].name, x->string) == 0)
                return kk__rd_fail(c, p, x->string, "twice", "unique names");
        memcpy(q->name, x->string, strlen(x->string) + 1);
        if (cJSON_IsBool(x)) {
            q->kind = KK_BENCH_PARAM_BOOL;
            q->boolean = cJSON_IsTrue(x) ? 1 : 0;
        } else if (cJSON_IsString(x)) {
            q->kind = KK_BENCH_PARAM_STRING;
            if (!kk__rd_string(c, params, p, q->name, q->string, sizeof q->string)) return 0;
        } else {
            q->kind = KK_BENCH_PARAM_NUMBER;
            if (!kk__rd_double(c, params, p, q->name, -BIG, BIG, &q->number)) return 0;
        }
        e->nparams++;
    }
    return 1;
}

static int read_summary(kk__rd *c, const cJSON *o, const char *path, kk_stats_summary *s) {
    char p[300];
    snprintf(p, sizeof p, "%s.summary", path);
    const cJSON *x = kk__rd_object(c, o, path, "summary");
    long long resamples = 0;
    int ok = x && kk__rd_size(c, x, p, "n", KK_BENCH_MAX_SAMPLES_LIMIT, &s->n) &&
             kk__rd_double(c, x, p, "min", -BIG, BIG, &s->min) &&
             kk__rd_double(c, x, p, "max", -BIG, BIG, &s->max) &&
             kk__rd_double(c, x, p, "mean", -BIG, BIG, &s->mean) &&
             kk__rd_double(c, x, p, "stdev", 0, BIG, &s->stdev) &&
             kk__rd_double(c, x, p, "cv", -BIG, BIG, &s->cv) &&
             kk__rd_double(c, x, p, "median", -BIG, BIG, &s->median) &&
             kk__rd_double(c, x, p, "p95", -BIG, BIG, &s->p95) &&
             kk__rd_double(c, x, p, "p99", -BIG, BIG, &s->p99) &&
             kk__rd_double(c, x, p, "mad", 0, BIG, &s->mad) &&
             kk__rd_double(c, x, p, "median_ci_low", -BIG, BIG, &s->median_ci_low) &&
             kk__rd_double(c, x, p, "median_ci_high", -BIG, BIG, &s->median_ci_high) &&
             kk__rd_double(c, x, p, "median_rse", 0, BIG, &s->median_rse) &&
             kk__rd_int(c, x, p, "resamples", 0, KK_STATS_MAX_RESAMPLES, &resamples) &&
             kk__rd_u64_string(c, x, p, "seed", &s->seed);
    s->resamples = (int)resamples;
    return ok;
}

/* "share" is there exactly when the document has ceilings; its members only
 * when known (-1 in the struct otherwise). */
static int read_throughput(kk__rd *c, const cJSON *o, const char *path, int has_ceilings,
                           kk_bench_entry *e) {
    char p[300], ps[320];
    snprintf(p, sizeof p, "%s.throughput", path);
    snprintf(ps, sizeof ps, "%s.share", p);
    const cJSON *x = kk__rd_object(c, o, path, "throughput");
    if (!x || !kk__rd_double(c, x, p, "tflops", 0, BIG, &e->tflops) ||
        !kk__rd_double(c, x, p, "gbs", 0, BIG, &e->gbs))
        return 0;
    e->share_tflops = e->share_copy_gbs = e->share_read_gbs = -1;
    if (!has_ceilings) return 1;
    const cJSON *s = kk__rd_object(c, x, p, "share");
    if (!s) return 0;
    if (cJSON_GetObjectItemCaseSensitive(s, "tflops") &&
        (!kk__rd_double(c, s, ps, "tflops", 0, BIG, &e->share_tflops) ||
         !kk__rd_string(c, s, ps, "tflops_ceiling", e->tflops_ceiling, sizeof e->tflops_ceiling)))
        return 0;
    if (cJSON_GetObjectItemCaseSensitive(s, "copy_gbs") &&
        !kk__rd_double(c, s, ps, "copy_gbs", 0, BIG, &e->share_copy_gbs))
        return 0;
    if (cJSON_GetObjectItemCaseSensitive(s, "read_gbs") &&
        !kk__rd_double(c, s, ps, "read_gbs", 0, BIG, &e->share_read_gbs))
        return 0;
    return 1;
}

static int read_stop(kk__rd *c, const cJSON *o, const char *path, kk_bench_stop *stop) {
    char name[32];
    if (!kk__rd_string(c, o, path, "stop_reason", name, sizeof name)) return 0;
    for (int i = 0; i < KK_BENCH_STOP_COUNT; i++)
        if (strcmp(name, kk_bench_stop_name((kk_bench_stop)i)) == 0) {
            *stop = (kk_bench_stop)i;
            return 1;
        }
    return kk__rd_fail(c, path, "stop_reason", name, "one of none, rse, time_budget, max_samples");
}

static int read_measurement(kk__rd *c, const cJSON *o, const char *path, kk_bench_measurement *m) {
    char p[300];
    snprintf(p, sizeof p, "%s.measurement", path);
    const cJSON *x = kk__rd_object(c, o, path, "measurement");
    long long v[2] = {0};
    int ok = x && kk__rd_size(c, x, p, "samples_kept", KK_BENCH_MAX_SAMPLES_LIMIT, &m->n) &&
             kk__rd_size(c, x, p, "samples_dropped_throttle", KK__RESULTS_MAX_EXACT,
                         &m->dropped_throttle) &&
             kk__rd_size(c, x, p, "warmup_runs", KK__RESULTS_MAX_EXACT, &m->warmup_runs) &&
             kk__rd_size(c, x, p, "batch", KK_BENCH_MAX_BATCH, &m->batch) &&
             kk__rd_bool(c, x, p, "cold", &m->cold) &&
             kk__rd_u64(c, x, p, "flush_bytes", &m->flush_bytes) &&
             kk__rd_flush_mode(c, x, p, &m->flush_mode) &&
             kk__rd_bool(c, x, p, "blocking_kernel", &m->blocking_kernel) &&
             read_stop(c, x, p, &m->stop) &&
             kk__rd_double(c, x, p, "final_rse", 0, BIG, &m->final_rse) &&
             kk__rd_double(c, x, p, "sampled_time_s", 0, BIG, &m->sampled_time_s) &&
             kk__rd_double(c, x, p, "wall_time_s", 0, BIG, &m->wall_time_s) &&
             kk__rd_int(c, x, p, "pinned_cpu", -1, 1 << 20, &v[0]) &&
             kk__rd_bool(c, x, p, "throttle_detection", &m->throttle_detection) &&
             kk__rd_string(c, x, p, "throttle_note", m->throttle_note, sizeof m->throttle_note) &&
             kk__rd_int(c, x, p, "sm_clock_min_mhz", 0, 1e6, &v[1]) &&
             kk__rd_double(c, x, p, "sm_clock_mean_mhz", 0, 1e6, &m->sm_clock_mean_mhz) &&
             kk__rd_options(c, x, p, &m->options) &&
             kk__rd_telemetry(c, x, p, "telemetry_start", &m->telemetry_start) &&
             kk__rd_telemetry(c, x, p, "telemetry_end", &m->telemetry_end);
    if (!ok) return 0;
    m->pinned_cpu = (int)v[0];
    m->sm_clock_min_mhz = (int)v[1];
    if (m->batch < 1) return kk__rd_fail(c, p, "batch", "0", "at least 1");
    return 1;
}

/* A file thinned by scripts/thin-results.py keeps every step-th sample and
 * says so: "samples_thinned": {"kept": k, "of": N}, N the sampler's count
 * (measurement.samples_kept, summary.n). The entry then holds the k samples. */
static int read_thinned(kk__rd *c, const cJSON *o, const char *path, kk_bench_measurement *m) {
    if (!cJSON_GetObjectItemCaseSensitive(o, "samples_thinned")) return 1;
    const cJSON *t = kk__rd_object(c, o, path, "samples_thinned");
    char p[96];
    snprintf(p, sizeof p, "%s.samples_thinned", path);
    size_t kept = 0, of = 0;
    if (!t || !kk__rd_size(c, t, p, "kept", KK_BENCH_MAX_SAMPLES_LIMIT, &kept) ||
        !kk__rd_size(c, t, p, "of", KK_BENCH_MAX_SAMPLES_LIMIT, &of))
        return 0;
    if (of != m->n) return kk__rd_fail(c, p, "of", "not samples_kept", "measurement.samples_kept");
    if (kept < 1 || kept > of) return kk__rd_fail(c, p, "kept", "out of range", "1 .. of");
    m->n = kept;
    return 1;
}

static int read_samples(kk__rd *c, const cJSON *o, const char *path, kk_bench_measurement *m) {
    const cJSON *a = kk__rd_array(c, o, path, "samples");
    if (!a) return 0;
    size_t n = (size_t)cJSON_GetArraySize(a);
    if (n != m->n || n == 0) {
        char found[48];
        snprintf(found, sizeof found, "%zu values", n);
        return kk__rd_fail(c, path, "samples", found, "measurement.samples_kept (>= 1) values");
    }
    if (!(m->samples = malloc(n * sizeof *m->samples)))
        return c->st = kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "cannot hold %zu samples", n), 0;
    size_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (!(v >= 0 && v <= BIG)) {
            char key[48], found[48];
            snprintf(key, sizeof key, "samples[%zu]", i);
            snprintf(found, sizeof found, "%s",
                     cJSON_IsNumber(x) ? "out of range" : "not a number");
            return kk__rd_fail(c, path, key, found, "finite seconds >= 0");
        }
        m->samples[i++] = v;
    }
    return 1;
}

static int read_entry(kk__rd *c, const cJSON *o, size_t i, const kk_bench_results *r,
                      kk_bench_entry *e) {
    char path[64];
    snprintf(path, sizeof path, "benchmarks[%zu]", i);
    if (!cJSON_IsObject(o)) return kk__rd_fail(c, "", path, "not an object", "an object");
    int ok = kk__rd_string(c, o, path, "name", e->name, sizeof e->name) &&
             kk__rd_string(c, o, path, "op", e->op, sizeof e->op) && read_params(c, o, path, e) &&
             kk__rd_string(c, o, path, "device", e->device, sizeof e->device) &&
             kk__rd_string(c, o, path, "dtype", e->dtype, sizeof e->dtype) &&
             kk__rd_double(c, o, path, "flops_per_run", 0, BIG, &e->flops) &&
             kk__rd_double(c, o, path, "bytes_per_run", 0, BIG, &e->bytes) &&
             (!cJSON_GetObjectItemCaseSensitive(o, "threshold") ||
              kk__rd_double(c, o, path, "threshold", 1e-300, 1, &e->threshold)) &&
             read_summary(c, o, path, &e->summary) &&
             read_throughput(c, o, path, r->has_ceilings, e) && read_measurement(c, o, path, &e->m);
    const size_t sampled = ok ? e->m.n : 0; /* the sampler's count, before any thinning */
    ok = ok && read_thinned(c, o, path, &e->m) && read_samples(c, o, path, &e->m);
    if (!ok) return 0;
    if (!e->name[0]) return kk__rd_fail(c, path, "name", "\"\"", "a non-empty name");
    if (e->summary.n != sampled)
        return kk__rd_fail(c, path, "summary.n", "not samples_kept", "measurement.samples_kept");
    snprintf(e->m.device, sizeof e->m.device, "%s", e->device);
    return 1;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp((*(const kk_bench_entry *const *)a)->name,
                  (*(const kk_bench_entry *const *)b)->name);
}

static int unique_names(kk__rd *c, const kk_bench_results *r) {
    if (r->count < 2) return 1;
    const kk_bench_entry **v = malloc(r->count * sizeof *v);
    if (!v) return c->st = kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "out of memory"), 0;
    for (size_t i = 0; i < r->count; i++) v[i] = &r->entries[i];
    qsort(v, r->count, sizeof *v, cmp_names);
    const char *dup = NULL;
    for (size_t i = 1; i < r->count && !dup; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0) dup = v[i]->name;
    int ok = dup ? kk__rd_fail(c, "benchmarks", "name", dup, "names unique in the document") : 1;
    free(v);
    return ok;
}

static int read_ceilings(kk__rd *c, const cJSON *root, kk_bench_results *r) {
    if (!cJSON_GetObjectItemCaseSensitive(root, "ceilings")) return 1;
    const cJSON *o = kk__rd_object(c, root, "", "ceilings");
    kk_bench_ceilings *k = &r->ceilings;
    r->has_ceilings = 1;
    return o && kk__rd_double(c, o, "ceilings", "copy_gbs", 0, BIG, &k->copy_gbs) &&
           kk__rd_double(c, o, "ceilings", "read_gbs", 0, BIG, &k->read_gbs) &&
           kk__rd_double(c, o, "ceilings", "bf16_tflops", 0, BIG, &k->bf16_tflops) &&
           kk__rd_double(c, o, "ceilings", "fp8_tflops", 0, BIG, &k->fp8_tflops) &&
           kk__rd_double(c, o, "ceilings", "fp32_tflops", 0, BIG, &k->fp32_tflops);
}

static int read_schema(kk__rd *c, const cJSON *root) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "schema");
    const char *v = cJSON_IsString(s) ? s->valuestring : NULL;
    if (!v || strncmp(v, "kernelkit.bench/", 16) != 0)
        return kk__rd_fail(c, "", "schema", v ? v : "missing",
                           "\"" KK_BENCH_SCHEMA "\" (not a KernelKit benchmark results file)");
    if (strcmp(v, KK_BENCH_SCHEMA) == 0) return 1;
    c->st = kk__set_error(KK_ERR_UNSUPPORTED, c->func, "schema", v, KK_BENCH_SCHEMA, NULL,
                          "%.400s%sschema \"%.60s\" is not supported: this build reads "
                          "\"" KK_BENCH_SCHEMA "\"",
                          c->source ? c->source : "", c->source ? ": " : "", v);
    return 0;
}

static int read_root(kk__rd *c, const cJSON *root, kk_bench_results *r) {
    if (!cJSON_IsObject(root))
        return kk__rd_fail(c, "", "(document)", "not an object", "a JSON object");
    if (!read_schema(c, root) || !kk__rd_environment(c, root, &r->env) ||
        !read_ceilings(c, root, r))
        return 0;
    const cJSON *list = kk__rd_array(c, root, "", "benchmarks");
    if (!list) return 0;
    if (cJSON_GetArraySize(list) > KK__RESULTS_MAX_ENTRIES)
        return kk__rd_fail(c, "", "benchmarks", "too many", "at most 100000 benchmarks");
    const cJSON *x;
    cJSON_ArrayForEach(x, list) {
        if ((c->st = kk__results_reserve(r, c->func))) return 0;
        kk_bench_entry *e = &r->entries[r->count];
        memset(e, 0, sizeof *e);
        r->count++; /* owned from here on, so a failure below frees its samples */
        if (!read_entry(c, x, r->count - 1, r, e)) return 0;
    }
    return unique_names(c, r);
}

static kk_status parse(const char *text, size_t len, const char *func, const char *source,
                       kk_bench_results **out) {
    const char *end = NULL;
    cJSON *root = len ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    if (root) /* only white space may follow the document */
        while (end < text + len && strchr(" \t\r\n", *end) && *end) end++;
    if (!root || end != text + len) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        cJSON_Delete(root);
        return kk__set_error(KK_ERR_IO, func, source ? "path" : "text", source, "JSON", NULL,
                             "%.400s%snot valid JSON: %s at byte %zu of %zu", source ? source : "",
                             source ? ": " : "",
                             len == 0 ? "empty"
                             : root   ? "trailing data"
                                      : "syntax error",
                             at, len);
    }
    kk__rd c = {KK_OK, func, source};
    kk_bench_results *r = kk__results_new();
    int ok = r && read_root(&c, root, r);
    cJSON_Delete(root);
    if (!r) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "cannot allocate a document");
    if (!ok) {
        kk_bench_results_free(r);
        return c.st;
    }
    *out = r;
    return KK_OK;
}

kk_status kk_bench_results_from_json(const char *text, size_t len, kk_bench_results **out) {
    kk_status st = KK__CHECK_NOT_NULL(text);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (!st && len > KK_BENCH_MAX_FILE_BYTES)
        st = kk__arg_error(KK_ERR_UNSUPPORTED, __func__, "len", "at most 1 GiB", "%zu", len);
    return st ? st : parse(text, len, __func__, NULL, out);
}

static kk_status file_error(const char *path, const char *what, int err) {
    char buf[128];
    return kk__set_error(KK_ERR_IO, "kk_bench_results_read_file", "path", path,
                         "a readable results file", NULL, "%s %.400s: %s", what, path,
                         err ? strerror_r(err, buf, sizeof buf) : "not a regular file");
}

kk_status kk_bench_results_read_file(const char *path, kk_bench_results **out) {
    kk_status st = KK__CHECK_NOT_NULL(path);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    /* O_NONBLOCK: opening a FIFO must not hang; non-regular files are refused */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return file_error(path, "cannot open", errno);
    struct stat sb;
    int err = fstat(fd, &sb) != 0 ? errno : 0;
    if (err || !S_ISREG(sb.st_mode)) {
        close(fd);
        return file_error(path, "cannot read", err);
    }
    if ((uint64_t)sb.st_size > KK_BENCH_MAX_FILE_BYTES) {
        close(fd);
        return kk__set_error(KK_ERR_UNSUPPORTED, "kk_bench_results_read_file", "path", path,
                             "at most 1 GiB", NULL, "%.400s is over 1 GiB", path);
    }
    size_t size = (size_t)sb.st_size, used = 0;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_bench_results_read_file", "out of memory");
    }
    while (used < size) {
        ssize_t n = read(fd, buf + used, size - used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = 0;
    st = parse(buf, used, "kk_bench_results_read_file", path, out);
    free(buf);
    return st;
}

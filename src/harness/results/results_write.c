/* Results document -> JSON text and file (schema: docs/harness-results.md).
 * Numbers are written here, not by cJSON, so every double reads back to the
 * same bits (the shortest of %.15g..%.17g that strtod returns exactly), 64-bit
 * seeds as decimal strings (JSON numbers are exact only to 2^53), and members
 * in a fixed order, so writing a document read back gives the same bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "harness/results/results_internal.h"

typedef struct w {
    int failed; /* a cJSON allocation failed */
} w;

static void fmt_double(double v, char *buf, size_t size) {
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, size, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    for (char *s = buf; *s; s++) /* a locale with a decimal comma */
        if (*s == ',') *s = '.';
}

static void num(w *c, cJSON *o, const char *key, double v) {
    char buf[40];
    fmt_double(v, buf, sizeof buf);
    if (!cJSON_AddRawToObject(o, key, buf)) c->failed = 1;
}

static void integer(w *c, cJSON *o, const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    if (!cJSON_AddRawToObject(o, key, buf)) c->failed = 1;
}

static void unsig(w *c, cJSON *o, const char *key, unsigned long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", v);
    if (!cJSON_AddRawToObject(o, key, buf)) c->failed = 1;
}

static void seed(w *c, cJSON *o, const char *key, uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    if (!cJSON_AddStringToObject(o, key, buf)) c->failed = 1;
}

static void str(w *c, cJSON *o, const char *key, const char *v) {
    if (!cJSON_AddStringToObject(o, key, v)) c->failed = 1;
}

static void boolean(w *c, cJSON *o, const char *key, int v) {
    if (!cJSON_AddBoolToObject(o, key, v)) c->failed = 1;
}

static cJSON *child(w *c, cJSON *o, const char *key, int array) {
    cJSON *x = array ? cJSON_AddArrayToObject(o, key) : cJSON_AddObjectToObject(o, key);
    if (!x) c->failed = 1;
    return x ? x : o; /* keep going harmlessly; the failure is reported at the end */
}

static void environment(w *c, cJSON *root, const kk_bench_environment *e) {
    cJSON *o = child(c, root, "environment", 0);
    str(c, o, "device", e->device);
    integer(c, o, "device_index", e->device_index);
    str(c, o, "device_name", e->device_name);
    integer(c, o, "cc_major", e->cc_major);
    integer(c, o, "cc_minor", e->cc_minor);
    integer(c, o, "sm_count", e->sm_count);
    unsig(c, o, "l2_bytes", e->l2_bytes);
    unsig(c, o, "mem_total_bytes", e->mem_total_bytes);
    integer(c, o, "sm_clock_max_mhz", e->sm_clock_max_mhz);
    integer(c, o, "mem_clock_max_mhz", e->mem_clock_max_mhz);
    str(c, o, "pci_bus_id", e->pci_bus_id);
    str(c, o, "driver_version", e->driver_version);
    integer(c, o, "cuda_runtime_version", e->cuda_runtime_version);
    integer(c, o, "cuda_driver_version", e->cuda_driver_version);
    str(c, o, "cpu_model", e->cpu_model);
    str(c, o, "cpu_governor", e->cpu_governor);
    str(c, o, "cpu_simd", e->cpu_simd);
    str(c, o, "cpu_isa", e->cpu_isa);
    str(c, o, "hostname", e->hostname);
    str(c, o, "os", e->os);
    str(c, o, "kernelkit_version", e->kk_version);
    str(c, o, "git_commit", e->git_commit);
    str(c, o, "build_cuda", e->build_cuda);
    str(c, o, "timestamp_utc", e->timestamp_utc);
    cJSON *argv = child(c, o, "command_line", 1);
    for (int i = 0; i < e->argc; i++) {
        cJSON *s = cJSON_CreateString(e->argv[i]);
        if (!s || !cJSON_AddItemToArray(argv, s)) c->failed = 1;
    }
    cJSON *sw = child(c, o, "switches", 0);
    for (int i = 0; i < e->nswitches; i++) str(c, sw, e->switches[i].name, e->switches[i].value);
}

static void telemetry(w *c, cJSON *parent, const char *key, const kk_gpu_telemetry *t) {
    cJSON *o = child(c, parent, key, 0);
    boolean(c, o, "available", t->available);
    str(c, o, "unavailable_reason", t->unavailable_reason);
    num(c, o, "temperature_c", t->temperature_c);
    integer(c, o, "sm_clock_mhz", t->sm_clock_mhz);
    integer(c, o, "sm_clock_max_mhz", t->sm_clock_max_mhz);
    integer(c, o, "mem_clock_mhz", t->mem_clock_mhz);
    num(c, o, "power_w", t->power_w);
    num(c, o, "power_limit_w", t->power_limit_w);
    integer(c, o, "utilization_gpu_pct", t->utilization_gpu_pct);
    integer(c, o, "utilization_mem_pct", t->utilization_mem_pct);
    unsig(c, o, "throttle_reasons", t->throttle_reasons);
    str(c, o, "throttle_text", t->throttle_text);
    str(c, o, "driver_version", t->driver_version);
}

static void options(w *c, cJSON *parent, const kk_bench_options *p) {
    cJSON *o = child(c, parent, "options", 0);
    num(c, o, "rse_target", p->rse_target);
    unsig(c, o, "min_samples", p->min_samples);
    unsig(c, o, "max_samples", p->max_samples);
    num(c, o, "min_time_s", p->min_time_s);
    num(c, o, "time_budget_s", p->time_budget_s);
    unsig(c, o, "warmup_runs", p->warmup_runs);
    num(c, o, "warmup_time_s", p->warmup_time_s);
    unsig(c, o, "batch", p->batch);
    num(c, o, "batch_threshold_s", p->batch_threshold_s);
    num(c, o, "batch_target_s", p->batch_target_s);
    integer(c, o, "cold", p->cold);
    unsig(c, o, "flush_bytes", p->flush_bytes);
    str(c, o, "flush_mode", kk_bench_flush_name((kk_bench_flush)p->flush_mode));
    num(c, o, "throttle_fraction", p->throttle_fraction);
    integer(c, o, "pin_cpu", p->pin_cpu);
    unsig(c, o, "check_every", p->check_every);
    integer(c, o, "rse_resamples", p->rse_resamples);
    seed(c, o, "seed", p->seed);
    boolean(c, o, "blocking_kernel", p->blocking_kernel);
}

static void measurement(w *c, cJSON *parent, const kk_bench_measurement *m) {
    cJSON *o = child(c, parent, "measurement", 0);
    unsig(c, o, "samples_kept", m->n);
    unsig(c, o, "samples_dropped_throttle", m->dropped_throttle);
    unsig(c, o, "warmup_runs", m->warmup_runs);
    unsig(c, o, "batch", m->batch);
    boolean(c, o, "cold", m->cold);
    unsig(c, o, "flush_bytes", m->flush_bytes);
    str(c, o, "flush_mode", kk_bench_flush_name((kk_bench_flush)m->flush_mode));
    boolean(c, o, "blocking_kernel", m->blocking_kernel);
    str(c, o, "stop_reason", kk_bench_stop_name(m->stop));
    num(c, o, "final_rse", m->final_rse);
    num(c, o, "sampled_time_s", m->sampled_time_s);
    num(c, o, "wall_time_s", m->wall_time_s);
    integer(c, o, "pinned_cpu", m->pinned_cpu);
    boolean(c, o, "throttle_detection", m->throttle_detection);
    str(c, o, "throttle_note", m->throttle_note);
    integer(c, o, "sm_clock_min_mhz", m->sm_clock_min_mhz);
    num(c, o, "sm_clock_mean_mhz", m->sm_clock_mean_mhz);
    options(c, o, &m->options);
    telemetry(c, o, "telemetry_start", &m->telemetry_start);
    telemetry(c, o, "telemetry_end", &m->telemetry_end);
}

static void summary(w *c, cJSON *parent, const kk_stats_summary *s) {
    cJSON *o = child(c, parent, "summary", 0);
    unsig(c, o, "n", s->n);
    num(c, o, "min", s->min);
    num(c, o, "max", s->max);
    num(c, o, "mean", s->mean);
    num(c, o, "stdev", s->stdev);
    num(c, o, "cv", s->cv);
    num(c, o, "median", s->median);
    num(c, o, "p95", s->p95);
    num(c, o, "p99", s->p99);
    num(c, o, "mad", s->mad);
    num(c, o, "median_ci_low", s->median_ci_low);
    num(c, o, "median_ci_high", s->median_ci_high);
    num(c, o, "median_rse", s->median_rse);
    integer(c, o, "resamples", s->resamples);
    seed(c, o, "seed", s->seed);
}

static void throughput(w *c, cJSON *parent, const kk_bench_results *r, const kk_bench_entry *e) {
    cJSON *o = child(c, parent, "throughput", 0);
    num(c, o, "tflops", e->tflops);
    num(c, o, "gbs", e->gbs);
    if (!r->has_ceilings) return;
    cJSON *s = child(c, o, "share", 0);
    if (e->share_tflops >= 0) {
        str(c, s, "tflops_ceiling", e->tflops_ceiling);
        num(c, s, "tflops", e->share_tflops);
    }
    if (e->share_copy_gbs >= 0) num(c, s, "copy_gbs", e->share_copy_gbs);
    if (e->share_read_gbs >= 0) num(c, s, "read_gbs", e->share_read_gbs);
}

static void entry(w *c, cJSON *array, const kk_bench_results *r, const kk_bench_entry *e) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(array, o)) {
        cJSON_Delete(o);
        c->failed = 1;
        return;
    }
    str(c, o, "name", e->name);
    str(c, o, "op", e->op);
    cJSON *params = child(c, o, "params", 0);
    for (int i = 0; i < e->nparams; i++) {
        const kk_bench_param *p = &e->params[i];
        if (p->kind == KK_BENCH_PARAM_NUMBER)
            num(c, params, p->name, p->number);
        else if (p->kind == KK_BENCH_PARAM_BOOL)
            boolean(c, params, p->name, p->boolean);
        else
            str(c, params, p->name, p->string);
    }
    str(c, o, "device", e->device);
    str(c, o, "dtype", e->dtype);
    num(c, o, "flops_per_run", e->flops);
    num(c, o, "bytes_per_run", e->bytes);
    if (e->threshold > 0) num(c, o, "threshold", e->threshold);
    summary(c, o, &e->summary);
    throughput(c, o, r, e);
    measurement(c, o, &e->m);
    cJSON *samples = child(c, o, "samples", 1);
    char buf[40];
    for (size_t i = 0; i < e->m.n && !c->failed; i++) {
        fmt_double(e->m.samples[i], buf, sizeof buf);
        cJSON *x = cJSON_CreateRaw(buf);
        if (!x || !cJSON_AddItemToArray(samples, x)) c->failed = 1;
    }
}

kk_status kk_bench_results_to_json(const kk_bench_results *r, char **text) {
    kk_status st = KK__CHECK_NOT_NULL(r);
    if (!st) st = KK__CHECK_NOT_NULL(text);
    if (st) return st;
    w c = {0};
    cJSON *root = cJSON_CreateObject();
    if (!root) return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "cannot build the JSON tree");
    str(&c, root, "schema", KK_BENCH_SCHEMA);
    environment(&c, root, &r->env);
    if (r->has_ceilings) {
        cJSON *o = child(&c, root, "ceilings", 0);
        num(&c, o, "copy_gbs", r->ceilings.copy_gbs);
        num(&c, o, "read_gbs", r->ceilings.read_gbs);
        num(&c, o, "bf16_tflops", r->ceilings.bf16_tflops);
        num(&c, o, "fp8_tflops", r->ceilings.fp8_tflops);
        num(&c, o, "fp32_tflops", r->ceilings.fp32_tflops);
    }
    cJSON *list = child(&c, root, "benchmarks", 1);
    for (size_t i = 0; i < r->count && !c.failed; i++) entry(&c, list, r, &r->entries[i]);
    char *out = c.failed ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (!out) return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "cannot build the JSON text");
    *text = out;
    return KK_OK;
}

static kk_status write_all(int fd, const char *text, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return KK_ERR_IO;
        text += n;
        len -= (size_t)n;
    }
    return KK_OK;
}

kk_status kk_bench_results_write_file(const kk_bench_results *r, const char *path) {
    kk_status st = KK__CHECK_NOT_NULL(path);
    char *text = NULL;
    if (!st) st = kk_bench_results_to_json(r, &text);
    if (st) return st;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        free(text);
        return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "out of memory");
    }
    /* a temporary file beside the target, renamed over it: readers never see half a file */
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
        (void)fchmod(fd, 0644);
        if (write_all(fd, text, strlen(text)) || write_all(fd, "\n", 1)) err = errno ? errno : EIO;
        if (close(fd) != 0 && !err) err = errno;
        if (!err && rename(tmp, path) != 0) err = errno;
        if (err) unlink(tmp);
    }
    free(text);
    free(tmp);
    if (!err) return KK_OK;
    char reason[128];
    return kk__set_error(KK_ERR_IO, __func__, "path", path, "a writable file path", NULL,
                         "cannot write %.400s: %s", path, strerror_r(err, reason, sizeof reason));
}

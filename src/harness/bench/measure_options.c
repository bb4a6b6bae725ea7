/* Sampler options: defaults, validation; stop-reason names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/bench/measure_internal.h"

void kk_bench_options_default(kk_bench_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    /* nvbench's stopping rule: 0.5% noise after >= 10 samples and >= 0.5 s,
     * 15 s at most (docs/harness-results.md). */
    o->rse_target = 0.005;
    o->min_samples = 10;
    o->max_samples = 100000;
    o->min_time_s = 0.5;
    o->time_budget_s = 15.0;
    o->warmup_runs = 3;
    o->warmup_time_s = 0.05;
    o->batch = 0;
    o->batch_threshold_s = 20e-6;
    o->batch_target_s = 200e-6;
    o->cold = -1;
    o->flush_bytes = 0;
    o->flush_mode = KK_BENCH_FLUSH_WRITE; /* GPU MODE's rule */
    o->throttle_fraction = 0.75;
    o->pin_cpu = -1;
    o->check_every = 10;
    o->rse_resamples = 0;
    o->seed = KK_STATS_DEFAULT_SEED;
    o->blocking_kernel = 1;
    o->stream = NULL;
}

static const char *const k_stop_names[KK_BENCH_STOP_COUNT] = {
    [KK_BENCH_STOP_NONE] = "none",
    [KK_BENCH_STOP_RSE] = "rse",
    [KK_BENCH_STOP_TIME_BUDGET] = "time_budget",
    [KK_BENCH_STOP_MAX_SAMPLES] = "max_samples",
};

const char *kk_bench_stop_name(kk_bench_stop stop) {
    if ((int)stop < 0 || stop >= KK_BENCH_STOP_COUNT) return "?";
    return k_stop_names[stop];
}

kk_status kk_bench_stop_parse(const char *name, kk_bench_stop *out) {
    kk_status st = KK__CHECK_NOT_NULL(name);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    for (int i = 0; i < KK_BENCH_STOP_COUNT; i++)
        if (strcmp(name, k_stop_names[i]) == 0) {
            *out = (kk_bench_stop)i;
            return KK_OK;
        }
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name",
                         "one of none, rse, time_budget, max_samples", "\"%.100s\"", name);
}

static const char *const k_flush_names[KK_BENCH_FLUSH_COUNT] = {
    [KK_BENCH_FLUSH_WRITE] = "write",
    [KK_BENCH_FLUSH_READ] = "read",
};

const char *kk_bench_flush_name(kk_bench_flush mode) {
    if ((int)mode < 0 || mode >= KK_BENCH_FLUSH_COUNT) return "?";
    return k_flush_names[mode];
}

kk_status kk_bench_flush_parse(const char *name, kk_bench_flush *out) {
    kk_status st = KK__CHECK_NOT_NULL(name);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    for (int i = 0; i < KK_BENCH_FLUSH_COUNT; i++)
        if (strcmp(name, k_flush_names[i]) == 0) {
            *out = (kk_bench_flush)i;
            return KK_OK;
        }
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name", "write or read", "\"%.100s\"",
                         name);
}

/* A double option in [lo, hi] (finite); `open_lo` excludes lo itself. */
static kk_status check_real(const char *field, double v, double lo, double hi, int open_lo,
                            const char *expected) {
    int ok = isfinite(v) && v <= hi && (open_lo ? v > lo : v >= lo);
    if (ok) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_bench_options_validate", field, expected,
                         "%.17g", v);
}

static kk_status check_size(const char *field, size_t v, size_t lo, size_t hi,
                            const char *expected) {
    if (v >= lo && v <= hi) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_bench_options_validate", field, expected,
                         "%zu", v);
}

static kk_status check_int(const char *field, long v, long lo, long hi, const char *expected) {
    if (v >= lo && v <= hi) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_bench_options_validate", field, expected,
                         "%ld", v);
}

static kk_status check_counts(const kk_bench_options *o) {
    kk_status st = check_size("options.max_samples", o->max_samples, 1, KK_BENCH_MAX_SAMPLES_LIMIT,
                              "1 to 10000000");
    if (!st)
        st = check_size("options.min_samples", o->min_samples, 1, o->max_samples,
                        "1 to options.max_samples");
    if (!st) st = check_size("options.warmup_runs", o->warmup_runs, 1, 1000000, "1 to 1000000");
    if (!st)
        st = check_size("options.batch", o->batch, 0, KK_BENCH_MAX_BATCH,
                        "0 (auto) to 10000 (KK_BENCH_MAX_BATCH)");
    if (!st) st = check_size("options.check_every", o->check_every, 1, 1000000, "1 to 1000000");
    if (!st && o->rse_resamples != 0)
        st = check_int("options.rse_resamples", o->rse_resamples, KK_STATS_RSE_MIN_RESAMPLES,
                       KK_STATS_MAX_RESAMPLES, "0 (default) or 100 to 1000000");
    return st;
}

static kk_status check_times(const kk_bench_options *o) {
    kk_status st = check_real("options.rse_target", o->rse_target, 0.0, 1.0, 0,
                              "0 (no RSE stop) to 1, e.g. 0.005");
    if (!st)
        st = check_real("options.min_time_s", o->min_time_s, 0.0, 86400.0, 0, "0 to 86400 seconds");
    if (!st)
        st = check_real("options.time_budget_s", o->time_budget_s, 0.0, 86400.0, 1,
                        "more than 0 and at most 86400 seconds");
    if (!st)
        st = check_real("options.warmup_time_s", o->warmup_time_s, 0.0, 3600.0, 0,
                        "0 to 3600 seconds");
    if (!st)
        st = check_real("options.batch_threshold_s", o->batch_threshold_s, 0.0, 1.0, 0,
                        "0 (never batch) to 1 second");
    if (!st)
        st = check_real("options.batch_target_s", o->batch_target_s, 0.0, 10.0, 1,
                        "more than 0 and at most 10 seconds");
    if (!st)
        st = check_real("options.throttle_fraction", o->throttle_fraction, 0.0, 1.0, 0,
                        "0 (never drop) to 1, e.g. 0.75");
    return st;
}

kk_status kk_bench_options_validate(const kk_bench_options *o) {
    kk_status st = KK__CHECK_NOT_NULL(o);
    if (!st) st = check_counts(o);
    if (!st) st = check_times(o);
    if (!st) st = check_int("options.cold", o->cold, -1, 1, "-1 (auto), 0 or 1");
    if (!st)
        st = check_int("options.flush_mode", o->flush_mode, 0, KK_BENCH_FLUSH_COUNT - 1,
                       "KK_BENCH_FLUSH_WRITE (0) or KK_BENCH_FLUSH_READ (1)");
    if (!st) st = check_int("options.pin_cpu", o->pin_cpu, -1, 1 << 20, "-1 (no) or a CPU number");
    if (!st) st = check_int("options.blocking_kernel", o->blocking_kernel, 0, 1, "0 or 1");
    if (!st && o->cold == 1 && o->batch > 1)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_bench_options_validate", "options.batch",
                           "0 or 1 with options.cold = 1 (a batch runs back to back, hot)", "%zu",
                           o->batch);
    if (!st && o->flush_bytes > ((uint64_t)1 << 40))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_bench_options_validate",
                           "options.flush_bytes", "0 (auto) to 2^40", "%llu",
                           (unsigned long long)o->flush_bytes);
    return st;
}

void kk_bench_measurement_free(kk_bench_measurement *m) {
    if (!m) return;
    free(m->samples);
    memset(m, 0, sizeof *m);
}

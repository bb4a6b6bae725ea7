/* labels: unit cpu */
/* The benchmark sampler on the CPU (include/kernelkit/bench.h): it stops on
 * the RSE target after enough samples, measures the work (10% more work gives
 * a median about 10% larger), stops on the time budget when the target cannot
 * be reached and on max_samples, batches tiny work, flushes caches when asked,
 * pins and unpins the thread, passes callback errors through and names bad
 * options. Timings here check that the sampler measures; they are not speed
 * goals, and their bounds are loose. A test that counts samples sets the time
 * budget out of reach, so a slow or loaded machine cannot cut it short. */
#include "testutil.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "harness/bench/measure_internal.h"
#include "kernelkit/bench.h"

typedef struct work {
    long iters;
    double jitter; /* > 0: each run does up to (1 + 20*jitter^2)x the work, heavy-tailed */
    uint64_t rng;
    int calls;
    int fail_at; /* > 0: the fail_at-th call fails */
    int record;  /* the failure records a detail */
} work;

static volatile unsigned long sink;

static kk_status busy(void *ctx, kk_stream stream) {
    work *w = ctx;
    assert_null(stream);
    if (++w->calls == w->fail_at) {
        kk_backend_kind kind;
        int index;
        if (w->record) kk_device_parse("not-a-device", &kind, &index); /* records a detail */
        return w->record ? KK_ERR_INVALID_ARGUMENT : KK_ERR_ATTENTION;
    }
    long n = w->iters;
    if (w->jitter > 0) {
        w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(w->rng >> 11) / 9007199254740992.0;
        n = (long)(n * (1.0 + 20.0 * w->jitter * w->jitter * u * u * u));
    }
    for (long i = 0; i < n; i++) sink += (unsigned long)i;
    return KK_OK;
}

static kk_bench_options fast(void) {
    kk_bench_options o;
    kk_bench_options_default(&o);
    o.min_time_s = 0.05;
    o.warmup_time_s = 0.005;
    o.time_budget_s = 5;
    return o;
}

/* For tests that assert a sample count: neither the budget nor the RSE target
 * can be what stops, only max_samples. */
static kk_bench_options counted(size_t samples) {
    kk_bench_options o = fast();
    o.time_budget_s = 3600;
    o.rse_target = 0;
    o.min_time_s = 0;
    o.max_samples = o.min_samples = samples;
    return o;
}

static void stops_on_rse_target(void **state) {
    (void)state;
    work w = {.iters = 100000};
    kk_bench_options o = fast();
    o.time_budget_s = 600; /* the RSE target, not the budget, must be what stops */
    o.rse_target = 0.01;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.stop, KK_BENCH_STOP_RSE);
    assert_true(m.n >= o.min_samples);
    assert_true(m.final_rse < o.rse_target);
    assert_true(m.sampled_time_s >= o.min_time_s);
    assert_true(m.warmup_runs >= o.warmup_runs);
    assert_int_equal(m.batch, 1); /* a run of ~100 us is above the 20 us threshold */
    assert_int_equal(m.cold, 0);  /* CPU default: hot */
    assert_int_equal(m.flush_bytes, 0);
    assert_string_equal(m.device, "cpu");
    assert_int_equal(m.pinned_cpu, -1);
    assert_int_equal(m.throttle_detection, 0);
    assert_int_equal(m.dropped_throttle, 0);
    assert_int_equal(m.telemetry_start.available, 0);
    assert_true(m.wall_time_s >= m.sampled_time_s);
    assert_int_equal((size_t)w.calls, m.warmup_runs + m.n);
    for (size_t i = 0; i < m.n; i++) assert_true(m.samples[i] > 0);
    assert_true(m.options.rse_target == o.rse_target);
    kk_bench_measurement_free(&m);
    assert_null(m.samples);
}

static double median_of(long iters) {
    work w = {.iters = iters};
    kk_bench_options o = fast();
    o.min_time_s = 0.1;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    kk_stats_summary s;
    kk_assert_ok(kk_stats_summarize(m.samples, m.n, 1, 0, &s));
    kk_bench_measurement_free(&m);
    return s.median;
}

/* 10% more work, about 10% more time: the sampler times the work, not itself.
 * A loaded machine can disturb one pair; five tries. */
static void ten_percent_more_work_is_ten_percent_slower(void **state) {
    (void)state;
    double ratio = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        double a = median_of(200000), b = median_of(220000);
        ratio = b / a;
        if (ratio > 1.03 && ratio < 1.20) return;
        printf("attempt %d: ratio %.4f (%.3g s vs %.3g s)\n", attempt, ratio, b, a);
    }
    fail_msg("median ratio %.4f for 1.10x the work, expected 1.03 .. 1.20", ratio);
}

static void budget_stop_when_target_unreachable(void **state) {
    (void)state;
    work w = {.iters = 20000, .jitter = 1.0, .rng = 42};
    kk_bench_options o = fast();
    o.min_time_s = 0;
    o.time_budget_s = 0.2;
    o.rse_target = 0.0005;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.stop, KK_BENCH_STOP_TIME_BUDGET);
    assert_true(m.final_rse >= o.rse_target);
    assert_true(m.wall_time_s >= 0.2 && m.wall_time_s < 2.0);
    assert_true(m.n >= 1);
    kk_bench_measurement_free(&m);
}

static void max_samples_stop(void **state) {
    (void)state;
    work w = {.iters = 50000};
    kk_bench_options o = counted(15);
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.stop, KK_BENCH_STOP_MAX_SAMPLES);
    assert_int_equal(m.n, 15);
    assert_true(m.final_rse >= 0); /* computed at the end all the same */
    kk_bench_measurement_free(&m);
}

static void tiny_work_is_batched(void **state) {
    (void)state;
    work w = {.iters = 50}; /* well under a microsecond */
    kk_bench_options o = fast();
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_true(m.batch > 1);
    assert_true(m.batch <= KK_BENCH_MAX_BATCH);
    assert_int_equal(m.cold, 0);
    kk_stats_summary s;
    kk_assert_ok(kk_stats_summarize(m.samples, m.n, 1, 0, &s));
    /* a sample (batch runs) lasts about batch_target_s or more */
    assert_true(s.median * (double)m.batch > 0.3 * o.batch_target_s);
    assert_true(s.median < o.batch_threshold_s);
    kk_bench_measurement_free(&m);

    /* cold turns batching off: each run gets its own flush */
    o.cold = 1;
    o.flush_bytes = 1 << 20;
    w.calls = 0;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.batch, 1);
    assert_int_equal(m.cold, 1);
    assert_int_equal(m.flush_bytes, 1 << 20);
    kk_bench_measurement_free(&m);

    /* and a fixed batch is taken as given */
    o.cold = 0;
    o.batch = 7;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.batch, 7);
    kk_bench_measurement_free(&m);
}

static void cold_cpu_samples_use_the_llc_sized_flush(void **state) {
    (void)state;
    work w = {.iters = 20000};
    kk_bench_options o = counted(10);
    o.cold = 1;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.cold, 1);
    assert_int_equal(m.n, 10);
    assert_int_equal(m.stop, KK_BENCH_STOP_MAX_SAMPLES);
    assert_int_equal(m.flush_bytes, kk__bench_cpu_flush_default());
    assert_true(m.flush_bytes >= (1u << 20) && m.flush_bytes <= KK__BENCH_CPU_FLUSH_CAP);
    assert_int_equal(m.flush_mode, KK_BENCH_FLUSH_WRITE); /* the default */
    assert_int_equal(m.options.flush_mode, KK_BENCH_FLUSH_WRITE);
    kk_bench_measurement_free(&m);
}

/* The default flush: twice the LLC, capped, a fallback when sysfs has none. */
static void cpu_flush_size_follows_the_llc_up_to_the_cap(void **state) {
    (void)state;
    const uint64_t mib = 1u << 20;
    assert_int_equal(kk__bench_cpu_flush_for_llc(32 * mib), 64 * mib);   /* an EPYC CCX */
    assert_int_equal(kk__bench_cpu_flush_for_llc(105 * mib), 210 * mib); /* a Sapphire Rapids */
    assert_int_equal(kk__bench_cpu_flush_for_llc(128 * mib), KK__BENCH_CPU_FLUSH_CAP);
    assert_int_equal(kk__bench_cpu_flush_for_llc(480 * mib), KK__BENCH_CPU_FLUSH_CAP);
    assert_int_equal(kk__bench_cpu_flush_for_llc(0), KK__BENCH_CPU_FLUSH_FALLBACK);
    assert_int_equal(kk__bench_cpu_flush_for_llc((uint64_t)1 << 40), KK__BENCH_CPU_FLUSH_FALLBACK);
    uint64_t d = kk__bench_cpu_flush_default(); /* this machine's */
    assert_true(d >= mib && d <= KK__BENCH_CPU_FLUSH_CAP);
}

/* The read flush sweeps the same buffer with loads and is recorded. */
static void cold_cpu_samples_can_flush_by_reading(void **state) {
    (void)state;
    work w = {.iters = 20000};
    kk_bench_options o = counted(10);
    o.cold = 1;
    o.flush_mode = KK_BENCH_FLUSH_READ;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.cold, 1);
    assert_int_equal(m.flush_bytes, kk__bench_cpu_flush_default());
    assert_int_equal(m.flush_mode, KK_BENCH_FLUSH_READ);
    assert_int_equal(m.options.flush_mode, KK_BENCH_FLUSH_READ);
    assert_int_equal(m.n, 10);
    assert_int_equal(m.stop, KK_BENCH_STOP_MAX_SAMPLES);
    for (size_t i = 0; i < m.n; i++) assert_true(m.samples[i] > 0);
    kk_bench_measurement_free(&m);

    /* an odd size (not a multiple of the sweep's word) is fine too, and a size
     * above the cap is taken as given */
    o.flush_bytes = (1u << 20) + 13;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.flush_bytes, (1u << 20) + 13);
    assert_int_equal(m.n, 10);
    kk_bench_measurement_free(&m);
    o = counted(2);
    o.cold = 1;
    o.flush_bytes = KK__BENCH_CPU_FLUSH_CAP + 4096;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.flush_bytes, KK__BENCH_CPU_FLUSH_CAP + 4096);
    kk_bench_measurement_free(&m);
}

static void pins_and_restores_the_thread(void **state) {
    (void)state;
    cpu_set_t before, after;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    int cpu = -1;
    for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++)
        if (CPU_ISSET(i, &before)) cpu = i;
    work w = {.iters = 20000};
    kk_bench_options o = fast();
    o.pin_cpu = cpu;
    o.min_time_s = 0;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", busy, &w, &o, &m));
    assert_int_equal(m.pinned_cpu, cpu);
    kk_bench_measurement_free(&m);
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&before, &after));

    int outside = -1; /* a CPU this thread may not use */
    for (int i = 0; i < CPU_SETSIZE && outside < 0; i++)
        if (!CPU_ISSET(i, &before)) outside = i;
    if (outside < 0) return;
    o.pin_cpu = outside;
    kk_assert_status(kk_bench_measure("cpu", busy, &w, &o, &m), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "options.pin_cpu");
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&before, &after));
}

static void callback_errors_stop_the_measurement(void **state) {
    (void)state;
    kk_bench_options o = fast();
    kk_bench_measurement m;
    /* a failure with its own detail keeps it */
    work w = {.iters = 1000, .fail_at = 5, .record = 1};
    kk_assert_status(kk_bench_measure("cpu", busy, &w, &o, &m), KK_ERR_INVALID_ARGUMENT);
    assert_int_equal(w.calls, 5);
    assert_null(m.samples);
    assert_int_equal(m.n, 0);
    kk_assert_contains(kk_last_error_message(), "not-a-device");
    /* one without gets a message that says where it came from */
    kk_clear_error();
    work w2 = {.iters = 1000, .fail_at = 30};
    kk_assert_status(kk_bench_measure("cpu", busy, &w2, &o, &m), KK_ERR_ATTENTION);
    kk_assert_contains(kk_last_error_message(), "callback returned KK_ERR_ATTENTION");
    assert_null(m.samples);
}

typedef struct bad_option {
    const char *field;
    void (*set)(kk_bench_options *o);
} bad_option;

#define BAD(field_, expr)                                                                          \
    static void set_##field_(kk_bench_options *o) { expr; }
BAD(rse_target, o->rse_target = -0.1)
BAD(rse_target_nan, o->rse_target = NAN)
BAD(min_samples, o->min_samples = 0)
BAD(min_samples_big, o->min_samples = o->max_samples + 1)
BAD(max_samples, o->max_samples = 0)
BAD(min_time_s, o->min_time_s = -1)
BAD(time_budget_s, o->time_budget_s = 0)
BAD(time_budget_inf, o->time_budget_s = INFINITY)
BAD(warmup_runs, o->warmup_runs = 0)
BAD(batch, o->batch = KK_BENCH_MAX_BATCH + 1)
BAD(batch_target_s, o->batch_target_s = 0)
BAD(cold, o->cold = 2)
BAD(cold_batch, (o->cold = 1, o->batch = 4))
BAD(throttle_fraction, o->throttle_fraction = 1.5)
BAD(pin_cpu, o->pin_cpu = -2)
BAD(check_every, o->check_every = 0)
BAD(rse_resamples, o->rse_resamples = 50)
BAD(blocking_kernel, o->blocking_kernel = 3)
BAD(flush_mode, o->flush_mode = 2)
BAD(flush_mode_negative, o->flush_mode = -1)

static void bad_options_are_named(void **state) {
    (void)state;
    static const bad_option cases[] = {
        {"options.rse_target", set_rse_target},
        {"options.rse_target", set_rse_target_nan},
        {"options.min_samples", set_min_samples},
        {"options.min_samples", set_min_samples_big},
        {"options.max_samples", set_max_samples},
        {"options.min_time_s", set_min_time_s},
        {"options.time_budget_s", set_time_budget_s},
        {"options.time_budget_s", set_time_budget_inf},
        {"options.warmup_runs", set_warmup_runs},
        {"options.batch", set_batch},
        {"options.batch_target_s", set_batch_target_s},
        {"options.cold", set_cold},
        {"options.batch", set_cold_batch},
        {"options.throttle_fraction", set_throttle_fraction},
        {"options.pin_cpu", set_pin_cpu},
        {"options.check_every", set_check_every},
        {"options.rse_resamples", set_rse_resamples},
        {"options.blocking_kernel", set_blocking_kernel},
        {"options.flush_mode", set_flush_mode},
        {"options.flush_mode", set_flush_mode_negative},
    };
    work w = {.iters = 10};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kk_bench_options o;
        kk_bench_options_default(&o);
        kk_assert_ok(kk_bench_options_validate(&o));
        cases[i].set(&o);
        kk_bench_measurement m;
        kk_assert_status(kk_bench_measure("cpu", busy, &w, &o, &m), KK_ERR_INVALID_ARGUMENT);
        assert_string_equal(kk_last_error()->argument, cases[i].field);
        assert_null(m.samples);
    }
    assert_int_equal(w.calls, 0); /* nothing ran */
}

static void bad_arguments(void **state) {
    (void)state;
    work w = {.iters = 10};
    kk_bench_measurement m;
    kk_assert_status(kk_bench_measure("cpu", NULL, &w, NULL, &m), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_measure("cpu", busy, &w, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_measure("gpu0", busy, &w, NULL, &m), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_measure(NULL, busy, &w, NULL, &m), KK_ERR_INVALID_ARGUMENT);
    if (!kk_backend_available(KK_BACKEND_CUDA))
        kk_assert_status(kk_bench_measure("cuda:0", busy, &w, NULL, &m), KK_ERR_CUDA_UNAVAILABLE);
    assert_int_equal(w.calls, 0);
}

static void stop_names(void **state) {
    (void)state;
    for (int i = 0; i < KK_BENCH_STOP_COUNT; i++) {
        kk_bench_stop s;
        kk_assert_ok(kk_bench_stop_parse(kk_bench_stop_name((kk_bench_stop)i), &s));
        assert_int_equal(s, i);
    }
    assert_string_equal(kk_bench_stop_name(KK_BENCH_STOP_TIME_BUDGET), "time_budget");
    assert_string_equal(kk_bench_stop_name((kk_bench_stop)99), "?");
    kk_bench_stop s;
    kk_assert_status(kk_bench_stop_parse("bored", &s), KK_ERR_INVALID_ARGUMENT);
}

static void flush_names(void **state) {
    (void)state;
    kk_bench_options o;
    kk_bench_options_default(&o);
    assert_int_equal(o.flush_mode, KK_BENCH_FLUSH_WRITE); /* GPU MODE's rule by default */
    assert_string_equal(kk_bench_flush_name(KK_BENCH_FLUSH_WRITE), "write");
    assert_string_equal(kk_bench_flush_name(KK_BENCH_FLUSH_READ), "read");
    assert_string_equal(kk_bench_flush_name((kk_bench_flush)7), "?");
    for (int i = 0; i < KK_BENCH_FLUSH_COUNT; i++) {
        kk_bench_flush f;
        kk_assert_ok(kk_bench_flush_parse(kk_bench_flush_name((kk_bench_flush)i), &f));
        assert_int_equal(f, i);
    }
    kk_bench_flush f = KK_BENCH_FLUSH_READ;
    kk_assert_status(kk_bench_flush_parse("Read", &f), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "name");
    kk_assert_contains(kk_last_error_message(), "write or read");
    kk_assert_contains(kk_last_error_message(), "Read");
    assert_int_equal(f, KK_BENCH_FLUSH_READ); /* untouched */
    kk_assert_status(kk_bench_flush_parse(NULL, &f), KK_ERR_INVALID_ARGUMENT);
    o.flush_mode = 5;
    kk_assert_status(kk_bench_options_validate(&o), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "options.flush_mode");
    assert_string_equal(kk_last_error()->value, "5");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stops_on_rse_target),
        cmocka_unit_test(ten_percent_more_work_is_ten_percent_slower),
        cmocka_unit_test(budget_stop_when_target_unreachable),
        cmocka_unit_test(max_samples_stop),
        cmocka_unit_test(tiny_work_is_batched),
        cmocka_unit_test(cold_cpu_samples_use_the_llc_sized_flush),
        cmocka_unit_test(cpu_flush_size_follows_the_llc_up_to_the_cap),
        cmocka_unit_test(cold_cpu_samples_can_flush_by_reading),
        cmocka_unit_test(pins_and_restores_the_thread),
        cmocka_unit_test(callback_errors_stop_the_measurement),
        cmocka_unit_test(bad_options_are_named),
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(stop_names),
        cmocka_unit_test(flush_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

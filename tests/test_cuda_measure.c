/* labels: gpu */
/* The benchmark sampler on cuda:0: a kernel that spins for a known time (by
 * the GPU's nanosecond timer) is measured by the events at that time, with
 * and without the blocking kernel; a tiny kernel is batched into a CUDA graph
 * (hot); cold samples allocate an L2-sized flush buffer that is freed
 * afterwards (device memory returns), 2x the L2 for the read flush; cold
 * samples of a kernel reading half the L2 are slower than hot ones under both
 * flush modes (the data was evicted); telemetry and the throttle fields are
 * filled; launch errors and callback errors stop the measurement with the
 * status and the CUDA error name; the caller's current device is kept.
 * Skips (77) without a GPU. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "backend/memory_internal.h"
#include "cuda/bench_cuda.h"
#include "harness/bench/measure_internal.h"
#include "kernelkit/bench.h"

#define DEV "cuda:0"

typedef struct job {
    double seconds; /* > 0: spin this long; 0: tiny kernel; < 0: bad launch */
    int calls;
    int probe_at; /* at this call, read the device's free memory */
    uint64_t free_then;
    int fail_at;
    const void *buf; /* not NULL: read `bytes` of it (the read-flush kernel as work) */
    size_t bytes;
} job;

static kk_status run(void *ctx, kk_stream stream) {
    job *j = ctx;
    assert_non_null(stream); /* the sampler's own stream */
    if (++j->calls == j->fail_at) return KK_ERR_ATTENTION;
    if (j->calls == j->probe_at) {
        kk_device_info d;
        kk_assert_ok(kk_device_get_info(DEV, &d));
        j->free_then = d.mem_free_bytes;
    }
    if (j->buf) return kk__bench_test_read(stream, j->buf, j->bytes);
    if (j->seconds > 0) return kk__bench_test_spin(stream, j->seconds);
    if (j->seconds == 0) return kk__bench_test_tiny(stream);
    return kk__bench_test_bad_launch(stream);
}

static kk_bench_options opts(void) {
    kk_bench_options o;
    kk_bench_options_default(&o);
    o.min_time_s = 0.2;
    o.warmup_time_s = 0.01;
    o.time_budget_s = 5;
    return o;
}

static double median(const kk_bench_measurement *m) {
    kk_stats_summary s;
    kk_assert_ok(kk_stats_summarize(m->samples, m->n, 1, 0, &s));
    return s.median;
}

static uint64_t device_free(void) {
    kk_device_info d;
    kk_assert_ok(kk_device_get_info(DEV, &d));
    return d.mem_free_bytes;
}

static void spin_is_measured_at_its_duration(void **state) {
    (void)state;
    kk_device_info info;
    kk_assert_ok(kk_device_get_info(DEV, &info));
    int before = -1, after = -2;
    kk_assert_ok(kk__mem_test_current_device(&before));
    job j = {.seconds = 1e-3};
    kk_bench_options o = opts();
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    double med = median(&m);
    printf("1 ms spin: median %.6g s, n %zu, stop %s, rse %.3g, dropped %zu, clock min %d mean "
           "%.0f MHz\n",
           med, m.n, kk_bench_stop_name(m.stop), m.final_rse, m.dropped_throttle,
           m.sm_clock_min_mhz, m.sm_clock_mean_mhz);
    assert_true(med > 0.98e-3 && med < 1.10e-3);
    assert_string_equal(m.device, DEV);
    assert_int_equal(m.batch, 1);
    assert_int_equal(m.cold, 1);
    assert_int_equal(m.flush_bytes, info.l2_bytes);
    assert_int_equal(m.blocking_kernel, 1);
    assert_true(m.n >= o.min_samples);
    /* telemetry: present where NVML is; the throttle fields always */
    if (m.telemetry_start.available) {
        assert_true(m.telemetry_start.sm_clock_max_mhz > 0);
        assert_true(m.telemetry_end.available);
        assert_int_equal(m.throttle_detection, 1);
        assert_true(m.sm_clock_min_mhz > 0 && m.sm_clock_mean_mhz >= m.sm_clock_min_mhz);
    } else {
        printf("no telemetry: %s\n", m.telemetry_start.unavailable_reason);
        assert_int_equal(m.throttle_detection, 0);
        assert_true(m.throttle_note[0] != 0);
    }
    assert_true(m.dropped_throttle < m.n + 1000);
    kk_bench_measurement_free(&m);
    kk_assert_ok(kk__mem_test_current_device(&after));
    assert_int_equal(before, after);

    /* without the blocking kernel, launch latency is timed too: still ~1 ms */
    o.blocking_kernel = 0;
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    assert_int_equal(m.blocking_kernel, 0);
    double med2 = median(&m);
    printf("1 ms spin, no blocking kernel: median %.6g s\n", med2);
    assert_true(med2 > 0.98e-3 && med2 < 1.10e-3);
    kk_bench_measurement_free(&m);
}

static void tiny_kernel_is_batched_in_a_graph(void **state) {
    (void)state;
    job j = {.seconds = 0};
    kk_bench_options o = opts();
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    double med = median(&m);
    printf("tiny kernel: batch %zu, median %.4g s per run, n %zu, stop %s\n", m.batch, med, m.n,
           kk_bench_stop_name(m.stop));
    assert_true(m.batch > 1);
    assert_int_equal(m.cold, 0); /* batches are hot */
    assert_int_equal(m.flush_bytes, 0);
    assert_true(med > 0 && med < o.batch_threshold_s);
    /* a batch of N runs takes at least about batch_target_s */
    assert_true(med * (double)m.batch > 0.3 * o.batch_target_s);
    kk_bench_measurement_free(&m);

    o.batch = 50; /* forced */
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    assert_int_equal(m.batch, 50);
    kk_bench_measurement_free(&m);

    o.batch = 1; /* no batching: every run cold, one at a time */
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    assert_int_equal(m.batch, 1);
    assert_int_equal(m.cold, 1);
    kk_bench_measurement_free(&m);
}

static void flush_buffer_is_allocated_and_freed(void **state) {
    (void)state;
    kk_device_info info;
    kk_assert_ok(kk_device_get_info(DEV, &info));
    job warm = {.seconds = 1e-4};
    kk_bench_options o = opts();
    o.min_time_s = 0.02;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure(DEV, run, &warm, &o, &m)); /* context, module loading */
    kk_bench_measurement_free(&m);

    uint64_t before = device_free();
    job j = {.seconds = 1e-4, .probe_at = 200}; /* well into the cold samples */
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    assert_true((size_t)j.calls >= 200);
    assert_int_equal(m.cold, 1);
    uint64_t after = device_free();
    printf("free: before %llu, during %llu, after %llu; L2 %llu\n", (unsigned long long)before,
           (unsigned long long)j.free_then, (unsigned long long)after,
           (unsigned long long)info.l2_bytes);
    assert_true(before - j.free_then >= info.l2_bytes * 9 / 10); /* the buffer was there */
    /* and it is gone (measured against `during`: another process on the GPU,
     * such as a concurrent test creating its context, may take memory too) */
    assert_true(after >= j.free_then + info.l2_bytes * 9 / 10);
    kk_bench_measurement_free(&m);
}

static void read_flush_buffer_is_twice_the_l2(void **state) {
    (void)state;
    kk_device_info info;
    kk_assert_ok(kk_device_get_info(DEV, &info));
    kk_bench_options o = opts();
    o.min_time_s = 0.02;
    o.flush_mode = KK_BENCH_FLUSH_READ;
    uint64_t before = device_free();
    job j = {.seconds = 1e-4, .probe_at = 200};
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
    assert_int_equal(m.cold, 1);
    assert_int_equal(m.flush_mode, KK_BENCH_FLUSH_READ);
    assert_int_equal(m.flush_bytes, 2 * info.l2_bytes);
    uint64_t after = device_free();
    printf("read flush: free before %llu, during %llu, after %llu\n", (unsigned long long)before,
           (unsigned long long)j.free_then, (unsigned long long)after);
    assert_true(before - j.free_then >= info.l2_bytes * 2 * 9 / 10);
    assert_true(after >= j.free_then + info.l2_bytes * 2 * 9 / 10);
    /* the 100 us spin is still measured at its duration behind the read kernel */
    assert_true(median(&m) > 0.98e-4 && median(&m) < 1.15e-4);
    kk_bench_measurement_free(&m);
}

/* A kernel reading half the L2 (so that, hot, it is served from the L2):
 * its cold samples, after either flush, read HBM and are slower. */
static void cold_samples_miss_the_l2_in_both_modes(void **state) {
    (void)state;
    kk_device_info info;
    kk_assert_ok(kk_device_get_info(DEV, &info));
    size_t bytes = (size_t)info.l2_bytes / 2 / 16 * 16;
    void *buf = NULL;
    kk_assert_ok(kk__bench_test_alloc(bytes, &buf));
    job j = {.buf = buf, .bytes = bytes};
    double hot = 0, cold[KK_BENCH_FLUSH_COUNT] = {0};
    for (int mode = 0; mode < KK_BENCH_FLUSH_COUNT; mode++) {
        kk_bench_options o = opts();
        o.min_time_s = 0.05;
        o.batch = 1;
        o.flush_mode = mode;
        kk_bench_measurement m;
        if (mode == 0) {
            o.cold = 0;
            kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
            assert_int_equal(m.cold, 0);
            hot = median(&m);
            kk_bench_measurement_free(&m);
        }
        o.cold = 1;
        kk_assert_ok(kk_bench_measure(DEV, run, &j, &o, &m));
        assert_int_equal(m.cold, 1);
        assert_int_equal(m.flush_mode, mode);
        cold[mode] = median(&m);
        kk_bench_measurement_free(&m);
    }
    printf("read of %zu bytes: hot %.3f us, cold %.3f us (write flush), %.3f us (read flush)\n",
           bytes, hot * 1e6, cold[KK_BENCH_FLUSH_WRITE] * 1e6, cold[KK_BENCH_FLUSH_READ] * 1e6);
    kk__bench_test_free(buf);
    assert_true(cold[KK_BENCH_FLUSH_WRITE] > 1.2 * hot);
    assert_true(cold[KK_BENCH_FLUSH_READ] > 1.2 * hot);
}

static void errors_stop_the_measurement(void **state) {
    (void)state;
    kk_bench_options o = opts();
    kk_bench_measurement m;
    job bad = {.seconds = -1};
    kk_assert_status(kk_bench_measure(DEV, run, &bad, &o, &m), KK_ERR_KERNEL_LAUNCH);
    /* CUDA 13 says InvalidValue for too many threads per block, older ones InvalidConfiguration */
    const char *name = kk_last_error()->cuda_error;
    if (strcmp(name, "cudaErrorInvalidValue") != 0 &&
        strcmp(name, "cudaErrorInvalidConfiguration") != 0)
        fail_msg("cuda_error \"%s\" (%s)", name, kk_last_error_message());
    assert_int_equal(bad.calls, 1);
    assert_null(m.samples);

    job fails = {.seconds = 1e-4, .fail_at = 40}; /* 100 us: not batched */
    kk_assert_status(kk_bench_measure(DEV, run, &fails, &o, &m), KK_ERR_ATTENTION);
    assert_null(m.samples);

    /* nothing sticky is left: the next measurement works */
    job ok = {.seconds = 1e-4};
    o.min_time_s = 0.01;
    kk_assert_ok(kk_bench_measure(DEV, run, &ok, &o, &m));
    kk_bench_measurement_free(&m);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spin_is_measured_at_its_duration),
        cmocka_unit_test(tiny_kernel_is_batched_in_a_graph),
        cmocka_unit_test(flush_buffer_is_allocated_and_freed),
        cmocka_unit_test(read_flush_buffer_is_twice_the_l2),
        cmocka_unit_test(cold_samples_miss_the_l2_in_both_modes),
        cmocka_unit_test(errors_stop_the_measurement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

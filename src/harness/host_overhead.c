/* kk_op_host_overhead: what a kk_op_run call costs the host, the device's work
 * left out (issue 4's goal: under 5 us per call).
 *
 * Why batches timed whole: one call takes well under a microsecond to a few
 * microseconds, near the clock's own cost, so calls_per_sample calls are timed
 * together and the sample is their mean. On a GPU the stream is drained after
 * each batch, outside the timed region: a batch of 64 launches always fits in
 * the launch queue, so no timed call ever waits for the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/runner_internal.h"
#include "ops/dispatch.h"
#include "harness/measure_internal.h"
#include "kernelkit/bench.h"
#include "kernelkit/harness_run.h"

#define FUNC "kk_op_host_overhead"
#define WARMUP_CALLS 256

static kk_status do_nothing(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)p;
    (void)t;
    (void)s;
    return KK_OK;
}

typedef struct overhead_job {
    const kk_case *c;
    const char *device;
    kk_tensor **tensors;
    kk_op_kernel_fn kernel; /* do_nothing, or NULL for the row's own */
    kk_stream stream;       /* where launches go (CUDA) */
    int drain;              /* synchronize the stream after each batch */
    int bare;               /* no kk_op_run at all: the CUDA runtime's own launch */
} overhead_job;

static kk_status call_once(const overhead_job *j) {
    if (j->bare) return kk__bench_test_tiny(j->stream);
    return kk__op_run_with(&j->c->params, j->tensors, j->stream, j->kernel, KK__RUN_STRICT);
}

static kk_status measure(const overhead_job *j, size_t samples, size_t calls,
                         kk_bench_measurement *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->device, sizeof m->device, "%s", j->device);
    m->samples = malloc(samples * sizeof *m->samples);
    if (!m->samples)
        return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "no host memory for %zu samples", samples);
    const double t_start = kk__bench_now();
    kk_status st = KK_OK;
    for (size_t i = 0; st == KK_OK && i < WARMUP_CALLS; i++) st = call_once(j);
    if (st == KK_OK && j->drain) st = kk_op_synchronize(j->device, j->stream);
    for (size_t s = 0; st == KK_OK && s < samples; s++) {
        const double t0 = kk__bench_now();
        for (size_t i = 0; st == KK_OK && i < calls; i++) st = call_once(j);
        const double t1 = kk__bench_now();
        if (st == KK_OK && j->drain) st = kk_op_synchronize(j->device, j->stream);
        m->samples[s] = (t1 - t0) / (double)calls;
        m->sampled_time_s += t1 - t0;
        m->n = s + 1;
    }
    if (st != KK_OK) {
        kk_bench_measurement_free(m);
        return st;
    }
    m->warmup_runs = WARMUP_CALLS;
    m->batch = calls;
    m->stop = KK_BENCH_STOP_MAX_SAMPLES;
    m->wall_time_s = kk__bench_now() - t_start;
    m->pinned_cpu = -1;
    snprintf(m->throttle_note, sizeof m->throttle_note,
             "host time of kk_op_run calls (CLOCK_MONOTONIC); device work excluded");
    kk_bench_options_default(&m->options);
    m->options.batch = calls;
    m->options.max_samples = samples;
    m->options.cold = 0;
    m->options.stream = NULL;
    m->final_rse = 0.0;
    return KK_OK;
}

kk_status kk_op_host_overhead(const kk_case *c, const char *device, size_t samples,
                              size_t calls_per_sample, kk_host_overhead *out) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st == KK_OK && (!out->dispatch || !out->launch))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "out->dispatch, out->launch",
                           "two caller-provided measurements", "NULL");
    if (st != KK_OK) return st;
    if (!device) device = kk_device_best();
    kk_backend_kind kind;
    int index;
    if ((st = kk_device_parse(device, &kind, &index)) != KK_OK) return st;
    if (!kk__op_slot(c->params.op, kind).run)
        return kk__error(KK_ERR_UNSUPPORTED, c->params.op->name, "no %s kernel for %s",
                         kk_backend_name(kind), c->params.op->name);
    if (samples == 0) samples = 200;
    if (calls_per_sample == 0) calls_per_sample = 64;
    if (samples > 1000000 || calls_per_sample > 1024)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "samples, calls_per_sample",
                             "at most 1000000 and 1024 (a batch must fit the launch queue)",
                             "%zu, %zu", samples, calls_per_sample);
    out->has_launch = out->has_bare = 0;
    kk_tensor *t[KK_OP_MAX_TENSORS] = {0};
    int n = 0, prev = 0;
    overhead_job j = {.c = c, .device = device, .tensors = t, .kernel = do_nothing};
    /* On a GPU the whole measurement runs with the tensors' device current
     * (kk_op_run's fast path) and launches on a non-blocking stream. */
    if (kind != KK_BACKEND_CPU) st = kk__bench_stream_create(index, &prev, &j.stream);
    if (st == KK_OK) st = kk__case_tensors(c, device, t, &n);
    if (st == KK_OK) st = measure(&j, samples, calls_per_sample, out->dispatch);
    if (st == KK_OK && kind != KK_BACKEND_CPU) {
        j.kernel = NULL;
        j.drain = 1;
        st = measure(&j, samples, calls_per_sample, out->launch);
        if (st == KK_OK) out->has_launch = 1;
        j.bare = 1;
        if (st == KK_OK && out->bare) st = measure(&j, samples, calls_per_sample, out->bare);
        if (st == KK_OK && out->bare) out->has_bare = 1;
        if (st != KK_OK) {
            kk_bench_measurement_free(out->dispatch);
            if (out->has_launch) kk_bench_measurement_free(out->launch);
            out->has_launch = 0;
        }
    }
    if (kind != KK_BACKEND_CPU) kk__bench_stream_destroy(j.stream, prev);
    for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
    return st;
}

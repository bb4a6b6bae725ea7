/* kk_op_host_overhead: what a kk_op_run call, and a call of the op's typed
 * entry point, costs the host, the device's work left out. One call is near
 * the clock's own cost, so batches of calls are timed whole; on a GPU the
 * stream is drained after each batch, outside the timed region.
 * docs/harness.md, "Host overhead". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/check/check_internal.h"
#include "backend/backend.h"
#include "ops/dispatch.h"
#include "harness/bench/measure_internal.h"
#include "ops/entry.h"
#include "kernelkit/bench.h"
#include "kernelkit/cases.h"

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
    kk_op_kernel_fn entry;  /* the op's typed entry point's adapter (ops/entry.h), or NULL */
    kk_stream stream;       /* where launches go (CUDA) */
    int drain;              /* synchronize the stream after each batch */
    int bare;               /* no kk_op_run at all: the runtime's own launch */
    const kk__backend *backend;
} overhead_job;

static kk_status call_once(const overhead_job *j) {
    if (j->bare) return j->backend->launch_floor(j->backend->context, j->stream);
    /* the entry point reaches kk_op_run with no override: the thread's is set */
    if (j->entry) return j->entry(&j->c->params, j->tensors, j->stream);
    return kk__op_run_with(&j->c->params, j->tensors, j->stream, j->kernel, KK__RUN_STRICT);
}

static void measurement_done(const overhead_job *j, size_t calls, double t_start,
                             kk_bench_measurement *m) {
    m->warmup_runs = WARMUP_CALLS;
    m->batch = calls;
    m->stop = KK_BENCH_STOP_MAX_SAMPLES;
    m->wall_time_s = kk__bench_now() - t_start;
    m->pinned_cpu = -1;
    snprintf(m->throttle_note, sizeof m->throttle_note,
             "host time of %s calls "
             "(CLOCK_MONOTONIC); device work excluded",
             j->entry ? "typed entry point" : "kk_op_run");
    kk_bench_options_default(&m->options);
    m->options.batch = calls;
    m->options.max_samples = m->n;
    m->options.cold = 0;
    m->options.stream = NULL;
    m->final_rse = 0.0;
}

/* Jobs j[0..n) measured together: each sample times one batch of every job in
 * turn, so a slow moment of a shared machine falls on all of them alike. */
static kk_status measure(const overhead_job *j, int n, size_t samples, size_t calls,
                         kk_bench_measurement **m) {
    kk_status st = KK_OK;
    int ready = 0;
    for (; ready < n; ready++) {
        memset(m[ready], 0, sizeof *m[ready]);
        snprintf(m[ready]->device, sizeof m[ready]->device, "%s", j[ready].device);
        m[ready]->samples = malloc(samples * sizeof *m[ready]->samples);
        if (!m[ready]->samples) {
            st = kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "no host memory for %zu samples", samples);
            break;
        }
    }
    const double t_start = kk__bench_now();
    for (int k = 0; k < n && st == KK_OK; k++) {
        for (size_t i = 0; st == KK_OK && i < WARMUP_CALLS; i++) st = call_once(&j[k]);
        if (st == KK_OK && j[k].drain) st = kk_op_synchronize(j[k].device, j[k].stream);
    }
    for (size_t s = 0; st == KK_OK && s < samples; s++)
        for (int k = 0; st == KK_OK && k < n; k++) {
            const double t0 = kk__bench_now();
            for (size_t i = 0; st == KK_OK && i < calls; i++) st = call_once(&j[k]);
            const double t1 = kk__bench_now();
            if (st == KK_OK && j[k].drain) st = kk_op_synchronize(j[k].device, j[k].stream);
            m[k]->samples[s] = (t1 - t0) / (double)calls;
            m[k]->sampled_time_s += t1 - t0;
            m[k]->n = s + 1;
        }
    if (st != KK_OK) {
        for (int k = 0; k < ready; k++) kk_bench_measurement_free(m[k]);
        return st;
    }
    for (int k = 0; k < n; k++) measurement_done(&j[k], calls, t_start, m[k]);
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
    out->has_launch = out->has_bare = out->has_entry = 0;
    kk_tensor *t[KK_OP_MAX_TENSORS] = {0};
    int n = 0, prev = 0;
    overhead_job j = {.c = c, .device = device, .tensors = t, .kernel = do_nothing};
    /* The entry point beside kk_op_run, both with the do-nothing kernel. */
    overhead_job pair[2] = {j, j};
    kk_bench_measurement *pair_out[2] = {out->dispatch, out->entry};
    pair[1].entry = out->entry ? kk__entry_adapter(c->params.op) : NULL;
    const int npair = pair[1].entry ? 2 : 1;
    /* On a GPU the whole measurement runs with the tensors' device current
     * (kk_op_run's fast path) and launches on a non-blocking stream. */
    const kk__backend *b = kk__backend_get(kind);
    j.backend = b;
    const int streams = b->stream_create && b->stream_destroy && b->launch_floor;
    if (streams) st = b->stream_create(b->context, index, &prev, &j.stream);
    pair[0].stream = pair[1].stream = j.stream;
    if (st == KK_OK) st = kk__case_tensors(c, device, t, &n);
    if (st == KK_OK) {
        kk__op_run_set_thread_override(do_nothing);
        st = measure(pair, npair, samples, calls_per_sample, pair_out);
        kk__op_run_set_thread_override(NULL);
        if (st == KK_OK) out->has_entry = npair == 2;
    }
    if (st == KK_OK && streams) {
        j.kernel = NULL;
        j.drain = 1;
        kk_bench_measurement *m = out->launch;
        st = measure(&j, 1, samples, calls_per_sample, &m);
        if (st == KK_OK) out->has_launch = 1;
        j.bare = 1;
        m = out->bare;
        if (st == KK_OK && out->bare) st = measure(&j, 1, samples, calls_per_sample, &m);
        if (st == KK_OK && out->bare) out->has_bare = 1;
        if (st != KK_OK) {
            kk_bench_measurement_free(out->dispatch);
            if (out->has_entry) kk_bench_measurement_free(out->entry);
            if (out->has_launch) kk_bench_measurement_free(out->launch);
            out->has_launch = out->has_entry = 0;
        }
    }
    if (streams) b->stream_destroy(b->context, j.stream, prev);
    for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
    return st;
}

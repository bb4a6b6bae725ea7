/* The sampler: warm-up, batch choice, adaptive sampling, throttle drop. The
 * loop is the same on every device; a timer (measure_internal.h) takes one
 * sample. docs/harness-results.md explains each rule. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log_internal.h"
#include "backend/backend.h"
#include "harness/bench/measure_internal.h"

#define LOGGER "kernelkit.bench"
#define FUNC KK__BENCH_FUNC

typedef struct run {
    kk_bench_options o;
    kk__bench_timer t;
    kk__bench_clock clock;
    kk_bench_measurement *m;
    int gpu, index; /* gpu: an accelerator (not the CPU) */
    const kk__backend *backend;
    int cold;  /* samples flush first */
    double t0; /* start of the measurement */
    double *x; /* kept samples, seconds per run; the last `group` are pending */
    size_t n, cap;
    size_t group; /* samples since the last clock reading */
    double group_time;
} run;

/* ---- small helpers ---- */

static double median_small(double *v, size_t n) {
    for (size_t i = 1; i < n; i++) /* insertion sort: n <= 16 */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static kk_status push(run *r, double v) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        if (cap > r->o.max_samples) cap = r->o.max_samples;
        double *p = cap > r->cap ? realloc(r->x, cap * sizeof *p) : NULL;
        if (!p) return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "cannot keep %zu samples", cap);
        r->x = p;
        r->cap = cap;
    }
    r->x[r->n++] = v;
    return KK_OK;
}

static kk_status rse_now(run *r, double *rse) {
    return kk_stats_median_rse(r->x, r->n, r->o.seed, r->o.rse_resamples, rse);
}

static kk_status resolve(const char *device, run *r) {
    kk_backend_kind kind;
    kk_status st = kk_device_parse(device, &kind, &r->index);
    if (st) return st;
    r->gpu = kind != KK_BACKEND_CPU;
    r->backend = kk__backend_get(kind);
    if (r->backend->device_usable &&
        r->backend->device_usable(r->backend->context, r->index, NULL) != KK_OK)
        return kk__arg_error(KK_ERR_INVALID_COMPUTE_CAPABILITY, FUNC, "device",
                             "a GPU of compute capability 8.0 or newer", "\"%.40s\"", device);
    if (r->gpu)
        snprintf(r->m->device, sizeof r->m->device, "%s:%d", r->backend->name, r->index);
    else
        snprintf(r->m->device, sizeof r->m->device, "cpu");
    return KK_OK;
}

/* ---- the phases ---- */

static kk_status warmup(run *r, double *estimate) {
    double recent[16];
    size_t k = 0;
    double start = kk__bench_now();
    for (;;) {
        double s = 0;
        kk_status st = r->t.sample(r->t.impl, 0, &s);
        if (st) return st;
        recent[k++ % 16] = s;
        r->m->warmup_runs++;
        double now = kk__bench_now();
        if (r->m->warmup_runs >= r->o.warmup_runs &&
            (now - start >= r->o.warmup_time_s || now - r->t0 >= r->o.time_budget_s))
            break;
    }
    *estimate = median_small(recent, k < 16 ? k : 16);
    return KK_OK;
}

/* Runs per sample so that a sample lasts batch_target_s, given that `runs`
 * runs took `seconds`. */
static size_t batch_for(const run *r, size_t runs, double seconds) {
    double want = ceil((double)runs * r->o.batch_target_s / fmax(seconds, 1e-9));
    if (want > KK_BENCH_MAX_BATCH) return KK_BENCH_MAX_BATCH;
    return want < 2 ? 2 : (size_t)want;
}

static size_t auto_batch(const run *r, double estimate) {
    if (r->o.cold == 1 || !(estimate < r->o.batch_threshold_s)) return 1;
    return batch_for(r, 1, estimate);
}

static kk_status set_batch(run *r, size_t b, double *seconds) {
    kk_status st = r->t.set_batch(r->t.impl, b);
    if (!st) st = r->t.sample(r->t.impl, 0, seconds); /* the first launch uploads a graph */
    if (!st) r->m->warmup_runs += b;
    return st;
}

static kk_status choose_batch(run *r, double estimate) {
    size_t b = r->o.batch ? r->o.batch : auto_batch(r, estimate);
    r->m->batch = 1;
    if (b == 1) return KK_OK;
    double s = 0;
    kk_status st = set_batch(r, b, &s);
    /* Single runs overstate a tiny run (event and launch overhead), so an auto
     * batch is sized again from its own time until it lasts the target. */
    for (int i = 0;
         !st && !r->o.batch && i < 3 && s < r->o.batch_target_s && b < KK_BENCH_MAX_BATCH; i++)
        st = set_batch(r, b = batch_for(r, b, s), &s);
    if (st == KK_ERR_UNSUPPORTED && r->o.batch == 0) {
        /* auto mode: single runs still measure the work, just less precisely */
        KK_LOG(KK_LOG_WARN, LOGGER, "cannot batch the work; timing single runs",
               KK_F_STR("device", r->m->device), KK_F_STR("reason", kk_last_error_message()));
        kk_clear_error();
        return r->t.set_batch(r->t.impl, 1);
    }
    if (!st) r->m->batch = b;
    return st;
}

/* After a sample: at a clock reading (or always, with no throttle rule) the
 * pending group is kept or dropped. Returns 1 at a group boundary. */
static int settle(run *r, int force) {
    kk_bench_measurement *m = r->m;
    if (!force && r->n < r->o.max_samples && r->clock.enabled &&
        !kk__bench_clock_due(&r->clock, kk__bench_now()))
        return 0;
    if (kk__bench_clock_throttled(&r->clock)) {
        m->dropped_throttle += r->group;
        r->n -= r->group;
    } else {
        m->sampled_time_s += r->group_time;
    }
    r->group = 0;
    r->group_time = 0;
    return 1;
}

/* At a group boundary: 1 when it is time to stop; sets m->stop. */
static int should_stop(run *r, size_t *next_check, size_t *checked_at, kk_status *st) {
    kk_bench_measurement *m = r->m;
    if (r->o.rse_target > 0 && r->n >= *next_check && r->n >= r->o.min_samples &&
        m->sampled_time_s >= r->o.min_time_s) {
        if ((*st = rse_now(r, &m->final_rse))) return 1;
        *checked_at = r->n;
        size_t step = r->n / 8 > r->o.check_every ? r->n / 8 : r->o.check_every;
        *next_check = r->n + step;
        if (m->final_rse < r->o.rse_target) {
            m->stop = KK_BENCH_STOP_RSE;
            return 1;
        }
    }
    if (r->n >= r->o.max_samples) {
        m->stop = KK_BENCH_STOP_MAX_SAMPLES;
        return 1;
    }
    if (kk__bench_now() - r->t0 >= r->o.time_budget_s) {
        if (r->n == 0)
            *st = kk__error(KK_ERR_DEVICE_FAILURE, FUNC,
                            "%s: all %zu samples were dropped: the SM clock read under %.0f%% of "
                            "%d MHz (the GPU is throttling)",
                            m->device, m->dropped_throttle, 100 * r->o.throttle_fraction,
                            r->clock.max_mhz);
        m->stop = KK_BENCH_STOP_TIME_BUDGET;
        return 1;
    }
    return 0;
}

static kk_status sample_loop(run *r) {
    kk_bench_measurement *m = r->m;
    size_t next_check = r->o.min_samples, checked_at = 0;
    kk_status st = KK_OK;
    for (;;) {
        double s = 0;
        if ((st = r->t.sample(r->t.impl, r->cold, &s))) return st;
        if ((st = push(r, s / (double)m->batch))) return st;
        r->group++;
        r->group_time += s;
        int over = kk__bench_now() - r->t0 >= r->o.time_budget_s;
        if (settle(r, over) && should_stop(r, &next_check, &checked_at, &st)) break;
    }
    if (!st && checked_at != r->n) st = rse_now(r, &m->final_rse);
    m->sm_clock_min_mhz = r->clock.min_mhz;
    if (r->clock.reads) m->sm_clock_mean_mhz = r->clock.sum / (double)r->clock.reads;
    return st;
}

static kk_status measure(run *r, kk_bench_fn fn, void *ctx) {
    kk_bench_measurement *m = r->m;
    const kk__backend *b = r->backend;
    kk_status st = b->timer_create ? b->timer_create(b->context, r->index, fn, ctx, &r->o, &r->t)
                                   : kk__bench_cpu_timer(fn, ctx, &r->o, &r->t);
    if (st) return st;
    kk__bench_telemetry(r->gpu, r->index, &m->telemetry_start);
    kk__bench_clock_setup(&r->clock, r->gpu, r->index, r->o.throttle_fraction, &m->telemetry_start,
                          m->throttle_note, sizeof m->throttle_note);
    m->throttle_detection = r->clock.enabled;
    r->t0 = kk__bench_now(); /* after setup: creating a CUDA context is not the work's time */
    double estimate = 0;
    st = warmup(r, &estimate);
    if (!st) st = choose_batch(r, estimate);
    r->cold = m->batch == 1 && (r->o.cold == 1 || (r->o.cold == -1 && r->gpu));
    if (!st) st = sample_loop(r);
    m->cold = r->cold;
    m->flush_bytes = r->cold ? r->t.flush_bytes : 0;
    m->flush_mode = r->o.flush_mode;
    m->blocking_kernel = r->t.blocking_kernel;
    r->t.destroy(r->t.impl);
    if (!st) kk__bench_telemetry(r->gpu, r->index, &m->telemetry_end); /* else keep the error */
    return st;
}

kk_status kk_bench_measure(const char *device, kk_bench_fn fn, void *ctx,
                           const kk_bench_options *opt, kk_bench_measurement *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    run r;
    memset(&r, 0, sizeof r);
    r.m = out;
    if (opt)
        r.o = *opt;
    else
        kk_bench_options_default(&r.o);
    if ((st = KK__CHECK_NOT_NULL(fn)) || (st = kk_bench_options_validate(&r.o)) ||
        (st = resolve(device, &r)))
        return st;

    void *saved = NULL;
    if (r.o.pin_cpu >= 0) {
        if (!(saved = malloc(kk__bench_affinity_size())))
            return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "cannot allocate a CPU mask");
        if ((st = kk__bench_pin(r.o.pin_cpu, saved))) {
            free(saved);
            return st;
        }
    }
    r.t0 = kk__bench_now();
    out->pinned_cpu = r.o.pin_cpu;
    st = measure(&r, fn, ctx);
    out->wall_time_s = kk__bench_now() - r.t0;
    if (saved) kk__bench_unpin(saved);
    free(saved);
    if (st) {
        free(r.x);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->samples = r.x;
    out->n = r.n;
    out->options = r.o;
    out->options.stream = NULL;
    KK_LOG(KK_LOG_DEBUG, LOGGER, "measured", KK_F_STR("device", out->device),
           KK_F_UINT("samples", out->n), KK_F_UINT("dropped", out->dropped_throttle),
           KK_F_UINT("batch", out->batch), KK_F_BOOL("cold", out->cold),
           KK_F_STR("flush", kk_bench_flush_name((kk_bench_flush)out->flush_mode)),
           KK_F_STR("stop", kk_bench_stop_name(out->stop)), KK_F_DBL("rse", out->final_rse),
           KK_F_DBL("wall_s", out->wall_time_s));
    return KK_OK;
}

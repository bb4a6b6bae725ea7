/* Internal: what a backend gives the benchmark sampler (src/harness/bench/measure.c)
 * and the calibration (src/harness/bench/calibrate.c) through its table. The
 * adaptive loop is the same on every device; a backend's timer says how one
 * sample is taken (CUDA: events around the launch, an L2 flush first when
 * cold), its calibration which workloads measure its ceilings. */
#ifndef KK_BACKEND_TIMER_H
#define KK_BACKEND_TIMER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "kernelkit/bench.h"
#include "kernelkit/calibrate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The public entry points errors are reported under. */
#define KK__BENCH_FUNC "kk_bench_measure"
#define KK__CALIBRATE_FUNC "kk_calibrate"

/* Seconds the GPU blocking kernel waits for the host before it gives up (the
 * callback then most likely synchronized the stream it was given). */
#define KK__BENCH_BLOCK_TIMEOUT_S 10.0

/* M = N = K of the GEMM ceilings. */
#define KK__CALIBRATE_GEMM_N 8192

typedef struct kk__bench_timer {
    void *impl;
    /* One timed sample of `batch` back-to-back runs (set_batch), flushing the
     * caches first when `cold`. *seconds is the time of the whole batch. */
    kk_status (*sample)(void *impl, int cold, double *seconds);
    /* Switch to `batch` runs per sample (CUDA: capture them into a graph).
     * Returns KK_ERR_UNSUPPORTED when the work cannot be batched. */
    kk_status (*set_batch)(void *impl, size_t batch);
    void (*destroy)(void *impl);
    uint64_t flush_bytes; /* size of the flush buffer (allocated on first use) */
    int blocking_kernel;  /* CUDA: the stream is held while enqueuing */
} kk__bench_timer;

/* The status a timer returns when the callback returned `st`: its own, with
 * the callback's detail kept when it recorded one, else a generic message. */
kk_status kk__bench_callback_error(kk_status st);

/* What a backend's calibration calls back into the harness with: time fn
 * with the sampler on `device` (warm samples, budgets from `o`) and fill
 * `out` (value = work / median / unit_scale: 1e9 for GB/s, 1e12 for
 * TFLOP/s). Returns the sampler's status. */
typedef kk_status (*kk__calibrate_measure_fn)(const char *device, kk_bench_fn fn, void *ctx,
                                              double work, double unit_scale,
                                              const kk_calibrate_options *o, const char *method,
                                              kk_ceiling *out);

/* Mark `c` unavailable with a reason. */
void kk__ceiling_unavailable(kk_ceiling *c, const char *fmt, ...) KK__PRINTF(2, 3);

/* Keep the better (higher) of two measured ceilings in `best`. */
void kk__ceiling_keep_best(kk_ceiling *best, const kk_ceiling *candidate);

#ifdef __cplusplus
}
#endif
#endif

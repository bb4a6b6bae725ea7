/* Internal: the sampler's timers and the CUDA helpers it and its tests need.
 *
 * The adaptive loop (measure.c) is the same on every device; what differs is
 * how one sample is taken. A timer does that: the CPU's (measure_cpu.c) reads
 * CLOCK_MONOTONIC around the calls; CUDA's (src/cuda/bench_cuda.c) records
 * events around the launch. Plain C with no CUDA headers: the CUDA-less build
 * implements the CUDA functions as stubs (src/cuda_off/bench_off.c). */
#ifndef KK_HARNESS_MEASURE_INTERNAL_H
#define KK_HARNESS_MEASURE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/timer.h"
#include "kernelkit/bench.h"

/* The CPU cache flush: 2x the last-level cache, this much when sysfs has no
 * LLC size, and never more than the cap (docs/harness.md, "Cold samples on the
 * CPU", says why). */
#define KK__BENCH_CPU_FLUSH_FALLBACK ((uint64_t)32 << 20)
#define KK__BENCH_CPU_FLUSH_CAP ((uint64_t)256 << 20)

/* The SM-clock watch of a GPU measurement (measure_clock.c). An NVML read
 * costs about a millisecond (1.3-3.9 ms seen on an H200), so the clock is
 * read after a sample only once `interval_s` (10x the last read's cost) has
 * passed since the previous read; the reading then decides for every sample
 * taken since, and a low one drops them all. Samples longer than the interval
 * get a reading each. */
typedef struct kk__bench_clock {
    int enabled;       /* the throttle rule applies */
    int index;         /* CUDA device */
    int max_mhz;       /* what the rule compares with */
    double fraction;   /* options.throttle_fraction */
    double interval_s; /* least time between reads */
    double last_read;  /* kk__bench_now() at the end of the last read */
    double sum;        /* readings of kept groups */
    size_t reads;
    int min_mhz;
} kk__bench_clock;

/* Telemetry of `index` (or "not a GPU measurement" when !gpu); never fails. */
void kk__bench_telemetry(int gpu, int index, kk_gpu_telemetry *out);
/* Decide whether the rule applies; why not goes to note. */
void kk__bench_clock_setup(kk__bench_clock *c, int gpu, int index, double fraction,
                           const kk_gpu_telemetry *start, char *note, size_t note_size);
/* 1 when a reading is due at `now`. */
int kk__bench_clock_due(const kk__bench_clock *c, double now);
/* Read the clock: 1 when under the threshold (the group is to be dropped),
 * 0 otherwise (a failed read counts as not throttled). */
int kk__bench_clock_throttled(kk__bench_clock *c);

/* Timers. `o` is validated; flush_bytes 0 means the device's default (for
 * the GPU: the L2 size, or 2x it with KK_BENCH_FLUSH_READ). */
kk_status kk__bench_cpu_timer(kk_bench_fn fn, void *ctx, const kk_bench_options *o,
                              kk__bench_timer *t);

/* Seconds of CLOCK_MONOTONIC. */
double kk__bench_now(void);

/* 2x the last-level cache of cpu0 from sysfs, or the fallback. */
uint64_t kk__bench_cpu_flush_default(void);
/* The default flush for an LLC of `llc_bytes` (0: unknown). */
uint64_t kk__bench_cpu_flush_for_llc(uint64_t llc_bytes);

/* Pin the calling thread to `cpu`, saving the previous mask in *saved (a
 * cpu_set_t of at least kk__bench_affinity_size() bytes); restore it. */
size_t kk__bench_affinity_size(void);
kk_status kk__bench_pin(int cpu, void *saved);
void kk__bench_unpin(const void *saved);

#endif

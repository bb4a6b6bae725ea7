/* The throttle rule of the sampler: telemetry at the start and end, and the
 * SM clock read after samples (see measure_internal.h for the cadence).
 *
 * Why the clock: a GPU that throttles (power cap, heat) runs the same kernel
 * slower, and such samples describe the cooling, not the code. nvbench drops
 * samples taken under 75% of the SM clock's maximum; so does KernelKit. */
#include <stdio.h>
#include <string.h>

#include "harness/bench/measure_internal.h"

void kk__bench_telemetry(int gpu, int index, kk_gpu_telemetry *out) {
    memset(out, 0, sizeof *out);
    if (!gpu) {
        snprintf(out->unavailable_reason, sizeof out->unavailable_reason, "not a GPU measurement");
        return;
    }
    if (kk_gpu_telemetry_read(index, out) != KK_OK) { /* only for a bad index */
        memset(out, 0, sizeof *out);
        snprintf(out->unavailable_reason, sizeof out->unavailable_reason, "%.180s",
                 kk_last_error_message());
        kk_clear_error();
    }
}

void kk__bench_clock_setup(kk__bench_clock *c, int gpu, int index, double fraction,
                           const kk_gpu_telemetry *start, char *note, size_t note_size) {
    memset(c, 0, sizeof *c);
    c->index = index;
    c->fraction = fraction;
    if (!gpu) {
        snprintf(note, note_size, "not a GPU measurement");
        return;
    }
    if (fraction <= 0) {
        snprintf(note, note_size, "disabled (options.throttle_fraction = 0)");
        return;
    }
    if (!start->available) {
        snprintf(note, note_size, "no SM clock readings: %.150s", start->unavailable_reason);
        return;
    }
    c->max_mhz = start->sm_clock_max_mhz;
    kk_device_info info;
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", index);
    if (c->max_mhz <= 0 && kk_device_get_info(spec, &info) == KK_OK)
        c->max_mhz = info.sm_clock_max_mhz;
    if (c->max_mhz <= 0) {
        snprintf(note, note_size, "the maximum SM clock is unknown");
        return;
    }
    c->enabled = 1;
    c->last_read = kk__bench_now();
}

int kk__bench_clock_due(const kk__bench_clock *c, double now) {
    return c->enabled && now - c->last_read >= c->interval_s;
}

int kk__bench_clock_throttled(kk__bench_clock *c) {
    if (!c->enabled) return 0;
    double t0 = kk__bench_now();
    kk_gpu_telemetry tel;
    kk_status st = kk_gpu_telemetry_read(c->index, &tel);
    c->last_read = kk__bench_now();
    c->interval_s = 10.0 * (c->last_read - t0); /* reads cost at most ~10% of the time */
    if (st != KK_OK) {
        kk_clear_error(); /* cannot happen for a resolved index; never fail on it */
        return 0;
    }
    if (!tel.available || tel.sm_clock_mhz <= 0) return 0;
    if (tel.sm_clock_mhz < c->fraction * c->max_mhz) return 1;
    c->sum += tel.sm_clock_mhz;
    c->reads++;
    if (c->min_mhz == 0 || tel.sm_clock_mhz < c->min_mhz) c->min_mhz = tel.sm_clock_mhz;
    return 0;
}

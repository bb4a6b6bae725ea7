/* Internal: the harness side of kernelkit calibrate (src/harness/calibrate*.c
 * and the tests). A backend measures its ceilings through its table's
 * `calibrate`, calling back kk__calibrate_measure (backend/timer.h). */
#ifndef KK_HARNESS_CALIBRATE_INTERNAL_H
#define KK_HARNESS_CALIBRATE_INTERNAL_H

#include "backend/timer.h"

/* Time fn with kk_bench_measure on `device` (warm samples, budgets from `o`)
 * and fill `out`: value = work / median / unit_scale (1e9 for GB/s, 1e12 for
 * TFLOP/s), with the CI and the sample count. Returns the sampler's status.
 * A kk__calibrate_measure_fn. */
kk_status kk__calibrate_measure(const char *device, kk_bench_fn fn, void *ctx, double work,
                                double unit_scale, const kk_calibrate_options *o,
                                const char *method, kk_ceiling *out);

#endif

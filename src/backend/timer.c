/* Helpers of the timer and calibration interface (backend/timer.h) that the
 * backends and the harness share. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/timer.h"

kk_status kk__bench_callback_error(kk_status st) {
    if (kk_last_error()->status == st) return st; /* the callback said why */
    return kk__error(st, KK__BENCH_FUNC, "the benchmark callback returned %s (%s)",
                     kk_status_name(st), kk_status_str(st));
}

void kk__ceiling_unavailable(kk_ceiling *c, const char *fmt, ...) {
    memset(c, 0, sizeof *c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

void kk__ceiling_keep_best(kk_ceiling *best, const kk_ceiling *candidate) {
    if (candidate->available && (!best->available || candidate->value > best->value))
        *best = *candidate;
}

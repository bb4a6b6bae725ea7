/* Statistics: argument checks, sorting, quantiles, mean and standard deviation. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "harness/stats/stats_internal.h"

kk_status kk__stats_check_sample(const char *fn, const char *name, const double *x, size_t n,
                                 int positive) {
    if (!x) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, name, "a non-NULL pointer", "NULL");
    char arg[64];
    if (n == 0 || n > KK_STATS_MAX_SAMPLES) {
        snprintf(arg, sizeof arg, "length of %s", name);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, arg, "1 .. 4294967295 values", "%zu", n);
    }
    for (size_t i = 0; i < n; i++) {
        if (isfinite(x[i]) && (!positive || x[i] > 0.0)) continue;
        snprintf(arg, sizeof arg, "%s[%zu]", name, i);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, arg,
                             positive ? "a finite time > 0" : "a finite number", "%g", x[i]);
    }
    return KK_OK;
}

kk_status kk__stats_check_resamples(const char *fn, const char *arg, int resamples, int dflt,
                                    int min_b, int *out) {
    if (resamples == 0) {
        *out = dflt;
        return KK_OK;
    }
    if (resamples < min_b || resamples > KK_STATS_MAX_RESAMPLES) {
        char expected[96];
        snprintf(expected, sizeof expected, "0 (default %d) or %d .. %d", dflt, min_b,
                 KK_STATS_MAX_RESAMPLES);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, arg, expected, "%d", resamples);
    }
    *out = resamples;
    return KK_OK;
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

void kk__stats_sort(double *x, size_t n) {
    if (n > 1) qsort(x, n, sizeof *x, cmp_double);
}

double kk__stats_lerp(double a, double b, double t) {
    double d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

double kk__stats_quantile_sorted(const double *sorted, size_t n, double q) {
    double h = (double)(n - 1) * q;
    double fj = floor(h);
    size_t j = (size_t)fj;
    if (j >= n - 1) return sorted[n - 1];
    return kk__stats_lerp(sorted[j], sorted[j + 1], h - fj);
}

kk_status kk_stats_quantile(const double *sorted, size_t n, double q, double *out) {
    kk_status st = kk__stats_check_sample(__func__, "sorted", sorted, n, 0);
    if (st) return st;
    if (!(q >= 0.0 && q <= 1.0))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "q", "0 <= q <= 1", "%g", q);
    if ((st = KK__CHECK_NOT_NULL(out))) return st;
    for (size_t i = 1; i < n; i++) {
        if (sorted[i] >= sorted[i - 1]) continue;
        char arg[48];
        snprintf(arg, sizeof arg, "sorted[%zu]", i);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, arg,
                             "ascending order (sort the sample first)", "%g < %g", sorted[i],
                             sorted[i - 1]);
    }
    *out = kk__stats_quantile_sorted(sorted, n, q);
    return KK_OK;
}

void kk__stats_mean_stdev(const double *x, size_t n, double *mean, double *stdev) {
    /* Neumaier's compensated sum for the mean, then the corrected two-pass
     * algorithm (Chan, Golub and LeVeque 1983) for the variance. */
    double sum = 0.0, comp = 0.0;
    for (size_t i = 0; i < n; i++) {
        double t = sum + x[i];
        if (fabs(sum) >= fabs(x[i]))
            comp += (sum - t) + x[i];
        else
            comp += (x[i] - t) + sum;
        sum = t;
    }
    double m = (sum + comp) / (double)n;
    *mean = m;
    if (n < 2) {
        *stdev = 0.0;
        return;
    }
    double ss = 0.0, s1 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - m;
        ss += d * d;
        s1 += d;
    }
    double var = (ss - s1 * s1 / (double)n) / (double)(n - 1);
    *stdev = var > 0.0 ? sqrt(var) : 0.0;
}

kk_status kk__stats_alloc(const char *fn, size_t n_doubles, size_t n_u32, double **doubles,
                          uint32_t **u32s) {
    if (n_doubles > (SIZE_MAX / 2) / sizeof(double) || n_u32 > (SIZE_MAX / 2) / sizeof(uint32_t))
        return kk__error(KK_ERR_OUT_OF_MEMORY, fn, "scratch for %zu + %zu values overflows",
                         n_doubles, n_u32);
    size_t bytes = n_doubles * sizeof(double) + n_u32 * sizeof(uint32_t);
    /* doubles first, so the uint32 part stays aligned */
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        return kk__error(KK_ERR_OUT_OF_MEMORY, fn, "cannot allocate %zu bytes of scratch", bytes);
    *doubles = (double *)p;
    if (u32s) *u32s = (uint32_t *)((double *)p + n_doubles);
    return KK_OK;
}

double kk__stats_relative(double spread, double center) {
    if (center != 0.0) return spread / fabs(center);
    return spread == 0.0 ? 0.0 : INFINITY;
}

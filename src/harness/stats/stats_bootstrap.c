/* Statistics of one sample: the summary and the bootstrap of the median. The
 * sample is sorted first, so a resample's order statistics follow from how
 * many times each index was drawn: the k-th smallest is sorted[j] for the
 * first j whose cumulative count exceeds k. One resample is O(n), with no
 * selection or sort. docs/statistics.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/stats/stats_internal.h"

double kk__stats_boot_median(const double *sorted, size_t n, uint32_t *counts, kk__rng *rng) {
    memset(counts, 0, n * sizeof *counts);
    kk__rng_count_below(rng, (uint32_t)n, n, counts);
    /* Order statistics k1 = floor((n-1)/2) and k2 = floor(n/2) (equal when n is odd);
     * the median is their midpoint, as the 0.5 quantile of the resample. */
    size_t k1 = (n - 1) / 2, k2 = n / 2, cum = 0;
    double v1 = sorted[n - 1], v2 = sorted[n - 1];
    int have1 = 0;
    for (size_t j = 0; j < n; j++) {
        cum += counts[j];
        if (!have1 && cum > k1) {
            v1 = sorted[j];
            have1 = 1;
        }
        if (cum > k2) {
            v2 = sorted[j];
            break;
        }
    }
    return k1 == k2 ? v1 : kk__stats_lerp(v1, v2, 0.5);
}

void kk__stats_boot_medians(const double *sorted, size_t n, int resamples, kk__rng *rng,
                            uint32_t *counts, double *medians) {
    for (int b = 0; b < resamples; b++) medians[b] = kk__stats_boot_median(sorted, n, counts, rng);
}

/* Bootstrap the median of `sorted` (B = resamples) into medians[], then give the
 * relative standard error; medians[] is left sorted. */
static double bootstrap_rse(const double *sorted, size_t n, double median, uint64_t seed,
                            int resamples, uint32_t *counts, double *medians) {
    kk__rng rng;
    kk__rng_seed(&rng, seed);
    kk__stats_boot_medians(sorted, n, resamples, &rng, counts, medians);
    double mean, sd;
    kk__stats_mean_stdev(medians, (size_t)resamples, &mean, &sd);
    kk__stats_sort(medians, (size_t)resamples);
    return kk__stats_relative(sd, median);
}

kk_status kk_stats_summarize(const double *x, size_t n, uint64_t seed, int resamples,
                             kk_stats_summary *out) {
    int b = 0;
    kk_status st = kk__stats_check_sample(__func__, "x", x, n, 0);
    if (!st)
        st = kk__stats_check_resamples(__func__, "resamples", resamples, KK_STATS_DEFAULT_RESAMPLES,
                                       KK_STATS_MIN_RESAMPLES, &b);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;

    double *sorted;
    uint32_t *counts;
    if ((st = kk__stats_alloc(__func__, 2 * n + (size_t)b, n, &sorted, &counts))) return st;
    double *dev = sorted + n, *medians = dev + n;
    memcpy(sorted, x, n * sizeof *x);
    kk__stats_sort(sorted, n);

    kk_stats_summary s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.min = sorted[0];
    s.max = sorted[n - 1];
    kk__stats_mean_stdev(sorted, n, &s.mean, &s.stdev);
    s.cv = kk__stats_relative(s.stdev, s.mean);
    s.median = kk__stats_quantile_sorted(sorted, n, 0.5);
    s.p95 = kk__stats_quantile_sorted(sorted, n, 0.95);
    s.p99 = kk__stats_quantile_sorted(sorted, n, 0.99);
    for (size_t i = 0; i < n; i++) dev[i] = fabs(sorted[i] - s.median);
    kk__stats_sort(dev, n);
    s.mad = kk__stats_quantile_sorted(dev, n, 0.5);

    s.median_rse = bootstrap_rse(sorted, n, s.median, seed, b, counts, medians);
    double tail = (1.0 - KK_STATS_SUMMARY_CONFIDENCE) / 2.0;
    s.median_ci_low = kk__stats_quantile_sorted(medians, (size_t)b, tail);
    s.median_ci_high = kk__stats_quantile_sorted(medians, (size_t)b, 1.0 - tail);
    s.resamples = b;
    s.seed = seed;
    free(sorted);
    *out = s;
    return KK_OK;
}

kk_status kk_stats_median_rse(const double *x, size_t n, uint64_t seed, int resamples,
                              double *rse) {
    int b = 0;
    kk_status st = kk__stats_check_sample(__func__, "x", x, n, 0);
    if (!st)
        st = kk__stats_check_resamples(__func__, "resamples", resamples, KK_STATS_RSE_RESAMPLES,
                                       KK_STATS_RSE_MIN_RESAMPLES, &b);
    if (!st) st = KK__CHECK_NOT_NULL(rse);
    if (st) return st;

    double *sorted;
    uint32_t *counts;
    if ((st = kk__stats_alloc(__func__, n + (size_t)b, n, &sorted, &counts))) return st;
    double *medians = sorted + n;
    memcpy(sorted, x, n * sizeof *x);
    kk__stats_sort(sorted, n);
    double median = kk__stats_quantile_sorted(sorted, n, 0.5);
    *rse = bootstrap_rse(sorted, n, median, seed, b, counts, medians);
    free(sorted);
    return KK_OK;
}

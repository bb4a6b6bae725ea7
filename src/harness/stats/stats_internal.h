/* Internal: pieces shared by the stats_*.c files (see include/kernelkit/stats.h). */
#ifndef KK_HARNESS_STATS_INTERNAL_H
#define KK_HARNESS_STATS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "kernelkit/stats.h"

/* Check a sample argument: non-NULL, 1 <= n <= KK_STATS_MAX_SAMPLES, every value
 * finite (and > 0 when `positive`). Errors name the element: "base[12] = nan". */
kk_status kk__stats_check_sample(const char *fn, const char *name, const double *x, size_t n,
                                 int positive);

/* Check `resamples` (0 means `dflt`, else min_b .. KK_STATS_MAX_RESAMPLES); *out gets B. */
kk_status kk__stats_check_resamples(const char *fn, const char *arg, int resamples, int dflt,
                                    int min_b, int *out);

/* One malloc holding n_doubles doubles then n_u32 uint32s (*u32s may be NULL when
 * n_u32 is 0); free(*doubles) releases both. KK_ERR_OUT_OF_MEMORY when it fails. */
kk_status kk__stats_alloc(const char *fn, size_t n_doubles, size_t n_u32, double **doubles,
                          uint32_t **u32s);

/* spread / |center|; when center is 0: 0 if spread is 0, else +infinity. */
double kk__stats_relative(double spread, double center);

/* Sort ascending (no NaN). */
void kk__stats_sort(double *x, size_t n);

/* a + t(b - a), computed as numpy's percentile does (from b when t >= 0.5). */
double kk__stats_lerp(double a, double b, double t);

/* Type-7 quantile of an ascending array, no checks (n >= 1, 0 <= q <= 1). */
double kk__stats_quantile_sorted(const double *sorted, size_t n, double q);

/* Mean (compensated sum) and sample standard deviation (divisor n-1, 0 when n == 1). */
void kk__stats_mean_stdev(const double *x, size_t n, double *mean, double *stdev);

/* B bootstrap medians of the ascending sample `sorted`: each resample draws n
 * indices uniformly with replacement from rng, and its median is found from the
 * counts of the indices (counts: scratch of n entries). medians[0..B-1] in draw order. */
void kk__stats_boot_medians(const double *sorted, size_t n, int resamples, kk__rng *rng,
                            uint32_t *counts, double *medians);

/* One bootstrap median (see above). */
double kk__stats_boot_median(const double *sorted, size_t n, uint32_t *counts, kk__rng *rng);

/* Pair counts of two ascending samples, by one merge: greater = #{x_i > y_j},
 * less = #{x_i < y_j}, equal = #{x_i == y_j}; tie_term = sum over groups of equal
 * values in x and y together of t^3 - t; has_ties when some group has t > 1. */
typedef struct kk__rank_counts {
    uint64_t greater, less, equal;
    double tie_term;
    int has_ties;
} kk__rank_counts;

void kk__stats_rank_counts(const double *xs, size_t nx, const double *ys, size_t ny,
                           kk__rank_counts *out);

/* Mann-Whitney U from the counts (see kk_mann_whitney_u). */
kk_status kk__stats_mwu_from_counts(const char *fn, const kk__rank_counts *rc, size_t nx, size_t ny,
                                    kk_mwu_method method, kk_mwu_result *out);

/* Cliff's delta from the counts. */
double kk__stats_delta_from_counts(const kk__rank_counts *rc, size_t nx, size_t ny);

#endif

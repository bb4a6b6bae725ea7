/* Benchmark statistics: summaries of a sample of times, and the comparison of
 * two samples that decides FASTER / SLOWER / SAME / AMBIGUOUS.
 *
 * docs/statistics.md defines every number (formula, quantile definition,
 * bootstrap procedure, verdict rules) and says why the rules are what they are.
 * In short:
 *   - quantiles interpolate linearly between order statistics (Hyndman and Fan
 *     type 7, numpy's default method="linear"); the median is the 0.5 quantile;
 *   - stdev is the sample standard deviation (divisor n-1);
 *   - confidence intervals are percentile bootstrap intervals from a seeded
 *     generator of KernelKit's own (xoshiro256**), so a given seed draws the
 *     same resamples on every platform;
 *   - Mann-Whitney U p-values are two-sided, as scipy.stats.mannwhitneyu gives them.
 *
 * Every function that returns kk_status validates its arguments (NULL pointers,
 * empty samples, NaN or infinite values with their index, out-of-range options)
 * and reports KK_ERR_INVALID_ARGUMENT through kk_last_error(); on failure the
 * outputs are left untouched. Scratch memory is one allocation per call
 * (KK_ERR_OUT_OF_MEMORY if it fails). The functions are thread-safe. */
#ifndef KERNELKIT_STATS_H
#define KERNELKIT_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bootstrap resamples for confidence intervals when the caller passes 0. */
#define KK_STATS_DEFAULT_RESAMPLES 10000
/* Fewest resamples a confidence interval accepts: below this the 2.5% tail is
 * estimated from fewer than 25 values. */
#define KK_STATS_MIN_RESAMPLES 1000
/* Resamples kk_stats_median_rse uses when the caller passes 0: the cheap check
 * an adaptive sampler makes every few samples. Its own error is about
 * 1/sqrt(2*(500-1)) = 3.2% of the RSE it reports (0.016 points of a 0.5% target). */
#define KK_STATS_RSE_RESAMPLES 500
/* Fewest resamples kk_stats_median_rse accepts. */
#define KK_STATS_RSE_MIN_RESAMPLES 100
/* Most resamples any function accepts (8 MB of scratch). */
#define KK_STATS_MAX_RESAMPLES 1000000
/* Largest sample any function accepts. */
#define KK_STATS_MAX_SAMPLES ((size_t)UINT32_MAX)
/* Seed of kk_compare_options_default. */
#define KK_STATS_DEFAULT_SEED UINT64_C(0x4b4b5354415453) /* "KKSTATS" */
/* Confidence level of the intervals of kk_stats_summarize. */
#define KK_STATS_SUMMARY_CONFIDENCE 0.95

/* ---- one sample ---- */

/* The q-quantile (0 <= q <= 1) of `sorted`, which must be in ascending order
 * with no NaN: with h = (n-1)q and j = floor(h), x[j] + (h-j)(x[j+1]-x[j])
 * (numpy.percentile(x, 100q, method="linear")). */
KK_API kk_status kk_stats_quantile(const double *sorted, size_t n, double q, double *out);

typedef struct kk_stats_summary {
    size_t n;
    double min, max;
    double mean;
    double stdev;    /* sample standard deviation, divisor n-1; 0 when n == 1 */
    double cv;       /* coefficient of variation stdev/|mean| (see docs for mean == 0) */
    double median;   /* 0.5 quantile */
    double p95, p99; /* 0.95 and 0.99 quantiles */
    double mad;      /* median absolute deviation median(|x - median|), unscaled
                    * (multiply by 1.4826 to estimate sigma of normal data) */
    /* Percentile bootstrap interval of the median at KK_STATS_SUMMARY_CONFIDENCE. */
    double median_ci_low, median_ci_high;
    /* Relative standard error of the median: the standard deviation (divisor B-1)
     * of the B bootstrap medians divided by |median|. */
    double median_rse;
    int resamples; /* B actually used */
    uint64_t seed; /* seed the bootstrap used */
} kk_stats_summary;

/* Summary of x[0..n-1] (finite values, any order, n >= 1). `resamples` is B:
 * 0 for KK_STATS_DEFAULT_RESAMPLES, else KK_STATS_MIN_RESAMPLES ..
 * KK_STATS_MAX_RESAMPLES. Deterministic for a given (x, seed, resamples).
 * Cost O(n log n + B n). */
KK_API kk_status kk_stats_summarize(const double *x, size_t n, uint64_t seed, int resamples,
                                    kk_stats_summary *out);

/* Only the bootstrap relative standard error of the median, for an adaptive
 * sampler that stops when it falls under a target (0.5%). `resamples` is 0 for
 * KK_STATS_RSE_RESAMPLES, else KK_STATS_RSE_MIN_RESAMPLES .. KK_STATS_MAX_RESAMPLES.
 * With the same seed and B it equals kk_stats_summarize's median_rse exactly.
 * Cost O(n log n + B n): with B = 500 about 1 ms for n = 1000 samples. */
KK_API kk_status kk_stats_median_rse(const double *x, size_t n, uint64_t seed, int resamples,
                                     double *rse);

/* ---- two samples ---- */

typedef enum kk_mwu_method {
    KK_MWU_AUTO = 0,      /* exact when no value is tied and nx*ny <= KK_MWU_EXACT_MAX_PAIRS */
    KK_MWU_EXACT = 1,     /* exact null distribution; refused with ties or too many pairs */
    KK_MWU_ASYMPTOTIC = 2 /* normal approximation, tie and continuity corrections */
} kk_mwu_method;

/* Largest nx*ny for the exact distribution (its cost grows as (nx*ny)^2). */
#define KK_MWU_EXACT_MAX_PAIRS 2500

typedef struct kk_mwu_result {
    double u;             /* U of x: #{(i,j): x_i > y_j} + #{x_i == y_j}/2 (scipy's statistic) */
    double z;             /* standardized U of x with continuity correction toward 0; 0 if exact */
    double p_value;       /* two-sided */
    kk_mwu_method method; /* KK_MWU_EXACT or KK_MWU_ASYMPTOTIC: the one used */
    int has_ties;         /* some value occurs more than once in x and y together */
} kk_mwu_result;

/* Mann-Whitney U test of x against y, two-sided. Matches
 * scipy.stats.mannwhitneyu(x, y, alternative="two-sided", use_continuity=True,
 * method="exact" or "asymptotic"). */
KK_API kk_status kk_mann_whitney_u(const double *x, size_t nx, const double *y, size_t ny,
                                   kk_mwu_method method, kk_mwu_result *out);

/* Cliff's delta P(x > y) - P(x < y) over all nx*ny pairs, in [-1, 1];
 * O((nx + ny) log(nx + ny)). */
KK_API kk_status kk_cliffs_delta(const double *x, size_t nx, const double *y, size_t ny,
                                 double *delta);

typedef enum kk_effect_size {
    KK_EFFECT_NEGLIGIBLE = 0, /* |delta| < 0.147 */
    KK_EFFECT_SMALL = 1,      /* |delta| < 0.33 */
    KK_EFFECT_MEDIUM = 2,     /* |delta| < 0.474 */
    KK_EFFECT_LARGE = 3       /* otherwise (Romano et al. 2006); NaN gives LARGE */
} kk_effect_size;

KK_API kk_effect_size kk_cliffs_magnitude(double delta);

/* "negligible", "small", "medium", "large"; "unknown" for any other value. */
KK_API const char *kk_effect_size_name(kk_effect_size effect);

typedef enum kk_verdict {
    KK_VERDICT_SAME = 0,
    KK_VERDICT_FASTER = 1,
    KK_VERDICT_SLOWER = 2,
    KK_VERDICT_AMBIGUOUS = 3
} kk_verdict;

/* "SAME", "FASTER", "SLOWER", "AMBIGUOUS"; "UNKNOWN" for any other value. */
KK_API const char *kk_verdict_name(kk_verdict verdict);

/* The verdict rules, on their own (docs/statistics.md has the table). With
 * hi_bound = 1 + threshold and lo_bound = 1 / (1 + threshold):
 *   SLOWER    ci_low  > hi_bound and p_value < alpha
 *   FASTER    ci_high < lo_bound and p_value < alpha
 *   SAME      lo_bound <= ci_low and ci_high <= hi_bound (whatever p_value)
 *   AMBIGUOUS anything else, NaN included. */
KK_API kk_verdict kk_compare_verdict(double ratio_ci_low, double ratio_ci_high, double p_value,
                                     double threshold, double alpha);

typedef struct kk_compare_options {
    double threshold;  /* smallest relative change that matters; default 0.03, 0 .. 1 */
    double alpha;      /* significance level of the U test; default 0.05, in (0, 1) */
    double confidence; /* level of the ratio interval; default 0.95, in [0.5, 1) */
    int resamples;     /* 0 or KK_STATS_MIN_RESAMPLES .. KK_STATS_MAX_RESAMPLES; default 10000 */
    uint64_t seed;     /* default KK_STATS_DEFAULT_SEED */
} kk_compare_options;

KK_API void kk_compare_options_default(kk_compare_options *opt);

typedef struct kk_compare_result {
    size_t n_base, n_cand;
    double median_base, median_cand;
    double ratio; /* median_cand / median_base: > 1 means the candidate is slower */
    double ratio_ci_low, ratio_ci_high; /* percentile bootstrap interval of the ratio */
    kk_mwu_result mwu;                  /* kk_mann_whitney_u(cand, base, KK_MWU_AUTO) */
    double cliffs_delta; /* kk_cliffs_delta(cand, base): > 0 means the candidate is slower */
    kk_effect_size effect;
    kk_verdict verdict;
    kk_compare_options options; /* the options used, defaults filled in */
} kk_compare_result;

/* Compare a candidate sample of times with a base sample. Times must be finite
 * and > 0 (the ratio of medians needs them positive). `opt` may be NULL for
 * kk_compare_options_default. Deterministic for given samples and options.
 * Cost O((nb + nc) log(nb + nc) + B (nb + nc)). */
KK_API kk_status kk_stats_compare(const double *base, size_t nb, const double *cand, size_t nc,
                                  const kk_compare_options *opt, kk_compare_result *out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_STATS_H */

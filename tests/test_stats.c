/* labels: unit cpu */
/* Benchmark statistics (include/kernelkit/stats.h) against known values.
 *
 * Every expected number below was computed with numpy 2.4.6 / scipy 1.17.1 by
 * tests/data/stats/expected.py, which holds the datasets and the exact calls;
 * the comment at each value names the call. The test needs no Python. What has
 * no closed form (bootstrap intervals) is tested by its properties: the exact
 * bootstrap distribution of the median for odd n, determinism, coverage, and
 * the verdicts on planted changes. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kernelkit/stats.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void assert_close(double got, double want, double rel, const char *what) {
    double tol = rel * fmax(fabs(want), 1e-300);
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.17g, expected %.17g (relative tolerance %g)", what, got, want, rel);
}

/* ---- a generator of the test's own, independent of the library's ---- */

static uint64_t t_state;
static void t_seed(uint64_t s) { t_state = s; }
static uint64_t t_next(void) {
    uint64_t z = (t_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double t_uniform(void) { return (double)(t_next() >> 11) * 0x1.0p-53; }
static double t_normal(void) { /* Box-Muller */
    double u = 1.0 - t_uniform(), v = t_uniform();
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}
/* GPU-like times: center * (1 + noise * N(0,1)), 1% of them 1.5x slower (preemption). */
static void t_times(double *x, size_t n, double center, double noise) {
    for (size_t i = 0; i < n; i++) {
        x[i] = center * (1.0 + noise * t_normal());
        if (t_uniform() < 0.01) x[i] *= 1.5;
    }
}

/* ---- datasets (tests/data/stats/expected.py) ---- */

static const double D1[] = {12.1, 11.8, 12.5, 13.0, 11.9, 12.2, 12.2, 14.1, 12.0, 11.7};
static const double D2[] = {3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3};
static const double D5[] = {50.01, 51.52, 48.65, 45.74, 47.78, 45.28,
                            50.3,  57.17, 47.6,  46.99, 52.51};
static const double M3_X[] = {95.0,  100.0, 102.0, 100.0, 103.0, 109.0, 96.0, 103.0, 95.0,
                              101.0, 98.0,  104.0, 97.0,  102.0, 96.0,  94.0, 101.0, 105.0,
                              102.0, 97.0,  101.0, 102.0, 104.0, 97.0,  102.0};
static const double M3_Y[] = {103.0, 102.0, 102.0, 100.0, 100.0, 106.0, 103.0, 101.0, 95.0,
                              99.0,  100.0, 98.0,  98.0,  104.0, 101.0, 97.0,  98.0,  101.0,
                              105.0, 97.0,  107.0, 101.0, 97.0,  104.0, 106.0};
static const double M4_X[] = {9.778,  10.649, 9.682,  9.989,  11.665, 10.896, 8.797,  12.8,
                              8.979,  10.848, 10.498, 9.916,  10.202, 9.836,  10.837, 9.288,
                              8.826,  10.475, 11.737, 9.863,  11.703, 9.912,  11.557, 10.963,
                              10.523, 10.937, 9.163,  10.098, 8.429,  8.22};
static const double M4_Y[] = {11.519, 10.451, 11.606, 10.731, 9.827,  13.494, 11.977, 10.771,
                              10.622, 12.253, 10.278, 12.125, 11.255, 9.278,  11.343, 11.717,
                              11.146, 11.564, 11.975, 10.109, 12.854, 10.762, 11.434, 9.02,
                              11.611, 11.322, 10.016, 11.283, 11.105, 11.601, 11.316, 10.046,
                              10.655, 8.901,  10.621, 10.084, 11.669, 11.943, 11.241, 8.748};

/* ---- one sample ---- */

static void summary_matches_numpy(void **state) {
    (void)state;
    kk_stats_summary s;
    kk_assert_ok(kk_stats_summarize(D1, N_OF(D1), 1, 0, &s));
    assert_int_equal(s.n, 10);
    assert_close(s.min, 11.7, 0, "min");                         /* a.min() */
    assert_close(s.max, 14.1, 0, "max");                         /* a.max() */
    assert_close(s.mean, 12.35, 1e-14, "mean");                  /* np.mean(a) */
    assert_close(s.stdev, 0.7199537022151724, 1e-13, "stdev");   /* np.std(a, ddof=1) */
    assert_close(s.cv, 0.058295846333212345, 1e-13, "cv");       /* std(ddof=1)/mean */
    assert_close(s.median, 12.149999999999999, 1e-15, "median"); /* np.median(a) */
    /* np.percentile(a, 95, method="linear"), np.percentile(a, 99, method="linear") */
    assert_close(s.p95, 13.604999999999999, 1e-15, "p95");
    assert_close(s.p99, 14.001, 1e-15, "p99");
    /* scipy.stats.median_abs_deviation(a) (scale=1.0) */
    assert_close(s.mad, 0.29999999999999805, 1e-12, "mad");
    assert_int_equal(s.resamples, KK_STATS_DEFAULT_RESAMPLES);
    assert_true(s.seed == 1);
    assert_true(s.median_ci_low <= s.median && s.median <= s.median_ci_high);
    assert_true(s.median_ci_low >= s.min && s.median_ci_high <= s.max);
    assert_true(s.median_rse > 0.0 && s.median_rse < 0.1);

    kk_assert_ok(kk_stats_summarize(D2, N_OF(D2), 1, 0, &s));
    assert_close(s.mean, 3.771428571428572, 1e-14, "mean");
    assert_close(s.stdev, 2.7244046968798434, 1e-13, "stdev");
    assert_close(s.cv, 0.7223800332635948, 1e-13, "cv");
    assert_close(s.median, 3.0, 0, "median");
    assert_close(s.p95, 7.889999999999997, 1e-14, "p95");
    assert_close(s.p99, 8.777999999999999, 1e-14, "p99");
    assert_close(s.mad, 1.5, 1e-15, "mad");

    /* one value: no spread at all */
    double one = 42.0;
    kk_assert_ok(kk_stats_summarize(&one, 1, 7, 1000, &s));
    assert_true(s.min == 42.0 && s.max == 42.0 && s.median == 42.0 && s.p99 == 42.0);
    assert_true(s.stdev == 0.0 && s.cv == 0.0 && s.mad == 0.0 && s.median_rse == 0.0);
    assert_true(s.median_ci_low == 42.0 && s.median_ci_high == 42.0);

    /* a zero mean / median: the relative numbers are 0 or +inf, never NaN */
    double sym[] = {-1.0, 0.0, 1.0};
    kk_assert_ok(kk_stats_summarize(sym, 3, 7, 1000, &s));
    assert_true(s.mean == 0.0 && isinf(s.cv) && isinf(s.median_rse));
    double zeros[] = {0.0, 0.0};
    kk_assert_ok(kk_stats_summarize(zeros, 2, 7, 1000, &s));
    assert_true(s.cv == 0.0 && s.median_rse == 0.0);
}

static void quantiles_are_numpy_linear(void **state) {
    (void)state;
    static const double qs[] = {0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0};
    /* np.quantile(np.sort(a), q, method="linear") */
    static const double d1_want[] = {
        11.7, 11.790000000000001, 11.925, 12.149999999999999, 12.425, 13.11, 14.1};
    static const double d2_want[] = {1.0, 1.3, 2.05, 3.0, 4.65, 6.780000000000001, 9.0};
    double s1[N_OF(D1)], s2[N_OF(D2)];
    memcpy(s1, D1, sizeof D1);
    memcpy(s2, D2, sizeof D2);
    /* sort by insertion: small arrays */
    for (size_t i = 1; i < N_OF(s1); i++)
        for (size_t j = i; j > 0 && s1[j] < s1[j - 1]; j--) {
            double t = s1[j];
            s1[j] = s1[j - 1];
            s1[j - 1] = t;
        }
    for (size_t i = 1; i < N_OF(s2); i++)
        for (size_t j = i; j > 0 && s2[j] < s2[j - 1]; j--) {
            double t = s2[j];
            s2[j] = s2[j - 1];
            s2[j - 1] = t;
        }
    for (size_t k = 0; k < N_OF(qs); k++) {
        double v;
        kk_assert_ok(kk_stats_quantile(s1, N_OF(s1), qs[k], &v));
        assert_close(v, d1_want[k], 1e-15, "D1 quantile");
        kk_assert_ok(kk_stats_quantile(s2, N_OF(s2), qs[k], &v));
        assert_close(v, d2_want[k], 1e-15, "D2 quantile");
    }
    double v = -1.0;
    kk_assert_status(kk_stats_quantile(D1, N_OF(D1), 0.5, &v), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "sorted[1]"); /* 11.8 after 12.1 */
    kk_assert_contains(kk_last_error()->expected, "ascending");
    assert_true(v == -1.0);
    kk_assert_status(kk_stats_quantile(s1, N_OF(s1), 1.5, &v), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "q");
    kk_assert_status(kk_stats_quantile(s1, N_OF(s1), NAN, &v), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_stats_quantile(s1, 0, 0.5, &v), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_stats_quantile(s1, N_OF(s1), 0.5, NULL), KK_ERR_INVALID_ARGUMENT);
}

/* For odd n the bootstrap distribution of the median is known exactly:
 * P(median* <= s[j]) = P(Binomial(n, (j+1)/n) >= (n+1)/2). For D5 (n = 11) its
 * 2.5% and 97.5% points are s[2] = 46.99 and s[8] = 51.52, far (0.018) from
 * any step, and its standard deviation is 1.268613513553481, an RSE of
 * 0.026076331213843392 (expected.py, "exact bootstrap of the median"). */
static void bootstrap_matches_the_exact_distribution(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        kk_stats_summary s;
        kk_assert_ok(kk_stats_summarize(D5, N_OF(D5), seed, 0, &s));
        assert_close(s.median, 48.65, 0, "median");
        assert_close(s.median_ci_low, 46.99, 0, "CI low");
        assert_close(s.median_ci_high, 51.52, 0, "CI high");
        /* Monte Carlo error of a standard deviation from 10,000 draws: ~0.7% */
        assert_close(s.median_rse, 0.026076331213843392, 0.03, "RSE, B = 10000");
    }
    double rse;
    kk_assert_ok(kk_stats_median_rse(D5, N_OF(D5), 99, 200000, &rse));
    assert_close(rse, 0.026076331213843392, 0.01, "RSE, B = 200000");
    /* the cheap default (500 resamples): within ~3 standard errors of 3.2% */
    kk_assert_ok(kk_stats_median_rse(D5, N_OF(D5), 99, 0, &rse));
    assert_close(rse, 0.026076331213843392, 0.12, "RSE, B = 500");
}

static void bootstrap_is_deterministic_and_seeded(void **state) {
    (void)state;
    enum { N = 200 };
    double x[N];
    t_seed(11);
    for (int i = 0; i < N; i++) x[i] = 10.0 + t_normal();
    kk_stats_summary a, b, c;
    kk_assert_ok(kk_stats_summarize(x, N, 5, 0, &a));
    kk_assert_ok(kk_stats_summarize(x, N, 5, 0, &b));
    assert_memory_equal(&a, &b, sizeof a);
    kk_assert_ok(kk_stats_summarize(x, N, 6, 0, &c));
    assert_true(c.median == a.median);
    assert_true(c.median_ci_low != a.median_ci_low || c.median_ci_high != a.median_ci_high ||
                c.median_rse != a.median_rse);
    double width = a.median_ci_high - a.median_ci_low;
    assert_true(fabs(c.median_ci_low - a.median_ci_low) < 0.2 * width);
    assert_true(fabs(c.median_ci_high - a.median_ci_high) < 0.2 * width);
    assert_close(c.median_rse, a.median_rse, 0.05, "RSE with another seed");

    /* the sampler's function gives the summary's number for the same seed and B */
    double rse;
    kk_assert_ok(kk_stats_median_rse(x, N, 5, KK_STATS_DEFAULT_RESAMPLES, &rse));
    assert_true(rse == a.median_rse);
    /* the order of the input does not matter (it is sorted first) */
    for (int i = 0; i < N / 2; i++) {
        double t = x[i];
        x[i] = x[N - 1 - i];
        x[N - 1 - i] = t;
    }
    kk_assert_ok(kk_stats_summarize(x, N, 5, 0, &b));
    assert_memory_equal(&a, &b, sizeof a);
}

/* Pins the library's random stream (xoshiro256** seeded by splitmix64, the
 * reference algorithm transcribed in expected.py), so bootstrap numbers are the
 * same on every platform and compiler. */
static void generator_is_the_reference_xoshiro(void **state) {
    (void)state;
    kk__rng rng;
    kk__rng_seed(&rng, 0);
    assert_true(kk__rng_next(&rng) == 0x99ec5f36cb75f2b4ull);
    assert_true(kk__rng_next(&rng) == 0xbf6e1f784956452aull);
    assert_true(kk__rng_next(&rng) == 0x1a5f849d4933e6e0ull);
    kk__rng_seed(&rng, 12345);
    assert_true(kk__rng_next(&rng) == 0xbe6a36374160d49bull);
    /* bounded draws are uniform: 7 buckets of 70,000 draws, each within 2% */
    unsigned count[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint32_t v = kk__rng_below(&rng, 7);
        assert_true(v < 7);
        count[v]++;
    }
    for (int k = 0; k < 7; k++) assert_true(count[k] > 9800 && count[k] < 10200);
    assert_int_equal(kk__rng_below(&rng, 1), 0);
    /* counts of draws: as many as asked, all in range */
    uint32_t c3[3] = {0};
    kk__rng_count_below(&rng, 3, 1001, c3);
    assert_int_equal(c3[0] + c3[1] + c3[2], 1001);
    assert_true(c3[0] > 280 && c3[1] > 280 && c3[2] > 280);
    for (int i = 0; i < 1000; i++) {
        double u = kk__rng_uniform(&rng);
        assert_true(u >= 0.0 && u < 1.0);
    }
}

/* n = 200 from N(10, 1): the 95% interval of the median holds 10 in most of
 * 200 seeded trials (2,000 resamples each to keep the test fast). */
static void median_interval_covers_the_true_median(void **state) {
    (void)state;
    enum { N = 200, TRIALS = 200 };
    double x[N];
    int covered = 0;
    for (int t = 0; t < TRIALS; t++) {
        t_seed(1000 + (uint64_t)t);
        for (int i = 0; i < N; i++) x[i] = 10.0 + t_normal();
        kk_stats_summary s;
        kk_assert_ok(kk_stats_summarize(x, N, (uint64_t)t, 2000, &s));
        covered += s.median_ci_low <= 10.0 && 10.0 <= s.median_ci_high;
    }
    print_message("median CI coverage: %d / %d\n", covered, TRIALS);
    assert_true(covered >= 180);
}

/* ---- two samples ---- */

typedef struct mwu_case {
    const char *name;
    const double *x;
    size_t nx;
    const double *y;
    size_t ny;
    double u, p_exact, p_asymptotic, delta; /* p_exact < 0: not applicable (ties) */
} mwu_case;

/* scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method=M, use_continuity=True)
 * for M = "exact" and "asymptotic"; delta = np.mean(np.sign(x[:, None] - y[None, :])). */
static const double M1_X[] = {19, 22, 16, 29, 24}, M1_Y[] = {20, 11, 17, 12};
static const double M2_X[] = {1.1, 2.3, 3.5, 4.2, 5.9}, M2_Y[] = {2.0, 6.1, 7.3, 8.4, 9.0, 10.5};
static const double M5_X[] = {1.0, 1.0, 1.0}, M5_Y[] = {1.0, 1.0};
static const mwu_case k_mwu[] = {
    {"M1", M1_X, 5, M1_Y, 4, 17.0, 0.1111111111111111, 0.11134688653314041, 0.7},
    {"M2", M2_X, 5, M2_Y, 6, 4.0, 0.05194805194805195, 0.05523425371806383, -0.7333333333333333},
    {"M3", M3_X, 25, M3_Y, 25, 276.5, -1, 0.48881181045716604, -0.1152},
    {"M4", M4_X, 30, M4_Y, 40, 353.0, 0.003034101990548097, 0.0034399516086694158,
     -0.4116666666666667},
    {"M5", M5_X, 3, M5_Y, 2, 3.0, -1, 1.0, 0.0},
};

static void mann_whitney_matches_scipy(void **state) {
    (void)state;
    for (size_t k = 0; k < N_OF(k_mwu); k++) {
        const mwu_case *c = &k_mwu[k];
        kk_mwu_result r;
        kk_assert_ok(kk_mann_whitney_u(c->x, c->nx, c->y, c->ny, KK_MWU_ASYMPTOTIC, &r));
        assert_close(r.u, c->u, 0, c->name);
        assert_close(r.p_value, c->p_asymptotic, 1e-12, c->name);
        assert_int_equal(r.method, KK_MWU_ASYMPTOTIC);
        assert_int_equal(r.has_ties, c->p_exact < 0);
        kk_assert_ok(kk_mann_whitney_u(c->x, c->nx, c->y, c->ny, KK_MWU_AUTO, &r));
        if (c->p_exact >= 0) {
            /* no ties and nx*ny <= 2500: AUTO is exact */
            assert_int_equal(r.method, KK_MWU_EXACT);
            assert_close(r.p_value, c->p_exact, 1e-12, c->name);
            kk_assert_ok(kk_mann_whitney_u(c->x, c->nx, c->y, c->ny, KK_MWU_EXACT, &r));
            assert_close(r.p_value, c->p_exact, 1e-12, c->name);
            /* swapping the samples: U becomes nx*ny - U, p stays */
            kk_assert_ok(kk_mann_whitney_u(c->y, c->ny, c->x, c->nx, KK_MWU_EXACT, &r));
            assert_close(r.u, (double)(c->nx * c->ny) - c->u, 0, c->name);
            assert_close(r.p_value, c->p_exact, 1e-12, c->name);
        } else {
            assert_int_equal(r.method, KK_MWU_ASYMPTOTIC);
            kk_assert_status(kk_mann_whitney_u(c->x, c->nx, c->y, c->ny, KK_MWU_EXACT, &r),
                             KK_ERR_INVALID_ARGUMENT);
            assert_string_equal(kk_last_error()->argument, "method");
        }
        double d;
        kk_assert_ok(kk_cliffs_delta(c->x, c->nx, c->y, c->ny, &d));
        assert_close(d, c->delta, 1e-14, c->name);
    }
    /* exact distribution at its smallest: one value each, p = 1 */
    double a = 1.0, b = 2.0;
    kk_mwu_result r;
    kk_assert_ok(kk_mann_whitney_u(&a, 1, &b, 1, KK_MWU_AUTO, &r));
    assert_true(r.method == KK_MWU_EXACT && r.p_value == 1.0 && r.u == 0.0);
    /* 60 x 60 distinct values: too many pairs for the exact table */
    double x[60], y[60];
    for (int i = 0; i < 60; i++) x[i] = i, y[i] = i + 0.5;
    kk_assert_ok(kk_mann_whitney_u(x, 60, y, 60, KK_MWU_AUTO, &r));
    assert_int_equal(r.method, KK_MWU_ASYMPTOTIC);
    kk_assert_status(kk_mann_whitney_u(x, 60, y, 60, KK_MWU_EXACT, &r), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mann_whitney_u(x, 60, y, 60, (kk_mwu_method)7, &r),
                     KK_ERR_INVALID_ARGUMENT);
}

static double naive_delta(const double *x, size_t nx, const double *y, size_t ny) {
    long long s = 0;
    for (size_t i = 0; i < nx; i++)
        for (size_t j = 0; j < ny; j++) s += (x[i] > y[j]) - (x[i] < y[j]);
    return (double)s / ((double)nx * (double)ny);
}

static void cliffs_delta_known_cases_and_naive(void **state) {
    (void)state;
    double d;
    const double lo[] = {1, 2, 3}, hi[] = {4, 5, 6, 7};
    kk_assert_ok(kk_cliffs_delta(hi, 4, lo, 3, &d));
    assert_true(d == 1.0);
    kk_assert_ok(kk_cliffs_delta(lo, 3, hi, 4, &d));
    assert_true(d == -1.0);
    kk_assert_ok(kk_cliffs_delta(lo, 3, lo, 3, &d));
    assert_true(d == 0.0);
    /* by hand: x = {1,2,3}, y = {2,2,4}; x > y: (3,2),(3,2) = 2 pairs;
     * x < y: (1,2),(1,2),(1,4),(2,4),(3,4) = 5 pairs; delta = (2 - 5) / 9 */
    const double hx[] = {1, 2, 3}, hy[] = {2, 2, 4};
    kk_assert_ok(kk_cliffs_delta(hx, 3, hy, 3, &d));
    assert_close(d, -1.0 / 3.0, 1e-15, "hand case");

    /* random data with many ties, against the O(n^2) definition */
    static double x[700], y[900];
    t_seed(77);
    for (int trial = 0; trial < 30; trial++) {
        size_t nx = 1 + (size_t)(t_uniform() * 700), ny = 1 + (size_t)(t_uniform() * 900);
        double grid = trial % 3 == 0 ? 1.0 : 0.1; /* coarse grid: ties */
        for (size_t i = 0; i < nx; i++) x[i] = round((5.0 + t_normal()) / grid) * grid;
        for (size_t j = 0; j < ny; j++) y[j] = round((5.3 + t_normal()) / grid) * grid;
        kk_assert_ok(kk_cliffs_delta(x, nx, y, ny, &d));
        assert_close(d, naive_delta(x, nx, y, ny), 1e-12, "naive");
    }

    /* magnitude thresholds of Romano et al. (2006) */
    assert_int_equal(kk_cliffs_magnitude(0.0), KK_EFFECT_NEGLIGIBLE);
    assert_int_equal(kk_cliffs_magnitude(-0.146), KK_EFFECT_NEGLIGIBLE);
    assert_int_equal(kk_cliffs_magnitude(0.147), KK_EFFECT_SMALL);
    assert_int_equal(kk_cliffs_magnitude(-0.329), KK_EFFECT_SMALL);
    assert_int_equal(kk_cliffs_magnitude(0.33), KK_EFFECT_MEDIUM);
    assert_int_equal(kk_cliffs_magnitude(0.473), KK_EFFECT_MEDIUM);
    assert_int_equal(kk_cliffs_magnitude(-0.474), KK_EFFECT_LARGE);
    assert_int_equal(kk_cliffs_magnitude(1.0), KK_EFFECT_LARGE);
    assert_string_equal(kk_effect_size_name(KK_EFFECT_NEGLIGIBLE), "negligible");
    assert_string_equal(kk_effect_size_name(KK_EFFECT_SMALL), "small");
    assert_string_equal(kk_effect_size_name(KK_EFFECT_MEDIUM), "medium");
    assert_string_equal(kk_effect_size_name(KK_EFFECT_LARGE), "large");
    assert_string_equal(kk_effect_size_name((kk_effect_size)9), "unknown");
}

/* The verdict rules, one row per case: threshold 3% (bounds 1/1.03 = 0.97087 and
 * 1.03), alpha 0.05. */
static void verdict_rules_table(void **state) {
    (void)state;
    static const struct {
        double lo, hi, p;
        kk_verdict want;
    } rows[] = {
        {1.05, 1.10, 0.001, KK_VERDICT_SLOWER},    /* whole CI above 1.03, significant */
        {1.05, 1.10, 0.20, KK_VERDICT_AMBIGUOUS},  /* above, but the test disagrees */
        {1.03, 1.10, 0.001, KK_VERDICT_AMBIGUOUS}, /* touches the bound: not wholly above */
        {0.90, 0.95, 0.001, KK_VERDICT_FASTER},    /* whole CI below 1/1.03 */
        {0.90, 0.95, 0.06, KK_VERDICT_AMBIGUOUS},
        {0.90, 0.971, 0.001, KK_VERDICT_AMBIGUOUS}, /* 0.971 > 1/1.03 = 0.97087 */
        {0.96, 0.969, 0.001, KK_VERDICT_FASTER},    /* below 1/1.03 though above 0.97 = 1-3% */
        {0.99, 1.02, 0.001, KK_VERDICT_SAME},       /* significant but small: SAME */
        {0.99, 1.02, 0.80, KK_VERDICT_SAME},
        {1.0 / 1.03, 1.03, 0.5, KK_VERDICT_SAME},  /* bounds are inclusive for SAME */
        {1.00, 1.05, 0.001, KK_VERDICT_AMBIGUOUS}, /* straddles 1.03 */
        {0.95, 1.01, 0.30, KK_VERDICT_AMBIGUOUS},  /* straddles 1/1.03 */
        {0.90, 1.10, 0.90, KK_VERDICT_AMBIGUOUS},  /* straddles both */
        {NAN, 1.0, 0.001, KK_VERDICT_AMBIGUOUS},
        {1.05, 1.10, NAN, KK_VERDICT_AMBIGUOUS},
    };
    for (size_t i = 0; i < N_OF(rows); i++) {
        kk_verdict v = kk_compare_verdict(rows[i].lo, rows[i].hi, rows[i].p, 0.03, 0.05);
        if (v != rows[i].want)
            fail_msg("row %zu: [%g, %g] p=%g gave %s, expected %s", i, rows[i].lo, rows[i].hi,
                     rows[i].p, kk_verdict_name(v), kk_verdict_name(rows[i].want));
    }
    /* threshold 0: SAME only for an interval of exactly 1 */
    assert_int_equal(kk_compare_verdict(1.0, 1.0, 1.0, 0.0, 0.05), KK_VERDICT_SAME);
    assert_int_equal(kk_compare_verdict(1.0, 1.001, 1.0, 0.0, 0.05), KK_VERDICT_AMBIGUOUS);
    assert_string_equal(kk_verdict_name(KK_VERDICT_SAME), "SAME");
    assert_string_equal(kk_verdict_name(KK_VERDICT_FASTER), "FASTER");
    assert_string_equal(kk_verdict_name(KK_VERDICT_SLOWER), "SLOWER");
    assert_string_equal(kk_verdict_name(KK_VERDICT_AMBIGUOUS), "AMBIGUOUS");
    assert_string_equal(kk_verdict_name((kk_verdict)-1), "UNKNOWN");
}

static void compare_matches_scipy_on_m4(void **state) {
    (void)state;
    kk_compare_result r;
    kk_assert_ok(kk_stats_compare(M4_X, 30, M4_Y, 40, NULL, &r));
    /* np.median(M4_X), np.median(M4_Y) and their ratio */
    assert_close(r.median_base, 10.15, 1e-15, "median_base");
    assert_close(r.median_cand, 11.248000000000001, 1e-15, "median_cand");
    assert_close(r.ratio, 1.1081773399014778, 1e-14, "ratio");
    /* scipy.stats.mannwhitneyu(M4_Y, M4_X, alternative="two-sided", method="exact") */
    assert_close(r.mwu.u, 847.0, 0, "U");
    assert_close(r.mwu.p_value, 0.003034101990548097, 1e-12, "p");
    assert_int_equal(r.mwu.method, KK_MWU_EXACT);
    assert_close(r.cliffs_delta, 0.4116666666666667, 1e-14, "delta");
    assert_int_equal(r.effect, KK_EFFECT_MEDIUM);
    assert_true(r.ratio_ci_low < r.ratio && r.ratio < r.ratio_ci_high);
    assert_int_equal(r.n_base, 30);
    assert_int_equal(r.n_cand, 40);
    /* defaults filled in */
    assert_close(r.options.threshold, 0.03, 0, "threshold");
    assert_close(r.options.alpha, 0.05, 0, "alpha");
    assert_close(r.options.confidence, 0.95, 0, "confidence");
    assert_int_equal(r.options.resamples, 10000);
    assert_true(r.options.seed == KK_STATS_DEFAULT_SEED);
    /* deterministic */
    kk_compare_result again;
    kk_assert_ok(kk_stats_compare(M4_X, 30, M4_Y, 40, NULL, &again));
    assert_memory_equal(&r, &again, sizeof r);
}

/* The verdict for base ~ 100 (1 + noise N), cand ~ 100 factor (1 + noise N), n each
 * (t_times); resamples 0 is the default 10,000, the loops use 2,000 to stay fast. */
static kk_verdict planted(uint64_t seed, size_t n, double factor, double noise, int resamples,
                          kk_compare_result *res) {
    static double base[1000], cand[1000];
    t_seed(seed);
    t_times(base, n, 100.0, noise);
    t_times(cand, n, 100.0 * factor, noise);
    kk_compare_options o;
    kk_compare_options_default(&o);
    o.seed = seed;
    o.resamples = resamples;
    kk_compare_result r;
    kk_assert_ok(kk_stats_compare(base, n, cand, n, &o, &r));
    if (res) *res = r;
    return r.verdict;
}

static void verdicts_on_planted_changes(void **state) {
    (void)state;
    kk_compare_result r;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        assert_int_equal(planted(seed, 100, 1.10, 0.01, 0, &r), KK_VERDICT_SLOWER);
        assert_true(r.ratio_ci_low > 1.08 && r.ratio_ci_high < 1.12);
        assert_int_equal(r.effect, KK_EFFECT_LARGE);
        assert_int_equal(planted(seed, 100, 1.0 / 1.10, 0.01, 0, &r), KK_VERDICT_FASTER);
        /* 1% slower with a 3% threshold: SAME, although the test finds it (p < 0.05) and
         * |delta| is large: with low-noise timings any shift is "significant" */
        assert_int_equal(planted(seed, 200, 1.01, 0.005, 0, &r), KK_VERDICT_SAME);
        assert_true(r.mwu.p_value < 0.05);
        assert_true(fabs(r.cliffs_delta) > 0.474);
        /* about 3% with 5% noise: the interval straddles 1.03 */
        assert_int_equal(planted(seed, 60, 1.03, 0.05, 0, &r), KK_VERDICT_AMBIGUOUS);
        assert_true(r.ratio_ci_low < 1.03 && 1.03 < r.ratio_ci_high);
    }
    /* A/A: two samples of one distribution. With noise up to the threshold and beyond
     * (5%), never SLOWER or FASTER: the relative threshold holds them off. */
    static const double noises[] = {0.002, 0.01, 0.05};
    static const size_t sizes[] = {10, 30, 200};
    int same = 0, total = 0;
    for (uint64_t seed = 100; seed < 125; seed++)
        for (size_t k = 0; k < N_OF(noises); k++)
            for (size_t m = 0; m < N_OF(sizes); m++) {
                kk_verdict v = planted(seed, sizes[m], 1.0, noises[k], 2000, &r);
                if (v == KK_VERDICT_SLOWER || v == KK_VERDICT_FASTER)
                    fail_msg("A/A seed %llu n %zu noise %g: %s, CI [%g, %g], p %g",
                             (unsigned long long)seed, sizes[m], noises[k], kk_verdict_name(v),
                             r.ratio_ci_low, r.ratio_ci_high, r.mwu.p_value);
                same += v == KK_VERDICT_SAME;
                total++;
            }
    print_message("A/A: %d of %d SAME, the rest AMBIGUOUS\n", same, total);
    /* With noise far above the threshold (15%) the threshold no longer helps and a
     * false SLOWER is a chance event bounded by the interval's tail, about 2.5%
     * (docs/statistics.md): at most 5 in 200 here (measured: 1.25% over 400 seeds). */
    int wrong = 0;
    for (uint64_t seed = 200; seed < 300; seed++) {
        wrong += planted(seed, 10, 1.0, 0.15, 2000, &r) != KK_VERDICT_AMBIGUOUS;
        wrong += planted(seed, 30, 1.0, 0.15, 2000, &r) != KK_VERDICT_AMBIGUOUS;
    }
    print_message("A/A at 15%% noise: %d of 200 not AMBIGUOUS\n", wrong);
    assert_true(wrong <= 5);
    /* low noise and enough samples: SAME */
    assert_int_equal(planted(7, 200, 1.0, 0.01, 0, NULL), KK_VERDICT_SAME);
}

static void ratio_interval_covers_the_true_ratio(void **state) {
    (void)state;
    enum { N = 100 };
    double base[N], cand[N];
    int covered = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        t_seed(seed * 31);
        for (int i = 0; i < N; i++) base[i] = 100.0 + 2.0 * t_normal();
        for (int i = 0; i < N; i++) cand[i] = 105.0 + 2.0 * t_normal();
        kk_compare_options o;
        kk_compare_options_default(&o);
        o.seed = seed;
        o.resamples = 2000;
        kk_compare_result r;
        kk_assert_ok(kk_stats_compare(base, N, cand, N, &o, &r));
        covered += r.ratio_ci_low <= 1.05 && 1.05 <= r.ratio_ci_high;
        assert_int_equal(r.verdict, KK_VERDICT_SLOWER);
        /* swapping the roles mirrors the verdict */
        kk_assert_ok(kk_stats_compare(cand, N, base, N, &o, &r));
        assert_int_equal(r.verdict, KK_VERDICT_FASTER);
        assert_true(r.ratio_ci_low <= 1 / 1.05 + 0.02 && 1 / 1.05 - 0.02 <= r.ratio_ci_high);
    }
    print_message("ratio CI coverage: %d / 40\n", covered);
    assert_true(covered >= 34);
}

/* ---- bad arguments: named, with the index, outputs untouched ---- */

static void assert_error(kk_status st, const char *function, const char *argument,
                         const char *value) {
    if (st != KK_ERR_INVALID_ARGUMENT)
        fail_msg("got %s, expected KK_ERR_INVALID_ARGUMENT (%s)", kk_status_name(st),
                 kk_last_error_message());
    assert_string_equal(kk_last_error()->function, function);
    assert_string_equal(kk_last_error()->argument, argument);
    if (value) assert_string_equal(kk_last_error()->value, value);
}

static void bad_arguments_are_named(void **state) {
    (void)state;
    double x[] = {1.0, 2.0, 3.0, NAN, 5.0};
    double ok[] = {1.0, 2.0, 3.0, 4.0, 5.0};
    kk_stats_summary s, untouched;
    memset(&s, 0xab, sizeof s);
    untouched = s;
    assert_error(kk_stats_summarize(x, 5, 1, 0, &s), "kk_stats_summarize", "x[3]", "nan");
    assert_memory_equal(&s, &untouched, sizeof s);
    x[3] = INFINITY;
    assert_error(kk_stats_summarize(x, 5, 1, 0, &s), "kk_stats_summarize", "x[3]", "inf");
    assert_error(kk_stats_summarize(NULL, 5, 1, 0, &s), "kk_stats_summarize", "x", "NULL");
    assert_error(kk_stats_summarize(ok, 0, 1, 0, &s), "kk_stats_summarize", "length of x", "0");
    assert_error(kk_stats_summarize(ok, 5, 1, 500, &s), "kk_stats_summarize", "resamples", "500");
    assert_error(kk_stats_summarize(ok, 5, 1, -1, &s), "kk_stats_summarize", "resamples", "-1");
    assert_error(kk_stats_summarize(ok, 5, 1, KK_STATS_MAX_RESAMPLES + 1, &s), "kk_stats_summarize",
                 "resamples", NULL);
    assert_error(kk_stats_summarize(ok, 5, 1, 0, NULL), "kk_stats_summarize", "out", "NULL");
    assert_memory_equal(&s, &untouched, sizeof s);

    double rse = -1.0;
    kk_assert_ok(kk_stats_median_rse(ok, 5, 1, KK_STATS_RSE_MIN_RESAMPLES, &rse));
    assert_error(kk_stats_median_rse(ok, 5, 1, 99, &rse), "kk_stats_median_rse", "resamples", "99");
    assert_error(kk_stats_median_rse(ok, 5, 1, 0, NULL), "kk_stats_median_rse", "rse", "NULL");

    kk_compare_result r, r0;
    memset(&r, 0xcd, sizeof r);
    r0 = r;
    double zero[] = {1.0, 2.0, 0.0};
    assert_error(kk_stats_compare(zero, 3, ok, 5, NULL, &r), "kk_stats_compare", "base[2]", "0");
    kk_assert_contains(kk_last_error()->expected, "> 0");
    double neg[] = {1.0, -2.0};
    assert_error(kk_stats_compare(ok, 5, neg, 2, NULL, &r), "kk_stats_compare", "cand[1]", "-2");
    x[3] = NAN;
    assert_error(kk_stats_compare(ok, 5, x, 5, NULL, &r), "kk_stats_compare", "cand[3]", "nan");
    assert_error(kk_stats_compare(ok, 5, NULL, 5, NULL, &r), "kk_stats_compare", "cand", "NULL");
    assert_error(kk_stats_compare(ok, 0, ok, 5, NULL, &r), "kk_stats_compare", "length of base",
                 "0");
    assert_error(kk_stats_compare(ok, 5, ok, 5, NULL, NULL), "kk_stats_compare", "out", "NULL");
    kk_compare_options o;
    kk_compare_options_default(&o);
    o.threshold = -0.01;
    assert_error(kk_stats_compare(ok, 5, ok, 5, &o, &r), "kk_stats_compare", "opt->threshold",
                 "-0.01");
    o.threshold = NAN;
    assert_error(kk_stats_compare(ok, 5, ok, 5, &o, &r), "kk_stats_compare", "opt->threshold",
                 NULL);
    kk_compare_options_default(&o);
    o.alpha = 0.0;
    assert_error(kk_stats_compare(ok, 5, ok, 5, &o, &r), "kk_stats_compare", "opt->alpha", "0");
    kk_compare_options_default(&o);
    o.confidence = 1.0;
    assert_error(kk_stats_compare(ok, 5, ok, 5, &o, &r), "kk_stats_compare", "opt->confidence",
                 "1");
    kk_compare_options_default(&o);
    o.resamples = 10;
    assert_error(kk_stats_compare(ok, 5, ok, 5, &o, &r), "kk_stats_compare", "opt->resamples",
                 "10");
    assert_memory_equal(&r, &r0, sizeof r);
    o.resamples = 0; /* 0 means the default */
    kk_assert_ok(kk_stats_compare(ok, 5, ok, 5, &o, &r));
    assert_int_equal(r.options.resamples, KK_STATS_DEFAULT_RESAMPLES);
    /* identical samples, but five values say little: the interval is wide */
    assert_int_equal(r.verdict, KK_VERDICT_AMBIGUOUS);
    assert_true(r.ratio == 1.0 && r.cliffs_delta == 0.0 && r.mwu.p_value == 1.0);

    double d = 5.0;
    assert_error(kk_cliffs_delta(x, 5, ok, 5, &d), "kk_cliffs_delta", "x[3]", "nan");
    assert_error(kk_cliffs_delta(ok, 5, ok, 0, &d), "kk_cliffs_delta", "length of y", "0");
    assert_error(kk_cliffs_delta(ok, 5, ok, 5, NULL), "kk_cliffs_delta", "delta", "NULL");
    assert_true(d == 5.0);
    kk_mwu_result m;
    assert_error(kk_mann_whitney_u(ok, 5, x, 5, KK_MWU_AUTO, &m), "kk_mann_whitney_u", "y[3]",
                 "nan");
    assert_error(kk_mann_whitney_u(ok, 5, ok, 5, KK_MWU_AUTO, NULL), "kk_mann_whitney_u", "out",
                 "NULL");
    kk_compare_options_default(NULL); /* harmless */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(summary_matches_numpy),
        cmocka_unit_test(quantiles_are_numpy_linear),
        cmocka_unit_test(bootstrap_matches_the_exact_distribution),
        cmocka_unit_test(bootstrap_is_deterministic_and_seeded),
        cmocka_unit_test(generator_is_the_reference_xoshiro),
        cmocka_unit_test(median_interval_covers_the_true_median),
        cmocka_unit_test(mann_whitney_matches_scipy),
        cmocka_unit_test(cliffs_delta_known_cases_and_naive),
        cmocka_unit_test(verdict_rules_table),
        cmocka_unit_test(compare_matches_scipy_on_m4),
        cmocka_unit_test(verdicts_on_planted_changes),
        cmocka_unit_test(ratio_interval_covers_the_true_ratio),
        cmocka_unit_test(bad_arguments_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

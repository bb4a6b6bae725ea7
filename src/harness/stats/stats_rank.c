/* Statistics on ranks: Mann-Whitney U (exact and asymptotic) and Cliff's delta.
 *
 * Both come from the same pair counts, found by sorting the two samples and
 * merging them once: O((nx + ny) log(nx + ny)) rather than looking at all
 * nx*ny pairs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/stats/stats_internal.h"

void kk__stats_rank_counts(const double *xs, size_t nx, const double *ys, size_t ny,
                           kk__rank_counts *out) {
    kk__rank_counts rc;
    memset(&rc, 0, sizeof rc);
    size_t i = 0, j = 0;
    while (i < nx || j < ny) {
        double v = (j >= ny || (i < nx && xs[i] <= ys[j])) ? xs[i] : ys[j];
        size_t a = 0, b = 0;
        while (i + a < nx && xs[i + a] == v) a++;
        while (j + b < ny && ys[j + b] == v) b++;
        rc.greater += (uint64_t)a * j; /* each of the a x's beats the j smaller y's */
        rc.less += (uint64_t)b * i;    /* each of the b y's beats the i smaller x's */
        rc.equal += (uint64_t)a * b;
        size_t t = a + b;
        if (t > 1) {
            rc.has_ties = 1;
            rc.tie_term += (double)t * (double)t * (double)t - (double)t;
        }
        i += a;
        j += b;
    }
    *out = rc;
}

double kk__stats_delta_from_counts(const kk__rank_counts *rc, size_t nx, size_t ny) {
    double diff = rc->greater >= rc->less ? (double)(rc->greater - rc->less)
                                          : -(double)(rc->less - rc->greater);
    return diff / ((double)nx * (double)ny);
}

/* P(U >= u_obs) under the null for samples of m and n values with no ties.
 * U counts, for each of the m values, the n-values below it: a nondecreasing
 * sequence of m numbers in 0..n, i.e. a multiset, and U is its sum. dp[c][s]
 * counts multisets of c numbers from 0..v with sum s, built up over v
 * (additions only, so doubles stay accurate); the total is C(m+n, m). */
static kk_status exact_sf(const char *fn, size_t m, size_t n, uint64_t u_obs, double *sf) {
    if (m > n) {
        size_t t = m;
        m = n;
        n = t;
    }
    size_t width = m * n + 1;
    double *dp = calloc((m + 1) * width, sizeof *dp);
    if (!dp) return kk__error(KK_ERR_OUT_OF_MEMORY, fn, "cannot allocate the exact U table");
    dp[0] = 1.0;
    for (size_t v = 0; v <= n; v++)
        for (size_t c = 1; c <= m; c++) {
            double *row = dp + c * width;
            const double *prev = dp + (c - 1) * width;
            for (size_t s = v; s <= c * v; s++) row[s] += prev[s - v];
        }
    const double *last = dp + m * width;
    double total = 0.0, tail = 0.0;
    for (size_t s = 0; s < width; s++) {
        total += last[s];
        if (s >= u_obs) tail += last[s];
    }
    free(dp);
    *sf = tail / total;
    return KK_OK;
}

kk_status kk__stats_mwu_from_counts(const char *fn, const kk__rank_counts *rc, size_t nx, size_t ny,
                                    kk_mwu_method method, kk_mwu_result *out) {
    double pairs = (double)nx * (double)ny;
    int exact_ok = !rc->has_ties && pairs <= (double)KK_MWU_EXACT_MAX_PAIRS;
    if (method != KK_MWU_AUTO && method != KK_MWU_EXACT && method != KK_MWU_ASYMPTOTIC)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, "method",
                             "KK_MWU_AUTO, KK_MWU_EXACT or KK_MWU_ASYMPTOTIC", "%d", (int)method);
    if (method == KK_MWU_EXACT && !exact_ok)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, "method",
                             "KK_MWU_AUTO or KK_MWU_ASYMPTOTIC when values are tied or "
                             "nx*ny > 2500",
                             "KK_MWU_EXACT with %s, nx*ny = %.0f",
                             rc->has_ties ? "ties" : "no ties", pairs);
    kk_mwu_result r;
    memset(&r, 0, sizeof r);
    r.u = (double)rc->greater + 0.5 * (double)rc->equal;
    r.has_ties = rc->has_ties;
    if (method == KK_MWU_EXACT || (method == KK_MWU_AUTO && exact_ok)) {
        /* Two-sided: twice the upper tail of the larger of U1 and U2 = nx*ny - U1. */
        uint64_t u1 = rc->greater, u2 = (uint64_t)nx * ny - u1;
        double sf = 1.0;
        kk_status st = exact_sf(fn, nx, ny, u1 > u2 ? u1 : u2, &sf);
        if (st) return st;
        r.method = KK_MWU_EXACT;
        r.z = 0.0;
        r.p_value = fmin(1.0, 2.0 * sf);
    } else {
        double big_n = (double)nx + (double)ny;
        double var = pairs / 12.0 * ((big_n + 1.0) - rc->tie_term / (big_n * (big_n - 1.0)));
        double d = r.u - pairs / 2.0;
        double num = fabs(d) <= 0.5 ? 0.0 : copysign(fabs(d) - 0.5, d);
        r.method = KK_MWU_ASYMPTOTIC;
        if (var > 0.0) {
            r.z = num / sqrt(var);
            r.p_value = fmin(1.0, erfc(fabs(r.z) / sqrt(2.0)));
        } else { /* every value equal: no evidence of a difference */
            r.z = 0.0;
            r.p_value = 1.0;
        }
    }
    *out = r;
    return KK_OK;
}

/* Validate two samples and sort copies of them into one scratch buffer. */
static kk_status sorted_pair(const char *fn, const double *x, size_t nx, const double *y, size_t ny,
                             double **buf) {
    kk_status st = kk__stats_check_sample(fn, "x", x, nx, 0);
    if (!st) st = kk__stats_check_sample(fn, "y", y, ny, 0);
    if (!st) st = kk__stats_alloc(fn, nx + ny, 0, buf, NULL);
    if (st) return st;
    memcpy(*buf, x, nx * sizeof *x);
    memcpy(*buf + nx, y, ny * sizeof *y);
    kk__stats_sort(*buf, nx);
    kk__stats_sort(*buf + nx, ny);
    return KK_OK;
}

kk_status kk_mann_whitney_u(const double *x, size_t nx, const double *y, size_t ny,
                            kk_mwu_method method, kk_mwu_result *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    double *buf = NULL;
    if (!st) st = sorted_pair(__func__, x, nx, y, ny, &buf);
    if (st) return st;
    kk__rank_counts rc;
    kk__stats_rank_counts(buf, nx, buf + nx, ny, &rc);
    free(buf);
    return kk__stats_mwu_from_counts(__func__, &rc, nx, ny, method, out);
}

kk_status kk_cliffs_delta(const double *x, size_t nx, const double *y, size_t ny, double *delta) {
    kk_status st = KK__CHECK_NOT_NULL(delta);
    double *buf = NULL;
    if (!st) st = sorted_pair(__func__, x, nx, y, ny, &buf);
    if (st) return st;
    kk__rank_counts rc;
    kk__stats_rank_counts(buf, nx, buf + nx, ny, &rc);
    free(buf);
    *delta = kk__stats_delta_from_counts(&rc, nx, ny);
    return KK_OK;
}

kk_effect_size kk_cliffs_magnitude(double delta) {
    double a = fabs(delta);
    if (a < 0.147) return KK_EFFECT_NEGLIGIBLE;
    if (a < 0.33) return KK_EFFECT_SMALL;
    if (a < 0.474) return KK_EFFECT_MEDIUM;
    return KK_EFFECT_LARGE;
}

const char *kk_effect_size_name(kk_effect_size effect) {
    switch (effect) {
    case KK_EFFECT_NEGLIGIBLE: return "negligible";
    case KK_EFFECT_SMALL: return "small";
    case KK_EFFECT_MEDIUM: return "medium";
    case KK_EFFECT_LARGE: return "large";
    }
    return "unknown";
}

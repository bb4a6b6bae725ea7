/* Comparing two samples of times: the ratio of medians with its bootstrap
 * interval, Mann-Whitney U, Cliff's delta and the verdict. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/stats/stats_internal.h"

void kk_compare_options_default(kk_compare_options *opt) {
    if (!opt) return;
    opt->threshold = 0.03;
    opt->alpha = 0.05;
    opt->confidence = 0.95;
    opt->resamples = KK_STATS_DEFAULT_RESAMPLES;
    opt->seed = KK_STATS_DEFAULT_SEED;
}

const char *kk_verdict_name(kk_verdict verdict) {
    switch (verdict) {
    case KK_VERDICT_SAME: return "SAME";
    case KK_VERDICT_FASTER: return "FASTER";
    case KK_VERDICT_SLOWER: return "SLOWER";
    case KK_VERDICT_AMBIGUOUS: return "AMBIGUOUS";
    }
    return "UNKNOWN";
}

kk_verdict kk_compare_verdict(double ratio_ci_low, double ratio_ci_high, double p_value,
                              double threshold, double alpha) {
    double hi = 1.0 + threshold, lo = 1.0 / (1.0 + threshold);
    /* Every comparison is false with a NaN, which then falls through to AMBIGUOUS. */
    if (ratio_ci_low > hi && p_value < alpha) return KK_VERDICT_SLOWER;
    if (ratio_ci_high < lo && p_value < alpha) return KK_VERDICT_FASTER;
    if (ratio_ci_low >= lo && ratio_ci_high <= hi) return KK_VERDICT_SAME;
    return KK_VERDICT_AMBIGUOUS;
}

static kk_status check_options(const char *fn, const kk_compare_options *in,
                               kk_compare_options *opt) {
    if (!in) {
        kk_compare_options_default(opt);
        return KK_OK;
    }
    *opt = *in;
    if (!(opt->threshold >= 0.0 && opt->threshold <= 1.0))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, "opt->threshold",
                             "a relative change 0 .. 1 (0.03 is 3%)", "%g", opt->threshold);
    if (!(opt->alpha > 0.0 && opt->alpha < 1.0))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, "opt->alpha", "0 < alpha < 1", "%g",
                             opt->alpha);
    if (!(opt->confidence >= 0.5 && opt->confidence < 1.0))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, fn, "opt->confidence",
                             "0.5 <= confidence < 1", "%g", opt->confidence);
    int b = 0;
    kk_status st =
        kk__stats_check_resamples(fn, "opt->resamples", opt->resamples, KK_STATS_DEFAULT_RESAMPLES,
                                  KK_STATS_MIN_RESAMPLES, &b);
    if (st) return st;
    opt->resamples = b;
    return KK_OK;
}

kk_status kk_stats_compare(const double *base, size_t nb, const double *cand, size_t nc,
                           const kk_compare_options *opt, kk_compare_result *out) {
    kk_compare_options o;
    kk_status st = kk__stats_check_sample(__func__, "base", base, nb, 1);
    if (!st) st = kk__stats_check_sample(__func__, "cand", cand, nc, 1);
    if (!st) st = check_options(__func__, opt, &o);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;

    size_t b = (size_t)o.resamples, nmax = nb > nc ? nb : nc;
    double *bs;
    uint32_t *counts;
    if ((st = kk__stats_alloc(__func__, nb + nc + b, nmax, &bs, &counts))) return st;
    double *cs = bs + nb, *ratios = cs + nc;
    memcpy(bs, base, nb * sizeof *base);
    memcpy(cs, cand, nc * sizeof *cand);
    kk__stats_sort(bs, nb);
    kk__stats_sort(cs, nc);

    kk_compare_result r;
    memset(&r, 0, sizeof r);
    r.n_base = nb;
    r.n_cand = nc;
    r.median_base = kk__stats_quantile_sorted(bs, nb, 0.5);
    r.median_cand = kk__stats_quantile_sorted(cs, nc, 0.5);
    r.ratio = r.median_cand / r.median_base;

    /* Resample both samples independently from one stream: per resample, nb
     * draws for the base, then nc for the candidate. Times are > 0, so every
     * bootstrap median is > 0 and every ratio finite. */
    kk__rng rng;
    kk__rng_seed(&rng, o.seed);
    for (size_t i = 0; i < b; i++) {
        double mb = kk__stats_boot_median(bs, nb, counts, &rng);
        double mc = kk__stats_boot_median(cs, nc, counts, &rng);
        ratios[i] = mc / mb;
    }
    kk__stats_sort(ratios, b);
    double tail = (1.0 - o.confidence) / 2.0;
    r.ratio_ci_low = kk__stats_quantile_sorted(ratios, b, tail);
    r.ratio_ci_high = kk__stats_quantile_sorted(ratios, b, 1.0 - tail);

    kk__rank_counts rc;
    kk__stats_rank_counts(cs, nc, bs, nb, &rc);
    free(bs);
    if ((st = kk__stats_mwu_from_counts(__func__, &rc, nc, nb, KK_MWU_AUTO, &r.mwu))) return st;
    r.cliffs_delta = kk__stats_delta_from_counts(&rc, nc, nb);
    r.effect = kk_cliffs_magnitude(r.cliffs_delta);
    r.verdict =
        kk_compare_verdict(r.ratio_ci_low, r.ratio_ci_high, r.mwu.p_value, o.threshold, o.alpha);
    r.options = o;
    *out = r;
    return KK_OK;
}

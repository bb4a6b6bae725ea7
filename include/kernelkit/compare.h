/* Comparing two benchmark results documents: the performance-regression gate
 * behind `kernelkit compare`.
 *
 *   kk_bench_results *base, *cand;           // kk_bench_results_read_file
 *   kk_bench_compare_options o;
 *   kk_bench_compare_options_default(&o);    // 3%, alpha 0.05, 95% CI, 10,000 resamples
 *   kk_bench_comparison *c;
 *   kk_bench_compare(base, cand, &o, &c);
 *   char *md;
 *   kk_bench_comparison_markdown(c, &md);    // table + summary line; free(md)
 *   int fail = c->count[KK_VERDICT_SLOWER] > 0;
 *   kk_bench_comparison_free(c);
 *
 * Benchmarks are matched by name. Each matched pair is compared on its raw
 * samples with kk_stats_compare (include/kernelkit/stats.h): ratio of medians
 * new/base with a bootstrap interval, Mann-Whitney U, Cliff's delta, and the
 * verdict against a relative threshold. The threshold is the one stored in the
 * new document's entry, else the base's, else options.threshold.
 * docs/harness.md ("kernelkit compare") describes the output. Nothing here
 * prints; every function returns KK_OK or an error in kk_last_error(). */
#ifndef KERNELKIT_COMPARE_H
#define KERNELKIT_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/bench.h"
#include "kernelkit/stats.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KK_BENCH_COMPARE_SCHEMA "kernelkit.compare/1"
/* Most document-level warnings kept (devices, clocks, versions differ). */
#define KK_BENCH_COMPARE_MAX_WARNINGS 8

typedef struct kk_bench_compare_options {
    double threshold;                   /* default relative threshold; 0.03; 0 .. 1 */
    double alpha;                       /* significance level of the U test; 0.05; in (0, 1) */
    double confidence;                  /* level of the ratio interval; 0.95; in [0.5, 1) */
    int resamples;                      /* bootstrap resamples; 0 = KK_STATS_DEFAULT_RESAMPLES */
    uint64_t seed;                      /* bootstrap seed; KK_STATS_DEFAULT_SEED */
    const char *base_label, *new_label; /* shown in the output (file names); may be NULL */
} kk_bench_compare_options;

KK_API void kk_bench_compare_options_default(kk_bench_compare_options *o);

/* Where a row's threshold came from. */
typedef enum kk_bench_threshold_source {
    KK_BENCH_THRESHOLD_DEFAULT = 0, /* options.threshold */
    KK_BENCH_THRESHOLD_NEW = 1,     /* the new document's entry */
    KK_BENCH_THRESHOLD_BASE = 2     /* the base document's entry */
} kk_bench_threshold_source;

typedef struct kk_bench_compare_row {
    char name[256];
    char op[32];
    char dtype[16];
    double threshold; /* the one the verdict used */
    kk_bench_threshold_source threshold_source;
    int compared;        /* 0: the samples could not be compared (see note); verdict AMBIGUOUS */
    kk_compare_result r; /* kk_stats_compare(base samples, new samples) */
    /* Why this row deserves care: "SM clock 1980 vs 1650 MHz", "cold vs hot
     * samples", or why it was not compared; "" when none. */
    char note[256];
} kk_bench_compare_row;

typedef struct kk_bench_comparison {
    kk_bench_compare_options options; /* as used; labels point into this struct */
    char base_label[256], new_label[256];
    size_t nrows;
    kk_bench_compare_row *rows; /* in the base document's order */
    size_t n_only_base, n_only_new;
    char (*only_base)[256]; /* names only in base, in its order */
    char (*only_new)[256];  /* names only in new, in its order */
    size_t count[4];        /* rows per kk_verdict */
    int nwarnings;
    char warnings[KK_BENCH_COMPARE_MAX_WARNINGS][320];
    /* One line about each document: device, driver, time, commit. */
    char base_about[400], new_about[400];
} kk_bench_comparison;

/* Compare `cand` (new) with `base`. opt may be NULL for the defaults. The
 * documents are only read. Errors: KK_ERR_INVALID_ARGUMENT (NULL, options out
 * of range), KK_ERR_OUT_OF_MEMORY. A pair whose samples kk_stats_compare
 * refuses (a time of 0) is a row with compared = 0, not an error. */
KK_API kk_status kk_bench_compare(const kk_bench_results *base, const kk_bench_results *cand,
                                  const kk_bench_compare_options *opt, kk_bench_comparison **out);

KK_API void kk_bench_comparison_free(kk_bench_comparison *c);

/* Rows of verdict SLOWER (the gate fails when this is > 0). */
KK_API size_t kk_bench_comparison_slower(const kk_bench_comparison *c);

/* GitHub-flavoured markdown: the documents, warnings, the table (benchmark,
 * base median, new median, ratio [CI], p, delta (magnitude), threshold,
 * verdict), the benchmarks in one document only, and a last line
 * "Summary: ...". malloc'd; release with free(). */
KK_API kk_status kk_bench_comparison_markdown(const kk_bench_comparison *c, char **text);

/* The one-line summary alone (the markdown's last line, without newline). */
KK_API kk_status kk_bench_comparison_summary(const kk_bench_comparison *c, char *buf, size_t size);

/* JSON, schema "kernelkit.compare/1" (docs/harness.md). malloc'd; free(). */
KK_API kk_status kk_bench_comparison_json(const kk_bench_comparison *c, char **text);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_COMPARE_H */

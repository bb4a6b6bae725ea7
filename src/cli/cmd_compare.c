/* kernelkit compare: the performance-regression gate. Two results files in,
 * a markdown table out, exit 1 when any benchmark is SLOWER. The statistics
 * and the text are the library's (kernelkit/compare.h); this file parses
 * options, reads the files, prints and writes. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernelkit/compare.h"

#define CMD "compare"

static void compare_help(FILE *out) {
    fprintf(out, "Usage: kernelkit compare BASE.json NEW.json [OPTIONS]\n"
                 "\n"
                 "Compare two benchmark results files benchmark by benchmark (matched by name):\n"
                 "ratio of medians new/base with a bootstrap CI, Mann-Whitney U p-value, Cliff's\n"
                 "delta and a verdict FASTER / SLOWER / SAME / AMBIGUOUS. SLOWER needs the whole\n"
                 "CI above 1 + threshold and p < alpha. Prints a markdown table and a summary\n"
                 "line; warns on stderr when the files come from different devices or clocks.\n"
                 "\n"
                 "Options:\n"
                 "  --threshold T    relative change that matters: 0.03 or 3%% (default); a\n"
                 "                   threshold stored in a results entry wins for that benchmark\n"
                 "  --alpha A        significance level of the U test (default 0.05)\n"
                 "  --seed S         bootstrap seed (default: a fixed seed, so runs repeat)\n"
                 "  --resamples B    bootstrap resamples, 1000 to 1000000 (default 10000)\n"
                 "  --markdown FILE  also write the markdown to FILE\n"
                 "  --json FILE      write the comparison as JSON (kernelkit.compare/1) to FILE\n"
                 "  -h, --help       show this help\n"
                 "\n"
                 "Exit status: 0 nothing SLOWER, 1 some benchmark SLOWER, 2 usage error, an\n"
                 "unreadable results file, or an output file that could not be written.\n");
}

/* A number with nothing after it ("3%" allowed when pct); 0 on success. */
static int parse_double(const char *s, int pct, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) return -1;
    if (pct && *end == '%') {
        v /= 100;
        end++;
    }
    if (*end) return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end || errno || s[0] == '-') return -1;
    *out = v;
    return 0;
}

typedef struct args {
    kk_bench_compare_options o;
    const char *markdown, *json, *base, *cand;
} args;

static int parse_value(args *a, int c, const char *v) {
    uint64_t u;
    double x;
    switch (c) {
    case 't':
        if (parse_double(v, 1, &x) || !(x >= 0 && x <= 1))
            return cli_usage_error(CMD, "bad --threshold '%s': expected 0 to 1 (or 0%% to 100%%)",
                                   v);
        a->o.threshold = x;
        return 0;
    case 'a':
        if (parse_double(v, 0, &x) || !(x > 0 && x < 1))
            return cli_usage_error(CMD, "bad --alpha '%s': expected a number in (0, 1)", v);
        a->o.alpha = x;
        return 0;
    case 's':
        if (parse_u64(v, &u)) return cli_usage_error(CMD, "bad --seed '%s'", v);
        a->o.seed = u;
        return 0;
    case 'r':
        if (parse_u64(v, &u) || u < KK_STATS_MIN_RESAMPLES || u > KK_STATS_MAX_RESAMPLES)
            return cli_usage_error(CMD, "bad --resamples '%s': expected 1000 to 1000000", v);
        a->o.resamples = (int)u;
        return 0;
    case 'm': a->markdown = v; return 0;
    default: a->json = v; return 0;
    }
}

static int parse_args(int argc, char **argv, args *a) {
    static const struct option opts[] = {
        {"threshold", required_argument, NULL, 't'},
        {"alpha", required_argument, NULL, 'a'},
        {"seed", required_argument, NULL, 's'},
        {"resamples", required_argument, NULL, 'r'},
        {"markdown", required_argument, NULL, 'm'},
        {"json", required_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    kk_bench_compare_options_default(&a->o);
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == ':') return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        if ((rc = parse_value(a, c, optarg))) return rc;
    }
    if (argc - optind < 2) return cli_usage_error(CMD, "needs two results files: BASE NEW");
    if (argc - optind > 2)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 2]);
    a->base = a->o.base_label = argv[optind];
    a->cand = a->o.new_label = argv[optind + 1];
    return 0;
}

static kk_bench_results *read_doc(const char *which, const char *path) {
    kk_bench_results *r = NULL;
    if (kk_bench_results_read_file(path, &r) != KK_OK) {
        fprintf(stderr, "kernelkit " CMD ": cannot use the %s results file %s: %s\n", which, path,
                kk_last_error_message());
        return NULL;
    }
    return r;
}

/* Print and write the outputs; CLI_USAGE when a file could not be written. */
static int emit(const args *a, const kk_bench_comparison *c) {
    for (int i = 0; i < c->nwarnings; i++)
        fprintf(stderr, "kernelkit " CMD ": warning: %s\n", c->warnings[i]);
    char *md = NULL, *json = NULL;
    if (kk_bench_comparison_markdown(c, &md) != KK_OK) return cli_fail(CMD, "markdown"), CLI_USAGE;
    fputs(md, stdout);
    fflush(stdout);
    int bad = a->markdown && cli_write_text(CMD, a->markdown, md);
    free(md);
    if (a->json) {
        if (kk_bench_comparison_json(c, &json) != KK_OK) return cli_fail(CMD, "json"), CLI_USAGE;
        bad |= cli_write_text(CMD, a->json, json) != 0;
        free(json);
    }
    return bad ? CLI_USAGE : CLI_OK;
}

static int compare_run(int argc, char **argv) {
    args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    kk_bench_results *base = read_doc("base", a.base);
    kk_bench_results *cand = base ? read_doc("new", a.cand) : NULL;
    if (!base || !cand) {
        kk_bench_results_free(base);
        return CLI_USAGE;
    }
    kk_bench_comparison *c = NULL;
    if (kk_bench_compare(base, cand, &a.o, &c) != KK_OK)
        rc = (cli_fail(CMD, "comparing"), CLI_USAGE); /* 1 would read as SLOWER */
    else if ((rc = emit(&a, c)) == CLI_OK && kk_bench_comparison_slower(c) > 0)
        rc = CLI_FAILED;
    kk_bench_comparison_free(c);
    kk_bench_results_free(base);
    kk_bench_results_free(cand);
    return rc;
}

const cli_command cli_cmd_compare = {
    .name = "compare",
    .summary = "compare two benchmark results files; exit 1 if anything is SLOWER",
    .run = compare_run,
    .help = compare_help,
};

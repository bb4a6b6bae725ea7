/* kernelkit report: markdown and/or a self-contained HTML page with SVG
 * charts from one or more results files. The text is the library's
 * (kernelkit/report.h); this file reads the files and writes the outputs. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "kernelkit/report.h"

#define CMD "report"
#define MAX_OUTPUTS 4

static void report_help(FILE *out) {
    fprintf(out,
            "Usage: kernelkit report FILE... [--output OUT]... [--title TEXT]\n"
            "\n"
            "Report on benchmark results files: an executive summary per file (device,\n"
            "driver, CUDA, benchmarks, geometric-mean throughput, speedup over anchors),\n"
            "per-op tables (parameters, median, CI, TFLOP/s, GB/s, share of ceilings,\n"
            "ratio to anchors) and, in HTML, charts: throughput against work per op and\n"
            "a roofline from the measured ceilings. An anchor is an entry whose string\n"
            "parameter \"implementation\" is not \"kernelkit\", or whose name starts with\n"
            "\"anchor/<implementation>/\" (docs/harness.md).\n"
            "\n"
            "Options:\n"
            "  -o, --output OUT  write to OUT; .html/.htm gives the HTML page, .md/.markdown\n"
            "                    the markdown; repeat for both. Without it, markdown to stdout\n"
            "  --title TEXT      the report's title\n"
            "  -h, --help        show this help\n"
            "\n"
            "Exit status: 0 written, 1 an output could not be written, 2 usage error or an\n"
            "unreadable results file.\n");
}

static int is_html(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot && (strcasecmp(dot, ".html") == 0 || strcasecmp(dot, ".htm") == 0);
}

static int is_markdown(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot && (strcasecmp(dot, ".md") == 0 || strcasecmp(dot, ".markdown") == 0);
}

typedef struct args {
    const char *outputs[MAX_OUTPUTS];
    int noutputs;
    const char *title;
} args;

static int parse_args(int argc, char **argv, args *a) {
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"title", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
        if (c == ':') return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        if (c == 't') {
            a->title = optarg;
            continue;
        }
        if (!is_html(optarg) && !is_markdown(optarg))
            return cli_usage_error(CMD,
                                   "bad --output '%s': expected a .html, .htm, .md or "
                                   ".markdown file name",
                                   optarg);
        if (a->noutputs == MAX_OUTPUTS) return cli_usage_error(CMD, "too many --output options");
        a->outputs[a->noutputs++] = optarg;
    }
    if (optind >= argc) return cli_usage_error(CMD, "needs at least one results file");
    return 0;
}

/* Read every file; NULL (after a message) when one cannot be used. */
static kk_bench_results **read_all(char **paths, int n) {
    kk_bench_results **docs = calloc((size_t)n, sizeof *docs);
    if (!docs) {
        fprintf(stderr, "kernelkit " CMD ": out of memory\n");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (kk_bench_results_read_file(paths[i], &docs[i]) == KK_OK) continue;
        fprintf(stderr, "kernelkit " CMD ": cannot use the results file %s: %s\n", paths[i],
                kk_last_error_message());
        for (int j = 0; j < i; j++) kk_bench_results_free(docs[j]);
        free(docs);
        return NULL;
    }
    return docs;
}

static int produce(const args *a, const kk_bench_results *const *docs, int n,
                   const kk_bench_report_options *o) {
    int rc = CLI_OK;
    for (int i = 0; i < (a->noutputs ? a->noutputs : 1); i++) {
        const char *path = a->noutputs ? a->outputs[i] : NULL;
        char *text = NULL;
        kk_status st = path && is_html(path) ? kk_bench_report_html(docs, (size_t)n, o, &text)
                                             : kk_bench_report_markdown(docs, (size_t)n, o, &text);
        if (st != KK_OK) {
            rc = cli_fail(CMD, path ? path : "markdown");
            continue;
        }
        if (!path)
            fputs(text, stdout);
        else if (cli_write_text(CMD, path, text))
            rc = CLI_FAILED;
        else
            fprintf(stderr, "kernelkit " CMD ": wrote %s\n", path);
        free(text);
    }
    return rc;
}

static int report_run(int argc, char **argv) {
    args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    int n = argc - optind;
    char **paths = argv + optind;
    kk_bench_results **docs = read_all(paths, n);
    if (!docs) return CLI_USAGE;
    kk_bench_report_options o = {.title = a.title, .labels = (const char *const *)paths};
    rc = produce(&a, (const kk_bench_results *const *)docs, n, &o);
    for (int i = 0; i < n; i++) kk_bench_results_free(docs[i]);
    free(docs);
    return rc;
}

const cli_command cli_cmd_report = {
    .name = "report",
    .summary = "markdown and HTML (SVG charts) reports from benchmark results files",
    .run = report_run,
    .help = report_help,
};

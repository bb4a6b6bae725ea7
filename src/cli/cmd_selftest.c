/* kernelkit selftest: the main job (`make run`, and `kernelkit` with no
 * command). Detects the devices, proves the best one runs this build's code,
 * runs the smoke correctness suite and a short benchmark suite on it, prints a
 * summary table and writes the results JSON and a report (markdown + HTML). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/device_report.h"
#include "kernelkit/bench.h"
#include "kernelkit/cases.h"
#include "kernelkit/report.h"

#define CMD "selftest"
#define DEFAULT_OUT_DIR "kernelkit-out"

static void selftest_help(FILE *out) {
    fprintf(out,
            "Usage: kernelkit selftest [OPTIONS]\n"
            "\n"
            "The main job, also what 'kernelkit' with no command runs, on the best device\n"
            "present (or DEVICE):\n"
            "  1. detect the devices and check that a kernel of this build runs there;\n"
            "  2. check every case of the smoke suite (bench/suites/smoke.json) whose op\n"
            "     has a kernel there against the float64 references;\n"
            "  3. time the smoke suite's cases not marked \"bench\": false (quick mode);\n"
            "  4. print a summary table, write DIR/results.json (schema kernelkit.bench/1),\n"
            "     DIR/report.md and DIR/report.html.\n"
            "\n"
            "Options:\n"
            "  --device DEVICE     cpu, cuda, cuda:N (default: the best device present)\n"
            "  --output-dir DIR    where results and reports go (default: " DEFAULT_OUT_DIR ")\n"
            "  --suite SUITE       the suite of step 3 (default: smoke)\n"
            "  --no-bench          skip steps 3 and 4's results and reports\n"
            "  -h, --help          show this help\n"
            "\n"
            "Exit 0 when every check passed (and every benchmark ran), 1 otherwise,\n"
            "2 on a usage error.\n");
}

typedef struct selftest_opts {
    const char *device, *out_dir, *suite;
    int no_bench;
} selftest_opts;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_options(selftest_opts *o, int argc, char **argv) {
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"output-dir", required_argument, NULL, 'o'},
        {"suite", required_argument, NULL, 's'},
        {"no-bench", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    *o = (selftest_opts){.out_dir = DEFAULT_OUT_DIR, .suite = "smoke"};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o->device = optarg; break;
        case 'o': o->out_dir = optarg; break;
        case 's': o->suite = optarg; break;
        case 'n': o->no_bench = 1; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->out_dir[0]) return cli_usage_error(CMD, "bad --output-dir: empty");
    return CLI_OK;
}

/* ---- step 2: the smoke correctness suite ---- */

typedef struct op_tally {
    int pass, fail, skip;
} op_tally;

static int run_smoke_checks(const char *device, op_tally *tally) {
    kk_suite smoke;
    if (kk_suite_load("smoke", 1, KK_DIST_FULL, &smoke) != KK_OK) {
        kk_suite_free(&smoke);
        return cli_fail(CMD, "cannot load the smoke suite");
    }
    const kk_case *cases = smoke.cases;
    const int n = smoke.count;
    const kk_run_options ro = {.device = device, .check_memory = 1};
    for (int i = 0; i < n; i++) {
        const kk_op *op = cases[i].params.op;
        int row = 0;
        while (row < kk_op_count() && kk_op_at(row) != op) row++;
        kk_case_result r;
        if (kk_case_run(&cases[i], &ro, &r) != KK_OK) {
            tally[row].fail++;
            printf("  %-44s ERROR %s\n", cases[i].name, kk_last_error_message());
            continue;
        }
        if (r.status == KK_CASE_PASS)
            tally[row].pass++;
        else if (r.status == KK_CASE_SKIP)
            tally[row].skip++;
        else {
            tally[row].fail++;
            printf("  %-44s %s  %s\n", cases[i].name, kk_case_status_name(r.status), r.message);
        }
    }
    kk_suite_free(&smoke);
    return CLI_OK;
}

/* ---- step 4: files ---- */

static int make_dir(const char *dir) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) return 0;
    fprintf(stderr, "kernelkit " CMD ": cannot create %s: %s\n", dir, strerror(errno));
    return -1;
}

static int write_outputs(const char *dir, const kk_bench_results *r) {
    char path[4096];
    if (make_dir(dir) != 0) return CLI_FAILED;
    snprintf(path, sizeof path, "%s/results.json", dir);
    if (kk_bench_results_write_file(r, path) != KK_OK) {
        fprintf(stderr, "kernelkit " CMD ": cannot write %s: %s\n", path, kk_last_error_message());
        return CLI_FAILED;
    }
    const kk_bench_results *docs[1] = {r};
    const char *labels[1] = {"results.json"};
    const kk_bench_report_options ro = {.title = "KernelKit main job", .labels = labels};
    char *md = NULL, *html = NULL;
    int rc = CLI_OK;
    if (kk_bench_report_markdown(docs, 1, &ro, &md) != KK_OK ||
        kk_bench_report_html(docs, 1, &ro, &html) != KK_OK)
        rc = cli_fail(CMD, "cannot make the report");
    snprintf(path, sizeof path, "%s/report.md", dir);
    if (rc == CLI_OK && cli_write_text(CMD, path, md) != 0) rc = CLI_FAILED;
    snprintf(path, sizeof path, "%s/report.html", dir);
    if (rc == CLI_OK && cli_write_text(CMD, path, html) != 0) rc = CLI_FAILED;
    free(md);
    free(html);
    if (rc == CLI_OK)
        printf("\nWrote %s/results.json, %s/report.md, %s/report.html\n", dir, dir, dir);
    return rc;
}

/* ---- the summary ---- */

static void print_summary(const char *device, const op_tally *tally, const kk_bench_results *r) {
    printf("\nSummary on %s:\n", device);
    printf("  %-16s %6s %6s %6s   %-12s %10s %10s\n", "op", "pass", "fail", "skip", "benchmarks",
           "GB/s", "TFLOP/s");
    for (int i = 0; i < kk_op_count(); i++) {
        const kk_op *op = kk_op_at(i);
        int nb = 0;
        double gbs = 0, tflops = 0;
        for (size_t k = 0; r && k < r->count; k++)
            if (strcmp(r->entries[k].op, kk_op_name(op)) == 0) {
                nb++;
                if (r->entries[k].gbs > gbs) gbs = r->entries[k].gbs;
                if (r->entries[k].tflops > tflops) tflops = r->entries[k].tflops;
            }
        const op_tally *t = &tally[i];
        if (!t->pass && !t->fail && !t->skip && !nb) continue;
        char gb[32] = "-", tf[32] = "-";
        if (nb && gbs > 0) snprintf(gb, sizeof gb, "%.2f", gbs);
        if (nb && tflops > 0) snprintf(tf, sizeof tf, "%.3f", tflops);
        printf("  %-16s %6d %6d %6d   %-12d %10s %10s\n", kk_op_name(op), t->pass, t->fail, t->skip,
               nb, gb, tf);
    }
    printf("  (GB/s and TFLOP/s: the best benchmark of each op, quick measurements)\n");
}

static int selftest_run(int argc, char **argv) {
    selftest_opts o;
    int rc = parse_options(&o, argc, argv);
    if (rc != CLI_OK) return rc;

    report_print_build(stdout);
    report_print_backends(stdout);
    const char *spec = o.device ? o.device : kk_device_best();

    kk_device_info d;
    if (kk_device_get_info(spec, &d) != KK_OK) {
        if (kk_last_error()->status == KK_ERR_INVALID_ARGUMENT)
            return cli_usage_error(CMD, "bad --device: %s", kk_last_error_message());
        return cli_fail(CMD, spec);
    }
    printf("\nDevice under test:\n");
    report_print_device(stdout, &d, 1);

    printf("\n[1/3] A kernel of this build runs on %s:\n", spec);
    double t0 = now_seconds();
    if (kk_device_selftest(spec) != KK_OK) {
        printf("  %-28s FAIL  %s\n", "kernel runs and writes", kk_last_error_message());
        printf("\nSummary: the device check failed on %s\n", spec);
        return CLI_FAILED;
    }
    printf("  %-28s PASS  (%.1f ms)\n", "kernel runs and writes", 1e3 * (now_seconds() - t0));

    printf("\n[2/3] Smoke correctness suite on %s (float64 references):\n", spec);
    op_tally *tally = calloc((size_t)kk_op_count(), sizeof *tally);
    if (!tally) return cli_fail(CMD, "out of memory");
    t0 = now_seconds();
    rc = run_smoke_checks(spec, tally);
    int pass = 0, fail = 0, skip = 0;
    for (int i = 0; i < kk_op_count(); i++) {
        pass += tally[i].pass;
        fail += tally[i].fail;
        skip += tally[i].skip;
    }
    printf("  %d passed, %d failed, %d skipped (%.1f s)\n", pass, fail, skip, now_seconds() - t0);

    kk_bench_results *results = NULL;
    int bench_rc = CLI_OK;
    if (!o.no_bench && rc == CLI_OK) {
        printf("\n[3/3] Benchmark suite '%s' on %s (quick):\n", o.suite, spec);
        bench_rc = cli_bench_suite(spec, o.suite, 1, argc, argv, &results);
    }
    print_summary(spec, tally, results);
    free(tally);
    if (results) {
        if (write_outputs(o.out_dir, results) != CLI_OK) bench_rc = CLI_FAILED;
        kk_bench_results_free(results);
    }
    if (rc != CLI_OK) return rc;
    if (fail) return CLI_FAILED;
    return bench_rc == CLI_OK ? CLI_OK : CLI_FAILED;
}

const cli_command cli_cmd_selftest = {
    .name = CMD,
    .summary = "the main job: device check, smoke checks, short benchmarks, report",
    .run = selftest_run,
    .help = selftest_help,
};

/* kernelkit bench: time op kernels on a device (cases from a suite file or one
 * --op/--params), print one line per benchmark and optionally write a
 * "kernelkit.bench/1" results file. Exit 0 when something ran, 1 on a
 * measurement error, 2 for a usage error or when nothing could run. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernelkit/bench.h"
#include "kernelkit/calibrate.h"
#include "kernelkit/cases.h"

#define CMD "bench"

static void bench_help(FILE *out) {
    fprintf(out, "Usage: kernelkit bench [OPTIONS]\n"
                 "\n"
                 "Time op kernels on a device with the adaptive sampler and print one line per\n"
                 "benchmark (median, 95%% CI of the median, GB/s, TFLOP/s, samples, stop reason).\n"
                 "\n"
                 "Options:\n"
                 "  --device DEVICE    cpu, cuda, cuda:N (default: the best device present)\n"
                 "  --suite SUITE[,..] suites by name (smoke, gemm, attention, ...: NAME.json\n"
                 "                     in $KK_SUITES_DIR, the installed suites or the source\n"
                 "                     tree's bench/suites) or path (with a '/' or ending in\n"
                 "                     .json); cases marked \"bench\": false are not timed\n"
                 "  --op NAME          one op, with --params (instead of --suite)\n"
                 "  --params TEXT      its parameters: \"n=1048576,src=f32,dst=bf16\"\n"
                 "  --filter TEXT      only cases whose name contains TEXT\n"
                 "  -o, --output FILE  write the results (schema kernelkit.bench/1) to FILE\n"
                 "  --quick            short measurements: 1 s budget, 5%% RSE target\n"
                 "  --time-budget S    wall seconds per benchmark (default 15; --quick 1)\n"
                 "  --cold             every sample is one run after an L2 flush (GPU MODE's\n"
                 "                     rule); default: runs under 20 us are batched, hot\n"
                 "  --flush MODE       how a cold sample flushes the L2: write (default, GPU\n"
                 "                     MODE's rule: memset an L2-sized buffer, which leaves\n"
                 "                     dirty lines whose write-back is timed) or read (a read\n"
                 "                     kernel over 2x the L2: clean lines, nothing to write\n"
                 "                     back); on the CPU the same with 2x the last-level cache\n"
                 "                     (at most 256 MiB)\n"
                 "  --flush-bytes N    size of the flush buffer instead of the default, in bytes\n"
                 "                     or with a K, M or G suffix (powers of 1024): e.g. 960M\n"
                 "                     to sweep all of a 480 MiB last-level cache twice\n"
                 "  --host-overhead    time kk_op_run's host cost per call instead (checks,\n"
                 "                     lookup, device switch; on a GPU also the launch), for\n"
                 "                     every op with a kernel on DEVICE or the one --op; goal\n"
                 "                     under 5 us per call\n"
                 "  --import FILE      make a results file (-o) from samples another program\n"
                 "                     timed on DEVICE (the PyTorch anchors of bench/*.py):\n"
                 "                     {\"benchmarks\": [{\"name\", \"op\", \"params\",\n"
                 "                     \"implementation\", \"samples\": [seconds], \"cold\",\n"
                 "                     \"flush\": \"write\"|\"read\" (default write)}]}\n"
                 "  -h, --help         show this help\n"
                 "\n"
                 "Cases of ops with no kernel on DEVICE, and cases whose tensors do not fit\n"
                 "in DEVICE's free memory, are skipped with a note. A progress line is shown\n"
                 "on stderr when it is a terminal.\n"
                 "Exit status: 0 something ran, 1 a measurement failed, 2 usage error or\n"
                 "nothing could run.\n");
}

typedef struct opts {
    const char *device, *suite, *op, *params, *filter, *output;
    const char *import;
    int quick, host_overhead, cold;
    int flush_mode, flush_given; /* kk_bench_flush of --flush */
    uint64_t flush_bytes;        /* --flush-bytes; 0: the device's default */
    double time_budget;          /* 0: default */
} opts;

typedef struct bench_case {
    kk_case c;
    char name[256];
} bench_case;

typedef struct case_list {
    bench_case *v;
    int n;
} case_list;

/* "4096", "64K", "960M", "1G" (powers of 1024) in bytes, 1 .. 2^40. */
static int parse_bytes(const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno || text[0] == '-') return -1;
    int shift = 0;
    if (*end == 'K')
        shift = 10;
    else if (*end == 'M')
        shift = 20;
    else if (*end == 'G')
        shift = 30;
    if (shift) end++;
    if (*end || v == 0 || v > (1ull << (40 - shift))) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_options(opts *o, int argc, char **argv) {
    static const struct option long_opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"suite", required_argument, NULL, 's'},
        {"op", required_argument, NULL, 'p'},
        {"params", required_argument, NULL, 'P'},
        {"filter", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"quick", no_argument, NULL, 'q'},
        {"time-budget", required_argument, NULL, 't'},
        {"host-overhead", no_argument, NULL, 'H'},
        {"import", required_argument, NULL, 'I'},
        {"cold", no_argument, NULL, 'C'},
        {"flush", required_argument, NULL, 'F'},
        {"flush-bytes", required_argument, NULL, 'B'},
        {NULL, 0, NULL, 0},
    };
    *o = (opts){0};
    int c;
    char *end = NULL;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:", long_opts, NULL)) != -1) {
        switch (c) {
        case 'd': o->device = optarg; break;
        case 's': o->suite = optarg; break;
        case 'p': o->op = optarg; break;
        case 'P': o->params = optarg; break;
        case 'f': o->filter = optarg; break;
        case 'o': o->output = optarg; break;
        case 'q': o->quick = 1; break;
        case 'H': o->host_overhead = 1; break;
        case 'I': o->import = optarg; break;
        case 'C': o->cold = 1; break;
        case 'F': {
            kk_bench_flush mode;
            if (kk_bench_flush_parse(optarg, &mode) != KK_OK)
                return cli_usage_error(CMD, "bad --flush: '%s' (expected write or read)", optarg);
            o->flush_mode = (int)mode;
            o->flush_given = 1;
            break;
        }
        case 'B':
            if (parse_bytes(optarg, &o->flush_bytes) != 0)
                return cli_usage_error(CMD,
                                       "bad --flush-bytes: '%s' (expected bytes from 1 to 2^40, "
                                       "optionally with K, M or G)",
                                       optarg);
            break;
        case 't':
            o->time_budget = strtod(optarg, &end);
            if (end == optarg || *end || !(o->time_budget > 0) || o->time_budget > 1e6)
                return cli_usage_error(CMD, "bad --time-budget: '%s' (expected seconds > 0)",
                                       optarg);
            break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->import && (o->suite || o->op || o->host_overhead))
        return cli_usage_error(CMD, "--import takes no --suite, --op or --host-overhead");
    if (o->import && (o->flush_given || o->flush_bytes))
        return cli_usage_error(CMD, "--import takes no --flush or --flush-bytes (each imported "
                                    "benchmark says its own \"flush\")");
    if (o->flush_bytes && !o->cold)
        return cli_usage_error(CMD, "--flush-bytes needs --cold (only cold samples flush)");
    if (o->import) return CLI_OK;
    if (o->host_overhead && o->suite)
        return cli_usage_error(CMD, "--host-overhead takes --op or no case at all, not --suite");
    if (!o->host_overhead && !!o->suite == !!o->op)
        return cli_usage_error(CMD, "give either --suite or --op");
    if (o->params && !o->op) return cli_usage_error(CMD, "--params needs --op");
    return CLI_OK;
}

/* ---- cases ---- */

static int add_case(case_list *l, const char *name, const kk_op *op, const char *params,
                    const char *where) {
    bench_case b;
    memset(&b, 0, sizeof b);
    if (kk_op_params_parse(op, params ? params : "", &b.c.params) != KK_OK) {
        fprintf(stderr, "kernelkit " CMD ": %s: bad params: %s\n", where, kk_last_error_message());
        return CLI_USAGE;
    }
    snprintf(b.name, sizeof b.name, "%s", name);
    snprintf(b.c.name, sizeof b.c.name, "%s", name);
    b.c.seed = kk_case_seed(1, name);
    b.c.dist = KK_DIST_FULL;
    bench_case *v = realloc(l->v, (size_t)(l->n + 1) * sizeof *v);
    if (!v) return cli_fail(CMD, "out of memory");
    l->v = v;
    l->v[l->n++] = b;
    return CLI_OK;
}

/* The suites' cases, except those too small to time ("bench": false). */
static int add_suite_cases(const char *suite, case_list *l) {
    kk_case *cases = NULL;
    int n = 0, rc = cli_suite_cases(CMD, suite, 1, KK_DIST_FULL, &cases, &n);
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        if (cases[i].no_bench) continue;
        bench_case *v = realloc(l->v, (size_t)(l->n + 1) * sizeof *v);
        if (!v) {
            rc = cli_fail(CMD, "out of memory");
            break;
        }
        l->v = v;
        memset(&l->v[l->n], 0, sizeof l->v[l->n]);
        l->v[l->n].c = cases[i];
        snprintf(l->v[l->n].name, sizeof l->v[l->n].name, "%s", cases[i].name);
        l->n++;
    }
    free(cases);
    return rc;
}

/* ---- results documents ---- */

kk_bench_results *cli_bench_results_new(const char *device, int argc, char **argv) {
    kk_bench_environment env;
    kk_bench_results *r = NULL;
    if (kk_bench_environment_capture(device, argc, (const char *const *)argv, NULL, 0, &env) !=
        KK_OK) {
        cli_fail(CMD, "cannot capture the environment");
        return NULL;
    }
    const kk_status st = kk_bench_results_create(&env, &r);
    kk_bench_environment_free(&env);
    if (st != KK_OK) {
        cli_fail(CMD, "cannot create the results");
        return NULL;
    }
    kk_bench_ceilings ceil;
    if (kk_ceilings_load(device, NULL, &ceil) == KK_OK) kk_bench_results_set_ceilings(r, &ceil);
    return r;
}

int cli_bench_results_write(const kk_bench_results *r, const char *path) {
    if (kk_bench_results_write_file(r, path) != KK_OK) {
        fprintf(stderr, "kernelkit " CMD ": cannot write %s: %s\n", path, kk_last_error_message());
        return CLI_FAILED;
    }
    fprintf(stderr, "kernelkit " CMD ": wrote %zu benchmark(s) to %s\n", r->count, path);
    return CLI_OK;
}

/* ---- measuring ---- */

void cli_bench_params(const kk_op_params *p, kk_bench_param *out, int cap, int *n) {
    const kk_op *op = p->op;
    *n = 0;
    for (int k = 0; k < kk_op_param_count(op) && *n < cap; k++) {
        const kk_op_param *d = kk_op_param_at(op, k);
        kk_bench_param *b = &out[(*n)++];
        memset(b, 0, sizeof *b);
        snprintf(b->name, sizeof b->name, "%s", d->name);
        switch (d->kind) {
        case KK_PARAM_BOOL:
            b->kind = KK_BENCH_PARAM_BOOL;
            b->boolean = p->i[k] != 0;
            break;
        case KK_PARAM_FLOAT:
            b->kind = KK_BENCH_PARAM_NUMBER;
            b->number = p->f[k];
            break;
        case KK_PARAM_ENUM:
            b->kind = KK_BENCH_PARAM_STRING;
            snprintf(b->string, sizeof b->string, "%s", d->choices[p->i[k]]);
            break;
        case KK_PARAM_DTYPE:
            b->kind = KK_BENCH_PARAM_STRING;
            snprintf(b->string, sizeof b->string, "%s", kk_dtype_name((kk_dtype)p->i[k]));
            break;
        case KK_PARAM_LIST: { /* "5:0:17", as the params text has it (cut at 63 characters) */
            const int32_t *v;
            const int nv = kk_op_params_list(p, d->name, &v);
            b->kind = KK_BENCH_PARAM_STRING;
            snprintf(b->string, sizeof b->string, "%s", nv ? "" : "none");
            for (int j = 0; j < nv; j++) {
                const size_t used = strlen(b->string);
                snprintf(b->string + used, sizeof b->string - used, "%s%d", j ? ":" : "",
                         (int)v[j]);
            }
            break;
        }
        default:
            b->kind = KK_BENCH_PARAM_NUMBER;
            b->number = (double)p->i[k];
            break;
        }
    }
}

static const char *fmt_time(double s, char *buf) {
    if (s < 1e-3)
        snprintf(buf, 32, "%.3f us", s * 1e6);
    else if (s < 1.0)
        snprintf(buf, 32, "%.3f ms", s * 1e3);
    else
        snprintf(buf, 32, "%.3f s", s);
    return buf;
}

static void print_entry(const kk_bench_entry *e) {
    char med[32], lo[32], hi[32];
    printf("%-44s median %s  CI [%s, %s]  %.2f GB/s", e->name, fmt_time(e->summary.median, med),
           fmt_time(e->summary.median_ci_low, lo), fmt_time(e->summary.median_ci_high, hi), e->gbs);
    if (e->flops > 0) printf("  %.3f TFLOP/s", e->tflops);
    printf("  n=%zu  stop=%s\n", e->m.n, kk_bench_stop_name(e->m.stop));
    fflush(stdout);
}

/* ---- progress and memory ---- */

/* A one-line progress display on stderr, only when it is a terminal: logs
 * and redirected output stay clean. */
static void progress_show(int i, int n, const char *name) {
    if (!isatty(STDERR_FILENO)) return;
    fprintf(stderr, "\r\033[K[%d/%d] %.70s ...", i, n, name);
    fflush(stderr);
}

static void progress_clear(void) {
    if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr);
}

/* A case whose tensors would not fit the device's free memory (with 10% to
 * spare; on the CPU the host staging of the inputs counts twice) is skipped
 * with a note instead of failing halfway through an allocation. */
static int fits_memory(const bench_case *b, const char *device, kk_backend_kind kind) {
    kk_case_memory need;
    kk_device_info info;
    if (kk_case_memory_need(&b->c.params, &need) != KK_OK ||
        kk_device_get_info(device, &info) != KK_OK)
        return 1; /* cannot tell: let the allocation decide */
    const double want = (double)need.device_bytes * (kind == KK_BACKEND_CPU ? 2.0 : 1.0);
    const double have = 0.9 * (double)(kind == KK_BACKEND_CPU ? info.host_mem_available_bytes
                                                              : info.mem_free_bytes);
    if (have <= 0 || want <= have) return 1;
    char w[32], h[32];
    progress_clear();
    fprintf(stderr, "kernelkit " CMD ": skip %s: needs %s, %s has %s free\n", b->name,
            cli_format_bytes((uint64_t)want, w, sizeof w), device,
            cli_format_bytes((uint64_t)(have / 0.9), h, sizeof h));
    return 0;
}

/* Measure the cases of l; the results go to o->output when given, and to
 * *keep (when not NULL) instead of being freed. */
static int run_cases(const opts *o, const char *device, kk_backend_kind kind, case_list *l,
                     int argc, char **argv, kk_bench_results **keep) {
    kk_bench_options bo;
    kk_bench_options_default(&bo);
    if (o->quick) {
        bo.rse_target = 0.05;
        bo.min_samples = 5;
        bo.min_time_s = 0.05;
        bo.warmup_time_s = 0.01;
        bo.time_budget_s = 1.0;
    }
    if (o->cold) { /* every sample one run behind an L2 flush, never a hot batch */
        bo.cold = 1;
        bo.batch = 1;
    }
    bo.flush_mode = o->flush_mode; /* write unless --flush read */
    bo.flush_bytes = o->flush_bytes;
    if (o->time_budget > 0) {
        bo.time_budget_s = o->time_budget;
        if (bo.min_time_s > o->time_budget / 2) bo.min_time_s = o->time_budget / 2;
        if (bo.warmup_time_s > o->time_budget / 4) bo.warmup_time_s = o->time_budget / 4;
    }
    kk_bench_results *r = cli_bench_results_new(device, argc, argv);
    if (!r) return CLI_FAILED;
    int selected = 0, ran = 0, failed = 0, total = 0;
    for (int i = 0; i < l->n; i++) total += !o->filter || strstr(l->v[i].name, o->filter);
    for (int i = 0; i < l->n; i++) {
        const bench_case *b = &l->v[i];
        if (o->filter && !strstr(b->name, o->filter)) continue;
        selected++;
        const kk_op *op = b->c.params.op;
        if (!kk_op_has_kernel(op, kind)) {
            char have[64];
            kk_op_backends_format(op, have, sizeof have);
            progress_clear();
            fprintf(stderr, "kernelkit " CMD ": skip %s: no %s kernel for %s (kernels: %s)\n",
                    b->name, kk_backend_name(kind), kk_op_name(op), have);
            continue;
        }
        if (!fits_memory(b, device, kind)) continue;
        progress_show(selected, total, b->name);
        kk_bench_measurement m;
        if (kk_case_bench(&b->c, device, &bo, &m) != KK_OK) {
            progress_clear();
            fprintf(stderr, "kernelkit " CMD ": %s: measurement failed: %s\n", b->name,
                    kk_last_error_message());
            failed++;
            continue;
        }
        kk_bench_param params[KK_BENCH_MAX_PARAMS];
        int np = 0;
        cli_bench_params(&b->c.params, params, KK_BENCH_MAX_PARAMS, &np);
        const kk_bench_spec spec = {
            .name = b->name,
            .op = kk_op_name(op),
            .dtype = kk_dtype_name(kk_case_dtype(&b->c.params)),
            .params = params,
            .nparams = np,
            .flops = kk_op_flops(&b->c.params),
            .bytes = kk_op_bytes(&b->c.params),
        };
        const kk_status st = kk_bench_results_add(r, &spec, &m);
        kk_bench_measurement_free(&m);
        if (st != KK_OK) {
            fprintf(stderr, "kernelkit " CMD ": %s: %s\n", b->name, kk_last_error_message());
            failed++;
            continue;
        }
        progress_clear();
        print_entry(&r->entries[r->count - 1]);
        ran++;
    }
    int rc = CLI_OK;
    if (selected == 0) {
        fprintf(stderr, "kernelkit " CMD ": no case selected%s\n",
                o->filter ? " (check --filter)" : "");
        rc = CLI_USAGE;
    } else if (ran == 0 && failed == 0) {
        fprintf(stderr, "kernelkit " CMD ": nothing could run on %s\n", device);
        rc = CLI_USAGE;
    } else if (failed) {
        rc = CLI_FAILED;
    }
    if (ran > 0 && o->output && cli_bench_results_write(r, o->output) != CLI_OK) rc = CLI_FAILED;
    printf("%d ran, %d failed, %d skipped\n", ran, failed, selected - ran - failed);
    if (keep && ran > 0)
        *keep = r;
    else
        kk_bench_results_free(r);
    return rc;
}

/* ---- host overhead (--host-overhead) ---- */

/* The cases: the --op/--params one, else every smoke case of every op with a
 * kernel on the device; run_host_overhead measures the first of each op that
 * the kernel takes (small tensors: the checks' cost does not depend on their
 * size; a kernel may decline some, as CUDA attention declines f32). */
static int host_overhead_cases(const opts *o, kk_backend_kind kind, case_list *l) {
    if (o->op) return CLI_OK; /* bench_run added it */
    kk_suite smoke;
    if (kk_suite_load("smoke", 1, KK_DIST_FULL, &smoke) != KK_OK) {
        kk_suite_free(&smoke);
        return cli_usage_error(CMD, "cannot load the smoke suite: %s", kk_last_error_message());
    }
    int rc = CLI_OK;
    for (int i = 0; i < kk_op_count() && rc == CLI_OK; i++) { /* each op's cases together */
        const kk_op *op = kk_op_at(i);
        for (int k = 0; kk_op_has_kernel(op, kind) && k < smoke.count && rc == CLI_OK; k++) {
            if (smoke.cases[k].params.op != op) continue;
            rc = add_case(l, smoke.cases[k].name, op, NULL, "smoke suite");
            if (rc == CLI_OK) l->v[l->n - 1].c = smoke.cases[k];
        }
    }
    kk_suite_free(&smoke);
    return rc;
}

static int add_overhead_entry(kk_bench_results *r, const char *what, const char *part,
                              const kk_bench_measurement *m) {
    char name[128];
    snprintf(name, sizeof name, "host-overhead/%s/%s", what, part);
    kk_bench_param params[2];
    memset(params, 0, sizeof params);
    snprintf(params[0].name, sizeof params[0].name, "op");
    params[0].kind = KK_BENCH_PARAM_STRING;
    snprintf(params[0].string, sizeof params[0].string, "%s", what);
    snprintf(params[1].name, sizeof params[1].name, "part");
    params[1].kind = KK_BENCH_PARAM_STRING;
    snprintf(params[1].string, sizeof params[1].string, "%s", part);
    const kk_bench_spec spec = {
        .name = name, .op = "host_overhead", .dtype = "", .params = params, .nparams = 2};
    if (kk_bench_results_add(r, &spec, m) != KK_OK) return 0;
    const kk_bench_entry *e = &r->entries[r->count - 1];
    char med[32], lo[32], hi[32];
    printf("%-44s median %s  CI [%s, %s]  n=%zu x %zu calls  %s\n", e->name,
           fmt_time(e->summary.median, med), fmt_time(e->summary.median_ci_low, lo),
           fmt_time(e->summary.median_ci_high, hi), e->m.n, e->m.batch,
           e->summary.median < KK_HOST_OVERHEAD_GOAL_S ? "goal < 5 us: met"
                                                       : "goal < 5 us: MISSED");
    return 1;
}

static int run_host_overhead(const opts *o, const char *device, kk_backend_kind kind, case_list *l,
                             int argc, char **argv) {
    int rc = host_overhead_cases(o, kind, l);
    if (rc != CLI_OK) return rc;
    kk_bench_results *r = cli_bench_results_new(device, argc, argv);
    if (!r) return CLI_FAILED;
    int ran = 0, failed = 0, bare_done = 0;
    const kk_op *done = NULL; /* the op last measured */
    for (int i = 0; i < l->n; i++) {
        const kk_op *op = l->v[i].c.params.op;
        if (op == done || (o->filter && !strstr(l->v[i].name, o->filter))) continue;
        kk_bench_measurement dispatch, launch, bare, entry;
        /* the runtime's own launch cost once, as the floor of every op's */
        kk_host_overhead h = {.dispatch = &dispatch,
                              .launch = &launch,
                              .bare = bare_done ? NULL : &bare,
                              .entry = &entry};
        progress_show(i + 1, l->n, l->v[i].name);
        const kk_status st_h = kk_op_host_overhead(&l->v[i].c, device, 0, 0, &h);
        const int more = i + 1 < l->n && l->v[i + 1].c.params.op == op;
        if (st_h == KK_ERR_UNSUPPORTED && more) continue; /* the op's next case */
        if (st_h != KK_OK) {
            progress_clear();
            fprintf(stderr, "kernelkit " CMD ": host overhead of %s: %s\n", kk_op_name(op),
                    kk_last_error_message());
            failed++;
            continue;
        }
        progress_clear();
        if (h.has_bare) {
            add_overhead_entry(r, "cuda-runtime", "bare-launch", &bare);
            kk_bench_measurement_free(&bare);
            bare_done = 1;
        }
        done = op;
        ran += add_overhead_entry(r, kk_op_name(op), "dispatch", &dispatch);
        if (h.has_entry) add_overhead_entry(r, kk_op_name(op), "entry", &entry);
        if (h.has_launch) add_overhead_entry(r, kk_op_name(op), "dispatch+launch", &launch);
        kk_bench_measurement_free(&dispatch);
        if (h.has_entry) kk_bench_measurement_free(&entry);
        if (h.has_launch) kk_bench_measurement_free(&launch);
    }
    rc = failed ? CLI_FAILED : ran ? CLI_OK : CLI_USAGE;
    if (!ran && !failed) fprintf(stderr, "kernelkit " CMD ": no op has a kernel on %s\n", device);
    if (ran && o->output && cli_bench_results_write(r, o->output) != CLI_OK) rc = CLI_FAILED;
    kk_bench_results_free(r);
    return rc;
}

static int bench_run(int argc, char **argv) {
    opts o;
    int rc = parse_options(&o, argc, argv);
    if (rc != CLI_OK) return rc;
    const char *device = o.device ? o.device : kk_device_best();
    kk_backend_kind kind;
    int index;
    if (kk_device_parse(device, &kind, &index) != KK_OK)
        return cli_usage_error(CMD, "bad --device: %s", kk_last_error_message());
    kk_device_info info;
    if (kk_device_get_info(device, &info) != KK_OK) {
        fprintf(stderr, "kernelkit " CMD ": device %s unavailable: %s\n", device,
                kk_last_error_message());
        return CLI_USAGE;
    }
    if (o.import) return cli_bench_import(device, o.import, o.output, argc, argv);
    case_list l = {0};
    if (o.op) {
        const kk_op *op = NULL;
        if (kk_op_find(o.op, &op) != KK_OK)
            return cli_usage_error(CMD, "bad --op: %s", kk_last_error_message());
        kk_op_params p;
        char text[512], name[600];
        if (kk_op_params_parse(op, o.params ? o.params : "", &p) != KK_OK)
            return cli_usage_error(CMD, "bad --params: %s", kk_last_error_message());
        kk_op_params_format(&p, text, sizeof text);
        for (char *c = text; *c; c++)
            if (*c == ' ') *c = ',';
        snprintf(name, sizeof name, "%s/%s", kk_op_name(op), text);
        rc = add_case(&l, name, op, o.params, "--params");
    } else if (o.suite) {
        rc = add_suite_cases(o.suite, &l);
    }
    if (rc == CLI_OK && o.host_overhead)
        rc = run_host_overhead(&o, device, kind, &l, argc, argv);
    else if (rc == CLI_OK)
        rc = run_cases(&o, device, kind, &l, argc, argv, NULL);
    free(l.v);
    return rc;
}

int cli_bench_suite(const char *device, const char *suite, int quick, int argc, char **argv,
                    kk_bench_results **out) {
    *out = NULL;
    kk_backend_kind kind;
    int index;
    if (kk_device_parse(device, &kind, &index) != KK_OK)
        return cli_usage_error(CMD, "bad device: %s", kk_last_error_message());
    const opts o = {.device = device, .suite = suite, .quick = quick};
    case_list l = {0};
    int rc = add_suite_cases(suite, &l);
    if (rc == CLI_OK) rc = run_cases(&o, device, kind, &l, argc, argv, out);
    free(l.v);
    return rc;
}

const cli_command cli_cmd_bench = {
    .name = CMD,
    .summary = "time op kernels on a device and write a results file",
    .run = bench_run,
    .help = bench_help,
};

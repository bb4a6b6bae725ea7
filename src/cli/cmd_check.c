/* kernelkit check: run correctness cases (suites, named cases, fuzzing) on a
 * device and report one line per case. Exit 0 when every case that ran
 * passed, 1 when any failed, 2 for a usage error or when nothing could run. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernelkit/cases.h"

#define CMD "check"
#define MAX_LIST 64

static void check_help(FILE *out) {
    fprintf(out,
            "Usage: kernelkit check [OPTIONS]\n"
            "\n"
            "Run correctness cases of the registered ops on a device: each case draws its\n"
            "inputs from a printed seed, runs the kernel on its own copies with poisoned\n"
            "outputs and checks them against the float64 reference with the op's tolerance.\n"
            "\n"
            "Options:\n"
            "  --device DEVICE      cpu, cuda, cuda:N (default: the best device present)\n"
            "  --op NAME[,NAME]     ops to check, repeatable (default: every op with a kernel\n"
            "                       on DEVICE)\n"
            "  --suite NAME[,NAME]  suites by name (smoke, correctness, performance,\n"
            "                       attention-fuzz27, or any suite file found; all: every\n"
            "                       one) or path, repeatable (default: correctness unless\n"
            "                       --case/--params/--fuzz)\n"
            "  --case NAME          a suite case by name, repeatable (see --list); looked\n"
            "                       for in the --suites given, else in every suite\n"
            "  --params TEXT        one case of the one --op given: \"M=5,N=7,K=33\"\n"
            "  --fuzz N             N random valid shapes per op\n"
            "  --big                with --fuzz: one size per op as large as memory allows\n"
            "  --seed S             run seed (default 1); with --case/--params the case's\n"
            "                       own seed, as printed on each line\n"
            "  --dtype D[,D]        only cases whose output is D (fuzz: made so)\n"
            "  --dist NAME          nvfp4_gemv inputs: full (default) or gpumode\n"
            "  --max-ref-gflop G    skip cases whose reference needs more (default 64; 0: none)\n"
            "  --json FILE          write every case's result as JSON\n"
            "  --list               print the selected cases and exit\n"
            "  -v, --verbose        every output's check, timings, the rerun command\n"
            "  -h, --help           show this help\n"
            "\n"
            "Exit status: 0 every case that ran passed, 1 a case failed, 2 usage error or\n"
            "nothing could run (no kernel for the op on DEVICE, device unavailable).\n");
}

typedef struct opts {
    const char *device, *params, *json;
    const kk_op *ops[MAX_LIST];
    const char *cases[MAX_LIST];
    const char *suites[MAX_LIST];
    char suite_arg[1024]; /* the --suites as one comma list, for the rerun lines */
    kk_dtype dtypes[KK_DTYPE_COUNT];
    int nops, ncases, nsuites, ndtypes, fuzz, big, seed_given, verbose, list;
    kk_case *suite_cases; /* the --suites' cases, every op */
    int nsuite_cases;
    uint64_t seed;
    kk_input_dist dist;
    double max_ref_gflop;
} opts;

typedef struct case_list {
    kk_case *v;
    int n, cap;
} case_list;

static int push(case_list *l, const kk_case *c) {
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 64;
        kk_case *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return 0;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *c;
    return 1;
}

/* ---- options ---- */

/* A comma list of ops (--op) or dtypes (--dtype). */
static int add_list(opts *o, const char *text, int ops) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int *n = ops ? &o->nops : &o->ndtypes;
        if (*n == (ops ? MAX_LIST : KK_DTYPE_COUNT))
            return cli_usage_error(CMD, "too many --%s values", ops ? "op" : "dtype");
        if ((ops ? kk_op_find(tok, &o->ops[*n]) : kk_dtype_parse(tok, &o->dtypes[*n])) != KK_OK)
            return cli_usage_error(CMD, "bad --%s: %s", ops ? "op" : "dtype",
                                   kk_last_error_message());
        (*n)++;
    }
    return CLI_OK;
}

static int parse_number(const char *text, const char *what, double lo, double *out) {
    char *end = NULL;
    const double v = strtod(text, &end);
    if (end == text || *end || !(v >= lo) || v > 1e15)
        return cli_usage_error(CMD, "bad %s: '%s' (expected a number >= %g)", what, text, lo);
    *out = v;
    return CLI_OK;
}

static int parse_option(opts *o, int c, const char *arg) {
    double v = 0;
    int rc = CLI_OK;
    char *end = NULL;
    switch (c) {
    case 'd': o->device = arg; break;
    case 'o': return add_list(o, arg, 1);
    case 's': {
        if (o->nsuites == MAX_LIST) return cli_usage_error(CMD, "too many --suite values");
        o->suites[o->nsuites++] = arg;
        const size_t used = strlen(o->suite_arg);
        snprintf(o->suite_arg + used, sizeof o->suite_arg - used, "%s%s", used ? "," : "", arg);
        break;
    }
    case 'c':
        if (o->ncases == MAX_LIST) return cli_usage_error(CMD, "too many --case values");
        o->cases[o->ncases++] = arg;
        break;
    case 'p': o->params = arg; break;
    case 'f': /* at most 10^6 cases per op */
        if ((rc = parse_number(arg, "--fuzz", 1, &v)) == CLI_OK)
            o->fuzz = v > 1e6 ? 1000000 : (int)v;
        return rc;
    case 'S':
        o->seed = strtoull(arg, &end, 0);
        o->seed_given = 1;
        if (end == arg || *end || arg[0] == '-')
            return cli_usage_error(CMD, "bad --seed: '%s' (expected an unsigned integer)", arg);
        break;
    case 'b': o->big = 1; break;
    case 't': return add_list(o, arg, 0);
    case 'D':
        if (kk_input_dist_parse(arg, &o->dist) != KK_OK)
            return cli_usage_error(CMD, "bad --dist: %s", kk_last_error_message());
        break;
    case 'g': return parse_number(arg, "--max-ref-gflop", 0, &o->max_ref_gflop);
    case 'j': o->json = arg; break;
    case 'v': o->verbose = 1; break;
    case 'l': o->list = 1; break;
    default: return CLI_USAGE;
    }
    return CLI_OK;
}

static int parse_options(opts *o, int argc, char **argv) {
    static const struct option long_opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"suite", required_argument, NULL, 's'},
        {"case", required_argument, NULL, 'c'},
        {"params", required_argument, NULL, 'p'},
        {"fuzz", required_argument, NULL, 'f'},
        {"seed", required_argument, NULL, 'S'},
        {"big", no_argument, NULL, 'b'},
        {"dtype", required_argument, NULL, 't'},
        {"dist", required_argument, NULL, 'D'},
        {"json", required_argument, NULL, 'j'},
        {"verbose", no_argument, NULL, 'v'},
        {"list", no_argument, NULL, 'l'},
        {"max-ref-gflop", required_argument, NULL, 'g'},
        {NULL, 0, NULL, 0},
    };
    *o = (opts){.seed = 1, .max_ref_gflop = 64.0, .dist = KK_DIST_FULL};
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":v", long_opts, NULL)) != -1) {
        if (c == ':') return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        if ((rc = parse_option(o, c, optarg)) != CLI_OK) return rc;
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    const int named = o->ncases > 0 || o->params;
    if ((named && o->fuzz) || (o->params && o->nsuites))
        return cli_usage_error(CMD, "--case/--params cannot be combined with --fuzz, "
                                    "--params not with --suite");
    if (o->params && o->nops != 1) return cli_usage_error(CMD, "--params needs exactly one --op");
    if (o->big && !o->fuzz) return cli_usage_error(CMD, "--big needs --fuzz N");
    if (!named && !o->nsuites && !o->fuzz) o->suites[o->nsuites++] = "correctness";
    return CLI_OK;
}

/* ---- which ops, which cases ---- */

/* The named ops that have a kernel on `kind`; the others go to `lacking`, to
 * be reported. With no --op, every op that has a kernel there. Returns how
 * many can run. */
static int split_ops(opts *o, kk_backend_kind kind, const kk_op **lacking, int *nlacking) {
    int n = 0;
    *nlacking = 0;
    if (o->nops == 0) {
        for (int i = 0; i < kk_op_count() && n < MAX_LIST; i++)
            if (kk_op_has_kernel(kk_op_at(i), kind)) o->ops[n++] = kk_op_at(i);
        return o->nops = n;
    }
    for (int i = 0; i < o->nops; i++) {
        if (kk_op_has_kernel(o->ops[i], kind))
            o->ops[n++] = o->ops[i];
        else
            lacking[(*nlacking)++] = o->ops[i];
    }
    o->nops = n;
    return n;
}

static void report_lacking(const kk_op *op, kk_backend_kind kind) {
    char have[64];
    kk_op_backends_format(op, have, sizeof have);
    if (kk_op_backends(op) == 0)
        fprintf(stderr, "kernelkit check: %s: no backend implements it yet (no kernel on %s)\n",
                kk_op_name(op), kk_backend_name(kind));
    else
        fprintf(stderr, "kernelkit check: %s: no %s kernel; implemented on: %s\n", kk_op_name(op),
                kk_backend_name(kind), have);
}

static int wanted_dtype(const opts *o, const kk_op_params *p) {
    for (int i = 0; i < o->ndtypes; i++)
        if (kk_case_dtype(p) == o->dtypes[i]) return 1;
    return o->ndtypes == 0;
}

/* --case NAME: from the --suites given, else from any suite. */
static int find_case(const opts *o, const char *name, kk_case *c) {
    if (!o->suite_arg[0]) {
        if (kk_suite_case_find(name, o->seed, o->dist, c) == KK_OK) return CLI_OK;
        return cli_usage_error(CMD, "bad --case: %s", kk_last_error_message());
    }
    for (int i = 0; i < o->nsuite_cases; i++)
        if (strcmp(o->suite_cases[i].name, name) == 0) {
            *c = o->suite_cases[i];
            return CLI_OK;
        }
    return cli_usage_error(CMD, "bad --case: %s: no such case in --suite %s", name, o->suite_arg);
}

static int add_named(const opts *o, case_list *l) {
    kk_case c;
    for (int i = 0; i < o->ncases; i++) {
        const int rc = find_case(o, o->cases[i], &c);
        if (rc != CLI_OK) return rc;
        if (o->seed_given) c.seed = o->seed;
        if (!push(l, &c)) return cli_fail(CMD, "out of memory");
    }
    if (!o->params) return CLI_OK;
    memset(&c, 0, sizeof c);
    if (kk_op_params_parse(o->ops[0], o->params, &c.params) != KK_OK)
        return cli_usage_error(CMD, "bad --params: %s", kk_last_error_message());
    snprintf(c.name, sizeof c.name, "params/%s", kk_op_name(o->ops[0]));
    c.seed = o->seed_given ? o->seed : kk_case_seed(o->seed, c.name);
    c.dist = o->dist;
    return push(l, &c) ? CLI_OK : cli_fail(CMD, "out of memory");
}

static int add_generated(const opts *o, const kk_op *op, const kk_case_memory *big, case_list *l) {
    for (int i = 0; i < o->nsuite_cases; i++) {
        const kk_case *c = &o->suite_cases[i];
        if (c->params.op == op && wanted_dtype(o, &c->params) && !push(l, c))
            return cli_fail(CMD, "out of memory");
    }
    for (int i = 0; i < o->fuzz; i++) {
        kk_case c;
        if (kk_case_fuzz(op, o->seed, i, o->dist, big, &c) != KK_OK) return cli_fail(CMD, "fuzz");
        if (o->ndtypes && kk_case_force_dtype(&c.params, o->dtypes[i % o->ndtypes]) != KK_OK)
            continue;
        if (!push(l, &c)) return cli_fail(CMD, "out of memory");
    }
    return CLI_OK;
}

/* --big: the memory a fuzz case may take, with a safety factor of 2 (the
 * allocator rounds up, other processes allocate; on the CPU the device and
 * host copies share the host's memory). */
static kk_case_memory big_budget(const char *device, kk_backend_kind kind) {
    kk_device_info info, host; /* a GPU's info has no host fields: ask the CPU's */
    kk_case_memory m = {0, 0};
    if (kk_device_get_info(device, &info) != KK_OK || kk_device_get_info("cpu", &host) != KK_OK)
        return m;
    m.host_bytes = host.host_mem_available_bytes / 2;
    m.device_bytes = kind == KK_BACKEND_CPU ? m.host_bytes / 4 : info.mem_free_bytes / 2;
    if (kind == KK_BACKEND_CPU) m.host_bytes -= m.device_bytes;
    return m;
}

/* ---- output ---- */

static const char *fmt_num(double v, char *buf) {
    snprintf(buf, 32, "%.3g", v);
    return buf;
}

static void print_case(const opts *o, const kk_case *c, const kk_case_result *r) {
    char params[2048], a[32], b[32], d[32];
    kk_op_params_format(&c->params, params, sizeof params);
    printf("%-5s %s  %s %s  dtype=%s seed=%llu", kk_case_status_name(r->status), c->name,
           kk_op_name(c->params.op), params, kk_dtype_name(kk_case_dtype(&c->params)),
           (unsigned long long)c->seed);
    if (r->status == KK_CASE_PASS || r->status == KK_CASE_FAIL)
        printf("  max_abs=%s max_rel=%s rel_l2=%s", fmt_num(r->max_abs_err, a),
               fmt_num(r->max_rel_err, b), fmt_num(r->rel_l2_err, d));
    if (r->first_bad_tensor)
        printf("  first_bad=%s[%lld] out=%s ref=%s", r->first_bad_tensor, (long long)r->first_bad,
               fmt_num(r->first_bad_out, a), fmt_num(r->first_bad_ref, b));
    printf("\n");
    if (r->message[0]) printf("      %s\n", r->message);
    for (int k = 0; o->verbose && k < r->noutputs; k++) {
        char line[512];
        kk_check_result_format(&r->outputs[k].check, line, sizeof line);
        printf("      %s (%s): %s\n", r->outputs[k].name, kk_dtype_name(r->outputs[k].dtype), line);
    }
    if (o->verbose)
        printf("      kernel %.3f ms (%d run%s), reference %.3f ms\n", r->kernel_ms, r->kernel_runs,
               r->kernel_runs == 1 ? "" : "s", r->reference_ms);
    if (r->status == KK_CASE_FAIL || r->status == KK_CASE_ERROR || o->verbose) {
        if (strncmp(c->name, "fuzz/", 5) == 0 || strncmp(c->name, "params/", 7) == 0)
            printf(
                "      rerun: kernelkit check --device %s --op %s --params \"%s\" --seed %llu%s\n",
                o->device, kk_op_name(c->params.op), params, (unsigned long long)c->seed,
                c->dist == KK_DIST_GPUMODE ? " --dist gpumode" : "");
        else
            printf("      rerun: kernelkit check --device %s%s%s --case %s --seed %llu%s\n",
                   o->device, o->suite_arg[0] ? " --suite " : "", o->suite_arg, c->name,
                   (unsigned long long)c->seed,
                   c->dist == KK_DIST_GPUMODE ? " --dist gpumode" : "");
    }
}

/* --json: one object, its cases written as they finish, so that a long run
 * that is interrupted still leaves every finished case behind. */
static FILE *json_open(const opts *o) {
    FILE *f = fopen(o->json, "w");
    if (f)
        fprintf(f, "{\"device\": \"%s\", \"seed\": \"%llu\", \"cases\": [\n", o->device,
                (unsigned long long)o->seed);
    return f;
}

static int json_close(FILE *f, const opts *o, const kk_check_tally *t, int code) {
    fprintf(f,
            "\n],\n\"summary\": {\"passed\": %d, \"failed\": %d, \"skipped\": %d},\n"
            "\"exit_code\": %d}\n",
            t->passed, t->failed, t->skipped, code);
    if (!ferror(f) && fclose(f) == 0) return code;
    fprintf(stderr, "kernelkit check: cannot write %s\n", o->json);
    return code == CLI_OK ? CLI_FAILED : code;
}

/* ---- the command ---- */

static int run_cases(const opts *o, const case_list *l, int lacking_cases) {
    kk_check_tally t = {.skipped = lacking_cases};
    const kk_run_options ro = {
        .device = o->device, .max_ref_flops = o->max_ref_gflop * 1e9, .check_memory = 1};
    FILE *json = o->json ? json_open(o) : NULL;
    if (o->json && !json) return cli_usage_error(CMD, "cannot write --json %s", o->json);
    printf("kernelkit check: %d case%s on %s, seed %llu\n", l->n, l->n == 1 ? "" : "s", o->device,
           (unsigned long long)o->seed);
    for (int i = 0; i < l->n; i++) {
        kk_case_result r;
        char *text = NULL;
        if (kk_case_run(&l->v[i], &ro, &r) != KK_OK) {
            if (json) fclose(json);
            return cli_fail(CMD, l->v[i].name);
        }
        kk_check_tally_add(&t, r.status);
        print_case(o, &l->v[i], &r);
        fflush(stdout);
        if (json && kk_case_result_json(&l->v[i], &r, &text) == KK_OK)
            fprintf(json, "%s%s", i ? ",\n" : "", text);
        free(text);
    }
    const int code = kk_check_tally_exit_code(&t);
    printf("%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
    if (code == CLI_USAGE) fprintf(stderr, "kernelkit check: nothing could run on %s\n", o->device);
    return json ? json_close(json, o, &t, code) : code;
}

/* Keep the ops that can run on `kind`, report the others, count their cases
 * as skipped. CLI_USAGE when nothing can run. --list lists named ops anyway. */
static int select_ops(opts *o, kk_backend_kind kind, int *lacking_cases) {
    const kk_op *lacking[MAX_LIST];
    int nlacking = 0;
    *lacking_cases = 0;
    if (o->ncases || (o->list && o->nops)) return CLI_OK;
    const int runnable = split_ops(o, kind, lacking, &nlacking);
    for (int i = 0; i < nlacking; i++) {
        int n = 0;
        report_lacking(lacking[i], kind);
        for (int k = 0; k < o->nsuite_cases; k++) n += o->suite_cases[k].params.op == lacking[i];
        *lacking_cases += n + o->fuzz + (o->params ? 1 : 0);
    }
    if (runnable) return CLI_OK;
    if (nlacking == 0) { /* no --op, and no op has a kernel here */
        fprintf(stderr,
                "kernelkit check: no op has a %s kernel yet; kernels:", kk_backend_name(kind));
        for (int i = 0; i < kk_op_count(); i++) {
            char have[64];
            kk_op_backends_format(kk_op_at(i), have, sizeof have);
            fprintf(stderr, "%s %s (%s)", i ? "," : "", kk_op_name(kk_op_at(i)), have);
        }
        fprintf(stderr, "\n");
    }
    fprintf(stderr, "kernelkit check: nothing could run on %s\n", o->device);
    return CLI_USAGE;
}

static void list_cases(const case_list *l) {
    for (int i = 0; i < l->n; i++) {
        char params[2048]; /* attention_varlen: lists of lengths */
        kk_op_params_format(&l->v[i].params, params, sizeof params);
        printf("%s  %s %s\n", l->v[i].name, kk_op_name(l->v[i].params.op), params);
    }
}

static int check_run(int argc, char **argv) {
    opts o;
    int rc = parse_options(&o, argc, argv), lacking_cases = 0, index;
    if (rc != CLI_OK) return rc;
    if (!o.device) o.device = kk_device_best();
    kk_backend_kind kind;
    if (kk_device_parse(o.device, &kind, &index) != KK_OK) {
        if (kk_last_error()->status == KK_ERR_INVALID_ARGUMENT)
            return cli_usage_error(CMD, "bad --device: %s", kk_last_error_message());
        fprintf(stderr, "kernelkit check: cannot use %s: %s\n", o.device, kk_last_error_message());
        return CLI_USAGE;
    }
    for (int i = 0; i < o.nsuites && rc == CLI_OK; i++)
        rc = cli_suite_cases(CMD, o.suites[i], o.seed, o.dist, &o.suite_cases, &o.nsuite_cases);
    if (rc == CLI_OK) rc = select_ops(&o, kind, &lacking_cases);
    if (rc != CLI_OK) return free(o.suite_cases), rc;
    const kk_case_memory big = o.big ? big_budget(o.device, kind) : (kk_case_memory){0, 0};
    case_list l = {0};
    rc = add_named(&o, &l);
    for (int i = 0; rc == CLI_OK && !o.ncases && !o.params && i < o.nops; i++)
        rc = add_generated(&o, o.ops[i], o.big ? &big : NULL, &l);
    if (rc == CLI_OK && o.list) {
        list_cases(&l);
    } else if (rc == CLI_OK && l.n == 0 && lacking_cases == 0) {
        fprintf(stderr, "kernelkit check: no case matches the options\n");
        rc = CLI_USAGE;
    } else if (rc == CLI_OK) {
        rc = run_cases(&o, &l, lacking_cases);
    }
    free(l.v);
    free(o.suite_cases);
    return rc;
}

const cli_command cli_cmd_check = {
    .name = "check",
    .summary = "run correctness cases (suites, fuzzing) against the float64 references",
    .run = check_run,
    .help = check_help,
};

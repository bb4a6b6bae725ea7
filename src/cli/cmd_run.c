/* kernelkit run: one op on data from .npy files (or seeded random data), on a
 * device or through the float64 reference, outputs to .npy files or a short
 * summary. Exit 0 done, 1 bad data (unreadable file, wrong dtype or shape, a
 * kernel error), 2 usage (bad option or parameter, unknown or missing tensor,
 * no kernel on that device). */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernelkit/cases.h"

#define CMD "run"
#define MAX_FILES 16

static void run_help(FILE *out) {
    fprintf(out, "Usage: kernelkit run OP [--param K=V]... [--params \"K=V,K=V\"]\n"
                 "                        [--input NAME=FILE.npy]... [--output NAME=FILE.npy]...\n"
                 "                        [--device DEVICE] [--random SEED [--dist NAME]]\n"
                 "       kernelkit run --list\n"
                 "\n"
                 "Run one op: read its inputs from .npy files (dtype and shape must be what the\n"
                 "op takes for these parameters), run the kernel of DEVICE, write the outputs.\n"
                 "\n"
                 "Options:\n"
                 "  --param K=V          one parameter, repeatable\n"
                 "  --params TEXT        several: \"n=5,src=f32,dst=bf16\"\n"
                 "  --input NAME=FILE    an input tensor from a .npy file, repeatable\n"
                 "  --random SEED        draw the inputs not given with --input from SEED, as\n"
                 "                       'kernelkit check' does\n"
                 "  --dist NAME          with --random: full (default) or gpumode (nvfp4_gemv)\n"
                 "  --output NAME=FILE   write a tensor (an output, or an input) to a .npy file,\n"
                 "                       repeatable; without any, each output is summarized\n"
                 "  --device DEVICE      cpu, cuda, cuda:N (default: the best device present), or\n"
                 "                       reference: the float64 reference, rounded to each\n"
                 "                       output's dtype (works before any kernel exists)\n"
                 "  --list               list the ops, their parameters and tensors\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "Exit status: 0 done; 1 bad data (unreadable file, wrong dtype or shape, kernel\n"
                 "error); 2 usage error (bad option or parameter, unknown or missing tensor, no\n"
                 "kernel for OP on DEVICE).\n");
}

typedef struct binding {
    char name[64];
    const char *path;
} binding;

typedef struct opts {
    char params[1024];
    binding in[MAX_FILES], out[MAX_FILES];
    int nin, nout, random, list;
    uint64_t seed;
    const char *device, *op;
    kk_input_dist dist;
} opts;

/* ---- options ---- */

static int add_binding(binding *b, int *n, const char *arg, const char *what) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return cli_usage_error(CMD, "bad %s '%s': expected NAME=FILE.npy", what, arg);
    if (*n == MAX_FILES) return cli_usage_error(CMD, "too many %s options", what);
    snprintf(b[*n].name, sizeof b[*n].name, "%.*s", (int)(eq - arg), arg);
    b[(*n)++].path = eq + 1;
    return CLI_OK;
}

static int add_params(opts *o, const char *text) {
    const size_t used = strlen(o->params);
    if (used + strlen(text) + 2 > sizeof o->params)
        return cli_usage_error(CMD, "too many parameters");
    snprintf(o->params + used, sizeof o->params - used, "%s%s", used ? " " : "", text);
    return CLI_OK;
}

static int parse_option(opts *o, int c, const char *arg) {
    char *end = NULL;
    switch (c) {
    case 'p': return add_params(o, arg);
    case 'i': return add_binding(o->in, &o->nin, arg, "--input");
    case 'o': return add_binding(o->out, &o->nout, arg, "--output");
    case 'd': o->device = arg; return CLI_OK;
    case 'l': o->list = 1; return CLI_OK;
    case 'D':
        if (kk_input_dist_parse(arg, &o->dist) == KK_OK) return CLI_OK;
        return cli_usage_error(CMD, "bad --dist: %s", kk_last_error_message());
    case 'r':
        o->seed = strtoull(arg, &end, 0);
        o->random = 1;
        if (end != arg && !*end && arg[0] != '-') return CLI_OK;
        return cli_usage_error(CMD, "bad --random: '%s' (expected an unsigned integer)", arg);
    default: return CLI_USAGE;
    }
}

static int parse_options(opts *o, int argc, char **argv) {
    static const struct option long_opts[] = {
        {"param", required_argument, NULL, 'p'},
        {"params", required_argument, NULL, 'p'},
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"device", required_argument, NULL, 'd'},
        {"random", required_argument, NULL, 'r'},
        {"dist", required_argument, NULL, 'D'},
        {"list", no_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
        if (c == ':') return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        if ((rc = parse_option(o, c, optarg)) != CLI_OK) return rc;
    }
    if (optind < argc) o->op = argv[optind++];
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->op && !o->list) return cli_usage_error(CMD, "which op? (kernelkit run --list)");
    return CLI_OK;
}

/* ---- tensors ---- */

static const char *shape_text(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used +=
            (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static const char *tensor_text(const kk_op_tensor *t, char *buf, size_t size) {
    char shape[160];
    snprintf(buf, size, "%s %s %s", t->name, shape_text(t->shape, t->ndim, shape, sizeof shape),
             kk_dtype_name(t->dtype));
    return buf;
}

static int find_tensor(const kk_op_tensor *t, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (strcmp(t[k].name, name) == 0) return k;
    return -1;
}

/* What a parameter accepts: "1..16777216", "a multiple of 64 in 64..16777216", "f32|f16|bf16". */
static const char *param_range(const kk_op_param *d, char *buf, size_t size) {
    if (d->kind == KK_PARAM_INT && d->multiple > 1)
        snprintf(buf, size, "a multiple of %lld in %lld..%lld", (long long)d->multiple,
                 (long long)d->min, (long long)d->max);
    else if (d->kind == KK_PARAM_INT)
        snprintf(buf, size, "%lld..%lld", (long long)d->min, (long long)d->max);
    else if (d->kind == KK_PARAM_FLOAT)
        snprintf(buf, size, "%g..%g", d->fmin, d->fmax);
    else if (d->kind == KK_PARAM_BOOL)
        snprintf(buf, size, "0|1");
    else if (d->kind == KK_PARAM_LIST)
        snprintf(buf, size, "n:n:... (%lld..%lld each) or none", (long long)d->min,
                 (long long)d->max);
    else
        for (int c = 0, used = 0; d->choices && d->choices[c] && used < (int)size; c++)
            used += snprintf(buf + used, size - (size_t)used, "%s%s", c ? "|" : "", d->choices[c]);
    return buf;
}

static int list_ops(void) {
    for (int i = 0; i < kk_op_count(); i++) {
        const kk_op *op = kk_op_at(i);
        char have[64], text[2048]; /* attention_varlen: lists of lengths */
        kk_op_backends_format(op, have, sizeof have);
        printf("%s: %s\n  kernels: %s\n  parameters:\n", kk_op_name(op), kk_op_summary(op), have);
        for (int k = 0; k < kk_op_param_count(op); k++)
            printf("    %-13s %-40s %s\n", kk_op_param_at(op, k)->name,
                   param_range(kk_op_param_at(op, k), text, sizeof text),
                   kk_op_param_at(op, k)->help);
        kk_op_params p;
        kk_op_tensor t[KK_OP_MAX_TENSORS];
        int n = 0;
        kk_op_params_init(op, &p);
        kk_op_params_format(&p, text, sizeof text);
        printf("  defaults: %s\n  tensors at the defaults:", text);
        if (kk_op_tensors(&p, t, &n) == KK_OK)
            for (int k = 0; k < n; k++)
                printf("%s %s%s", k ? "," : "", t[k].is_output ? "output " : "",
                       tensor_text(&t[k], text, sizeof text));
        printf("\n\n");
    }
    return CLI_OK;
}

/* Every --input is an input tensor, every --output a tensor, every input given
 * (unless --random): what is wrong is a usage error. */
static int check_names(const opts *o, const kk_op_tensor *t, int n) {
    char text[256], all[1024] = "";
    for (int k = 0; k < n; k++)
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s%s", k ? ", " : "",
                 t[k].is_output ? "output " : "", tensor_text(&t[k], text, sizeof text));
    for (int i = 0; i < o->nin; i++) {
        const int k = find_tensor(t, n, o->in[i].name);
        if (k < 0 || t[k].is_output)
            return cli_usage_error(CMD, "unknown input '%s': %s takes %s", o->in[i].name, o->op,
                                   all);
    }
    for (int i = 0; i < o->nout; i++)
        if (find_tensor(t, n, o->out[i].name) < 0)
            return cli_usage_error(CMD, "unknown tensor '%s' in --output: %s has %s",
                                   o->out[i].name, o->op, all);
    char missing[1024] = "";
    for (int k = 0; k < n && !o->random; k++) {
        int given = 0;
        for (int i = 0; i < o->nin; i++) given |= strcmp(o->in[i].name, t[k].name) == 0;
        if (!t[k].is_output && !given)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", tensor_text(&t[k], text, sizeof text));
    }
    if (missing[0])
        return cli_usage_error(CMD,
                               "missing input: %s (give --input NAME=FILE.npy, or --random "
                               "SEED)",
                               missing);
    return CLI_OK;
}

/* ---- data ---- */

/* "kernelkit run: message" on stderr; returns CLI_FAILED (a data error). */
static int data_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int data_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kernelkit run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return CLI_FAILED;
}

static int load_input(const kk_op_tensor *t, const char *path, void *buf) {
    kk_npy_array a;
    char want[160], got[160];
    if (kk_npy_read_file(path, &a) != KK_OK)
        return data_error("input %s: %s", t->name, kk_last_error_message());
    /* raw bits (np.save of ml_dtypes arrays) or packed e2m1 bytes take the type */
    const int raw =
        a.dtype == KK_NPY_DTYPE_NONE || (t->dtype == KK_DTYPE_E2M1 && a.dtype == KK_DTYPE_UINT8);
    int rc = CLI_OK;
    if (a.dtype != t->dtype && (!raw || kk_npy_reinterpret(&a, t->dtype) != KK_OK))
        rc = data_error("input %s: wrong dtype: %s holds %s, expected %s", t->name, path,
                        a.dtype < KK_DTYPE_COUNT ? kk_dtype_name(a.dtype) : a.descr,
                        kk_dtype_name(t->dtype));
    else if (a.ndim != t->ndim || memcmp(a.shape, t->shape, (size_t)t->ndim * sizeof(int64_t)))
        rc = data_error("input %s: wrong shape: %s has %s, expected %s", t->name, path,
                        shape_text(a.shape, a.ndim, got, sizeof got),
                        shape_text(t->shape, t->ndim, want, sizeof want));
    else
        memcpy(buf, a.data, kk_dtype_bytes(t->dtype, (size_t)t->numel));
    kk_npy_free(&a);
    return rc;
}

static int save_tensor(const kk_op_tensor *t, const char *path, const void *buf) {
    kk_npy_array a;
    if (kk_npy_array_init(&a, t->dtype, t->ndim, t->shape) != KK_OK)
        return data_error("cannot write %s to %s: %s", t->name, path, kk_last_error_message());
    memcpy(a.data, buf, a.nbytes);
    const kk_status st = kk_npy_write_file(path, &a);
    kk_npy_free(&a);
    return st == KK_OK ? CLI_OK : data_error("cannot write %s: %s", path, kk_last_error_message());
}

static void summarize(const kk_op_tensor *t, const void *buf) {
    double *v = malloc((size_t)t->numel * sizeof *v);
    char text[256];
    if (!v || kk_convert_host(buf, t->dtype, v, KK_DTYPE_F64, (size_t)t->numel) != KK_OK) {
        free(v);
        printf("%s: (cannot decode)\n", tensor_text(t, text, sizeof text));
        return;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0.0;
    int64_t nan = 0, inf = 0, finite = 0;
    for (int64_t i = 0; i < t->numel; i++) {
        if (isnan(v[i]))
            nan++;
        else if (isinf(v[i]))
            inf++;
        if (!isfinite(v[i])) continue;
        lo = v[i] < lo ? v[i] : lo; /* no fmin: the CLI does not link libm */
        hi = v[i] > hi ? v[i] : hi;
        sum += v[i];
        finite++;
    }
    printf("%s: min %.6g max %.6g mean %.6g", tensor_text(t, text, sizeof text), lo, hi,
           finite ? sum / (double)finite : NAN);
    if (nan || inf) printf(" (nan %lld, inf %lld)", (long long)nan, (long long)inf);
    printf("\n");
    free(v);
}

/* ---- the command ---- */

static int resolve_device(const opts *o, const kk_op *op) {
    kk_backend_kind kind;
    int index;
    char have[64];
    if (strcmp(o->device, "reference") == 0) return CLI_OK;
    if (kk_device_parse(o->device, &kind, &index) != KK_OK) {
        if (kk_last_error()->status == KK_ERR_INVALID_ARGUMENT)
            return cli_usage_error(CMD, "bad --device: %s", kk_last_error_message());
        fprintf(stderr, "kernelkit run: cannot use %s: %s\n", o->device, kk_last_error_message());
        return CLI_USAGE; /* nothing could run, as for check */
    }
    if (kk_op_has_kernel(op, kind)) return CLI_OK;
    kk_op_backends_format(op, have, sizeof have);
    fprintf(stderr,
            "kernelkit run: %s has no %s kernel (kernels: %s); --device reference "
            "runs the float64 reference\n",
            kk_op_name(op), kk_backend_name(kind), have);
    return CLI_USAGE;
}

static int execute(const opts *o, const kk_op_params *p, const kk_op_tensor *t, int n, void **buf) {
    int rc = CLI_OK;
    if (o->random && kk_case_fill_inputs(p, o->seed, o->dist, buf) != KK_OK)
        return cli_fail(CMD, "random inputs");
    for (int i = 0; rc == CLI_OK && i < o->nin; i++)
        rc = load_input(&t[find_tensor(t, n, o->in[i].name)], o->in[i].path,
                        buf[find_tensor(t, n, o->in[i].name)]);
    if (rc != CLI_OK) return rc;
    const kk_status st = strcmp(o->device, "reference") == 0
                             ? kk_run_reference_host(p, buf)
                             : kk_run_kernel_host(p, o->device, buf);
    if (st != KK_OK) return cli_fail(CMD, o->device);
    for (int i = 0; rc == CLI_OK && i < o->nout; i++) {
        const int k = find_tensor(t, n, o->out[i].name);
        rc = save_tensor(&t[k], o->out[i].path, buf[k]);
    }
    for (int k = 0; o->nout == 0 && k < n; k++)
        if (t[k].is_output) summarize(&t[k], buf[k]);
    return rc;
}

static int run_run(int argc, char **argv) {
    opts o;
    int rc = parse_options(&o, argc, argv);
    if (rc != CLI_OK || o.list) return rc == CLI_OK ? list_ops() : rc;
    const kk_op *op;
    kk_op_params p;
    if (kk_op_find(o.op, &op) != KK_OK)
        return cli_usage_error(CMD, "unknown op: %s", kk_last_error_message());
    if (kk_op_params_parse(op, o.params, &p) != KK_OK)
        return cli_usage_error(CMD, "bad parameter: %s", kk_last_error_message());
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_op_tensors(&p, t, &n);
    if (!o.device) o.device = kk_device_best();
    if ((rc = check_names(&o, t, n)) != CLI_OK || (rc = resolve_device(&o, op)) != CLI_OK)
        return rc;
    void *buf[KK_OP_MAX_TENSORS] = {0};
    for (int k = 0; k < n && rc == CLI_OK; k++)
        if (!(buf[k] = calloc(1, kk_dtype_bytes(t[k].dtype, (size_t)t[k].numel) + 1)))
            rc = data_error("out of host memory for %s", t[k].name);
    if (rc == CLI_OK) rc = execute(&o, &p, t, n, buf);
    for (int k = 0; k < n; k++) free(buf[k]);
    return rc;
}

const cli_command cli_cmd_run = {
    .name = "run",
    .summary = "run one op on .npy inputs (or --random) on a device or the reference",
    .run = run_run,
    .help = run_help,
};

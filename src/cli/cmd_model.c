/* kernelkit model: open a model folder, build the decoder at a level on a
 * device, print its plan, and run random hidden states through it (a prefill,
 * then decode steps) with the wall-clock time of each call. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernelkit/dtype.h"
#include "kernelkit/npy.h"

#define CLI_MODEL_NO_GRAPHS_OPT 1900 /* --no-graphs: above cli.h's CLI_MODEL_* */
#define CLI_MODEL_INPUT_OPT 1901     /* --input X.npy */
#define CLI_MODEL_SAVE_OPT 1902      /* --save Y.npy */

static void model_help(FILE *out) {
    fprintf(out, "Usage: kernelkit model DIR [--level L] [--device D] [--batch B] [--prefill N]\n"
                 "                       [--decode N] [--seed S] [--tp N]\n"
                 "                       [--tp-overlap auto|off|on] [--no-profile]\n"
                 "                       [--ceilings FILE] [--launch-floor-us X]\n"
                 "                       [--profile-time S] [--no-compare] [--output FILE]\n"
                 "                       [--report FILE.md] [--no-graphs]\n"
                 "                       [--input X.npy] [--save Y.npy]\n"
                 "\n"
                 "Load the Llama-family model in folder DIR, build its decoder layers at level L\n"
                 "on device D, print the plan (every op call of a layer), then run random hidden\n"
                 "states (uniform in [-1, 1), from the seed) through the layers: one prefill of\n"
                 "N tokens per sequence, then decode steps of one token each, with the\n"
                 "wall-clock time of each call (the device waited for). No embedding or lm_head:\n"
                 "hidden states in, hidden states out (docs/model.md, \"Execution\").\n"
                 "\n"
                 "Options:\n"
                 "  -l, --level L     conservative, balanced (default) or aggressive\n"
                 "  -d, --device D    cpu (default), cuda, cuda:N\n"
                 "  -b, --batch B     sequences (default 1)\n"
                 "  -p, --prefill N   prompt tokens per sequence (default 16)\n"
                 "  -n, --decode N    decode steps after the prefill (default 4)\n"
                 "  -s, --seed S      the hidden states' seed (default 1)\n"
                 "  -t, --tp N        tensor parallel over N ranks (default 1): on CUDA one\n"
                 "                    process per GPU from D on (NCCL), on the CPU threads\n"
                 "                    (loopback); docs/distributed.md\n"
                 "  --tp-overlap M    auto, off or on: the prefill as two micro-batches, one's\n"
                 "                    all-reduces overlapped with the other's compute (auto,\n"
                 "                    the default: on GPUs at --tp 4+ for 2+ sequences and\n"
                 "                    1024+ tokens, where it was measured faster)\n"
                 "  --no-graphs       aggressive on CUDA: decode steps eager, not replayed as\n"
                 "                    CUDA graphs (the same kernels; docs/model.md)\n"
                 "  --input X.npy     the prefill's hidden states from X.npy instead of random\n"
                 "                    ones: [B, N, hidden] (--batch, --prefill, the model's\n"
                 "                    hidden size), float32, bfloat16 or float16, converted to\n"
                 "                    the decoder's dtype (not with --tp)\n"
                 "  --save Y.npy      write the prefill's output hidden states [B, N, hidden] to\n"
                 "                    Y.npy as float32 (not with --tp; scripts/\n"
                 "                    compare_transformers.py compares them with transformers)\n"
                 "\n"
                 "Cost model (docs/model.md, \"Cost model\"; not with --tp): first a profiled\n"
                 "prefill and decode step: each step of layer 0 timed with the benchmark\n"
                 "sampler, beside its roofline prediction from kernelkit calibrate's ceilings,\n"
                 "max(bytes / bandwidth, FLOPs / rate) + calls x the launch floor; at another\n"
                 "level than conservative a conservative decoder is profiled too, and the\n"
                 "level's speedup printed, measured and predicted.\n"
                 "  --no-profile          skip it (plan and timed calls only)\n"
                 "  --no-compare          no conservative decoder\n"
                 "  --ceilings FILE       ceilings (default: the stored ones of the device)\n"
                 "  --launch-floor-us X   the floor per op call (default: measured)\n"
                 "  --profile-time S      sampler budget per step (default 0.5)\n"
                 "  --output FILE         results JSON (kernelkit.bench/1 + \"model\")\n"
                 "  --report FILE         markdown report\n"
                 "  -h, --help        show this help\n");
}

/* *h (a host tensor) moved to device: a copy there, the host one freed (on
 * failure too, *h then NULL); nothing to do on the CPU. */
static kk_status to_device(const char *device, kk_tensor **h) {
    if (strcmp(device, "cpu") == 0) return KK_OK;
    kk_tensor *d = NULL;
    kk_status st = kk_tensor_create(device, (*h)->dtype, (*h)->ndim, (*h)->shape, &d);
    if (st == KK_OK) st = kk_tensor_copy(d, *h);
    kk_tensor_destroy(*h);
    if (st != KK_OK) kk_tensor_destroy(d), d = NULL;
    *h = d;
    return st;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Random hidden states [B,S,hidden] in the decoder's dtype on its device
 * (cli.h: the tensor-parallel CPU ranks draw the same ones). */
kk_status cli_model_random_hidden(const char *device, kk_dtype dtype, int64_t B, int64_t S,
                                  int64_t hidden, uint64_t *rng, kk_tensor **out) {
    const int64_t shape[3] = {B, S, hidden};
    kk_tensor *f = NULL, *h = NULL;
    *out = NULL;
    kk_status st = kk_tensor_create("cpu", KK_DTYPE_F32, 3, shape, &f);
    if (st == KK_OK) {
        float *p = f->data;
        for (int64_t i = 0; i < B * S * hidden; i++) {
            *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
            p[i] = (float)((double)(*rng >> 11) / 9007199254740992.0 * 2 - 1);
        }
        st = kk_tensor_create("cpu", dtype, 3, shape, &h);
    }
    if (st == KK_OK) st = kk_convert(f, h, NULL);
    kk_tensor_destroy(f);
    if (st == KK_OK) st = to_device(device, &h);
    if (st != KK_OK) kk_tensor_destroy(h), h = NULL;
    *out = h;
    return st;
}

/* --input: the prefill's hidden states [B,S,hidden] from a .npy file (f32,
 * bf16 or f16; a 2-byte raw void, what np.save writes for ml_dtypes' bfloat16,
 * is taken as bf16), converted to the decoder's dtype, on its device. */
static int load_input(const char *path, const char *device, kk_dtype dtype, int64_t B, int64_t S,
                      int64_t hidden, kk_tensor **out) {
    char what[1100];
    kk_npy_array a;
    *out = NULL;
    snprintf(what, sizeof what, "--input %s", path);
    if (kk_npy_read_file(path, &a) != KK_OK) return cli_fail("model", what);
    if (a.dtype != KK_DTYPE_F32 && a.dtype != KK_DTYPE_BF16 && a.dtype != KK_DTYPE_F16 &&
        !(a.itemsize == 2 && a.dtype == KK_NPY_DTYPE_NONE && a.descr[1] == 'V' &&
          kk_npy_reinterpret(&a, KK_DTYPE_BF16) == KK_OK)) {
        fprintf(stderr, "kernelkit model: %s: dtype '%s': expected float32, bfloat16 or float16\n",
                what, a.descr);
        kk_npy_free(&a);
        return CLI_FAILED;
    }
    if (a.ndim != 3 || a.shape[0] != B || a.shape[1] != S || a.shape[2] != hidden) {
        char got[160] = "";
        for (int i = 0; i < a.ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "",
                     (long long)a.shape[i]);
        kk_npy_free(&a);
        return cli_usage_error("model",
                               "%s: shape [%s], expected [%lld, %lld, %lld] (--batch, "
                               "--prefill, the model's hidden size)",
                               what, got, (long long)B, (long long)S, (long long)hidden);
    }
    const int64_t shape[3] = {B, S, hidden};
    kk_tensor *h = NULL;
    kk_status st = kk_tensor_create("cpu", dtype, 3, shape, &h);
    if (st == KK_OK) st = kk_convert_host(a.data, a.dtype, h->data, dtype, a.count);
    kk_npy_free(&a);
    if (st == KK_OK) st = to_device(device, &h);
    if (st != KK_OK) {
        kk_tensor_destroy(h);
        return cli_fail("model", what);
    }
    *out = h;
    return CLI_OK;
}

/* --save: y (the decoder's dtype, any device) to a float32 .npy file. */
static int save_output(const char *path, const kk_tensor *y) {
    char what[1100];
    kk_tensor *h = NULL;
    kk_npy_array o;
    int have = 0;
    snprintf(what, sizeof what, "--save %s", path);
    kk_status st = kk_tensor_create("cpu", y->dtype, y->ndim, y->shape, &h);
    if (st == KK_OK) st = kk_tensor_copy(h, y);
    if (st == KK_OK)
        st = kk_npy_array_init(&o, KK_DTYPE_F32, y->ndim, y->shape), have = st == KK_OK;
    if (st == KK_OK) st = kk_convert_host(h->data, y->dtype, o.data, KK_DTYPE_F32, o.count);
    if (st == KK_OK) st = kk_npy_write_file(path, &o);
    kk_tensor_destroy(h);
    if (have) kk_npy_free(&o);
    return st == KK_OK ? CLI_OK : cli_fail("model", what);
}

static int parse_count(const char *opt, const char *text, long lo, long hi, long *out) {
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < lo || v > hi)
        return cli_usage_error("model", "bad %s '%s': expected an integer %ld .. %ld", opt, text,
                               lo, hi);
    *out = v;
    return CLI_OK;
}

/* One call through the decoder with its time and a progress line; the input
 * hidden states `given` (NULL: random ones), the output written to `save`
 * (NULL: not). */
static int timed(kk_decoder *d, const char *device, int64_t B, int64_t S, int64_t hidden,
                 uint64_t *rng, const char *what, double *ms, const kk_tensor *given,
                 const char *save) {
    kk_tensor *x = NULL, *y = NULL;
    kk_status st =
        given ? KK_OK : cli_model_random_hidden(device, kk_decoder_dtype(d), B, S, hidden, rng, &x);
    const kk_tensor *in = given ? given : x;
    if (st == KK_OK) st = kk_tensor_create(device, kk_decoder_dtype(d), 3, in->shape, &y);
    if (st != KK_OK) {
        kk_tensor_destroy(x);
        return cli_fail("model", "making the hidden states");
    }
    const double t0 = now_ms();
    st = S == 1 && kk_decoder_length(d) > 0 ? kk_decoder_step(d, in, y)
                                            : kk_decoder_prefill(d, in, y);
    *ms = now_ms() - t0;
    int rc = st == KK_OK ? CLI_OK : cli_fail("model", what);
    if (rc == CLI_OK && save) rc = save_output(save, y);
    kk_tensor_destroy(x), kk_tensor_destroy(y);
    return rc;
}

static int model_run(int argc, char **argv) {
    static const struct option opts[] = {
        {"level", required_argument, NULL, 'l'},
        {"device", required_argument, NULL, 'd'},
        {"batch", required_argument, NULL, 'b'},
        {"prefill", required_argument, NULL, 'p'},
        {"decode", required_argument, NULL, 'n'},
        {"seed", required_argument, NULL, 's'},
        {"tp", required_argument, NULL, 't'},
        {"no-profile", no_argument, NULL, CLI_MODEL_NO_PROFILE},
        {"no-compare", no_argument, NULL, CLI_MODEL_NO_COMPARE},
        {"ceilings", required_argument, NULL, CLI_MODEL_CEILINGS},
        {"launch-floor-us", required_argument, NULL, CLI_MODEL_FLOOR},
        {"profile-time", required_argument, NULL, CLI_MODEL_BUDGET},
        {"output", required_argument, NULL, CLI_MODEL_OUTPUT},
        {"report", required_argument, NULL, CLI_MODEL_REPORT},
        {"tp-overlap", required_argument, NULL, CLI_MODEL_TP_OVERLAP},
        {"no-graphs", no_argument, NULL, CLI_MODEL_NO_GRAPHS_OPT},
        {"input", required_argument, NULL, CLI_MODEL_INPUT_OPT},
        {"save", required_argument, NULL, CLI_MODEL_SAVE_OPT},
        {NULL, 0, NULL, 0}};
    cli_model_cost cost; /* cmd_model_cost.c */
    cli_model_cost_default(&cost);
    const char *device = "cpu", *input = NULL, *save = NULL;
    kk_opt_level level = KK_OPT_BALANCED;
    long batch = 1, prefill = 16, decode = 4, seed = 1, tp = 1;
    kk_tp_overlap overlap = KK_TP_OVERLAP_AUTO;
    int c, rc = CLI_OK, no_graphs = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":l:d:b:p:n:s:t:", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (kk_opt_level_parse(optarg, &level) != KK_OK)
                return cli_usage_error("model",
                                       "bad --level '%s': expected conservative, "
                                       "balanced or aggressive",
                                       optarg);
            break;
        case 'd': device = optarg; break;
        case 'b': rc = parse_count("--batch", optarg, 1, 65536, &batch); break;
        case 'p': rc = parse_count("--prefill", optarg, 1, 1 << 20, &prefill); break;
        case 'n': rc = parse_count("--decode", optarg, 0, 1 << 20, &decode); break;
        case 's': rc = parse_count("--seed", optarg, 0, 1L << 30, &seed); break;
        case 't': rc = parse_count("--tp", optarg, 1, 64, &tp); break;
        case CLI_MODEL_TP_OVERLAP:
            if (kk_tp_overlap_parse(optarg, &overlap) != KK_OK)
                return cli_usage_error("model", "bad --tp-overlap '%s': expected auto, off or on",
                                       optarg);
            break;
        case CLI_MODEL_NO_GRAPHS_OPT: no_graphs = 1; break;
        case CLI_MODEL_INPUT_OPT: input = optarg; break;
        case CLI_MODEL_SAVE_OPT: save = optarg; break;
        case ':': return cli_usage_error("model", "%s needs a value", argv[optind - 1]);
        default:
            if (cli_model_cost_option(&cost, c, optarg, &rc)) break;
            return cli_usage_error("model", "unknown option '%s'", argv[optind - 1]);
        }
        if (rc != CLI_OK) return rc;
    }
    if (optind >= argc) return cli_usage_error("model", "missing DIR (a model folder)");
    if (optind + 1 < argc)
        return cli_usage_error("model", "unexpected argument '%s'", argv[optind + 1]);
    const char *dir = argv[optind];
    if (tp > 1 && (input || save))
        return cli_usage_error("model", "%s: not with --tp", input ? "--input" : "--save");
    if (cli_tp_launching(tp, device)) return cli_tp_launch("model", (int)tp, device);
    device = cli_tp_device(device); /* a launched rank's own GPU */
    kk_model *m = NULL;
    if (kk_model_open(dir, &m) != KK_OK) return cli_fail("model", dir);
    const int64_t hidden = kk_model_get_config(m)->hidden_size;
    kk_decoder *d = NULL;
    const cli_tp_run run = {batch, prefill, decode, seed, hidden, overlap};
    if (cli_tp_decoder(m, device, level, (int)tp, &run, &d) != KK_OK) {
        rc = cli_fail("model", tp > 1 ? "building the decoder (--tp)" : "building the decoder");
        cli_tp_finish("model"); /* the other ranks first: they read the model */
        kk_model_close(m);
        return rc;
    }
    if (tp == 1) kk_model_close(m); /* the decoder keeps what it needs (TP: the other ranks too) */
    if (no_graphs) (void)kk_decoder_set_graphs(d, 0);
    kk_tensor *given = NULL;
    if (input &&
        (rc = load_input(input, device, kk_decoder_dtype(d), batch, prefill, hidden, &given))) {
        kk_decoder_free(d);
        cli_tp_finish("model");
        return rc;
    }
    printf("Model: %s\n%s\n", dir, kk_decoder_plan_text(d));
    if (tp > 1)
        printf("  overlap of the all-reduces (--tp-overlap): %s\n", kk_tp_overlap_name(overlap));
    if (tp == 1) /* the cost model and profile (a TP rank's calls must stay in step) */
        rc = cli_model_cost_run(d, dir, device, level, batch, prefill, decode, seed, hidden, &cost,
                                argc, argv);
    uint64_t rng = (uint64_t)seed * 2654435761u + 1;
    const int tty = isatty(fileno(stderr));
    double ms = 0, total = 0, first = 0;
    if (rc == CLI_OK)
        rc = timed(d, device, batch, prefill, hidden, &rng, "prefill", &ms, given, save);
    kk_tensor_destroy(given);
    if (rc == CLI_OK)
        printf("prefill  B=%ld S=%ld: %10.3f ms (%.0f tokens/s)\n", batch, prefill, ms,
               batch * prefill / (ms / 1e3));
    for (long i = 0; rc == CLI_OK && i < decode; i++) {
        if (tty) fprintf(stderr, "\rdecode step %ld/%ld ...", i + 1, decode);
        rc = timed(d, device, batch, 1, hidden, &rng, "decode step", &ms, NULL, NULL);
        if (rc != CLI_OK) break;
        total += ms;
        if (i == 0) first = ms;
        if (tty) fprintf(stderr, "\r\033[K");
        printf("decode   step %ld/%ld (position %ld): %10.3f ms\n", i + 1, decode, prefill + i, ms);
    }
    if (rc == CLI_OK && decode > 0)
        printf("decode   mean %.3f ms per step (%.0f tokens/s over the batch)\n", total / decode,
               batch * decode / (total / 1e3));
    if (rc == CLI_OK && decode > 1) /* the first step at a batch size captures the graphs */
        printf("decode   mean of steps 2..%ld: %.3f ms per step (%.0f tokens/s over the batch)\n",
               decode, (total - first) / (decode - 1),
               batch * (decode - 1) / ((total - first) / 1e3));
    kk_decoder_graph_stats gs;
    if (rc == CLI_OK && kk_decoder_graph_stats_get(d, &gs) == KK_OK && (gs.enabled || gs.captures))
        printf("decode   cuda graphs: %lld capture(s), %lld replay(s), %lld eager, %lld "
               "failure(s)\n",
               (long long)gs.captures, (long long)gs.replays, (long long)gs.eager,
               (long long)gs.failures);
    kk_decoder_free(d);
    const int tp_rc = cli_tp_finish("model");
    if (tp > 1) kk_model_close(m);
    return rc != CLI_OK ? rc : tp_rc;
}

const cli_command cli_cmd_model = {
    .name = "model",
    .summary = "run a model's decoder layers (plan, prefill, decode steps, timing)",
    .run = model_run,
    .help = model_help,
};

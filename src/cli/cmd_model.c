/* kernelkit model: open a model folder, build the decoder at a level on a
 * device, print its plan, and run random hidden states through it (a prefill,
 * then decode steps) with the wall-clock time of each call. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define CLI_MODEL_NO_GRAPHS_OPT 1900 /* --no-graphs: above cli.h's CLI_MODEL_* */

static void model_help(FILE *out) {
    fprintf(out, "Usage: kernelkit model DIR [--level L] [--device D] [--batch B] [--prefill N]\n"
                 "                       [--decode N] [--seed S] [--tp N]\n"
                 "                       [--tp-overlap auto|off|on] [--no-profile]\n"
                 "                       [--ceilings FILE] [--launch-floor-us X]\n"
                 "                       [--profile-time S] [--no-compare] [--output FILE]\n"
                 "                       [--report FILE.md] [--no-graphs]\n"
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
    if (st == KK_OK && strcmp(device, "cpu") != 0) {
        kk_tensor *d = NULL;
        st = kk_tensor_create(device, dtype, 3, shape, &d);
        if (st == KK_OK) st = kk_tensor_copy(d, h);
        kk_tensor_destroy(h);
        h = d;
    }
    if (st != KK_OK) kk_tensor_destroy(h), h = NULL;
    *out = h;
    return st;
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

/* One call through the decoder with its time and a progress line. */
static int timed(kk_decoder *d, const char *device, int64_t B, int64_t S, int64_t hidden,
                 uint64_t *rng, const char *what, double *ms) {
    kk_tensor *x = NULL, *y = NULL;
    kk_status st = cli_model_random_hidden(device, kk_decoder_dtype(d), B, S, hidden, rng, &x);
    if (st == KK_OK) st = kk_tensor_create(device, kk_decoder_dtype(d), 3, x->shape, &y);
    if (st != KK_OK) {
        kk_tensor_destroy(x);
        return cli_fail("model", "making the hidden states");
    }
    const double t0 = now_ms();
    st =
        S == 1 && kk_decoder_length(d) > 0 ? kk_decoder_step(d, x, y) : kk_decoder_prefill(d, x, y);
    *ms = now_ms() - t0;
    kk_tensor_destroy(x), kk_tensor_destroy(y);
    if (st != KK_OK) return cli_fail("model", what);
    return CLI_OK;
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
        {NULL, 0, NULL, 0}};
    cli_model_cost cost; /* cmd_model_cost.c */
    cli_model_cost_default(&cost);
    const char *device = "cpu";
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
    printf("Model: %s\n%s\n", dir, kk_decoder_plan_text(d));
    if (tp > 1)
        printf("  overlap of the all-reduces (--tp-overlap): %s\n", kk_tp_overlap_name(overlap));
    if (tp == 1) /* the cost model and profile (a TP rank's calls must stay in step) */
        rc = cli_model_cost_run(d, dir, device, level, batch, prefill, decode, seed, hidden, &cost,
                                argc, argv);
    uint64_t rng = (uint64_t)seed * 2654435761u + 1;
    const int tty = isatty(fileno(stderr));
    double ms = 0, total = 0, first = 0;
    if (rc == CLI_OK) rc = timed(d, device, batch, prefill, hidden, &rng, "prefill", &ms);
    if (rc == CLI_OK)
        printf("prefill  B=%ld S=%ld: %10.3f ms (%.0f tokens/s)\n", batch, prefill, ms,
               batch * prefill / (ms / 1e3));
    for (long i = 0; rc == CLI_OK && i < decode; i++) {
        if (tty) fprintf(stderr, "\rdecode step %ld/%ld ...", i + 1, decode);
        rc = timed(d, device, batch, 1, hidden, &rng, "decode step", &ms);
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

/* kernelkit model: open a model folder, build the decoder at a level on a
 * device, print its plan, and run random hidden states through it (a prefill,
 * then decode steps) with the wall-clock time of each call. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static void model_help(FILE *out) {
    fprintf(out, "Usage: kernelkit model DIR [--level L] [--device D] [--batch B] [--prefill N]\n"
                 "                       [--decode N] [--seed S]\n"
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
                 "  -h, --help        show this help\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Random hidden states [B,S,hidden] in the decoder's dtype on its device. */
static kk_status random_hidden(const char *device, kk_dtype dtype, int64_t B, int64_t S,
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
    kk_status st = random_hidden(device, kk_decoder_dtype(d), B, S, hidden, rng, &x);
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
    static const struct option opts[] = {{"level", required_argument, NULL, 'l'},
                                         {"device", required_argument, NULL, 'd'},
                                         {"batch", required_argument, NULL, 'b'},
                                         {"prefill", required_argument, NULL, 'p'},
                                         {"decode", required_argument, NULL, 'n'},
                                         {"seed", required_argument, NULL, 's'},
                                         {NULL, 0, NULL, 0}};
    const char *device = "cpu";
    kk_opt_level level = KK_OPT_BALANCED;
    long batch = 1, prefill = 16, decode = 4, seed = 1;
    int c, rc = CLI_OK;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":l:d:b:p:n:s:", opts, NULL)) != -1) {
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
        case ':': return cli_usage_error("model", "%s needs a value", argv[optind - 1]);
        default: return cli_usage_error("model", "unknown option '%s'", argv[optind - 1]);
        }
        if (rc != CLI_OK) return rc;
    }
    if (optind >= argc) return cli_usage_error("model", "missing DIR (a model folder)");
    if (optind + 1 < argc)
        return cli_usage_error("model", "unexpected argument '%s'", argv[optind + 1]);
    const char *dir = argv[optind];
    kk_model *m = NULL;
    if (kk_model_open(dir, &m) != KK_OK) return cli_fail("model", dir);
    const int64_t hidden = kk_model_get_config(m)->hidden_size;
    kk_decoder *d = NULL;
    if (kk_decoder_create(m, device, level, (int)batch, (int)(prefill + decode), &d) != KK_OK) {
        kk_model_close(m);
        return cli_fail("model", "building the decoder");
    }
    kk_model_close(m); /* the decoder keeps what it needs */
    printf("Model: %s\n%s\n", dir, kk_decoder_plan_text(d));
    uint64_t rng = (uint64_t)seed * 2654435761u + 1;
    const int tty = isatty(fileno(stderr));
    double ms = 0, total = 0;
    rc = timed(d, device, batch, prefill, hidden, &rng, "prefill", &ms);
    if (rc == CLI_OK)
        printf("prefill  B=%ld S=%ld: %10.3f ms (%.0f tokens/s)\n", batch, prefill, ms,
               batch * prefill / (ms / 1e3));
    for (long i = 0; rc == CLI_OK && i < decode; i++) {
        if (tty) fprintf(stderr, "\rdecode step %ld/%ld ...", i + 1, decode);
        rc = timed(d, device, batch, 1, hidden, &rng, "decode step", &ms);
        if (rc != CLI_OK) break;
        total += ms;
        if (tty) fprintf(stderr, "\r\033[K");
        printf("decode   step %ld/%ld (position %ld): %10.3f ms\n", i + 1, decode, prefill + i, ms);
    }
    if (rc == CLI_OK && decode > 0)
        printf("decode   mean %.3f ms per step (%.0f tokens/s over the batch)\n", total / decode,
               batch * decode / (total / 1e3));
    kk_decoder_free(d);
    return rc;
}

const cli_command cli_cmd_model = {
    .name = "model",
    .summary = "run a model's decoder layers (plan, prefill, decode steps, timing)",
    .run = model_run,
    .help = model_help,
};

/* kernelkit model-info: open a model folder (config.json + safetensors) and
 * print its configuration and tensors, or the first thing wrong with it. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void model_info_help(FILE *out) {
    fprintf(out, "Usage: kernelkit model-info DIR\n"
                 "\n"
                 "Load the Llama-family model in folder DIR (config.json, and\n"
                 "model.safetensors.index.json with its shards or model.safetensors), check\n"
                 "every tensor against the format and the configuration, and print the\n"
                 "configuration and every tensor (name, dtype, shape). Exit 1 with the reason\n"
                 "when the model does not load (docs/model.md).\n"
                 "\n"
                 "Options:\n"
                 "  -h, --help   show this help\n");
}

static void print_config(const kk_model_config *c) {
    printf("Config:\n");
#define ROW(name, fmt, v) printf("  %-26s " fmt "\n", name, v)
    ROW("hidden_size", "%" PRId64, c->hidden_size);
    ROW("intermediate_size", "%" PRId64, c->intermediate_size);
    ROW("num_hidden_layers", "%" PRId64, c->num_hidden_layers);
    ROW("num_attention_heads", "%" PRId64, c->num_attention_heads);
    ROW("num_key_value_heads", "%" PRId64, c->num_key_value_heads);
    ROW("head_dim", "%" PRId64, c->head_dim);
    ROW("vocab_size", "%" PRId64, c->vocab_size);
    ROW("max_position_embeddings", "%" PRId64, c->max_position_embeddings);
    ROW("rms_norm_eps", "%g", c->rms_norm_eps);
    ROW("rope_theta", "%g", c->rope.theta);
    if (c->rope.scaling == KK_ROPE_SCALING_LLAMA3)
        printf("  %-26s llama3 (factor %g, low_freq_factor %g, high_freq_factor %g, "
               "original_max_position_embeddings %" PRId64 ")\n",
               "rope_scaling", c->rope.factor, c->rope.low_freq_factor, c->rope.high_freq_factor,
               c->rope.original_max_position);
    else
        ROW("rope_scaling", "%s", "none");
    ROW("tie_word_embeddings", "%s", c->tie_word_embeddings ? "true" : "false");
    ROW("torch_dtype", "%s", c->torch_dtype_given ? kk_dtype_name(c->torch_dtype) : "(not set)");
#undef ROW
}

static void print_tensors(const kk_model *m) {
    int64_t n = kk_model_tensor_count(m);
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const kk_tensor *t = NULL;
        if (kk_model_tensor_at(m, i, NULL, &t) == KK_OK) total += kk_tensor_nbytes(t);
    }
    char size[32];
    printf("\nTensors: %" PRId64 " (%s)\n", n, cli_format_bytes(total, size, sizeof size));
    for (int64_t i = 0; i < n; i++) {
        const char *name = NULL;
        const kk_tensor *t = NULL;
        if (kk_model_tensor_at(m, i, &name, &t) != KK_OK) continue;
        char shape[160];
        int k = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->ndim && k < (int)sizeof shape; d++)
            k += snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? ", " : "", t->shape[d]);
        if (k < (int)sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
        printf("  %-50s %-8s %s\n", name, kk_dtype_name(t->dtype), shape);
    }
}

static int model_info_run(int argc, char **argv) {
    static const struct option opts[] = {{NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1)
        return cli_usage_error("model-info", "unknown option '%s'", argv[optind - 1]);
    if (optind >= argc) return cli_usage_error("model-info", "missing DIR (a model folder)");
    if (optind + 1 < argc)
        return cli_usage_error("model-info", "unexpected argument '%s'", argv[optind + 1]);
    const char *dir = argv[optind];
    kk_model *m = NULL;
    if (kk_model_open(dir, &m) != KK_OK) return cli_fail("model-info", dir);
    printf("Model: %s\n", dir);
    print_config(kk_model_get_config(m));
    print_tensors(m);
    kk_model_close(m);
    return CLI_OK;
}

const cli_command cli_cmd_model_info = {
    .name = "model-info",
    .summary = "load a model folder (config.json + safetensors) and print it",
    .run = model_info_run,
    .help = model_info_help,
};

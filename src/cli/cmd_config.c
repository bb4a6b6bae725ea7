/* kernelkit config: show the effective configuration, or check a file. */
#include <getopt.h>
#include <stdlib.h>

#include "cli/cli.h"

static void config_help(FILE *out) {
    fprintf(out, "Usage: kernelkit config [--mode MODE] [--level LEVEL] [--validate FILE]\n"
                 "\n"
                 "Print the effective configuration as JSON: the defaults, then KK_MODE and\n"
                 "KK_OPT_LEVEL, then the file named by KK_CONFIG, then the single-value\n"
                 "variables (KK_FP8, KK_TF32, KK_MEMORY_SAFETY_MARGIN, ...; see\n"
                 "docs/configuration.md). The output is a valid configuration file.\n"
                 "\n"
                 "Options:\n"
                 "  --mode MODE       start from a preset: inference, training, development\n"
                 "  --level LEVEL     then apply a level: conservative, balanced, aggressive\n"
                 "  --validate FILE   only check FILE: exit 0 if valid, 1 with the field and\n"
                 "                    the reason if not\n"
                 "  -h, --help        show this help\n");
}

static int config_run(int argc, char **argv) {
    static const struct option opts[] = {
        {"mode", required_argument, NULL, 'm'},
        {"level", required_argument, NULL, 'l'},
        {"validate", required_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    const char *mode = NULL, *level = NULL, *validate = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mode = optarg; break;
        case 'l': level = optarg; break;
        case 'v': validate = optarg; break;
        case ':': return cli_usage_error("config", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("config", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("config", "unexpected argument '%s'", argv[optind]);

    kk_config cfg;
    if (validate) {
        kk_config_init_defaults(&cfg);
        if (kk_config_load_file(validate, &cfg) != KK_OK) return cli_fail("config", validate);
        printf("%s: valid\n", validate);
        return CLI_OK;
    }
    if (kk_config_from_environment(&cfg) != KK_OK) return cli_fail("config", "environment");
    if (mode) {
        kk_config_mode m;
        if (kk_config_mode_parse(mode, &m) != KK_OK)
            return cli_usage_error("config", "bad --mode: %s", kk_last_error_message());
        kk_config_apply_preset(&cfg, m);
    }
    if (level) {
        kk_opt_level l;
        if (kk_opt_level_parse(level, &l) != KK_OK)
            return cli_usage_error("config", "bad --level: %s", kk_last_error_message());
        kk_config_set_level(&cfg, l);
    }
    char *json = NULL;
    if (kk_config_to_json(&cfg, &json) != KK_OK) return cli_fail("config", "to JSON");
    printf("%s\n", json);
    free(json);
    return CLI_OK;
}

const cli_command cli_cmd_config = {
    .name = "config",
    .summary = "print the effective configuration as JSON, or --validate a file",
    .run = config_run,
    .help = config_help,
};

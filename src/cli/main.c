/* kernelkit: entry point and command dispatch. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const cli_command *const k_commands[] = {
    &cli_cmd_info,  &cli_cmd_selftest,   &cli_cmd_config, &cli_cmd_check,
    &cli_cmd_run,   &cli_cmd_compare,    &cli_cmd_report, &cli_cmd_calibrate,
    &cli_cmd_bench, &cli_cmd_model_info, &cli_cmd_model,
};
#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

static void print_usage(FILE *out) {
    fprintf(out, "Usage: kernelkit [--log SPEC] [COMMAND [OPTIONS]]\n"
                 "\n"
                 "Fast, proven-correct transformer kernels for NVIDIA GPUs with a CPU fallback.\n"
                 "With no command, runs the main job ('selftest') on the best device present.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", k_commands[i]->name, k_commands[i]->summary);
    fprintf(out,
            "\n"
            "Options:\n"
            "  -h, --help       show this help (or 'kernelkit COMMAND --help')\n"
            "  -V, --version    show the version and exit\n"
            "      --log SPEC   log levels, as KK_LOG: e.g. 'info' or 'warn,kernelkit.cuda=debug'\n"
            "\n"
            "Environment: KK_LOG, KK_LOG_FORMAT=json, KK_CONFIG and the overrides in\n"
            "docs/configuration.md.\n"
            "Exit status: 0 success, 1 failure, 2 usage error or nothing could run.\n");
}

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(k_commands[i]->name, name) == 0) return k_commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"log", required_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    /* '+': stop at the first non-option, which is the command. */
    int c;
    while ((c = getopt_long(argc, argv, "+:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'h': print_usage(stdout); return CLI_OK;
        case 'V':
            printf("kernelkit %s (commit %s)\n", kk_version(), kk_git_commit());
            return CLI_OK;
        case 'l':
            if (kk_log_configure(optarg) != KK_OK)
                return cli_usage_error(NULL, "bad --log value: %s", kk_last_error_message());
            break;
        case ':': return cli_usage_error(NULL, "option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt) return cli_usage_error(NULL, "unknown option '-%c'", optopt);
            return cli_usage_error(NULL, "unknown option '%s'", argv[optind - 1]);
        }
    }

    if (optind >= argc) {
        char *job[] = {(char *)"selftest", NULL};
        return cli_cmd_selftest.run(1, job);
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        if (optind + 1 >= argc) {
            print_usage(stdout);
            return CLI_OK;
        }
        const cli_command *cmd = find_command(argv[optind + 1]);
        if (!cmd) return cli_usage_error(NULL, "unknown command '%s'", argv[optind + 1]);
        cmd->help(stdout);
        return CLI_OK;
    }
    const cli_command *cmd = find_command(name);
    if (!cmd) return cli_usage_error(NULL, "unknown command '%s'", name);
    if (cli_wants_help(argc - optind, argv + optind)) {
        cmd->help(stdout);
        return CLI_OK;
    }
    int first = optind;
    optind = 0; /* reset getopt for the command's own parsing (glibc: 0 re-initialises) */
    return cmd->run(argc - first, argv + first);
}

/* kernelkit selftest: the main job (`make run`). Detects the devices, proves
 * the best one runs this build's code, and prints a summary. Later issues add
 * the smoke correctness suite and a short benchmark here. */
#include <getopt.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/device_report.h"

static void selftest_help(FILE *out) {
    fprintf(out,
            "Usage: kernelkit selftest [--device DEVICE]\n"
            "\n"
            "The main job, also what 'kernelkit' with no command runs: detect the devices,\n"
            "then on the best device present (or DEVICE) run a kernel of this build and\n"
            "check every element it wrote. Exit 0 when all checks pass, 1 otherwise.\n"
            "\n"
            "Options:\n"
            "  --device DEVICE   cpu, cuda, cuda:N (default: the best device present)\n"
            "  -h, --help        show this help\n");
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int selftest_run(int argc, char **argv) {
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    const char *spec = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            spec = optarg;
            break;
        case ':':
            return cli_usage_error("selftest", "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error("selftest", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("selftest", "unexpected argument '%s'", argv[optind]);

    report_print_build(stdout);
    report_print_backends(stdout);
    if (!spec) spec = kk_device_best();

    kk_device_info d;
    if (kk_device_get_info(spec, &d) != KK_OK) {
        if (kk_last_error()->status == KK_ERR_INVALID_ARGUMENT)
            return cli_usage_error("selftest", "bad --device: %s", kk_last_error_message());
        return cli_fail("selftest", spec);
    }
    printf("\nDevice under test:\n");
    report_print_device(stdout, &d, 1);

    printf("\nChecks on %s:\n", spec);
    double t0 = now_seconds();
    kk_status st = kk_device_selftest(spec);
    double ms = 1e3 * (now_seconds() - t0);
    if (st != KK_OK) {
        printf("  %-28s FAIL  %s\n", "kernel runs and writes", kk_last_error_message());
        printf("\nSummary: 0 passed, 1 failed on %s\n", spec);
        return CLI_FAILED;
    }
    printf("  %-28s PASS  (%.1f ms)\n", "kernel runs and writes", ms);
    printf("\nSummary: 1 passed, 0 failed on %s\n", spec);
    return CLI_OK;
}

const cli_command cli_cmd_selftest = {
    .name = "selftest",
    .summary = "the main job: detect devices and check the best one runs this build",
    .run = selftest_run,
    .help = selftest_help,
};

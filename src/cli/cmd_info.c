/* kernelkit info: the devices, backends and what each supports. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/device_report.h"

static void info_help(FILE *out) {
    fprintf(out, "Usage: kernelkit info [--json] [--device DEVICE]\n"
                 "\n"
                 "Show the build, the backends (and why one is unavailable), every device with\n"
                 "its properties and, for GPUs, live telemetry from NVML.\n"
                 "\n"
                 "Options:\n"
                 "  --json            print one JSON object instead of text\n"
                 "  --device DEVICE   only this device: cpu, cuda, cuda:N\n"
                 "  -h, --help        show this help\n");
}

/* Fill `specs` with the devices to show; returns how many, or -1 on a bad --device. */
static int select_devices(const char *only, char specs[][32], int cap) {
    if (only) {
        kk_backend_kind kind;
        int index;
        if (kk_device_parse(only, &kind, &index) != KK_OK) return -1;
        snprintf(specs[0], 32, "%s", only);
        return 1;
    }
    int n = 0;
    snprintf(specs[n++], 32, "cpu");
    int gpus = kk_backend_device_count(KK_BACKEND_CUDA);
    for (int i = 0; i < gpus && n < cap; i++) snprintf(specs[n++], 32, "cuda:%d", i);
    return n;
}

static int print_json(char specs[][32], int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "build", report_build_json());
    cJSON_AddItemToObject(root, "backends", report_backends_json());
    cJSON *devices = cJSON_AddArrayToObject(root, "devices");
    int rc = CLI_OK;
    for (int i = 0; i < n; i++) {
        kk_device_info d;
        if (kk_device_get_info(specs[i], &d) != KK_OK) {
            rc = cli_fail("info", specs[i]);
            continue;
        }
        cJSON_AddItemToArray(devices, report_device_json(&d, 1));
    }
    cJSON_AddStringToObject(root, "best_device", kk_device_best());
    char *text = cJSON_Print(root);
    if (text) {
        printf("%s\n", text);
        free(text);
    }
    cJSON_Delete(root);
    return rc;
}

static int print_text(char specs[][32], int n) {
    report_print_build(stdout);
    printf("\n");
    report_print_backends(stdout);
    printf("\nDevices:\n");
    int rc = CLI_OK;
    for (int i = 0; i < n; i++) {
        kk_device_info d;
        if (kk_device_get_info(specs[i], &d) != KK_OK) {
            rc = cli_fail("info", specs[i]);
            continue;
        }
        report_print_device(stdout, &d, 1);
    }
    printf("\nBest device: %s\n", kk_device_best());
    return rc;
}

static int info_run(int argc, char **argv) {
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"device", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    int json = 0;
    const char *only = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'd': only = optarg; break;
        case ':': return cli_usage_error("info", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("info", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("info", "unexpected argument '%s'", argv[optind]);

    char specs[64][32];
    int n = select_devices(only, specs, 64);
    if (n < 0) {
        if (kk_last_error()->status == KK_ERR_INVALID_ARGUMENT)
            return cli_usage_error("info", "bad --device: %s", kk_last_error_message());
        return cli_fail("info", "--device");
    }
    return json ? print_json(specs, n) : print_text(specs, n);
}

const cli_command cli_cmd_info = {
    .name = "info",
    .summary = "show devices, backends and what each supports (--json for JSON)",
    .run = info_run,
    .help = info_help,
};

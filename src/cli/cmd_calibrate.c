/* kernelkit calibrate: measure the ceilings of a device and store them. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernelkit/calibrate.h"

static void calibrate_help(FILE *out) {
    fprintf(out, "Usage: kernelkit calibrate [--device DEVICE] [--output FILE] [--quick]\n"
                 "\n"
                 "Measure the ceilings of a device and store them, so that benchmarks can\n"
                 "report shares of them. GPU: device-to-device copy bandwidth (bytes read +\n"
                 "written), read bandwidth, bf16 and fp8 e4m3 GEMM rate through cuBLASLt\n"
                 "(8192^3; unavailable, with the reason, when cuBLASLt cannot be loaded) and\n"
                 "the fp32 FMA rate. CPU: memcpy and read bandwidth and the fp32 rate of one\n"
                 "thread. Each is the median of the benchmark sampler's samples, with its CI.\n"
                 "\n"
                 "Options:\n"
                 "  --device DEVICE   cpu, cuda, cuda:N (default: the best device)\n"
                 "  --output FILE     where to store them (default:\n"
                 "                    $XDG_CACHE_HOME/kernelkit/ceilings-<device name>.json,\n"
                 "                    else ~/.cache/kernelkit/...)\n"
                 "  --quick           smaller buffers and shorter budgets (seconds, rougher)\n"
                 "  -h, --help        show this help\n"
                 "\n"
                 "Exit status: 0 measured and stored, 1 a measurement or the file failed,\n"
                 "2 usage error or the device cannot be used.\n");
}

/* ANCHORS.md figures (one H200, 2026-11-22) for reference; 0 = none. */
static double anchor(const char *device_name, kk_ceiling_kind k) {
    if (!strstr(device_name, "H200")) return 0;
    switch (k) {
    case KK_CEILING_COPY: return 4100;
    case KK_CEILING_BF16: return 801;
    case KK_CEILING_FP8: return 1317;
    default: return 0;
    }
}

static void print_table(const kk_calibration *cal, const char *path) {
    printf("Ceilings of %s (%s)%s\n", cal->device, cal->device_name, cal->quick ? ", quick" : "");
    if (cal->driver_version[0] || cal->sm_clock_mhz)
        printf("driver %s, SM clock %d MHz (max %d), memory clock %d MHz\n",
               cal->driver_version[0] ? cal->driver_version : "?", cal->sm_clock_mhz,
               cal->sm_clock_max_mhz, cal->mem_clock_mhz);
    printf("\n%-15s %12s  %-8s %-23s %10s  %s\n", "ceiling", "value", "unit", "95% CI", "anchor",
           "method");
    for (int i = 0; i < KK_CEILING_COUNT; i++) {
        const kk_ceiling *c = &cal->ceilings[i];
        const char *name = kk_ceiling_name((kk_ceiling_kind)i);
        const char *unit = kk_ceiling_unit((kk_ceiling_kind)i);
        double a = anchor(cal->device_name, (kk_ceiling_kind)i);
        char anc[32] = "-";
        if (a > 0) snprintf(anc, sizeof anc, "%.0f", a);
        if (!c->available) {
            printf("%-15s %12s  %-8s %-23s %10s  unavailable: %s\n", name, "-", unit, "", anc,
                   c->reason);
            continue;
        }
        char ci[64];
        snprintf(ci, sizeof ci, "[%.4g, %.4g]", c->value_ci_low, c->value_ci_high);
        printf("%-15s %12.4g  %-8s %-23s %10s  %s\n", name, c->value, unit, ci, anc, c->method);
    }
    if (strstr(cal->device_name, "H200"))
        printf("\nanchor: /work/shared/ANCHORS.md, one H200 (copy = bytes read + written)\n");
    printf("\nStored in %s\n", path);
}

static int calibrate_run(int argc, char **argv) {
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"output", required_argument, NULL, 'o'},
        {"quick", no_argument, NULL, 'q'},
        {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *output = NULL;
    kk_calibrate_options o;
    kk_calibrate_options_default(&o);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'o': output = optarg; break;
        case 'q': o.quick = 1; break;
        case ':':
            return cli_usage_error("calibrate", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("calibrate", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("calibrate", "unexpected argument '%s'", argv[optind]);
    if (output && !output[0]) return cli_usage_error("calibrate", "--output is empty");
    if (!device) device = kk_device_best();
    kk_backend_kind kind;
    int index;
    if (kk_device_parse(device, &kind, &index) != KK_OK)
        return cli_usage_error("calibrate", "bad --device: %s", kk_last_error_message());

    kk_calibration *cal = malloc(sizeof *cal);
    if (!cal) {
        fprintf(stderr, "kernelkit calibrate: out of memory\n");
        return CLI_FAILED;
    }
    int rc = CLI_OK;
    kk_status st = kk_calibrate(device, &o, cal);
    if (st) {
        rc = cli_fail("calibrate", device);
        if (kk_status_is(st, KK_ERR_CUDA_UNAVAILABLE) || st == KK_ERR_INVALID_ARGUMENT)
            rc = CLI_USAGE;
        goto done;
    }
    char path[4096];
    if (output) {
        snprintf(path, sizeof path, "%s", output);
    } else if (kk_calibration_default_path(cal->device_name, path, sizeof path) != KK_OK) {
        rc = cli_fail("calibrate", "default path (use --output)");
        goto done;
    }
    if (kk_calibration_write_file(cal, path) != KK_OK) {
        rc = cli_fail("calibrate", path);
        goto done;
    }
    print_table(cal, path);
done:
    free(cal);
    return rc;
}

const cli_command cli_cmd_calibrate = {
    .name = "calibrate",
    .summary = "measure and store the device's ceilings (bandwidth, GEMM and FMA rate)",
    .run = calibrate_run,
    .help = calibrate_help,
};

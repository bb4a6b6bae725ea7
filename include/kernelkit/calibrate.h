/* Calibration: measure the ceilings of a device (copy and read bandwidth, bf16
 * and fp8 matrix rate, fp32 FMA rate), store them in a JSON file and load them
 * back into a kk_bench_ceilings, so benchmarks can report shares of them.
 *
 *   kk_calibration cal;
 *   kk_calibrate_options o;
 *   kk_calibrate_options_default(&o);       // o.quick = 1 for a fast, rougher run
 *   if (kk_calibrate("cuda:0", &o, &cal) == KK_OK) {
 *       char path[4096];
 *       kk_calibration_default_path(cal.device_name, path, sizeof path);
 *       kk_calibration_write_file(&cal, path);
 *   }
 *   kk_bench_ceilings c;
 *   kk_status st = kk_ceilings_load("cuda:0", NULL, &c); // KK_ERR_IO: none stored
 *
 * docs/harness.md ("kernelkit calibrate") describes what is measured and the
 * schema "kernelkit.ceilings/1". Nothing prints, aborts or exits. */
#ifndef KERNELKIT_CALIBRATE_H
#define KERNELKIT_CALIBRATE_H

#include <stddef.h>

#include "kernelkit/bench.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KK_CEILINGS_SCHEMA "kernelkit.ceilings/1"
#define KK_CEILINGS_MAX_FILE_BYTES ((size_t)1 << 20) /* larger files are refused */

typedef enum kk_ceiling_kind {
    KK_CEILING_COPY = 0, /* "copy_gbs": bytes read + written per second, GB/s */
    KK_CEILING_READ,     /* "read_gbs": bytes read per second, GB/s */
    KK_CEILING_BF16,     /* "bf16_tflops": bf16 GEMM through cuBLASLt, TFLOP/s */
    KK_CEILING_FP8,      /* "fp8_tflops": fp8 e4m3 GEMM through cuBLASLt, TFLOP/s */
    KK_CEILING_FP32,     /* "fp32_tflops": fp32 FMA (2 FLOP each), TFLOP/s */
    KK_CEILING_AMX_BF16, /* "amx_bf16_tflops": CPU AMX tiles, bf16 products, TFLOP/s */
    KK_CEILING_COUNT
} kk_ceiling_kind;

/* "copy_gbs", ... (the JSON key and kk_bench_ceilings field); "?" out of range. */
KK_API const char *kk_ceiling_name(kk_ceiling_kind kind);
/* "GB/s" or "TFLOP/s". */
KK_API const char *kk_ceiling_unit(kk_ceiling_kind kind);

typedef struct kk_ceiling {
    int available;    /* 1: measured; 0: see reason */
    char reason[256]; /* why not available ("" when available) */
    char method[64];  /* "cudaMemcpyAsync", "copy kernel", "cuBLASLt 8192^3", ... */
    double value;     /* in kk_ceiling_unit: work / median time */
    double value_ci_low, value_ci_high; /* from the median's 95% bootstrap CI */
    double median_s;                    /* median seconds per run */
    double median_ci_low_s, median_ci_high_s;
    double work;              /* bytes or FLOP per run */
    size_t samples;           /* samples kept */
    double sm_clock_mean_mhz; /* GPU: mean SM clock over the samples; 0 = unknown */
} kk_ceiling;

typedef struct kk_calibration {
    char device[32];         /* "cpu", "cuda:0" */
    char device_name[256];   /* "NVIDIA H200", the CPU model */
    char driver_version[64]; /* "" on the CPU or when unknown */
    int sm_clock_mhz;        /* GPU clocks read at the end of the run; 0 = unknown */
    int sm_clock_max_mhz;
    int mem_clock_mhz;
    char timestamp_utc[32]; /* "2026-11-22T12:34:56Z" */
    char kk_version[32];
    int quick; /* 1: measured with --quick */
    kk_ceiling ceilings[KK_CEILING_COUNT];
} kk_calibration;

typedef struct kk_calibrate_options {
    int quick;            /* smaller buffers, shorter budgets, looser RSE; 0 */
    double time_budget_s; /* per ceiling; 0 = 6 s (quick: 1 s) */
} kk_calibrate_options;

KK_API void kk_calibrate_options_default(kk_calibrate_options *o);

/* Measure every ceiling of `device` ("cpu", "cuda", "cuda:N"); opt NULL = defaults.
 * A ceiling that cannot be measured (no cuBLASLt, fp8 on a GPU without it, or
 * not applicable: bf16/fp8 on the CPU) has available = 0 and a reason, and the
 * call still returns KK_OK. Errors: KK_ERR_INVALID_ARGUMENT (bad device),
 * KK_ERR_CUDA_UNAVAILABLE, KK_ERR_OUT_OF_MEMORY, KK_ERR_DEVICE_FAILURE,
 * KK_ERR_KERNEL_LAUNCH (a copy/read/FMA measurement failed). */
KK_API kk_status kk_calibrate(const char *device, const kk_calibrate_options *opt,
                              kk_calibration *out);

/* The shares' view: available values, 0 for the others. */
KK_API void kk_calibration_to_ceilings(const kk_calibration *cal, kk_bench_ceilings *out);

/* "$XDG_CACHE_HOME/kernelkit/ceilings-<name>.json" (XDG_CACHE_HOME must be an
 * absolute path to count), else "$HOME/.cache/kernelkit/...". <name> is
 * device_name with every character outside [A-Za-z0-9._-] replaced by '_'.
 * KK_ERR_IO when neither variable is usable; KK_ERR_INVALID_ARGUMENT when
 * `size` is too small. */
KK_API kk_status kk_calibration_default_path(const char *device_name, char *buf, size_t size);

/* JSON text (malloc'd; release with free()). */
KK_API kk_status kk_calibration_to_json(const kk_calibration *cal, char **text);
/* Parse: KK_ERR_IO for text that is not a valid "kernelkit.ceilings/1"
 * document (argument = the field), KK_ERR_UNSUPPORTED for another version. */
KK_API kk_status kk_calibration_from_json(const char *text, size_t len, kk_calibration *out);
/* Write atomically (temporary file renamed over `path`), creating the parent
 * directories. */
KK_API kk_status kk_calibration_write_file(const kk_calibration *cal, const char *path);
/* Read a file: KK_ERR_IO when it does not exist (last error's argument "path",
 * message "no ceilings stored ..."), is unreadable, over
 * KK_CEILINGS_MAX_FILE_BYTES or invalid; KK_ERR_UNSUPPORTED as above. */
KK_API kk_status kk_calibration_read_file(const char *path, kk_calibration *out);

/* Load the stored ceilings of `device` from `path` (NULL: the default path for
 * the device's name) into `out` (zeroed first). When none are stored the status
 * is KK_ERR_IO and kk_last_error()->argument is "path" with the message
 * "no ceilings stored for '<name>' (<path>): run kernelkit calibrate". A file
 * measured on another device (device_name differs) is KK_ERR_INVALID_ARGUMENT. */
KK_API kk_status kk_ceilings_load(const char *device, const char *path, kk_bench_ceilings *out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_CALIBRATE_H */

/* Benchmarks: the sampler that times one piece of work on a device, the
 * environment a result was measured in, and the results file.
 *
 *   kk_bench_options o;
 *   kk_bench_options_default(&o);            // nvbench's rules: RSE 0.5%, 15 s budget
 *   kk_bench_measurement m;
 *   if (kk_bench_measure("cuda:0", run_once, &job, &o, &m) != KK_OK)
 *       puts(kk_last_error_message());
 *   kk_bench_environment env;
 *   kk_bench_environment_capture("cuda:0", argc, argv, switches, nswitches, &env);
 *   kk_bench_results *r;
 *   kk_bench_results_create(&env, &r);
 *   kk_bench_results_add(r, &spec, &m);       // copies; computes the summary
 *   kk_bench_results_write_file(r, "out.json");
 *
 * docs/harness-results.md describes the measurement method (what is timed,
 * warm-up, L2 flush, graph batches, adaptive stop, throttle drop) and every
 * field of the JSON schema "kernelkit.bench/1". Every function returns KK_OK or
 * an error recorded in kk_last_error(); nothing prints, aborts or exits. */
#ifndef KERNELKIT_BENCH_H
#define KERNELKIT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/device.h"
#include "kernelkit/memory.h"
#include "kernelkit/stats.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the sampler ---- */

/* One run of the work. On "cuda:N" it enqueues the work asynchronously on
 * `stream` (a cudaStream_t) and returns without synchronizing; device N is
 * current on the calling thread. On "cpu" it does the work synchronously and
 * `stream` is NULL. Any status other than KK_OK stops the measurement and is
 * returned by kk_bench_measure (record the detail with kk_last_error first). */
typedef kk_status (*kk_bench_fn)(void *ctx, kk_stream stream);

#define KK_BENCH_MAX_BATCH 10000            /* runs per sample at most */
#define KK_BENCH_MAX_SAMPLES_LIMIT 10000000 /* largest max_samples accepted */

/* How a cold sample empties the caches (docs/harness-results.md, "L2 flush").
 * WRITE is GPU MODE's rule: write the flush buffer (cudaMemsetAsync; memset on
 * the CPU). It leaves the cache full of dirty lines, whose write-back then
 * lands inside the next timed sample. READ sweeps a buffer of 2x the cache
 * with a read kernel (plain loads on the CPU): the cache ends full of clean
 * lines, and dirty lines (the previous sample's outputs) are written back
 * during the flush, outside the timed region. */
typedef enum kk_bench_flush {
    KK_BENCH_FLUSH_WRITE = 0, /* "write" (default) */
    KK_BENCH_FLUSH_READ = 1,  /* "read" */
    KK_BENCH_FLUSH_COUNT
} kk_bench_flush;

/* "write", "read" ("?" out of range); parse takes exactly those names. */
KK_API const char *kk_bench_flush_name(kk_bench_flush mode);
KK_API kk_status kk_bench_flush_parse(const char *name, kk_bench_flush *out);

typedef struct kk_bench_options {
    double rse_target;        /* stop when the median's bootstrap RSE is under this; 0.005;
                           * 0 = never stop on RSE (budget or max_samples ends it) */
    size_t min_samples;       /* kept samples before the RSE may stop it; 10 */
    size_t max_samples;       /* stop after this many kept samples; 100000 */
    double min_time_s;        /* sampled (timed) seconds before the RSE may stop it; 0.5 */
    double time_budget_s;     /* wall seconds for the whole measurement, warm-up included; 15 */
    size_t warmup_runs;       /* at least this many untimed-for-results runs first; 3 (>= 1) */
    double warmup_time_s;     /* ...and at least this long; 0.05 */
    size_t batch;             /* runs per sample: 0 = auto (below), N >= 1 = always N */
    double batch_threshold_s; /* auto: batch when one run takes less; 20e-6 (0 = never) */
    double batch_target_s;    /* auto: N so that one sample takes at least this; 200e-6 */
    int cold;                 /* flush caches before every sample: -1 = auto (GPU yes unless
                           * batched, CPU no), 0 = no, 1 = yes (then batch must be 0 or 1,
                           * and auto batching is off) */
    uint64_t flush_bytes;     /* bytes of the flush buffer; 0 = auto (GPU: its L2 size with
                           * KK_BENCH_FLUSH_WRITE, 2x its L2 size with KK_BENCH_FLUSH_READ;
                           * CPU: 2x the last-level cache, at most 256 MiB, 32 MiB
                           * if unknown) */
    int flush_mode;           /* how a cold sample flushes (a kk_bench_flush):
                           * KK_BENCH_FLUSH_WRITE (0, the default) or KK_BENCH_FLUSH_READ */
    double throttle_fraction; /* GPU: drop samples whose SM clock reads under this
                               * share of its maximum; 0.75; 0 = never drop */
    int pin_cpu;              /* pin the calling thread to this CPU while measuring; -1 = no */
    size_t check_every;       /* RSE checked every max(check_every, n/8) samples; 10 */
    int rse_resamples;        /* bootstrap resamples of the RSE check; 0 = KK_STATS_RSE_RESAMPLES */
    uint64_t seed;            /* of the RSE check; KK_STATS_DEFAULT_SEED */
    int blocking_kernel;      /* GPU: hold the stream with a spinning kernel while the work is
                           * enqueued, so launch overhead is not timed; 1 */
    kk_stream stream;         /* GPU: stream to run on; NULL = a new non-blocking stream */
} kk_bench_options;

KK_API void kk_bench_options_default(kk_bench_options *o);

/* KK_ERR_INVALID_ARGUMENT naming the field ("options.rse_target") when any
 * option is out of range. */
KK_API kk_status kk_bench_options_validate(const kk_bench_options *o);

typedef enum kk_bench_stop {
    KK_BENCH_STOP_NONE = 0,    /* not measured */
    KK_BENCH_STOP_RSE,         /* "rse": the target was reached */
    KK_BENCH_STOP_TIME_BUDGET, /* "time_budget" */
    KK_BENCH_STOP_MAX_SAMPLES, /* "max_samples" */
    KK_BENCH_STOP_COUNT
} kk_bench_stop;

/* "rse", "time_budget", "max_samples" ("none" for NONE, "?" out of range). */
KK_API const char *kk_bench_stop_name(kk_bench_stop stop);
KK_API kk_status kk_bench_stop_parse(const char *name, kk_bench_stop *out);

typedef struct kk_bench_measurement {
    char device[32];         /* "cpu", "cuda:0" */
    double *samples;         /* seconds per run, in the order taken (owned) */
    size_t n;                /* samples kept */
    size_t warmup_runs;      /* runs done before sampling (batch warm-up included) */
    size_t dropped_throttle; /* samples dropped because the SM clock read low */
    size_t batch;            /* runs per sample (1, or N of a graph/loop batch) */
    int cold;                /* 1: caches flushed before every sample */
    uint64_t flush_bytes;    /* bytes of the flush buffer (0 when hot) */
    int flush_mode;          /* kk_bench_flush of the flushes (options.flush_mode);
                               * it says how the flush was done only when cold */
    int blocking_kernel;     /* GPU: 1 when the stream was held while enqueuing */
    kk_bench_stop stop;
    double final_rse;         /* bootstrap RSE of the median of the kept samples */
    double sampled_time_s;    /* timed seconds of the kept samples (sample * batch) */
    double wall_time_s;       /* the whole measurement, warm-up included */
    int pinned_cpu;           /* CPU the thread was pinned to, -1 when not */
    int throttle_detection;   /* 1: the SM clock was read after every sample */
    char throttle_note[192];  /* why not, when throttle_detection is 0 */
    int sm_clock_min_mhz;     /* lowest SM clock read after a kept sample; 0 = none */
    double sm_clock_mean_mhz; /* their mean; 0 = none */
    kk_gpu_telemetry telemetry_start, telemetry_end; /* available = 0 on the CPU */
    kk_bench_options options;                        /* as used (stream NULL) */
} kk_bench_measurement;

/* Time `fn` on `device` ("cpu", "cuda", "cuda:N") under `opt` (NULL = defaults)
 * and fill `out`, which owns its samples until kk_bench_measurement_free.
 * See docs/harness-results.md for the method. On "cuda:N" the calling thread's
 * current device is N while measuring and is set back afterwards. On failure
 * `out` holds no samples; errors are those of the callback, invalid options,
 * KK_ERR_CUDA_UNAVAILABLE, KK_ERR_KERNEL_LAUNCH (with the CUDA error name),
 * KK_ERR_DEVICE_FAILURE (every sample throttled, a CUDA call failed). */
KK_API kk_status kk_bench_measure(const char *device, kk_bench_fn fn, void *ctx,
                                  const kk_bench_options *opt, kk_bench_measurement *out);

/* Free the samples and zero the struct. NULL is a no-op. */
KK_API void kk_bench_measurement_free(kk_bench_measurement *m);

/* ---- the environment ---- */

#define KK_BENCH_MAX_SWITCHES 32

/* A determinism switch the caller reports: {"tf32", "off"}, {"seed", "42"}. */
typedef struct kk_bench_switch {
    char name[64];
    char value[128];
} kk_bench_switch;

typedef struct kk_bench_environment {
    /* the device */
    char device[32]; /* "cpu", "cuda:0" */
    int device_index;
    char device_name[256];  /* "NVIDIA H100 80GB HBM3", or the CPU model */
    int cc_major, cc_minor; /* 0 on the CPU */
    int sm_count;
    uint64_t l2_bytes, mem_total_bytes;
    int sm_clock_max_mhz, mem_clock_max_mhz;
    char pci_bus_id[32];
    char driver_version[64];  /* NVIDIA driver; "" when none */
    int cuda_runtime_version; /* 13000 = 13.0; 0 when none */
    int cuda_driver_version;  /* CUDA version the driver supports; 0 when none */
    /* the host */
    char cpu_model[256];
    char cpu_governor[64]; /* scaling_governor of cpu0, "unknown" when unreadable */
    char cpu_simd[256];    /* kk_cpu_features_str of the host; "" in older files */
    char cpu_isa[32];      /* kk_cpu_isa(): the CPU kernels' level; "" in older files */
    char hostname[256];
    char os[512]; /* uname: "Linux 6.8.0-45-generic #45 SMP ... x86_64" */
    /* the build */
    char kk_version[32];
    char git_commit[64];
    char build_cuda[32]; /* CUDA toolkit of the build; "" without CUDA */
    /* the run */
    char timestamp_utc[32]; /* "2025-06-01T12:34:56Z" */
    int argc;
    char **argv; /* owned copies */
    int nswitches;
    kk_bench_switch switches[KK_BENCH_MAX_SWITCHES];
} kk_bench_environment;

/* Capture everything above for `device`. argv may be NULL when argc is 0;
 * switches may be NULL when nswitches is 0. Free with kk_bench_environment_free. */
KK_API kk_status kk_bench_environment_capture(const char *device, int argc, const char *const *argv,
                                              const kk_bench_switch *switches, int nswitches,
                                              kk_bench_environment *out);

/* Deep copy (dst is overwritten, not freed). */
KK_API kk_status kk_bench_environment_copy(kk_bench_environment *dst,
                                           const kk_bench_environment *src);
KK_API void kk_bench_environment_free(kk_bench_environment *env);

/* ---- results ---- */

#define KK_BENCH_SCHEMA "kernelkit.bench/1"
#define KK_BENCH_MAX_PARAMS 32
#define KK_BENCH_MAX_FILE_BYTES ((size_t)1 << 30) /* larger files are refused */

/* Measured ceilings of a device (kernelkit calibrate); 0 = unknown. */
typedef struct kk_bench_ceilings {
    double copy_gbs, read_gbs;
    double bf16_tflops, fp8_tflops, fp32_tflops;
} kk_bench_ceilings;

typedef enum kk_bench_param_kind {
    KK_BENCH_PARAM_NUMBER = 0,
    KK_BENCH_PARAM_STRING,
    KK_BENCH_PARAM_BOOL
} kk_bench_param_kind;

/* One op parameter: "M": 128, "causal": true, "act": "gelu_tanh". */
typedef struct kk_bench_param {
    char name[32];
    kk_bench_param_kind kind;
    double number;   /* NUMBER: finite */
    int boolean;     /* BOOL: 0 or 1 */
    char string[64]; /* STRING */
} kk_bench_param;

/* What the caller says about one benchmark. */
typedef struct kk_bench_spec {
    const char *name;  /* unique in the document, non-empty: "gemm/M=4096,N=4096,K=4096" */
    const char *op;    /* "gemm"; may be "" */
    const char *dtype; /* "bf16"; may be "" */
    const kk_bench_param *params;
    int nparams;
    double flops;     /* per run; 0 = unknown */
    double bytes;     /* per run; 0 = unknown */
    double threshold; /* relative threshold for compare; 0 = compare's default */
    int resamples;    /* of the summary's bootstrap; 0 = KK_STATS_DEFAULT_RESAMPLES */
    uint64_t seed;    /* of the summary's bootstrap; 0 = KK_STATS_DEFAULT_SEED */
} kk_bench_spec;

typedef struct kk_bench_entry {
    char name[256];
    char op[32];
    char dtype[16];
    char device[32];
    int nparams;
    kk_bench_param params[KK_BENCH_MAX_PARAMS];
    double flops, bytes, threshold;
    kk_bench_measurement m;   /* samples included */
    kk_stats_summary summary; /* of m.samples */
    double tflops, gbs;       /* flops / median / 1e12, bytes / median / 1e9; 0 if unknown */
    /* Shares of the document's ceilings; -1 when unknown (no ceiling, or no
     * flops/bytes). The TFLOP/s ceiling is chosen by dtype (tflops_ceiling). */
    char tflops_ceiling[16]; /* "bf16_tflops", "fp8_tflops", "fp32_tflops" or "" */
    double share_tflops, share_copy_gbs, share_read_gbs;
} kk_bench_entry;

typedef struct kk_bench_results {
    kk_bench_environment env;
    int has_ceilings;
    kk_bench_ceilings ceilings;
    size_t count;
    kk_bench_entry *entries;
    size_t capacity; /* internal */
} kk_bench_results;

/* A new document with a copy of `env`. Free with kk_bench_results_free. */
KK_API kk_status kk_bench_results_create(const kk_bench_environment *env, kk_bench_results **out);
KK_API void kk_bench_results_free(kk_bench_results *r);

/* Set the ceilings (NULL: none) and recompute every entry's shares. */
KK_API kk_status kk_bench_results_set_ceilings(kk_bench_results *r, const kk_bench_ceilings *c);

/* Append a benchmark: copies spec and m (samples included), computes the
 * summary, throughput and shares. m must have at least one sample. */
KK_API kk_status kk_bench_results_add(kk_bench_results *r, const kk_bench_spec *spec,
                                      const kk_bench_measurement *m);

/* The entry named `name`, or NULL. */
KK_API const kk_bench_entry *kk_bench_results_find(const kk_bench_results *r, const char *name);

/* JSON text (malloc'd, NUL-terminated; release with free()). */
KK_API kk_status kk_bench_results_to_json(const kk_bench_results *r, char **text);
/* Write atomically (a temporary file renamed over `path`). */
KK_API kk_status kk_bench_results_write_file(const kk_bench_results *r, const char *path);

/* Parse a document. Errors: KK_ERR_IO for text that is not a valid
 * "kernelkit.bench/1" document (argument = the field path, e.g.
 * "benchmarks[2].samples[7]"), KK_ERR_UNSUPPORTED for another version of the
 * schema, KK_ERR_OUT_OF_MEMORY. */
KK_API kk_status kk_bench_results_from_json(const char *text, size_t len, kk_bench_results **out);
KK_API kk_status kk_bench_results_read_file(const char *path, kk_bench_results **out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_BENCH_H */

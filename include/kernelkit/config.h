/* KernelKit configuration: a plain struct the caller reads and fills, presets
 * and optimization levels, validation, JSON files and environment overrides.
 *
 *   kk_config cfg;
 *   kk_status st = kk_config_from_environment(&cfg); // defaults + KK_CONFIG + KK_* vars
 *   if (st != KK_OK) fprintf(stderr, "%s\n", kk_last_error_message());
 *
 * Precedence, lowest first: defaults < preset (KK_MODE) / level (KK_OPT_LEVEL)
 * < the KK_CONFIG file < the individual KK_* variables. docs/configuration.md
 * lists every field, its default and what each preset and level sets.
 *
 * Every function that takes a kk_config* to fill is atomic: when it fails the
 * struct is left exactly as it was, and kk_last_error() says why (for a bad
 * field, argument = the field path such as "memory.safety_margin", value = the
 * offending value, expected = what is accepted). */
#ifndef KERNELKIT_CONFIG_H
#define KERNELKIT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernelkit/device.h"
#include "kernelkit/log.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits ---- */

#define KK_CONFIG_MAX_KERNEL_OPS 32 /* entries in kernels.ops */
#define KK_CONFIG_OP_NAME_MAX 32    /* bytes of an op name, NUL included */
#define KK_CONFIG_MAX_THREADS 4096  /* hardware.cpu.num_threads */
#define KK_CONFIG_SAFETY_MARGIN_MIN 1.0
#define KK_CONFIG_SAFETY_MARGIN_MAX 10.0
/* Byte counts stop at 2^53 - 1 so that every value is exact in JSON. */
#define KK_CONFIG_MAX_BYTES UINT64_C(9007199254740991)
#define KK_CONFIG_MAX_FILE_BYTES (1024 * 1024) /* larger files are rejected */

/* ---- enums ---- */

/* How much numerical freedom kernels get (see docs/configuration.md). */
typedef enum kk_opt_level {
    KK_OPT_CONSERVATIVE = 0, /* deterministic, no TF32, no FP8, margin 1.5 */
    KK_OPT_BALANCED = 1,     /* default: TF32 on, FP8 off, margin 1.2 */
    KK_OPT_AGGRESSIVE = 2,   /* TF32 and FP8 on (FP8 where the GPU has it), margin 1.1 */
    KK_OPT_LEVEL_COUNT
} kk_opt_level;

/* Presets for what the process is doing. */
typedef enum kk_config_mode {
    KK_CONFIG_MODE_INFERENCE = 0, /* default */
    KK_CONFIG_MODE_TRAINING = 1,
    KK_CONFIG_MODE_DEVELOPMENT = 2,
    KK_CONFIG_MODE_COUNT
} kk_config_mode;

/* Which implementation an op should use. */
typedef enum kk_kernel_impl {
    KK_KERNEL_IMPL_AUTO = 0, /* best available: CUDA when usable, else CPU */
    KK_KERNEL_IMPL_CUDA = 1,
    KK_KERNEL_IMPL_CPU = 2,
    KK_KERNEL_IMPL_COUNT
} kk_kernel_impl;

/* ---- the configuration ---- */

typedef struct kk_nvidia_config {
    kk_arch architecture; /* KK_ARCH_UNKNOWN = "auto": use what the device reports */
    bool fp8_enabled;     /* allow FP8 kernels (used only on GPUs that have FP8) */
    bool tf32_allowed;    /* allow TF32 tensor-core math for FP32 matmuls */
    bool deterministic;   /* bitwise reproducible results (may be slower) */
} kk_nvidia_config;

typedef struct kk_cpu_config {
    int num_threads; /* 0 = auto (one per core); at most KK_CONFIG_MAX_THREADS */
} kk_cpu_config;

/* One section per vendor; more vendors get their own section later. */
typedef struct kk_hardware_config {
    kk_nvidia_config nvidia;
    kk_cpu_config cpu;
} kk_hardware_config;

typedef struct kk_memory_config {
    double safety_margin;      /* estimated need is multiplied by this; 1.0 .. 10.0 */
    uint64_t pool_limit_bytes; /* all pools together; 0 = unlimited */
    uint64_t max_pool_bytes;   /* any single pool; 0 = unlimited; <= pool_limit_bytes */
    bool caching_enabled;      /* keep freed blocks for reuse */
} kk_memory_config;

typedef struct kk_kernel_choice {
    char op[KK_CONFIG_OP_NAME_MAX]; /* "attention": [a-z][a-z0-9_]*, at most 31 chars */
    kk_kernel_impl impl;
} kk_kernel_choice;

typedef struct kk_kernels_config {
    bool enabled; /* false: no tuned kernels; every op runs its reference implementation */
    size_t op_count;
    kk_kernel_choice ops[KK_CONFIG_MAX_KERNEL_OPS]; /* ops not listed are "auto" */
} kk_kernels_config;

typedef struct kk_debug_config {
    bool checks;            /* extra input/output checks in ops (NaN/Inf, bounds); slower */
    kk_log_level log_level; /* applied by kk_config_apply_logging */
} kk_debug_config;

typedef struct kk_config {
    kk_config_mode mode; /* last preset applied */
    kk_opt_level level;  /* last optimization level applied */
    kk_hardware_config hardware;
    kk_memory_config memory;
    kk_kernels_config kernels;
    kk_debug_config debug;
} kk_config;

/* ---- defaults, presets, levels ---- */

/* The defaults: the inference preset at the balanced level. Never fails. */
KK_API void kk_config_init_defaults(kk_config *cfg);

/* Set the fields the preset controls (its level included) and cfg->mode;
 * every other field is kept. */
KK_API kk_status kk_config_apply_preset(kk_config *cfg, kk_config_mode mode);

/* Set the fields the level controls and cfg->level; every other field is kept. */
KK_API kk_status kk_config_set_level(kk_config *cfg, kk_opt_level level);

/* ---- validation ---- */

/* KK_OK, or KK_ERR_CONFIG for the first bad field: kk_last_error()->argument
 * is its path ("memory.safety_margin"), value the bad value, expected the
 * accepted range, and the message reads like
 * "kk_config_validate: memory.safety_margin: 0.5 is below 1.0". */
KK_API kk_status kk_config_validate(const kk_config *cfg);

/* ---- JSON ---- */

/* Apply a JSON document on top of *cfg. Omitted keys keep their values; a
 * "mode" or "optimization_level" key applies that preset/level first, then the
 * document's other keys; "kernels.ops", when present, replaces the whole table.
 * Unknown keys, wrong types, out-of-range numbers, documents over
 * KK_CONFIG_MAX_FILE_BYTES, and a result that fails kk_config_validate all give
 * KK_ERR_CONFIG and leave *cfg unchanged. */
KK_API kk_status kk_config_load_string(const char *json, kk_config *cfg);

/* Same for a file; an unreadable file gives KK_ERR_IO. */
KK_API kk_status kk_config_load_file(const char *path, kk_config *cfg);

/* The whole config (every field) as indented JSON. On success *out is a
 * NUL-terminated string the caller releases with free(). An invalid config
 * gives KK_ERR_CONFIG and *out = NULL. */
KK_API kk_status kk_config_to_json(const kk_config *cfg, char **out);

/* Write kk_config_to_json's text to `path`, replacing it atomically (a
 * temporary file in the same folder is renamed over it). */
KK_API kk_status kk_config_save_file(const kk_config *cfg, const char *path);

/* ---- environment ---- */

/* Apply KK_MODE and KK_OPT_LEVEL (in that order), then KK_ARCH, KK_FP8, KK_TF32,
 * KK_DETERMINISTIC, KK_MEMORY_SAFETY_MARGIN, KK_NUM_THREADS, KK_CACHING on top
 * of *cfg. Unset or empty variables are skipped; KK_CONFIG is not read here.
 * A bad value gives KK_ERR_CONFIG with argument = the variable's name. */
KK_API kk_status kk_config_apply_env(kk_config *cfg);

/* Defaults, then KK_MODE / KK_OPT_LEVEL, then the KK_CONFIG file (if set),
 * then the individual variables. */
KK_API kk_status kk_config_from_environment(kk_config *cfg);

/* ---- kernels.ops ---- */

/* Set the implementation for `op`, adding an entry when it has none.
 * A bad op name, a bad impl, or a full table gives KK_ERR_CONFIG. */
KK_API kk_status kk_config_set_kernel(kk_config *cfg, const char *op, kk_kernel_impl impl);

/* The implementation configured for `op`; KK_KERNEL_IMPL_AUTO when none is. */
KK_API kk_kernel_impl kk_config_get_kernel(const kk_config *cfg, const char *op);

/* ---- logging ---- */

/* Set the "kernelkit" loggers to cfg->debug.log_level, unless the KK_LOG
 * environment variable is set (it wins). */
KK_API kk_status kk_config_apply_logging(const kk_config *cfg);

/* ---- names ---- */

/* "conservative", "balanced", "aggressive"; "?" for anything else. */
KK_API const char *kk_opt_level_name(kk_opt_level level);
/* "inference", "training", "development"; "?" for anything else. */
KK_API const char *kk_config_mode_name(kk_config_mode mode);
/* "auto", "cuda", "cpu"; "?" for anything else. */
KK_API const char *kk_kernel_impl_name(kk_kernel_impl impl);

/* Parse a name (any case). An unknown name gives KK_ERR_INVALID_ARGUMENT
 * listing the accepted names; *out is unchanged then. */
KK_API kk_status kk_opt_level_parse(const char *text, kk_opt_level *out);
KK_API kk_status kk_config_mode_parse(const char *text, kk_config_mode *out);
KK_API kk_status kk_kernel_impl_parse(const char *text, kk_kernel_impl *out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_CONFIG_H */

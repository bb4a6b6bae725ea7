/* Configuration validation: the first bad field, with its path, value and range. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/config_internal.h"

/* Context threaded through the checks so every message names the entry point
 * and, when loading, the file or variable the values came from. */
typedef struct check_ctx {
    const char *function;
    const char *source;
} check_ctx;

#define FAIL(ctx, path, value, expected, ...)                                                      \
    kk__config_fail((ctx)->function, (ctx)->source, (path), (value), (expected), __VA_ARGS__)

static kk_status check_enums(const kk_config *cfg, const check_ctx *ctx) {
    char v[32];
    if ((int)cfg->mode < 0 || cfg->mode >= KK_CONFIG_MODE_COUNT) {
        snprintf(v, sizeof v, "%d", (int)cfg->mode);
        return FAIL(ctx, "mode", v, "inference, training or development",
                    "%s is not a kk_config_mode", v);
    }
    if ((int)cfg->level < 0 || cfg->level >= KK_OPT_LEVEL_COUNT) {
        snprintf(v, sizeof v, "%d", (int)cfg->level);
        return FAIL(ctx, "optimization_level", v, "conservative, balanced or aggressive",
                    "%s is not a kk_opt_level", v);
    }
    return KK_OK;
}

static kk_status check_hardware(const kk_hardware_config *hw, const check_ctx *ctx) {
    char v[32], archs[256];
    if ((int)hw->nvidia.architecture < 0 || hw->nvidia.architecture >= KK_ARCH_COUNT) {
        snprintf(v, sizeof v, "%d", (int)hw->nvidia.architecture);
        return FAIL(ctx, "hardware.nvidia.architecture", v,
                    kk__config_arch_expected(archs, sizeof archs), "%s is not a kk_arch", v);
    }
    int n = hw->cpu.num_threads;
    snprintf(v, sizeof v, "%d", n);
    if (n < 0)
        return FAIL(ctx, "hardware.cpu.num_threads", v, "0 (auto) to 4096", "%s is below 0", v);
    if (n > KK_CONFIG_MAX_THREADS)
        return FAIL(ctx, "hardware.cpu.num_threads", v, "0 (auto) to 4096", "%s is above %d", v,
                    KK_CONFIG_MAX_THREADS);
    return KK_OK;
}

static kk_status check_bytes(const char *path, uint64_t bytes, const check_ctx *ctx) {
    char v[32];
    if (bytes <= KK_CONFIG_MAX_BYTES) return KK_OK;
    snprintf(v, sizeof v, "%" PRIu64, bytes);
    return FAIL(ctx, path, v, "0 (unlimited) to 9007199254740991 (2^53 - 1)",
                "%s is above 9007199254740991 (2^53 - 1)", v);
}

static kk_status check_memory(const kk_memory_config *m, const check_ctx *ctx) {
    char v[64], lim[32];
    const char *range = "1.0 to 10.0";
    kk__config_format_double(v, sizeof v, m->safety_margin);
    if (!isfinite(m->safety_margin))
        return FAIL(ctx, "memory.safety_margin", v, range, "%s is not a finite number", v);
    if (m->safety_margin < KK_CONFIG_SAFETY_MARGIN_MIN)
        return FAIL(ctx, "memory.safety_margin", v, range, "%s is below 1.0", v);
    if (m->safety_margin > KK_CONFIG_SAFETY_MARGIN_MAX)
        return FAIL(ctx, "memory.safety_margin", v, range, "%s is above 10.0", v);

    kk_status st = check_bytes("memory.pool_limit_bytes", m->pool_limit_bytes, ctx);
    if (!st) st = check_bytes("memory.max_pool_bytes", m->max_pool_bytes, ctx);
    if (st) return st;
    /* One pool cannot be allowed more than all pools together. */
    if (m->pool_limit_bytes && m->max_pool_bytes > m->pool_limit_bytes) {
        snprintf(v, sizeof v, "%" PRIu64, m->max_pool_bytes);
        snprintf(lim, sizeof lim, "%" PRIu64, m->pool_limit_bytes);
        char expected[80];
        snprintf(expected, sizeof expected, "at most memory.pool_limit_bytes (%s)", lim);
        return FAIL(ctx, "memory.max_pool_bytes", v, expected,
                    "%s is above memory.pool_limit_bytes (%s)", v, lim);
    }
    return KK_OK;
}

/* One entry of kernels.ops: a NUL-terminated valid name and a known impl. */
static kk_status check_op(const kk_kernels_config *k, size_t i, const check_ctx *ctx) {
    const kk_kernel_choice *c = &k->ops[i];
    char path[96], shown[48], v[32];
    snprintf(path, sizeof path, "kernels.ops[%zu]", i);
    if (!memchr(c->op, 0, sizeof c->op))
        return FAIL(ctx, path, "(not NUL-terminated)", "an op name of at most 31 characters",
                    "op name is not NUL-terminated");
    if (!kk__config_op_name_ok(c->op)) {
        kk__config_printable(shown, sizeof shown, c->op);
        return FAIL(ctx, path, shown, "a-z, 0-9 and _, starting with a letter",
                    "\"%s\" is not a valid op name", shown);
    }
    snprintf(path, sizeof path, "kernels.ops.%s", c->op);
    if ((int)c->impl < 0 || c->impl >= KK_KERNEL_IMPL_COUNT) {
        snprintf(v, sizeof v, "%d", (int)c->impl);
        return FAIL(ctx, path, v, "auto, cuda or cpu", "%s is not a kk_kernel_impl", v);
    }
    for (size_t j = 0; j < i; j++)
        if (strcmp(k->ops[j].op, c->op) == 0)
            return FAIL(ctx, path, c->op, "each op at most once",
                        "\"%s\" is listed twice (entries %zu and %zu)", c->op, j, i);
    return KK_OK;
}

static kk_status check_kernels(const kk_kernels_config *k, const check_ctx *ctx) {
    char v[32];
    if (k->op_count > KK_CONFIG_MAX_KERNEL_OPS) {
        snprintf(v, sizeof v, "%zu", k->op_count);
        return FAIL(ctx, "kernels.ops", v, "at most 32 entries", "%s entries is above 32", v);
    }
    for (size_t i = 0; i < k->op_count; i++) {
        kk_status st = check_op(k, i, ctx);
        if (st) return st;
    }
    return KK_OK;
}

static kk_status check_debug(const kk_debug_config *d, const check_ctx *ctx) {
    char v[32];
    if ((int)d->log_level < KK_LOG_OFF || d->log_level > KK_LOG_TRACE) {
        snprintf(v, sizeof v, "%d", (int)d->log_level);
        return FAIL(ctx, "debug.log_level", v, "off, error, warn, info, debug or trace",
                    "%s is not a kk_log_level", v);
    }
    return KK_OK;
}

kk_status kk__config_check(const kk_config *cfg, const char *function, const char *source) {
    const check_ctx ctx = {function, source};
    kk_status st = check_enums(cfg, &ctx);
    if (!st) st = check_hardware(&cfg->hardware, &ctx);
    if (!st) st = check_memory(&cfg->memory, &ctx);
    if (!st) st = check_kernels(&cfg->kernels, &ctx);
    if (!st) st = check_debug(&cfg->debug, &ctx);
    return st;
}

kk_status kk_config_validate(const kk_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    return kk__config_check(cfg, __func__, NULL);
}

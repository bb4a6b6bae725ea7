/* Configuration: defaults, presets, optimization levels, names, the op table. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config_internal.h"

static const char *const k_level_names[KK_OPT_LEVEL_COUNT] = {
    [KK_OPT_CONSERVATIVE] = "conservative",
    [KK_OPT_BALANCED] = "balanced",
    [KK_OPT_AGGRESSIVE] = "aggressive",
};

static const char *const k_mode_names[KK_CONFIG_MODE_COUNT] = {
    [KK_CONFIG_MODE_INFERENCE] = "inference",
    [KK_CONFIG_MODE_TRAINING] = "training",
    [KK_CONFIG_MODE_DEVELOPMENT] = "development",
};

static const char *const k_impl_names[KK_KERNEL_IMPL_COUNT] = {
    [KK_KERNEL_IMPL_AUTO] = "auto",
    [KK_KERNEL_IMPL_CUDA] = "cuda",
    [KK_KERNEL_IMPL_CPU] = "cpu",
};

/* ---- optimization levels: one row per level, the table in the docs ---- */

typedef struct level_row {
    bool tf32_allowed;
    bool fp8_enabled;
    bool deterministic;
    double safety_margin;
} level_row;

static const level_row k_levels[KK_OPT_LEVEL_COUNT] = {
    [KK_OPT_CONSERVATIVE] = {false, false, true, 1.5},
    [KK_OPT_BALANCED] = {true, false, false, 1.2},
    [KK_OPT_AGGRESSIVE] = {true, true, false, 1.1},
};

static void apply_level(kk_config *cfg, kk_opt_level level) {
    const level_row *row = &k_levels[level];
    cfg->level = level;
    cfg->hardware.nvidia.tf32_allowed = row->tf32_allowed;
    cfg->hardware.nvidia.fp8_enabled = row->fp8_enabled;
    cfg->hardware.nvidia.deterministic = row->deterministic;
    cfg->memory.safety_margin = row->safety_margin;
}

/* ---- presets: a level plus the settings that follow from the use ---- */

static void apply_preset(kk_config *cfg, kk_config_mode mode) {
    cfg->mode = mode;
    cfg->kernels.enabled = true;
    switch (mode) {
    case KK_CONFIG_MODE_TRAINING:
        apply_level(cfg, KK_OPT_BALANCED);
        /* Reproducible runs; FP8 training needs scaling recipes we do not apply. */
        cfg->hardware.nvidia.deterministic = true;
        cfg->hardware.nvidia.fp8_enabled = false;
        cfg->memory.safety_margin = 1.5; /* activations and gradients spike */
        cfg->memory.caching_enabled = true;
        cfg->debug.checks = false;
        cfg->debug.log_level = KK_LOG_WARN;
        break;
    case KK_CONFIG_MODE_DEVELOPMENT:
        apply_level(cfg, KK_OPT_CONSERVATIVE);
        /* No caching, so use-after-free and leaks show up at once. */
        cfg->memory.caching_enabled = false;
        cfg->debug.checks = true;
        cfg->debug.log_level = KK_LOG_DEBUG;
        break;
    case KK_CONFIG_MODE_INFERENCE:
    default:
        apply_level(cfg, KK_OPT_BALANCED);
        cfg->memory.caching_enabled = true;
        cfg->debug.checks = false;
        cfg->debug.log_level = KK_LOG_WARN;
        break;
    }
}

void kk_config_init_defaults(kk_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->hardware.nvidia.architecture = KK_ARCH_UNKNOWN; /* auto */
    cfg->hardware.cpu.num_threads = 0;                   /* auto */
    cfg->memory.pool_limit_bytes = 0;                    /* unlimited */
    cfg->memory.max_pool_bytes = 0;
    cfg->kernels.op_count = 0;
    apply_preset(cfg, KK_CONFIG_MODE_INFERENCE);
}

kk_status kk_config_apply_preset(kk_config *cfg, kk_config_mode mode) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    if ((int)mode < 0 || mode >= KK_CONFIG_MODE_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "mode",
                             "inference, training or development", "%d", (int)mode);
    apply_preset(cfg, mode);
    return KK_OK;
}

kk_status kk_config_set_level(kk_config *cfg, kk_opt_level level) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    if ((int)level < 0 || level >= KK_OPT_LEVEL_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "level",
                             "conservative, balanced or aggressive", "%d", (int)level);
    apply_level(cfg, level);
    return KK_OK;
}

/* ---- names ---- */

const char *kk_opt_level_name(kk_opt_level level) {
    return (int)level >= 0 && level < KK_OPT_LEVEL_COUNT ? k_level_names[level] : "?";
}

const char *kk_config_mode_name(kk_config_mode mode) {
    return (int)mode >= 0 && mode < KK_CONFIG_MODE_COUNT ? k_mode_names[mode] : "?";
}

const char *kk_kernel_impl_name(kk_kernel_impl impl) {
    return (int)impl >= 0 && impl < KK_KERNEL_IMPL_COUNT ? k_impl_names[impl] : "?";
}

/* Index of `text` in `names` (any case), or -1. */
static int find_name(const char *const *names, int count, const char *text) {
    for (int i = 0; text && i < count; i++)
        if (strcasecmp(text, names[i]) == 0) return i;
    return -1;
}

static kk_status parse_name(const char *function, const char *const *names, int count,
                            const char *expected, const char *text, int *out) {
    char shown[80];
    int i = find_name(names, count, text);
    if (i >= 0) {
        *out = i;
        return KK_OK;
    }
    kk__config_printable(shown, sizeof shown, text);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, function, "text", expected,
                         text ? "\"%s\"" : "%s", text ? shown : "NULL");
}

kk_status kk_opt_level_parse(const char *text, kk_opt_level *out) {
    int i = 0;
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (!st)
        st = parse_name(__func__, k_level_names, KK_OPT_LEVEL_COUNT,
                        "conservative, balanced or aggressive", text, &i);
    if (!st) *out = (kk_opt_level)i;
    return st;
}

kk_status kk_config_mode_parse(const char *text, kk_config_mode *out) {
    int i = 0;
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (!st)
        st = parse_name(__func__, k_mode_names, KK_CONFIG_MODE_COUNT,
                        "inference, training or development", text, &i);
    if (!st) *out = (kk_config_mode)i;
    return st;
}

kk_status kk_kernel_impl_parse(const char *text, kk_kernel_impl *out) {
    int i = 0;
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (!st)
        st =
            parse_name(__func__, k_impl_names, KK_KERNEL_IMPL_COUNT, "auto, cuda or cpu", text, &i);
    if (!st) *out = (kk_kernel_impl)i;
    return st;
}

/* ---- architecture override ---- */

int kk__config_arch_from_text(const char *text, kk_arch *out) {
    if (!text) return -1;
    if (strcasecmp(text, "auto") == 0) {
        *out = KK_ARCH_UNKNOWN;
        return 0;
    }
    /* "unknown" would also mean auto; accept one spelling only. */
    for (int a = KK_ARCH_UNKNOWN + 1; a < KK_ARCH_COUNT; a++) {
        if (strcasecmp(text, kk_arch_name((kk_arch)a)) == 0) {
            *out = (kk_arch)a;
            return 0;
        }
    }
    return -1;
}

const char *kk__config_arch_text(kk_arch arch) {
    return arch == KK_ARCH_UNKNOWN ? "auto" : kk_arch_name(arch);
}

const char *kk__config_arch_expected(char *buf, size_t size) {
    /* Built from kk_arch_name so a new family appears without an edit here. */
    size_t used = (size_t)snprintf(buf, size, "auto");
    for (int a = KK_ARCH_UNKNOWN + 1; a < KK_ARCH_COUNT && used < size; a++) {
        int n = snprintf(buf + used, size - used, ", %s", kk_arch_name((kk_arch)a));
        if (n < 0) break;
        used += (size_t)n;
    }
    return buf;
}

/* ---- kernels.ops ---- */

int kk__config_op_name_ok(const char *op) {
    size_t n = op ? strlen(op) : 0;
    if (n == 0 || n >= KK_CONFIG_OP_NAME_MAX) return 0;
    if (op[0] < 'a' || op[0] > 'z') return 0;
    for (size_t i = 1; i < n; i++) {
        char c = op[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

/* Index of `op` in the table, or -1. */
static int find_op(const kk_kernels_config *k, const char *op) {
    size_t n = k->op_count <= KK_CONFIG_MAX_KERNEL_OPS ? k->op_count : KK_CONFIG_MAX_KERNEL_OPS;
    for (size_t i = 0; i < n; i++)
        if (strncmp(k->ops[i].op, op, KK_CONFIG_OP_NAME_MAX) == 0) return (int)i;
    return -1;
}

kk_status kk_config_set_kernel(kk_config *cfg, const char *op, kk_kernel_impl impl) {
    char shown[80];
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (!st) st = KK__CHECK_NOT_NULL(op);
    if (st) return st;
    if (!kk__config_op_name_ok(op)) {
        kk__config_printable(shown, sizeof shown, op);
        return kk__config_fail(__func__, NULL, "kernels.ops", shown,
                               "an op name: a-z, 0-9 and _, starting with a letter, at most 31",
                               "\"%s\" is not a valid op name", shown);
    }
    if ((int)impl < 0 || impl >= KK_KERNEL_IMPL_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "impl", "auto, cuda or cpu", "%d",
                             (int)impl);
    int i = find_op(&cfg->kernels, op);
    kk_kernel_choice *slot = i >= 0 ? &cfg->kernels.ops[i] : NULL;
    if (!slot) {
        if (cfg->kernels.op_count >= KK_CONFIG_MAX_KERNEL_OPS)
            return kk__config_fail(__func__, NULL, "kernels.ops", op, "at most 32 entries",
                                   "table is full (32 entries); cannot add \"%s\"", op);
        slot = &cfg->kernels.ops[cfg->kernels.op_count++];
        memset(slot->op, 0, sizeof slot->op);
        memcpy(slot->op, op, strlen(op));
    }
    slot->impl = impl;
    return KK_OK;
}

kk_kernel_impl kk_config_get_kernel(const kk_config *cfg, const char *op) {
    if (!cfg || !op) return KK_KERNEL_IMPL_AUTO;
    int i = find_op(&cfg->kernels, op);
    if (i < 0) return KK_KERNEL_IMPL_AUTO;
    kk_kernel_impl impl = cfg->kernels.ops[i].impl;
    return (int)impl >= 0 && impl < KK_KERNEL_IMPL_COUNT ? impl : KK_KERNEL_IMPL_AUTO;
}

/* ---- logging ---- */

kk_status kk_config_apply_logging(const kk_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    if ((int)cfg->debug.log_level < KK_LOG_OFF || cfg->debug.log_level > KK_LOG_TRACE)
        return kk__config_fail(__func__, NULL, "debug.log_level", NULL,
                               "off, error, warn, info, debug or trace", "%d is not a log level",
                               (int)cfg->debug.log_level);
    const char *env = getenv("KK_LOG");
    if (env && *env) return KK_OK; /* the user's explicit KK_LOG wins */
    return kk_log_set_level("kernelkit", cfg->debug.log_level);
}

/* ---- error helpers ---- */

kk_status kk__config_fail(const char *function, const char *source, const char *path,
                          const char *value, const char *expected, const char *fmt, ...) {
    char body[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    int has_source = source && *source, has_path = path && *path;
    return kk__set_error(KK_ERR_CONFIG, function, path, value, expected, NULL, "%.300s%s%.200s%s%s",
                         has_source ? source : "", has_source ? ": " : "", has_path ? path : "",
                         has_path ? ": " : "", body);
}

void kk__config_printable(char *dst, size_t size, const char *text) {
    if (!size) return;
    if (!text) text = "";
    size_t n = strlen(text), cut = size - 1, i;
    if (n > cut && cut > 3) cut -= 3; /* room for "..." */
    for (i = 0; i < n && i < cut; i++) {
        unsigned char c = (unsigned char)text[i];
        dst[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    if (n > i && size > 4) {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = 0;
}

void kk__config_format_double(char *dst, size_t size, double d) {
    if (!dst || size == 0) return; /* also tells gcc's -Wformat-truncation dst is valid */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(dst, size, "%.*g", digits, d);
        if (strtod(dst, NULL) == d) return;
    }
}

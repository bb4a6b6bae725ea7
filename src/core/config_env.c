/* Configuration from environment variables.
 * Order: KK_MODE, KK_OPT_LEVEL, [KK_CONFIG file], then the per-field variables. */
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config_internal.h"
#include "core/log_internal.h"

typedef enum env_kind { E_BOOL, E_ARCH, E_MARGIN, E_THREADS } env_kind;

typedef struct env_var {
    const char *name;
    env_kind kind;
    size_t offset; /* from the start of kk_config */
} env_var;

#define AT(member) offsetof(kk_config, member)

static const env_var k_vars[] = {
    {"KK_ARCH", E_ARCH, AT(hardware.nvidia.architecture)},
    {"KK_FP8", E_BOOL, AT(hardware.nvidia.fp8_enabled)},
    {"KK_TF32", E_BOOL, AT(hardware.nvidia.tf32_allowed)},
    {"KK_DETERMINISTIC", E_BOOL, AT(hardware.nvidia.deterministic)},
    {"KK_MEMORY_SAFETY_MARGIN", E_MARGIN, AT(memory.safety_margin)},
    {"KK_NUM_THREADS", E_THREADS, AT(hardware.cpu.num_threads)},
    {"KK_CACHING", E_BOOL, AT(memory.caching_enabled)},
};

#define VAR_PTR(cfg, v, type) ((type *)(void *)((char *)(cfg) + (v)->offset))

/* The variable's value, or NULL when unset or empty (an empty export is
 * treated as "not set", the usual shell convention). */
static const char *env_value(const char *name) {
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

/* KK_ERR_CONFIG with argument = the variable, value = its text. */
static kk_status env_fail(const char *function, const char *name, const char *text,
                          const char *expected, const char *why) {
    char shown[96];
    kk__config_printable(shown, sizeof shown, text);
    return kk__set_error(KK_ERR_CONFIG, function, name, shown, expected, NULL,
                         "%s=%s: %s; expected %s", name, shown, why, expected);
}

static int parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = true, 0;
        if (strcasecmp(s, no[i]) == 0) return *out = false, 0;
    }
    return -1;
}

/* strtod in the "C" locale: "1.5" must parse even when the application set a
 * locale whose decimal point is a comma. */
static int parse_double(const char *s, double *out) {
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!c_locale) return -1;
    char *end = NULL;
    errno = 0;
    double d = strtod_l(s, &end, c_locale);
    freelocale(c_locale);
    if (end == s || *end || errno == ERANGE) return -1;
    *out = d;
    return 0;
}

static kk_status apply_margin(const char *function, const env_var *v, const char *s,
                              kk_config *cfg) {
    const char *range = "a number from 1.0 to 10.0";
    double d = 0;
    if (parse_double(s, &d) || !isfinite(d))
        return env_fail(function, v->name, s, range, "not a number");
    if (d < KK_CONFIG_SAFETY_MARGIN_MIN) return env_fail(function, v->name, s, range, "below 1.0");
    if (d > KK_CONFIG_SAFETY_MARGIN_MAX) return env_fail(function, v->name, s, range, "above 10.0");
    *VAR_PTR(cfg, v, double) = d;
    return KK_OK;
}

static kk_status apply_threads(const char *function, const env_var *v, const char *s,
                               kk_config *cfg) {
    const char *range = "an integer from 0 (auto) to 4096";
    char *end = NULL;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (end == s || *end) return env_fail(function, v->name, s, range, "not an integer");
    if (n < 0) return env_fail(function, v->name, s, range, "negative");
    if (errno == ERANGE || n > KK_CONFIG_MAX_THREADS)
        return env_fail(function, v->name, s, range, "above 4096");
    *VAR_PTR(cfg, v, int) = (int)n;
    return KK_OK;
}

static kk_status apply_var(const char *function, const env_var *v, const char *s, kk_config *cfg) {
    char archs[256];
    switch (v->kind) {
    case E_BOOL:
        if (parse_bool(s, VAR_PTR(cfg, v, bool)))
            return env_fail(function, v->name, s, "1/0, true/false, yes/no or on/off",
                            "not a boolean");
        return KK_OK;
    case E_ARCH:
        if (kk__config_arch_from_text(s, VAR_PTR(cfg, v, kk_arch)))
            return env_fail(function, v->name, s, kk__config_arch_expected(archs, sizeof archs),
                            "unknown architecture");
        return KK_OK;
    case E_MARGIN: return apply_margin(function, v, s, cfg);
    case E_THREADS:
    default: return apply_threads(function, v, s, cfg);
    }
}

kk_status kk__config_env_presets(kk_config *cfg, const char *function) {
    const char *mode_text = env_value("KK_MODE");
    const char *level_text = env_value("KK_OPT_LEVEL");
    kk_config_mode mode = KK_CONFIG_MODE_INFERENCE;
    kk_opt_level level = KK_OPT_BALANCED;
    if (mode_text && kk_config_mode_parse(mode_text, &mode))
        return env_fail(function, "KK_MODE", mode_text, "inference, training or development",
                        "unknown mode");
    if (level_text && kk_opt_level_parse(level_text, &level))
        return env_fail(function, "KK_OPT_LEVEL", level_text,
                        "conservative, balanced or aggressive", "unknown level");
    if (mode_text) kk_config_apply_preset(cfg, mode);
    if (level_text) kk_config_set_level(cfg, level);
    return KK_OK;
}

kk_status kk__config_env_fields(kk_config *cfg, const char *function) {
    for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++) {
        const char *s = env_value(k_vars[i].name);
        if (!s) continue;
        kk_status st = apply_var(function, &k_vars[i], s, cfg);
        if (st) return st;
        KK_LOG(KK_LOG_DEBUG, KK__CONFIG_LOGGER, "environment override",
               KK_F_STR("var", k_vars[i].name), KK_F_STR("value", s));
    }
    return KK_OK;
}

kk_status kk_config_apply_env(kk_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    kk_config tmp = *cfg; /* atomic: *cfg changes only on success */
    st = kk__config_env_presets(&tmp, __func__);
    if (!st) st = kk__config_env_fields(&tmp, __func__);
    if (!st) st = kk__config_check(&tmp, __func__, NULL);
    if (!st) *cfg = tmp;
    return st;
}

kk_status kk_config_from_environment(kk_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    kk_config tmp;
    kk_config_init_defaults(&tmp);
    st = kk__config_env_presets(&tmp, __func__);
    const char *path = env_value("KK_CONFIG");
    if (!st && path) {
        st = kk__config_load_path(path, &tmp, __func__, "KK_CONFIG");
        if (!st)
            KK_LOG(KK_LOG_DEBUG, KK__CONFIG_LOGGER, "config file applied", KK_F_STR("path", path),
                   KK_F_STR("from", "KK_CONFIG"));
    }
    if (!st) st = kk__config_env_fields(&tmp, __func__);
    if (!st) st = kk__config_check(&tmp, __func__, NULL);
    if (!st) *cfg = tmp;
    return st;
}

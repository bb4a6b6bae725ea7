/* labels: unit cpu */
/* Configuration: defaults, levels and presets as documented, validation of
 * every field, exact JSON round trips, environment overrides and precedence,
 * and hostile files that must fail cleanly and leave the config unchanged. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA KK_TEST_DATA_DIR "/config/"

static const char *const k_env_vars[] = {
    "KK_CONFIG",      "KK_MODE",    "KK_OPT_LEVEL",     "KK_ARCH",
    "KK_FP8",         "KK_TF32",    "KK_DETERMINISTIC", "KK_MEMORY_SAFETY_MARGIN",
    "KK_NUM_THREADS", "KK_CACHING",
};

static int clear_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_env_vars / sizeof k_env_vars[0]; i++) unsetenv(k_env_vars[i]);
    return 0;
}

/* ---- helpers ---- */

/* Every field, one by one: memcmp would compare padding and bytes after the
 * NUL of op names. */
static void assert_config_equal(const kk_config *a, const kk_config *b) {
    assert_int_equal(a->mode, b->mode);
    assert_int_equal(a->level, b->level);
    assert_int_equal(a->hardware.nvidia.architecture, b->hardware.nvidia.architecture);
    assert_int_equal(a->hardware.nvidia.fp8_enabled, b->hardware.nvidia.fp8_enabled);
    assert_int_equal(a->hardware.nvidia.tf32_allowed, b->hardware.nvidia.tf32_allowed);
    assert_int_equal(a->hardware.nvidia.deterministic, b->hardware.nvidia.deterministic);
    assert_int_equal(a->hardware.cpu.num_threads, b->hardware.cpu.num_threads);
    /* Bit-exact, not approximately equal: the round trip must be exact. */
    assert_memory_equal(&a->memory.safety_margin, &b->memory.safety_margin, sizeof(double));
    assert_true(a->memory.pool_limit_bytes == b->memory.pool_limit_bytes);
    assert_true(a->memory.max_pool_bytes == b->memory.max_pool_bytes);
    assert_int_equal(a->memory.caching_enabled, b->memory.caching_enabled);
    assert_int_equal(a->kernels.enabled, b->kernels.enabled);
    assert_int_equal(a->kernels.op_count, b->kernels.op_count);
    for (size_t i = 0; i < a->kernels.op_count && i < KK_CONFIG_MAX_KERNEL_OPS; i++) {
        assert_string_equal(a->kernels.ops[i].op, b->kernels.ops[i].op);
        assert_int_equal(a->kernels.ops[i].impl, b->kernels.ops[i].impl);
    }
    assert_int_equal(a->debug.checks, b->debug.checks);
    assert_int_equal(a->debug.log_level, b->debug.log_level);
}

/* A valid config where every field differs from its default. */
static void make_custom(kk_config *c) {
    kk_config_init_defaults(c);
    c->mode = KK_CONFIG_MODE_DEVELOPMENT;
    c->level = KK_OPT_AGGRESSIVE;
    c->hardware.nvidia.architecture = KK_ARCH_BLACKWELL;
    c->hardware.nvidia.fp8_enabled = true;
    c->hardware.nvidia.tf32_allowed = false;
    c->hardware.nvidia.deterministic = true;
    c->hardware.cpu.num_threads = 37;
    c->memory.safety_margin = 1.0000000000000002; /* next double after 1.0 */
    c->memory.pool_limit_bytes = KK_CONFIG_MAX_BYTES;
    c->memory.max_pool_bytes = (UINT64_C(1) << 40) + 12345;
    c->memory.caching_enabled = false;
    c->kernels.enabled = false;
    assert_int_equal(kk_config_set_kernel(c, "attention", KK_KERNEL_IMPL_CUDA), KK_OK);
    assert_int_equal(kk_config_set_kernel(c, "rms_norm", KK_KERNEL_IMPL_CPU), KK_OK);
    assert_int_equal(kk_config_set_kernel(c, "matmul2", KK_KERNEL_IMPL_AUTO), KK_OK);
    c->debug.checks = true;
    c->debug.log_level = KK_LOG_TRACE;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    return buf;
}

/* Write bytes to a fresh temporary file; the caller unlinks it. */
static void temp_file(const void *data, size_t len, char *path, size_t size) {
    const char *p = kk_test_write_temp((const char *)data, len);
    assert_non_null(p);
    snprintf(path, size, "%s", p);
}

static void temp_path(char *path, size_t size, const char *name) {
    snprintf(path, size, "/tmp/kk_test_config_%ld_%s", (long)getpid(), name);
}

/* ---- defaults, levels, presets ---- */

static void defaults_are_valid_and_as_documented(void **state) {
    (void)state;
    kk_config c;
    memset(&c, 0xA5, sizeof c);
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_validate(&c));
    assert_int_equal(c.mode, KK_CONFIG_MODE_INFERENCE);
    assert_int_equal(c.level, KK_OPT_BALANCED);
    assert_int_equal(c.hardware.nvidia.architecture, KK_ARCH_UNKNOWN);
    assert_false(c.hardware.nvidia.fp8_enabled);
    assert_true(c.hardware.nvidia.tf32_allowed);
    assert_false(c.hardware.nvidia.deterministic);
    assert_int_equal(c.hardware.cpu.num_threads, 0);
    assert_true(c.memory.safety_margin == 1.2);
    assert_true(c.memory.pool_limit_bytes == 0);
    assert_true(c.memory.max_pool_bytes == 0);
    assert_true(c.memory.caching_enabled);
    assert_true(c.kernels.enabled);
    assert_int_equal(c.kernels.op_count, 0);
    assert_false(c.debug.checks);
    assert_int_equal(c.debug.log_level, KK_LOG_WARN);
    kk_config_init_defaults(NULL); /* documented as harmless */
}

typedef struct level_expect {
    kk_opt_level level;
    bool tf32, fp8, deterministic;
    double margin;
} level_expect;

/* The table in docs/configuration.md. */
static const level_expect k_levels[] = {
    {KK_OPT_CONSERVATIVE, false, false, true, 1.5},
    {KK_OPT_BALANCED, true, false, false, 1.2},
    {KK_OPT_AGGRESSIVE, true, true, false, 1.1},
};

static void levels_set_what_the_docs_say(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_levels / sizeof k_levels[0]; i++) {
        const level_expect *e = &k_levels[i];
        kk_config c, before;
        make_custom(&c);
        before = c;
        kk_assert_ok(kk_config_set_level(&c, e->level));
        assert_int_equal(c.level, e->level);
        assert_int_equal(c.hardware.nvidia.tf32_allowed, e->tf32);
        assert_int_equal(c.hardware.nvidia.fp8_enabled, e->fp8);
        assert_int_equal(c.hardware.nvidia.deterministic, e->deterministic);
        assert_true(c.memory.safety_margin == e->margin);
        /* Everything else is untouched. */
        assert_int_equal(c.mode, before.mode);
        assert_int_equal(c.hardware.nvidia.architecture, before.hardware.nvidia.architecture);
        assert_int_equal(c.hardware.cpu.num_threads, before.hardware.cpu.num_threads);
        assert_true(c.memory.pool_limit_bytes == before.memory.pool_limit_bytes);
        assert_true(c.memory.max_pool_bytes == before.memory.max_pool_bytes);
        assert_int_equal(c.memory.caching_enabled, before.memory.caching_enabled);
        assert_int_equal(c.kernels.enabled, before.kernels.enabled);
        assert_int_equal(c.kernels.op_count, before.kernels.op_count);
        assert_int_equal(c.debug.checks, before.debug.checks);
        assert_int_equal(c.debug.log_level, before.debug.log_level);
        kk_assert_ok(kk_config_validate(&c));
    }
}

typedef struct preset_expect {
    kk_config_mode mode;
    kk_opt_level level;
    bool tf32, fp8, deterministic;
    double margin;
    bool caching, kernels, checks;
    kk_log_level log_level;
} preset_expect;

/* The table in docs/configuration.md. */
static const preset_expect k_presets[] = {
    {KK_CONFIG_MODE_INFERENCE, KK_OPT_BALANCED, true, false, false, 1.2, true, true, false,
     KK_LOG_WARN},
    {KK_CONFIG_MODE_TRAINING, KK_OPT_BALANCED, true, false, true, 1.5, true, true, false,
     KK_LOG_WARN},
    {KK_CONFIG_MODE_DEVELOPMENT, KK_OPT_CONSERVATIVE, false, false, true, 1.5, false, true, true,
     KK_LOG_DEBUG},
};

static void presets_set_what_the_docs_say(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++) {
        const preset_expect *e = &k_presets[i];
        kk_config c, before;
        make_custom(&c);
        before = c;
        kk_assert_ok(kk_config_apply_preset(&c, e->mode));
        assert_int_equal(c.mode, e->mode);
        assert_int_equal(c.level, e->level);
        assert_int_equal(c.hardware.nvidia.tf32_allowed, e->tf32);
        assert_int_equal(c.hardware.nvidia.fp8_enabled, e->fp8);
        assert_int_equal(c.hardware.nvidia.deterministic, e->deterministic);
        assert_true(c.memory.safety_margin == e->margin);
        assert_int_equal(c.memory.caching_enabled, e->caching);
        assert_int_equal(c.kernels.enabled, e->kernels);
        assert_int_equal(c.debug.checks, e->checks);
        assert_int_equal(c.debug.log_level, e->log_level);
        /* Not controlled by presets: kept. */
        assert_int_equal(c.hardware.nvidia.architecture, before.hardware.nvidia.architecture);
        assert_int_equal(c.hardware.cpu.num_threads, before.hardware.cpu.num_threads);
        assert_true(c.memory.pool_limit_bytes == before.memory.pool_limit_bytes);
        assert_true(c.memory.max_pool_bytes == before.memory.max_pool_bytes);
        assert_int_equal(c.kernels.op_count, before.kernels.op_count);
        assert_string_equal(c.kernels.ops[0].op, "attention");
        kk_assert_ok(kk_config_validate(&c));
    }
    /* The defaults are exactly the inference preset. */
    kk_config d, p;
    kk_config_init_defaults(&d);
    kk_config_init_defaults(&p);
    kk_assert_ok(kk_config_apply_preset(&p, KK_CONFIG_MODE_TRAINING));
    kk_assert_ok(kk_config_apply_preset(&p, KK_CONFIG_MODE_INFERENCE));
    assert_config_equal(&d, &p);
}

static void level_after_preset_overrides_its_numerics(void **state) {
    (void)state;
    kk_config c;
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_apply_preset(&c, KK_CONFIG_MODE_TRAINING));
    kk_assert_ok(kk_config_set_level(&c, KK_OPT_AGGRESSIVE));
    assert_int_equal(c.mode, KK_CONFIG_MODE_TRAINING);
    assert_int_equal(c.level, KK_OPT_AGGRESSIVE);
    assert_false(c.hardware.nvidia.deterministic);
    assert_true(c.hardware.nvidia.fp8_enabled);
    assert_true(c.memory.safety_margin == 1.1);
    assert_true(c.memory.caching_enabled); /* from the preset, not a level field */
}

static void bad_preset_and_level_arguments_change_nothing(void **state) {
    (void)state;
    kk_config c, before;
    make_custom(&c);
    before = c;
    kk_assert_status(kk_config_apply_preset(&c, KK_CONFIG_MODE_COUNT), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "mode");
    kk_assert_status(kk_config_apply_preset(&c, (kk_config_mode)-1), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_set_level(&c, KK_OPT_LEVEL_COUNT), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "level");
    kk_assert_status(kk_config_set_level(&c, (kk_opt_level)99), KK_ERR_INVALID_ARGUMENT);
    assert_config_equal(&c, &before);
    kk_assert_status(kk_config_apply_preset(NULL, KK_CONFIG_MODE_TRAINING),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_set_level(NULL, KK_OPT_BALANCED), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_validate(NULL), KK_ERR_INVALID_ARGUMENT);
}

/* ---- names ---- */

static void names_and_parsers_round_trip(void **state) {
    (void)state;
    for (int i = 0; i < KK_OPT_LEVEL_COUNT; i++) {
        kk_opt_level l = KK_OPT_LEVEL_COUNT;
        kk_assert_ok(kk_opt_level_parse(kk_opt_level_name((kk_opt_level)i), &l));
        assert_int_equal(l, i);
    }
    for (int i = 0; i < KK_CONFIG_MODE_COUNT; i++) {
        kk_config_mode m = KK_CONFIG_MODE_COUNT;
        kk_assert_ok(kk_config_mode_parse(kk_config_mode_name((kk_config_mode)i), &m));
        assert_int_equal(m, i);
    }
    for (int i = 0; i < KK_KERNEL_IMPL_COUNT; i++) {
        kk_kernel_impl k = KK_KERNEL_IMPL_COUNT;
        kk_assert_ok(kk_kernel_impl_parse(kk_kernel_impl_name((kk_kernel_impl)i), &k));
        assert_int_equal(k, i);
    }
    assert_string_equal(kk_opt_level_name(KK_OPT_CONSERVATIVE), "conservative");
    assert_string_equal(kk_opt_level_name(KK_OPT_BALANCED), "balanced");
    assert_string_equal(kk_opt_level_name(KK_OPT_AGGRESSIVE), "aggressive");
    assert_string_equal(kk_config_mode_name(KK_CONFIG_MODE_INFERENCE), "inference");
    assert_string_equal(kk_config_mode_name(KK_CONFIG_MODE_TRAINING), "training");
    assert_string_equal(kk_config_mode_name(KK_CONFIG_MODE_DEVELOPMENT), "development");
    assert_string_equal(kk_kernel_impl_name(KK_KERNEL_IMPL_CUDA), "cuda");
    assert_string_equal(kk_opt_level_name((kk_opt_level)7), "?");
    assert_string_equal(kk_config_mode_name((kk_config_mode)-1), "?");
    assert_string_equal(kk_kernel_impl_name(KK_KERNEL_IMPL_COUNT), "?");

    kk_opt_level l = KK_OPT_BALANCED;
    kk_assert_ok(kk_opt_level_parse("AGGRESSIVE", &l));
    assert_int_equal(l, KK_OPT_AGGRESSIVE);
    kk_assert_status(kk_opt_level_parse("turbo", &l), KK_ERR_INVALID_ARGUMENT);
    assert_int_equal(l, KK_OPT_AGGRESSIVE);
    kk_assert_contains(kk_last_error()->expected, "conservative");
    kk_assert_contains(kk_last_error_message(), "turbo");
    kk_assert_status(kk_opt_level_parse(NULL, &l), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_opt_level_parse("balanced", NULL), KK_ERR_INVALID_ARGUMENT);
    kk_config_mode m = KK_CONFIG_MODE_INFERENCE;
    kk_assert_ok(kk_config_mode_parse("Training", &m));
    assert_int_equal(m, KK_CONFIG_MODE_TRAINING);
    kk_assert_status(kk_config_mode_parse("", &m), KK_ERR_INVALID_ARGUMENT);
    kk_kernel_impl k = KK_KERNEL_IMPL_AUTO;
    kk_assert_status(kk_kernel_impl_parse("tpu", &k), KK_ERR_INVALID_ARGUMENT);
    assert_int_equal(k, KK_KERNEL_IMPL_AUTO);
}

/* ---- kernels.ops ---- */

static void kernel_table_sets_updates_and_fills_up(void **state) {
    (void)state;
    kk_config c;
    kk_config_init_defaults(&c);
    assert_int_equal(kk_config_get_kernel(&c, "attention"), KK_KERNEL_IMPL_AUTO);
    kk_assert_ok(kk_config_set_kernel(&c, "attention", KK_KERNEL_IMPL_CPU));
    kk_assert_ok(kk_config_set_kernel(&c, "attention", KK_KERNEL_IMPL_CUDA));
    assert_int_equal(c.kernels.op_count, 1);
    assert_int_equal(kk_config_get_kernel(&c, "attention"), KK_KERNEL_IMPL_CUDA);
    assert_int_equal(kk_config_get_kernel(&c, "matmul"), KK_KERNEL_IMPL_AUTO);
    assert_int_equal(kk_config_get_kernel(NULL, "attention"), KK_KERNEL_IMPL_AUTO);

    kk_assert_status(kk_config_set_kernel(&c, "Attention", KK_KERNEL_IMPL_CPU), KK_ERR_CONFIG);
    assert_string_equal(kk_last_error()->argument, "kernels.ops");
    kk_assert_status(kk_config_set_kernel(&c, "", KK_KERNEL_IMPL_CPU), KK_ERR_CONFIG);
    kk_assert_status(
        kk_config_set_kernel(&c, "a_name_that_is_far_too_long_32ch", KK_KERNEL_IMPL_CPU),
        KK_ERR_CONFIG);
    kk_assert_ok(kk_config_set_kernel(&c, "a_name_that_is_31_chars_long_ok", KK_KERNEL_IMPL_CPU));
    kk_assert_status(kk_config_set_kernel(&c, "x", KK_KERNEL_IMPL_COUNT), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_set_kernel(&c, NULL, KK_KERNEL_IMPL_CPU), KK_ERR_INVALID_ARGUMENT);

    char op[16];
    while (c.kernels.op_count < KK_CONFIG_MAX_KERNEL_OPS) {
        snprintf(op, sizeof op, "op%zu", c.kernels.op_count);
        kk_assert_ok(kk_config_set_kernel(&c, op, KK_KERNEL_IMPL_CPU));
    }
    kk_assert_ok(kk_config_validate(&c));
    kk_assert_status(kk_config_set_kernel(&c, "one_more", KK_KERNEL_IMPL_CPU), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "full");
    assert_int_equal(c.kernels.op_count, KK_CONFIG_MAX_KERNEL_OPS);
    /* An existing op can still be updated when the table is full. */
    kk_assert_ok(kk_config_set_kernel(&c, "attention", KK_KERNEL_IMPL_AUTO));
}

/* ---- validation ---- */

typedef struct bad_field {
    void (*mutate)(kk_config *c);
    const char *path;
    const char *value;
    const char *message; /* expected in kk_last_error_message() */
} bad_field;

static void m_mode(kk_config *c) { c->mode = (kk_config_mode)7; }
static void m_level(kk_config *c) { c->level = (kk_opt_level)-1; }
static void m_arch(kk_config *c) { c->hardware.nvidia.architecture = KK_ARCH_COUNT; }
static void m_threads_neg(kk_config *c) { c->hardware.cpu.num_threads = -1; }
static void m_threads_big(kk_config *c) { c->hardware.cpu.num_threads = 4097; }
static void m_margin_low(kk_config *c) { c->memory.safety_margin = 0.5; }
static void m_margin_just_low(kk_config *c) { c->memory.safety_margin = 0.9999999999999999; }
static void m_margin_high(kk_config *c) { c->memory.safety_margin = 10.5; }
static void m_margin_nan(kk_config *c) { c->memory.safety_margin = NAN; }
static void m_margin_inf(kk_config *c) { c->memory.safety_margin = INFINITY; }
static void m_pool_big(kk_config *c) { c->memory.pool_limit_bytes = KK_CONFIG_MAX_BYTES + 1; }
static void m_max_pool_big(kk_config *c) { c->memory.max_pool_bytes = UINT64_MAX; }
static void m_pool_order(kk_config *c) {
    c->memory.pool_limit_bytes = 1024;
    c->memory.max_pool_bytes = 4096;
}
static void m_op_count(kk_config *c) { c->kernels.op_count = KK_CONFIG_MAX_KERNEL_OPS + 1; }
static void m_op_name(kk_config *c) {
    c->kernels.op_count = 1;
    snprintf(c->kernels.ops[0].op, sizeof c->kernels.ops[0].op, "Bad Name");
}
static void m_op_unterminated(kk_config *c) {
    c->kernels.op_count = 1;
    memset(c->kernels.ops[0].op, 'a', sizeof c->kernels.ops[0].op);
}
static void m_op_impl(kk_config *c) {
    c->kernels.op_count = 1;
    snprintf(c->kernels.ops[0].op, sizeof c->kernels.ops[0].op, "attention");
    c->kernels.ops[0].impl = (kk_kernel_impl)9;
}
static void m_op_dup(kk_config *c) {
    c->kernels.op_count = 2;
    snprintf(c->kernels.ops[0].op, sizeof c->kernels.ops[0].op, "attention");
    snprintf(c->kernels.ops[1].op, sizeof c->kernels.ops[1].op, "attention");
}
static void m_log_level(kk_config *c) { c->debug.log_level = (kk_log_level)9; }

static const bad_field k_bad_fields[] = {
    {m_mode, "mode", "7", "mode: 7 is not a kk_config_mode"},
    {m_level, "optimization_level", "-1", "optimization_level: -1 is not a kk_opt_level"},
    {m_arch, "hardware.nvidia.architecture", "9", "hardware.nvidia.architecture: 9 is not"},
    {m_threads_neg, "hardware.cpu.num_threads", "-1", "hardware.cpu.num_threads: -1 is below 0"},
    {m_threads_big, "hardware.cpu.num_threads", "4097", "num_threads: 4097 is above 4096"},
    {m_margin_low, "memory.safety_margin", "0.5", "memory.safety_margin: 0.5 is below 1.0"},
    {m_margin_just_low, "memory.safety_margin", "0.9999999999999999", "is below 1.0"},
    {m_margin_high, "memory.safety_margin", "10.5", "memory.safety_margin: 10.5 is above 10.0"},
    {m_margin_nan, "memory.safety_margin", "nan", "nan is not a finite number"},
    {m_margin_inf, "memory.safety_margin", "inf", "inf is not a finite number"},
    {m_pool_big, "memory.pool_limit_bytes", "9007199254740992",
     "memory.pool_limit_bytes: 9007199254740992 is above 9007199254740991"},
    {m_max_pool_big, "memory.max_pool_bytes", "18446744073709551615", "is above"},
    {m_pool_order, "memory.max_pool_bytes", "4096",
     "memory.max_pool_bytes: 4096 is above memory.pool_limit_bytes (1024)"},
    {m_op_count, "kernels.ops", "33", "kernels.ops: 33 entries is above 32"},
    {m_op_name, "kernels.ops[0]", "Bad Name", "\"Bad Name\" is not a valid op name"},
    {m_op_unterminated, "kernels.ops[0]", "(not NUL-terminated)", "not NUL-terminated"},
    {m_op_impl, "kernels.ops.attention", "9", "9 is not a kk_kernel_impl"},
    {m_op_dup, "kernels.ops.attention", "attention", "listed twice"},
    {m_log_level, "debug.log_level", "9", "debug.log_level: 9 is not a kk_log_level"},
};

static void validation_names_each_bad_field(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad_fields / sizeof k_bad_fields[0]; i++) {
        const bad_field *b = &k_bad_fields[i];
        kk_config c;
        kk_config_init_defaults(&c);
        b->mutate(&c);
        kk_clear_error();
        kk_assert_status(kk_config_validate(&c), KK_ERR_CONFIG);
        const kk_error_info *e = kk_last_error();
        assert_int_equal(e->status, KK_ERR_CONFIG);
        assert_string_equal(e->function, "kk_config_validate");
        assert_string_equal(e->argument, b->path);
        assert_string_equal(e->value, b->value);
        assert_true(e->expected[0] != 0);
        kk_assert_contains(e->message, b->message);
    }
    kk_config c;
    kk_config_init_defaults(&c);
    c.memory.safety_margin = 0.5;
    kk_config_validate(&c);
    assert_string_equal(kk_last_error_message(),
                        "kk_config_validate: memory.safety_margin: 0.5 is below 1.0");
    assert_string_equal(kk_last_error()->expected, "1.0 to 10.0");
}

static void validation_accepts_the_boundaries(void **state) {
    (void)state;
    kk_config c;
    kk_config_init_defaults(&c);
    c.memory.safety_margin = 1.0;
    kk_assert_ok(kk_config_validate(&c));
    c.memory.safety_margin = 10.0;
    kk_assert_ok(kk_config_validate(&c));
    c.hardware.cpu.num_threads = KK_CONFIG_MAX_THREADS;
    c.memory.pool_limit_bytes = KK_CONFIG_MAX_BYTES;
    c.memory.max_pool_bytes = KK_CONFIG_MAX_BYTES; /* equal to the limit is fine */
    kk_assert_ok(kk_config_validate(&c));
    c.memory.pool_limit_bytes = 0; /* unlimited: any single-pool limit fits */
    kk_assert_ok(kk_config_validate(&c));
    for (int a = 0; a < KK_ARCH_COUNT; a++) {
        c.hardware.nvidia.architecture = (kk_arch)a;
        kk_assert_ok(kk_config_validate(&c));
    }
}

/* ---- JSON ---- */

static void load_and_check_equal_after_save(const kk_config *c) {
    char path[256];
    temp_path(path, sizeof path, "roundtrip.json");
    kk_assert_ok(kk_config_save_file(c, path));
    /* Into defaults, and into a config whose ops table differs (ops replace). */
    kk_config back;
    kk_config_init_defaults(&back);
    kk_assert_ok(kk_config_load_file(path, &back));
    assert_config_equal(c, &back);
    make_custom(&back);
    kk_assert_ok(kk_config_set_kernel(&back, "extra_op", KK_KERNEL_IMPL_CPU));
    kk_assert_ok(kk_config_load_file(path, &back));
    assert_config_equal(c, &back);
    unlink(path);

    char *json = NULL;
    kk_assert_ok(kk_config_to_json(c, &json));
    kk_config_init_defaults(&back);
    kk_assert_ok(kk_config_load_string(json, &back));
    assert_config_equal(c, &back);
    free(json);
}

static void json_round_trip_is_exact(void **state) {
    (void)state;
    kk_config c;
    make_custom(&c);
    load_and_check_equal_after_save(&c);

    static const double margins[] = {1.0,
                                     1.2,
                                     1.1,
                                     1.5,
                                     10.0,
                                     3.3333333333333335,
                                     9.9999999999999982,
                                     1.0000000000000004,
                                     2.718281828459045,
                                     1.1000000000000001};
    for (size_t i = 0; i < sizeof margins / sizeof margins[0]; i++) {
        make_custom(&c);
        c.memory.safety_margin = margins[i];
        c.memory.pool_limit_bytes = KK_CONFIG_MAX_BYTES - i;
        c.memory.max_pool_bytes = i * 7919;
        load_and_check_equal_after_save(&c);
    }
    /* Every preset x level x architecture. */
    for (int m = 0; m < KK_CONFIG_MODE_COUNT; m++)
        for (int l = 0; l < KK_OPT_LEVEL_COUNT; l++)
            for (int a = 0; a < KK_ARCH_COUNT; a++) {
                kk_config_init_defaults(&c);
                kk_assert_ok(kk_config_apply_preset(&c, (kk_config_mode)m));
                kk_assert_ok(kk_config_set_level(&c, (kk_opt_level)l));
                c.hardware.nvidia.architecture = (kk_arch)a;
                load_and_check_equal_after_save(&c);
            }
    /* A full ops table. */
    kk_config_init_defaults(&c);
    char op[16];
    for (int i = 0; i < KK_CONFIG_MAX_KERNEL_OPS; i++) {
        snprintf(op, sizeof op, "op_%d", i);
        kk_assert_ok(kk_config_set_kernel(&c, op, (kk_kernel_impl)(i % KK_KERNEL_IMPL_COUNT)));
    }
    load_and_check_equal_after_save(&c);
}

/* The printed document holds exactly the documented keys. */
static void json_has_every_documented_key(void **state) {
    (void)state;
    kk_config c;
    make_custom(&c);
    char *json = NULL;
    kk_assert_ok(kk_config_to_json(&c, &json));
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    static const char *const paths[][3] = {
        {"mode", NULL, NULL},
        {"optimization_level", NULL, NULL},
        {"hardware", "nvidia", "architecture"},
        {"hardware", "nvidia", "fp8_enabled"},
        {"hardware", "nvidia", "tf32_allowed"},
        {"hardware", "nvidia", "deterministic"},
        {"hardware", "cpu", "num_threads"},
        {"memory", "safety_margin", NULL},
        {"memory", "pool_limit_bytes", NULL},
        {"memory", "max_pool_bytes", NULL},
        {"memory", "caching_enabled", NULL},
        {"kernels", "enabled", NULL},
        {"kernels", "ops", "attention"},
        {"debug", "checks", NULL},
        {"debug", "log_level", NULL},
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const cJSON *node = root;
        for (int d = 0; d < 3 && paths[i][d]; d++) {
            node = cJSON_GetObjectItemCaseSensitive(node, paths[i][d]);
            if (!node) fail_msg("missing key %s (level %d)", paths[i][0], d);
        }
    }
    assert_int_equal(cJSON_GetArraySize(root), 6);
    assert_string_equal(cJSON_GetObjectItem(root, "mode")->valuestring, "development");
    const cJSON *nv = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "hardware"), "nvidia");
    assert_string_equal(cJSON_GetObjectItem(nv, "architecture")->valuestring, "blackwell");
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "kernels"), "ops");
    assert_string_equal(cJSON_GetObjectItem(ops, "rms_norm")->valuestring, "cpu");
    cJSON_Delete(root);
    free(json);

    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_to_json(&c, &json));
    kk_assert_contains(json, "\"architecture\":\t\"auto\"");
    free(json);
}

static void invalid_configs_are_not_written(void **state) {
    (void)state;
    kk_config c;
    kk_config_init_defaults(&c);
    c.memory.safety_margin = 0.5;
    char *json = (char *)"sentinel";
    kk_assert_status(kk_config_to_json(&c, &json), KK_ERR_CONFIG);
    assert_null(json);
    assert_string_equal(kk_last_error()->argument, "memory.safety_margin");
    assert_string_equal(kk_last_error()->function, "kk_config_to_json");

    char path[256];
    temp_path(path, sizeof path, "invalid.json");
    unlink(path);
    kk_assert_status(kk_config_save_file(&c, path), KK_ERR_CONFIG);
    assert_int_equal(access(path, F_OK), -1);

    kk_config_init_defaults(&c);
    kk_assert_status(kk_config_save_file(&c, "/nonexistent-dir-kk/x.json"), KK_ERR_IO);
    assert_string_equal(kk_last_error()->argument, "path");
    kk_assert_contains(kk_last_error_message(), "/nonexistent-dir-kk/x.json");
    kk_assert_status(kk_config_to_json(&c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_save_file(&c, NULL), KK_ERR_INVALID_ARGUMENT);

    /* Saving replaces an existing file and leaves no temporary behind. */
    kk_assert_ok(kk_config_save_file(&c, path));
    make_custom(&c);
    kk_assert_ok(kk_config_save_file(&c, path));
    kk_config back;
    kk_config_init_defaults(&back);
    kk_assert_ok(kk_config_load_file(path, &back));
    assert_config_equal(&c, &back);
    char cmd[512], out[256];
    snprintf(cmd, sizeof cmd, "ls %s.tmp.* 2>/dev/null | wc -l", path);
    kk_test_run(cmd, out, sizeof out);
    assert_int_equal(atoi(out), 0);
    unlink(path);
}

static void fixture_files_load_as_written(void **state) {
    (void)state;
    kk_config c, want;
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_load_file(DATA "full.json", &c));
    kk_config_init_defaults(&want);
    want.mode = KK_CONFIG_MODE_TRAINING;
    want.level = KK_OPT_AGGRESSIVE;
    want.hardware.nvidia.architecture = KK_ARCH_HOPPER;
    want.hardware.nvidia.fp8_enabled = false;
    want.hardware.nvidia.tf32_allowed = false;
    want.hardware.nvidia.deterministic = true;
    want.hardware.cpu.num_threads = 12;
    want.memory.safety_margin = 2.75;
    want.memory.pool_limit_bytes = UINT64_C(68719476736);
    want.memory.max_pool_bytes = UINT64_C(17179869184);
    want.memory.caching_enabled = false;
    want.kernels.enabled = false;
    kk_assert_ok(kk_config_set_kernel(&want, "attention", KK_KERNEL_IMPL_CUDA));
    kk_assert_ok(kk_config_set_kernel(&want, "layer_norm", KK_KERNEL_IMPL_CPU));
    kk_assert_ok(kk_config_set_kernel(&want, "matmul", KK_KERNEL_IMPL_AUTO));
    want.debug.checks = true;
    want.debug.log_level = KK_LOG_INFO;
    assert_config_equal(&c, &want);

    /* Omitted keys keep the values already there. */
    make_custom(&c);
    kk_config before = c;
    kk_assert_ok(kk_config_load_file(DATA "partial.json", &c));
    before.memory.safety_margin = 2.5;
    before.kernels.op_count = 0;
    kk_assert_ok(kk_config_set_kernel(&before, "attention", KK_KERNEL_IMPL_CUDA));
    assert_config_equal(&c, &before);

    /* "mode" applies its preset before the file's own keys, wherever it is. */
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_load_file(DATA "preset_with_override.json", &c));
    assert_int_equal(c.mode, KK_CONFIG_MODE_TRAINING);
    assert_true(c.memory.safety_margin == 1.5);
    assert_false(c.hardware.nvidia.deterministic);

    /* "optimization_level" applies after "mode". */
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_load_string(
        "{\"optimization_level\": \"aggressive\", \"mode\": \"development\"}", &c));
    assert_int_equal(c.mode, KK_CONFIG_MODE_DEVELOPMENT);
    assert_int_equal(c.level, KK_OPT_AGGRESSIVE);
    assert_true(c.hardware.nvidia.fp8_enabled);
    assert_false(c.memory.caching_enabled);

    /* An empty object changes nothing; enum values accept any case. */
    make_custom(&c);
    before = c;
    kk_assert_ok(kk_config_load_string("{}", &c));
    assert_config_equal(&c, &before);
    kk_assert_ok(
        kk_config_load_string("{\"hardware\":{\"nvidia\":{\"architecture\":\"Ampere\"}}}", &c));
    assert_int_equal(c.hardware.nvidia.architecture, KK_ARCH_AMPERE);
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_load_string("{\"memory\":{\"pool_limit_bytes\":1e3}}", &c));
    assert_true(c.memory.pool_limit_bytes == 1000);
}

/* ---- hostile input ---- */

typedef struct hostile {
    const char *file;
    kk_status status;
    const char *argument; /* NULL: not checked */
    const char *message;
} hostile;

static const hostile k_hostile[] = {
    {"truncated.json", KK_ERR_CONFIG, "", "truncated JSON"},
    {"invalid_json.json", KK_ERR_CONFIG, "", "invalid JSON at line 1, column 22"},
    {"wrong_type_bool.json", KK_ERR_CONFIG, "hardware.nvidia.fp8_enabled",
     "hardware.nvidia.fp8_enabled: expected a boolean, found string \"yes\""},
    {"wrong_type_number.json", KK_ERR_CONFIG, "memory.safety_margin",
     "expected a number, found string \"1.5\""},
    {"wrong_type_section.json", KK_ERR_CONFIG, "memory", "memory: expected an object, found array"},
    {"wrong_type_string.json", KK_ERR_CONFIG, "hardware.nvidia.architecture",
     "expected a string, found number 90"},
    {"null_value.json", KK_ERR_CONFIG, "kernels.enabled", "expected a boolean, found null"},
    {"huge_number.json", KK_ERR_CONFIG, "memory.safety_margin", "out of range"},
    {"huge_integer.json", KK_ERR_CONFIG, "memory.pool_limit_bytes", "1e+30 is out of range"},
    {"long_integer.json", KK_ERR_CONFIG, "memory.pool_limit_bytes", "is out of range"},
    {"negative_unsigned.json", KK_ERR_CONFIG, "memory.max_pool_bytes", "-1 is negative"},
    {"non_integer.json", KK_ERR_CONFIG, "hardware.cpu.num_threads", "2.5 is not an integer"},
    {"too_many_threads.json", KK_ERR_CONFIG, "hardware.cpu.num_threads", "5000 is out of range"},
    {"out_of_range.json", KK_ERR_CONFIG, "memory.safety_margin",
     "memory.safety_margin: 0.5 is below 1.0"},
    {"pool_inconsistent.json", KK_ERR_CONFIG, "memory.max_pool_bytes",
     "4096 is above memory.pool_limit_bytes (1024)"},
    {"not_object.json", KK_ERR_CONFIG, "(root)", "expected an object, found array"},
    {"string_root.json", KK_ERR_CONFIG, "(root)", "expected an object, found string"},
    {"empty.json", KK_ERR_CONFIG, "", "document is empty"},
    {"whitespace.json", KK_ERR_CONFIG, "", "document is empty"},
    {"unknown_key.json", KK_ERR_CONFIG, "memory.safety_margn", "memory.safety_margn: unknown key"},
    {"unknown_section.json", KK_ERR_CONFIG, "hardwre", "hardwre: unknown key"},
    {"trailing_garbage.json", KK_ERR_CONFIG, "", "invalid JSON"},
    {"duplicate_key.json", KK_ERR_CONFIG, "memory.safety_margin", "duplicate key"},
    {"bad_mode.json", KK_ERR_CONFIG, "mode", "\"turbo\" is not one of inference"},
    {"bad_arch.json", KK_ERR_CONFIG, "hardware.nvidia.architecture",
     "\"pentium\" is not one of auto, pre-pascal"},
    {"bad_op_name.json", KK_ERR_CONFIG, "kernels.ops.Flash Attention", "not a valid op name"},
    {"bad_impl.json", KK_ERR_CONFIG, "kernels.ops.attention", "\"tpu\" is not one of auto"},
    {"escaped_nul.json", KK_ERR_CONFIG, "", "escaped NUL"},
    {"nul_byte.json", KK_ERR_CONFIG, "", "NUL byte at line 1, column 22"},
    {"garbage.bin", KK_ERR_CONFIG, "", "NUL byte"},
    {"garbage_no_nul.bin", KK_ERR_CONFIG, "", "invalid JSON at line"},
    {"invalid_utf8.json", KK_ERR_CONFIG, "mode",
     "\"??"
     "?( training\" is not one of"},
};

/* Load must fail with `status`, name `argument`, and leave the config exactly
 * as it was (checked from a non-default config so a reset would show). */
static void expect_rejected(const char *path, kk_status status, const char *argument,
                            const char *message) {
    kk_config c, before;
    make_custom(&c);
    before = c;
    kk_clear_error();
    kk_status st = kk_config_load_file(path, &c);
    if (st != status)
        fail_msg("%s: got %s, expected %s (%s)", path, kk_status_name(st), kk_status_name(status),
                 kk_last_error_message());
    assert_config_equal(&c, &before);
    assert_int_equal(kk_last_error()->status, status);
    assert_string_equal(kk_last_error()->function, "kk_config_load_file");
    if (argument && strcmp(kk_last_error()->argument, argument) != 0)
        fail_msg("%s: argument \"%s\", expected \"%s\" (%s)", path, kk_last_error()->argument,
                 argument, kk_last_error_message());
    kk_assert_contains(kk_last_error_message(), message);
}

static void hostile_fixtures_fail_cleanly(void **state) {
    (void)state;
    char path[512];
    for (size_t i = 0; i < sizeof k_hostile / sizeof k_hostile[0]; i++) {
        const hostile *h = &k_hostile[i];
        snprintf(path, sizeof path, DATA "%s", h->file);
        expect_rejected(path, h->status, h->argument, h->message);
        /* The message names the file. */
        kk_assert_contains(kk_last_error_message(), h->file);

        /* The same text through load_string fails the same way (files with a
         * NUL cannot be strings; they are cut at the NUL and still fail). */
        char *text = read_text(path);
        assert_non_null(text);
        kk_config c, before;
        make_custom(&c);
        before = c;
        assert_int_equal(kk_config_load_string(text, &c), KK_ERR_CONFIG);
        assert_config_equal(&c, &before);
        free(text);
    }
}

static void io_errors_name_the_path(void **state) {
    (void)state;
    expect_rejected(DATA "does-not-exist.json", KK_ERR_IO, "path", "does-not-exist.json");
    kk_assert_contains(kk_last_error_message(), "No such file");
    expect_rejected(DATA, KK_ERR_IO, "path", "is a directory");
    expect_rejected("/dev/null", KK_ERR_IO, "path", "not a regular file");
    kk_config c;
    kk_config_init_defaults(&c);
    kk_assert_status(kk_config_load_file(NULL, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_load_file(DATA "full.json", NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_load_string(NULL, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_load_string("{}", NULL), KK_ERR_INVALID_ARGUMENT);
}

/* Nesting far past cJSON's own limit, built at test time. */
static void deep_nesting_is_rejected(void **state) {
    (void)state;
    enum { DEPTH = 10000 };
    char path[512];
    char *text = malloc(DEPTH * 8 + 64);
    assert_non_null(text);

    /* [[[[...]]]] */
    size_t n = 0;
    for (int i = 0; i < DEPTH; i++) text[n++] = '[';
    for (int i = 0; i < DEPTH; i++) text[n++] = ']';
    text[n] = 0;
    temp_file(text, n, path, sizeof path);
    expect_rejected(path, KK_ERR_CONFIG, "", "nesting deeper than 8 levels");
    unlink(path);

    /* {"memory":{"a":{"a":...}}} : objects under a real key */
    n = (size_t)sprintf(text, "{\"memory\":");
    for (int i = 0; i < DEPTH; i++) n += (size_t)sprintf(text + n, "{\"a\":");
    text[n++] = '1';
    for (int i = 0; i < DEPTH + 1; i++) text[n++] = '}';
    text[n] = 0;
    temp_file(text, n, path, sizeof path);
    expect_rejected(path, KK_ERR_CONFIG, "", "nesting deeper than 8 levels");
    unlink(path);
    kk_config c;
    kk_config_init_defaults(&c);
    assert_int_equal(kk_config_load_string(text, &c), KK_ERR_CONFIG);

    /* Deeper than the schema but within the scan limit: the schema walk names it. */
    kk_assert_status(
        kk_config_load_string("{\"hardware\":{\"nvidia\":{\"fp8_enabled\":{\"x\":{}}}}}", &c),
        KK_ERR_CONFIG);
    assert_string_equal(kk_last_error()->argument, "hardware.nvidia.fp8_enabled");
    /* Brackets inside strings do not count as nesting. */
    kk_assert_status(kk_config_load_string("{\"mode\":\"[[[[[[[[[[[[[[[[[[[[\"}", &c),
                     KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "is not one of");
    free(text);
}

static void oversized_input_is_rejected(void **state) {
    (void)state;
    enum { SIZE = 2 * 1024 * 1024 };
    char path[512];
    char *text = malloc(SIZE + 1);
    assert_non_null(text);
    /* Valid JSON apart from its size: {"mode": "inference", "x": "aaaa..."} */
    int head = sprintf(text, "{\"mode\": \"inference\", \"x\": \"");
    memset(text + head, 'a', SIZE - (size_t)head - 2);
    memcpy(text + SIZE - 2, "\"}", 2);
    text[SIZE] = 0;
    temp_file(text, SIZE, path, sizeof path);
    expect_rejected(path, KK_ERR_CONFIG, "", "the limit is 1048576");
    unlink(path);

    kk_config c, before;
    make_custom(&c);
    before = c;
    kk_assert_status(kk_config_load_string(text, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "the limit is 1048576");
    assert_config_equal(&c, &before);

    /* Just over the limit fails; exactly at it is only judged on content. */
    text[KK_CONFIG_MAX_FILE_BYTES + 1] = 0;
    kk_assert_status(kk_config_load_string(text, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "1048577 bytes");
    text[KK_CONFIG_MAX_FILE_BYTES] = 0;
    kk_assert_status(kk_config_load_string(text, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "truncated");
    free(text);

    /* 33 ops: one more than the table holds. */
    char ops[2048];
    int k = sprintf(ops, "{\"kernels\":{\"ops\":{");
    for (int i = 0; i < KK_CONFIG_MAX_KERNEL_OPS + 1; i++)
        k += sprintf(ops + k, "%s\"op%d\":\"cpu\"", i ? "," : "", i);
    sprintf(ops + k, "}}}");
    kk_assert_status(kk_config_load_string(ops, &c), KK_ERR_CONFIG);
    assert_string_equal(kk_last_error()->argument, "kernels.ops");
    kk_assert_contains(kk_last_error_message(), "33 entries is above 32");
    assert_config_equal(&c, &before);
}

/* Deterministic mutations of a valid file: every outcome is a status, a
 * failure leaves the config unchanged, a success is a valid config. */
static void mutated_documents_never_crash(void **state) {
    (void)state;
    char *orig = read_text(DATA "full.json");
    assert_non_null(orig);
    size_t len = strlen(orig);
    char *text = malloc(len + 1);
    unsigned seed = 12345u;
    int failures = 0;
    for (int round = 0; round < 3000; round++) {
        memcpy(text, orig, len + 1);
        for (int m = 0; m < 1 + round % 4; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            char byte = (char)((seed >> 16) & 0xff);
            text[at] = byte ? byte : '{';
        }
        kk_config c, before;
        make_custom(&c);
        before = c;
        kk_status st = kk_config_load_string(text, &c);
        if (st != KK_OK) {
            failures++;
            assert_int_equal(st, KK_ERR_CONFIG);
            assert_config_equal(&c, &before);
            assert_true(kk_last_error_message()[0] != 0);
        } else {
            kk_assert_ok(kk_config_validate(&c));
        }
    }
    assert_true(failures > 1000); /* the mutations did reach the checks */

    /* Every proper prefix of the file is an error. */
    for (size_t cut = 0; cut + 1 < len; cut++) {
        memcpy(text, orig, cut);
        text[cut] = 0;
        kk_config c, before;
        make_custom(&c);
        before = c;
        assert_int_equal(kk_config_load_string(text, &c), KK_ERR_CONFIG);
        assert_config_equal(&c, &before);
    }
    free(text);
    free(orig);
}

/* ---- environment ---- */

static void env_overrides_each_field(void **state) {
    (void)state;
    kk_config c;
    kk_config_init_defaults(&c);
    setenv("KK_ARCH", "hopper", 1);
    setenv("KK_FP8", "yes", 1);
    setenv("KK_TF32", "off", 1);
    setenv("KK_DETERMINISTIC", "TRUE", 1);
    setenv("KK_MEMORY_SAFETY_MARGIN", "2.25", 1);
    setenv("KK_NUM_THREADS", "8", 1);
    setenv("KK_CACHING", "0", 1);
    kk_assert_ok(kk_config_apply_env(&c));
    assert_int_equal(c.hardware.nvidia.architecture, KK_ARCH_HOPPER);
    assert_true(c.hardware.nvidia.fp8_enabled);
    assert_false(c.hardware.nvidia.tf32_allowed);
    assert_true(c.hardware.nvidia.deterministic);
    assert_true(c.memory.safety_margin == 2.25);
    assert_int_equal(c.hardware.cpu.num_threads, 8);
    assert_false(c.memory.caching_enabled);
    assert_int_equal(c.mode, KK_CONFIG_MODE_INFERENCE); /* no KK_MODE: unchanged */

    setenv("KK_ARCH", "auto", 1);
    kk_assert_ok(kk_config_apply_env(&c));
    assert_int_equal(c.hardware.nvidia.architecture, KK_ARCH_UNKNOWN);

    /* Every documented boolean spelling. */
    static const char *const yes[] = {"1", "true", "yes", "on", "ON", "Yes"};
    static const char *const no[] = {"0", "false", "no", "off", "FALSE", "Off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        setenv("KK_FP8", yes[i], 1);
        kk_assert_ok(kk_config_apply_env(&c));
        assert_true(c.hardware.nvidia.fp8_enabled);
        setenv("KK_FP8", no[i], 1);
        kk_assert_ok(kk_config_apply_env(&c));
        assert_false(c.hardware.nvidia.fp8_enabled);
    }

    /* Empty means unset. */
    clear_env(NULL);
    setenv("KK_FP8", "", 1);
    setenv("KK_NUM_THREADS", "", 1);
    kk_config before = c;
    kk_assert_ok(kk_config_apply_env(&c));
    assert_config_equal(&c, &before);
}

static void env_mode_then_level(void **state) {
    (void)state;
    kk_config c;
    kk_config_init_defaults(&c);
    setenv("KK_MODE", "training", 1);
    kk_assert_ok(kk_config_apply_env(&c));
    assert_int_equal(c.mode, KK_CONFIG_MODE_TRAINING);
    assert_true(c.hardware.nvidia.deterministic);

    setenv("KK_OPT_LEVEL", "aggressive", 1);
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_apply_env(&c));
    assert_int_equal(c.mode, KK_CONFIG_MODE_TRAINING);
    assert_int_equal(c.level, KK_OPT_AGGRESSIVE);
    assert_false(c.hardware.nvidia.deterministic); /* the level comes after the preset */
    assert_true(c.hardware.nvidia.fp8_enabled);

    setenv("KK_DETERMINISTIC", "1", 1); /* a single variable beats both */
    kk_assert_ok(kk_config_from_environment(&c));
    assert_true(c.hardware.nvidia.deterministic);
    assert_true(c.hardware.nvidia.fp8_enabled);
}

typedef struct bad_env {
    const char *var, *value, *message;
} bad_env;

static const bad_env k_bad_env[] = {
    {"KK_FP8", "maybe", "KK_FP8=maybe: not a boolean"},
    {"KK_TF32", "2", "not a boolean"},
    {"KK_DETERMINISTIC", "enabled", "not a boolean"},
    {"KK_CACHING", " 1", "not a boolean"},
    {"KK_ARCH", "pentium", "KK_ARCH=pentium: unknown architecture"},
    {"KK_ARCH", "unknown", "unknown architecture"},
    {"KK_MEMORY_SAFETY_MARGIN", "0.5", "KK_MEMORY_SAFETY_MARGIN=0.5: below 1.0"},
    {"KK_MEMORY_SAFETY_MARGIN", "11", "above 10.0"},
    {"KK_MEMORY_SAFETY_MARGIN", "1.5x", "not a number"},
    {"KK_MEMORY_SAFETY_MARGIN", "nan", "not a number"},
    {"KK_MEMORY_SAFETY_MARGIN", "1e999", "not a number"},
    {"KK_NUM_THREADS", "abc", "not an integer"},
    {"KK_NUM_THREADS", "4.5", "not an integer"},
    {"KK_NUM_THREADS", "-1", "negative"},
    {"KK_NUM_THREADS", "4097", "above 4096"},
    {"KK_NUM_THREADS", "99999999999999999999999", "above 4096"},
    {"KK_MODE", "turbo", "KK_MODE=turbo: unknown mode"},
    {"KK_OPT_LEVEL", "max", "KK_OPT_LEVEL=max: unknown level"},
};

static void env_bad_values_name_the_variable(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad_env / sizeof k_bad_env[0]; i++) {
        const bad_env *b = &k_bad_env[i];
        clear_env(NULL);
        setenv("KK_TF32", "0", 1); /* a good variable alongside changes nothing either */
        setenv(b->var, b->value, 1);
        for (int fn = 0; fn < 2; fn++) {
            kk_config c, before;
            make_custom(&c);
            before = c;
            kk_status st = fn ? kk_config_from_environment(&c) : kk_config_apply_env(&c);
            if (st != KK_ERR_CONFIG)
                fail_msg("%s=%s: got %s", b->var, b->value, kk_status_name(st));
            assert_config_equal(&c, &before);
            assert_string_equal(kk_last_error()->argument, b->var);
            assert_string_equal(kk_last_error()->value, b->value);
            kk_assert_contains(kk_last_error_message(), b->message);
            assert_true(kk_last_error()->expected[0] != 0);
        }
    }
}

static void env_precedence_defaults_level_file_variables(void **state) {
    (void)state;
    /* File: sets fp8 and tf32 off, leaves the margin alone. */
    static const char file[] =
        "{\"hardware\":{\"nvidia\":{\"fp8_enabled\":false,\"tf32_allowed\":false}},"
        "\"memory\":{\"pool_limit_bytes\":4096}}";
    char path[512];
    temp_file(file, sizeof file - 1, path, sizeof path);
    setenv("KK_OPT_LEVEL", "aggressive", 1); /* fp8 on, tf32 on, margin 1.1 */
    setenv("KK_CONFIG", path, 1);
    setenv("KK_TF32", "1", 1);

    kk_config c;
    make_custom(&c); /* from_environment starts from the defaults, not from *c */
    kk_assert_ok(kk_config_from_environment(&c));
    assert_int_equal(c.level, KK_OPT_AGGRESSIVE);    /* level over defaults */
    assert_true(c.memory.safety_margin == 1.1);      /* level, untouched by file */
    assert_false(c.hardware.nvidia.fp8_enabled);     /* file over level */
    assert_true(c.hardware.nvidia.tf32_allowed);     /* variable over file */
    assert_true(c.memory.pool_limit_bytes == 4096);  /* file over defaults */
    assert_int_equal(c.hardware.cpu.num_threads, 0); /* default */
    assert_int_equal(c.kernels.op_count, 0);

    /* apply_env ignores KK_CONFIG and works on top of *c. */
    make_custom(&c);
    kk_assert_ok(kk_config_apply_env(&c));
    assert_true(c.memory.pool_limit_bytes == KK_CONFIG_MAX_BYTES);
    assert_true(c.hardware.nvidia.fp8_enabled); /* from KK_OPT_LEVEL, no file */
    assert_int_equal(c.hardware.cpu.num_threads, 37);
    unlink(path);

    /* Nothing set: exactly the defaults. */
    clear_env(NULL);
    kk_config d;
    kk_config_init_defaults(&d);
    make_custom(&c);
    kk_assert_ok(kk_config_from_environment(&c));
    assert_config_equal(&c, &d);
}

static void env_config_file_errors(void **state) {
    (void)state;
    kk_config c, before;
    make_custom(&c);
    before = c;
    setenv("KK_CONFIG", DATA "does-not-exist.json", 1);
    kk_assert_status(kk_config_from_environment(&c), KK_ERR_IO);
    assert_string_equal(kk_last_error()->argument, "KK_CONFIG");
    kk_assert_contains(kk_last_error_message(), "KK_CONFIG=");
    kk_assert_contains(kk_last_error_message(), "does-not-exist.json");
    assert_config_equal(&c, &before);
    kk_assert_ok(kk_config_apply_env(&c)); /* apply_env does not read KK_CONFIG */

    setenv("KK_CONFIG", DATA "wrong_type_bool.json", 1);
    kk_assert_status(kk_config_from_environment(&c), KK_ERR_CONFIG);
    assert_string_equal(kk_last_error()->argument, "hardware.nvidia.fp8_enabled");
    kk_assert_contains(kk_last_error_message(), "KK_CONFIG=");
    kk_assert_contains(kk_last_error_message(), "wrong_type_bool.json");
    assert_string_equal(kk_last_error()->function, "kk_config_from_environment");
    assert_config_equal(&c, &before);

    setenv("KK_CONFIG", DATA "full.json", 1);
    kk_assert_ok(kk_config_from_environment(&c));
    assert_int_equal(c.hardware.nvidia.architecture, KK_ARCH_HOPPER);
    assert_int_equal(c.hardware.cpu.num_threads, 12);
    kk_assert_status(kk_config_from_environment(NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_config_apply_env(NULL), KK_ERR_INVALID_ARGUMENT);
}

/* ---- logging ---- */

static void apply_logging_sets_the_library_level(void **state) {
    (void)state;
    const char *saved = getenv("KK_LOG");
    char *copy = saved ? strdup(saved) : NULL;
    unsetenv("KK_LOG");
    kk_log_reset();

    kk_config c;
    kk_config_init_defaults(&c);
    kk_assert_ok(kk_config_apply_preset(&c, KK_CONFIG_MODE_DEVELOPMENT));
    kk_assert_ok(kk_config_apply_logging(&c));
    assert_int_equal(kk_log_get_level("kernelkit.config"), KK_LOG_DEBUG);
    kk_assert_ok(kk_config_apply_preset(&c, KK_CONFIG_MODE_INFERENCE));
    kk_assert_ok(kk_config_apply_logging(&c));
    assert_int_equal(kk_log_get_level("kernelkit.cuda"), KK_LOG_WARN);

    /* KK_LOG set: the user's choice stands. */
    setenv("KK_LOG", "error", 1);
    kk_log_reset();
    kk_assert_ok(kk_config_apply_preset(&c, KK_CONFIG_MODE_DEVELOPMENT));
    kk_assert_ok(kk_config_apply_logging(&c));
    assert_int_equal(kk_log_get_level("kernelkit.config"), KK_LOG_ERROR);

    c.debug.log_level = (kk_log_level)42;
    kk_assert_status(kk_config_apply_logging(&c), KK_ERR_CONFIG);
    kk_assert_status(kk_config_apply_logging(NULL), KK_ERR_INVALID_ARGUMENT);

    if (copy)
        setenv("KK_LOG", copy, 1);
    else
        unsetenv("KK_LOG");
    free(copy);
    kk_log_reset();
}

int main(void) {
    clear_env(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_valid_and_as_documented),
        cmocka_unit_test(levels_set_what_the_docs_say),
        cmocka_unit_test(presets_set_what_the_docs_say),
        cmocka_unit_test(level_after_preset_overrides_its_numerics),
        cmocka_unit_test(bad_preset_and_level_arguments_change_nothing),
        cmocka_unit_test(names_and_parsers_round_trip),
        cmocka_unit_test(kernel_table_sets_updates_and_fills_up),
        cmocka_unit_test(validation_names_each_bad_field),
        cmocka_unit_test(validation_accepts_the_boundaries),
        cmocka_unit_test(json_round_trip_is_exact),
        cmocka_unit_test(json_has_every_documented_key),
        cmocka_unit_test(invalid_configs_are_not_written),
        cmocka_unit_test(fixture_files_load_as_written),
        cmocka_unit_test(hostile_fixtures_fail_cleanly),
        cmocka_unit_test(io_errors_name_the_path),
        cmocka_unit_test(deep_nesting_is_rejected),
        cmocka_unit_test(oversized_input_is_rejected),
        cmocka_unit_test(mutated_documents_never_crash),
        cmocka_unit_test_setup_teardown(env_overrides_each_field, clear_env, clear_env),
        cmocka_unit_test_setup_teardown(env_mode_then_level, clear_env, clear_env),
        cmocka_unit_test_setup_teardown(env_bad_values_name_the_variable, clear_env, clear_env),
        cmocka_unit_test_setup_teardown(env_precedence_defaults_level_file_variables, clear_env,
                                        clear_env),
        cmocka_unit_test_setup_teardown(env_config_file_errors, clear_env, clear_env),
        cmocka_unit_test(apply_logging_sets_the_library_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

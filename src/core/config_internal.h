/* Internal: helpers shared by the config_*.c files. */
#ifndef KK_CORE_CONFIG_INTERNAL_H
#define KK_CORE_CONFIG_INTERNAL_H

#include <stddef.h>

#include "core/error.h"
#include "kernelkit/config.h"

#define KK__CONFIG_LOGGER "kernelkit.config"

/* Record a KK_ERR_CONFIG for one field. The message is
 * "[source: ]path: <fmt...>" (source names a file or variable, may be NULL).
 * Returns KK_ERR_CONFIG. */
kk_status kk__config_fail(const char *function, const char *source, const char *path,
                          const char *value, const char *expected, const char *fmt, ...)
    KK__PRINTF(6, 7);

/* kk_config_validate with the failing entry point and a message prefix. */
kk_status kk__config_check(const kk_config *cfg, const char *function, const char *source);

/* Parse and apply `len` bytes of JSON (text[len] must be NUL) onto *cfg,
 * validate the result, and commit it only on success. */
kk_status kk__config_load_text(const char *text, size_t len, kk_config *cfg, const char *function,
                               const char *source);

/* Validate, then print the whole config as indented JSON into a malloc'd
 * string (*out; NULL on failure). */
kk_status kk__config_print(const kk_config *cfg, const char *function, char **out);

/* Read a whole config file (at most KK_CONFIG_MAX_FILE_BYTES) and load it.
 * `var` is NULL, or the variable that named the file ("KK_CONFIG"): errors
 * then name the variable. */
kk_status kk__config_load_path(const char *path, kk_config *cfg, const char *function,
                               const char *var);

/* Apply KK_MODE then KK_OPT_LEVEL; then the per-field variables. */
kk_status kk__config_env_presets(kk_config *cfg, const char *function);
kk_status kk__config_env_fields(kk_config *cfg, const char *function);

/* "auto" or an architecture name -> kk_arch ("auto" is KK_ARCH_UNKNOWN).
 * Returns 0 on success, -1 for an unknown name; records nothing. */
int kk__config_arch_from_text(const char *text, kk_arch *out);

/* "auto" for KK_ARCH_UNKNOWN, else kk_arch_name(). */
const char *kk__config_arch_text(kk_arch arch);

/* What kk__config_arch_from_text accepts, for error messages, written into
 * buf (256 bytes is plenty); returns buf. */
const char *kk__config_arch_expected(char *buf, size_t size);

/* Non-zero when `op` is a valid op name: [a-z][a-z0-9_]*, 1..31 chars. */
int kk__config_op_name_ok(const char *op);

/* Shortest "%.15g".."%.17g" text that reads back as `d`, for messages. */
void kk__config_format_double(char *dst, size_t size, double d);

/* Copy `text` into a short, printable form for error messages: control and
 * non-ASCII bytes become '?', long text is cut with "...". */
void kk__config_printable(char *dst, size_t size, const char *text);

#endif

/* Structured logging with named loggers.
 *
 * A record has a level, a logger name ("kernelkit.cuda.memory"), a message and
 * key=value fields. Text lines look like
 *   INFO kernelkit.cuda.device: backend initialized device="NVIDIA H200" cc=9.0 sms=132
 * and JSON lines (KK_LOG_FORMAT=json) like
 *   {"ts":1763779200.123,"level":"info","logger":"kernelkit.cuda.device",
 *    "msg":"backend initialized","device":"NVIDIA H200","cc":"9.0","sms":132}
 *
 * Levels are set per logger prefix: "kernelkit.cuda=trace" applies to
 * kernelkit.cuda and kernelkit.cuda.memory but not to kernelkit.cudax; the
 * longest matching prefix wins, else the default level (warn).
 * The environment is read once, at the first log call or configuration call:
 *   KK_LOG=debug                        default level
 *   KK_LOG=warn,kernelkit.cuda=trace    default plus per-logger levels
 *   KK_LOG_FORMAT=json                  JSON lines instead of text
 * By default records go to stderr; kk_log_set_sink replaces that.
 * All functions are thread-safe; a sink is never called concurrently. */
#ifndef KERNELKIT_LOG_H
#define KERNELKIT_LOG_H

#include <stddef.h>

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kk_log_level {
    KK_LOG_OFF = 0, /* as a threshold: nothing is logged */
    KK_LOG_ERROR = 1,
    KK_LOG_WARN = 2,
    KK_LOG_INFO = 3,
    KK_LOG_DEBUG = 4,
    KK_LOG_TRACE = 5
} kk_log_level;

typedef enum kk_log_field_type {
    KK_LOG_FIELD_STR = 0,
    KK_LOG_FIELD_INT,
    KK_LOG_FIELD_UINT,
    KK_LOG_FIELD_DOUBLE,
    KK_LOG_FIELD_BOOL
} kk_log_field_type;

typedef struct kk_log_field {
    const char *key;
    kk_log_field_type type;
    union {
        const char *s;
        long long i;
        unsigned long long u;
        double d;
        int b;
    } v;
} kk_log_field;

typedef struct kk_log_record {
    kk_log_level level;
    const char *logger;
    const char *message;
    const kk_log_field *fields;
    size_t field_count;
    double unix_time; /* seconds since the epoch */
    const char *line; /* the record formatted in the current format, no newline */
} kk_log_record;

typedef void (*kk_log_sink_fn)(const kk_log_record *record, void *user_data);

/* Replace the sink (NULL restores the default: one line to stderr). */
KK_API void kk_log_set_sink(kk_log_sink_fn sink, void *user_data);

/* Apply a KK_LOG-style spec ("info", "warn,kernelkit.cuda=trace"). On a bad
 * spec nothing changes and KK_ERR_INVALID_ARGUMENT names the bad part. */
KK_API kk_status kk_log_configure(const char *spec);

/* Level for a logger prefix; NULL or "" sets the default level. */
KK_API kk_status kk_log_set_level(const char *logger_prefix, kk_log_level level);

/* Effective level of a logger (longest matching prefix, else the default). */
KK_API kk_log_level kk_log_get_level(const char *logger);

/* Non-zero when a record of `level` from `logger` would be written. */
KK_API int kk_log_enabled(const char *logger, kk_log_level level);

typedef enum kk_log_format { KK_LOG_FORMAT_TEXT = 0, KK_LOG_FORMAT_JSON = 1 } kk_log_format;
KK_API void kk_log_set_format(kk_log_format format);
KK_API kk_log_format kk_log_get_format(void);

/* Back to the defaults (level warn, no per-logger levels, text, stderr), then
 * re-read KK_LOG and KK_LOG_FORMAT. */
KK_API void kk_log_reset(void);

/* "error", "warn", ... ; "off" for KK_LOG_OFF; "?" otherwise. */
KK_API const char *kk_log_level_name(kk_log_level level);

/* Parse "error", "warn"/"warning", "info", "debug", "trace", "off" (any case). */
KK_API kk_status kk_log_level_parse(const char *text, kk_log_level *out);

/* Write one record if enabled. Applications may log through this too. */
KK_API void kk_log_write(kk_log_level level, const char *logger, const char *message,
                         const kk_log_field *fields, size_t field_count);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_LOG_H */

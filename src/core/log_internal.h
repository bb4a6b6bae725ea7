/* Internal logging macros for library code (library code never prints).
 *
 *   KK_LOG(KK_LOG_INFO, "kernelkit.cuda.device", "backend initialized",
 *          KK_F_STR("device", name), KK_F_INT("sms", sms));
 *   KK_LOG0(KK_LOG_WARN, "kernelkit.cpu", "no OpenMP");
 *
 * Fields are built only when the record is enabled. */
#ifndef KK_CORE_LOG_INTERNAL_H
#define KK_CORE_LOG_INTERNAL_H

#include "kernelkit/log.h"

#define KK_F_STR(k, x) ((kk_log_field){.key = (k), .type = KK_LOG_FIELD_STR, .v.s = (x)})
#define KK_F_INT(k, x) ((kk_log_field){.key = (k), .type = KK_LOG_FIELD_INT, .v.i = (long long)(x)})
#define KK_F_UINT(k, x)                                                                            \
    ((kk_log_field){.key = (k), .type = KK_LOG_FIELD_UINT, .v.u = (unsigned long long)(x)})
#define KK_F_DBL(k, x) ((kk_log_field){.key = (k), .type = KK_LOG_FIELD_DOUBLE, .v.d = (double)(x)})
#define KK_F_BOOL(k, x) ((kk_log_field){.key = (k), .type = KK_LOG_FIELD_BOOL, .v.b = !!(x)})

#define KK_LOG(level, logger, message, ...)                                                        \
    do {                                                                                           \
        if (kk_log_enabled((logger), (level))) {                                                   \
            const kk_log_field kk__fields[] = {__VA_ARGS__};                                       \
            kk_log_write((level), (logger), (message), kk__fields,                                 \
                         sizeof kk__fields / sizeof kk__fields[0]);                                \
        }                                                                                          \
    } while (0)

#define KK_LOG0(level, logger, message)                                                            \
    do {                                                                                           \
        if (kk_log_enabled((logger), (level)))                                                     \
            kk_log_write((level), (logger), (message), NULL, 0);                                   \
    } while (0)

#endif

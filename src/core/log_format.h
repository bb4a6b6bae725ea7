/* Internal: turning a log record into one text or JSON line (log_format.c). */
#ifndef KK_CORE_LOG_FORMAT_H
#define KK_CORE_LOG_FORMAT_H

#include <stddef.h>

#include "kernelkit/log.h"

/* Format `record` into buf (capacity `cap`, NUL-terminated, no newline); a line
 * that does not fit is cut cleanly and marked truncated. Returns its length. */
size_t kk__log_format_line(const kk_log_record *record, kk_log_format format, char *buf,
                           size_t cap);

#endif

/* Internal: recording failures into the thread-local last error.
 * Library code reports every failure through these, then returns the status. */
#ifndef KK_CORE_ERROR_H
#define KK_CORE_ERROR_H

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KK__PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define KK__PRINTF(fmt_idx, arg_idx)
#endif

/* General form. Any string may be NULL. When `fmt` is NULL the message is
 * built from the fields: "function: argument = value: expected EXPECTED".
 * Otherwise the message is "function: <fmt...>". Returns `status`. */
kk_status kk__set_error(kk_status status, const char *function, const char *argument,
                        const char *value, const char *expected, const char *cuda_error,
                        const char *fmt, ...) KK__PRINTF(7, 8);

/* A bad argument: kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "n",
 * "at least 1", "%d", n) gives "kk_foo: n = 0: expected at least 1". */
kk_status kk__arg_error(kk_status status, const char *function, const char *argument,
                        const char *expected, const char *value_fmt, ...) KK__PRINTF(5, 6);

/* A free-form failure: "function: message". */
kk_status kk__error(kk_status status, const char *function, const char *fmt, ...) KK__PRINTF(3, 4);

/* A failed CUDA call: the message ends with "(cudaErrorX: description)". */
kk_status kk__cuda_error(kk_status status, const char *function, const char *cuda_error,
                         const char *cuda_description, const char *fmt, ...) KK__PRINTF(5, 6);

/* Check a pointer argument; evaluates to the status to return, KK_OK if fine. */
#define KK__CHECK_NOT_NULL(ptr)                                                                    \
    ((ptr) ? KK_OK                                                                                 \
           : kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, #ptr, "a non-NULL pointer", "NULL"))

#ifdef __cplusplus
}
#endif
#endif

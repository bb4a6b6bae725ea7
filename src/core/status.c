/* Status strings, the error tree, and the thread-local last error. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct status_row {
    kk_status code;
    kk_status parent;
    const char *name;
    const char *text;
} status_row;

/* One row per code: the tree lives here and nowhere else. */
static const status_row k_rows[] = {
    {KK_OK, KK_OK, "KK_OK", "success"},
    {KK_ERR_BACKEND, KK_OK, "KK_ERR_BACKEND", "backend error"},
    {KK_ERR_DEVICE, KK_ERR_BACKEND, "KK_ERR_DEVICE", "device error"},
    {KK_ERR_CUDA_UNAVAILABLE, KK_ERR_DEVICE, "KK_ERR_CUDA_UNAVAILABLE", "CUDA not available"},
    {KK_ERR_DEVICE_FAILURE, KK_ERR_DEVICE, "KK_ERR_DEVICE_FAILURE", "CUDA device failure"},
    {KK_ERR_KERNEL_LAUNCH, KK_ERR_DEVICE, "KK_ERR_KERNEL_LAUNCH", "kernel launch failed"},
    {KK_ERR_INVALID_COMPUTE_CAPABILITY, KK_ERR_DEVICE, "KK_ERR_INVALID_COMPUTE_CAPABILITY",
     "invalid compute capability"},
    {KK_ERR_INVALID_ARCHITECTURE, KK_ERR_DEVICE, "KK_ERR_INVALID_ARCHITECTURE",
     "invalid architecture"},
    {KK_ERR_MEMORY, KK_ERR_BACKEND, "KK_ERR_MEMORY", "memory error"},
    {KK_ERR_ALLOCATION, KK_ERR_MEMORY, "KK_ERR_ALLOCATION", "memory allocation failed"},
    {KK_ERR_OUT_OF_MEMORY, KK_ERR_ALLOCATION, "KK_ERR_OUT_OF_MEMORY", "out of memory"},
    {KK_ERR_CONFIG, KK_ERR_BACKEND, "KK_ERR_CONFIG", "configuration error"},
    {KK_ERR_INVALID_ARGUMENT, KK_ERR_BACKEND, "KK_ERR_INVALID_ARGUMENT", "invalid argument"},
    {KK_ERR_UNSUPPORTED, KK_ERR_BACKEND, "KK_ERR_UNSUPPORTED", "unsupported"},
    {KK_ERR_QUANTIZATION, KK_ERR_BACKEND, "KK_ERR_QUANTIZATION", "quantization error"},
    {KK_ERR_ATTENTION, KK_ERR_BACKEND, "KK_ERR_ATTENTION", "attention error"},
    {KK_ERR_MODEL_OPTIMIZATION, KK_ERR_BACKEND, "KK_ERR_MODEL_OPTIMIZATION",
     "model optimization error"},
    {KK_ERR_IO, KK_ERR_BACKEND, "KK_ERR_IO", "I/O error"},
    {KK_ERR_INTERNAL, KK_ERR_BACKEND, "KK_ERR_INTERNAL", "internal error"},
};

static const status_row *find_row(kk_status code) {
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++)
        if (k_rows[i].code == code) return &k_rows[i];
    return NULL;
}

const char *kk_status_str(kk_status status) {
    const status_row *row = find_row(status);
    return row ? row->text : "unknown status";
}

const char *kk_status_name(kk_status status) {
    const status_row *row = find_row(status);
    return row ? row->name : "KK_ERR_UNKNOWN";
}

kk_status kk_status_parent(kk_status status) {
    const status_row *row = find_row(status);
    return row ? row->parent : KK_OK;
}

int kk_status_is(kk_status status, kk_status ancestor) {
    if (ancestor == KK_OK) return status == KK_OK;
    if (!find_row(status)) return 0;
    for (kk_status s = status; s != KK_OK; s = kk_status_parent(s))
        if (s == ancestor) return 1;
    return 0;
}

/* ---- thread-local last error ---- */

enum { FIELD_LEN = 512, MESSAGE_LEN = 1024 }; /* FIELD_LEN: kk_op_find lists every op name */

typedef struct error_store {
    kk_error_info info;
    char function[FIELD_LEN];
    char argument[FIELD_LEN];
    char value[FIELD_LEN];
    char expected[FIELD_LEN];
    char cuda_error[FIELD_LEN];
    char message[MESSAGE_LEN];
} error_store;

static _Thread_local error_store t_error;

static void copy_field(char *dst, const char *src) {
    snprintf(dst, FIELD_LEN, "%s", src ? src : "");
}

static void point_info_at_buffers(void) {
    t_error.info.function = t_error.function;
    t_error.info.argument = t_error.argument;
    t_error.info.value = t_error.value;
    t_error.info.expected = t_error.expected;
    t_error.info.cuda_error = t_error.cuda_error;
    t_error.info.message = t_error.message;
}

void kk_clear_error(void) {
    memset(&t_error, 0, sizeof t_error);
    point_info_at_buffers();
}

const kk_error_info *kk_last_error(void) {
    point_info_at_buffers();
    return &t_error.info;
}

const char *kk_last_error_message(void) { return kk_last_error()->message; }

static kk_status store(kk_status status, const char *function, const char *argument,
                       const char *value, const char *expected, const char *cuda_error,
                       const char *fmt, va_list ap) {
    kk_clear_error();
    t_error.info.status = status;
    copy_field(t_error.function, function);
    copy_field(t_error.argument, argument);
    copy_field(t_error.value, value);
    copy_field(t_error.expected, expected);
    copy_field(t_error.cuda_error, cuda_error);

    char body[MESSAGE_LEN];
    if (fmt) {
        vsnprintf(body, sizeof body, fmt, ap);
    } else if (argument && *argument) {
        snprintf(body, sizeof body, "%s = %s: expected %s", argument,
                 value && *value ? value : "(none)", expected && *expected ? expected : "?");
    } else {
        snprintf(body, sizeof body, "%s", kk_status_str(status));
    }
    if (function && *function)
        snprintf(t_error.message, MESSAGE_LEN, "%s: %.900s", function, body);
    else
        snprintf(t_error.message, MESSAGE_LEN, "%.1000s", body);
    return status;
}

kk_status kk__set_error(kk_status status, const char *function, const char *argument,
                        const char *value, const char *expected, const char *cuda_error,
                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    store(status, function, argument, value, expected, cuda_error, fmt, ap);
    va_end(ap);
    return status;
}

kk_status kk__arg_error(kk_status status, const char *function, const char *argument,
                        const char *expected, const char *value_fmt, ...) {
    char value[FIELD_LEN];
    va_list ap;
    va_start(ap, value_fmt);
    vsnprintf(value, sizeof value, value_fmt, ap);
    va_end(ap);
    return kk__set_error(status, function, argument, value, expected, NULL, NULL);
}

kk_status kk__error(kk_status status, const char *function, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    store(status, function, NULL, NULL, NULL, NULL, fmt, ap);
    va_end(ap);
    return status;
}

kk_status kk__cuda_error(kk_status status, const char *function, const char *cuda_error,
                         const char *cuda_description, const char *fmt, ...) {
    char body[MESSAGE_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    return kk__set_error(status, function, NULL, NULL, NULL, cuda_error, "%.700s (%s: %.200s)",
                         body, cuda_error ? cuda_error : "?",
                         cuda_description ? cuda_description : "");
}

/* Tensor descriptors: checked size arithmetic, shape validation, devices,
 * kk_tensor_wrap and the queries. Owned memory, kk_tensor_create/destroy and
 * copies are in src/backend/tensor_storage.c; views in tensor_view.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/tensor_borrow.h"
#include "core/tensor_internal.h"

/* ---- checked arithmetic ---- */

int kk__mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

int kk__add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

kk_status kk__bytes_checked(const char *func, const char *argument, kk_dtype dtype, int64_t count,
                            size_t *bytes) {
    int bits = kk_dtype_bits(dtype);
    /* count * bits / 8, rounded up, without forming count * bits. */
    int64_t whole = 0;
    if (count < 0 || !kk__mul_i64(count / 8, bits, &whole) ||
        !kk__add_i64(whole, kk__ceil_div((count % 8) * bits, 8), &whole) ||
        (uint64_t)whole > (uint64_t)SIZE_MAX)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument,
                             "a size whose byte count fits size_t", "%lld elements of %s",
                             (long long)count, kk_dtype_name(dtype));
    *bytes = (size_t)whole;
    return KK_OK;
}

/* ---- shapes ---- */

static kk_status check_dtype_ndim(const char *func, kk_dtype dtype, int ndim) {
    if ((int)dtype < 0 || dtype >= KK_DTYPE_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dtype", "a kk_dtype value", "%d",
                             (int)dtype);
    if (ndim < 0 || ndim > KK_TENSOR_MAX_DIMS)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "ndim", "0 to 8 (KK_TENSOR_MAX_DIMS)",
                             "%d", ndim);
    return KK_OK;
}

kk_status kk__check_shape(const char *func, kk_dtype dtype, int ndim, const int64_t *shape,
                          int64_t *numel, size_t *bytes) {
    kk_status st = check_dtype_ndim(func, dtype, ndim);
    if (st) return st;
    if (ndim > 0 && !shape)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "shape",
                             "a non-NULL pointer when ndim > 0", "NULL");
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "shape", "sizes >= 0",
                                 "shape[%d] = %lld", d, (long long)shape[d]);
        if (!kk__mul_i64(n, shape[d], &n))
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "shape",
                                 "an element count that fits int64_t",
                                 "overflow at shape[%d] = %lld", d, (long long)shape[d]);
    }
    size_t b = 0;
    st = kk__bytes_checked(func, "shape", dtype, n, &b);
    if (st) return st;
    if (numel) *numel = n;
    if (bytes) *bytes = b;
    return KK_OK;
}

void kk__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1; /* cannot overflow: the shape was checked */
    }
}

int64_t kk__tensor_span(const kk_tensor *t) {
    int64_t last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return 0;
        last += (t->shape[d] - 1) * t->strides[d];
    }
    return last + 1;
}

size_t kk__tensor_span_bytes(const kk_tensor *t) {
    return kk_dtype_bytes(t->dtype, (size_t)kk__tensor_span(t));
}

kk_status kk__check_e2m1_layout(const char *func, const char *argument, const kk_tensor *t,
                                int64_t element_offset) {
    if (t->dtype != KK_DTYPE_E2M1) return KK_OK;
    int last = t->ndim - 1;
    if (last >= 0 && t->shape[last] > 1 && t->strides[last] != 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument,
                             "a stride-1 last dimension (packed e2m1 rows stay contiguous)",
                             "last stride %lld", (long long)t->strides[last]);
    if (element_offset % 2 != 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument,
                             "a first element at a byte boundary (even element offset) for "
                             "packed e2m1",
                             "element offset %lld", (long long)element_offset);
    return KK_OK;
}

/* ---- devices ---- */

kk_status kk__tensor_device(const char *func, const char *spec, kk_backend_kind *kind, int *index,
                            char canonical[16]) {
    if (!spec)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "device",
                             "\"cpu\", \"cuda\" or \"cuda:N\"", "NULL");
    const kk__backend *b = NULL;
    int i = 0;
    kk_status st = kk__device_resolve(func, spec, &b, &i);
    if (st) {
        /* Re-record under the name our callers know the argument by. */
        char msg[900], expected[200], cuda[64];
        const kk_error_info *e = kk_last_error();
        const char *tail = strstr(e->message, ": ");
        snprintf(msg, sizeof msg, "%s", tail ? tail + 2 : e->message);
        snprintf(expected, sizeof expected, "%s", e->expected);
        snprintf(cuda, sizeof cuda, "%s", e->cuda_error);
        return kk__set_error(st, func, "device", spec, expected[0] ? expected : NULL,
                             cuda[0] ? cuda : NULL, "device: %s", msg);
    }
    *kind = b->kind;
    *index = i;
    if (b->kind == KK_BACKEND_CPU)
        snprintf(canonical, 16, "cpu");
    else
        snprintf(canonical, 16, "%s:%d", b->name, i);
    return KK_OK;
}

kk_status kk__tensor_rethrow(const char *func, kk_status st) {
    const kk_error_info *e = kk_last_error();
    char arg[64], value[160], expected[200], cuda[64], msg[900];
    const char *tail = strstr(e->message, ": ");
    snprintf(arg, sizeof arg, "%s", e->argument);
    snprintf(value, sizeof value, "%s", e->value);
    snprintf(expected, sizeof expected, "%s", e->expected);
    snprintf(cuda, sizeof cuda, "%s", e->cuda_error);
    snprintf(msg, sizeof msg, "%s", tail ? tail + 2 : e->message);
    return kk__set_error(st, func, arg[0] ? arg : NULL, value[0] ? value : NULL,
                         expected[0] ? expected : NULL, cuda[0] ? cuda : NULL, "%s", msg);
}

/* ---- descriptors ---- */

kk_status kk__check_tensor(const char *func, const char *argument, const kk_tensor *t) {
    if (!t) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument, "a tensor", "NULL");
    if (t->ndim < 0 || t->ndim > KK_TENSOR_MAX_DIMS || (int)t->dtype < 0 ||
        t->dtype >= KK_DTYPE_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument,
                             "a tensor made by kk_tensor_create/wrap", "ndim %d, dtype %d", t->ndim,
                             (int)t->dtype);
    return KK_OK;
}

kk_tensor *kk__tensor_new_desc(const char *func, kk_dtype dtype, int ndim, const int64_t *shape,
                               const int64_t *strides, kk_backend_kind kind, int index,
                               const char *device) {
    kk_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation of a tensor descriptor failed");
        return NULL;
    }
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    if (strides)
        for (int d = 0; d < ndim; d++) t->strides[d] = strides[d];
    else
        kk__contiguous_strides(ndim, shape, t->strides);
    t->device_kind = kind;
    t->device_index = index;
    snprintf(t->device, sizeof t->device, "%s", device);
    return t;
}

kk_tensor *kk__tensor_borrow(kk_tensor *t, const kk_tensor *like, kk_dtype dtype, int ndim,
                             const int64_t *shape, void *data) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    kk__contiguous_strides(ndim, shape, t->strides);
    t->data = data;
    t->device_kind = like->device_kind;
    t->device_index = like->device_index;
    memcpy(t->device, like->device, sizeof t->device);
    return t;
}

kk_tensor *kk__tensor_clone_desc(const char *func, const kk_tensor *t) {
    kk_tensor *v = malloc(sizeof *v);
    if (!v) {
        kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation of a tensor descriptor failed");
        return NULL;
    }
    *v = *t;
    kk__storage_retain(v->storage);
    return v;
}

void kk__storage_retain(kk__tensor_storage *s) {
    if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

/* The largest element offset must fit int64_t: a wrapped tensor's strides are
 * the caller's, so they are checked like a shape. */
static kk_status check_strides(const char *func, int ndim, const int64_t *shape,
                               const int64_t *strides) {
    int64_t last = 0, term = 0;
    for (int d = 0; d < ndim; d++) {
        if (strides[d] < 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "strides",
                                 "strides >= 0 (in elements)", "strides[%d] = %lld", d,
                                 (long long)strides[d]);
        if (shape[d] == 0) return KK_OK;
        if (!kk__mul_i64(shape[d] - 1, strides[d], &term) || !kk__add_i64(last, term, &last) ||
            last == INT64_MAX)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "strides",
                                 "a memory span that fits int64_t",
                                 "overflow at strides[%d] = %lld", d, (long long)strides[d]);
    }
    return KK_OK;
}

kk_status kk_tensor_wrap(const char *device, kk_dtype dtype, int ndim, const int64_t *shape,
                         const int64_t *strides, void *data, kk_tensor **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    *out = NULL;
    int64_t numel = 0;
    if ((st = kk__check_shape(__func__, dtype, ndim, shape, &numel, NULL))) return st;
    if (strides && (st = check_strides(__func__, ndim, shape, strides))) return st;
    if (!data && numel > 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "data",
                             "a non-NULL pointer for a non-empty tensor", "NULL");
    kk_backend_kind kind;
    int index;
    char canon[16];
    if ((st = kk__tensor_device(__func__, device, &kind, &index, canon))) return st;
    kk_tensor *t = kk__tensor_new_desc(__func__, dtype, ndim, shape, strides, kind, index, canon);
    if (!t) return KK_ERR_OUT_OF_MEMORY;
    t->data = data;
    if ((st = kk__check_e2m1_layout(__func__, "strides", t, 0))) {
        free(t);
        return st;
    }
    *out = t;
    return KK_OK;
}

/* ---- queries ---- */

int64_t kk_tensor_numel(const kk_tensor *t) {
    if (!t) return 0;
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

size_t kk_tensor_nbytes(const kk_tensor *t) {
    return t ? kk_dtype_bytes(t->dtype, (size_t)kk_tensor_numel(t)) : 0;
}

int kk_tensor_is_read_only(const kk_tensor *t) { return t && t->storage && t->storage->read_only; }

kk_status kk__check_writable(const char *func, const char *argument, const kk_tensor *t) {
    if (!t->storage || !t->storage->read_only) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument,
                         "a writable tensor (this memory is read-only: a DLPack tensor flagged so, "
                         "or a model's weights)",
                         "read-only");
}

int kk_tensor_is_contiguous(const kk_tensor *t) {
    if (!t) return 0;
    if (kk_tensor_numel(t) == 0) return 1;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect) return 0;
        expect *= t->shape[d];
    }
    return 1;
}

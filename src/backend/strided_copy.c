/* Strided copies that stay on their device: kk_tensor_copy hands a copy
 * between two tensors of one GPU to the backend's strided_copy (a kernel)
 * instead of staging both spans through the host. This file reduces the copy
 * to its simplest job (strided_copy.h); the backend only runs it. */
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/strided_copy.h"
#include "core/error.h"
#include "core/tensor_internal.h"

/* Drop sizes of 1 and merge a dimension into the one outside it when both
 * tensors step over it contiguously. */
static void merge(kk__strided_job *j) {
    int n = 0;
    for (int k = 0; k < j->ndim; k++) {
        if (j->shape[k] == 1) continue;
        if (n > 0 && j->dst_strides[n - 1] == j->shape[k] * j->dst_strides[k] &&
            j->src_strides[n - 1] == j->shape[k] * j->src_strides[k]) {
            j->shape[n - 1] *= j->shape[k];
            j->dst_strides[n - 1] = j->dst_strides[k];
            j->src_strides[n - 1] = j->src_strides[k];
            continue;
        }
        j->shape[n] = j->shape[k];
        j->dst_strides[n] = j->dst_strides[k];
        j->src_strides[n] = j->src_strides[k];
        n++;
    }
    if (n == 0) { /* one element */
        j->shape[0] = 1;
        j->dst_strides[0] = j->src_strides[0] = 1;
        n = 1;
    }
    for (int k = n; k < KK__STRIDED_MAX_DIMS; k++)
        j->shape[k] = j->dst_strides[k] = j->src_strides[k] = 0;
    j->ndim = n;
}

/* Group k elements of a last dimension contiguous in both tensors into one of
 * k * elem_bytes bytes (at most 16: one vector load) when everything divides. */
static void widen(kk__strided_job *j) {
    const int last = j->ndim - 1;
    if (j->dst_strides[last] != 1 || j->src_strides[last] != 1) return;
    for (int w = 16; w > j->elem_bytes; w /= 2) {
        const int64_t k = w / j->elem_bytes;
        int ok = j->shape[last] % k == 0 && (uintptr_t)j->dst % (uintptr_t)w == 0 &&
                 (uintptr_t)j->src % (uintptr_t)w == 0;
        for (int d = 0; ok && d < last; d++)
            ok = j->dst_strides[d] % k == 0 && j->src_strides[d] % k == 0;
        if (!ok) continue;
        j->shape[last] /= k;
        for (int d = 0; d < last; d++) j->dst_strides[d] /= k, j->src_strides[d] /= k;
        j->elem_bytes = w;
        return;
    }
}

int kk__strided_job_make(kk__strided_job *j, void *dst, const void *src, int elem_bytes, int ndim,
                         const int64_t *shape, const int64_t *dst_strides,
                         const int64_t *src_strides) {
    memset(j, 0, sizeof *j);
    if (ndim < 0 || ndim > KK__STRIDED_MAX_DIMS) return 0;
    if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) return 0;
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] <= 0) return 0;
        n *= shape[k];
        j->shape[k] = shape[k];
        j->dst_strides[k] = dst_strides[k];
        j->src_strides[k] = src_strides[k];
    }
    j->dst = dst;
    j->src = src;
    j->ndim = ndim;
    j->elem_bytes = elem_bytes;
    merge(j);
    widen(j);
    merge(j); /* a widened last dimension of size 1 goes */
    j->n = n * elem_bytes / j->elem_bytes;
    return 1;
}

static kk_status device_copy(const char *func, kk_tensor *dst, const kk_tensor *src,
                             kk_stream stream, int wait, int *handled) {
    *handled = 0;
    if (dst->device_kind == KK_BACKEND_CPU || dst->device_kind != src->device_kind ||
        dst->device_index != src->device_index)
        return KK_OK;
    const int bits = kk_dtype_bits(src->dtype);
    if (bits < 8) return KK_OK; /* packed e2m1: nibbles, staged */
    const kk__backend *b = kk__backend_get(dst->device_kind);
    if (!b || !b->mem || !b->mem->strided_copy) return KK_OK;
    kk__strided_job j;
    if (!kk__strided_job_make(&j, dst->data, src->data, bits / 8, src->ndim, src->shape,
                              dst->strides, src->strides))
        return KK_OK;
    *handled = 1;
    kk_status st = b->mem->strided_copy(b->context, dst->device_index, &j, stream, wait, func);
    return st ? kk__tensor_rethrow(func, st) : KK_OK;
}

kk_status kk__tensor_device_copy(const char *func, kk_tensor *dst, const kk_tensor *src,
                                 int *handled) {
    return device_copy(func, dst, src, NULL, 1, handled);
}

kk_status kk__tensor_copy_on(kk_tensor *dst, const kk_tensor *src, kk_stream stream) {
    static const char func[] = "kk_tensor_copy";
    int handled = 0;
    kk_status st = kk__check_tensor(func, "dst", dst);
    if (!st) st = kk__check_tensor(func, "src", src);
    int same = !st && dst->dtype == src->dtype && dst->ndim == src->ndim;
    for (int d = 0; same && d < src->ndim; d++)
        same = dst->shape[d] == src->shape[d] && (dst->shape[d] == 1 || dst->strides[d] != 0);
    if (same && kk_tensor_numel(src) > 0 && !kk_tensor_is_read_only(dst))
        st = device_copy(func, dst, src, stream, 0, &handled);
    return handled ? st : kk_tensor_copy(dst, src); /* its checks and messages otherwise */
}

/* Tensors that own memory (through the memory manager), their release, and
 * kk_tensor_copy between any devices and layouts. */
#include <stdlib.h>
#include <string.h>

#include "backend/strided_copy.h"
#include "core/error.h"
#include "core/tensor_internal.h"
#include "kernelkit/memory.h"

/* ---- storage ---- */

void kk__storage_release(kk__tensor_storage *s) {
    if (!s) return;
    /* acq_rel: the thread that frees sees every other thread's last use. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
    if (s->ptr) (void)kk_mem_free(s->ptr); /* a pointer we allocated: cannot fail */
    if (s->release) s->release(s->release_ctx);
    free(s);
}

kk_status kk_tensor_create(const char *device, kk_dtype dtype, int ndim, const int64_t *shape,
                           kk_tensor **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    *out = NULL;
    size_t bytes = 0;
    kk_backend_kind kind;
    int index;
    char canon[16];
    if ((st = kk__check_shape(__func__, dtype, ndim, shape, NULL, &bytes)) ||
        (st = kk__tensor_device(__func__, device, &kind, &index, canon)))
        return st;
    kk_tensor *t = kk__tensor_new_desc(__func__, dtype, ndim, shape, NULL, kind, index, canon);
    kk__tensor_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t);
        free(s);
        return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "host allocation of a tensor failed");
    }
    atomic_init(&s->refs, 1);
    s->bytes = bytes;
    memcpy(s->device, canon, sizeof s->device);
    if (bytes > 0 && (st = kk_mem_alloc(canon, bytes, &s->ptr))) {
        free(t);
        free(s);
        return kk__tensor_rethrow(__func__, st);
    }
    t->storage = s;
    t->data = s->ptr;
    *out = t;
    return KK_OK;
}

void kk_tensor_destroy(kk_tensor *t) {
    if (!t) return;
    kk__storage_release(t->storage);
    free(t);
}

/* ---- copies ---- */

static kk_status check_copy_args(const char *func, const kk_tensor *dst, const kk_tensor *src) {
    kk_status st;
    if ((st = kk__check_tensor(func, "dst", dst)) || (st = kk__check_tensor(func, "src", src)))
        return st;
    if ((st = kk__check_writable(func, "dst", dst))) return st;
    if (dst->dtype != src->dtype)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dst", "src's dtype",
                             "dtype %s (src is %s)", kk_dtype_name(dst->dtype),
                             kk_dtype_name(src->dtype));
    int same = dst->ndim == src->ndim;
    for (int d = 0; same && d < src->ndim; d++) same = dst->shape[d] == src->shape[d];
    if (!same)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dst", "src's shape",
                             "a shape with %d dimensions that differs", dst->ndim);
    for (int d = 0; d < dst->ndim; d++)
        if (dst->shape[d] > 1 && dst->strides[d] == 0)
            return kk__arg_error(
                KK_ERR_INVALID_ARGUMENT, func, "dst", "distinct memory for every element",
                "stride 0 on dimension %d of size %lld", d, (long long)dst->shape[d]);
    return KK_OK;
}

/* A host descriptor for t: t itself on the CPU; otherwise a copy of the
 * descriptor over a host buffer holding t's whole span, filled from the
 * device when `fill`. *staging is the buffer to free (NULL when none). */
static kk_status host_view(const char *func, const kk_tensor *t, int fill, kk_tensor *view,
                           void **staging) {
    *view = *t;
    *staging = NULL;
    if (t->device_kind == KK_BACKEND_CPU) return KK_OK;
    size_t bytes = kk__tensor_span_bytes(t);
    kk_status st = kk_mem_alloc("cpu", bytes, staging);
    if (!st && fill) st = kk_mem_copy(*staging, "cpu", t->data, t->device, bytes);
    if (st) return kk__tensor_rethrow(func, st);
    view->data = *staging;
    view->device_kind = KK_BACKEND_CPU;
    return KK_OK;
}

/* Strided copy through the host: src's span comes up, dst's span comes up
 * (to keep what lies between its elements), goes down again after. */
static kk_status staged_copy(const char *func, kk_tensor *dst, const kk_tensor *src) {
    kk_tensor hs, hd;
    void *ss = NULL, *ds = NULL;
    int whole =
        kk_tensor_is_contiguous(dst) && !(dst->dtype == KK_DTYPE_E2M1 && kk_tensor_numel(dst) % 2);
    kk_status st = host_view(func, src, 1, &hs, &ss);
    if (!st) st = host_view(func, dst, !whole, &hd, &ds);
    if (!st) {
        kk__host_strided_copy(&hd, &hs);
        if (ds) st = kk_mem_copy(dst->data, dst->device, ds, "cpu", kk__tensor_span_bytes(dst));
        if (st) st = kk__tensor_rethrow(func, st);
    }
    (void)kk_mem_free(ss);
    (void)kk_mem_free(ds);
    return st;
}

kk_status kk_tensor_copy(kk_tensor *dst, const kk_tensor *src) {
    kk_status st = check_copy_args(__func__, dst, src);
    if (st) return st;
    int64_t n = kk_tensor_numel(src);
    if (n == 0) return KK_OK;
    /* Whole bytes, unless a packed e2m1 tensor ends mid-byte: the other nibble
     * may be a neighbour's element, so that case goes element-wise. */
    int odd_nibble = src->dtype == KK_DTYPE_E2M1 && n % 2;
    if (kk_tensor_is_contiguous(dst) && kk_tensor_is_contiguous(src) && !odd_nibble) {
        st = kk_mem_copy(dst->data, dst->device, src->data, src->device, kk_tensor_nbytes(src));
        return st ? kk__tensor_rethrow(__func__, st) : KK_OK;
    }
    if (dst->device_kind == KK_BACKEND_CPU && src->device_kind == KK_BACKEND_CPU) {
        kk__host_strided_copy(dst, src);
        return KK_OK;
    }
    int handled = 0; /* both on one GPU: its strided-copy kernel, no host round trip */
    st = kk__tensor_device_copy(__func__, dst, src, &handled);
    if (handled) return st;
    return staged_copy(__func__, dst, src);
}

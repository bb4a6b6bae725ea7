/* Internal: tensor descriptors, storage and the helpers shared by
 * src/core/tensor*.c (descriptors, views, sizes) and src/backend/tensor_storage.c
 * (owned memory, copies). Host C only. */
#ifndef KK_CORE_TENSOR_INTERNAL_H
#define KK_CORE_TENSOR_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Owned or external memory, shared by a tensor and all its views. The last
 * release frees `ptr` through the memory manager, or, for external memory
 * (`ptr` NULL, a DLPack producer's: src/backend/tensor_dlpack.c), calls
 * `release(release_ctx)` when set; then frees the struct itself. */
struct kk__tensor_storage {
    atomic_int refs;
    void *ptr; /* from kk_mem_alloc; NULL for an empty allocation or external memory */
    size_t bytes;
    char device[16];
    void (*release)(void *ctx); /* external memory: called once by the last release */
    void *release_ctx;
    int read_only; /* writes through any view are refused (kk__check_writable) */
};

/* One more tensor uses `s` (NULL: nothing). */
void kk__storage_retain(kk__tensor_storage *s);

/* One tensor less; frees the memory on the last one (src/backend). */
void kk__storage_release(kk__tensor_storage *s);

/* ---- checked arithmetic: 0 on overflow (the result is then unspecified) ---- */
int kk__mul_i64(int64_t a, int64_t b, int64_t *out);
int kk__add_i64(int64_t a, int64_t b, int64_t *out);

/* ceil(a / b) for a >= 0, b > 0. */
static inline int64_t kk__ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Bytes of `count` elements of `dtype` packed; KK_ERR_INVALID_ARGUMENT naming
 * `argument` on overflow. */
kk_status kk__bytes_checked(const char *func, const char *argument, kk_dtype dtype, int64_t count,
                            size_t *bytes);

/* Validate dtype (any valid kk_dtype), ndim and a shape: sizes >= 0, element
 * count and packed byte size representable. Records errors naming `func`. */
kk_status kk__check_shape(const char *func, kk_dtype dtype, int ndim, const int64_t *shape,
                          int64_t *numel, size_t *bytes);

/* Row-major strides for `shape`. */
void kk__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/* Elements the tensor's memory spans from `data`: 1 + the largest element
 * offset; 0 when empty. Cannot overflow for a tensor built by this library. */
int64_t kk__tensor_span(const kk_tensor *t);

/* Bytes spanned (packed dtypes round up). */
size_t kk__tensor_span_bytes(const kk_tensor *t);

/* e2m1 rules: last stride 1 unless that dim has size <= 1. KK_OK or an error
 * naming func and `argument`, with `why` saying what made it so. */
kk_status kk__check_e2m1_layout(const char *func, const char *argument, const kk_tensor *t,
                                int64_t element_offset);

/* Resolve a device spec (checking the backend is available and the index
 * exists) and write its canonical form ("cpu", "cuda:N"). */
kk_status kk__tensor_device(const char *func, const char *spec, kk_backend_kind *kind, int *index,
                            char canonical[16]);

/* Re-record the last error (set by a callee such as kk_mem_alloc) as coming
 * from `func`, keeping its fields and message; returns st. */
kk_status kk__tensor_rethrow(const char *func, kk_status st);

/* KK_OK unless t's memory is read-only (kk_tensor_is_read_only): then
 * KK_ERR_INVALID_ARGUMENT naming func and `argument`. t must not be NULL. */
kk_status kk__check_writable(const char *func, const char *argument, const kk_tensor *t);

/* Non-NULL tensor with a sane descriptor (ndim, dtype); names `argument`. */
kk_status kk__check_tensor(const char *func, const char *argument, const kk_tensor *t);

/* A heap copy of t's descriptor sharing (and retaining) its storage, or NULL
 * when the host is out of memory (recorded as KK_ERR_OUT_OF_MEMORY for func). */
kk_tensor *kk__tensor_clone_desc(const char *func, const kk_tensor *t);

/* A new descriptor (fields zeroed but for the ones given); NULL on host OOM. */
kk_tensor *kk__tensor_new_desc(const char *func, kk_dtype dtype, int ndim, const int64_t *shape,
                               const int64_t *strides, kk_backend_kind kind, int index,
                               const char *device);

/* Element-wise strided copy between two HOST descriptors of the same dtype and
 * shape (data pointers must be host memory). Never fails. */
void kk__host_strided_copy(const kk_tensor *dst, const kk_tensor *src);

#ifdef __cplusplus
}
#endif
#endif

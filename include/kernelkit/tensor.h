/* Tensors: a typed, strided view of memory on one device.
 *
 *   kk_tensor *t;
 *   int64_t shape[2] = {128, 256};
 *   if (kk_tensor_create("cuda:0", KK_DTYPE_BF16, 2, shape, &t) != KK_OK) ...
 *   kk_tensor *row;  kk_tensor_slice(t, 0, 5, 6, 1, &row);   // no copy
 *   kk_tensor_destroy(t);   // row stays valid: the storage is refcounted
 *   kk_tensor_destroy(row); // frees the memory
 *
 * A kk_tensor is a public struct with READ-ONLY fields (as in DLPack and ggml):
 * read them freely, never write them; create and destroy tensors only through
 * these functions. Memory is either
 *   - owned: allocated by kk_tensor_create through the memory manager
 *     (include/kernelkit/memory.h) and shared, refcounted, by every view made
 *     from it; it is freed when the last tensor using it is destroyed; or
 *   - borrowed: a pointer the caller handed to kk_tensor_wrap. KernelKit never
 *     frees it; the caller keeps it alive as long as any tensor (views
 *     included) made from it exists; or
 *   - external: another library's, imported through DLPack
 *     (include/kernelkit/dlpack.h) and released through the producer's deleter
 *     when the last tensor using it is destroyed; such memory may be read-only
 *     (kk_tensor_is_read_only), and then every write to it is refused. A
 *     model's weights (kernelkit/model.h) are external too: a file mapped
 *     read-only, unmapped when the last tensor using it is gone.
 *
 * Strides are in ELEMENTS, never bytes, and never negative (a zero stride
 * repeats an element; such a tensor cannot be a copy destination). The element
 * at index (i0, ..., in-1) is at element offset sum(ik * strides[k]) from
 * `data`. Packed e2m1 (two elements per byte, low nibble first) keeps the same
 * element arithmetic: element offset e lives in byte e/2, nibble e%2. For e2m1
 * every tensor must have a stride-1 last dimension (any stride when that
 * dimension has size 1) and its first element at a byte boundary (`data` points
 * at the byte whose LOW nibble is element 0); a view that would break either
 * rule (slicing the last dim at an odd start or with a step, transposing the
 * last dim away, an odd offset) is refused with KK_ERR_INVALID_ARGUMENT. Rows
 * of a contiguous e2m1 tensor with an odd last dimension start mid-byte, as in
 * kk_convert_host's packed stream.
 *
 * All size arithmetic is checked: a shape whose element count or byte size
 * does not fit int64_t / size_t gives KK_ERR_INVALID_ARGUMENT, never a wrapped
 * number. docs/formats.md ("Tensors") has the full rules. */
#ifndef KERNELKIT_TENSOR_H
#define KERNELKIT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/device.h"
#include "kernelkit/dtype.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KK_TENSOR_MAX_DIMS 8

/* Internal: the refcounted owner of a tensor's memory. */
typedef struct kk__tensor_storage kk__tensor_storage;

typedef struct kk_tensor {
    kk_dtype dtype;
    int ndim;                            /* 0 (a scalar) .. KK_TENSOR_MAX_DIMS */
    int64_t shape[KK_TENSOR_MAX_DIMS];   /* entries >= ndim are 0 */
    int64_t strides[KK_TENSOR_MAX_DIMS]; /* in elements, >= 0; entries >= ndim are 0 */
    void *data;                          /* element 0, view offset applied; may be
                                            NULL only when the tensor is empty */
    kk_backend_kind device_kind;         /* KK_BACKEND_CPU or KK_BACKEND_CUDA */
    int device_index;                    /* 0 for the CPU */
    char device[16];                     /* canonical spec: "cpu", "cuda:0" */
    kk__tensor_storage *storage;         /* internal; NULL when the memory is borrowed */
} kk_tensor;

/* ---- creating and destroying ---- */

/* A new contiguous (row-major) tensor that owns uninitialised memory from the
 * memory manager's default pool on `device` ("cpu", "cuda", "cuda:N").
 * `shape` may be NULL only when ndim is 0. Dimensions of size 0 are allowed
 * (the tensor is empty and data is NULL). Errors: KK_ERR_INVALID_ARGUMENT (bad
 * device text, dtype, ndim, a negative dimension, a size that overflows),
 * KK_ERR_CUDA_UNAVAILABLE, KK_ERR_OUT_OF_MEMORY. */
KK_API kk_status kk_tensor_create(const char *device, kk_dtype dtype, int ndim,
                                  const int64_t *shape, kk_tensor **out);

/* A tensor over memory the caller owns (never freed by KernelKit). `strides`
 * NULL means contiguous. `data` may be NULL only for an empty tensor. */
KK_API kk_status kk_tensor_wrap(const char *device, kk_dtype dtype, int ndim, const int64_t *shape,
                                const int64_t *strides, void *data, kk_tensor **out);

/* Release the tensor; frees owned memory when no other view uses it. Views may
 * be destroyed in any order. NULL is a no-op. */
KK_API void kk_tensor_destroy(kk_tensor *t);

/* ---- queries (t must be a valid tensor; NULL gives 0) ---- */

/* Number of elements (1 for a scalar, 0 when any dimension is 0). */
KK_API int64_t kk_tensor_numel(const kk_tensor *t);

/* Bytes that numel elements take when packed (e2m1 rounds up to whole bytes). */
KK_API size_t kk_tensor_nbytes(const kk_tensor *t);

/* Non-zero when the elements are laid out row-major without gaps (dimensions
 * of size 1 may have any stride; an empty tensor is contiguous). */
KK_API int kk_tensor_is_contiguous(const kk_tensor *t);

/* Non-zero when t's memory must not be written (a DLPack tensor flagged
 * read-only, and every view of it): an op's output, kk_tensor_copy's dst or
 * kk_dequantize's y that is read-only gives KK_ERR_INVALID_ARGUMENT. */
KK_API int kk_tensor_is_read_only(const kk_tensor *t);

/* ---- views (no copy; the view shares and keeps alive the storage) ---- */

/* Elements start, start+step, ... < stop of dimension `dim`; 0 <= start <= stop
 * <= shape[dim], step >= 1. */
KK_API kk_status kk_tensor_slice(const kk_tensor *t, int dim, int64_t start, int64_t stop,
                                 int64_t step, kk_tensor **view);

/* The same elements with a new shape of the same element count, when the
 * strides allow it without a copy (as numpy's view reshape); otherwise
 * KK_ERR_INVALID_ARGUMENT saying which dimensions are not contiguous: copy into
 * a contiguous tensor first (kk_tensor_copy). */
KK_API kk_status kk_tensor_reshape(const kk_tensor *t, int ndim, const int64_t *shape,
                                   kk_tensor **view);

/* Swap two dimensions. */
KK_API kk_status kk_tensor_transpose(const kk_tensor *t, int dim0, int dim1, kk_tensor **view);

/* ---- copies ---- */

/* Copy src's elements into dst: same dtype and shape, any devices, any strides.
 * A strided copy between two tensors of one GPU runs a copy kernel on that
 * GPU (packed e2m1 excepted). Other strided copies run on the host; a
 * non-contiguous tensor on a GPU is then staged through a contiguous host
 * buffer covering its memory span (a destination's span is read first so the
 * gaps between its elements are preserved). Synchronous. src and dst must not
 * overlap in memory. */
KK_API kk_status kk_tensor_copy(kk_tensor *dst, const kk_tensor *src);

/* ---- sizes ---- */

/* Bytes of a contiguous tensor of this dtype and shape (packed formats round
 * up). KK_ERR_INVALID_ARGUMENT on overflow. For quantized tensors (data +
 * scales + global scale) see kk_qtensor_bytes_for in quant.h. */
KK_API kk_status kk_tensor_bytes_for(kk_dtype dtype, int ndim, const int64_t *shape, size_t *bytes);

/* Padding for tensor cores: the last two dimensions (the matrix dimensions;
 * the last one only when ndim is 1) rounded up to a multiple of
 * kk_tensor_pad_multiple(dtype) elements. */
typedef struct kk_pad_info {
    int64_t padded_shape[KK_TENSOR_MAX_DIMS];
    int64_t multiple;     /* elements each padded dimension is a multiple of */
    size_t bytes;         /* contiguous bytes of the original shape */
    size_t padded_bytes;  /* contiguous bytes of the padded shape */
    size_t waste_bytes;   /* padded_bytes - bytes */
    double waste_percent; /* 100 * waste_bytes / padded_bytes (0 when empty) */
} kk_pad_info;

/* Elements per 16 bytes, cuBLASLt's alignment rule for tensor-core operands:
 * 8 for 16-bit types, 16 for 8-bit (fp8, int8), 32 for e2m1 (as cuBLASLt and
 * TMA need for FP4: 16-byte rows), 4 for 32-bit, 2 for f64. NVFP4 operands
 * whose scales use the 128x4 blocked layout fill whole scale atoms only when K
 * is a multiple of 64 (and rows of 128); see docs/formats.md. 0 for a bad dtype. */
KK_API int64_t kk_tensor_pad_multiple(kk_dtype dtype);

KK_API kk_status kk_tensor_pad_shape(kk_dtype dtype, int ndim, const int64_t *shape,
                                     kk_pad_info *out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_TENSOR_H */

/* Internal: an element-wise strided copy on one device, reduced to its
 * simplest form before a backend runs it (src/backend/strided_copy.c builds
 * it; src/cuda/kernels/strided_copy.cu runs it). Plain C, no CUDA headers, so
 * the host tests and the kernel see the same struct and offsets. */
#ifndef KK_BACKEND_STRIDED_COPY_H
#define KK_BACKEND_STRIDED_COPY_H

#include <stdint.h>

#include "backend/backend.h" /* KK__HOST_DEVICE */

#ifdef __cplusplus
extern "C" {
#endif

#define KK__STRIDED_MAX_DIMS 8 /* KK_TENSOR_MAX_DIMS */

/* dst[offset(i)] = src[offset(i)] for every element i in row-major order of
 * `shape`. Sizes of 1 are dropped and dimensions that are contiguous in both
 * tensors are merged, then a last dimension contiguous in both is widened to
 * elements of up to 16 bytes when the sizes, strides and pointers allow, so a
 * [B,S,H,D] -> [B,H,S,D] permute is a 3-d copy of 16-byte elements. */
typedef struct kk__strided_job {
    void *dst;
    const void *src;
    int ndim;       /* 1 .. KK__STRIDED_MAX_DIMS */
    int elem_bytes; /* 1, 2, 4, 8 or 16 */
    int64_t n;      /* elements (of elem_bytes), >= 1 */
    int64_t shape[KK__STRIDED_MAX_DIMS];
    int64_t dst_strides[KK__STRIDED_MAX_DIMS]; /* in elements of elem_bytes */
    int64_t src_strides[KK__STRIDED_MAX_DIMS];
} kk__strided_job;

/* Build the job for tensors of `ndim` (0 .. 8) dimensions of elements of
 * `elem_bytes` (1, 2, 4 or 8) with these strides (in elements). 0 when they
 * cannot be described (another element size, ndim out of range, no element). */
int kk__strided_job_make(kk__strided_job *job, void *dst, const void *src, int elem_bytes, int ndim,
                         const int64_t *shape, const int64_t *dst_strides,
                         const int64_t *src_strides);

/* Element i's offsets (in elements) in dst and src: the last dimension
 * varies fastest. The kernel uses the same arithmetic. */
static inline KK__HOST_DEVICE void kk__strided_offsets(const kk__strided_job *j, int64_t i,
                                                       int64_t *doff, int64_t *soff) {
    int64_t d = 0, s = 0;
    for (int k = j->ndim - 1; k >= 0; k--) {
        const int64_t q = i / j->shape[k], r = i - q * j->shape[k];
        d += r * j->dst_strides[k];
        s += r * j->src_strides[k];
        i = q;
    }
    *doff = d;
    *soff = s;
}

/* kk_tensor_copy's device path: the copy run by the tensors' backend when
 * both are on one device that has a strided_copy (kk__mem_ops) and the dtype
 * is whole bytes. *handled = 0 (status KK_OK) when it does not apply, and the
 * caller stages through the host. */
struct kk_tensor;
kk_status kk__tensor_device_copy(const char *func, struct kk_tensor *dst,
                                 const struct kk_tensor *src, int *handled);

/* kk_tensor_copy ordered on `stream` (NULL: the default stream) without
 * waiting, when both tensors are on one device with a strided_copy (any
 * layout, contiguous too); otherwise kk_tensor_copy itself (synchronous).
 * The decoder's layout and cache-write steps, so they queue behind the ops. */
kk_status kk__tensor_copy_on(struct kk_tensor *dst, const struct kk_tensor *src, kk_stream stream);

#ifdef __cplusplus
}
#endif
#endif

// kk_tensor_copy between two strided tensors of one GPU (the decoder's
// [B,S,H,D] <-> [B,H,S,D] layouts, cache rows): one thread per element of the
// job backend/strided_copy.c reduced (merged dimensions, elements of up to 16
// bytes), dst visited in row-major order so its writes coalesce. The element
// is moved as raw bytes, so every whole-byte dtype shares four kernels.
#include <cuda_runtime.h>

#include <stdint.h>

#include "backend/strided_copy.h"
#include "core/error.h"
#include "cuda/cuda_internal.h"

namespace {

// Offsets of element i, as kk__strided_offsets, with I the index type: 32-bit
// division is several times cheaper than 64-bit when the count allows.
template <typename I>
__device__ __forceinline__ void offsets(const kk__strided_job &j, I i, int64_t &d, int64_t &s) {
    d = 0, s = 0;
#pragma unroll
    for (int k = KK__STRIDED_MAX_DIMS - 1; k >= 0; k--) {
        if (k >= j.ndim) continue;
        const I n = (I)j.shape[k], q = i / n, r = i - q * n;
        d += (int64_t)r * j.dst_strides[k];
        s += (int64_t)r * j.src_strides[k];
        i = q;
    }
}

template <typename T, typename I> __global__ void strided_copy_kernel(const kk__strided_job j) {
    T *dst = (T *)j.dst;
    const T *src = (const T *)j.src;
    const I n = (I)j.n, step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t d, s;
        offsets<I>(j, i, d, s);
        dst[d] = src[s];
    }
}

template <typename T>
void launch(const kk__strided_job &j, int blocks, int threads, cudaStream_t stream) {
    // 32-bit indices while i + step cannot wrap
    if (j.n + (int64_t)blocks * threads < ((int64_t)1 << 32))
        strided_copy_kernel<T, uint32_t><<<blocks, threads, 0, stream>>>(j);
    else
        strided_copy_kernel<T, int64_t><<<blocks, threads, 0, stream>>>(j);
}

struct job_ctx {
    const kk__strided_job *job;
    cudaStream_t stream;
    int wait;
    const char *func;
};

kk_status run(void *arg) {
    const job_ctx *c = (const job_ctx *)arg;
    const kk__strided_job &j = *c->job;
    const int threads = 256;
    const int64_t want = (j.n + threads - 1) / threads;
    const int blocks = (int)(want < 65536 ? want : 65536); // grid-stride past that
    switch (j.elem_bytes) {
    case 1: launch<uint8_t>(j, blocks, threads, c->stream); break;
    case 2: launch<uint16_t>(j, blocks, threads, c->stream); break;
    case 4: launch<uint32_t>(j, blocks, threads, c->stream); break;
    case 8: launch<uint2>(j, blocks, threads, c->stream); break;
    case 16: launch<uint4>(j, blocks, threads, c->stream); break;
    default:
        return kk__arg_error(KK_ERR_INTERNAL, c->func, "elem_bytes", "1, 2, 4, 8 or 16", "%d",
                             j.elem_bytes);
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, c->func, cudaGetErrorName(e),
                              cudaGetErrorString(e),
                              "strided copy launch failed (%lld elements of %d bytes, %d dims)",
                              (long long)j.n, j.elem_bytes, j.ndim);
    if (!c->wait) return KK_OK;
    const cudaError_t w = cudaStreamSynchronize(c->stream); // kk_tensor_copy is synchronous
    if (w == cudaSuccess) return KK_OK;
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, c->func, cudaGetErrorName(w), cudaGetErrorString(w),
                          "the strided copy failed while it ran (%lld elements)", (long long)j.n);
}

} // namespace

// The CUDA backend's kk__mem_ops.strided_copy (src/cuda/memory.c): on
// `stream` (NULL: the legacy default stream, after the ops enqueued there),
// with `index` current.
extern "C" kk_status kk__cuda_strided_copy(void *ctx, int index, const kk__strided_job *job,
                                           void *stream, int wait, const char *func) {
    (void)ctx;
    if (!job || job->n < 1 || job->ndim < 1 || job->ndim > KK__STRIDED_MAX_DIMS)
        return kk__arg_error(KK_ERR_INTERNAL, func, "job", "a job from kk__strided_job_make", "%s",
                             job ? "out of range" : "NULL");
    job_ctx c = {job, (cudaStream_t)stream, wait, func};
    return kk__cuda_call_on_device(index, run, &c);
}

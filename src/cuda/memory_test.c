/* CUDA helpers for the memory tests (declared in src/backend/memory_internal.h):
 * streams, a kernel that keeps a stream busy, and waiting for a stream. The
 * tests have no CUDA headers (they also build without CUDA, where
 * src/cuda_off/memory_off.c answers KK_ERR_CUDA_UNAVAILABLE). */
#include <cuda_runtime_api.h>

#include "backend/memory_internal.h"
#include "core/error.h"

cudaError_t kk__mem_spin_launch(cudaStream_t stream, unsigned long long ns);

static kk_status check(cudaError_t e, const char *func, const char *call) {
    if (e == cudaSuccess) return KK_OK;
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_DEVICE_FAILURE, func, cudaGetErrorName(e), cudaGetErrorString(e),
                          "%s failed", call);
}

kk_status kk__mem_test_stream_create(int index, kk_stream *out) {
    cudaStream_t s = NULL;
    int previous = 0;
    cudaError_t e = cudaGetDevice(&previous);
    if (e == cudaSuccess) e = cudaSetDevice(index);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaSetDevice(previous); /* a test thread: putting device 0 back is fine */
    *out = s;
    return check(e, __func__, "cudaStreamCreateWithFlags");
}

kk_status kk__mem_test_stream_destroy(kk_stream stream) {
    return check(cudaStreamDestroy((cudaStream_t)stream), __func__, "cudaStreamDestroy");
}

kk_status kk__mem_test_spin(kk_stream stream, double ms) {
    return check(kk__mem_spin_launch((cudaStream_t)stream, (unsigned long long)(ms * 1e6)),
                 __func__, "spin kernel launch");
}

kk_status kk__mem_test_stream_sync(kk_stream stream) {
    return check(cudaStreamSynchronize((cudaStream_t)stream), __func__, "cudaStreamSynchronize");
}

kk_status kk__mem_test_current_device(int *out) {
    return check(cudaGetDevice(out), __func__, "cudaGetDevice");
}

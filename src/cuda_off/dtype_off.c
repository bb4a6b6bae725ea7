/* Element-type conversion on the GPU in a build configured with -DKK_CUDA=OFF:
 * the entry points of src/cuda/dtype_cuda.h, each failing with
 * KK_ERR_CUDA_UNAVAILABLE "built without CUDA". */
#include <string.h>

#include "core/error.h"
#include "cuda/dtype_cuda.h"

#define REASON "built without CUDA (configure with -DKK_CUDA=ON)"

kk_status kk__cuda_convert_host_buffers(int device, const void *src_host, kk_dtype src_dtype,
                                        void *dst_host, kk_dtype dst_dtype, size_t count) {
    (void)device;
    (void)src_host;
    (void)src_dtype;
    (void)dst_host;
    (void)dst_dtype;
    (void)count;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, "kk__cuda_convert_host_buffers",
                     "the cuda backend is unavailable: %s", REASON);
}

kk_status kk__cuda_convert_compare_nvidia(int device, kk_dtype dtype, kk__nvidia_compare *out) {
    (void)device;
    (void)dtype;
    if (out) memset(out, 0, sizeof *out);
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, "kk__cuda_convert_compare_nvidia",
                     "the cuda backend is unavailable: %s", REASON);
}

kk_status kk__cuda_e4m3_quotient_check(int device, uint32_t guard, uint64_t cases, uint64_t seed,
                                       kk__quotient_check *out) {
    (void)device;
    (void)guard;
    (void)cases;
    (void)seed;
    if (out) memset(out, 0, sizeof *out);
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, "kk__cuda_e4m3_quotient_check",
                     "the cuda backend is unavailable: %s", REASON);
}

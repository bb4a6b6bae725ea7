/* kernelkit calibrate in a build without CUDA: the GPU parts say "built
 * without CUDA", and cuBLASLt is never loaded. */
#include <stdio.h>

#include "cuda/cublaslt_dl.h"
#include "cuda/bench_cuda.h"

#define UNAVAILABLE(func)                                                                          \
    kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "built without CUDA (configure with -DKK_CUDA=ON)")

kk_status kk__calibrate_cuda(int device, const kk_calibrate_options *o,
                             kk__calibrate_measure_fn measure, kk_calibration *cal) {
    (void)device;
    (void)o;
    (void)measure;
    (void)cal;
    return UNAVAILABLE(KK__CALIBRATE_FUNC);
}

kk_status kk__calibrate_cuda_gemm(int device, int fp8, const kk_calibrate_options *o,
                                  kk__calibrate_measure_fn measure, kk_ceiling *out) {
    (void)device;
    (void)measure;
    (void)fp8;
    (void)o;
    kk__ceiling_unavailable(out, "built without CUDA");
    return UNAVAILABLE(KK__CALIBRATE_FUNC);
}

const kk__cublaslt *kk__cublaslt_load(char *why, size_t size) {
    if (why && size) snprintf(why, size, "built without CUDA");
    return NULL;
}

const char *kk__cublaslt_status_name(int status) {
    (void)status;
    return "built without CUDA";
}

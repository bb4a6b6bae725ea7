/* Quantization on CUDA in a build without CUDA: never reached (no tensor can
 * live on a CUDA device then), but defined so that callers need no #ifdefs. */
#include "core/error.h"
#include "cuda/quant_cuda.h"

#define REASON "built without CUDA (configure with -DKK_CUDA=ON)"

kk_status kk__quantize_cuda(kk__quant_job *job, const char *func) {
    (void)job;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "the cuda backend is unavailable: %s", REASON);
}

kk_status kk__dequantize_cuda(const kk__quant_job *job, const char *func) {
    (void)job;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "the cuda backend is unavailable: %s", REASON);
}

kk_status kk__scale_layout_cuda(const kk__scale_layout_job *job, const char *func) {
    (void)job;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "the cuda backend is unavailable: %s", REASON);
}

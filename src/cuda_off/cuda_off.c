/* The CUDA backend of a build configured with -DKK_CUDA=OFF: registered like
 * any backend, never available, and it says why. The CUDA backend's internal
 * API (src/cuda/cuda_internal.h) is stubbed so that callers need no #ifdefs.
 * GPU telemetry still works through NVML by NVML's own index (see
 * kk_gpu_telemetry_read in src/backend/backends.c). */
#include "backend/backend.h"
#include "core/error.h"
#include "cuda/cuda_internal.h"

#define REASON "built without CUDA (configure with -DKK_CUDA=ON)"

static void off_probe(void *ctx) { (void)ctx; }

static int off_available(void *ctx) {
    (void)ctx;
    return 0;
}

static const char *off_reason(void *ctx) {
    (void)ctx;
    return REASON;
}

static int off_device_count(void *ctx) {
    (void)ctx;
    return 0;
}

static kk_status off_device_info(void *ctx, int index, kk_device_info *out, const char *func) {
    (void)ctx;
    (void)index;
    (void)out;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "%s", REASON); /* not reached: unavailable */
}

const kk__backend kk__cuda_backend = {
    .name = "cuda",
    .kind = KK_BACKEND_CUDA,
    .spec_forms = "\"cuda\", \"cuda:N\"",
    .unavailable_status = KK_ERR_CUDA_UNAVAILABLE,
    .context = NULL,
    .probe = off_probe,
    .available = off_available,
    .unavailable_reason = off_reason,
    .device_count = off_device_count,
    .device_info = off_device_info,
};

kk_status kk__cuda_selftest(int device, kk__cuda_selftest_result *result) {
    (void)device;
    (void)result;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, "kk__cuda_selftest",
                     "the cuda backend is unavailable: %s", REASON);
}

int kk__cuda_device_usable(int device) {
    (void)device;
    return 0;
}

kk_status kk__cuda_call_on_device(int device, kk_status (*fn)(void *ctx), void *ctx) {
    (void)device;
    (void)fn;
    (void)ctx;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, "kk_op_run", "the cuda backend is unavailable: %s",
                     REASON);
}

kk_status kk__cuda_stream_sync(int device, void *stream, const char *what) {
    (void)device;
    (void)stream;
    return kk__error(KK_ERR_CUDA_UNAVAILABLE, what, "the cuda backend is unavailable: %s", REASON);
}

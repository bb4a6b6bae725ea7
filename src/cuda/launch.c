/* Running op kernels on a chosen device: kk__cuda_call_on_device makes the
 * tensors' device current for the kernel without moving the caller's current
 * device, and kk__cuda_stream_sync turns a failure of the work that ran into a
 * status. kk_op_run (src/ops/dispatch.c) uses both through the backend table. */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_internal.h"

typedef struct call_job {
    int device;
    kk_status (*fn)(void *ctx);
    void *ctx;
    kk_status st;
    /* the helper thread's last error, copied out */
    char function[96], argument[96], value[160], expected[256], cuda_error[64], message[1024];
} call_job;

static void keep(char *dst, size_t size, const char *src) {
    snprintf(dst, size, "%s", src ? src : "");
}

static void *call_thread(void *arg) {
    call_job *j = arg;
    const cudaError_t e = cudaSetDevice(j->device);
    j->st = e == cudaSuccess
                ? j->fn(j->ctx)
                : kk__cuda_error(KK_ERR_DEVICE_FAILURE, "kk_op_run", cudaGetErrorName(e),
                                 cudaGetErrorString(e), "cudaSetDevice(%d) failed", j->device);
    if (j->st != KK_OK) {
        const kk_error_info *i = kk_last_error();
        keep(j->function, sizeof j->function, i->function);
        keep(j->argument, sizeof j->argument, i->argument);
        keep(j->value, sizeof j->value, i->value);
        keep(j->expected, sizeof j->expected, i->expected);
        keep(j->cuda_error, sizeof j->cuda_error, i->cuda_error);
        keep(j->message, sizeof j->message, i->message);
    }
    return NULL;
}

static const char *or_null(const char *s) { return s[0] ? s : NULL; }

kk_status kk__cuda_call_on_device(int device, kk_status (*fn)(void *ctx), void *ctx) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return fn(ctx);
    (void)cudaGetLastError();
    call_job j;
    memset(&j, 0, sizeof j);
    j.device = device;
    j.fn = fn;
    j.ctx = ctx;
    kk__cuda_run_on_device_thread(call_thread, &j, device);
    if (j.st == KK_OK) return KK_OK;
    /* The message already starts with the function: restore it verbatim. */
    return kk__set_error(j.st, or_null(j.function), or_null(j.argument), or_null(j.value),
                         or_null(j.expected), or_null(j.cuda_error), "%s",
                         strncmp(j.message, j.function, strlen(j.function)) == 0 &&
                                 j.message[strlen(j.function)] == ':'
                             ? j.message + strlen(j.function) + 2
                             : j.message);
}

typedef struct sync_job {
    cudaStream_t stream;
    const char *what;
} sync_job;

static kk_status do_sync(void *arg) {
    const sync_job *s = arg;
    const cudaError_t e = cudaStreamSynchronize(s->stream);
    if (e == cudaSuccess) return KK_OK;
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, s->what, cudaGetErrorName(e), cudaGetErrorString(e),
                          "the work failed while it ran");
}

kk_status kk__cuda_stream_sync(int device, void *stream, const char *what) {
    sync_job s = {.stream = (cudaStream_t)stream, .what = what};
    return kk__cuda_call_on_device(device, do_sync, &s);
}

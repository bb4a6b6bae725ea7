/* Streams and events for work that overlaps (kk__stream_ops, backend.h): the
 * tensor-parallel decoder's communication stream, its events, and the waits
 * between it and the default stream (docs/distributed.md, "Overlap"). Work
 * that names the default stream (NULL) runs with the device current
 * (kk__cuda_call_on_device: this thread when it already is), and so do
 * records; a wait on an explicit stream needs no current device. */
#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "core/error.h"
#include "cuda/cuda_internal.h"

typedef struct sjob {
    int index, high;
    cudaStream_t stream;
    cudaEvent_t event;
    const char *func;
} sjob;

static kk_status failed(const sjob *j, cudaError_t e, const char *what) {
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_DEVICE_FAILURE, j->func, cudaGetErrorName(e),
                          cudaGetErrorString(e), "%s failed on cuda:%d", what, j->index);
}

static kk_status do_create(void *arg) {
    sjob *j = arg;
    int least = 0, greatest = 0;
    cudaError_t e = cudaSuccess;
    if (j->high && (e = cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess)
        return failed(j, e, "cudaDeviceGetStreamPriorityRange");
    e = cudaStreamCreateWithPriority(&j->stream, cudaStreamNonBlocking, j->high ? greatest : least);
    return e == cudaSuccess ? KK_OK : failed(j, e, "cudaStreamCreateWithPriority");
}

static kk_status s_create(void *ctx, int index, int high_priority, kk_stream *out,
                          const char *func) {
    (void)ctx;
    sjob j = {.index = index, .high = high_priority, .func = func};
    *out = NULL;
    kk_status st = kk__cuda_call_on_device(index, do_create, &j);
    if (st == KK_OK) *out = j.stream;
    return st;
}

static kk_status do_destroy(void *arg) {
    sjob *j = arg;
    if (j->stream) (void)cudaStreamDestroy(j->stream);
    if (j->event) (void)cudaEventDestroy(j->event);
    (void)cudaGetLastError();
    return KK_OK;
}

static void s_destroy(void *ctx, int index, kk_stream stream) {
    (void)ctx;
    sjob j = {.index = index, .stream = (cudaStream_t)stream};
    (void)kk__cuda_call_on_device(index, do_destroy, &j);
}

static kk_status do_event_create(void *arg) {
    sjob *j = arg;
    const cudaError_t e = cudaEventCreateWithFlags(&j->event, cudaEventDisableTiming);
    return e == cudaSuccess ? KK_OK : failed(j, e, "cudaEventCreateWithFlags");
}

static kk_status s_event_create(void *ctx, int index, void **event, const char *func) {
    (void)ctx;
    sjob j = {.index = index, .func = func};
    *event = NULL;
    kk_status st = kk__cuda_call_on_device(index, do_event_create, &j);
    if (st == KK_OK) *event = j.event;
    return st;
}

static void s_event_destroy(void *ctx, int index, void *event) {
    (void)ctx;
    sjob j = {.index = index, .event = (cudaEvent_t)event};
    (void)kk__cuda_call_on_device(index, do_destroy, &j);
}

static kk_status do_record(void *arg) {
    sjob *j = arg;
    const cudaError_t e = cudaEventRecord(j->event, j->stream);
    return e == cudaSuccess ? KK_OK : failed(j, e, "cudaEventRecord");
}

static kk_status s_record(void *ctx, int index, void *event, kk_stream stream, const char *func) {
    (void)ctx;
    sjob j = {.index = index, .stream = (cudaStream_t)stream, .event = event, .func = func};
    /* with the device current: an event's record belongs to its device */
    return kk__cuda_call_on_device(index, do_record, &j);
}

static kk_status do_wait(void *arg) {
    sjob *j = arg;
    const cudaError_t e = cudaStreamWaitEvent(j->stream, j->event, 0);
    return e == cudaSuccess ? KK_OK : failed(j, e, "cudaStreamWaitEvent");
}

static kk_status s_wait(void *ctx, int index, kk_stream stream, void *event, const char *func) {
    (void)ctx;
    sjob j = {.index = index, .stream = (cudaStream_t)stream, .event = event, .func = func};
    return stream ? do_wait(&j) : kk__cuda_call_on_device(index, do_wait, &j);
}

const kk__stream_ops kk__cuda_stream_ops = {
    .create = s_create,
    .destroy = s_destroy,
    .event_create = s_event_create,
    .event_destroy = s_event_destroy,
    .record = s_record,
    .wait = s_wait,
};

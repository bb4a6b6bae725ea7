/* Raw CUDA memory for the caching allocator (src/backend/memory*.c): device
 * memory, cudaMemGetInfo, events for stream-ordered reuse, copies, and
 * page-locked host memory, all without changing the caller's current device
 * for good (run_on below). docs/memory.md. */
#include <cuda.h> /* driver API types only */
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/memory_internal.h"
#include "core/error.h"
#include "core/log_internal.h"
#include "cuda/cuda_internal.h"

#define LOGGER "kernelkit.cuda.memory"

/* ---- running on a device ---- */

typedef CUresult (*primary_state_fn)(CUdevice dev, unsigned int *flags, int *active);
typedef CUresult (*device_get_fn)(CUdevice *dev, int ordinal);

static pthread_once_t g_driver_once = PTHREAD_ONCE_INIT;
static primary_state_fn g_primary_state;
static device_get_fn g_device_get;

static void *driver_symbol(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        fn = NULL;
    (void)cudaGetLastError();
    return fn;
}

static void load_driver_symbols(void) {
    g_primary_state = (primary_state_fn)driver_symbol("cuDevicePrimaryCtxGetState");
    g_device_get = (device_get_fn)driver_symbol("cuDeviceGet");
}

static int primary_context_exists(int device) {
    pthread_once(&g_driver_once, load_driver_symbols);
    CUdevice d;
    unsigned flags = 0;
    int active = 0;
    if (!g_primary_state || !g_device_get || g_device_get(&d, device) != CUDA_SUCCESS) return 0;
    return g_primary_state(d, &flags, &active) == CUDA_SUCCESS && active;
}

int kk__mem_test_context_exists(int index) { return primary_context_exists(index); }

typedef cudaError_t (*device_fn)(void *arg);

typedef struct device_job {
    int device;
    device_fn fn;
    void *arg;
    cudaError_t err;
} device_job;

static void *device_thread(void *p) {
    device_job *j = p;
    j->err = cudaSetDevice(j->device);
    if (j->err == cudaSuccess) j->err = j->fn(j->arg);
    return NULL;
}

/* Runs fn on `device`: on this thread when the device is already current (the
 * common case); with cudaSetDevice and back when the current device's primary
 * context exists; otherwise on a short-lived helper thread, since switching
 * back would create a context on GPU 0 for nothing. Whether a primary context
 * exists is asked of the driver through cudaGetDriverEntryPointByVersion (no
 * link against libcuda); without that, the helper thread is used. */
static cudaError_t run_on(int device, device_fn fn, void *arg) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    if (current == device) return fn(arg);
    device_job j = {device, fn, arg, cudaSuccess};
    pthread_t t;
    if ((current < 0 || !primary_context_exists(current)) &&
        pthread_create(&t, NULL, device_thread, &j) == 0) {
        pthread_join(t, NULL);
        return j.err;
    }
    /* switch and switch back (no thread: the same, as cuda_backend.c does) */
    device_thread(&j);
    if (current >= 0) cudaSetDevice(current);
    return j.err;
}

/* Record a failed call; returns `status`. Clears the runtime's last error,
 * which KernelKit has handled, so the application does not see it later. */
static kk_status fail(kk_status status, cudaError_t e, const char *func, const char *call,
                      size_t bytes, int device) {
    char what[96] = "", where[32] = "";
    (void)cudaGetLastError();
    if (bytes) snprintf(what, sizeof what, " of %zu bytes", bytes);
    if (device >= 0) snprintf(where, sizeof where, " on cuda:%d", device);
    return kk__cuda_error(status, func, cudaGetErrorName(e), cudaGetErrorString(e), "%s%s%s failed",
                          call, what, where);
}

/* ---- allocation ---- */

typedef struct alloc_job {
    size_t bytes;
    void *ptr;
} alloc_job;

static cudaError_t do_malloc(void *arg) {
    alloc_job *j = arg;
    return cudaMalloc(&j->ptr, j->bytes);
}

static kk_status cuda_alloc(void *ctx, int index, size_t bytes, void **ptr, const char *func) {
    (void)ctx;
    alloc_job j = {bytes, NULL};
    cudaError_t e = run_on(index, do_malloc, &j);
    if (e == cudaErrorMemoryAllocation)
        return fail(KK_ERR_OUT_OF_MEMORY, e, func, "cudaMalloc", bytes, index);
    if (e != cudaSuccess) return fail(KK_ERR_DEVICE_FAILURE, e, func, "cudaMalloc", bytes, index);
    *ptr = j.ptr;
    return KK_OK;
}

static cudaError_t do_free(void *arg) { return cudaFree(arg); }

static void cuda_free(void *ctx, int index, void *ptr) {
    (void)ctx;
    cudaError_t e = run_on(index, do_free, ptr);
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    KK_LOG(KK_LOG_WARN, LOGGER, "cudaFree failed", KK_F_INT("device", index),
           KK_F_STR("cuda_error", cudaGetErrorName(e)));
}

typedef struct info_job {
    size_t free_b, total_b;
} info_job;

static cudaError_t do_info(void *arg) {
    info_job *j = arg;
    return cudaMemGetInfo(&j->free_b, &j->total_b);
}

static kk_status cuda_info(void *ctx, int index, uint64_t *free_bytes, uint64_t *total_bytes,
                           const char *func) {
    (void)ctx;
    info_job j = {0, 0};
    cudaError_t e = run_on(index, do_info, &j);
    if (e != cudaSuccess) return fail(KK_ERR_DEVICE_FAILURE, e, func, "cudaMemGetInfo", 0, index);
    *free_bytes = j.free_b;
    *total_bytes = j.total_b;
    return KK_OK;
}

/* ---- events: stream-ordered reuse ---- */

static cudaError_t do_event_create(void *arg) {
    return cudaEventCreateWithFlags((cudaEvent_t *)arg, cudaEventDisableTiming);
}

static kk_status cuda_event_create(void *ctx, int index, void **event) {
    (void)ctx;
    cudaEvent_t ev = NULL;
    cudaError_t e = run_on(index, do_event_create, &ev);
    if (e != cudaSuccess)
        return fail(KK_ERR_DEVICE_FAILURE, e, "kk_mem_free", "cudaEventCreate", 0, index);
    *event = ev;
    return KK_OK;
}

static cudaError_t do_record_default(void *arg) { return cudaEventRecord((cudaEvent_t)arg, 0); }

static kk_status cuda_event_record(void *ctx, int index, void *event, void *stream) {
    (void)ctx;
    /* stream 0 means the current device's default stream: it must be ours */
    cudaError_t e = stream ? cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream)
                           : run_on(index, do_record_default, event);
    if (e != cudaSuccess)
        return fail(KK_ERR_DEVICE_FAILURE, e, "kk_mem_free", "cudaEventRecord", 0, index);
    return KK_OK;
}

static int cuda_event_done(void *ctx, void *event) {
    (void)ctx;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) return 0;
    /* an error means the work will never run: nothing can still use the block */
    if (e != cudaSuccess) (void)cudaGetLastError();
    return 1;
}

static void cuda_event_wait(void *ctx, void *event) {
    (void)ctx;
    if (cudaEventSynchronize((cudaEvent_t)event) != cudaSuccess) (void)cudaGetLastError();
}

static void cuda_event_destroy(void *ctx, void *event) {
    (void)ctx;
    if (cudaEventDestroy((cudaEvent_t)event) != cudaSuccess) (void)cudaGetLastError();
}

static cudaError_t do_synchronize(void *arg) {
    (void)arg;
    return cudaDeviceSynchronize();
}

static void cuda_synchronize(void *ctx, int index) {
    (void)ctx;
    if (run_on(index, do_synchronize, NULL) != cudaSuccess) (void)cudaGetLastError();
}

/* ---- copies ---- */

static int cuda_pointer_device(void *ctx, const void *p) {
    (void)ctx;
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return at.type == cudaMemoryTypeDevice ? at.device : -1;
}

/* Refuse a pointer that the driver knows to be somewhere else than named. */
static kk_status check_pointer(const void *p, int device, const char *arg, const char *func) {
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return KK_OK; /* the driver cannot tell: let the copy decide */
    }
    if (at.type == cudaMemoryTypeManaged) return KK_OK; /* reachable from both sides */
    int on_device = at.type == cudaMemoryTypeDevice;
    if (device < 0 && on_device)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg, "host memory",
                             "%p (memory of cuda:%d)", p, at.device);
    if (device >= 0 && !on_device)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg,
                             "memory of the device named for it",
                             "%p (host memory, not memory of cuda:%d)", p, device);
    if (device >= 0 && at.device != device)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg,
                             "memory of the device named for it",
                             "%p (memory of cuda:%d, not of cuda:%d)", p, at.device, device);
    return KK_OK;
}

typedef struct copy_job {
    void *dst;
    const void *src;
    size_t bytes;
    int dst_dev, src_dev; /* -1: host */
} copy_job;

static cudaError_t do_copy(void *arg) {
    copy_job *j = arg;
    cudaError_t e;
    if (j->dst_dev >= 0 && j->src_dev >= 0 && j->dst_dev != j->src_dev)
        e = cudaMemcpyPeer(j->dst, j->dst_dev, j->src, j->src_dev, j->bytes);
    else
        e = cudaMemcpy(j->dst, j->src, j->bytes, cudaMemcpyDefault);
    /* cudaMemcpy may return before a write to the device lands (from pageable
     * memory, device to device, peer): wait, so the copy is done on return */
    if (e == cudaSuccess && j->dst_dev >= 0)
        e = j->src_dev >= 0 && j->src_dev != j->dst_dev ? cudaDeviceSynchronize()
                                                        : cudaStreamSynchronize(0);
    return e;
}

static kk_status cuda_copy(void *ctx, void *dst, int dst_index, const void *src, int src_index,
                           size_t bytes, const char *func) {
    (void)ctx;
    kk_status st = check_pointer(dst, dst_index, "dst", func);
    if (!st) st = check_pointer(src, src_index, "src", func);
    if (st) return st;
    copy_job j = {dst, src, bytes, dst_index, src_index};
    int device = dst_index >= 0 ? dst_index : src_index;
    cudaError_t e = run_on(device, do_copy, &j);
    if (e != cudaSuccess) return fail(KK_ERR_DEVICE_FAILURE, e, func, "cudaMemcpy", bytes, device);
    return KK_OK;
}

/* ---- pinned host memory ---- */

static kk_status cuda_host_alloc(void *ctx, size_t bytes, void **ptr, const char *func) {
    (void)ctx;
    /* portable: usable with every device, whichever is current now */
    cudaError_t e = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation)
        return fail(KK_ERR_OUT_OF_MEMORY, e, func, "cudaHostAlloc", bytes, -1);
    if (e != cudaSuccess) return fail(KK_ERR_DEVICE_FAILURE, e, func, "cudaHostAlloc", bytes, -1);
    return KK_OK;
}

static void cuda_host_free(void *ctx, void *ptr) {
    (void)ctx;
    if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

const kk__mem_ops kk__cuda_mem_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .info = cuda_info,
    .event_create = cuda_event_create,
    .event_record = cuda_event_record,
    .event_done = cuda_event_done,
    .event_wait = cuda_event_wait,
    .event_destroy = cuda_event_destroy,
    .synchronize = cuda_synchronize,
    .copy = cuda_copy,
    .pointer_device = cuda_pointer_device,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .strided_copy = kk__cuda_strided_copy, /* kernels/strided_copy.cu */
};

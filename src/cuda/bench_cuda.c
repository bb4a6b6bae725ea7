/* The GPU timer of the benchmark sampler (src/harness/bench/measure.c). A
 * blocking kernel holds the stream while [L2 flush, when cold] start event,
 * work, stop event are enqueued, so the events bracket the work alone: no
 * flush and no host launch latency falls between them. A batch is one launch
 * of a CUDA graph of N runs. docs/harness-results.md. */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log_internal.h"
#include "cuda/bench_cuda.h"

#define FUNC KK__BENCH_FUNC
#define LOGGER "kernelkit.bench"
#define L2_FALLBACK ((size_t)64 << 20)

cudaError_t kk__bench_block_launch(const volatile int *release, volatile int *timed_out,
                                   unsigned long long timeout_ns, cudaStream_t stream);
cudaError_t kk__bench_spin_launch(unsigned long long ns, cudaStream_t stream);
cudaError_t kk__bench_tiny_launch(unsigned *counter, cudaStream_t stream);
cudaError_t kk__bench_bad_launch(cudaStream_t stream);
cudaError_t kk__bench_read_flush_launch(const void *buf, size_t bytes, int sms,
                                        cudaStream_t stream);

typedef struct cuda_timer {
    int device, prev_device;
    kk_bench_fn fn;
    void *ctx;
    cudaStream_t stream;
    int own_stream;
    cudaEvent_t start, stop;
    void *flush; /* the flush buffer, allocated at the first cold sample */
    size_t flush_bytes;
    unsigned flushes;
    int read_flush;     /* KK_BENCH_FLUSH_READ: sweep flush with the read kernel */
    int sms;            /* grid of the read kernel */
    volatile int *flag; /* mapped host memory: [0] release, [1] timed out; NULL = no blocking */
    int *flag_dev;
    cudaGraphExec_t exec; /* the batch, when batch > 1 */
    size_t batch;
} cuda_timer;

static kk_status fail(kk_status st, cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* leave no non-sticky error behind */
    return kk__cuda_error(st, FUNC, cudaGetErrorName(e), cudaGetErrorString(e), "%s", what);
}

/* The read kernel reads 16-byte words: its buffer is rounded up to 16 bytes. */
static size_t alloc_bytes(const cuda_timer *c) {
    return c->read_flush ? (c->flush_bytes + 15) / 16 * 16 : c->flush_bytes;
}

static kk_status ensure_flush(cuda_timer *c) {
    if (c->flush) return KK_OK;
    cudaError_t e = cudaMalloc(&c->flush, alloc_bytes(c));
    if (e != cudaSuccess) {
        c->flush = NULL;
        return fail(e == cudaErrorMemoryAllocation ? KK_ERR_OUT_OF_MEMORY : KK_ERR_DEVICE_FAILURE,
                    e, "cannot allocate the L2 flush buffer");
    }
    if (!c->read_flush) return KK_OK;
    /* Zeros, which the read kernel's sum must not equal its `never` value for;
     * then one sweep and a wait, so the dirty lines of this memset are mostly
     * written back before the first sample (the median would not notice the
     * rest: one sample at most). */
    if ((e = cudaMemsetAsync(c->flush, 0, alloc_bytes(c), c->stream)) ||
        (e = kk__bench_read_flush_launch(c->flush, alloc_bytes(c), c->sms, c->stream)) ||
        (e = cudaStreamSynchronize(c->stream)))
        return fail(KK_ERR_DEVICE_FAILURE, e, "cannot initialize the L2 read-flush buffer");
    return KK_OK;
}

static cudaError_t flush_l2(cuda_timer *c) {
    if (c->read_flush)
        return kk__bench_read_flush_launch(c->flush, alloc_bytes(c), c->sms, c->stream);
    /* a different byte each time, so no layer can skip the writes as redundant */
    return cudaMemsetAsync(c->flush, (int)(++c->flushes & 0xff), c->flush_bytes, c->stream);
}

/* Everything up to the stop event; the caller releases the stream after. */
static kk_status enqueue(cuda_timer *c, int cold) {
    cudaError_t e;
    if (c->flag) {
        c->flag[0] = 0;
        c->flag[1] = 0;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        e = kk__bench_block_launch(c->flag_dev, c->flag_dev + 1,
                                   (unsigned long long)(KK__BENCH_BLOCK_TIMEOUT_S * 1e9),
                                   c->stream);
        if (e) return fail(KK_ERR_KERNEL_LAUNCH, e, "the blocking kernel failed to launch");
    }
    if (cold && (e = flush_l2(c)))
        return fail(c->read_flush ? KK_ERR_KERNEL_LAUNCH : KK_ERR_DEVICE_FAILURE, e,
                    c->read_flush ? "the L2 flush (read kernel) failed to launch"
                                  : "the L2 flush (cudaMemsetAsync) failed");
    if ((e = cudaEventRecord(c->start, c->stream)))
        return fail(KK_ERR_DEVICE_FAILURE, e, "cudaEventRecord (start) failed");
    if (c->exec) {
        if ((e = cudaGraphLaunch(c->exec, c->stream)))
            return fail(KK_ERR_KERNEL_LAUNCH, e, "the batch graph failed to launch");
    } else {
        kk_status st = c->fn(c->ctx, c->stream);
        if (st) return kk__bench_callback_error(st);
    }
    if ((e = cudaGetLastError()))
        return fail(KK_ERR_KERNEL_LAUNCH, e, "the benchmarked work failed to launch");
    if ((e = cudaEventRecord(c->stop, c->stream)))
        return fail(KK_ERR_DEVICE_FAILURE, e, "cudaEventRecord (stop) failed");
    return KK_OK;
}

static void release(cuda_timer *c) {
    if (!c->flag) return;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    c->flag[0] = 1;
}

static kk_status cuda_sample(void *impl, int cold, double *seconds) {
    cuda_timer *c = impl;
    kk_status st = cold ? ensure_flush(c) : KK_OK;
    if (st) return st;
    st = enqueue(c, cold);
    release(c);
    if (st) {
        (void)cudaStreamSynchronize(c->stream); /* drain what was queued */
        (void)cudaGetLastError();
        return st;
    }
    cudaError_t e = cudaEventSynchronize(c->stop);
    if (e) return fail(KK_ERR_KERNEL_LAUNCH, e, "the benchmarked work failed while running");
    if (c->flag && c->flag[1])
        return kk__error(KK_ERR_DEVICE_FAILURE, FUNC,
                         "the stream was held for %.0f s while the work was enqueued: does the "
                         "callback synchronize, or enqueue more than the launch queue holds? "
                         "Set options.blocking_kernel = 0",
                         KK__BENCH_BLOCK_TIMEOUT_S);
    float ms = 0;
    if ((e = cudaEventElapsedTime(&ms, c->start, c->stop)))
        return fail(KK_ERR_DEVICE_FAILURE, e, "cudaEventElapsedTime failed");
    *seconds = (double)ms * 1e-3;
    return KK_OK;
}

/* KK_ERR_UNSUPPORTED: the work cannot be captured (measure.c then falls back
 * to single runs when the batch was its own choice). */
static kk_status not_capturable(cudaError_t e, const char *what) {
    (void)cudaGetLastError();
    const char *name = e ? cudaGetErrorName(e) : "";
    return kk__cuda_error(KK_ERR_UNSUPPORTED, FUNC, name, e ? cudaGetErrorString(e) : "",
                          "cannot capture the work into a CUDA graph: %s", what);
}

static kk_status cuda_set_batch(void *impl, size_t batch) {
    cuda_timer *c = impl;
    if (c->exec) cudaGraphExecDestroy(c->exec);
    c->exec = NULL;
    c->batch = 1;
    if (batch == 1) return KK_OK;
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e) return not_capturable(e, "cudaStreamBeginCapture failed");
    kk_status st = KK_OK;
    for (size_t i = 0; i < batch && !st; i++) st = c->fn(c->ctx, c->stream);
    char why[320] = "";
    if (st) snprintf(why, sizeof why, "the callback failed: %.280s", kk_last_error_message());
    cudaGraph_t g = NULL;
    e = cudaStreamEndCapture(c->stream, &g); /* always: leaves the stream out of capture */
    if (st || e || !g) {
        if (g) cudaGraphDestroy(g);
        return not_capturable(st ? cudaSuccess : e, st ? why : "cudaStreamEndCapture failed");
    }
    e = cudaGraphInstantiate(&c->exec, g, 0);
    cudaGraphDestroy(g);
    if (e) {
        c->exec = NULL;
        return not_capturable(e, "cudaGraphInstantiate failed");
    }
    if ((e = cudaGraphUpload(c->exec, c->stream)))
        return fail(KK_ERR_DEVICE_FAILURE, e, "cudaGraphUpload failed");
    c->batch = batch;
    return KK_OK;
}

static void cuda_destroy(void *impl) {
    cuda_timer *c = impl;
    if (!c) return;
    if (c->stream) (void)cudaStreamSynchronize(c->stream);
    if (c->exec) cudaGraphExecDestroy(c->exec);
    if (c->flush) cudaFree(c->flush);
    if (c->start) cudaEventDestroy(c->start);
    if (c->stop) cudaEventDestroy(c->stop);
    if (c->flag) cudaFreeHost((void *)c->flag);
    if (c->own_stream && c->stream) cudaStreamDestroy(c->stream);
    (void)cudaGetLastError();
    if (c->prev_device >= 0 && c->prev_device != c->device) cudaSetDevice(c->prev_device);
    free(c);
}

/* The blocking kernel's flag in mapped host memory; without it (no mapped
 * memory) samples are still timed, only with launch latency included. */
static void setup_blocking(cuda_timer *c) {
    void *h = NULL, *d = NULL;
    cudaError_t e = cudaHostAlloc(&h, 2 * sizeof(int), cudaHostAllocMapped);
    if (!e) e = cudaHostGetDevicePointer(&d, h, 0);
    if (e) {
        KK_LOG(KK_LOG_WARN, LOGGER, "no mapped host memory: timing without the blocking kernel",
               KK_F_STR("cuda_error", cudaGetErrorName(e)));
        if (h) cudaFreeHost(h);
        (void)cudaGetLastError();
        return;
    }
    c->flag = h;
    c->flag_dev = d;
}

/* One run before any sample, with nothing holding the stream: the first launch
 * of a kernel loads its module (CUDA's lazy loading), and a first call may
 * allocate; either can wait for the device to go idle, which the blocking
 * kernel would prevent until its timeout. */
static kk_status prime(cuda_timer *c) {
    kk_status st = c->fn(c->ctx, c->stream);
    if (st) {
        (void)cudaStreamSynchronize(c->stream);
        return kk__bench_callback_error(st);
    }
    cudaError_t e = cudaStreamSynchronize(c->stream);
    return e ? fail(KK_ERR_KERNEL_LAUNCH, e, "the benchmarked work failed while running") : KK_OK;
}

/* The sampler runs on the caller's thread and the callback must enqueue with
 * the device current, so the timer makes it current here and cuda_destroy sets
 * the caller's previous device back (a device thread, as cuda_backend.c uses,
 * would move the callback and its thread-local state onto another thread). */
static kk_status setup(cuda_timer *c, const kk_bench_options *o) {
    cudaError_t e = cudaSetDevice(c->device);
    if (e) return fail(KK_ERR_DEVICE_FAILURE, e, "cudaSetDevice failed");
    /* An error left pending by earlier code would otherwise be blamed on the work. */
    (void)cudaGetLastError();
    c->stream = (cudaStream_t)o->stream;
    if (!c->stream) {
        if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)))
            return fail(KK_ERR_DEVICE_FAILURE, e, "cudaStreamCreateWithFlags failed");
        c->own_stream = 1;
    }
    if ((e = cudaEventCreate(&c->start)) || (e = cudaEventCreate(&c->stop)))
        return fail(KK_ERR_DEVICE_FAILURE, e, "cudaEventCreate failed");
    int l2 = 0;
    if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, c->device) != cudaSuccess) l2 = 0;
    c->read_flush = o->flush_mode == KK_BENCH_FLUSH_READ;
    if (cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, c->device) != cudaSuccess)
        c->sms = 0;
    (void)cudaGetLastError();
    /* write: one L2 of dirty lines replaces the work's; read: 2x the L2, so
     * the sweep misses everywhere even with the L2's replacement policy */
    c->flush_bytes = o->flush_bytes ? (size_t)o->flush_bytes
                                    : (l2 > 0 ? (size_t)l2 : L2_FALLBACK) * (c->read_flush ? 2 : 1);
    if (o->blocking_kernel) setup_blocking(c);
    return c->flag ? prime(c) : KK_OK;
}

kk_status kk__bench_cuda_timer(int device, kk_bench_fn fn, void *ctx, const kk_bench_options *o,
                               kk__bench_timer *t) {
    cuda_timer *c = calloc(1, sizeof *c);
    if (!c) return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "cannot allocate a timer");
    c->device = device;
    c->fn = fn;
    c->ctx = ctx;
    c->batch = 1;
    if (cudaGetDevice(&c->prev_device) != cudaSuccess) c->prev_device = -1;
    kk_status st = setup(c, o);
    if (st) {
        cuda_destroy(c);
        return st;
    }
    memset(t, 0, sizeof *t);
    t->impl = c;
    t->sample = cuda_sample;
    t->set_batch = cuda_set_batch;
    t->destroy = cuda_destroy;
    t->flush_bytes = c->flush_bytes;
    t->blocking_kernel = c->flag != NULL;
    return KK_OK;
}

void kk__bench_cuda_versions(int *runtime, int *driver) {
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess) *runtime = 0;
    if (cudaDriverGetVersion(driver) != cudaSuccess) *driver = 0;
    (void)cudaGetLastError();
}

kk_status kk__bench_stream_create(int device, int *prev, kk_stream *out) {
    cudaStream_t s = NULL;
    *out = NULL;
    cudaError_t e = cudaGetDevice(prev);
    if (!e) e = cudaSetDevice(device);
    if (e) return fail(KK_ERR_DEVICE_FAILURE, e, "cudaSetDevice failed");
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e) {
        (void)cudaSetDevice(*prev);
        return fail(KK_ERR_DEVICE_FAILURE, e, "cudaStreamCreateWithFlags failed");
    }
    *out = s;
    return KK_OK;
}

void kk__bench_stream_destroy(kk_stream stream, int prev) {
    if (stream) (void)cudaStreamDestroy((cudaStream_t)stream);
    (void)cudaSetDevice(prev);
}

/* ---- test helpers ---- */

kk_status kk__bench_test_spin(kk_stream stream, double seconds) {
    cudaError_t e =
        kk__bench_spin_launch((unsigned long long)(seconds * 1e9), (cudaStream_t)stream);
    return e ? fail(KK_ERR_KERNEL_LAUNCH, e, "spin kernel launch failed") : KK_OK;
}

kk_status kk__bench_test_tiny(kk_stream stream) {
    cudaError_t e = kk__bench_tiny_launch(NULL, (cudaStream_t)stream);
    return e ? fail(KK_ERR_KERNEL_LAUNCH, e, "tiny kernel launch failed") : KK_OK;
}

kk_status kk__bench_test_bad_launch(kk_stream stream) {
    (void)kk__bench_bad_launch((cudaStream_t)stream);
    return KK_OK;
}

kk_status kk__bench_test_alloc(size_t bytes, void **out) {
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes);
    if (!e) e = cudaMemset(*out, 0, bytes);
    if (e) {
        if (*out) cudaFree(*out);
        *out = NULL;
        return fail(KK_ERR_OUT_OF_MEMORY, e, "test buffer allocation failed");
    }
    return KK_OK;
}

void kk__bench_test_free(void *buf) {
    if (buf) (void)cudaFree(buf);
}

kk_status kk__bench_test_read(kk_stream stream, const void *buf, size_t bytes) {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        sms = 0;
    cudaError_t e = kk__bench_read_flush_launch(buf, bytes, sms, (cudaStream_t)stream);
    return e ? fail(KK_ERR_KERNEL_LAUNCH, e, "read kernel launch failed") : KK_OK;
}

/* Internal: the backend interface and the registry. A backend is a table of
 * function pointers plus a context (after ggml's ggml-backend), one table per
 * kk_backend_kind in src/backend/backends.c, so the public device API is
 * written once (registry.c) and a backend never parses a device spec.
 * docs/architecture.md, "The backend interface" and "Adding a backend". */
#ifndef KK_BACKEND_BACKEND_H
#define KK_BACKEND_BACKEND_H

#include <pthread.h>
#include <stddef.h>

#include "kernelkit/device.h"
#include "backend/timer.h"
#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend's kernel for one op. */
typedef struct kk__slot {
    kk_op_kernel_fn run;
    /* 1 when it takes strided tensors (any strides, the innermost dimension
     * contiguous); it answers KK_ERR_UNSUPPORTED for strides it cannot use. */
    int strided;
} kk__slot;

/* Rules for every function of a table: `ctx` is the table's `context`.
 * `probe` is called first, on every query: it does its work exactly once and
 * thread-safely (KK__BACKEND_ONCE), is cheap afterwards, and never fails hard
 * (an unusable backend records why and reports itself unavailable). Errors
 * are kk_status recorded naming `func`, the public entry point called; nothing
 * prints, aborts or exits. Device indices passed in are already checked. */
typedef struct kk__backend {
    /* Name, also the device-spec prefix: "cpu" -> "cpu", "cuda" -> "cuda:N". */
    const char *name;
    kk_backend_kind kind;
    /* The spec forms for error messages, e.g. "\"cuda\", \"cuda:N\"". */
    const char *spec_forms;
    /* Status for a well-formed spec naming this backend while it is
     * unavailable (KK_ERR_CUDA_UNAVAILABLE for CUDA). */
    kk_status unavailable_status;
    /* Backend state; passed back as `ctx`. May be NULL. */
    void *context;

    /* ---- discovery (all required) ---- */

    /* Detect the backend and its devices: lazily, once, thread-safe. */
    void (*probe)(void *ctx);
    /* Non-zero when the backend can run work (after probe). */
    int (*available)(void *ctx);
    /* Why not ("" when available). Static storage; never NULL. */
    const char *(*unavailable_reason)(void *ctx);
    /* The API error name behind the unavailability ("cudaErrorNoDevice"), for
     * kk_last_error()->cuda_error; "" or NULL when there is none. Optional. */
    const char *(*unavailable_error_name)(void *ctx);
    /* Devices the backend exposes (0 when unavailable). For CUDA this is every
     * GPU the runtime enumerates, with the runtime's numbering, including GPUs
     * too old for KernelKit's kernels (see device_usable). */
    int (*device_count)(void *ctx);
    /* Fill the backend's fields of `out` (the registry has zeroed it and fills
     * backend, index, spec and device_count_in_backend itself). */
    kk_status (*device_info)(void *ctx, int index, kk_device_info *out, const char *func);

    /* ---- optional (NULL when the backend has nothing to say) ---- */

    /* KK_OK when KernelKit's kernels can run on the device; otherwise the
     * reason (KK_ERR_INVALID_COMPUTE_CAPABILITY for a too-old GPU), recorded
     * as the last error unless `func` is NULL. NULL: every device is usable. */
    kk_status (*device_usable)(void *ctx, int index, const char *func);
    /* Run a tiny known-answer workload on the device (every element
     * kk__probe_value(i, seed)) and check the result. NULL: nothing to prove. */
    kk_status (*selftest)(void *ctx, int index, const char *func);
    /* Live telemetry (clocks, power, temperature). NULL: none. Returns KK_OK
     * with out->available == 0 and a reason when it cannot be read. */
    kk_status (*telemetry)(void *ctx, int index, kk_gpu_telemetry *out, const char *func);

    /* ---- memory ----
     * The backend's raw memory entry points; the caching allocator shared by
     * every backend (src/backend/memory*.c) is built on them. NULL: the
     * backend has no memory of its own (kk_mem_* then say KK_ERR_UNSUPPORTED). */
    const struct kk__mem_ops *mem;

    /* ---- op dispatch (src/ops/dispatch.c) ----
     * The backend's kernels, KK__OP_COUNT pointers indexed by op id; NULL (the
     * array or an entry): no kernel, and kk_op_run falls back to the CPU. */
    const kk__slot *const *slots;
    /* Run fn(arg) with device `index` current on the calling thread, the
     * caller's current device left as it was. NULL: fn is called directly. */
    kk_status (*call_on_device)(void *ctx, int index, kk_status (*fn)(void *arg), void *arg);
    /* Wait for the work enqueued on `stream` (NULL: the default stream); a
     * failure of that work is KK_ERR_KERNEL_LAUNCH. NULL: work is synchronous. */
    kk_status (*stream_sync)(void *ctx, int index, kk_stream stream, const char *func);

    /* ---- the sampler and calibration (backend/timer.h) ---- */
    /* A timer for kk_bench_measure on device `index` (`o` validated; its
     * flush_bytes 0 means the device's default). NULL: the harness times
     * with the host clock around the calls, as on the CPU. */
    kk_status (*timer_create)(void *ctx, int index, kk_bench_fn fn, void *fn_ctx,
                              const kk_bench_options *o, kk__bench_timer *out);
    /* Measure every ceiling of device `index` into `cal` with `measure`, or
     * mark it unavailable with a reason. NULL: nothing to calibrate. */
    kk_status (*calibrate)(void *ctx, int index, const kk_calibrate_options *o,
                           kk__calibrate_measure_fn measure, kk_calibration *cal);
    /* Runtime and driver versions (13000 = 13.0) for results files. NULL: none. */
    void (*versions)(void *ctx, int *runtime, int *driver);
    /* A non-blocking stream on device `index`, made current (the previous one
     * in *prev), and its release: the host-overhead benchmark launches on it.
     * NULL: the backend has no streams. */
    kk_status (*stream_create)(void *ctx, int index, int *prev, kk_stream *out);
    void (*stream_destroy)(void *ctx, kk_stream stream, int prev);
    /* Enqueue the smallest kernel launch the runtime has, on `stream`: the
     * floor the host-overhead benchmark sets KernelKit's launch beside. */
    kk_status (*launch_floor)(void *ctx, kk_stream stream);

    /* ---- CUDA graphs (the decoder's decode step, src/model/decoder_graph.c) ----
     * NULL: the backend has none. Called with the stream's device current.
     * graph_begin starts capturing the work enqueued on `stream` (relaxed
     * mode: the allocator may still query events); graph_end always ends the
     * capture, then instantiates and uploads it into *exec (NULL on failure,
     * KK_ERR_UNSUPPORTED naming why); graph_launch enqueues *exec on `stream`;
     * graph_destroy frees it (NULL: no-op). */
    kk_status (*graph_begin)(void *ctx, kk_stream stream, const char *func);
    kk_status (*graph_end)(void *ctx, kk_stream stream, void **exec, const char *func);
    kk_status (*graph_launch)(void *ctx, void *exec, kk_stream stream, const char *func);
    void (*graph_destroy)(void *ctx, void *exec);
    /* Streams and events for work that overlaps (the tensor-parallel
     * decoder's communication stream, docs/distributed.md "Overlap"). NULL:
     * the backend's work is synchronous and there is nothing to overlap. */
    const struct kk__stream_ops *streams;

    /* ---- quantization (src/backend/quant.c) ---- NULL: not on this backend. */
    const struct kk__quant_ops *quant;
} kk__backend;

/* Streams and events of one backend's device `index`; errors are recorded
 * under `func`. A NULL stream is the device's default stream (where kk_op_run
 * enqueues when given none); it may be used from a thread whose current
 * device is another. */
typedef struct kk__stream_ops {
    /* A stream whose work does not wait for the default stream's (non-blocking),
     * of the device's highest priority when `high_priority` (its blocks are
     * scheduled first when SMs free up). */
    kk_status (*create)(void *ctx, int index, int high_priority, kk_stream *out, const char *func);
    void (*destroy)(void *ctx, int index, kk_stream stream);
    /* An event for ordering only (no timing). */
    kk_status (*event_create)(void *ctx, int index, void **event, const char *func);
    void (*event_destroy)(void *ctx, int index, void *event);
    /* Record `event` after the work enqueued on `stream` so far. */
    kk_status (*record)(void *ctx, int index, void *event, kk_stream stream, const char *func);
    /* Work enqueued on `stream` from now on waits for `event`'s last record;
     * the host does not wait. */
    kk_status (*wait)(void *ctx, int index, kk_stream stream, void *event, const char *func);
} kk__stream_ops;

/* A backend's quantize kernels: the jobs of core/quant_internal.h, on the
 * backend's device; errors recorded under `func`. */
struct kk__quant_job;
struct kk__scale_layout_job;
struct kk__strided_job; /* backend/strided_copy.h */
typedef struct kk__quant_ops {
    kk_status (*quantize)(struct kk__quant_job *job, const char *func);
    kk_status (*dequantize)(const struct kk__quant_job *job, const char *func);
    kk_status (*scale_layout)(const struct kk__scale_layout_job *job, const char *func);
} kk__quant_ops;

/* Raw memory of one backend. `ctx` is the backend table's context, indices
 * are checked, `func` names the public entry point for error messages, and
 * errors are recorded (kk__error, kk__cuda_error) before they are returned. */
typedef struct kk__mem_ops {
    /* Take `bytes` (a multiple of 512) of device memory aligned to at least
     * 256 bytes. KK_ERR_OUT_OF_MEMORY when the device has too little (the
     * allocator then releases its cache and tries again); any other status is
     * passed on to the caller. Required. */
    kk_status (*alloc)(void *ctx, int index, size_t bytes, void **ptr, const char *func);
    /* Give back memory from `alloc`. Cannot fail (errors are logged). Required. */
    void (*free)(void *ctx, int index, void *ptr);
    /* Free and total bytes of the device, for out-of-memory protection.
     * Optional (NULL: only the allocator's own limit is checked). */
    kk_status (*info)(void *ctx, int index, uint64_t *free_bytes, uint64_t *total_bytes,
                      const char *func);

    /* Stream ordering. All NULL on a backend without streams (the CPU): a
     * freed block is then reusable at once on every stream. `stream` NULL is
     * the device's default stream. */
    kk_status (*event_create)(void *ctx, int index, void **event);
    kk_status (*event_record)(void *ctx, int index, void *event, void *stream);
    int (*event_done)(void *ctx, void *event); /* 1: complete (or failed), 0: pending */
    void (*event_wait)(void *ctx, void *event);
    void (*event_destroy)(void *ctx, void *event);
    /* Wait for all work on the device: the fallback when an event cannot be
     * recorded at a free. */
    void (*synchronize)(void *ctx, int index);

    /* Copy `bytes` synchronously with respect to the host; index -1 is host
     * memory, otherwise a device of this backend. Validates the pointers as
     * far as the backend can tell what they are. Required. */
    kk_status (*copy)(void *ctx, void *dst, int dst_index, const void *src, int src_index,
                      size_t bytes, const char *func);
    /* The device of this backend that `ptr` points into, or -1 (host memory,
     * or the backend cannot tell): kk_mem_copy refuses device memory named
     * as host memory with it. Optional. */
    int (*pointer_device)(void *ctx, const void *ptr);
    /* Page-locked host memory for transfers. Optional. */
    kk_status (*host_alloc)(void *ctx, size_t bytes, void **ptr, const char *func);
    void (*host_free)(void *ctx, void *ptr);
    /* Run a strided copy (backend/strided_copy.h) between two buffers of
     * device `index`, enqueued on `stream` (NULL: the default stream) after
     * the work there; with `wait`, synchronous with respect to the host like
     * `copy`. Optional: NULL, and kk_tensor_copy stages strided copies
     * through the host. */
    kk_status (*strided_copy)(void *ctx, int index, const struct kk__strided_job *job, void *stream,
                              int wait, const char *func);
} kk__mem_ops;

extern const kk__mem_ops kk__cpu_mem_ops;  /* src/cpu/cpu_memory.c */
extern const kk__mem_ops kk__cuda_mem_ops; /* src/cuda/memory.c (CUDA builds only) */

/* The tables. Every build defines all of them (src/cuda or src/cuda_off). */
extern const kk__backend kk__cpu_backend;
extern const kk__backend kk__cuda_backend;

/* The table for `kind`, probed; NULL for an invalid kind. */
const kk__backend *kk__backend_get(kk_backend_kind kind);

/* Resolve a device spec for public entry point `func`: parse it, probe the
 * backend, check that it is available and the index exists. */
kk_status kk__device_resolve(const char *func, const char *spec, const kk__backend **backend,
                             int *index);

/* What every backend's selftest writes at element i (the CUDA probe kernel,
 * the CPU's host loop): a hash of i and the seed, so that work that did not
 * run, ran on part of the data or wrote garbage is caught. */
#ifdef __CUDACC__
#define KK__HOST_DEVICE __host__ __device__
#else
#define KK__HOST_DEVICE
#endif
static inline KK__HOST_DEVICE unsigned kk__probe_value(unsigned i, unsigned seed) {
    unsigned x = (i + 1u) * 2654435761u ^ seed;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    return x;
}

/* Generates `static void NAME(void *ctx)` that runs `static void BODY(void)`
 * exactly once, thread-safely. */
#define KK__BACKEND_ONCE(NAME, BODY)                                                               \
    static pthread_once_t NAME##_once = PTHREAD_ONCE_INIT;                                         \
    static void NAME(void *ctx) {                                                                  \
        (void)ctx;                                                                                 \
        pthread_once(&NAME##_once, BODY);                                                          \
    }

/* ---- architectures (src/backend/arch.c) ---- */

/* The lowest compute capability KernelKit's kernels are built for (sm_80). */
enum { KK__MIN_CC_MAJOR = 8, KK__MIN_CC_MINOR = 0 };

/* Non-zero when (major, minor) is at least KK__MIN_CC_MAJOR.KK__MIN_CC_MINOR. */
int kk__cc_supported(int major, int minor);

/* ---- NVML telemetry (src/backend/nvml.c; needs no CUDA headers) ---- */

/* Read telemetry of the GPU at `pci_bus_id` (as cudaDeviceGetPCIBusId writes
 * it). KK_OK with out->available == 0 and a reason when NVML cannot. */
kk_status kk__nvml_read_by_pci(const char *pci_bus_id, kk_gpu_telemetry *out);

/* Same, by NVML's own index (used when the CUDA backend is unavailable). */
kk_status kk__nvml_read_by_index(int index, kk_gpu_telemetry *out, const char *func);

/* Loads NVML once. 1 when usable; else 0 and *reason (static) says why. */
int kk__nvml_load(const char **reason);

/* GPUs NVML sees (0 when NVML is unavailable). */
int kk__nvml_device_count(void);

/* "none" or comma-separated names of the clocks-event reason bits; unknown
 * bits as "0x...". */
void kk__throttle_text(unsigned long long reasons, char *buf, size_t size);

/* ---- CPU (src/cpu) ---- */

/* Fill the CPU fields of `out` (name, cores, threads, features, host memory). */
void kk__cpu_fill_info(kk_device_info *out);

/* The KK_CPU_* SIMD features of this CPU and OS (cpuid, xgetbv), detected once. */
unsigned kk__cpu_features(void);

/* Parsers behind kk__cpu_fill_info, on text, for tests. */
int kk__cpu_parse_model_name(const char *cpuinfo, char *name, size_t size);
int kk__cpu_count_physical_cores(const char *cpuinfo, const void *allowed_cpu_set, size_t set_size);
int kk__parse_meminfo(const char *meminfo, unsigned long long *total_bytes,
                      unsigned long long *available_bytes);

#ifdef __cplusplus
}
#endif
#endif

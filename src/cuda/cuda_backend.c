/* The CUDA backend: discovery of NVIDIA GPUs through the CUDA runtime API,
 * their properties, the probe-kernel selftest, and NVML telemetry. cudart is
 * linked statically, so a machine with no driver gets a clean "unavailable"
 * with the reason instead of a library that fails to load. Available with a
 * GPU of compute capability 8.0 or newer. docs/backends/nvidia.md. */
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "cuda/quant_cuda.h"
#include "cuda/bench_cuda.h"
#include "cuda/cuda_kernels.h"
#include "core/error.h"
#include "core/log_internal.h"
#include "cuda/cuda_internal.h"

#define LOGGER "kernelkit.cuda.device"

enum { MAX_DEVICES = 64 };

typedef struct cuda_device {
    kk_device_info info; /* the static part; free memory is read per call */
    int usable;
} cuda_device;

static struct {
    int available;
    int count;
    char reason[640];
    char error_name[64];
    int driver_version, runtime_version; /* 13000 = 13.0; driver 0 = none */
    cuda_device dev[MAX_DEVICES];
} g;

/* ---- probing ---- */

static void version_text(int v, char *buf, size_t size) {
    snprintf(buf, size, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* Reason for a failed cudaGetDeviceCount. */
static void explain_init_failure(cudaError_t e) {
    const char *name = cudaGetErrorName(e), *text = cudaGetErrorString(e);
    snprintf(g.error_name, sizeof g.error_name, "%s", name);
    char drv[16], rt[16];
    version_text(g.driver_version, drv, sizeof drv);
    version_text(g.runtime_version, rt, sizeof rt);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    char hint[160] = "";
    if (visible) snprintf(hint, sizeof hint, "; CUDA_VISIBLE_DEVICES=\"%.60s\" is set", visible);

    switch (e) {
    case cudaErrorInsufficientDriver:
        if (g.driver_version == 0)
            snprintf(g.reason, sizeof g.reason, "no NVIDIA driver found (%s: %s)", name, text);
        else
            snprintf(g.reason, sizeof g.reason,
                     "the NVIDIA driver is too old: it supports CUDA %s, KernelKit was built "
                     "with CUDA %s; update the driver (%s: %s)",
                     drv, rt, name, text);
        break;
    case cudaErrorNoDevice:
        snprintf(g.reason, sizeof g.reason, "no CUDA-capable GPU is visible (%s: %s)%s", name, text,
                 hint);
        break;
    case cudaErrorInitializationError:
        if (g.driver_version == 0) {
            snprintf(g.reason, sizeof g.reason, "no NVIDIA driver found (%s: %s)", name, text);
            break;
        }
        /* fall through */
    default:
        snprintf(g.reason, sizeof g.reason,
                 "CUDA initialization failed (%s: %s); driver supports CUDA %s, runtime is %s%s",
                 name, text, drv, rt, hint);
        break;
    }
}

static int attribute(enum cudaDeviceAttr attr, int device) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) return 0;
    return v;
}

/* Static properties of one device; 0 on failure (recorded in the reason). */
static int read_device(int i, cuda_device *d) {
    kk_device_info *info = &d->info;
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) {
        KK_LOG(KK_LOG_WARN, LOGGER, "cannot read device properties", KK_F_INT("index", i),
               KK_F_STR("cuda_error", cudaGetErrorName(e)));
        snprintf(info->name, sizeof info->name, "unreadable CUDA device (%s)", cudaGetErrorName(e));
        return 0;
    }
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->arch = kk_arch_from_compute_capability(p.major, p.minor);
    info->sm_count = attribute(cudaDevAttrMultiProcessorCount, i);
    info->mem_total_bytes = (uint64_t)p.totalGlobalMem;
    info->l2_bytes = (uint64_t)attribute(cudaDevAttrL2CacheSize, i);
    info->smem_per_block_optin_bytes =
        (uint64_t)attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, i);
    /* CUDA 13 removed clockRate and memoryClockRate from cudaDeviceProp: attributes, in kHz */
    int sm_khz = attribute(cudaDevAttrClockRate, i);
    int mem_khz = attribute(cudaDevAttrMemoryClockRate, i);
    info->sm_clock_max_mhz = sm_khz / 1000;
    info->mem_clock_max_mhz = mem_khz / 1000;
    info->mem_bus_width_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, i);
    /* The runtime's (and deviceQuery's) formula: double data rate, bytes per
     * transfer = bus width / 8. An upper bound; real copies reach ~85-92%. */
    info->mem_bandwidth_theoretical_gbs =
        2.0 * (double)mem_khz * 1e3 * ((double)info->mem_bus_width_bits / 8.0) / 1e9;
    if (cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, i) != cudaSuccess)
        info->pci_bus_id[0] = 0;
    d->usable = kk__cc_supported(p.major, p.minor);
    return 1;
}

static void probe_once(void) {
    cudaDriverGetVersion(&g.driver_version); /* succeeds with 0 when there is no driver */
    cudaRuntimeGetVersion(&g.runtime_version);

    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n == 0) e = cudaErrorNoDevice;
    if (e != cudaSuccess) {
        explain_init_failure(e);
        (void)cudaGetLastError(); /* leave no error behind for the application */
        KK_LOG(KK_LOG_INFO, LOGGER, "backend unavailable", KK_F_STR("reason", g.reason));
        return;
    }
    if (n > MAX_DEVICES) {
        KK_LOG(KK_LOG_WARN, LOGGER, "more GPUs than KernelKit supports; using the first ones",
               KK_F_INT("visible", n), KK_F_INT("used", MAX_DEVICES));
        n = MAX_DEVICES;
    }
    g.count = n;

    int first_usable = -1;
    for (int i = 0; i < n; i++) {
        cuda_device *d = &g.dev[i];
        if (!read_device(i, d)) continue;
        kk_device_info *info = &d->info;
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", info->cc_major, info->cc_minor);
        KK_LOG(KK_LOG_DEBUG, LOGGER, "device found", KK_F_INT("index", i),
               KK_F_STR("device", info->name), KK_F_STR("cc", cc), KK_F_INT("sms", info->sm_count),
               KK_F_STR("arch", kk_arch_name(info->arch)),
               KK_F_UINT("mem_total", info->mem_total_bytes), KK_F_STR("pci", info->pci_bus_id),
               KK_F_BOOL("usable", d->usable));
        if (d->usable) {
            if (first_usable < 0) first_usable = i;
        } else {
            KK_LOG(KK_LOG_WARN, LOGGER,
                   "GPU not used: compute capability below 8.0 (KernelKit builds sm_80, sm_90a)",
                   KK_F_INT("index", i), KK_F_STR("device", info->name), KK_F_STR("cc", cc),
                   KK_F_STR("arch", kk_arch_name(info->arch)));
        }
    }
    (void)cudaGetLastError();

    if (first_usable < 0) {
        size_t used = (size_t)snprintf(
            g.reason, sizeof g.reason,
            "no GPU with compute capability 8.0 or newer (KernelKit's kernels are built for "
            "sm_80 and sm_90a):");
        for (int i = 0; i < n && used < sizeof g.reason; i++) {
            const kk_device_info *info = &g.dev[i].info;
            int w =
                info->cc_major == 0 /* properties could not be read */
                    ? snprintf(g.reason + used, sizeof g.reason - used, "%s cuda:%d is an %.60s",
                               i ? "," : "", i, info->name)
                    : snprintf(g.reason + used, sizeof g.reason - used,
                               "%s cuda:%d \"%.60s\" is %d.%d (%s)", i ? "," : "", i, info->name,
                               info->cc_major, info->cc_minor, kk_arch_name(info->arch));
            if (w < 0) break;
            used += (size_t)w;
        }
        KK_LOG(KK_LOG_INFO, LOGGER, "backend unavailable", KK_F_STR("reason", g.reason));
        return;
    }

    g.available = 1;
    const kk_device_info *info = &g.dev[first_usable].info;
    char cc[16], drv[16], rt[16];
    snprintf(cc, sizeof cc, "%d.%d", info->cc_major, info->cc_minor);
    version_text(g.driver_version, drv, sizeof drv);
    version_text(g.runtime_version, rt, sizeof rt);
    KK_LOG(KK_LOG_INFO, LOGGER, "backend initialized", KK_F_STR("device", info->name),
           KK_F_STR("cc", cc), KK_F_INT("sms", info->sm_count),
           KK_F_STR("arch", kk_arch_name(info->arch)), KK_F_INT("devices", n),
           KK_F_STR("driver_cuda", drv), KK_F_STR("runtime_cuda", rt));
}

KK__BACKEND_ONCE(cuda_probe, probe_once)

/* ---- work on a device without touching the caller's current device ----
 *
 * cudaSetDevice changes the calling thread's current device, and since CUDA 12
 * it also creates that device's primary context. Restoring the caller's device
 * afterwards is not enough: a thread that never chose one reports device 0, and
 * "restoring" it would create a context on GPU 0 for nothing. So the few calls
 * that need a device current (free memory, the selftest) run on a short-lived
 * thread of their own, whose current device dies with it. */

void kk__cuda_run_on_device_thread(void *(*fn)(void *), void *job, int device) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn, job) == 0) {
        pthread_join(t, NULL);
        return;
    }
    /* no thread: do it here and put the caller's device back */
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    fn(job);
    if (prev >= 0 && prev != device) cudaSetDevice(prev);
    (void)cudaGetLastError();
}

typedef struct meminfo_job {
    int device;
    cudaError_t err;
    size_t free_bytes, total_bytes;
} meminfo_job;

static void *meminfo_thread(void *arg) {
    meminfo_job *j = arg;
    j->err = cudaSetDevice(j->device);
    if (j->err == cudaSuccess) j->err = cudaMemGetInfo(&j->free_bytes, &j->total_bytes);
    (void)cudaGetLastError();
    return NULL;
}

/* ---- the table ---- */

static int cuda_available(void *ctx) {
    (void)ctx;
    return g.available;
}

static const char *cuda_unavailable_reason(void *ctx) {
    (void)ctx;
    return g.available ? "" : g.reason;
}

static const char *cuda_unavailable_error_name(void *ctx) {
    (void)ctx;
    return g.available ? "" : g.error_name;
}

static int cuda_device_count(void *ctx) {
    (void)ctx;
    return g.available ? g.count : 0;
}

static kk_status cuda_device_info(void *ctx, int index, kk_device_info *out, const char *func) {
    (void)ctx;
    const kk_device_info *s = &g.dev[index].info;
    /* copy the GPU fields; the registry owns backend, index, spec and count */
    snprintf(out->name, sizeof out->name, "%s", s->name);
    out->cc_major = s->cc_major;
    out->cc_minor = s->cc_minor;
    out->arch = s->arch;
    out->sm_count = s->sm_count;
    out->mem_total_bytes = s->mem_total_bytes;
    out->l2_bytes = s->l2_bytes;
    out->smem_per_block_optin_bytes = s->smem_per_block_optin_bytes;
    out->sm_clock_max_mhz = s->sm_clock_max_mhz;
    out->mem_clock_max_mhz = s->mem_clock_max_mhz;
    out->mem_bus_width_bits = s->mem_bus_width_bits;
    out->mem_bandwidth_theoretical_gbs = s->mem_bandwidth_theoretical_gbs;
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", s->pci_bus_id);

    /* Free memory needs the device current (this creates its primary context
     * on first use); see kk__cuda_run_on_device_thread. */
    meminfo_job j = {.device = index, .err = cudaSuccess, .free_bytes = 0, .total_bytes = 0};
    kk__cuda_run_on_device_thread(meminfo_thread, &j, index);
    if (j.err != cudaSuccess)
        return kk__cuda_error(KK_ERR_DEVICE_FAILURE, func, cudaGetErrorName(j.err),
                              cudaGetErrorString(j.err), "cannot read free memory of cuda:%d",
                              index);
    out->mem_free_bytes = (uint64_t)j.free_bytes;
    return KK_OK;
}

static kk_status too_old(int index, const char *func) {
    const kk_device_info *s = &g.dev[index].info;
    char value[32];
    snprintf(value, sizeof value, "%d.%d", s->cc_major, s->cc_minor);
    return kk__set_error(KK_ERR_INVALID_COMPUTE_CAPABILITY, func, "device", value,
                         "compute capability 8.0 or newer", NULL,
                         "cuda:%d \"%.100s\" has compute capability %d.%d (%s); KernelKit's "
                         "kernels need 8.0 or newer (built for sm_80 and sm_90a)",
                         index, s->name, s->cc_major, s->cc_minor, kk_arch_name(s->arch));
}

static kk_status cuda_device_usable(void *ctx, int index, const char *func) {
    (void)ctx;
    if (g.dev[index].usable) return KK_OK;
    if (!func) return KK_ERR_INVALID_COMPUTE_CAPABILITY;
    return too_old(index, func);
}

int kk__cuda_device_usable(int device) {
    cuda_probe(NULL);
    return g.available && device >= 0 && device < g.count && g.dev[device].usable;
}

/* ---- selftest ---- */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

enum { PROBE_N = 1 << 16 };

typedef struct selftest_job {
    int device;
    unsigned seed;
    unsigned *h_out;  /* PROBE_N + 2 values, owned by the caller */
    cudaError_t err;  /* first failure */
    const char *step; /* the call that failed */
    int phase;        /* 0 setup, 1 launch, 2 run, 3 copy back */
    double ms;        /* launch to synchronize */
} selftest_job;

static void *selftest_thread(void *arg) {
    selftest_job *j = arg;
    unsigned *d_out = NULL;
    cudaStream_t stream = NULL;
    const size_t bytes = (PROBE_N + 2) * sizeof *d_out;
    j->phase = 0;
    j->step = "cudaSetDevice";
    j->err = cudaSetDevice(j->device);
    if (j->err == cudaSuccess) {
        j->step = "cudaStreamCreateWithFlags";
        j->err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    }
    if (j->err == cudaSuccess) {
        j->step = "cudaMalloc";
        j->err = cudaMalloc((void **)&d_out, bytes);
    }
    if (j->err == cudaSuccess) {
        j->step = "cudaMemsetAsync"; /* poison: a kernel that writes nothing fails */
        j->err = cudaMemsetAsync(d_out, 0xff, bytes, stream);
    }
    if (j->err == cudaSuccess) {
        j->phase = 1;
        j->step = "kk__probe_launch";
        double t0 = now_ms();
        j->err = kk__probe_launch(d_out, PROBE_N, j->seed, stream);
        if (j->err == cudaSuccess) {
            j->phase = 2;
            j->step = "cudaStreamSynchronize";
            j->err = cudaStreamSynchronize(stream);
            j->ms = now_ms() - t0;
        }
    }
    if (j->err == cudaSuccess) {
        j->phase = 3;
        j->step = "cudaMemcpy";
        j->err = cudaMemcpy(j->h_out, d_out, bytes, cudaMemcpyDeviceToHost);
    }
    if (d_out) cudaFree(d_out);
    if (stream) cudaStreamDestroy(stream);
    (void)cudaGetLastError();
    return NULL;
}

static kk_status selftest(int device, kk__cuda_selftest_result *res, const char *func) {
    kk__cuda_selftest_result local;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    selftest_job j = {.device = device, .seed = 0x4b4b5052u ^ (unsigned)device /* "KKPR" */};
    j.h_out = malloc((PROBE_N + 2) * sizeof *j.h_out);
    if (!j.h_out) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "selftest: host allocation failed");
    kk__cuda_run_on_device_thread(selftest_thread, &j, device);

    kk_status st = KK_OK;
    if (j.err != cudaSuccess) {
        const char *name = cudaGetErrorName(j.err), *text = cudaGetErrorString(j.err);
        if (j.phase == 1)
            st = kk__cuda_error(KK_ERR_KERNEL_LAUNCH, func, name, text,
                                "probe kernel failed to launch on cuda:%d", device);
        else if (j.phase == 2)
            st = kk__cuda_error(KK_ERR_KERNEL_LAUNCH, func, name, text,
                                "probe kernel failed while running on cuda:%d", device);
        else
            st = kk__cuda_error(j.err == cudaErrorMemoryAllocation ? KK_ERR_OUT_OF_MEMORY
                                                                   : KK_ERR_DEVICE_FAILURE,
                                func, name, text, "selftest on cuda:%d: %s failed", device, j.step);
    }
    for (unsigned i = 0; st == KK_OK && i < PROBE_N; i++) {
        unsigned want = kk__probe_value(i, j.seed);
        if (j.h_out[i] != want)
            st = kk__error(KK_ERR_KERNEL_LAUNCH, func,
                           "probe kernel on cuda:%d wrote wrong values: element %u is 0x%08x, "
                           "expected 0x%08x",
                           device, i, j.h_out[i], want);
    }
    if (st == KK_OK) {
        res->elements = PROBE_N;
        res->arch_ran = (int)j.h_out[PROBE_N];
        res->arch_specific = (int)j.h_out[PROBE_N + 1];
        res->ms = j.ms;
        if (res->arch_ran < 100 || res->arch_ran > 10000 || res->arch_specific > 1)
            st = kk__error(KK_ERR_KERNEL_LAUNCH, func,
                           "probe kernel on cuda:%d did not report its architecture (0x%08x)",
                           device, j.h_out[PROBE_N]);
    }
    free(j.h_out);
    if (st) {
        memset(res, 0, sizeof *res);
        KK_LOG(KK_LOG_ERROR, LOGGER, "selftest failed", KK_F_INT("index", device),
               KK_F_STR("error", kk_last_error_message()));
        return st;
    }
    KK_LOG(KK_LOG_DEBUG, LOGGER, "selftest passed", KK_F_INT("index", device),
           KK_F_INT("arch_ran", res->arch_ran), KK_F_BOOL("arch_specific", res->arch_specific),
           KK_F_INT("elements", res->elements), KK_F_DBL("ms", res->ms));
    return KK_OK;
}

kk_status kk__cuda_selftest(int device, kk__cuda_selftest_result *result) {
    static const char *const func = "kk__cuda_selftest";
    cuda_probe(NULL);
    if (!g.available)
        return kk__set_error(KK_ERR_CUDA_UNAVAILABLE, func, NULL, NULL, NULL, g.error_name,
                             "the cuda backend is unavailable: %.700s", g.reason);
    if (device < 0 || device >= g.count) {
        char expected[64];
        snprintf(expected, sizeof expected, "0 to %d", g.count - 1);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "device", expected, "%d", device);
    }
    if (!g.dev[device].usable) return too_old(device, func);
    return selftest(device, result, func);
}

static kk_status cuda_selftest(void *ctx, int index, const char *func) {
    (void)ctx;
    return selftest(index, NULL, func);
}

static kk_status cuda_telemetry(void *ctx, int index, kk_gpu_telemetry *out, const char *func) {
    (void)ctx;
    const char *pci = g.dev[index].info.pci_bus_id;
    if (!pci[0]) return kk__nvml_read_by_index(index, out, func); /* best effort */
    return kk__nvml_read_by_pci(pci, out);
}

static kk_status cuda_call_on_device(void *ctx, int index, kk_status (*fn)(void *arg), void *arg) {
    (void)ctx;
    return kk__cuda_call_on_device(index, fn, arg);
}

static kk_status cuda_stream_sync(void *ctx, int index, kk_stream stream, const char *func) {
    (void)ctx;
    return kk__cuda_stream_sync(index, stream, func);
}

static kk_status cuda_timer_create(void *ctx, int index, kk_bench_fn fn, void *fn_ctx,
                                   const kk_bench_options *o, kk__bench_timer *out) {
    (void)ctx;
    return kk__bench_cuda_timer(index, fn, fn_ctx, o, out);
}

static kk_status cuda_calibrate(void *ctx, int index, const kk_calibrate_options *o,
                                kk__calibrate_measure_fn measure, kk_calibration *cal) {
    (void)ctx;
    return kk__calibrate_cuda(index, o, measure, cal);
}

static void cuda_versions(void *ctx, int *runtime, int *driver) {
    (void)ctx;
    kk__bench_cuda_versions(runtime, driver);
}

static kk_status cuda_stream_create(void *ctx, int index, int *prev, kk_stream *out) {
    (void)ctx;
    return kk__bench_stream_create(index, prev, out);
}

static void cuda_stream_destroy(void *ctx, kk_stream stream, int prev) {
    (void)ctx;
    kk__bench_stream_destroy(stream, prev);
}

static kk_status cuda_launch_floor(void *ctx, kk_stream stream) {
    (void)ctx;
    return kk__bench_test_tiny(stream);
}

static const kk__quant_ops cuda_quant = {kk__quantize_cuda, kk__dequantize_cuda,
                                         kk__scale_layout_cuda};

const kk__backend kk__cuda_backend = {
    .name = "cuda",
    .kind = KK_BACKEND_CUDA,
    .spec_forms = "\"cuda\", \"cuda:N\"",
    .unavailable_status = KK_ERR_CUDA_UNAVAILABLE,
    .context = NULL,
    .probe = cuda_probe,
    .available = cuda_available,
    .unavailable_reason = cuda_unavailable_reason,
    .unavailable_error_name = cuda_unavailable_error_name,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .device_usable = cuda_device_usable,
    .selftest = cuda_selftest,
    .telemetry = cuda_telemetry,
    .mem = &kk__cuda_mem_ops,
    .slots = kk__cuda_slots,
    .call_on_device = cuda_call_on_device,
    .stream_sync = cuda_stream_sync,
    .timer_create = cuda_timer_create,
    .calibrate = cuda_calibrate,
    .versions = cuda_versions,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .launch_floor = cuda_launch_floor,
    .graph_begin = kk__cuda_graph_begin,
    .graph_end = kk__cuda_graph_end,
    .graph_launch = kk__cuda_graph_launch,
    .graph_destroy = kk__cuda_graph_destroy,
    .streams = &kk__cuda_stream_ops,
    .quant = &cuda_quant,
};

/* The CPU backend: always available, exactly one device ("cpu"). */
#include <pthread.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "core/quant_internal.h"
#include "cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/log_internal.h"

/* Probing the CPU cannot fail; it only announces, once, what was found. */
static void cpu_announce(void) {
    if (!kk_log_enabled("kernelkit.cpu", KK_LOG_INFO)) return;
    kk_device_info info;
    char simd[256];
    kk__cpu_fill_info(&info);
    KK_LOG(KK_LOG_INFO, "kernelkit.cpu", "backend initialized", KK_F_STR("device", info.name),
           KK_F_INT("cores", info.cpu_cores), KK_F_INT("threads", info.cpu_threads),
           KK_F_STR("simd", kk_cpu_features_str(info.cpu_features, simd, sizeof simd)));
}

static void cpu_probe(void *ctx) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)ctx;
    pthread_once(&once, cpu_announce);
}

static int cpu_available(void *ctx) {
    (void)ctx;
    return 1;
}

static const char *cpu_unavailable_reason(void *ctx) {
    (void)ctx;
    return "";
}

static int cpu_device_count(void *ctx) {
    (void)ctx;
    return 1;
}

static kk_status cpu_device_info(void *ctx, int index, kk_device_info *out, const char *func) {
    (void)ctx;
    (void)index;
    (void)func;
    kk__cpu_fill_info(out);
    return KK_OK;
}

/* The same known-answer check as the CUDA probe kernel, on the host. */
static kk_status cpu_selftest(void *ctx, int index, const char *func) {
    (void)ctx;
    (void)index;
    enum { N = 1 << 16 };
    const unsigned seed = 0x4b4b5052u;                /* "KKPR" */
    volatile unsigned *buf = malloc(N * sizeof *buf); /* volatile: really store, then load */
    if (!buf) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "selftest: host allocation failed");
    for (unsigned i = 0; i < N; i++) buf[i] = kk__probe_value(i, seed);
    kk_status st = KK_OK;
    for (unsigned i = 0; i < N; i++) {
        unsigned got = buf[i], want = kk__probe_value(i, seed);
        if (got != want) {
            st = kk__error(KK_ERR_DEVICE_FAILURE, func,
                           "selftest on cpu: element %u is 0x%08x, expected 0x%08x", i, got, want);
            break;
        }
    }
    free((void *)buf);
    return st;
}

/* The quantize kernels of core/quant*.c run on the host as they are. */
static kk_status cpu_quantize(kk__quant_job *job, const char *func) {
    (void)func;
    kk__quantize_cpu(job);
    return KK_OK;
}

static kk_status cpu_dequantize(const kk__quant_job *job, const char *func) {
    (void)func;
    kk__dequantize_cpu(job);
    return KK_OK;
}

static kk_status cpu_scale_layout(const kk__scale_layout_job *job, const char *func) {
    (void)func;
    kk__scale_layout_cpu(job);
    return KK_OK;
}

static const kk__quant_ops cpu_quant = {cpu_quantize, cpu_dequantize, cpu_scale_layout};

const kk__backend kk__cpu_backend = {
    .name = "cpu",
    .kind = KK_BACKEND_CPU,
    .spec_forms = "\"cpu\"",
    .unavailable_status = KK_ERR_DEVICE, /* never: the CPU is always there */
    .context = NULL,
    .probe = cpu_probe,
    .available = cpu_available,
    .unavailable_reason = cpu_unavailable_reason,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .selftest = cpu_selftest,
    .mem = &kk__cpu_mem_ops,
    .slots = kk__cpu_slots,
    .calibrate = kk__calibrate_cpu,
    .quant = &cpu_quant,
    /* device_usable, telemetry: every CPU is usable, nothing to read;
     * call_on_device, stream_sync: kernels run synchronously here */
};

/* GPU telemetry through NVML, loaded at run time: libnvidia-ml.so.1 ships with
 * the driver, not the CUDA toolkit, so KernelKit neither links it nor needs
 * nvml.h (the few types and functions used are declared below). Read-only:
 * nothing here sets GPU state. GPUs are matched to CUDA devices by PCI bus id.
 * docs/backends/nvidia.md, "Telemetry". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/log_internal.h"

#define NVML_LIBRARY "libnvidia-ml.so.1"
#define LOGGER "kernelkit.cuda.nvml"

/* ---- the slice of nvml.h we use ---- */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlUtilization_st {
    unsigned int gpu;    /* percent of time a kernel was running */
    unsigned int memory; /* percent of time device memory was read or written */
} nvmlUtilization_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_TEMPERATURE_GPU = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
};

typedef nvmlReturn_t (*fn_void)(void);
typedef const char *(*fn_error_string)(nvmlReturn_t);
typedef nvmlReturn_t (*fn_count)(unsigned int *);
typedef nvmlReturn_t (*fn_by_index)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*fn_by_pci)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*fn_dev_kind_uint)(nvmlDevice_t, int, unsigned int *);
typedef nvmlReturn_t (*fn_dev_uint)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*fn_dev_util)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*fn_dev_ull)(nvmlDevice_t, unsigned long long *);
typedef nvmlReturn_t (*fn_driver_version)(char *, unsigned int);

static struct {
    fn_void init_v2, shutdown;
    fn_error_string error_string;
    fn_count get_count;
    fn_by_index by_index;
    fn_by_pci by_pci;
    fn_dev_kind_uint temperature, clock_info, max_clock_info;
    fn_dev_uint power_usage, power_limit;
    fn_dev_util utilization;
    fn_dev_ull clock_reasons; /* ClocksEventReasons, else ClocksThrottleReasons */
    fn_driver_version driver_version;
} nv;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ok;
static char g_reason[160];
static char g_driver[64];

static const char *const k_return_names[] = {
    "NVML_SUCCESS",
    "NVML_ERROR_UNINITIALIZED",
    "NVML_ERROR_INVALID_ARGUMENT",
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_NO_PERMISSION",
    "NVML_ERROR_ALREADY_INITIALIZED",
    "NVML_ERROR_NOT_FOUND",
    "NVML_ERROR_INSUFFICIENT_SIZE",
    "NVML_ERROR_INSUFFICIENT_POWER",
    "NVML_ERROR_DRIVER_NOT_LOADED",
    "NVML_ERROR_TIMEOUT",
    "NVML_ERROR_IRQ_ISSUE",
    "NVML_ERROR_LIBRARY_NOT_FOUND",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_CORRUPTED_INFOROM",
    "NVML_ERROR_GPU_IS_LOST",
    "NVML_ERROR_RESET_REQUIRED",
    "NVML_ERROR_OPERATING_SYSTEM",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    "NVML_ERROR_IN_USE",
    "NVML_ERROR_MEMORY",
    "NVML_ERROR_NO_DATA",
};

/* "NVML_ERROR_GPU_IS_LOST: GPU is lost" into buf. */
static const char *describe(nvmlReturn_t r, char *buf, size_t size) {
    char name[48];
    if (r >= 0 && (size_t)r < sizeof k_return_names / sizeof k_return_names[0])
        snprintf(name, sizeof name, "%s", k_return_names[r]);
    else if (r == 999)
        snprintf(name, sizeof name, "NVML_ERROR_UNKNOWN");
    else
        snprintf(name, sizeof name, "NVML error %d", r);
    const char *text = nv.error_string ? nv.error_string(r) : NULL;
    snprintf(buf, size, "%s: %s", name, text ? text : "?");
    return buf;
}

/* dlsym into a function pointer without the object-to-function cast. */
static int sym(void *lib, const char *name, void *fn_ptr, size_t fn_size) {
    void *p = dlsym(lib, name);
    memcpy(fn_ptr, &p, fn_size);
    return p != NULL;
}
#define SYM(lib, name, field) sym((lib), (name), &(field), sizeof(field))

static void load(void) {
    dlerror();
    void *lib = dlopen(NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        if (!e) e = "cannot be loaded";
        /* dlerror usually starts with the file name already */
        size_t n = strlen(NVML_LIBRARY);
        if (strncmp(e, NVML_LIBRARY ": ", n + 2) == 0) e += n + 2;
        snprintf(g_reason, sizeof g_reason, "NVML not available (%s: %.100s)", NVML_LIBRARY, e);
        KK_LOG(KK_LOG_DEBUG, LOGGER, "NVML unavailable", KK_F_STR("reason", g_reason));
        return;
    }
    /* required */
    static const char *const required[] = {"nvmlInit_v2", "nvmlErrorString",
                                           "nvmlDeviceGetHandleByIndex_v2"};
    int ok = SYM(lib, required[0], nv.init_v2) && SYM(lib, required[1], nv.error_string) &&
             SYM(lib, required[2], nv.by_index);
    if (!ok) {
        const char *missing = !nv.init_v2        ? required[0]
                              : !nv.error_string ? required[1]
                                                 : required[2];
        snprintf(g_reason, sizeof g_reason, "NVML not available (%s has no %s: driver too old?)",
                 NVML_LIBRARY, missing);
        memset(&nv, 0, sizeof nv);
        dlclose(lib);
        KK_LOG(KK_LOG_DEBUG, LOGGER, "NVML unavailable", KK_F_STR("reason", g_reason));
        return;
    }
    /* optional: a missing one leaves its reading at zero */
    SYM(lib, "nvmlShutdown", nv.shutdown);
    SYM(lib, "nvmlDeviceGetCount_v2", nv.get_count);
    SYM(lib, "nvmlDeviceGetHandleByPciBusId_v2", nv.by_pci);
    SYM(lib, "nvmlDeviceGetTemperature", nv.temperature);
    SYM(lib, "nvmlDeviceGetClockInfo", nv.clock_info);
    SYM(lib, "nvmlDeviceGetMaxClockInfo", nv.max_clock_info);
    SYM(lib, "nvmlDeviceGetPowerUsage", nv.power_usage);
    SYM(lib, "nvmlDeviceGetEnforcedPowerLimit", nv.power_limit);
    SYM(lib, "nvmlDeviceGetUtilizationRates", nv.utilization);
    if (!SYM(lib, "nvmlDeviceGetCurrentClocksEventReasons", nv.clock_reasons))
        SYM(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", nv.clock_reasons);
    SYM(lib, "nvmlSystemGetDriverVersion", nv.driver_version);

    nvmlReturn_t r = nv.init_v2();
    if (r != NVML_SUCCESS) {
        char d[128];
        snprintf(g_reason, sizeof g_reason, "NVML initialization failed (%s)",
                 describe(r, d, sizeof d));
        /* keep the library loaded: nvmlErrorString may be needed again */
        KK_LOG(KK_LOG_DEBUG, LOGGER, "NVML unavailable", KK_F_STR("reason", g_reason));
        return;
    }
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
    if (nv.driver_version && nv.driver_version(version, sizeof version) == NVML_SUCCESS)
        snprintf(g_driver, sizeof g_driver, "%.63s", version);
    g_ok = 1;
    KK_LOG(KK_LOG_DEBUG, LOGGER, "NVML loaded", KK_F_STR("driver", g_driver),
           KK_F_BOOL("clocks_event_reasons", nv.clock_reasons != NULL));
}

int kk__nvml_load(const char **reason) {
    pthread_once(&g_once, load);
    if (reason) *reason = g_ok ? "" : g_reason;
    return g_ok;
}

int kk__nvml_device_count(void) {
    unsigned n = 0;
    if (!kk__nvml_load(NULL) || !nv.get_count || nv.get_count(&n) != NVML_SUCCESS) return 0;
    return (int)n;
}

/* ---- throttle reasons ---- */

static const struct {
    unsigned long long bit;
    const char *name;
} k_reasons[] = {
    {0x1ull, "gpu_idle"},
    {0x2ull, "applications_clocks_setting"},
    {0x4ull, "sw_power_cap"},
    {0x8ull, "hw_slowdown"},
    {0x10ull, "sync_boost"},
    {0x20ull, "sw_thermal_slowdown"},
    {0x40ull, "hw_thermal_slowdown"},
    {0x80ull, "hw_power_brake_slowdown"},
    {0x100ull, "display_clock_setting"},
};

void kk__throttle_text(unsigned long long reasons, char *buf, size_t size) {
    if (!buf || size == 0) return;
    if (reasons == 0) {
        snprintf(buf, size, "none");
        return;
    }
    size_t used = 0;
    buf[0] = 0;
    unsigned long long known = 0;
    for (size_t i = 0; i < sizeof k_reasons / sizeof k_reasons[0]; i++) {
        known |= k_reasons[i].bit;
        if (!(reasons & k_reasons[i].bit)) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", k_reasons[i].name);
        if (n < 0 || (size_t)n >= size - used) {
            buf[used] = 0;
            return;
        }
        used += (size_t)n;
    }
    if (reasons & ~known) {
        int n = snprintf(buf + used, size - used, "%s0x%llx", used ? "," : "", reasons & ~known);
        if (n < 0 || (size_t)n >= size - used) buf[used] = 0;
    }
}

/* ---- reading ---- */

static void unavailable(kk_gpu_telemetry *out, const char *fmt, ...) KK__PRINTF(2, 3);
static void unavailable(kk_gpu_telemetry *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out->available = 0;
    vsnprintf(out->unavailable_reason, sizeof out->unavailable_reason, fmt, ap);
    va_end(ap);
}

/* The maximum SM clock never changes, but NVML takes about 1 ms to report it
 * (measured on an H200), 30x a current-clock read: a benchmark that checks for
 * throttling after every sample cannot afford that, so it is read once per GPU. */
enum { MAX_CLOCK_CACHE = 64 };
static struct {
    nvmlDevice_t dev;
    unsigned mhz;
} g_max_clock[MAX_CLOCK_CACHE];
static int g_max_clock_count;
static pthread_mutex_t g_max_clock_lock = PTHREAD_MUTEX_INITIALIZER;

static nvmlReturn_t max_sm_clock(nvmlDevice_t dev, unsigned *mhz) {
    pthread_mutex_lock(&g_max_clock_lock);
    for (int i = 0; i < g_max_clock_count; i++)
        if (g_max_clock[i].dev == dev) {
            *mhz = g_max_clock[i].mhz;
            pthread_mutex_unlock(&g_max_clock_lock);
            return NVML_SUCCESS;
        }
    pthread_mutex_unlock(&g_max_clock_lock);
    nvmlReturn_t r = nv.max_clock_info(dev, NVML_CLOCK_SM, mhz);
    if (r != NVML_SUCCESS) return r;
    pthread_mutex_lock(&g_max_clock_lock);
    if (g_max_clock_count < MAX_CLOCK_CACHE) {
        g_max_clock[g_max_clock_count].dev = dev;
        g_max_clock[g_max_clock_count].mhz = *mhz;
        g_max_clock_count++;
    }
    pthread_mutex_unlock(&g_max_clock_lock);
    return r;
}

static kk_status read_device(nvmlDevice_t dev, kk_gpu_telemetry *out) {
    unsigned v = 0;
    nvmlReturn_t lost = NVML_SUCCESS;
#define NOTE(r)                                                                                    \
    do {                                                                                           \
        if ((r) == NVML_ERROR_GPU_IS_LOST) lost = (r);                                             \
    } while (0)
    nvmlReturn_t r;
    if (nv.temperature) {
        r = nv.temperature(dev, NVML_TEMPERATURE_GPU, &v);
        if (r == NVML_SUCCESS) out->temperature_c = v;
        NOTE(r);
    }
    if (nv.clock_info) {
        r = nv.clock_info(dev, NVML_CLOCK_SM, &v);
        if (r == NVML_SUCCESS) out->sm_clock_mhz = (int)v;
        NOTE(r);
        r = nv.clock_info(dev, NVML_CLOCK_MEM, &v);
        if (r == NVML_SUCCESS) out->mem_clock_mhz = (int)v;
        NOTE(r);
    }
    if (nv.max_clock_info) {
        r = max_sm_clock(dev, &v);
        if (r == NVML_SUCCESS) out->sm_clock_max_mhz = (int)v;
        NOTE(r);
    }
    if (nv.power_usage) {
        r = nv.power_usage(dev, &v);
        if (r == NVML_SUCCESS) out->power_w = v / 1000.0; /* mW */
        NOTE(r);
    }
    if (nv.power_limit) {
        r = nv.power_limit(dev, &v);
        if (r == NVML_SUCCESS) out->power_limit_w = v / 1000.0;
        NOTE(r);
    }
    if (nv.utilization) {
        nvmlUtilization_t u = {0, 0};
        r = nv.utilization(dev, &u);
        if (r == NVML_SUCCESS) {
            out->utilization_gpu_pct = (int)u.gpu;
            out->utilization_mem_pct = (int)u.memory;
        }
        NOTE(r);
    }
    if (nv.clock_reasons) {
        unsigned long long bits = 0;
        r = nv.clock_reasons(dev, &bits);
        if (r == NVML_SUCCESS) out->throttle_reasons = bits;
        NOTE(r);
    }
#undef NOTE
    kk__throttle_text(out->throttle_reasons, out->throttle_text, sizeof out->throttle_text);
    snprintf(out->driver_version, sizeof out->driver_version, "%s", g_driver);
    if (lost != NVML_SUCCESS) {
        char d[128];
        memset(out, 0, sizeof *out); /* no half readings */
        unavailable(out, "NVML cannot read the GPU (%s)", describe(lost, d, sizeof d));
        return KK_OK;
    }
    out->available = 1;
    return KK_OK;
}

kk_status kk__nvml_read_by_pci(const char *pci_bus_id, kk_gpu_telemetry *out) {
    const char *reason = "";
    if (!kk__nvml_load(&reason)) {
        unavailable(out, "%s", reason);
        return KK_OK;
    }
    if (!nv.by_pci) {
        unavailable(out, "NVML not available (%s has no %s)", NVML_LIBRARY,
                    "nvmlDeviceGetHandleByPciBusId_v2");
        return KK_OK;
    }
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = nv.by_pci(pci_bus_id, &dev);
    if (r != NVML_SUCCESS) {
        char d[128];
        unavailable(out, "NVML has no GPU at PCI bus id %.32s (%.120s)", pci_bus_id,
                    describe(r, d, sizeof d));
        return KK_OK;
    }
    return read_device(dev, out);
}

kk_status kk__nvml_read_by_index(int index, kk_gpu_telemetry *out, const char *func) {
    const char *reason = "";
    if (!kk__nvml_load(&reason)) {
        unavailable(out, "%s", reason);
        return KK_OK;
    }
    int count = kk__nvml_device_count();
    if (nv.get_count && index >= count) {
        char expected[64];
        snprintf(expected, sizeof expected, "below %d (GPUs that NVML sees)", count);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "index", expected, "%d", index);
    }
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = nv.by_index((unsigned)index, &dev);
    if (r != NVML_SUCCESS) {
        char d[128];
        unavailable(out, "NVML cannot open GPU %d (%.120s)", index, describe(r, d, sizeof d));
        return KK_OK;
    }
    return read_device(dev, out);
}

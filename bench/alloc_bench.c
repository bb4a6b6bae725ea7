/* kk_alloc_bench: what one allocation + free costs through KernelKit's
 * caching allocator, against the raw calls it replaces.
 *
 *   kk_alloc_bench [--device cpu|cuda:N] [--output FILE] [--quick] [--no-samples]
 *
 * Methods: "pool" (kk_mem_alloc + kk_mem_free on the device), "raw" (cudaMalloc
 * + cudaFree on a GPU; malloc + free on the CPU) and, on a GPU, "malloc" as a
 * host reference. Sizes 1 KiB .. 1 GiB; per size a warm-up, then N timed
 * pairs (fewer for big sizes), each timed alone with clock_gettime
 * (CLOCK_MONOTONIC). No explicit synchronization: cudaFree synchronizes by
 * itself, and kk_mem_free only records an event, which is the point of a
 * cache. The JSON (schema "kernelkit.alloc_bench/1") holds the device, driver
 * and CUDA versions, per size and method min/median/mean/p95/p99/max and the
 * raw samples, and the ratio of medians pool/raw. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/kernelkit.h"
#include "kernelkit/memory.h"

#ifdef KK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct size_case {
    size_t bytes;
    const char *label;
    int iterations;
} size_case;

static const size_case k_sizes[] = {
    {1u << 10, "1 KiB", 20000},  {64u << 10, "64 KiB", 20000}, {1u << 20, "1 MiB", 20000},
    {16u << 20, "16 MiB", 2000}, {256u << 20, "256 MiB", 200}, {1u << 30, "1 GiB", 50},
};
enum { NSIZES = sizeof k_sizes / sizeof k_sizes[0] };

typedef enum method { POOL, RAW, HOST_MALLOC, NMETHODS } method;

typedef struct options {
    const char *device;
    const char *output;
    int quick, samples;
    int gpu, gpu_index;
} options;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* One pair; 0 on success, else a message in err. */
static int pair(const options *o, method m, size_t bytes, char *err, size_t errsize) {
    void *p = NULL;
    if (m == POOL) {
        kk_status st = kk_mem_alloc(o->device, bytes, &p);
        if (st) {
            snprintf(err, errsize, "%s", kk_last_error_message());
            return -1;
        }
        kk_mem_free(p);
        return 0;
    }
    if (m == RAW && o->gpu) {
#ifdef KK_HAVE_CUDA
        cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            snprintf(err, errsize, "cudaMalloc: %s", cudaGetErrorName(e));
            (void)cudaGetLastError();
            return -1;
        }
        cudaFree(p);
        return 0;
#endif
    }
    p = malloc(bytes);
    if (!p) {
        snprintf(err, errsize, "malloc failed");
        return -1;
    }
    *(volatile char *)p = 1; /* keep the pair from being optimized away */
    free(p);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *sorted, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    double f = pos - i;
    return i + 1 < n ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted[n - 1];
}

/* Warm up, time `n` pairs, describe them. NULL median on failure. */
static cJSON *run_method(const options *o, method m, const size_case *c, double *median) {
    int n = o->quick ? (c->iterations / 20 > 5 ? c->iterations / 20 : 5) : c->iterations;
    int warm = n / 10 > 3 ? n / 10 : 3;
    cJSON *j = cJSON_CreateObject();
    char err[512];
    double *t = malloc((size_t)n * sizeof *t);
    *median = -1;
    if (!t) return j;
    for (int i = 0; i < warm; i++) {
        if (pair(o, m, c->bytes, err, sizeof err)) {
            cJSON_AddStringToObject(j, "error", err);
            free(t);
            return j;
        }
    }
    for (int i = 0; i < n; i++) {
        double t0 = now_ns();
        int rc = pair(o, m, c->bytes, err, sizeof err);
        t[i] = now_ns() - t0;
        if (rc) {
            cJSON_AddStringToObject(j, "error", err);
            free(t);
            return j;
        }
    }
    if (o->samples) cJSON_AddItemToObject(j, "samples_ns", cJSON_CreateDoubleArray(t, n));
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *median = quantile(t, n, 0.5);
    cJSON_AddNumberToObject(j, "iterations", n);
    cJSON_AddNumberToObject(j, "warmup", warm);
    cJSON_AddNumberToObject(j, "min_ns", t[0]);
    cJSON_AddNumberToObject(j, "median_ns", *median);
    cJSON_AddNumberToObject(j, "mean_ns", sum / n);
    cJSON_AddNumberToObject(j, "p95_ns", quantile(t, n, 0.95));
    cJSON_AddNumberToObject(j, "p99_ns", quantile(t, n, 0.99));
    cJSON_AddNumberToObject(j, "max_ns", t[n - 1]);
    free(t);
    return j;
}

static const char *method_name(const options *o, method m) {
    if (m == POOL) return "pool";
    if (m == RAW) return o->gpu ? "cudaMalloc" : "malloc";
    return "malloc";
}

static cJSON *run_size(const options *o, const size_case *c) {
    cJSON *r = cJSON_CreateObject(), *ms = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "bytes", (double)c->bytes);
    cJSON_AddStringToObject(r, "label", c->label);
    double med[NMETHODS];
    int nm = o->gpu ? NMETHODS : 2;
    for (int m = 0; m < nm; m++)
        cJSON_AddItemToObject(ms, method_name(o, (method)m), run_method(o, (method)m, c, &med[m]));
    kk_mem_empty_cache(o->device); /* the next size starts from an empty cache */
    cJSON_AddItemToObject(r, "methods", ms);
    printf("%-8s", c->label);
    for (int m = 0; m < nm; m++) printf("  %10s %10.0f ns", method_name(o, (method)m), med[m]);
    if (med[POOL] > 0 && med[RAW] > 0) {
        double ratio = med[POOL] / med[RAW];
        cJSON_AddNumberToObject(r, "ratio_pool_over_raw", ratio);
        cJSON_AddNumberToObject(r, "overhead_reduction_pct", (1.0 - ratio) * 100.0);
        printf("   pool/raw %.4f", ratio);
    }
    printf("\n");
    return r;
}

static cJSON *describe(const options *o) {
    cJSON *d = cJSON_CreateObject();
    kk_device_info info;
    cJSON_AddStringToObject(d, "spec", o->device);
    if (kk_device_get_info(o->device, &info) == KK_OK) {
        cJSON_AddStringToObject(d, "name", info.name);
        cJSON_AddNumberToObject(
            d, "mem_total_bytes",
            (double)(o->gpu ? info.mem_total_bytes : info.host_mem_total_bytes));
    }
    kk_device_info host;
    if (kk_device_get_info("cpu", &host) == KK_OK)
        cJSON_AddStringToObject(d, "host_cpu", host.name);
    if (o->gpu) {
        kk_gpu_telemetry t;
        if (kk_gpu_telemetry_read(o->gpu_index, &t) == KK_OK && t.available)
            cJSON_AddStringToObject(d, "driver_version", t.driver_version);
#ifdef KK_HAVE_CUDA
        int drv = 0, rt = 0;
        char v[32];
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        snprintf(v, sizeof v, "%d.%d", drv / 1000, (drv % 1000) / 10);
        cJSON_AddStringToObject(d, "cuda_driver_api", v);
        snprintf(v, sizeof v, "%d.%d", rt / 1000, (rt % 1000) / 10);
        cJSON_AddStringToObject(d, "cuda_runtime", v);
#endif
    }
    return d;
}

/* Clocks, temperature and power, read at the start and end of the run. */
static cJSON *telemetry(const options *o) {
    cJSON *t = cJSON_CreateObject();
    kk_gpu_telemetry g;
    if (!o->gpu || kk_gpu_telemetry_read(o->gpu_index, &g) != KK_OK || !g.available) {
        cJSON_AddBoolToObject(t, "available", 0);
        cJSON_AddStringToObject(t, "reason", o->gpu ? g.unavailable_reason : "not a GPU");
        return t;
    }
    cJSON_AddBoolToObject(t, "available", 1);
    cJSON_AddNumberToObject(t, "sm_clock_mhz", g.sm_clock_mhz);
    cJSON_AddNumberToObject(t, "sm_clock_max_mhz", g.sm_clock_max_mhz);
    cJSON_AddNumberToObject(t, "mem_clock_mhz", g.mem_clock_mhz);
    cJSON_AddNumberToObject(t, "temperature_c", g.temperature_c);
    cJSON_AddNumberToObject(t, "power_w", g.power_w);
    cJSON_AddNumberToObject(t, "power_limit_w", g.power_limit_w);
    cJSON_AddStringToObject(t, "clock_event_text", g.throttle_text);
    return t;
}

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--device cpu|cuda:N] [--output FILE] [--quick] [--no-samples]\n",
            argv0);
    return 2;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){.device = "cpu", .samples = 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            o->device = argv[++i];
        else if (!strcmp(argv[i], "--output") && i + 1 < argc)
            o->output = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            o->quick = 1;
        else if (!strcmp(argv[i], "--no-samples"))
            o->samples = 0;
        else
            return usage(argv[0]);
    }
    kk_backend_kind kind;
    if (kk_device_parse(o->device, &kind, &o->gpu_index) != KK_OK) {
        fprintf(stderr, "%s\n", kk_last_error_message());
        return 2;
    }
    o->gpu = kind == KK_BACKEND_CUDA;
#ifdef KK_HAVE_CUDA
    if (o->gpu) cudaSetDevice(o->gpu_index); /* for the raw cudaMalloc method */
#endif
    return 0;
}

static int write_json(const options *o, cJSON *root) {
    char *text = cJSON_Print(root);
    if (!text) return 1;
    FILE *f = o->output ? fopen(o->output, "w") : stdout;
    int rc = !f || fputs(text, f) < 0;
    if (f && f != stdout) rc |= fclose(f) != 0;
    free(text);
    if (rc) fprintf(stderr, "cannot write %s\n", o->output ? o->output : "stdout");
    return rc;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    cJSON *root = cJSON_CreateObject(), *sizes = cJSON_CreateArray();
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(root, "schema", "kernelkit.alloc_bench/1");
    cJSON_AddStringToObject(root, "kernelkit_version", kk_version());
    cJSON_AddStringToObject(root, "git_commit", kk_git_commit());
    cJSON_AddStringToObject(root, "timestamp", stamp);
    cJSON_AddStringToObject(root, "timer", "clock_gettime(CLOCK_MONOTONIC), one alloc+free pair");
    cJSON_AddStringToObject(root, "raw_method", method_name(&o, RAW));
    cJSON_AddItemToObject(root, "device", describe(&o));
    cJSON_AddItemToObject(root, "telemetry_start", telemetry(&o));
    for (int i = 0; i < NSIZES; i++) cJSON_AddItemToArray(sizes, run_size(&o, &k_sizes[i]));
    cJSON_AddItemToObject(root, "sizes", sizes);
    cJSON_AddItemToObject(root, "telemetry_end", telemetry(&o));
    kk_mem_stats s;
    if (kk_mem_stats_get(o.device, -1, &s) == KK_OK) {
        cJSON *ps = cJSON_CreateObject();
        cJSON_AddNumberToObject(ps, "alloc_count", (double)s.alloc_count);
        cJSON_AddNumberToObject(ps, "cache_hits", (double)s.cache_hits);
        cJSON_AddNumberToObject(ps, "cache_misses", (double)s.cache_misses);
        cJSON_AddNumberToObject(ps, "system_alloc_count", (double)s.system_alloc_count);
        cJSON_AddNumberToObject(ps, "peak_reserved_bytes", (double)s.peak_reserved_bytes);
        cJSON_AddItemToObject(root, "pool_stats", ps);
    }
    rc = write_json(&o, root);
    cJSON_Delete(root);
    return rc;
}

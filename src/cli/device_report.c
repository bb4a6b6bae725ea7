#include "cli/device_report.h"

#include <string.h>

#include "cli/cli.h"

static int build_has_arch(const char *arch) {
    /* KK_BUILD_CUDA_ARCHS is "80,90a": match whole entries only. */
    const char *list = KK_BUILD_CUDA_ARCHS;
    size_t n = strlen(arch);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, arch, n) == 0) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

const char *report_kernel_image(const kk_device_info *d, char *buf, size_t size) {
    int cc = d->cc_major * 10 + d->cc_minor;
    char exact[8];
    snprintf(exact, sizeof exact, "%d", cc);
    char exact_a[9];
    snprintf(exact_a, sizeof exact_a, "%da", cc);
    if (!kk_built_with_cuda())
        snprintf(buf, size, "none: built without CUDA");
    else if (build_has_arch(exact_a))
        snprintf(buf, size, "sm_%s", exact_a);
    else if (build_has_arch(exact))
        snprintf(buf, size, "sm_%s", exact);
    else if (d->cc_major == 8 && build_has_arch("80"))
        snprintf(buf, size, "sm_80 (binary-compatible within 8.x)");
    else if (cc > 90 && build_has_arch("80"))
        snprintf(buf, size, "PTX compute_80, JIT-compiled by the driver (slow path)");
    else
        snprintf(buf, size, "none: no image for cc %d.%d in this build (archs %s)", d->cc_major,
                 d->cc_minor, KK_BUILD_CUDA_ARCHS);
    return buf;
}

const char *report_gpu_capabilities(const kk_device_info *d, char *buf, size_t size) {
    int cc = d->cc_major * 10 + d->cc_minor;
    buf[0] = 0;
    size_t used = 0;
#define ADD(s)                                                                                     \
    do {                                                                                           \
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", (s));                  \
        if (n > 0 && (size_t)n < size - used) used += (size_t)n;                                   \
    } while (0)
    if (cc >= 70) ADD("f16 tensor cores");
    if (cc >= 80) ADD("bf16/tf32 tensor cores, cp.async");
    if (cc >= 89) ADD("fp8 tensor cores");
    if (cc == 90) ADD("wgmma, TMA, thread-block clusters (sm_90a)");
    if (cc >= 100) ADD("fp4 tensor cores");
    if (!used) ADD("no tensor cores");
#undef ADD
    return buf;
}

void report_print_build(FILE *out) {
    fprintf(out, "KernelKit %s (commit %s)", kk_version(), kk_git_commit());
    if (kk_built_with_cuda())
        fprintf(out, ", built with CUDA %s for %s\n", KK_BUILD_CUDA_VERSION, KK_BUILD_CUDA_ARCHS);
    else
        fprintf(out, ", built without CUDA\n");
}

void report_print_backends(FILE *out) {
    fprintf(out, "Backends:\n");
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        kk_backend_kind kind = (kk_backend_kind)k;
        if (kk_backend_available(kind))
            fprintf(out, "  %-6s available, %d device%s\n", kk_backend_name(kind),
                    kk_backend_device_count(kind), kk_backend_device_count(kind) == 1 ? "" : "s");
        else
            fprintf(out, "  %-6s unavailable: %s\n", kk_backend_name(kind),
                    kk_backend_unavailable_reason(kind));
    }
}

static void print_telemetry(FILE *out, int index) {
    kk_gpu_telemetry t;
    if (kk_gpu_telemetry_read(index, &t) != KK_OK) {
        fprintf(out, "    telemetry      error: %s\n", kk_last_error_message());
        return;
    }
    if (!t.available) {
        fprintf(out, "    telemetry      unavailable: %s\n", t.unavailable_reason);
        return;
    }
    fprintf(out,
            "    telemetry      %.0f C, SM %d/%d MHz, memory %d MHz, power %.1f/%.1f W,"
            " utilization %d%% GPU %d%% memory\n",
            t.temperature_c, t.sm_clock_mhz, t.sm_clock_max_mhz, t.mem_clock_mhz, t.power_w,
            t.power_limit_w, t.utilization_gpu_pct, t.utilization_mem_pct);
    fprintf(out, "    clock events   %s\n", t.throttle_text);
    fprintf(out, "    driver         %s\n", t.driver_version);
}

void report_print_device(FILE *out, const kk_device_info *d, int with_telemetry) {
    char a[32], b[32], caps[256];
    fprintf(out, "  %s: %s\n", d->spec, d->name);
    if (d->backend == KK_BACKEND_CPU) {
        char feats[256];
        fprintf(out, "    cores          %d physical, %d threads usable\n", d->cpu_cores,
                d->cpu_threads);
        fprintf(out, "    SIMD           %s\n",
                kk_cpu_features_str(d->cpu_features, feats, sizeof feats));
        fprintf(out, "    kernels        %s (KK_CPU_ISA caps the level)\n", kk_cpu_isa());
        fprintf(out, "    memory         %s total, %s available\n",
                cli_format_bytes(d->host_mem_total_bytes, a, sizeof a),
                cli_format_bytes(d->host_mem_available_bytes, b, sizeof b));
        return;
    }
    fprintf(out, "    compute cap.   %d.%d (%s)\n", d->cc_major, d->cc_minor,
            kk_arch_name(d->arch));
    fprintf(out, "    SMs            %d\n", d->sm_count);
    fprintf(out, "    memory         %s total, %s free\n",
            cli_format_bytes(d->mem_total_bytes, a, sizeof a),
            cli_format_bytes(d->mem_free_bytes, b, sizeof b));
    fprintf(out, "    L2 cache       %s\n", cli_format_bytes(d->l2_bytes, a, sizeof a));
    fprintf(out, "    shared/block   %s (opt-in maximum)\n",
            cli_format_bytes(d->smem_per_block_optin_bytes, a, sizeof a));
    fprintf(out, "    clocks (max)   SM %d MHz, memory %d MHz\n", d->sm_clock_max_mhz,
            d->mem_clock_max_mhz);
    fprintf(out, "    memory bus     %d-bit, %.0f GB/s theoretical\n", d->mem_bus_width_bits,
            d->mem_bandwidth_theoretical_gbs);
    fprintf(out, "    PCI bus id     %s\n", d->pci_bus_id);
    fprintf(out, "    capabilities   %s\n", report_gpu_capabilities(d, caps, sizeof caps));
    fprintf(out, "    kernel image   %s\n", report_kernel_image(d, caps, sizeof caps));
    if (with_telemetry) print_telemetry(out, d->index);
}

cJSON *report_build_json(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", kk_version());
    cJSON_AddStringToObject(o, "commit", kk_git_commit());
    cJSON_AddBoolToObject(o, "cuda", kk_built_with_cuda());
    cJSON_AddStringToObject(o, "cuda_version", KK_BUILD_CUDA_VERSION);
    cJSON_AddStringToObject(o, "cuda_archs", KK_BUILD_CUDA_ARCHS);
    return o;
}

cJSON *report_backends_json(void) {
    cJSON *arr = cJSON_CreateArray();
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        kk_backend_kind kind = (kk_backend_kind)k;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", kk_backend_name(kind));
        cJSON_AddBoolToObject(o, "available", kk_backend_available(kind));
        cJSON_AddStringToObject(o, "unavailable_reason", kk_backend_unavailable_reason(kind));
        cJSON_AddNumberToObject(o, "devices", kk_backend_device_count(kind));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static cJSON *telemetry_json(int index) {
    cJSON *o = cJSON_CreateObject();
    kk_gpu_telemetry t;
    if (kk_gpu_telemetry_read(index, &t) != KK_OK) {
        cJSON_AddBoolToObject(o, "available", 0);
        cJSON_AddStringToObject(o, "unavailable_reason", kk_last_error_message());
        return o;
    }
    cJSON_AddBoolToObject(o, "available", t.available);
    if (!t.available) {
        cJSON_AddStringToObject(o, "unavailable_reason", t.unavailable_reason);
        return o;
    }
    cJSON_AddNumberToObject(o, "temperature_c", t.temperature_c);
    cJSON_AddNumberToObject(o, "sm_clock_mhz", t.sm_clock_mhz);
    cJSON_AddNumberToObject(o, "sm_clock_max_mhz", t.sm_clock_max_mhz);
    cJSON_AddNumberToObject(o, "mem_clock_mhz", t.mem_clock_mhz);
    cJSON_AddNumberToObject(o, "power_w", t.power_w);
    cJSON_AddNumberToObject(o, "power_limit_w", t.power_limit_w);
    cJSON_AddNumberToObject(o, "utilization_gpu_pct", t.utilization_gpu_pct);
    cJSON_AddNumberToObject(o, "utilization_mem_pct", t.utilization_mem_pct);
    cJSON_AddNumberToObject(o, "clock_event_reasons", (double)t.throttle_reasons);
    cJSON_AddStringToObject(o, "clock_event_text", t.throttle_text);
    cJSON_AddStringToObject(o, "driver_version", t.driver_version);
    return o;
}

/* The device allocator's statistics (this process's use of the device). */
static cJSON *memory_stats_json(const char *spec) {
    cJSON *o = cJSON_CreateObject();
    kk_mem_stats s;
    if (kk_mem_stats_get(spec, -1, &s) != KK_OK) {
        cJSON_AddStringToObject(o, "error", kk_last_error_message());
        return o;
    }
    cJSON_AddNumberToObject(o, "allocated_bytes", (double)s.allocated_bytes);
    cJSON_AddNumberToObject(o, "reserved_bytes", (double)s.reserved_bytes);
    cJSON_AddNumberToObject(o, "cached_bytes", (double)s.cached_bytes);
    cJSON_AddNumberToObject(o, "peak_allocated_bytes", (double)s.peak_allocated_bytes);
    cJSON_AddNumberToObject(o, "peak_reserved_bytes", (double)s.peak_reserved_bytes);
    cJSON_AddNumberToObject(o, "alloc_count", (double)s.alloc_count);
    cJSON_AddNumberToObject(o, "free_count", (double)s.free_count);
    cJSON_AddNumberToObject(o, "cache_hits", (double)s.cache_hits);
    cJSON_AddNumberToObject(o, "cache_misses", (double)s.cache_misses);
    cJSON_AddNumberToObject(o, "system_alloc_count", (double)s.system_alloc_count);
    cJSON_AddNumberToObject(o, "system_free_count", (double)s.system_free_count);
    cJSON_AddNumberToObject(o, "oom_count", (double)s.oom_count);
    return o;
}

cJSON *report_device_json(const kk_device_info *d, int with_telemetry) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "device", d->spec);
    cJSON_AddStringToObject(o, "backend", kk_backend_name(d->backend));
    cJSON_AddNumberToObject(o, "index", d->index);
    cJSON_AddStringToObject(o, "name", d->name);
    if (d->backend == KK_BACKEND_CPU) {
        char feats[256];
        cJSON_AddNumberToObject(o, "cores", d->cpu_cores);
        cJSON_AddNumberToObject(o, "threads", d->cpu_threads);
        cJSON_AddStringToObject(o, "simd",
                                kk_cpu_features_str(d->cpu_features, feats, sizeof feats));
        cJSON_AddStringToObject(o, "kernel_isa", kk_cpu_isa());
        cJSON_AddNumberToObject(o, "memory_total_bytes", (double)d->host_mem_total_bytes);
        cJSON_AddNumberToObject(o, "memory_available_bytes", (double)d->host_mem_available_bytes);
        cJSON_AddItemToObject(o, "memory_manager", memory_stats_json(d->spec));
        return o;
    }
    char cc[16], buf[256];
    snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    cJSON_AddStringToObject(o, "compute_capability", cc);
    cJSON_AddStringToObject(o, "architecture", kk_arch_name(d->arch));
    cJSON_AddNumberToObject(o, "sm_count", d->sm_count);
    cJSON_AddNumberToObject(o, "memory_total_bytes", (double)d->mem_total_bytes);
    cJSON_AddNumberToObject(o, "memory_free_bytes", (double)d->mem_free_bytes);
    cJSON_AddNumberToObject(o, "l2_bytes", (double)d->l2_bytes);
    cJSON_AddNumberToObject(o, "shared_memory_per_block_optin_bytes",
                            (double)d->smem_per_block_optin_bytes);
    cJSON_AddNumberToObject(o, "sm_clock_max_mhz", d->sm_clock_max_mhz);
    cJSON_AddNumberToObject(o, "mem_clock_max_mhz", d->mem_clock_max_mhz);
    cJSON_AddNumberToObject(o, "mem_bus_width_bits", d->mem_bus_width_bits);
    cJSON_AddNumberToObject(o, "mem_bandwidth_theoretical_gbs", d->mem_bandwidth_theoretical_gbs);
    cJSON_AddNumberToObject(o, "device_count", d->device_count_in_backend);
    cJSON_AddStringToObject(o, "pci_bus_id", d->pci_bus_id);
    cJSON_AddStringToObject(o, "capabilities", report_gpu_capabilities(d, buf, sizeof buf));
    cJSON_AddStringToObject(o, "kernel_image", report_kernel_image(d, buf, sizeof buf));
    cJSON_AddItemToObject(o, "memory_manager", memory_stats_json(d->spec));
    if (with_telemetry) cJSON_AddItemToObject(o, "telemetry", telemetry_json(d->index));
    return o;
}

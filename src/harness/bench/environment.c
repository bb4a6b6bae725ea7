/* What a benchmark result was measured on: the device, the driver and CUDA
 * versions, the host, the build, the command line, the time and the caller's
 * determinism switches. Live readings (clocks, temperature, power) belong to
 * each benchmark and come from the sampler, at its start and end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "backend/backend.h"
#include "harness/bench/measure_internal.h"
#include "kernelkit/kernelkit.h"

#define FUNC "kk_bench_environment_capture"
#define MAX_ARGC 4096

/* The first line of a small text file, without its newline; 0 if unreadable. */
static int read_line(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (!ok) return 0;
    buf[strcspn(buf, "\r\n")] = 0;
    return buf[0] != 0;
}

static void capture_host(kk_bench_environment *e) {
    kk_device_info cpu;
    if (kk_device_get_info("cpu", &cpu) == KK_OK) {
        snprintf(e->cpu_model, sizeof e->cpu_model, "%s", cpu.name);
        kk_cpu_features_str(cpu.cpu_features, e->cpu_simd, sizeof e->cpu_simd);
    } else {
        snprintf(e->cpu_model, sizeof e->cpu_model, "unknown");
    }
    snprintf(e->cpu_isa, sizeof e->cpu_isa, "%s", kk_cpu_isa());
    /* "performance" keeps the clock up; "powersave"/"ondemand" add ramp-up noise */
    if (!read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", e->cpu_governor,
                   sizeof e->cpu_governor))
        snprintf(e->cpu_governor, sizeof e->cpu_governor, "unknown");
    if (gethostname(e->hostname, sizeof e->hostname) != 0) e->hostname[0] = 0;
    e->hostname[sizeof e->hostname - 1] = 0;
    if (!e->hostname[0]) snprintf(e->hostname, sizeof e->hostname, "unknown");
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(e->os, sizeof e->os, "%.64s %.100s %.200s %.64s", u.sysname, u.release, u.version,
                 u.machine);
    else
        snprintf(e->os, sizeof e->os, "unknown");
}

static void capture_build_and_time(kk_bench_environment *e) {
    snprintf(e->kk_version, sizeof e->kk_version, "%s", kk_version());
    snprintf(e->git_commit, sizeof e->git_commit, "%s", kk_git_commit());
    snprintf(e->build_cuda, sizeof e->build_cuda, "%s", KK_BUILD_CUDA_VERSION);
    const kk__backend *cuda = kk__backend_get(KK_BACKEND_CUDA);
    if (cuda && cuda->versions)
        cuda->versions(cuda->context, &e->cuda_runtime_version, &e->cuda_driver_version);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(e->timestamp_utc, sizeof e->timestamp_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static kk_status capture_device(const char *device, kk_bench_environment *e) {
    kk_device_info d;
    kk_status st = kk_device_get_info(device, &d);
    if (st) return st;
    snprintf(e->device, sizeof e->device, "%s", d.spec);
    e->device_index = d.index;
    snprintf(e->device_name, sizeof e->device_name, "%s", d.name);
    e->cc_major = d.cc_major;
    e->cc_minor = d.cc_minor;
    e->sm_count = d.sm_count;
    e->l2_bytes = d.l2_bytes;
    e->mem_total_bytes = d.backend == KK_BACKEND_CPU ? d.host_mem_total_bytes : d.mem_total_bytes;
    e->sm_clock_max_mhz = d.sm_clock_max_mhz;
    e->mem_clock_max_mhz = d.mem_clock_max_mhz;
    snprintf(e->pci_bus_id, sizeof e->pci_bus_id, "%s", d.pci_bus_id);
    if (d.backend == KK_BACKEND_CUDA) {
        kk_gpu_telemetry t;
        if (kk_gpu_telemetry_read(d.index, &t) == KK_OK && t.available)
            snprintf(e->driver_version, sizeof e->driver_version, "%s", t.driver_version);
    }
    return KK_OK;
}

static kk_status check_args(int argc, const char *const *argv, const kk_bench_switch *switches,
                            int nswitches) {
    if (argc < 0 || argc > MAX_ARGC)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "argc", "0 to 4096", "%d", argc);
    if (argc > 0 && !argv)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "argv",
                             "a non-NULL array when argc > 0", "NULL");
    for (int i = 0; i < argc; i++)
        if (!argv[i])
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "argv", "non-NULL strings",
                                 "argv[%d] = NULL", i);
    if (nswitches < 0 || nswitches > KK_BENCH_MAX_SWITCHES || (nswitches > 0 && !switches))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "nswitches",
                             "0 to 32 (KK_BENCH_MAX_SWITCHES), with a switches array", "%d",
                             nswitches);
    for (int i = 0; i < nswitches; i++) {
        const kk_bench_switch *s = &switches[i];
        if (!memchr(s->name, 0, sizeof s->name) || !memchr(s->value, 0, sizeof s->value) ||
            !s->name[0])
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "switches",
                                 "a non-empty NUL-terminated name and a NUL-terminated value",
                                 "switches[%d]", i);
        for (int j = 0; j < i; j++)
            if (strcmp(switches[j].name, s->name) == 0)
                return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "switches", "unique names",
                                     "\"%s\" twice", s->name);
    }
    return KK_OK;
}

/* argv copies into e (which owns none yet). */
static kk_status copy_argv(kk_bench_environment *e, int argc, const char *const *argv) {
    e->argc = 0;
    e->argv = NULL;
    if (argc == 0) return KK_OK;
    e->argv = calloc((size_t)argc, sizeof *e->argv);
    if (!e->argv) return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "cannot copy the command line");
    for (int i = 0; i < argc; i++) {
        if (!(e->argv[i] = strdup(argv[i]))) {
            e->argc = i;
            kk_bench_environment_free(e);
            return kk__error(KK_ERR_OUT_OF_MEMORY, FUNC, "cannot copy the command line");
        }
    }
    e->argc = argc;
    return KK_OK;
}

kk_status kk_bench_environment_capture(const char *device, int argc, const char *const *argv,
                                       const kk_bench_switch *switches, int nswitches,
                                       kk_bench_environment *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (!st) st = check_args(argc, argv, switches, nswitches);
    if (st) return st;
    kk_bench_environment e;
    memset(&e, 0, sizeof e);
    if ((st = capture_device(device, &e))) return st;
    capture_host(&e);
    capture_build_and_time(&e);
    e.nswitches = nswitches;
    for (int i = 0; i < nswitches; i++) e.switches[i] = switches[i];
    if ((st = copy_argv(&e, argc, argv))) return st;
    *out = e;
    return KK_OK;
}

kk_status kk_bench_environment_copy(kk_bench_environment *dst, const kk_bench_environment *src) {
    kk_status st = KK__CHECK_NOT_NULL(dst);
    if (!st) st = KK__CHECK_NOT_NULL(src);
    if (st) return st;
    kk_bench_environment e = *src;
    if ((st = copy_argv(&e, src->argc, (const char *const *)src->argv))) return st;
    *dst = e;
    return KK_OK;
}

void kk_bench_environment_free(kk_bench_environment *env) {
    if (!env) return;
    for (int i = 0; i < env->argc; i++) free(env->argv[i]);
    free(env->argv);
    memset(env, 0, sizeof *env);
}

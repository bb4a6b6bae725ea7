/* What the host CPU is: name, physical cores, usable logical processors, SIMD
 * features, host memory. Linux: /proc/cpuinfo, /proc/meminfo,
 * sched_getaffinity, cpuid. Anything that cannot be read falls back to a safe
 * value (documented per function) rather than failing. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "backend/backend.h"

/* ---- text helpers ---- */

/* The whole of a /proc file (they report size 0, so read until EOF). Caller frees. */
static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 16384, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (used + 1 >= cap) {
            if (cap > ((size_t)64 << 20)) break; /* 64 MiB: something is wrong */
            char *grown = realloc(buf, cap * 2);
            if (!grown) break;
            buf = grown;
            cap *= 2;
        }
        size_t n = fread(buf + used, 1, cap - 1 - used, f);
        if (n == 0) break;
        used += n;
    }
    fclose(f);
    if (buf) buf[used] = 0;
    return buf;
}

/* If `line` (up to `end`) is "key<blanks>: value", copy the value (trimmed) and return 1. */
static int line_value(const char *line, const char *end, const char *key, char *value,
                      size_t size) {
    size_t klen = strlen(key);
    if ((size_t)(end - line) < klen || strncmp(line, key, klen) != 0) return 0;
    const char *p = line + klen;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end || *p != ':') return 0;
    p++;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    const char *q = end;
    while (q > p && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r')) q--;
    size_t n = (size_t)(q - p);
    if (size == 0) return 1;
    if (n >= size) n = size - 1;
    memcpy(value, p, n);
    value[n] = 0;
    return 1;
}

/* ---- parsers (exposed for tests through backend.h) ---- */

int kk__cpu_parse_model_name(const char *cpuinfo, char *name, size_t size) {
    if (!cpuinfo || !name || size == 0) return 0;
    for (const char *line = cpuinfo; *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (line_value(line, end, "model name", name, size) && name[0]) return 1;
        line = *end ? end + 1 : end;
    }
    name[0] = 0;
    return 0;
}

typedef struct core_key {
    long physical_id, core_id;
} core_key;

int kk__cpu_count_physical_cores(const char *cpuinfo, const void *allowed_cpu_set,
                                 size_t set_size) {
    if (!cpuinfo) return 0;
    const cpu_set_t *allowed = allowed_cpu_set;
    size_t cap = 64, n = 0;
    core_key *keys = malloc(cap * sizeof *keys);
    if (!keys) return 0;
    long proc = -1, phys = -1, core = -1;
    int complete = 1; /* every record had both ids */
    int records = 0;
    const char *line = cpuinfo;
    for (;;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        int blank = end == line;
        char v[64];
        if (line_value(line, end, "processor", v, sizeof v))
            proc = strtol(v, NULL, 10);
        else if (line_value(line, end, "physical id", v, sizeof v))
            phys = strtol(v, NULL, 10);
        else if (line_value(line, end, "core id", v, sizeof v))
            core = strtol(v, NULL, 10);
        if (blank || !*end) { /* end of one processor's record */
            if (proc >= 0) {
                records++;
                int ok = !allowed || ((size_t)proc < set_size * 8 &&
                                      CPU_ISSET_S((size_t)proc, set_size, allowed));
                if (phys < 0 || core < 0)
                    complete = 0;
                else if (ok) {
                    size_t i = 0;
                    while (i < n && !(keys[i].physical_id == phys && keys[i].core_id == core)) i++;
                    if (i == n) {
                        if (n == cap) {
                            core_key *grown = realloc(keys, 2 * cap * sizeof *keys);
                            if (!grown) {
                                free(keys);
                                return 0;
                            }
                            keys = grown;
                            cap *= 2;
                        }
                        keys[n++] = (core_key){phys, core};
                    }
                }
            }
            proc = phys = core = -1;
        }
        if (!*end) break;
        line = end + 1;
    }
    free(keys);
    if (!complete || records == 0) return 0; /* ids missing (some ARM, VMs): caller falls back */
    return (int)n;
}

int kk__parse_meminfo(const char *meminfo, unsigned long long *total_bytes,
                      unsigned long long *available_bytes) {
    if (!meminfo) return 0;
    int found = 0;
    unsigned long long total = 0, avail = 0;
    for (const char *line = meminfo; *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        char v[64];
        if (line_value(line, end, "MemTotal", v, sizeof v)) {
            total = strtoull(v, NULL, 10) * 1024ull; /* "24683656 kB" */
            found |= 1;
        } else if (line_value(line, end, "MemAvailable", v, sizeof v)) {
            avail = strtoull(v, NULL, 10) * 1024ull;
            found |= 2;
        }
        line = *end ? end + 1 : end;
    }
    if (total_bytes) *total_bytes = total;
    if (available_bytes) *available_bytes = avail;
    return found == 3;
}

/* ---- SIMD features ---- */

static unsigned detect_features(void) {
    unsigned f = 0;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 1 || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (d & (1u << 26)) f |= KK_CPU_SSE2;
    if (c & (1u << 20)) f |= KK_CPU_SSE4_2;
    /* AVX state must also be enabled by the OS (OSXSAVE + XCR0 bits 1, 2). */
    unsigned long long xcr0 = 0;
    if (c & (1u << 27)) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    int os_avx = (xcr0 & 0x6) == 0x6;
    int os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
    int os_amx = (xcr0 & 0x60000) == 0x60000;        /* XTILECFG, XTILEDATA */
    if (os_avx) {
        if (c & (1u << 28)) f |= KK_CPU_AVX;
        if (c & (1u << 12)) f |= KK_CPU_FMA;
        if (c & (1u << 29)) f |= KK_CPU_F16C;
    }
    if (max_leaf >= 7) {
        unsigned b7 = 0, d7 = 0, a71 = 0;
        if (__get_cpuid_count(7, 0, &a, &b7, &c, &d7)) {
            if (os_avx && (b7 & (1u << 5))) f |= KK_CPU_AVX2;
            if (os_avx512) {
                if (b7 & (1u << 16)) f |= KK_CPU_AVX512F;
                if (b7 & (1u << 30)) f |= KK_CPU_AVX512BW;
                if (b7 & (1u << 31)) f |= KK_CPU_AVX512VL;
                if (d7 & (1u << 23)) f |= KK_CPU_AVX512_FP16;
            }
            if (os_amx && (d7 & (1u << 24))) f |= KK_CPU_AMX_TILE;
            if (os_amx && (d7 & (1u << 22))) f |= KK_CPU_AMX_BF16;
            unsigned max_sub = a;
            if (max_sub >= 1 && __get_cpuid_count(7, 1, &a71, &b, &c, &d)) {
                if (os_avx && (a71 & (1u << 4))) f |= KK_CPU_AVX_VNNI;
                if (os_avx512 && (a71 & (1u << 5))) f |= KK_CPU_AVX512_BF16;
            }
        }
    }
#elif defined(__aarch64__)
    f |= KK_CPU_NEON; /* Advanced SIMD is mandatory on AArch64 */
#endif
    return f;
}

static const char *const k_feature_names[] = {
    "sse2",        "sse4_2",   "avx",      "avx2",     "fma",
    "f16c",        "avx512f",  "avx512bw", "avx512vl", "avx512_bf16",
    "avx512_fp16", "avx_vnni", "amx_tile", "neon",     "amx_bf16",
};

const char *kk_cpu_features_str(unsigned features, char *buf, size_t size) {
    if (!buf || size == 0) return buf;
    buf[0] = 0;
    size_t used = 0;
    for (size_t i = 0; i < sizeof k_feature_names / sizeof k_feature_names[0]; i++) {
        if (!(features & (1u << i))) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", k_feature_names[i]);
        if (n < 0 || (size_t)n >= size - used) {
            buf[used] = 0; /* drop a name that does not fit whole */
            return buf;
        }
        used += (size_t)n;
    }
    if (used == 0) snprintf(buf, size, "none");
    return buf;
}

/* ---- the CPU, detected once ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_name[256];
static int g_cores, g_threads;
static unsigned g_features;

enum { MAX_CPUS = 8192 };

static void detect(void) {
    size_t set_size = CPU_ALLOC_SIZE(MAX_CPUS);
    cpu_set_t *set = CPU_ALLOC(MAX_CPUS);
    int have_set = 0;
    if (set) {
        CPU_ZERO_S(set_size, set);
        if (sched_getaffinity(0, set_size, set) == 0) {
            g_threads = CPU_COUNT_S(set_size, set);
            have_set = 1;
        }
    }
    if (g_threads < 1) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        g_threads = n >= 1 ? (int)n : 1;
    }

    char *cpuinfo = read_text_file("/proc/cpuinfo");
    if (!kk__cpu_parse_model_name(cpuinfo, g_name, sizeof g_name))
        snprintf(g_name, sizeof g_name, "unknown CPU");
    g_cores = kk__cpu_count_physical_cores(cpuinfo, have_set ? set : NULL, set_size);
    if (g_cores < 1 || g_cores > g_threads) g_cores = g_threads; /* no topology: one per thread */
    free(cpuinfo);
    if (set) CPU_FREE(set);

    g_features = detect_features();
}

/* The SIMD features alone, without reading /proc: kernels ask on every call. */
static pthread_once_t g_features_once = PTHREAD_ONCE_INIT;
static unsigned g_features_only;
static void detect_features_only(void) { g_features_only = detect_features(); }

unsigned kk__cpu_features(void) {
    pthread_once(&g_features_once, detect_features_only);
    return g_features_only;
}

void kk__cpu_fill_info(kk_device_info *out) {
    pthread_once(&g_once, detect);
    snprintf(out->name, sizeof out->name, "%s", g_name);
    out->cpu_cores = g_cores;
    out->cpu_threads = g_threads;
    out->cpu_features = g_features;

    unsigned long long total = 0, avail = 0;
    char *meminfo = read_text_file("/proc/meminfo");
    if (!kk__parse_meminfo(meminfo, &total, &avail)) {
        long pages = sysconf(_SC_PHYS_PAGES), avail_pages = sysconf(_SC_AVPHYS_PAGES);
        long page = sysconf(_SC_PAGESIZE);
        if (total == 0 && pages > 0 && page > 0)
            total = (unsigned long long)pages * (unsigned long long)page;
        if (avail == 0 && avail_pages > 0 && page > 0)
            avail = (unsigned long long)avail_pages * (unsigned long long)page;
    }
    free(meminfo);
    out->host_mem_total_bytes = total;
    out->host_mem_available_bytes = avail;
}

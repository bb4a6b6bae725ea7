/* The fixture results files of this folder: their benchmark names, and (with
 * KK_FIXTURES_GENERATOR defined) the code that wrote them. Regenerate after a
 * change to the results schema with
 *     build/tests/test_compare --write-fixtures tests/data/results
 * The files are synthetic: an H200-like environment with fixed fields (no
 * capture, so they do not depend on the machine) and seeded samples of
 * 0.5% noise around times chosen from the anchor figures of shared/ANCHORS.md.
 *   base.json       the reference run (ceilings, KernelKit entries, anchors)
 *   new.json        the same with one entry +10%, one -10%, one noisy, one
 *                   +5% under its own 10% threshold; one entry dropped, one added
 *   base_h100.json  base.json's samples on another device, driver and clocks
 *   hostile.json    names and devices made of HTML/markdown syntax, no ceilings */
#ifndef KK_TEST_RESULTS_FIXTURES_H
#define KK_TEST_RESULTS_FIXTURES_H

#define FX_SAME "gemm/M=1024,N=1024,K=1024"
#define FX_SLOWER "gemm/M=2048,N=2048,K=2048"
#define FX_FASTER "gemm/M=4096,N=4096,K=4096"
#define FX_NOISY "attention/B=8,H=16,S=2048,D=128"
#define FX_OVERRIDE "linear/M=4096,N=16384,K=4096"
#define FX_ONLY_BASE "nvfp4_gemv/M=7168,K=16384,L=1"
#define FX_ONLY_NEW "attention_decode/B=16,KV=8192"
#define FX_ANCHOR_FLASH "anchor/torch_sdpa_flash/attention/B=8,H=16,S=2048,D=128"
#define FX_ANCHOR_CUBLAS "anchor/cublas/gemm/M=4096,N=4096,K=4096"
#define FX_HOSTILE "<script>alert(\"x\")</script>|`pipe`"

#ifdef KK_FIXTURES_GENERATOR
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fx_entry {
    const char *name, *op, *impl; /* impl: "" = no implementation parameter */
    const char *keys;             /* "M N K" */
    double v[6];                  /* their values */
    double flops, bytes, tflops;  /* tflops: the throughput the median gives */
    double threshold, noise;      /* noise: relative sd of the samples */
    int n;
    const char *act; /* a string parameter "act", or NULL */
} fx_entry;

static uint64_t fx_state;

static double fx_uniform(void) { /* splitmix64 */
    uint64_t z = (fx_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

static double fx_normal(void) {
    double u = fx_uniform(), v = fx_uniform();
    return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static void fx_env(kk_bench_environment *e, const char *gpu, int clock, const char *driver) {
    memset(e, 0, sizeof *e);
    snprintf(e->device, sizeof e->device, "cuda:0");
    snprintf(e->device_name, sizeof e->device_name, "%s", gpu);
    e->cc_major = 9;
    e->sm_count = 132;
    e->l2_bytes = 60ull << 20;
    e->mem_total_bytes = 141ull << 30;
    e->sm_clock_max_mhz = clock;
    e->mem_clock_max_mhz = 3201;
    snprintf(e->pci_bus_id, sizeof e->pci_bus_id, "00000000:19:00.0");
    snprintf(e->driver_version, sizeof e->driver_version, "%s", driver);
    e->cuda_runtime_version = e->cuda_driver_version = 13000;
    snprintf(e->cpu_model, sizeof e->cpu_model, "AMD EPYC 9654 96-Core Processor");
    snprintf(e->cpu_governor, sizeof e->cpu_governor, "performance");
    snprintf(e->hostname, sizeof e->hostname, "fixture-host");
    snprintf(e->os, sizeof e->os, "Linux 6.8.0 x86_64");
    snprintf(e->kk_version, sizeof e->kk_version, "0.1.0");
    snprintf(e->git_commit, sizeof e->git_commit, "fixture");
    snprintf(e->build_cuda, sizeof e->build_cuda, "13.0");
    snprintf(e->timestamp_utc, sizeof e->timestamp_utc, "2026-11-22T12:00:00Z");
}

/* scale: multiplies every sample (the planted change); seed: the draw */
static int fx_add(kk_bench_results *r, const fx_entry *f, double scale, uint64_t seed, int clock) {
    kk_bench_param p[8];
    int np = 0;
    char keys[64];
    snprintf(keys, sizeof keys, "%s", f->keys);
    for (char *k = strtok(keys, " "); k; k = strtok(NULL, " "), np++) {
        memset(&p[np], 0, sizeof p[np]);
        snprintf(p[np].name, sizeof p[np].name, "%s", k);
        p[np].kind = KK_BENCH_PARAM_NUMBER;
        p[np].number = f->v[np];
    }
    if (f->act) {
        memset(&p[np], 0, sizeof p[np]);
        snprintf(p[np].name, sizeof p[np].name, "act");
        p[np].kind = KK_BENCH_PARAM_STRING;
        snprintf(p[np++].string, sizeof p[0].string, "%s", f->act);
    }
    if (f->impl[0]) {
        memset(&p[np], 0, sizeof p[np]);
        snprintf(p[np].name, sizeof p[np].name, "implementation");
        p[np].kind = KK_BENCH_PARAM_STRING;
        snprintf(p[np++].string, sizeof p[0].string, "%s", f->impl);
    }
    kk_bench_measurement m;
    memset(&m, 0, sizeof m);
    kk_bench_options_default(&m.options);
    snprintf(m.device, sizeof m.device, "cuda:0");
    m.n = (size_t)f->n;
    m.samples = malloc(m.n * sizeof *m.samples);
    double median = f->flops / (f->tflops * 1e12);
    fx_state = seed;
    for (size_t i = 0; i < m.n; i++) {
        double x = median * scale * (1 + f->noise * fx_normal());
        m.samples[i] = x > median * 0.5 ? x : median * 0.5;
        m.sampled_time_s += m.samples[i];
    }
    m.batch = 1;
    m.cold = 1;
    m.flush_bytes = 60ull << 20;
    m.warmup_runs = 5;
    m.stop = KK_BENCH_STOP_RSE;
    m.final_rse = 0.001;
    m.wall_time_s = m.sampled_time_s * 1.3;
    m.pinned_cpu = -1;
    m.throttle_detection = 1;
    m.sm_clock_min_mhz = clock;
    m.sm_clock_mean_mhz = clock;
    kk_bench_spec s = {.name = f->name,
                       .op = f->op,
                       .dtype = "bf16",
                       .params = p,
                       .nparams = np,
                       .flops = f->flops,
                       .bytes = f->bytes,
                       .threshold = f->threshold};
    kk_status st = kk_bench_results_add(r, &s, &m);
    free(m.samples);
    return st == KK_OK ? 0 : -1;
}

/* attention forward: 4 B H S^2 D FLOPs, q k v o read/written once in bf16 */
#define ATT(B, S) 4.0 * B * 16 * S *S * 128, 4.0 * B * 16 * S * 128 * 2
static const fx_entry k_fx[] = {
    {FX_SAME,
     "gemm",
     "",
     "M N K",
     {1024, 1024, 1024},
     2.0 * 1024 * 1024 * 1024,
     6.0 * 1024 * 1024,
     300,
     0,
     0.005,
     50,
     NULL},
    {FX_SLOWER,
     "gemm",
     "",
     "M N K",
     {2048, 2048, 2048},
     2.0 * 2048 * 2048 * 2048,
     6.0 * 2048 * 2048,
     550,
     0,
     0.005,
     50,
     NULL},
    {FX_FASTER,
     "gemm",
     "",
     "M N K",
     {4096, 4096, 4096},
     2.0 * 4096 * 4096 * 4096,
     6.0 * 4096 * 4096,
     700,
     0,
     0.005,
     50,
     NULL},
    {FX_ANCHOR_CUBLAS,
     "gemm",
     "",
     "M N K",
     {4096, 4096, 4096},
     2.0 * 4096 * 4096 * 4096,
     6.0 * 4096 * 4096,
     760,
     0,
     0.005,
     50,
     NULL},
    {"attention/B=32,H=16,S=512,D=128",
     "attention",
     "",
     "B H S D",
     {32, 16, 512, 128},
     ATT(32, 512),
     300,
     0,
     0.005,
     50,
     NULL},
    {FX_NOISY,
     "attention",
     "",
     "B H S D",
     {8, 16, 2048, 128},
     ATT(8, 2048),
     450,
     0,
     0.005,
     50,
     NULL},
    {"attention/B=2,H=16,S=8192,D=128",
     "attention",
     "",
     "B H S D",
     {2, 16, 8192, 128},
     ATT(2, 8192),
     500,
     0,
     0.005,
     50,
     NULL},
    {"anchor/torch_sdpa_flash/attention/B=32,H=16,S=512,D=128",
     "attention",
     "torch_sdpa_flash",
     "B H S D",
     {32, 16, 512, 128},
     ATT(32, 512),
     288,
     0,
     0.005,
     50,
     NULL},
    {FX_ANCHOR_FLASH,
     "attention",
     "torch_sdpa_flash",
     "B H S D",
     {8, 16, 2048, 128},
     ATT(8, 2048),
     340,
     0,
     0.005,
     50,
     NULL},
    {"anchor/torch_sdpa_flash/attention/B=2,H=16,S=8192,D=128",
     "attention",
     "torch_sdpa_flash",
     "B H S D",
     {2, 16, 8192, 128},
     ATT(2, 8192),
     352,
     0,
     0.005,
     50,
     NULL},
    {"anchor/torch_sdpa_cudnn/attention/B=8,H=16,S=2048,D=128",
     "attention",
     "torch_sdpa_cudnn",
     "B H S D",
     {8, 16, 2048, 128},
     ATT(8, 2048),
     628,
     0,
     0.005,
     50,
     NULL},
    {FX_OVERRIDE,
     "linear",
     "",
     "M N K",
     {4096, 16384, 4096},
     2.0 * 4096 * 16384 * 4096,
     2.0 * (4096.0 * 4096 + 16384.0 * 4096 + 4096.0 * 16384),
     650,
     0.10,
     0.005,
     50,
     NULL},
    {FX_ONLY_BASE,
     "nvfp4_gemv",
     "",
     "M K L",
     {7168, 16384, 1},
     2.0 * 7168 * 16384,
     7168.0 * 16384 / 2 + 7168.0 * 16384 / 16,
     12.4,
     0,
     0.005,
     50,
     NULL},
    {FX_ONLY_NEW,
     "attention_decode",
     "",
     "B KV",
     {16, 8192},
     4.0 * 16 * 32 * 8192 * 128,
     2.0 * 16 * 32 * 8192 * 128 * 2,
     8,
     0,
     0.005,
     50,
     NULL},
};
#define FX_COUNT (sizeof k_fx / sizeof k_fx[0])

/* which: 0 base, 1 new, 2 base on an H100 */
static int fx_write(const char *dir, const char *file, int which) {
    kk_bench_environment env;
    int clock = which == 2 ? 1755 : 1980;
    fx_env(&env, which == 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA H200", clock,
           which == 2 ? "570.86.15" : "580.159.04");
    kk_bench_results *r;
    if (kk_bench_results_create(&env, &r)) return -1;
    kk_bench_ceilings c = {.copy_gbs = 4100,
                           .read_gbs = 4300,
                           .bf16_tflops = 801,
                           .fp8_tflops = 1317,
                           .fp32_tflops = 60};
    int bad = kk_bench_results_set_ceilings(r, &c) != KK_OK;
    for (size_t i = 0; i < FX_COUNT && !bad; i++) {
        fx_entry f = k_fx[i];
        const char *n = f.name;
        if ((which == 1 && strcmp(n, FX_ONLY_BASE) == 0) ||
            (which != 1 && strcmp(n, FX_ONLY_NEW) == 0))
            continue;
        double scale = 1;
        uint64_t seed = 1000 + i + (which == 1 && strcmp(n, FX_SAME) != 0 ? 500 : 0);
        if (which == 1 && strcmp(n, FX_SLOWER) == 0) scale = 1.10;
        if (which == 1 && strcmp(n, FX_FASTER) == 0) scale = 0.90;
        if (which == 1 && strcmp(n, FX_OVERRIDE) == 0) scale = 1.05;
        if (which == 1 && strcmp(n, FX_NOISY) == 0) f.noise = 0.15, f.n = 12, scale = 1.03;
        bad = fx_add(r, &f, scale, seed, clock) != 0;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    bad = bad || kk_bench_results_write_file(r, path) != KK_OK;
    kk_bench_results_free(r);
    if (bad) fprintf(stderr, "%s: %s\n", path, kk_last_error_message());
    return bad ? -1 : 0;
}

static int fx_write_hostile(const char *dir) {
    kk_bench_environment env;
    fx_env(&env, "<img src=x onerror=alert(1)> \"GPU\" & co", 1980, "<b>580</b>");
    kk_bench_results *r;
    if (kk_bench_results_create(&env, &r)) return -1;
    /* a KernelKit entry and a name-convention anchor of the same work */
    fx_entry f = {FX_HOSTILE, "<i>op</i>|x",    "kernelkit", "M", {64}, 1e9, 1e6, 10, 0, 0.005,
                  20,         "</code><script>"};
    fx_entry g = {
        "anchor/<evil>&amp;/gemm", "<i>op</i>|x", "", "M", {64}, 1e9, 1e6, 12, 0, 0.005, 20,
        "</code><script>"};
    char path[1024];
    snprintf(path, sizeof path, "%s/hostile.json", dir);
    int bad = fx_add(r, &f, 1, 7, 1980) || fx_add(r, &g, 1, 8, 1980) ||
              kk_bench_results_write_file(r, path) != KK_OK;
    kk_bench_results_free(r);
    return bad ? -1 : 0;
}

int kk_test_write_fixtures(const char *dir) {
    int bad = fx_write(dir, "base.json", 0) || fx_write(dir, "new.json", 1) ||
              fx_write(dir, "base_h100.json", 2) || fx_write_hostile(dir);
    if (!bad) printf("wrote base.json new.json base_h100.json hostile.json to %s\n", dir);
    return bad ? 1 : 0;
}
#endif /* KK_FIXTURES_GENERATOR */
#endif

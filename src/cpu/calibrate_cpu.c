/* CPU ceilings of kernelkit calibrate, all on kk__cpu_threads() threads, the
 * kernels' own count (KK_NUM_THREADS=1: one core). Bandwidths: memcpy (bytes
 * read + written; glibc streams large copies, so no line is read for
 * ownership) and read (a sum of a large array of 64-bit integers, which the
 * compiler may vectorize), each thread on its own slice. Arithmetic rates at the
 * instruction-set level the kernels use (kk__cpu_isa()): fp32 = independent
 * FMA chains in 16-lane (AVX-512) or 8-lane (AVX2 + FMA) vectors, or 32
 * scalar multiply-add chains at the generic level (a C11 build does not
 * contract them into FMAs: the rate portable code reaches); bf16 = vdpbf16ps
 * chains (AVX512_BF16: 32 multiply-adds each), unavailable below that level;
 * amx_bf16 = tdpbf16ps on 4 independent accumulator tiles (16 x 16 x 32
 * multiply-adds each), at the amx level only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/timer.h"
#include "core/threads.h"
#include "cpu/cpu_amx.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define CHAINS 32

typedef struct cpu_job {
    unsigned char *src, *dst;
    size_t bytes;
    uint64_t sink;
    long iters;
    float fsink;
    int threads; /* of the bandwidth measurements */
} cpu_job;

/* Each thread copies (or reads) its own contiguous slice, as a row kernel's
 * static schedule gives it; one thread when j->threads is 1. */
static kk_status run_copy(void *ctx, kk_stream stream) {
    cpu_job *j = ctx;
    (void)stream;
    const size_t slice = j->bytes / (size_t)j->threads / 64 * 64;
#pragma omp parallel for num_threads(j->threads) schedule(static)
    for (int t = 0; t < j->threads; t++) {
        const size_t at = (size_t)t * slice, n = t == j->threads - 1 ? j->bytes - at : slice;
        memcpy(j->dst + at, j->src + at, n);
    }
    j->sink += j->dst[j->sink % j->bytes];
    return KK_OK;
}

static kk_status run_read(void *ctx, kk_stream stream) {
    cpu_job *j = ctx;
    (void)stream;
    const uint64_t *p = (const uint64_t *)(const void *)j->src;
    const size_t n = j->bytes / sizeof *p;
    uint64_t total = 0;
#pragma omp parallel for num_threads(j->threads) schedule(static) reduction(^ : total)
    for (size_t i = 0; i < n / 4 * 4; i += 4) total ^= (p[i] + p[i + 1]) ^ (p[i + 2] + p[i + 3]);
    j->sink += total;
    return KK_OK;
}

static kk_status run_fma(void *ctx, kk_stream stream) {
    cpu_job *j = ctx;
    (void)stream;
    float acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = 1.0f + (float)c * 1e-3f + j->fsink * 1e-30f;
    const float m = 0.999999f, a = 1e-6f;
    for (long it = 0; it < j->iters; it++)
        for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * m + a;
    float s = 0;
    for (int c = 0; c < CHAINS; c++) s += acc[c];
    j->fsink += s;
    return KK_OK;
}

/* ---- vector FMA peaks: VCHAINS independent accumulators per thread, more
 * than latency x pipes on any current core ---- */
#define VCHAINS 24
#define CH_A(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CH_B(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
#define CH(X) CH_A(X) CH_B(X)

#if defined(__x86_64__) && defined(__GNUC__)
KK__TARGET_AVX512 static float fma_avx512(long iters, float seed) {
#define D512(i) __m512 a##i = _mm512_set1_ps(1.0f + (float)i * 1e-3f + seed);
#define F512(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define S512(i) s = _mm512_add_ps(s, a##i);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    CH(D512)
    for (long it = 0; it < iters; it++) {
        CH(F512)
    }
    __m512 s = _mm512_setzero_ps();
    CH(S512)
    return _mm512_reduce_add_ps(s);
}

KK__TARGET_AVX2 static float fma_avx2(long iters, float seed) {
#define D256(i) __m256 a##i = _mm256_set1_ps(1.0f + (float)i * 1e-3f + seed);
#define F256(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define S256(i) s = _mm256_add_ps(s, a##i);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    CH(D256)
    for (long it = 0; it < iters; it++) {
        CH(F256)
    }
    __m256 s = _mm256_setzero_ps();
    CH(S256)
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static float dot_bf16(long iters,
                                                                                      float seed) {
#define DBF(i) __m512 a##i = _mm512_set1_ps(seed + (float)i);
#define FBF(i) a##i = _mm512_dpbf16_ps(a##i, (__m512bh)x, (__m512bh)y);
    const __m512i x = _mm512_set1_epi32(0x3f803f80), y = _mm512_set1_epi32(0x00010001); /* tiny */
    CH(DBF)
    for (long it = 0; it < iters; it++) {
        CH(FBF)
    }
    __m512 s = _mm512_setzero_ps();
    CH(S512)
    return _mm512_reduce_add_ps(s);
}
#endif

#if KK__AMX_CODE
/* 4 accumulators (tiles 0..3) fed by 2 a tiles and 2 b tiles loaded once:
 * each iteration 4 independent tdpbf16ps, 4 x 16384 FLOP. */
#define AMX_FLOPS_PER_ITER (4 * 16 * 16 * 32 * 2.0)

__attribute__((target("amx-tile,amx-bf16"))) static float dot_amx(long iters, float seed) {
    uint16_t in[16 * 32];
    float out[16 * 16];
    for (int i = 0; i < 16 * 32; i++) in[i] = (uint16_t)(i & 1 ? 0x3f80 : 0x3580); /* 1, 2^-20 */
    for (int i = 0; i < 16 * 16; i++) out[i] = seed;
    __asm__ volatile("" ::: "memory"); /* tileloadd has no memory operand in gcc */
    _tile_loadconfig(&kk__amx_config_16x64);
    _tile_loadd(0, out, 64);
    _tile_loadd(1, out, 64);
    _tile_loadd(2, out, 64);
    _tile_loadd(3, out, 64);
    _tile_loadd(4, in, 64);
    _tile_loadd(5, in, 64);
    _tile_loadd(6, in, 64);
    _tile_loadd(7, in, 64);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0] + out[255];
}
#endif

/* FLOPs per thread per iteration of each kind (0: not at this level). */
static double fp32_flops_per_iter(kk__isa isa) {
    return isa >= KK__ISA_AVX512 ? VCHAINS * 16 * 2 : isa >= KK__ISA_AVX2 ? VCHAINS * 8 * 2 : 0;
}

/* bf16: 0 fp32 FMA, 1 vdpbf16ps, 2 AMX tiles */
static kk_status run_vector(void *ctx, kk_stream stream, int bf16) {
    cpu_job *j = ctx;
    (void)stream;
    const kk__isa isa = kk__cpu_isa();
    float total = 0.0f;
#pragma omp parallel num_threads(kk__cpu_threads()) reduction(+ : total)
    {
        float r = 0.0f;
#if defined(__x86_64__) && defined(__GNUC__)
        if (bf16 == 2) {
#if KK__AMX_CODE
            r = dot_amx(j->iters, j->fsink * 1e-30f);
#endif
        } else if (bf16)
            r = dot_bf16(j->iters, j->fsink * 1e-30f);
        else if (isa >= KK__ISA_AVX512)
            r = fma_avx512(j->iters, j->fsink * 1e-30f);
        else
            r = fma_avx2(j->iters, j->fsink * 1e-30f);
#endif
        total += r;
    }
    (void)isa;
    j->fsink += total;
    return KK_OK;
}

static kk_status run_fma_vector(void *ctx, kk_stream stream) { return run_vector(ctx, stream, 0); }
static kk_status run_dot_bf16(void *ctx, kk_stream stream) { return run_vector(ctx, stream, 1); }
static kk_status run_dot_amx(void *ctx, kk_stream stream) { return run_vector(ctx, stream, 2); }

kk_status kk__calibrate_cpu(void *ctx, int index, const kk_calibrate_options *o,
                            kk__calibrate_measure_fn measure, kk_calibration *cal) {
    (void)ctx;
    (void)index;
    const size_t bytes = (size_t)(o->quick ? 64 : 512) << 20;
    cpu_job j;
    memset(&j, 0, sizeof j);
    j.bytes = bytes;
    j.src = malloc(bytes);
    j.dst = malloc(bytes);
    kk_status st = KK_OK;
    if (!j.src || !j.dst) {
        st = kk__error(KK_ERR_OUT_OF_MEMORY, KK__CALIBRATE_FUNC,
                       "cannot allocate 2 x %zu bytes for the CPU calibration", bytes);
        goto done;
    }
    for (size_t i = 0; i < bytes; i++) j.src[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(j.dst, 1, bytes);

    j.threads = kk__cpu_threads();
    char what[96];
    snprintf(what, sizeof what, "memcpy, %d thread%s", j.threads, j.threads == 1 ? "" : "s");
    st = measure("cpu", run_copy, &j, 2.0 * (double)bytes, 1e9, o, what,
                 &cal->ceilings[KK_CEILING_COPY]);
    snprintf(what, sizeof what, "sum of a uint64 array, %d thread%s", j.threads,
             j.threads == 1 ? "" : "s");
    if (!st)
        st = measure("cpu", run_read, &j, (double)bytes, 1e9, o, what,
                     &cal->ceilings[KK_CEILING_READ]);
    j.iters = o->quick ? 1L << 18 : 1L << 20;
    const kk__isa isa = kk__cpu_isa();
    const int threads = kk__cpu_threads();
    char method[160];
    if (!st && isa >= KK__ISA_AVX2) {
        snprintf(method, sizeof method, "%s: %d FMA chains of %d lanes, %d thread%s",
                 kk__cpu_isa_name(isa), VCHAINS, isa >= KK__ISA_AVX512 ? 16 : 8, threads,
                 threads == 1 ? "" : "s");
        st =
            measure("cpu", run_fma_vector, &j, fp32_flops_per_iter(isa) * threads * (double)j.iters,
                    1e12, o, method, &cal->ceilings[KK_CEILING_FP32]);
    } else if (!st) {
        st = measure("cpu", run_fma, &j, 2.0 * CHAINS * (double)j.iters, 1e12, o,
                     "generic: 32 fp32 multiply-add chains, 1 thread",
                     &cal->ceilings[KK_CEILING_FP32]);
    }
    if (!st && isa >= KK__ISA_AVX512_BF16) {
        snprintf(method, sizeof method,
                 "avx512_bf16: %d vdpbf16ps chains (32 multiply-adds), %d thread%s", VCHAINS,
                 threads, threads == 1 ? "" : "s");
        st = measure("cpu", run_dot_bf16, &j, VCHAINS * 64.0 * threads * (double)j.iters, 1e12, o,
                     method, &cal->ceilings[KK_CEILING_BF16]);
    } else {
        kk__ceiling_unavailable(&cal->ceilings[KK_CEILING_BF16],
                                isa >= KK__ISA_AVX2 ? "no AVX512_BF16 at this level (KK_CPU_ISA)"
                                                    : "no bf16 dot product at the generic level");
    }
#if KK__AMX_CODE
    if (!st && isa >= KK__ISA_AMX) {
        snprintf(method, sizeof method, "amx: tdpbf16ps, 4 accumulator tiles, %d thread%s", threads,
                 threads == 1 ? "" : "s");
        /* a tile product is 16 times a vdpbf16ps chain's work: fewer iterations */
        cpu_job amx = j;
        amx.iters = j.iters / 16;
        st = measure("cpu", run_dot_amx, &amx, AMX_FLOPS_PER_ITER * threads * (double)amx.iters,
                     1e12, o, method, &cal->ceilings[KK_CEILING_AMX_BF16]);
    } else
#endif
    {
        kk__ceiling_unavailable(&cal->ceilings[KK_CEILING_AMX_BF16],
                                "no AMX-BF16 tiles at this level (needs the amx level; now %s)",
                                kk__cpu_isa_name(isa));
    }
    kk__ceiling_unavailable(&cal->ceilings[KK_CEILING_FP8],
                            "no fp8 matrix unit measured on the CPU");
done:
    free(j.src);
    free(j.dst);
    return st;
}

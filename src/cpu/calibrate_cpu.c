/* CPU ceilings of kernelkit calibrate, on the calling thread (one core; no
 * OpenMP): memcpy bandwidth (bytes read + written), read bandwidth (a sum of a
 * large array of 64-bit integers, which the compiler may vectorize) and the
 * fp32 rate of 32 independent multiply-add chains (2 FLOP each; a C11 build
 * does not contract them into FMAs, so this is the rate the portable code
 * reaches, not the core's FMA peak). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/timer.h"
#include "cpu/cpu_kernels.h"

#define CHAINS 32

typedef struct cpu_job {
    unsigned char *src, *dst;
    size_t bytes;
    uint64_t sink;
    long iters;
    float fsink;
} cpu_job;

static kk_status run_copy(void *ctx, kk_stream stream) {
    cpu_job *j = ctx;
    (void)stream;
    memcpy(j->dst, j->src, j->bytes);
    j->sink += j->dst[j->sink % j->bytes];
    return KK_OK;
}

static kk_status run_read(void *ctx, kk_stream stream) {
    cpu_job *j = ctx;
    (void)stream;
    const uint64_t *p = (const uint64_t *)(const void *)j->src;
    size_t n = j->bytes / sizeof *p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
    }
    j->sink += a0 ^ a1 ^ a2 ^ a3;
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

    st = measure("cpu", run_copy, &j, 2.0 * (double)bytes, 1e9, o, "memcpy",
                 &cal->ceilings[KK_CEILING_COPY]);
    if (!st)
        st = measure("cpu", run_read, &j, (double)bytes, 1e9, o, "sum of uint64 array",
                     &cal->ceilings[KK_CEILING_READ]);
    j.iters = o->quick ? 1L << 18 : 1L << 20;
    if (!st)
        st = measure("cpu", run_fma, &j, 2.0 * CHAINS * (double)j.iters, 1e12, o,
                     "32 fp32 multiply-add chains, 1 thread", &cal->ceilings[KK_CEILING_FP32]);
    kk__ceiling_unavailable(&cal->ceilings[KK_CEILING_BF16],
                            "no bf16 matrix unit measured on the CPU");
    kk__ceiling_unavailable(&cal->ceilings[KK_CEILING_FP8],
                            "no fp8 matrix unit measured on the CPU");
done:
    free(j.src);
    free(j.dst);
    return st;
}

/* nvfp4_gemm on the CPU: y = x . (w * sw * gw)^T for M <= 64 rows of x. A
 * small-batch NVFP4 GEMM is bound by reading the weights, so each weight is
 * decoded once, in chunks on the stack shared by every row of x, and the dot
 * products are plain f32 loops that vectorize. docs/backends/cpu.md,
 * "NVFP4 x bf16 GEMM". */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/nvfp4_gemm.h"

#define CHUNK 256 /* K elements dequantized at a time: 16 scale blocks */
#define MAX_M 64  /* the M parameter's maximum */
#define NB 4      /* weight rows per iteration (dot4) */

/* Weights [k0, k0 + len) of row n, times their block scales and gw. */
KK__ISA_INLINE void dequantize_chunk(const uint8_t *w, const uint8_t *sw, int64_t K, int64_t n,
                                     int64_t k0, int len, float gw, const float *lut, float *out) {
    const uint8_t *bytes = w + (n * K + k0) / 2;
    const uint8_t *scales = sw + (n * K + k0) / 16;
    for (int b = 0; b < len / 16; b++) {
        const float s = kk_e4m3_to_f32(scales[b]) * gw;
        for (int j = 0; j < 8; j++) {
            const uint8_t byte = bytes[b * 8 + j];
            out[b * 16 + 2 * j] = lut[byte & 0xFu] * s;
            out[b * 16 + 2 * j + 1] = lut[byte >> 4] * s;
        }
    }
}

/* The dot products of one x chunk with NB weight chunks at once: each x
 * element is loaded once for NB multiply-adds. */
KK__ISA_INLINE void dot4(const float *x, const float (*wf)[CHUNK], int len, float *out) {
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int i = 0; i < len; i++) {
        s0 += x[i] * wf[0][i];
        s1 += x[i] * wf[1][i];
        s2 += x[i] * wf[2][i];
        s3 += x[i] * wf[3][i];
    }
    out[0] += s0;
    out[1] += s1;
    out[2] += s2;
    out[3] += s3;
}

/* Weight rows [n0, n0 + nb), nb <= NB, against every row of x: y[m][n]. */
KK__ISA_INLINE void row_group(const uint8_t *w, const uint8_t *sw, const float *xf, uint16_t *y,
                              int64_t M, int64_t N, int64_t K, float gw, const float *lut,
                              int64_t n0) {
    const int nb = N - n0 < NB ? (int)(N - n0) : NB;
    float acc[MAX_M][NB] = {{0}}, wf[NB][CHUNK];
    for (int64_t k0 = 0; k0 < K; k0 += CHUNK) {
        const int len = K - k0 < CHUNK ? (int)(K - k0) : CHUNK;
        for (int j = 0; j < NB; j++) /* rows past N: zeros, their sums unused */
            if (j < nb)
                dequantize_chunk(w, sw, K, n0 + j, k0, len, gw, lut, wf[j]);
            else
                memset(wf[j], 0, sizeof wf[j]);
        for (int64_t m = 0; m < M; m++)
            dot4(xf + m * K + k0, (const float(*)[CHUNK])wf, len, acc[m]);
    }
    for (int64_t m = 0; m < M; m++)
        for (int j = 0; j < nb; j++) y[m * N + n0 + j] = kk__f32_bf16(acc[m][j]);
}
KK__ISA_CLONES(row_group,
               (const uint8_t *w, const uint8_t *sw, const float *xf, uint16_t *y, int64_t M,
                int64_t N, int64_t K, float gw, const float *lut, int64_t n0),
               (w, sw, xf, y, M, N, K, gw, lut, n0))

kk_status kk__nvfp4_gemm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t M = p->i[KK__NVG_M], N = p->i[KK__NVG_N], K = p->i[KK__NVG_K];
    const int global = (int)p->i[KK__NVG_GLOBAL];
    if (M > MAX_M || K % 64 != 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemm", "M, K",
                             "M <= 64 and K a multiple of 64", "M=%lld K=%lld", (long long)M,
                             (long long)K);
    const float gw = global ? *(const float *)t[3]->data : 1.0f;
    const uint8_t *w = t[1]->data, *sw = t[2]->data;
    uint16_t *y = t[global ? 4 : 3]->data;
    float *xf = malloc((size_t)(M * K) * sizeof(float));
    if (!xf)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "nvfp4_gemm",
                         "no host memory for x in f32 (%lld x %lld)", (long long)M, (long long)K);
    for (int64_t m = 0; m < M; m++)
        kk__row_load(t[0]->data, KK_DTYPE_BF16, m * K, xf + m * K, (int)K);
    float lut[16];
    for (unsigned c = 0; c < 16; c++) lut[c] = kk_e2m1_to_f32((uint8_t)c);
    void (*const group)(const uint8_t *, const uint8_t *, const float *, uint16_t *, int64_t,
                        int64_t, int64_t, float, const float *, int64_t) = KK__ISA_PICK(row_group);
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t n0 = 0; n0 < N; n0 += NB) group(w, sw, xf, y, M, N, K, gw, lut, n0);
    free(xf);
    return KK_OK;
}

/* rmsnorm_fp8 on the CPU: y = rmsnorm(x) * w in f32 (rmsnorm_cpu.c's
 * arithmetic), then per group (or row) scale = amax / 448 and q = e4m3(y /
 * scale) by kk_quantize's arithmetic (core/quant_math.h) and the library's
 * e4m3 rounding (core/dtype_encode.h, inlined so that it vectorizes: 8x
 * faster than a call per element at AVX-512). So q and the scales are bit
 * for bit kk_quantize (1x128, or per tensor for a row) of kk_rmsnorm's f32
 * output. One row per OpenMP iteration; a group is walked twice, for its
 * amax and for its elements, y recomputed from x (two multiplies) rather
 * than stored. */
#include <math.h>

#include "core/dtype_encode.h"
#include "core/error.h"
#include "core/quant_math.h"
#include "core/threads.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "opdef/rmsnorm_fp8.h"

/* Bytes s[0..m) to d, the aligned 16-byte pieces with streaming stores. */
static void stream_bytes(uint8_t *d, const uint8_t *s, int m) {
#if defined(__x86_64__)
    int head = (int)((16 - ((uintptr_t)d & 15)) & 15);
    head = head > m ? m : head;
    memcpy(d, s, (size_t)head);
    int i = head;
    for (; i + 16 <= m; i += 16)
        _mm_stream_si128((__m128i *)(void *)(d + i),
                         _mm_loadu_si128((const __m128i *)(const void *)(s + i)));
    memcpy(d + i, s + i, (size_t)(m - i));
#else
    memcpy(d, s, (size_t)m);
#endif
}

/* y = x r w for elements [at, at + m) of a row (xs at offset xo, of xdt). */
KK__ISA_INLINE void y_chunk(const void *xs, kk_dtype xdt, int64_t xo, const void *w,
                            const float *wf, kk_dtype dt, int64_t at, int m, float inv, float *y) {
    float xb[KK__ROW_CHUNK], wb[KK__ROW_CHUNK];
    const float *xv = kk__row_view(xs, xdt, xo + at, xb, m);
    const float *wv = wf ? wf + at : kk__row_view(w, dt, at, wb, m);
#pragma omp simd
    for (int i = 0; i < m; i++) y[i] = xv[i] * inv * wv[i];
}

/* One row. keep: n floats of the thread's to decode x into once (NULL:
 * decoded per pass); wf: w as f32, or NULL. *bad |= a non-finite y. */
KK__ISA_INLINE void fp8_row(const void *x, const void *w, const float *wf, uint8_t *q,
                            float *scales, kk_dtype dt, int64_t n, int64_t group, double eps,
                            int stream, float *keep, int64_t r, int *bad) {
    const void *xs = keep ? kk__row_f32(x, dt, r, n, keep) : x;
    const kk_dtype xdt = keep ? KK_DTYPE_F32 : dt;
    const int64_t xo = keep ? 0 : r * n, ngroups = n / group;
    float yb[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        total += kk__chunk_sum_squares(kk__row_view(xs, xdt, xo + at, yb, m), m);
    }
    const float inv = (float)(1.0 / sqrt(total / (double)n + eps));
    for (int64_t g = 0; g < ngroups; g++) {
        const int64_t g0 = g * group, g1 = g0 + group;
        uint32_t amax = 0; /* |y| as bits: NaN and inf sort above every finite value */
        for (int64_t at = g0; at < g1; at += KK__ROW_CHUNK) {
            const int m = kk__row_chunk(g1, at);
            y_chunk(xs, xdt, xo, w, wf, dt, at, m, inv, yb);
#pragma omp simd reduction(max : amax)
            for (int i = 0; i < m; i++) {
                const uint32_t a = kk__f32_bits(yb[i]) & 0x7FFFFFFFu;
                amax = a > amax ? a : amax;
            }
        }
        *bad |= amax >= KK__F32_INF_BITS;
        const float scale = kk__fp8_scale(kk__bits_f32(amax), KK__E4M3_MAX);
        scales[r * ngroups + g] = scale;
        for (int64_t at = g0; at < g1; at += KK__ROW_CHUNK) {
            const int m = kk__row_chunk(g1, at);
            if (group > KK__ROW_CHUNK) y_chunk(xs, xdt, xo, w, wf, dt, at, m, inv, yb);
            uint8_t qb[KK__ROW_CHUNK];
            for (int i = 0; i < m; i++)
                qb[i] = kk__f32bits_to_e4m3(kk__f32_bits(kk__q_ratio(yb[i], scale)));
            if (stream)
                stream_bytes(q + r * n + at, qb, m);
            else
                memcpy(q + r * n + at, qb, (size_t)m);
        }
    }
}
KK__ISA_CLONES(fp8_row,
               (const void *x, const void *w, const float *wf, uint8_t *q, float *scales,
                kk_dtype dt, int64_t n, int64_t group, double eps, int stream, float *keep,
                int64_t r, int *bad),
               (x, w, wf, q, scales, dt, n, group, eps, stream, keep, r, bad))

kk_status kk__rmsnorm_fp8_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__RFP8_ROWS], n = p->i[KK__RFP8_N];
    const int64_t group = kk__rmsnorm_fp8_group(p);
    const double eps = p->f[KK__RFP8_EPS];
    const kk_dtype dt = (kk_dtype)p->i[KK__RFP8_DTYPE];
    const void *x = t[0]->data, *w = t[1]->data;
    uint8_t *q = t[2]->data;
    float *scales = t[3]->data;
    void (*const row)(const void *, const void *, const float *, uint8_t *, float *, kk_dtype,
                      int64_t, int64_t, double, int, float *, int64_t, int *) =
        KK__ISA_PICK(fp8_row);
    const int threads = kk__cpu_threads();
    float *keep = kk__row_buffers(dt, n, n, threads + 1); /* as rmsnorm_cpu.c */
    const float *wf = keep ? kk__row_f32(w, dt, 0, n, keep + threads * n) : NULL;
    const int stream_out = rows * n >= KK__ROW_STREAM_MIN_BYTES;
    int bad = 0;
#pragma omp parallel num_threads(threads)
    {
        float *mine = keep ? keep + (int64_t)kk__omp_thread() * n : NULL;
        int mine_bad = 0;
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++)
            row(x, w, wf, q, scales, dt, n, group, eps, stream_out, mine, r, &mine_bad);
        if (stream_out) kk__row_stream_fence();
        if (mine_bad) {
#pragma omp atomic write
            bad = 1;
        }
    }
    free(keep);
    if (bad)
        return kk__set_error(KK_ERR_QUANTIZATION, "rmsnorm_fp8", "x", "inf or NaN", "finite values",
                             NULL,
                             "rmsnorm(x) * w holds NaN or an infinity: it cannot be scaled into "
                             "fp8_e4m3 (q is unspecified), as kk_quantize refuses it");
    return KK_OK;
}

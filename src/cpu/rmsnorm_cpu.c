/* rmsnorm on the CPU: y = x / sqrt(mean(x^2) + eps) * w, one row per OpenMP
 * iteration. Each row is read twice, in chunks converted to f32 on the stack
 * (cpu_rows.h): once for the sum of squares, once to write y. A chunk's sum is
 * f32 (vectorized); the chunks add up in f64, so a row of 2^24 elements loses
 * no more than a short one. */
#include <math.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/rmsnorm.h"

KK__ISA_INLINE double sum_squares(const void *x, kk_dtype dt, int64_t row, int64_t n) {
    float buf[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        total += kk__chunk_sum_squares(kk__row_view(x, dt, row * n + at, buf, m), m);
    }
    return total;
}

/* One row: the sum of squares, then y = x r w. keep: n floats of the
 * thread's to decode x into once (NULL: decoded per pass); wf: w as f32, or
 * NULL. */
KK__ISA_INLINE void rms_row(const void *x, const void *w, const float *wf, void *y, kk_dtype dt,
                            int64_t n, double eps, int stream, float *keep, int64_t r) {
    const void *xs = keep ? kk__row_f32(x, dt, r, n, keep) : x;
    const kk_dtype xdt = keep ? KK_DTYPE_F32 : dt;
    const int64_t xr = keep ? 0 : r;
    const float inv = (float)(1.0 / sqrt(sum_squares(xs, xdt, xr, n) / (double)n + eps));
    float xb[KK__ROW_CHUNK], wb[KK__ROW_CHUNK];
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        const float *xv = kk__row_view(xs, xdt, xr * n + at, xb, m);
        const float *wv = wf ? wf + at : kk__row_view(w, dt, at, wb, m);
#pragma omp simd
        for (int i = 0; i < m; i++) xb[i] = xv[i] * inv * wv[i];
        kk__row_put(y, dt, r * n + at, xb, m, stream);
    }
}
KK__ISA_CLONES(rms_row,
               (const void *x, const void *w, const float *wf, void *y, kk_dtype dt, int64_t n,
                double eps, int stream, float *keep, int64_t r),
               (x, w, wf, y, dt, n, eps, stream, keep, r))

#ifdef KK__ROWS512
/* rms_row at AVX-512 (f32, bf16), in registers: the same arithmetic in the
 * same order, so the same bits. wf: w as f32. */
KK__R512 void rms16(const void *x, const float *wf, void *y, int bf16, int hw, __m512 inv,
                    int64_t i, __mmask16 m, int nt) {
    const __m512 v = _mm512_mul_ps(kk__ld16(kk__at(x, bf16, i), bf16, m), inv);
    kk__st16(kk__at_mut(y, bf16, i), _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, wf + i)), bf16, hw,
             m, nt);
}

static KK__ROWS512_TARGET void rms_row512(const void *x, const float *wf, void *y, int bf16,
                                          int64_t n, double eps, int stream, int hw, int64_t r) {
    const void *xr = kk__at(x, bf16, r * n);
    void *yr = kk__at_mut(y, bf16, r * n);
    const double ss = kk__sum_squares512(xr, bf16, n);
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(ss / (double)n + eps)));
    const int nt = stream && kk__st16_aligned(yr, bf16);
    const void *next = kk__at(xr, bf16, n);
    int64_t i = 0;
    if (bf16 && hw) /* 32 at a time: one 64-byte store */
        for (; i + 32 <= n; i += 32) {
            kk__prefetch16(next, i, 1);
            const __m512 v0 = _mm512_mul_ps(kk__ld16(kk__at(xr, 1, i), 1, 0xFFFF), inv);
            const __m512 v1 = _mm512_mul_ps(kk__ld16(kk__at(xr, 1, i + 16), 1, 0xFFFF), inv);
            kk__st32_bf16(kk__at_mut(yr, 1, i), _mm512_mul_ps(v0, _mm512_loadu_ps(wf + i)),
                          _mm512_mul_ps(v1, _mm512_loadu_ps(wf + i + 16)), nt);
        }
    for (; i + 16 <= n; i += 16) {
        kk__prefetch16(next, i, bf16);
        rms16(xr, wf, yr, bf16, hw, inv, i, 0xFFFF, nt);
    }
    if (i < n) rms16(xr, wf, yr, bf16, hw, inv, i, kk__m16((int)(n - i)), nt);
}

/* The AVX-512 path: w decoded once for bf16; 0 when w cannot be. */
static int rmsnorm512(const void *x, const void *w, void *y, kk_dtype dt, int64_t rows, int64_t n,
                      double eps) {
    const int bf16 = dt == KK_DTYPE_BF16, hw = kk__rows512_hw();
    float *wd = bf16 ? malloc((size_t)n * sizeof(float)) : NULL;
    if (bf16 && !wd) return 0;
    const float *wf = bf16 ? kk__row_f32(w, dt, 0, n, wd) : (const float *)w;
    const int stream_out = kk__row_streams(dt, rows * n);
#pragma omp parallel num_threads(kk__cpu_threads())
    {
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++) rms_row512(x, wf, y, bf16, n, eps, stream_out, hw, r);
        if (stream_out) kk__row_stream_fence();
    }
    free(wd);
    return 1;
}
#endif

kk_status kk__rmsnorm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__RMS_ROWS], n = p->i[KK__RMS_N];
    const double eps = p->f[KK__RMS_EPS];
    const kk_dtype dt = (kk_dtype)p->i[KK__RMS_DTYPE];
    const void *x = t[0]->data, *w = t[1]->data;
    void *y = t[2]->data;
#ifdef KK__ROWS512
    if (kk__rows512(dt) && rmsnorm512(x, w, y, dt, rows, n, eps)) return KK_OK;
#endif
    void (*const row)(const void *, const void *, const float *, void *, kk_dtype, int64_t, double,
                      int, float *, int64_t) = KK__ISA_PICK(rms_row);
    const int threads = kk__cpu_threads();
    /* per thread a decoded row, and w decoded once at the end */
    float *keep = kk__row_buffers(dt, n, n, threads + 1);
    const float *wf = keep ? kk__row_f32(w, dt, 0, n, keep + threads * n) : NULL;
    const int stream_out = kk__row_streams(dt, rows * n);
#pragma omp parallel num_threads(threads)
    {
        float *mine = keep ? keep + (int64_t)kk__omp_thread() * n : NULL;
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++) row(x, w, wf, y, dt, n, eps, stream_out, mine, r);
        if (stream_out) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(keep);
    return KK_OK;
}

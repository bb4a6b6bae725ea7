/* add_rmsnorm on the CPU: h = x + residual rounded to the dtype, then y =
 * rmsnorm(h) * w from that rounded h, one row per OpenMP iteration. The first
 * pass adds a chunk, rounds it, stores it to h and sums its squares; the
 * second writes y from the rounded h, kept as f32 in a per-thread row (rows
 * up to KK__ROW_KEEP_MAX) or read back from h. A chunk of x and residual is
 * read before its h is written, so h may be residual or x (the in-place
 * residual update). Sums and y are rmsnorm_cpu.c's arithmetic, so y is bit
 * for bit kk_rmsnorm of the stored h. */
#include <math.h>

#include "core/threads.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "opdef/add_rmsnorm.h"

/* f[0..m) rounded to dt's values, kept as f32: what h holds once stored. */
KK__ISA_INLINE void round_to(kk_dtype dt, float *f, int m) {
    if (dt == KK_DTYPE_BF16)
        for (int i = 0; i < m; i++) f[i] = kk__bf16_f32(kk__f32_bf16(f[i]));
    else if (dt == KK_DTYPE_F16)
        for (int i = 0; i < m; i++) f[i] = kk__f16_f32(kk_f32_to_f16(f[i]));
}

/* One row. keep: n floats of the thread's for the rounded h (NULL: h is read
 * back); wf: w as f32, or NULL. */
KK__ISA_INLINE void add_row(const void *x, const void *res, const void *w, const float *wf, void *h,
                            void *y, kk_dtype dt, int64_t n, double eps, int stream, float *keep,
                            int64_t r) {
    float xb[KK__ROW_CHUNK], rb[KK__ROW_CHUNK], hb[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        const float *xv = kk__row_view(x, dt, r * n + at, xb, m);
        const float *rv = kk__row_view(res, dt, r * n + at, rb, m);
        float *hv = keep ? keep + at : hb;
#pragma omp simd
        for (int i = 0; i < m; i++) hv[i] = xv[i] + rv[i];
        round_to(dt, hv, m);
        total += kk__chunk_sum_squares(hv, m);
        /* streamed only when the rounded h is kept in f32, so not read back */
        kk__row_put(h, dt, r * n + at, hv, m, stream && keep);
    }
    const float inv = (float)(1.0 / sqrt(total / (double)n + eps));
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        const float *hv = keep ? keep + at : kk__row_view(h, dt, r * n + at, hb, m);
        const float *wv = wf ? wf + at : kk__row_view(w, dt, at, xb, m);
#pragma omp simd
        for (int i = 0; i < m; i++) rb[i] = hv[i] * inv * wv[i];
        kk__row_put(y, dt, r * n + at, rb, m, stream);
    }
}
KK__ISA_CLONES(add_row,
               (const void *x, const void *res, const void *w, const float *wf, void *h, void *y,
                kk_dtype dt, int64_t n, double eps, int stream, float *keep, int64_t r),
               (x, res, w, wf, h, y, dt, n, eps, stream, keep, r))

#ifdef KK__ROWS512
/* h = x + res rounded to the dtype for 16 lanes (0 past m): stored to h
 * (streamed when nt), kept as f32 in keep, and returned. */
KK__R512 __m512 add16(const void *x, const void *res, void *h, float *keep, int hw, int nt,
                      __mmask16 m, const int bf16) {
    __m512 v = _mm512_add_ps(kk__ld16(x, bf16, m), kk__ld16(res, bf16, m));
    if (bf16) {
        const __m256i b = kk__bf16_16(v, hw);
        v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
        if (nt && m == 0xFFFF)
            _mm256_stream_si256((__m256i *)h, b);
        else
            _mm256_mask_storeu_epi16(h, m, b);
    } else if (nt && m == 0xFFFF) {
        _mm512_stream_ps((float *)h, v);
    } else {
        _mm512_mask_storeu_ps(h, m, v);
    }
    v = _mm512_maskz_mov_ps(m, v);
    _mm512_mask_storeu_ps(keep, m, v);
    return v;
}

/* add_row at AVX-512 (f32, bf16, with keep): the same arithmetic in the
 * same order (kk__sum_squares512's), so y is still kk_rmsnorm(h) bit for
 * bit. h is streamed when the output is (it is kept, never read back). */
KK__R512 void add_body(const void *x, const void *res, const float *wf, void *h, void *y, int64_t n,
                       double eps, int stream, int hw, float *keep, int64_t r, const int bf16) {
    const void *xr = kk__at(x, bf16, r * n), *rr = kk__at(res, bf16, r * n);
    void *hr = kk__at_mut(h, bf16, r * n), *yr = kk__at_mut(y, bf16, r * n);
    const int hnt = stream && kk__st16_aligned(hr, bf16),
              ynt = stream && kk__st16_aligned(yr, bf16);
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        __m512 a = _mm512_setzero_ps();
        for (int i = 0; i < len; i += 16) {
            const int64_t e = at + i;
            const __m512 v =
                add16(kk__at(xr, bf16, e), kk__at(rr, bf16, e), kk__at_mut(hr, bf16, e), keep + e,
                      hw, hnt, kk__m16(len - i), bf16);
            a = _mm512_add_ps(a, _mm512_mul_ps(v, v));
        }
        total += kk__hsum16(a);
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(total / (double)n + eps)));
    const void *xn = kk__at(xr, bf16, n), *rn = kk__at(rr, bf16, n);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = kk__m16(n - i < 16 ? (int)(n - i) : 16);
        kk__prefetch16(xn, i, bf16);
        kk__prefetch16(rn, i, bf16);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, keep + i), inv);
        kk__st16(kk__at_mut(yr, bf16, i), _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, wf + i)), bf16,
                 hw, m, ynt);
    }
}

static KK__ROWS512_TARGET void add_row512(const void *x, const void *res, const float *wf, void *h,
                                          void *y, int bf16, int64_t n, double eps, int stream,
                                          int hw, float *keep, int64_t r) {
    if (bf16)
        add_body(x, res, wf, h, y, n, eps, stream, hw, keep, r, 1);
    else
        add_body(x, res, wf, h, y, n, eps, stream, hw, keep, r, 0);
}
#endif

kk_status kk__add_rmsnorm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__ARN_ROWS], n = p->i[KK__ARN_N];
    const double eps = p->f[KK__ARN_EPS];
    const kk_dtype dt = (kk_dtype)p->i[KK__ARN_DTYPE];
    const void *x = t[0]->data, *res = t[1]->data, *w = t[2]->data;
    void *h = t[3]->data, *y = t[4]->data;
    void (*const row)(const void *, const void *, const void *, const float *, void *, void *,
                      kk_dtype, int64_t, double, int, float *, int64_t) = KK__ISA_PICK(add_row);
    const int threads = kk__cpu_threads();
    /* per thread the rounded h (f32 too: it saves reading h back), and w as
     * f32 at the end; NULL (too long, or no memory): h is read back */
    float *keep =
        n <= KK__ROW_KEEP_MAX ? (float *)malloc((size_t)(n * (threads + 1)) * sizeof(float)) : NULL;
    const float *wf = keep ? kk__row_f32(w, dt, 0, n, keep + threads * n) : NULL;
    const int stream_out = kk__row_streams(dt, rows * n);
#ifdef KK__ROWS512
    if (keep && kk__rows512(dt)) {
        const int bf16 = dt == KK_DTYPE_BF16, hw = kk__rows512_hw();
#pragma omp parallel num_threads(threads)
        {
            float *mine = keep + (int64_t)kk__omp_thread() * n;
#pragma omp for schedule(static) nowait
            for (int64_t r = 0; r < rows; r++)
                add_row512(x, res, wf, h, y, bf16, n, eps, stream_out, hw, mine, r);
            if (stream_out) kk__row_stream_fence();
        }
        free(keep);
        return KK_OK;
    }
#endif
#pragma omp parallel num_threads(threads)
    {
        float *mine = keep ? keep + (int64_t)kk__omp_thread() * n : NULL;
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++)
            row(x, res, w, wf, h, y, dt, n, eps, stream_out, mine, r);
        if (stream_out) kk__row_stream_fence();
    }
    free(keep);
    return KK_OK;
}

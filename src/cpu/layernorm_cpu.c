/* layernorm on the CPU: one row per OpenMP iteration, three passes over the
 * row in f32 chunks on the stack (cpu_rows.h): the mean (of x - x[0], the
 * shifted-data algorithm), the variance around it (two passes rather than
 * E[x^2] - mean^2, which cancels catastrophically when |mean| >> std), then
 * y. Chunk sums are f32 (vectorized), their totals f64. */
#include <math.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/layernorm.h"

/* The mean as hi + lo, two floats: x - hi is exact for x near the mean
 * (Sterbenz), so x - mean = (x - hi) - lo has an error relative to itself,
 * not to |mean|. A plain f32 mean would cost |mean| * 2^-24 on every
 * deviation, which 1/sqrt(var + eps) magnifies when the row varies little. */
typedef struct mean2 {
    float hi, lo;
} mean2;

/* sum over the row of d (power 1) or d^2 (power 2), d = (x - mu.hi) - mu.lo */
KK__ISA_INLINE double row_sum(const void *x, kk_dtype dt, int64_t row, int64_t n, mean2 mu,
                              int power) {
    float buf[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        const float *v = kk__row_view(x, dt, row * n + at, buf, m);
        float s = 0.0f;
        if (power == 1) {
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < m; i++) s += (v[i] - mu.hi) - mu.lo;
        } else {
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < m; i++) {
                const float d = (v[i] - mu.hi) - mu.lo;
                s += d * d;
            }
        }
        total += s;
    }
    return total;
}

/* y = (x - mean) * inv * w + b over the row (w, b NULL without affine): x
 * row xr of dtype xdt, w and b of wdt (each either the tensors' dtype or the
 * f32 copies), y row `row` of dt. */
KK__ISA_INLINE void write_row(const void *x, kk_dtype xdt, int64_t xr, const void *w, const void *b,
                              kk_dtype wdt, void *y, kk_dtype dt, int64_t row, int64_t n, mean2 mu,
                              float inv, int stream) {
    float xb[KK__ROW_CHUNK], wb[KK__ROW_CHUNK], bb[KK__ROW_CHUNK];
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        const float *xv = kk__row_view(x, xdt, xr * n + at, xb, m);
        if (w) {
            const float *wv = kk__row_view(w, wdt, at, wb, m);
            const float *bv = kk__row_view(b, wdt, at, bb, m);
#pragma omp simd
            for (int i = 0; i < m; i++) xb[i] = ((xv[i] - mu.hi) - mu.lo) * inv * wv[i] + bv[i];
        } else {
#pragma omp simd
            for (int i = 0; i < m; i++) xb[i] = ((xv[i] - mu.hi) - mu.lo) * inv;
        }
        kk__row_put(y, dt, row * n + at, xb, m, stream);
    }
}

/* One row: the mean of x - x[r,0] (sums of deviations, not of |mean|-sized
 * values), the variance around it, then y. keep: n floats of the thread's to
 * decode x into once (NULL: decoded per pass); wb: w and b as f32 ([2n]),
 * or NULL. */
KK__ISA_INLINE void ln_row(const void *x, const void *w, const void *b, const float *wb, void *y,
                           kk_dtype dt, int64_t n, double eps, int stream, float *keep, int64_t r) {
    const void *xs = keep ? kk__row_f32(x, dt, r, n, keep) : x;
    const kk_dtype xdt = keep ? KK_DTYPE_F32 : dt;
    const int64_t xr = keep ? 0 : r;
    float x0;
    kk__row_load(xs, xdt, xr * n, &x0, 1);
    const double mean = x0 + row_sum(xs, xdt, xr, n, (mean2){x0, 0.0f}, 1) / (double)n;
    const mean2 mu = {(float)mean, (float)(mean - (double)(float)mean)};
    const double var = row_sum(xs, xdt, xr, n, mu, 2) / (double)n;
    const float inv = (float)(1.0 / sqrt(var + eps));
    if (wb && w)
        write_row(xs, xdt, xr, wb, wb + n, KK_DTYPE_F32, y, dt, r, n, mu, inv, stream);
    else
        write_row(xs, xdt, xr, w, b, dt, y, dt, r, n, mu, inv, stream);
}
KK__ISA_CLONES(ln_row,
               (const void *x, const void *w, const void *b, const float *wb, void *y, kk_dtype dt,
                int64_t n, double eps, int stream, float *keep, int64_t r),
               (x, w, b, wb, y, dt, n, eps, stream, keep, r))

#ifdef KK__ROWS512
/* Sum over elements [0, len) at p (len <= KK__ROW_CHUNK) of d = (x - hi) -
 * lo (power 1, called with lo = 0) or d^2 (power 2), in f32 as row_sum's
 * chunks: two accumulators (so that the adds overlap), 0 past len. */
KK__R512 float chunk_sum512(const void *p, int len, mean2 mu, const int power, const int bf16) {
    const __m512 hi = _mm512_set1_ps(mu.hi), lo = _mm512_set1_ps(mu.lo);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int i = 0;
    for (; i + 32 <= len; i += 32) {
        const __m512 x0 = kk__ld16(kk__at(p, bf16, i), bf16, 0xFFFF);
        const __m512 x1 = kk__ld16(kk__at(p, bf16, i + 16), bf16, 0xFFFF);
        /* power 1 runs with lo = 0: (x - hi) - 0 is x - hi, bit for bit */
        const __m512 d0 =
            power == 1 ? _mm512_sub_ps(x0, hi) : _mm512_sub_ps(_mm512_sub_ps(x0, hi), lo);
        const __m512 d1 =
            power == 1 ? _mm512_sub_ps(x1, hi) : _mm512_sub_ps(_mm512_sub_ps(x1, hi), lo);
        s0 = power == 1 ? _mm512_add_ps(s0, d0) : _mm512_fmadd_ps(d0, d0, s0);
        s1 = power == 1 ? _mm512_add_ps(s1, d1) : _mm512_fmadd_ps(d1, d1, s1);
    }
    for (; i < len; i += 16) {
        const __mmask16 m = kk__m16(len - i);
        const __m512 x0 = kk__ld16(kk__at(p, bf16, i), bf16, m);
        const __m512 d = _mm512_maskz_sub_ps(m, _mm512_sub_ps(x0, hi), lo);
        s0 = power == 1 ? _mm512_add_ps(s0, d) : _mm512_fmadd_ps(d, d, s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* Sums over elements [0, len) at p (len <= KK__ROW_CHUNK) of d = x - K and
 * of d^2, in f32 (*s1, *s2). A full bf16 chunk is decoded 32 at a time as
 * even and odd halves (kk__ld32_bf16_eo): the order of a sum is free. */
KK__R512 void chunk_stats512(const void *p, int len, float K, float *s1, float *s2,
                             const int bf16) {
    const __m512 k = _mm512_set1_ps(K);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, q0 = a0, q1 = a0;
    int i = 0;
    if (bf16 && len == KK__ROW_CHUNK) {
        for (; i < len; i += 32) {
            __m512 x0, x1;
            kk__ld32_bf16_eo(kk__at(p, 1, i), &x0, &x1);
            const __m512 d0 = _mm512_sub_ps(x0, k), d1 = _mm512_sub_ps(x1, k);
            a0 = _mm512_add_ps(a0, d0);
            a1 = _mm512_add_ps(a1, d1);
            q0 = _mm512_fmadd_ps(d0, d0, q0);
            q1 = _mm512_fmadd_ps(d1, d1, q1);
        }
    }
    for (; i + 32 <= len; i += 32) {
        const __m512 d0 = _mm512_sub_ps(kk__ld16(kk__at(p, bf16, i), bf16, 0xFFFF), k);
        const __m512 d1 = _mm512_sub_ps(kk__ld16(kk__at(p, bf16, i + 16), bf16, 0xFFFF), k);
        a0 = _mm512_add_ps(a0, d0);
        a1 = _mm512_add_ps(a1, d1);
        q0 = _mm512_fmadd_ps(d0, d0, q0);
        q1 = _mm512_fmadd_ps(d1, d1, q1);
    }
    for (; i < len; i += 16) {
        const __mmask16 m = kk__m16(len - i);
        const __m512 d = _mm512_maskz_sub_ps(m, kk__ld16(kk__at(p, bf16, i), bf16, m), k);
        a0 = _mm512_add_ps(a0, d);
        q0 = _mm512_fmadd_ps(d, d, q0);
    }
    *s1 = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    *s2 = _mm512_reduce_add_ps(_mm512_add_ps(q0, q1));
}

/* A row whose outputs are still to be written: its x and y, the mean and
 * 1/sqrt(var + eps), whether y is streamed. */
typedef struct ln_row_state {
    const void *xr;
    void *y;
    mean2 mu;
    float inv;
    int nt;
} ln_row_state;

/* y = ((x - hi) - lo) inv w + b for elements [i, i + 16) of row xr, 0
 * past m. */
KK__R512 __m512 ln_y16(const void *xr, const float *wb, int64_t n, __m512 hi, __m512 lo, __m512 inv,
                       int64_t i, __mmask16 m, const int bf16) {
    const __m512 x = kk__ld16(kk__at(xr, bf16, i), bf16, m);
    __m512 d = _mm512_mul_ps(_mm512_maskz_sub_ps(m, _mm512_sub_ps(x, hi), lo), inv);
    if (wb)
        d = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, wb + i),
                            _mm512_maskz_loadu_ps(m, wb + n + i));
    return d;
}

/* Outputs [256 u, 256 u + 256) of row s (of n); bf16 32 at a time by
 * vcvtne2ps2bf16 where the level has it. */
KK__R512 void ln_write_unit(const ln_row_state *s, const float *wb, int64_t n, int64_t u, int hw,
                            const int bf16) {
    const int64_t at = u * KK__ROW_CHUNK, end = n - at < KK__ROW_CHUNK ? n : at + KK__ROW_CHUNK;
    const __m512 hi = _mm512_set1_ps(s->mu.hi), lo = _mm512_set1_ps(s->mu.lo);
    const __m512 inv = _mm512_set1_ps(s->inv);
    const void *xr = s->xr;
    void *const y = s->y;
    const int nt = s->nt;
    int64_t i = at;
    if (bf16) { /* 32 at a time as even and odd halves, w and b in that order (layernorm512) */
        const __m512i idx = kk__eo_index();
        for (; i + 32 <= end; i += 32) {
            __m512 xe, xo;
            kk__ld32_bf16_eo(kk__at(xr, 1, i), &xe, &xo);
            __m512 ye = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(xe, hi), lo), inv);
            __m512 yo = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(xo, hi), lo), inv);
            if (wb) {
                ye = _mm512_fmadd_ps(ye, _mm512_loadu_ps(wb + i), _mm512_loadu_ps(wb + n + i));
                yo = _mm512_fmadd_ps(yo, _mm512_loadu_ps(wb + i + 16),
                                     _mm512_loadu_ps(wb + n + i + 16));
            }
            kk__st32_bf16_eo(kk__at_mut(y, 1, i), ye, yo, idx, hw, nt);
        }
    }
    for (; i + 16 <= end; i += 16)
        kk__st16(kk__at_mut(y, bf16, i), ln_y16(xr, wb, n, hi, lo, inv, i, 0xFFFF, bf16), bf16, hw,
                 0xFFFF, nt);
    if (i < end) {
        const __mmask16 m = kk__m16((int)(end - i));
        kk__st16(kk__at_mut(y, bf16, i), ln_y16(xr, wb, n, hi, lo, inv, i, m, bf16), bf16, hw, m,
                 nt);
    }
}

/* ln_row at AVX-512 (f32, bf16) for rows [r0, r1) of the thread's. The
 * mean and the variance come from one pass over x: sums of d = x - K and
 * d^2, K the mean of the row's first chunk (x[0] plus its mean deviation,
 * within about std/16 of the row's mean for most rows), so that
 * var = E[d^2] - E[d]^2 cancels nothing: it is taken only where E[d]^2 <=
 * E[d^2] / 4 (var >= 3/4 E[d^2], the error of E[d^2] grown at most 4/3);
 * otherwise (a first chunk unlike the rest, a non-finite sum) the variance
 * is a second pass around the mean, as ln_row takes it. The mean is K +
 * E[d] as hi + lo, and y = ((x - hi) - lo) inv w + b as in ln_row. f32
 * rows go two at a time in flight: the pass over row r chunk by chunk, each
 * chunk followed by 256 outputs of row r - 1, so that a row's writes
 * overlap the next row's reads instead of following them (0.9x the time).
 * bf16 rows, bound by their decoding and rounding rather than by memory,
 * were slower so (1.1x): one at a time, the next row prefetched while the
 * outputs are written. wb: w and b as f32 ([2n]; for bf16 rows each block
 * of 32 in even/odd order, ln_write_unit's), or NULL. */
KK__R512 void ln_rows(const void *x, const float *wb, void *y, int64_t n, double eps, int stream,
                      int hw, int64_t r0, int64_t r1, const int bf16) {
    ln_row_state rows[2];
    ln_row_state *prev = NULL;
    const int64_t units = (n + KK__ROW_CHUNK - 1) / KK__ROW_CHUNK;
    const int ub = KK__ROW_CHUNK * (bf16 ? 2 : 4); /* a chunk's bytes */
    /* Row r - 1's outputs are written k units ahead of the chunk of row r
     * being read, k such that those stores and the next loads of x differ
     * in their low 12 bits (4K aliasing: a load waits for an earlier store
     * whose address matches there): (y - x + (k - 1) ub) mod 4 KiB in
     * [1, 3] KiB. */
    int64_t k = 0;
    while (k < 3 &&
           ((((uintptr_t)y - (uintptr_t)x) + (uintptr_t)((k - 1) * ub)) & 4095) - 1024 > 2048)
        k++;
    for (int64_t r = r0; r < r1; r++) {
        ln_row_state *s = &rows[r & 1];
        const void *xr = kk__at(x, bf16, r * n);
        s->xr = xr;
        s->y = kk__at_mut(y, bf16, r * n);
        s->nt = stream && kk__st16_aligned(s->y, bf16);
        const char *next = r + 1 < r1 ? (const char *)kk__at(x, bf16, (r + 1) * n) : NULL;
        const float x0 = _mm512_cvtss_f32(kk__ld16(xr, bf16, 1));
        const int len0 = kk__row_chunk(n, 0);
        const float K = x0 + chunk_sum512(xr, len0, (mean2){x0, 0.0f}, 1, bf16) / (float)len0;
        double t1 = 0.0, t2 = 0.0;
        for (int64_t u = 0; u < units; u++) {
            const int64_t at = u * KK__ROW_CHUNK;
            if (!bf16 && next) /* the next row's chunk into L2 */
                for (int l = 0; l < ub; l += 64) _mm_prefetch(next + u * ub + l, _MM_HINT_T1);
            float s1, s2;
            chunk_stats512(kk__at(xr, bf16, at), kk__row_chunk(n, at), K, &s1, &s2, bf16);
            t1 += s1;
            t2 += s2;
            if (prev) ln_write_unit(prev, wb, n, (u + k) % units, hw, bf16);
        }
        const double m1 = t1 / (double)n, m2 = t2 / (double)n, mean = K + m1;
        s->mu = (mean2){(float)mean, (float)(mean - (double)(float)mean)};
        double var = m2 - m1 * m1;
        if (!(m1 * m1 <= 0.25 * m2 && m2 < __builtin_inf())) { /* the second pass */
            double t = 0.0;
            for (int64_t at = 0; at < n; at += KK__ROW_CHUNK)
                t += chunk_sum512(kk__at(xr, bf16, at), kk__row_chunk(n, at), s->mu, 2, bf16);
            var = t / (double)n;
        }
        s->inv = (float)(1.0 / sqrt(var + eps));
        prev = s;
        if (bf16) {
            for (int64_t u = 0; u < units; u++) {
                if (next)
                    for (int l = 0; l < ub; l += 64) _mm_prefetch(next + u * ub + l, _MM_HINT_T1);
                ln_write_unit(s, wb, n, u, hw, 1);
            }
            prev = NULL;
        }
    }
    for (int64_t u = 0; prev && u < units; u++) ln_write_unit(prev, wb, n, u, hw, bf16);
}

static KK__ROWS512_TARGET void ln_rows512(const void *x, const float *wb, void *y, int bf16,
                                          int64_t n, double eps, int stream, int hw, int64_t r0,
                                          int64_t r1) {
    if (bf16)
        ln_rows(x, wb, y, n, eps, stream, hw, r0, r1, 1);
    else
        ln_rows(x, wb, y, n, eps, stream, hw, r0, r1, 0);
}

/* The AVX-512 path: w and b as f32 (decoded once for bf16); 0 when they
 * cannot be (or a bf16 row has no room to be decoded). */
static int layernorm512(const void *x, const void *w, const void *b, void *y, kk_dtype dt,
                        int64_t rows, int64_t n, double eps) {
    const int bf16 = dt == KK_DTYPE_BF16, hw = kk__rows512_hw();
    const int threads = kk__cpu_threads();
    float *wb = w ? malloc((size_t)(2 * n) * sizeof(float)) : NULL;
    if (w && !wb) return 0;
    for (int64_t at = 0; wb && at < n; at += KK__ROW_CHUNK) { /* f32 too: one array */
        kk__row_load(w, dt, at, wb + at, kk__row_chunk(n, at));
        kk__row_load(b, dt, at, wb + n + at, kk__row_chunk(n, at));
    }
    for (int64_t i = 0; wb && bf16 && i + 32 <= n; i += 32) /* even/odd (ln_write_unit) */
        for (float *v = wb + i; v <= wb + n + i; v += n) {
            float t[32];
            for (int j = 0; j < 32; j++) t[j] = v[j];
            for (int j = 0; j < 16; j++) v[j] = t[2 * j], v[16 + j] = t[2 * j + 1];
        }
    const int stream_out = kk__row_streams(dt, rows * n);
#pragma omp parallel num_threads(threads)
    {
        const int me = kk__omp_thread(), team = kk__omp_threads();
        ln_rows512(x, wb, y, bf16, n, eps, stream_out, hw, rows * me / team,
                   rows * (me + 1) / team);
        if (stream_out) kk__row_stream_fence();
    }
    free(wb);
    return 1;
}
#endif

kk_status kk__layernorm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__LN_ROWS], n = p->i[KK__LN_N];
    const double eps = p->f[KK__LN_EPS];
    const int affine = (int)p->i[KK__LN_AFFINE];
    const kk_dtype dt = (kk_dtype)p->i[KK__LN_DTYPE];
    const void *x = t[0]->data, *w = affine ? t[1]->data : NULL, *b = affine ? t[2]->data : NULL;
    void *y = t[affine ? 3 : 1]->data;
#ifdef KK__ROWS512
    if (kk__rows512(dt) && layernorm512(x, w, b, y, dt, rows, n, eps)) return KK_OK;
#endif
    void (*const row)(const void *, const void *, const void *, const float *, void *, kk_dtype,
                      int64_t, double, int, float *, int64_t) = KK__ISA_PICK(ln_row);
    const int threads = kk__cpu_threads();
    /* per thread a decoded row; then w and b decoded once */
    float *keep = kk__row_buffers(dt, n, n, threads + 2);
    float *wb = keep && affine ? keep + threads * n : NULL;
    if (wb) {
        kk__row_f32(w, dt, 0, n, wb);
        kk__row_f32(b, dt, 0, n, wb + n);
    }
    const int stream_out = kk__row_streams(dt, rows * n);
#pragma omp parallel num_threads(threads)
    {
        float *mine = keep ? keep + (int64_t)kk__omp_thread() * n : NULL;
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++) row(x, w, b, wb, y, dt, n, eps, stream_out, mine, r);
        if (stream_out) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(keep);
    return KK_OK;
}

/* layernorm on the CPU: one row per OpenMP iteration, three passes over the
 * row in f32 chunks on the stack (cpu_rows.h): the mean (of x - x[0], the
 * shifted-data algorithm), the variance around it (two passes rather than
 * E[x^2] - mean^2, which cancels catastrophically when |mean| >> std), then
 * y. Chunk sums are f32 (vectorized), their totals f64. */
#include <math.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
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
        kk__row_load(x, dt, row * n + at, buf, m);
        float s = 0.0f;
        if (power == 1) {
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < m; i++) s += (buf[i] - mu.hi) - mu.lo;
        } else {
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < m; i++) {
                const float d = (buf[i] - mu.hi) - mu.lo;
                s += d * d;
            }
        }
        total += s;
    }
    return total;
}

/* y = (x - mean) * inv * w + b over the row (w, b NULL without affine). */
KK__ISA_INLINE void write_row(const void *x, const void *w, const void *b, void *y, kk_dtype dt,
                              int64_t row, int64_t n, mean2 mu, float inv) {
    float xb[KK__ROW_CHUNK], wb[KK__ROW_CHUNK], bb[KK__ROW_CHUNK];
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        kk__row_load(x, dt, row * n + at, xb, m);
        if (w) {
            kk__row_load(w, dt, at, wb, m);
            kk__row_load(b, dt, at, bb, m);
#pragma omp simd
            for (int i = 0; i < m; i++) xb[i] = ((xb[i] - mu.hi) - mu.lo) * inv * wb[i] + bb[i];
        } else {
#pragma omp simd
            for (int i = 0; i < m; i++) xb[i] = ((xb[i] - mu.hi) - mu.lo) * inv;
        }
        kk__row_store(y, dt, row * n + at, xb, m);
    }
}

/* One row: the mean of x - x[r,0] (sums of deviations, not of |mean|-sized
 * values), the variance around it, then y. */
KK__ISA_INLINE void ln_row(const void *x, const void *w, const void *b, void *y, kk_dtype dt,
                           int64_t n, double eps, int64_t r) {
    float x0;
    kk__row_load(x, dt, r * n, &x0, 1);
    const double mean = x0 + row_sum(x, dt, r, n, (mean2){x0, 0.0f}, 1) / (double)n;
    const mean2 mu = {(float)mean, (float)(mean - (double)(float)mean)};
    const double var = row_sum(x, dt, r, n, mu, 2) / (double)n;
    write_row(x, w, b, y, dt, r, n, mu, (float)(1.0 / sqrt(var + eps)));
}
KK__ISA_CLONES(ln_row,
               (const void *x, const void *w, const void *b, void *y, kk_dtype dt, int64_t n,
                double eps, int64_t r),
               (x, w, b, y, dt, n, eps, r))

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
    void (*const row)(const void *, const void *, const void *, void *, kk_dtype, int64_t, double,
                      int64_t) = KK__ISA_PICK(ln_row);
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t r = 0; r < rows; r++) row(x, w, b, y, dt, n, eps, r);
    return KK_OK;
}

/* rmsnorm on the CPU: y = x / sqrt(mean(x^2) + eps) * w, one row per OpenMP
 * iteration. Each row is read twice, in chunks converted to f32 on the stack
 * (cpu_rows.h): once for the sum of squares, once to write y. A chunk's sum is
 * f32 (vectorized); the chunks add up in f64, so a row of 2^24 elements loses
 * no more than a short one. */
#include <math.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/rmsnorm.h"

KK__ISA_INLINE double sum_squares(const void *x, kk_dtype dt, int64_t row, int64_t n) {
    float buf[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        kk__row_load(x, dt, row * n + at, buf, m);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < m; i++) s += buf[i] * buf[i];
        total += s;
    }
    return total;
}

/* One row: the sum of squares, then y = x r w. */
KK__ISA_INLINE void rms_row(const void *x, const void *w, void *y, kk_dtype dt, int64_t n,
                            double eps, int64_t r) {
    const float inv = (float)(1.0 / sqrt(sum_squares(x, dt, r, n) / (double)n + eps));
    float xb[KK__ROW_CHUNK], wb[KK__ROW_CHUNK];
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        kk__row_load(x, dt, r * n + at, xb, m);
        kk__row_load(w, dt, at, wb, m);
#pragma omp simd
        for (int i = 0; i < m; i++) xb[i] = xb[i] * inv * wb[i];
        kk__row_store(y, dt, r * n + at, xb, m);
    }
}
KK__ISA_CLONES(rms_row,
               (const void *x, const void *w, void *y, kk_dtype dt, int64_t n, double eps,
                int64_t r),
               (x, w, y, dt, n, eps, r))

kk_status kk__rmsnorm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__RMS_ROWS], n = p->i[KK__RMS_N];
    const double eps = p->f[KK__RMS_EPS];
    const kk_dtype dt = (kk_dtype)p->i[KK__RMS_DTYPE];
    const void *x = t[0]->data, *w = t[1]->data;
    void *y = t[2]->data;
    void (*const row)(const void *, const void *, void *, kk_dtype, int64_t, double, int64_t) =
        KK__ISA_PICK(rms_row);
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t r = 0; r < rows; r++) row(x, w, y, dt, n, eps, r);
    return KK_OK;
}

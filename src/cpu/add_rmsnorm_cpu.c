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

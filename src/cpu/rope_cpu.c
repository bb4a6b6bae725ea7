/* rope on the CPU. First a table of cos and sin for every (position, pair),
 * computed in f64 and rounded to f32 once: positions reach 2^24 + 2^20 and
 * angles 1.7e7 rad, where f32 values are 2 apart (at 10^6 rad, 1/16). The
 * table is [S][R/2] twice (S * R floats: no more elements than one batch-head
 * slab of x), allocated once per call, outside the loops. Then every row of
 * D elements, in parallel: loaded to f32 on the stack, rotated with plain
 * vectorizable loops, stored. */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/rope.h"

#define MAX_D 1024 /* the D parameter's maximum */

static void fill_table(float *cs, float *sn, int64_t S, int64_t R, int64_t offset, double theta) {
    const int64_t half = R / 2;
    double inv_freq[MAX_D / 2];
    for (int64_t i = 0; i < half; i++) inv_freq[i] = pow(theta, -2.0 * (double)i / (double)R);
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t s = 0; s < S; s++)
        for (int64_t i = 0; i < half; i++) {
            const double angle = (double)(offset + s) * inv_freq[i];
            cs[s * half + i] = (float)cos(angle);
            sn[s * half + i] = (float)sin(angle);
        }
}

/* (a, b) -> (a cos - b sin, b cos + a sin) for the R/2 pairs of one row. */
KK__ISA_INLINE void rotate(const float *x, float *y, const float *c, const float *s, int64_t half,
                           int gptj) {
    if (gptj) {
#pragma omp simd
        for (int64_t i = 0; i < half; i++) {
            const float a = x[2 * i], b = x[2 * i + 1];
            y[2 * i] = a * c[i] - b * s[i];
            y[2 * i + 1] = b * c[i] + a * s[i];
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < half; i++) {
            const float a = x[i], b = x[i + half];
            y[i] = a * c[i] - b * s[i];
            y[i + half] = b * c[i] + a * s[i];
        }
    }
}

/* One row of D elements at position s. */
KK__ISA_INLINE void rope_row(const void *x, void *y, kk_dtype dt, int64_t D, int64_t R,
                             const float *c, const float *sn, int gptj, int stream, int64_t row) {
    float xb[MAX_D], yb[MAX_D];
    kk__row_load(x, dt, row * D, xb, (int)D);
    rotate(xb, yb, c, sn, R / 2, gptj);
    for (int64_t d = R; d < D; d++) yb[d] = xb[d];
    if (stream)
        kk__row_store_stream(y, dt, row * D, yb, (int)D);
    else
        kk__row_store(y, dt, row * D, yb, (int)D);
}
KK__ISA_CLONES(rope_row,
               (const void *x, void *y, kk_dtype dt, int64_t D, int64_t R, const float *c,
                const float *sn, int gptj, int stream, int64_t row),
               (x, y, dt, D, R, c, sn, gptj, stream, row))

kk_status kk__rope_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t S = p->i[KK__ROPE_S], D = p->i[KK__ROPE_D], R = kk__rope_rotary_dim(p);
    const int64_t rows = p->i[KK__ROPE_B] * p->i[KK__ROPE_H] * S, half = R / 2;
    const int gptj = p->i[KK__ROPE_STYLE] == KK__ROPE_GPTJ;
    const kk_dtype dt = (kk_dtype)p->i[KK__ROPE_DTYPE];
    if (D > MAX_D || R > D)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope", "D", "1..1024, rotary_dim <= D",
                             "%lld", (long long)D);
    float *table = malloc((size_t)(2 * S * half + 1) * sizeof(float));
    if (!table)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "rope",
                         "no host memory for the cos/sin table of %lld positions", (long long)S);
    float *cs = table, *sn = table + S * half;
    fill_table(cs, sn, S, R, p->i[KK__ROPE_OFFSET], p->f[KK__ROPE_THETA]);
    const void *x = t[0]->data;
    void *y = t[1]->data;
    void (*const rotate_row)(const void *, void *, kk_dtype, int64_t, int64_t, const float *,
                             const float *, int, int, int64_t) = KK__ISA_PICK(rope_row);
    const int stream_out =
        (int64_t)kk_dtype_bytes(dt, (size_t)(rows * D)) >= KK__ROW_STREAM_MIN_BYTES;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
#pragma omp for schedule(static) nowait
        for (int64_t row = 0; row < rows; row++) {
            const int64_t s = row % S;
            rotate_row(x, y, dt, D, R, cs + s * half, sn + s * half, gptj, stream_out, row);
        }
        if (stream_out) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(table);
    return KK_OK;
}

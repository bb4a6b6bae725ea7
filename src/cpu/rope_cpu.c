/* rope on the CPU. First a table of cos and sin for every (position, pair),
 * computed in f64 and rounded to f32 once: positions reach 2^31 and angles
 * 1.7e7 rad and more, where f32 values are 2 apart (at 10^6 rad, 1/16). With
 * positions offset + s the table is [S][R/2] twice; with a pos tensor it is
 * one row per token, [B*S][R/2] twice (no more elements than x / H, and per
 * token rather than per distinct position: no sort, and a decode step's
 * tokens differ anyway). Then every row of D elements, in parallel: loaded
 * to f32 on the stack, rotated with plain vectorizable loops, stored. */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "cpu/rope_cpu.h"

kk_status kk__rope_cpu_table(const kk_op_params *p, const int64_t *pos, int64_t T, float **table) {
    const int64_t half = kk__rope_rotary_dim(p) / 2, offset = p->i[KK__ROPE_OFFSET];
    float *cs = malloc((size_t)(2 * T * half + 1) * sizeof(float));
    *table = cs;
    if (!cs)
        return kk__error(KK_ERR_OUT_OF_MEMORY, p->op ? p->op->name : "rope",
                         "no host memory for the cos/sin table of %lld positions", (long long)T);
    float *sn = cs + T * half;
    double inv_freq[KK__ROPE_MAX_D / 2];
    kk__rope_inv_freq(p, inv_freq);
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < half; i++) {
            const double angle = (double)(pos ? pos[t] : offset + t) * inv_freq[i];
            cs[t * half + i] = (float)cos(angle);
            sn[t * half + i] = (float)sin(angle);
        }
    return KK_OK;
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

/* One row of D elements at the position of table row (c, sn). */
KK__ISA_INLINE void rope_row(const void *x, int64_t xrow, void *y, int64_t yrow, kk_dtype dt,
                             int64_t D, int64_t R, const float *c, const float *sn, int gptj,
                             int stream) {
    float xb[KK__ROPE_MAX_D], yb[KK__ROPE_MAX_D];
    kk__row_load(x, dt, xrow * D, xb, (int)D);
    rotate(xb, yb, c, sn, R / 2, gptj);
    for (int64_t d = R; d < D; d++) yb[d] = xb[d];
    kk__row_put(y, dt, yrow * D, yb, (int)D, stream);
}
KK__ISA_CLONES(rope_row,
               (const void *x, int64_t xrow, void *y, int64_t yrow, kk_dtype dt, int64_t D,
                int64_t R, const float *c, const float *sn, int gptj, int stream),
               (x, xrow, y, yrow, dt, D, R, c, sn, gptj, stream))

kk__rope_row_fn kk__rope_cpu_row(void) { return KK__ISA_PICK(rope_row); }

kk_status kk__rope_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t S = p->i[KK__ROPE_S], D = p->i[KK__ROPE_D], R = kk__rope_rotary_dim(p);
    const int64_t HS = p->i[KK__ROPE_H] * S, rows = p->i[KK__ROPE_B] * HS, half = R / 2;
    const int gptj = p->i[KK__ROPE_STYLE] == KK__ROPE_GPTJ;
    const int given = p->i[KK__ROPE_POSITIONS] != 0;
    const kk_dtype dt = (kk_dtype)p->i[KK__ROPE_DTYPE];
    if (D > KK__ROPE_MAX_D || R > D)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope", "D", "1..1024, rotary_dim <= D",
                             "%lld", (long long)D);
    const int64_t T = given ? p->i[KK__ROPE_B] * S : S; /* table rows */
    int64_t *pos = NULL;
    if (given) {
        if (!(pos = malloc((size_t)T * sizeof *pos)))
            return kk__error(KK_ERR_OUT_OF_MEMORY, "rope", "no host memory for %lld positions",
                             (long long)T);
        const int32_t *in = t[1]->data;
        for (int64_t k = 0; k < T; k++) pos[k] = in[k];
    }
    float *table;
    st = kk__rope_cpu_table(p, pos, T, &table);
    free(pos);
    if (st != KK_OK) return st;
    const float *cs = table, *sn = table + T * half;
    const void *x = t[0]->data;
    void *y = t[given ? 2 : 1]->data;
    const kk__rope_row_fn rotate_row = kk__rope_cpu_row();
    const int stream_out = kk__row_streams(dt, rows * D);
#pragma omp parallel num_threads(kk__cpu_threads())
    {
#pragma omp for schedule(static) nowait
        for (int64_t row = 0; row < rows; row++) {
            const int64_t at = given ? row / HS * S + row % S : row % S; /* its table row */
            rotate_row(x, row, y, row, dt, D, R, cs + at * half, sn + at * half, gptj, stream_out);
        }
        if (stream_out) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(table);
    return KK_OK;
}

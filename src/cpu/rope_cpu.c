/* rope on the CPU. cos and sin of every (position, pair) are computed in
 * f64 and rounded to f32 once: positions reach 2^31 and angles 1.7e7 rad
 * and more, where f32 values are 2 apart (at 10^6 rad, 1/16). Each is a
 * function of the position alone (table_row), whether the position is
 * offset + s or read from a pos tensor. The rows are taken a block of
 * positions at a time (that block's table rows made first, then every
 * head's rows), rotated in f32 and stored; rope_kv_append borrows the
 * rotation and a whole table (rope_cpu.h). */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "cpu/rope_cpu.h"

/* cos and sin of p theta_i from p = hi + lo, lo = p mod 64: cos(hi + lo) =
 * cos hi cos lo - sin hi sin lo, in f64 from libm's values of hi theta and
 * lo theta (each angle rounded once, as p theta is), then rounded to f32.
 * The f64 sum is within a few units of 2^-53 of libm's cos(p theta), far
 * under f32's 2^-24, and it is a function of p alone (not of the batch or
 * offset), so a packed batch still equals its sequences bit for bit. It
 * takes a sincos per 64 positions and pair instead of one per position: at
 * S = 8192, R = 128 the table took a third of rope's time. */
#define ROPE_LO 64

/* cos, sin of the angles j theta_i, i < half. */
static void angles(int64_t j, const double *inv_freq, int64_t half, double *c, double *s) {
    for (int64_t i = 0; i < half; i++) {
        const double angle = (double)j * inv_freq[i];
        c[i] = cos(angle);
        s[i] = sin(angle);
    }
}

/* What a thread keeps between table rows: the hi angle's cos/sin (hi ==
 * last), and room for the lo angle's when there is no shared lo table. */
typedef struct rope_angles {
    double hc[KK__ROPE_MAX_D / 2], hs[KK__ROPE_MAX_D / 2];
    double lc[KK__ROPE_MAX_D / 2], ls[KK__ROPE_MAX_D / 2];
    int64_t last;
} rope_angles;

/* Table row (c, s) of position at; lo: [ROPE_LO][2][half] cos, sin of lo
 * theta, or NULL (computed here). table_row512 is the same code compiled
 * for AVX-512 (8 doubles a vector): the same bits, as ISO C contracts no
 * multiply-add into an FMA; at S = 8192, H = 32 the table took 6% of bf16
 * rope's time at the baseline ISA. */
static inline __attribute__((always_inline)) void table_row_body(int64_t at, const double *inv_freq,
                                                                 int64_t half, const double *lo,
                                                                 rope_angles *a, float *c,
                                                                 float *s) {
    const int64_t j = at & (ROPE_LO - 1), hi = at - j;
    if (hi != a->last) {
        angles(hi, inv_freq, half, a->hc, a->hs);
        a->last = hi;
    }
    const double *lc = a->lc, *ls = a->ls;
    if (lo) {
        lc = lo + j * 2 * half;
        ls = lc + half;
    } else {
        angles(j, inv_freq, half, a->lc, a->ls);
    }
    for (int64_t i = 0; i < half; i++) {
        c[i] = (float)(a->hc[i] * lc[i] - a->hs[i] * ls[i]);
        s[i] = (float)(a->hs[i] * lc[i] + a->hc[i] * ls[i]);
    }
}
static void table_row(int64_t at, const double *inv_freq, int64_t half, const double *lo,
                      rope_angles *a, float *c, float *s) {
    table_row_body(at, inv_freq, half, lo, a, c, s);
}
#ifdef KK__ROWS512
static KK__ROWS512_TARGET void table_row512(int64_t at, const double *inv_freq, int64_t half,
                                            const double *lo, rope_angles *a, float *c, float *s) {
    table_row_body(at, inv_freq, half, lo, a, c, s);
}
#endif

/* The shared lo table for T table rows (T >= ROPE_LO), else NULL; *bad on
 * no memory. Filled by lo_fill inside a parallel region (then a barrier). */
static double *lo_alloc(int64_t T, int64_t half, int *bad) {
    double *lo = T >= ROPE_LO ? malloc((size_t)(2 * ROPE_LO * half) * sizeof(double)) : NULL;
    *bad = T >= ROPE_LO && !lo;
    return lo;
}
static void lo_fill(double *lo, const double *inv_freq, int64_t half) {
#pragma omp for schedule(static)
    for (int64_t j = 0; j < ROPE_LO; j++)
        angles(j, inv_freq, half, lo + j * 2 * half, lo + j * 2 * half + half);
}

kk_status kk__rope_cpu_table(const kk_op_params *p, const int64_t *pos, int64_t T, float **table) {
    const int64_t half = kk__rope_rotary_dim(p) / 2, offset = p->i[KK__ROPE_OFFSET];
    int bad;
    float *cs = malloc((size_t)(2 * T * half + 1) * sizeof(float));
    double *lo = lo_alloc(T, half, &bad);
    *table = cs;
    if (!cs || bad) {
        free(lo);
        return kk__error(KK_ERR_OUT_OF_MEMORY, p->op ? p->op->name : "rope",
                         "no host memory for the cos/sin table of %lld positions", (long long)T);
    }
    float *sn = cs + T * half;
    double inv_freq[KK__ROPE_MAX_D / 2];
    kk__rope_inv_freq(p, inv_freq);
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        if (lo) lo_fill(lo, inv_freq, half);
        rope_angles a;
        a.last = INT64_MIN;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++)
            table_row(pos ? pos[t] : offset + t, inv_freq, half, lo, &a, cs + t * half,
                      sn + t * half);
    }
    free(lo);
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

/* One row of D elements at the position of table row (c, sn). f32 rows are
 * read in place. */
KK__ISA_INLINE void rope_row(const void *x, int64_t xrow, void *y, int64_t yrow, kk_dtype dt,
                             int64_t D, int64_t R, const float *c, const float *sn, int gptj,
                             int stream) {
    float xb[KK__ROPE_MAX_D], yb[KK__ROPE_MAX_D];
    const float *xv = kk__row_view(x, dt, xrow * D, xb, (int)D);
    rotate(xv, yb, c, sn, R / 2, gptj);
    for (int64_t d = R; d < D; d++) yb[d] = xv[d];
    kk__row_put(y, dt, yrow * D, yb, (int)D, stream);
}
KK__ISA_CLONES(rope_row,
               (const void *x, int64_t xrow, void *y, int64_t yrow, kk_dtype dt, int64_t D,
                int64_t R, const float *c, const float *sn, int gptj, int stream),
               (x, xrow, y, yrow, dt, D, R, c, sn, gptj, stream))

#ifdef KK__ROWS512
/* Pairs [i, i + 16) of a neox row (lanes past m untouched). */
KK__R512 void neox16(const void *x, void *y, int64_t half, const float *c, const float *sn,
                     int64_t i, __mmask16 m, int hw, int nt, const int bf16) {
    const __m512 a = kk__ld16(kk__at(x, bf16, i), bf16, m);
    const __m512 b = kk__ld16(kk__at(x, bf16, i + half), bf16, m);
    const __m512 cv = _mm512_maskz_loadu_ps(m, c + i), sv = _mm512_maskz_loadu_ps(m, sn + i);
    kk__st16(kk__at_mut(y, bf16, i), _mm512_fmsub_ps(a, cv, _mm512_mul_ps(b, sv)), bf16, hw, m, nt);
    kk__st16(kk__at_mut(y, bf16, i + half), _mm512_fmadd_ps(b, cv, _mm512_mul_ps(a, sv)), bf16, hw,
             m, nt);
}

/* Pairs [i, i + 32) of a bf16 neox row rounded by vcvtne2ps2bf16 (hw): a
 * 64-byte store per half. */
KK__R512 void neox32_hw(const void *x, void *y, int64_t half, const float *c, const float *sn,
                        int64_t i, int nt) {
    const __m512 a0 = kk__ld16(kk__at(x, 1, i), 1, 0xFFFF);
    const __m512 a1 = kk__ld16(kk__at(x, 1, i + 16), 1, 0xFFFF);
    const __m512 b0 = kk__ld16(kk__at(x, 1, i + half), 1, 0xFFFF);
    const __m512 b1 = kk__ld16(kk__at(x, 1, i + half + 16), 1, 0xFFFF);
    const __m512 c0 = _mm512_loadu_ps(c + i), c1 = _mm512_loadu_ps(c + i + 16);
    const __m512 s0 = _mm512_loadu_ps(sn + i), s1 = _mm512_loadu_ps(sn + i + 16);
    kk__st32_bf16(kk__at_mut(y, 1, i), _mm512_fmsub_ps(a0, c0, _mm512_mul_ps(b0, s0)),
                  _mm512_fmsub_ps(a1, c1, _mm512_mul_ps(b1, s1)), nt);
    kk__st32_bf16(kk__at_mut(y, 1, i + half), _mm512_fmadd_ps(b0, c0, _mm512_mul_ps(a0, s0)),
                  _mm512_fmadd_ps(b1, c1, _mm512_mul_ps(a1, s1)), nt);
}

/* rope_row at AVX-512: neox rows of f32 and bf16 in registers (the same
 * results as rope_row's up to the FMAs' rounding), any other row as
 * rope_row. */
KK__R512 void rope_body(const void *x, int64_t xrow, void *y, int64_t yrow, kk_dtype dt, int64_t D,
                        int64_t R, const float *c, const float *sn, int gptj, int stream,
                        const int hw) {
    const int bf16 = dt == KK_DTYPE_BF16, half = (int)(R / 2);
    if (gptj || (dt != KK_DTYPE_F32 && !bf16)) {
        rope_row(x, xrow, y, yrow, dt, D, R, c, sn, gptj, stream);
        return;
    }
    const void *xr = kk__at(x, bf16, xrow * D);
    void *yr = kk__at_mut(y, bf16, yrow * D);
    /* streamed only where both halves start aligned */
    const int nt = stream && kk__st16_aligned(yr, bf16) && half % 16 == 0;
    int i = 0;
    if (bf16) {
        if (hw)
            for (; i + 32 <= half; i += 32) neox32_hw(xr, yr, half, c, sn, i, nt);
        for (; i + 16 <= half; i += 16) neox16(xr, yr, half, c, sn, i, 0xFFFF, hw, nt, 1);
        if (i < half) neox16(xr, yr, half, c, sn, i, kk__m16(half - i), hw, 0, 1);
    } else {
        for (; i + 16 <= half; i += 16) neox16(xr, yr, half, c, sn, i, 0xFFFF, hw, nt, 0);
        if (i < half) neox16(xr, yr, half, c, sn, i, kk__m16(half - i), hw, 0, 0);
    }
    for (int64_t d = R; d < D; d += 16) { /* the dimensions past rotary_dim: copied */
        const __mmask16 m = kk__m16(D - d < 16 ? (int)(D - d) : 16);
        if (bf16)
            _mm256_mask_storeu_epi16(kk__at_mut(yr, 1, d), m,
                                     _mm256_maskz_loadu_epi16(m, kk__at(xr, 1, d)));
        else
            _mm512_mask_storeu_ps(kk__at_mut(yr, 0, d), m,
                                  _mm512_maskz_loadu_ps(m, kk__at(xr, 0, d)));
    }
}

static KK__ROWS512_TARGET void rope_row512(const void *x, int64_t xrow, void *y, int64_t yrow,
                                           kk_dtype dt, int64_t D, int64_t R, const float *c,
                                           const float *sn, int gptj, int stream) {
    rope_body(x, xrow, y, yrow, dt, D, R, c, sn, gptj, stream, 0);
}
static KK__ROWS512_TARGET void rope_row512_hw(const void *x, int64_t xrow, void *y, int64_t yrow,
                                              kk_dtype dt, int64_t D, int64_t R, const float *c,
                                              const float *sn, int gptj, int stream) {
    rope_body(x, xrow, y, yrow, dt, D, R, c, sn, gptj, stream, 1);
}

/* count consecutive neox rows from row (f32 or bf16, R = D, half a multiple
 * of 16), their table rows consecutive from c and sn (half apart), each
 * with a prefetch of the row `ahead` rows on (0: none). One call per block
 * of a head's rows: a call per row of 128 elements, with rope_body's
 * fallback set up in each, cost about a quarter of rope's time. */
KK__R512 void rope_rows_body(const void *x, void *y, int64_t row, int64_t count, int64_t half,
                             const float *c, const float *sn, int stream, int64_t ahead,
                             const int bf16, const int hw) {
    const int64_t D = 2 * half, rowb = D * (bf16 ? 2 : 4);
    for (int64_t k = 0; k < count; k++) {
        const void *xr = kk__at(x, bf16, (row + k) * D);
        void *yr = kk__at_mut(y, bf16, (row + k) * D);
        if (ahead)
            for (int64_t l = 0; l < rowb; l += 64)
                _mm_prefetch((const char *)xr + ahead * rowb + l, _MM_HINT_T1);
        const int nt = stream && kk__st16_aligned(yr, bf16);
        const float *ck = c + k * half, *sk = sn + k * half;
        int64_t i = 0;
        if (bf16 && hw)
            for (; i + 32 <= half; i += 32) neox32_hw(xr, yr, half, ck, sk, i, nt);
        for (; i < half; i += 16) neox16(xr, yr, half, ck, sk, i, 0xFFFF, hw, nt, bf16);
    }
}

static KK__ROWS512_TARGET void rope_rows512(const void *x, void *y, int64_t row, int64_t count,
                                            int64_t half, const float *c, const float *sn,
                                            int stream, int64_t ahead, int bf16, int hw) {
    if (!bf16)
        rope_rows_body(x, y, row, count, half, c, sn, stream, ahead, 0, 0);
    else if (hw)
        rope_rows_body(x, y, row, count, half, c, sn, stream, ahead, 1, 1);
    else
        rope_rows_body(x, y, row, count, half, c, sn, stream, ahead, 1, 0);
}
#endif

kk__rope_row_fn kk__rope_cpu_row(void) {
#ifdef KK__ROWS512
    if (kk__rows512_isa()) return kk__rows512_hw() ? rope_row512_hw : rope_row512;
#endif
    return KK__ISA_PICK(rope_row);
}

/* Rows are taken a block of positions at a time: the block's table rows
 * (ROPE_BLOCK x R floats, in L1) are made, then every head's rows of those
 * positions rotated. A table of all S positions made first was written to
 * memory (fresh pages each call) and read back once per head. */
#define ROPE_BLOCK 128

kk_status kk__rope_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t B = p->i[KK__ROPE_B], H = p->i[KK__ROPE_H], S = p->i[KK__ROPE_S];
    const int64_t D = p->i[KK__ROPE_D], R = kk__rope_rotary_dim(p), half = R / 2;
    const int64_t offset = p->i[KK__ROPE_OFFSET];
    const int gptj = p->i[KK__ROPE_STYLE] == KK__ROPE_GPTJ;
    const int given = p->i[KK__ROPE_POSITIONS] != 0;
    const kk_dtype dt = (kk_dtype)p->i[KK__ROPE_DTYPE];
    if (D > KK__ROPE_MAX_D || R > D)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope", "D", "1..1024, rotary_dim <= D",
                             "%lld", (long long)D);
    const int threads = kk__cpu_threads();
    /* per thread the table rows of one block; the lo table when it pays */
    int bad;
    float *rows_cs = malloc((size_t)(threads * 2 * ROPE_BLOCK * half + 1) * sizeof(float));
    double *lo = lo_alloc(given ? B * S : S, half, &bad);
    if (!rows_cs || bad) {
        free(rows_cs), free(lo);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "rope", "no host memory for the cos/sin table");
    }
    double inv_freq[KK__ROPE_MAX_D / 2];
    kk__rope_inv_freq(p, inv_freq);
    const int32_t *pos = given ? t[1]->data : NULL;
    const void *x = t[0]->data;
    void *y = t[given ? 2 : 1]->data;
    const kk__rope_row_fn rotate_row = kk__rope_cpu_row();
#ifdef KK__ROWS512
    const int rows512 = !gptj && R == D && half % 16 == 0 && kk__rows512(dt), hw = kk__rows512_hw();
#endif
    const int stream_out = kk__row_streams(dt, B * H * S * D);
    const int64_t blocks = (S + ROPE_BLOCK - 1) / ROPE_BLOCK;
    const int64_t rowb = (int64_t)kk_dtype_bytes(dt, (size_t)D);
#pragma omp parallel num_threads(threads)
    {
        if (lo) lo_fill(lo, inv_freq, half);
        float *cs = rows_cs + (int64_t)kk__omp_thread() * 2 * ROPE_BLOCK * half;
        float *sn = cs + ROPE_BLOCK * half;
        rope_angles a;
        a.last = INT64_MIN;
#pragma omp for schedule(static) nowait
        for (int64_t k = 0; k < B * blocks; k++) {
            const int64_t b = k / blocks, s0 = k % blocks * ROPE_BLOCK;
            const int64_t s1 = s0 + ROPE_BLOCK < S ? s0 + ROPE_BLOCK : S;
#ifdef KK__ROWS512
            if (rows512) { /* a head's rows of the block in one call */
                for (int64_t s = s0; s < s1; s++)
                    table_row512(given ? pos[b * S + s] : offset + s, inv_freq, half, lo, &a,
                                 cs + (s - s0) * half, sn + (s - s0) * half);
                for (int64_t h = 0; h < H; h++)
                    rope_rows512(x, y, (b * H + h) * S + s0, s1 - s0, half, cs, sn, stream_out,
                                 h + 1 < H ? S : 0, dt == KK_DTYPE_BF16, hw);
                continue;
            }
#endif
            for (int64_t s = s0; s < s1; s++)
                table_row(given ? pos[b * S + s] : offset + s, inv_freq, half, lo, &a,
                          cs + (s - s0) * half, sn + (s - s0) * half);
            for (int64_t h = 0; h < H; h++)
                for (int64_t s = s0; s < s1; s++) {
                    const int64_t row = (b * H + h) * S + s;
                    if (h + 1 < H) /* the next head's row: a new stream the prefetcher misses */
                        for (int64_t l = 0; l < rowb; l += 64)
                            __builtin_prefetch((const char *)x + (row + S) * rowb + l);
                    rotate_row(x, row, y, row, dt, D, R, cs + (s - s0) * half, sn + (s - s0) * half,
                               gptj, stream_out);
                }
        }
        if (stream_out) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(rows_cs), free(lo);
    return KK_OK;
}

/* Helpers for test_quant.c and test_cuda_quant.c: random inputs of several
 * kinds, one quantize + dequantize run on a device with every output brought
 * back to the host (outputs poisoned first), and the float64 checks of
 * docs/formats.md. Include after testutil.h. */
#ifndef KK_QUANT_TESTUTIL_H
#define KK_QUANT_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/memory.h"
#include "kernelkit/quant.h"

typedef enum qt_kind {
    QT_UNIFORM,     /* uniform in [-1, 1) */
    QT_WIDE,        /* +-(1..2) * 2^[-30, 30]: a huge dynamic range */
    QT_ZERO_BLOCKS, /* uniform, with whole 16-element runs and whole rows of zeros */
    QT_NEGATIVE     /* all negative, some exact zeros */
} qt_kind;

typedef struct qt_case {
    int64_t batch, rows, k;
    qt_kind kind;
} qt_case;

static uint64_t qt_state;

static inline void qt_seed(uint64_t s) { qt_state = s * 0x9E3779B97F4A7C15ull + 1; }

static inline uint64_t qt_next(void) { /* splitmix64 */
    uint64_t z = (qt_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double qt_uniform(void) { return (double)(qt_next() >> 11) * 0x1p-53; }

static inline void qt_fill(float *x, const qt_case *c) {
    const int64_t n = c->batch * c->rows * c->k;
    for (int64_t e = 0; e < n; e++) {
        const int64_t row = e / c->k, blk = (e % c->k) / 16;
        double u = 2.0 * qt_uniform() - 1.0;
        switch (c->kind) {
        case QT_WIDE:
            u = (u < 0 ? -1 : 1) * (1 + qt_uniform()) * ldexp(1.0, (int)(qt_next() % 61) - 30);
            break;
        case QT_ZERO_BLOCKS:
            if ((row * 7 + blk * 3) % 5 == 0 || row % 4 == 3) u = 0.0;
            break;
        case QT_NEGATIVE: u = qt_next() % 9 == 0 ? 0.0 : -fabs(u) * 10.0; break;
        default: break;
        }
        x[e] = (float)u;
    }
}

/* Everything a run produced, on the host. */
typedef struct qt_result {
    int64_t n;
    uint8_t *data, *scales;
    size_t data_bytes, scale_bytes;
    float global, amax;
    float *y32;
    uint16_t *ybf16, *yf16;
} qt_result;

static inline void qt_free(qt_result *r) {
    free(r->data);
    free(r->scales);
    free(r->y32);
    free(r->ybf16);
    free(r->yf16);
    memset(r, 0, sizeof *r);
}

/* A copy of the bytes of contiguous t on the host: raw bytes, so that the
 * unused high nibble of an odd-length e2m1 tensor is compared too. */
static inline uint8_t *qt_fetch(const kk_tensor *t, size_t *bytes) {
    *bytes = kk_tensor_nbytes(t);
    uint8_t *out = malloc(*bytes + 1);
    if (*bytes) kk_assert_ok(kk_mem_copy(out, "cpu", t->data, t->device, *bytes));
    return out;
}

/* Fill contiguous t with the byte 0xA5 (NaN for f32, a poison code everywhere). */
static inline void qt_poison(kk_tensor *t) {
    size_t bytes = kk_tensor_nbytes(t);
    void *p = malloc(bytes + 1);
    memset(p, 0xA5, bytes);
    if (bytes) kk_assert_ok(kk_mem_copy(t->data, t->device, p, "cpu", bytes));
    free(p);
}

/* x clamped to +-60000 where dtype is f16 (whose largest value is 65504), so
 * that wide-range inputs stay finite; a plain copy otherwise. */
static inline void qt_fit(const float *x, int64_t n, kk_dtype dtype, float *out) {
    for (int64_t e = 0; e < n; e++)
        out[e] = dtype == KK_DTYPE_F16 ? fmaxf(-60000.0f, fminf(60000.0f, x[e])) : x[e];
}

/* Quantize the f32 values x (converted to x_dtype first) on `device` into
 * `layout`, dequantize to f32, bf16 and f16; bring everything back. */
static inline void qt_run(const char *device, const float *x, const qt_case *c, kk_dtype qdtype,
                          kk_scale_layout layout, kk_dtype x_dtype, kk_fp8_amax_history *history,
                          qt_result *r) {
    const int64_t shape[3] = {c->batch, c->rows, c->k}, n = c->batch * c->rows * c->k;
    memset(r, 0, sizeof *r);
    r->n = n;
    void *xh = malloc((size_t)n * 4 + 1);
    kk_assert_ok(kk_convert_host(x, KK_DTYPE_F32, xh, x_dtype, (size_t)n));
    kk_tensor *xw, *xd;
    kk_assert_ok(kk_tensor_wrap("cpu", x_dtype, 3, shape, NULL, xh, &xw));
    kk_assert_ok(kk_tensor_create(device, x_dtype, 3, shape, &xd));
    kk_assert_ok(kk_tensor_copy(xd, xw));
    kk_qtensor q;
    kk_assert_ok(kk_qtensor_create(device, qdtype, layout, 3, shape, &q));
    qt_poison(q.data);
    qt_poison(q.scales);
    if (q.global_scale) qt_poison(q.global_scale);
    kk_quant_options opt = {history, &r->amax};
    kk_assert_ok(kk_quantize(xd, &q, &opt));
    r->data = qt_fetch(q.data, &r->data_bytes);
    r->scales = qt_fetch(q.scales, &r->scale_bytes);
    if (q.global_scale) {
        size_t b;
        uint8_t *g = qt_fetch(q.global_scale, &b);
        memcpy(&r->global, g, sizeof r->global);
        free(g);
    }
    const kk_dtype ydt[3] = {KK_DTYPE_F32, KK_DTYPE_BF16, KK_DTYPE_F16};
    void **yout[3] = {(void **)&r->y32, (void **)&r->ybf16, (void **)&r->yf16};
    for (int i = 0; i < 3; i++) {
        kk_tensor *y;
        size_t b;
        kk_assert_ok(kk_tensor_create(device, ydt[i], 3, shape, &y));
        qt_poison(y);
        kk_assert_ok(kk_dequantize(&q, y));
        *yout[i] = qt_fetch(y, &b);
        kk_tensor_destroy(y);
    }
    kk_qtensor_destroy(&q);
    kk_tensor_destroy(xd);
    kk_tensor_destroy(xw);
    free(xh);
}

/* ---- float64 references ---- */

static inline int qt_is_nvfp4(kk_scale_layout l) {
    return l == KK_SCALE_NVFP4 || l == KK_SCALE_NVFP4_BLOCKED;
}

/* max |x| over the scale block of (flat row r, block column cb). */
static inline double qt_block_amax(const float *x, const qt_case *c, kk_scale_layout layout,
                                   int64_t r, int64_t cb) {
    int64_t r0 = r, r1 = r + 1, k0 = 0, k1 = c->k;
    if (layout == KK_SCALE_PER_TENSOR) r0 = 0, r1 = c->batch * c->rows;
    if (layout == KK_SCALE_128X128) {
        const int64_t b = r / c->rows, i0 = (r % c->rows) / 128 * 128;
        r0 = b * c->rows + i0;
        r1 = b * c->rows + (i0 + 128 < c->rows ? i0 + 128 : c->rows);
    }
    if (layout != KK_SCALE_PER_TENSOR) {
        const int64_t w = qt_is_nvfp4(layout) ? 16 : 128;
        k0 = cb * w;
        k1 = k0 + w < c->k ? k0 + w : c->k;
    }
    double m = 0;
    for (int64_t i = r0; i < r1; i++)
        for (int64_t k = k0; k < k1; k++) m = fmax(m, fabs((double)x[i * c->k + k]));
    return m;
}

/* |deq - x| for fp8 with scale s: half a step of the format at x / s, i.e.
 * 2^-(m+1) |x| in the normal range (m = 3 for e4m3, 2 for e5m2) and half the
 * subnormal step times s below it; beyond the largest value (delayed scaling)
 * the distance to it. Plus 2^-20 relative for the f32 roundings. */
static inline double qt_fp8_bound(double x, double s, kk_dtype dt) {
    const int e4 = dt == KK_DTYPE_FP8_E4M3;
    const double rel = e4 ? 0x1p-4 : 0x1p-3, min_normal = e4 ? 0x1p-6 : 0x1p-14;
    const double sub_half = e4 ? 0x1p-10 : 0x1p-17, fmax_ = e4 ? 448.0 : 57344.0;
    const double ax = fabs(x), r = ax / s;
    double e = r > fmax_ ? ax - fmax_ * s : r >= min_normal ? rel * ax : sub_half * s;
    return e + 0x1p-20 * (ax + sub_half * s);
}

/* NVFP4 (docs/formats.md): with t = b / 6 / g the block scale s lies in
 * [slo, shi] (e4m3 rounding: +-2^-4 t for t >= 2^-6, +-2^-10 below, never
 * under 2^-9 when b > 0, never over 448); D = s g; an element x rounds to the
 * e2m1 grid at x / D, whose half-spacing h is 1/4 below 2, 1/2 below 4, 1 up
 * to 6; above 6 it saturates. So |deq - x| <= h(|x| / Dlo) * Dhi, or
 * max(Dhi, |x| - 6 Dlo) when |x| / Dlo > 6. */
static inline double qt_nvfp4_bound(double x, double b, double g) {
    if (b == 0) return 0;
    const double t = b / 6.0 / g, ax = fabs(x);
    double slo, shi;
    if (t >= 0x1p-6) {
        slo = t * (1 - 0x1p-4) * (1 - 0x1p-19);
        shi = t * (1 + 0x1p-4) * (1 + 0x1p-19);
    } else {
        slo = fmax(t - 0x1p-10, 0x1p-9);
        shi = fmax(t + 0x1p-10, 0x1p-9);
    }
    slo = fmin(slo, 448.0), shi = fmin(shi, 448.0);
    const double dlo = slo * g, dhi = shi * g, r = ax / dlo * (1 + 0x1p-20);
    double e = r <= 2 ? 0.25 * dhi : r <= 4 ? 0.5 * dhi : r <= 6 ? dhi : fmax(dhi, ax - 6 * dlo);
    return e + 0x1p-20 * (ax + dhi);
}

/* The stored scale of (flat row r, block column cb) as the multiplier it
 * stands for (NVFP4: the decoded block scale, without the global scale). */
static inline double qt_stored_scale(const qt_result *res, const qt_case *c, kk_scale_layout layout,
                                     int64_t r, int64_t cb) {
    const float *fs = (const float *)res->scales;
    const int64_t sc1 = (c->k + 127) / 128, sc16 = (c->k + 15) / 16;
    const int64_t b = r / c->rows, i = r % c->rows, rb = (c->rows + 127) / 128;
    switch (layout) {
    case KK_SCALE_PER_TENSOR: return fs[0];
    case KK_SCALE_1X128: return fs[r * sc1 + cb];
    case KK_SCALE_128X128: return fs[(b * rb + i / 128) * sc1 + cb];
    case KK_SCALE_NVFP4: return kk_e4m3_to_f32(res->scales[r * sc16 + cb]);
    default: return kk_e4m3_to_f32(res->scales[kk_nvfp4_blocked_offset(c->rows, sc16, b, i, cb)]);
    }
}

/* Every check of docs/formats.md on one result of quantizing f32 x. */
static inline void qt_check_result(const float *x, const qt_case *c, kk_dtype qdtype,
                                   kk_scale_layout layout, const qt_result *res) {
    const int nv = qt_is_nvfp4(layout);
    const double amax = qt_block_amax(x, c, KK_SCALE_PER_TENSOR, 0, 0);
    const double fmax_ = qdtype == KK_DTYPE_FP8_E4M3 ? 448.0 : 57344.0;
    assert_true(res->amax == (float)amax);
    const double g = nv ? (amax > 0 ? (double)(float)(amax / 2688.0) : 1.0) : 0.0;
    if (nv) assert_true(res->global == (float)g);
    const int64_t w = layout == KK_SCALE_PER_TENSOR ? c->k : nv ? 16 : 128;
    const int64_t cols = (c->k + w - 1) / w;
    double *tile = malloc((size_t)cols * sizeof *tile + 1); /* 128x128 amaxes of this row block */
    for (int64_t r = 0; r < c->batch * c->rows; r++)
        for (int64_t cb = 0; cb * w < c->k; cb++) {
            if (layout == KK_SCALE_128X128 && (r % c->rows) % 128 == 0)
                tile[cb] = qt_block_amax(x, c, layout, r, cb);
            const double b = layout == KK_SCALE_PER_TENSOR ? amax
                             : layout == KK_SCALE_128X128  ? tile[cb]
                                                           : qt_block_amax(x, c, layout, r, cb);
            const double s = qt_stored_scale(res, c, layout, r, cb);
            if (!nv) { /* f32 amax / fp8_max, correctly rounded (double rounding is exact here) */
                const double want = b > 0 ? (double)(float)(b / fmax_) : 1.0;
                if (s != want)
                    fail_msg("row %lld block %lld: scale %.9g, want %.9g", (long long)r,
                             (long long)cb, s, want);
            } else if (b == 0) {
                assert_true(s == 0.0);
            } else {
                const double t = b / 6.0 / g;
                const int ok = t >= 0x1p-6 ? fabs(s - t) <= 0x1p-4 * t * (1 + 0x1p-19)
                                           : fabs(s - t) <= 0x1p-10 * (1 + 0x1p-19) || s == 0x1p-9;
                if (!ok || s == 0)
                    fail_msg("row %lld block %lld: block scale %.9g for t %.9g", (long long)r,
                             (long long)cb, s, t);
            }
            for (int64_t k = cb * w; k < c->k && k < (cb + 1) * w; k++) {
                const int64_t e = r * c->k + k;
                const double xv = x[e], y = res->y32[e];
                const double bound = nv ? qt_nvfp4_bound(xv, b, g) : qt_fp8_bound(xv, s, qdtype);
                if (!(fabs(y - xv) <= bound))
                    fail_msg("%s %s element %lld: x %.9g deq %.9g error %.3g > bound %.3g (block "
                             "amax %.9g)",
                             kk_dtype_name(qdtype), kk_scale_layout_name(layout), (long long)e, xv,
                             y, fabs(y - xv), bound, b);
                assert_int_equal(res->ybf16[e], kk_f32_to_bf16(res->y32[e]));
                assert_int_equal(res->yf16[e], kk_f32_to_f16(res->y32[e]));
            }
        }
    free(tile);
}

/* Run one case on `device` (f32 input, then bf16 and f16 inputs, which must
 * give the same bits as f32 inputs holding the same values) and check it. */
static inline void qt_check_case(const char *device, const qt_case *c, kk_dtype qdtype,
                                 kk_scale_layout layout, unsigned seed) {
    const int64_t n = c->batch * c->rows * c->k;
    float *x = malloc((size_t)n * sizeof *x), *xr = malloc((size_t)n * sizeof *x);
    qt_seed(seed * 1000 + (unsigned)layout * 10 + (unsigned)qdtype);
    qt_fill(x, c);
    qt_result r, r16, r32;
    qt_run(device, x, c, qdtype, layout, KK_DTYPE_F32, NULL, &r);
    qt_check_result(x, c, qdtype, layout, &r);
    const kk_dtype narrow[2] = {KK_DTYPE_BF16, KK_DTYPE_F16};
    float *xn = malloc((size_t)n * sizeof *x);
    for (int i = 0; i < 2; i++) {
        uint16_t *h = malloc((size_t)n * 2 + 1);
        qt_fit(x, n, narrow[i], xn);
        kk_assert_ok(kk_convert_host(xn, KK_DTYPE_F32, h, narrow[i], (size_t)n));
        kk_assert_ok(kk_convert_host(h, narrow[i], xr, KK_DTYPE_F32, (size_t)n));
        qt_run(device, xn, c, qdtype, layout, narrow[i], NULL, &r16);
        qt_run(device, xr, c, qdtype, layout, KK_DTYPE_F32, NULL, &r32);
        assert_memory_equal(r16.data, r32.data, r16.data_bytes);
        assert_memory_equal(r16.scales, r32.scales, r16.scale_bytes);
        assert_memory_equal(r16.y32, r32.y32, (size_t)n * 4);
        qt_free(&r16);
        qt_free(&r32);
        free(h);
    }
    qt_free(&r);
    free(x);
    free(xn);
    free(xr);
}

#endif

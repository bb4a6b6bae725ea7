/* rmsnorm_fp8 on the CPU: y = rmsnorm(x) * w in f32 (rmsnorm_cpu.c's
 * arithmetic), then per group (or row) scale = amax / 448 and q = e4m3(y /
 * scale) by kk_quantize's arithmetic (core/quant_math.h) and the library's
 * e4m3 rounding (core/dtype_encode.h, inlined so that it vectorizes: 8x
 * faster than a call per element at AVX-512). So q and the scales are bit
 * for bit kk_quantize (1x128, or per tensor for a row) of kk_rmsnorm's f32
 * output. One row per OpenMP iteration; a group is walked twice, for its
 * amax and for its elements, y recomputed from x (two multiplies) rather
 * than stored. */
#include <math.h>

#include "core/dtype_encode.h"
#include "core/error.h"
#include "core/quant_math.h"
#include "core/threads.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "opdef/rmsnorm_fp8.h"

/* Bytes s[0..m) to d, the aligned 16-byte pieces with streaming stores. */
static void stream_bytes(uint8_t *d, const uint8_t *s, int m) {
#if defined(__x86_64__)
    int head = (int)((16 - ((uintptr_t)d & 15)) & 15);
    head = head > m ? m : head;
    memcpy(d, s, (size_t)head);
    int i = head;
    for (; i + 16 <= m; i += 16)
        _mm_stream_si128((__m128i *)(void *)(d + i),
                         _mm_loadu_si128((const __m128i *)(const void *)(s + i)));
    memcpy(d + i, s + i, (size_t)(m - i));
#else
    memcpy(d, s, (size_t)m);
#endif
}

/* y = x r w for elements [at, at + m) of a row (xs at offset xo, of xdt). */
KK__ISA_INLINE void y_chunk(const void *xs, kk_dtype xdt, int64_t xo, const void *w,
                            const float *wf, kk_dtype dt, int64_t at, int m, float inv, float *y) {
    float xb[KK__ROW_CHUNK], wb[KK__ROW_CHUNK];
    const float *xv = kk__row_view(xs, xdt, xo + at, xb, m);
    const float *wv = wf ? wf + at : kk__row_view(w, dt, at, wb, m);
#pragma omp simd
    for (int i = 0; i < m; i++) y[i] = xv[i] * inv * wv[i];
}

/* One row. keep: n floats of the thread's to decode x into once (NULL:
 * decoded per pass); wf: w as f32, or NULL. *bad |= a non-finite y. */
KK__ISA_INLINE void fp8_row(const void *x, const void *w, const float *wf, uint8_t *q,
                            float *scales, kk_dtype dt, int64_t n, int64_t group, double eps,
                            int stream, float *keep, int64_t r, int *bad) {
    const void *xs = keep ? kk__row_f32(x, dt, r, n, keep) : x;
    const kk_dtype xdt = keep ? KK_DTYPE_F32 : dt;
    const int64_t xo = keep ? 0 : r * n, ngroups = n / group;
    float yb[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        total += kk__chunk_sum_squares(kk__row_view(xs, xdt, xo + at, yb, m), m);
    }
    const float inv = (float)(1.0 / sqrt(total / (double)n + eps));
    for (int64_t g = 0; g < ngroups; g++) {
        const int64_t g0 = g * group, g1 = g0 + group;
        uint32_t amax = 0; /* |y| as bits: NaN and inf sort above every finite value */
        for (int64_t at = g0; at < g1; at += KK__ROW_CHUNK) {
            const int m = kk__row_chunk(g1, at);
            y_chunk(xs, xdt, xo, w, wf, dt, at, m, inv, yb);
#pragma omp simd reduction(max : amax)
            for (int i = 0; i < m; i++) {
                const uint32_t a = kk__f32_bits(yb[i]) & 0x7FFFFFFFu;
                amax = a > amax ? a : amax;
            }
        }
        *bad |= amax >= KK__F32_INF_BITS;
        const float scale = kk__fp8_scale(kk__bits_f32(amax), KK__E4M3_MAX);
        scales[r * ngroups + g] = scale;
        for (int64_t at = g0; at < g1; at += KK__ROW_CHUNK) {
            const int m = kk__row_chunk(g1, at);
            if (group > KK__ROW_CHUNK) y_chunk(xs, xdt, xo, w, wf, dt, at, m, inv, yb);
            uint8_t qb[KK__ROW_CHUNK];
            for (int i = 0; i < m; i++)
                qb[i] = kk__f32bits_to_e4m3(kk__f32_bits(kk__q_ratio(yb[i], scale)));
            if (stream)
                stream_bytes(q + r * n + at, qb, m);
            else
                memcpy(q + r * n + at, qb, (size_t)m);
        }
    }
}
KK__ISA_CLONES(fp8_row,
               (const void *x, const void *w, const float *wf, uint8_t *q, float *scales,
                kk_dtype dt, int64_t n, int64_t group, double eps, int stream, float *keep,
                int64_t r, int *bad),
               (x, w, wf, q, scales, dt, n, group, eps, stream, keep, r, bad))

#ifdef KK__ROWS512
/* kk__f32bits_to_e4m3 of 16 lanes, the same bytes (checked over all 2^32
 * floats) in 14 operations where its line-for-line form took 22: from
 * 2^-6 up, rounding the f32 bits to 3 mantissa bits (the carry moves the
 * exponent) and rebiasing; below, |v| 2^9 rounded to an integer is the
 * subnormal's code (8 at the top: the smallest normal). Codes above 0x7E
 * (448) saturate, NaN gives 0x7F. */
KK__R512 __m128i e4m3_16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_sub_epi32(
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x7FFFF)), lsb),
                          20),
        _mm512_set1_epi32((127 - 7) << 3));
    const __m512i sub =
        _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i code = _mm512_mask_blend_epi32(
        _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x3C800000)), sub, nrm); /* 2^-6 */
    code = _mm512_min_epu32(code, _mm512_set1_epi32(0x7E));
    code =
        _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80)));
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000)),
                                 _mm512_set1_epi32(0x7F));
    return _mm512_cvtepi32_epi8(code);
}

/* y = (x r) w for 16 lanes, 0 past m. */
KK__R512 __m512 y16(const void *x, const float *wf, __m512 inv, __mmask16 m, const int bf16) {
    return _mm512_mul_ps(_mm512_mul_ps(kk__ld16(x, bf16, m), inv), _mm512_maskz_loadu_ps(m, wf));
}

/* fp8_row at AVX-512 (f32, bf16): the same arithmetic (the sum of squares
 * in kk__chunk_sum_squares's order, y, amax, scale, the division and the
 * rounding), so the same bytes and scales. */
KK__R512 void fp8_body(const void *x, const float *wf, uint8_t *q, float *scales, int64_t n,
                       int64_t group, double eps, int stream, int64_t r, int *bad, const int bf16) {
    const void *xr = kk__at(x, bf16, r * n);
    uint8_t *qr = q + r * n;
    const __m512 inv =
        _mm512_set1_ps((float)(1.0 / sqrt(kk__sum_squares512(xr, bf16, n) / (double)n + eps)));
    const int nt = stream && ((uintptr_t)qr & 15u) == 0;
    /* a group of up to 256 keeps its y for the second walk, a longer one
     * recomputes them (two multiplies) */
    float yb[KK__ROW_CHUNK + 16];
    const int kept = group <= KK__ROW_CHUNK;
    const void *next = kk__at(xr, bf16, n);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t g1 = g0 + group;
        __m512i am = _mm512_setzero_si512(); /* |y| as bits: NaN and inf above every finite */
        for (int64_t i = g0; i < g1; i += 16) {
            const __mmask16 m = kk__m16(g1 - i < 16 ? (int)(g1 - i) : 16);
            const __m512 y = y16(kk__at(xr, bf16, i), wf + i, inv, m, bf16);
            if (kept) _mm512_storeu_ps(yb + (i - g0), y);
            am = _mm512_max_epu32(
                am, _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(0x7FFFFFFF)));
        }
        const uint32_t amax = _mm512_reduce_max_epu32(am);
        *bad |= amax >= KK__F32_INF_BITS;
        const float scale = kk__fp8_scale(kk__bits_f32(amax), KK__E4M3_MAX);
        scales[r * (n / group) + g0 / group] = scale;
        const __m512 sv = _mm512_set1_ps(scale); /* never 0: kk__q_ratio divides */
        for (int64_t i = g0; i < g1; i += 16) {
            const __mmask16 m = kk__m16(g1 - i < 16 ? (int)(g1 - i) : 16);
            kk__prefetch16(next, i, bf16);
            const __m512 y = kept ? _mm512_loadu_ps(yb + (i - g0))
                                  : y16(kk__at(xr, bf16, i), wf + i, inv, m, bf16);
            const __m128i b = e4m3_16(_mm512_div_ps(y, sv));
            if (nt && m == 0xFFFF && ((i & 15) == 0))
                _mm_stream_si128((__m128i *)(void *)(qr + i), b);
            else
                _mm_mask_storeu_epi8(qr + i, m, b);
        }
    }
}

static KK__ROWS512_TARGET void fp8_row512(const void *x, const float *wf, uint8_t *q, float *scales,
                                          int bf16, int64_t n, int64_t group, double eps,
                                          int stream, int64_t r, int *bad) {
    if (bf16)
        fp8_body(x, wf, q, scales, n, group, eps, stream, r, bad, 1);
    else
        fp8_body(x, wf, q, scales, n, group, eps, stream, r, bad, 0);
}
#endif

/* A non-finite y refuses the output, as kk_quantize does. */
static kk_status fp8_status(int bad) {
    if (bad)
        return kk__set_error(KK_ERR_QUANTIZATION, "rmsnorm_fp8", "x", "inf or NaN", "finite values",
                             NULL,
                             "rmsnorm(x) * w holds NaN or an infinity: it cannot be scaled into "
                             "fp8_e4m3 (q is unspecified), as kk_quantize refuses it");
    return KK_OK;
}

kk_status kk__rmsnorm_fp8_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__RFP8_ROWS], n = p->i[KK__RFP8_N];
    const int64_t group = kk__rmsnorm_fp8_group(p);
    const double eps = p->f[KK__RFP8_EPS];
    const kk_dtype dt = (kk_dtype)p->i[KK__RFP8_DTYPE];
    const void *x = t[0]->data, *w = t[1]->data;
    uint8_t *q = t[2]->data;
    float *scales = t[3]->data;
    void (*const row)(const void *, const void *, const float *, uint8_t *, float *, kk_dtype,
                      int64_t, int64_t, double, int, float *, int64_t, int *) =
        KK__ISA_PICK(fp8_row);
    const int threads = kk__cpu_threads();
    float *keep = kk__row_buffers(dt, n, n, threads + 1); /* as rmsnorm_cpu.c */
    const float *wf = keep ? kk__row_f32(w, dt, 0, n, keep + threads * n) : NULL;
    const int stream_out = rows * n >= KK__ROW_STREAM_MIN_BYTES;
    int bad = 0;
#ifdef KK__ROWS512
    if ((keep || dt == KK_DTYPE_F32) && kk__rows512(dt)) {
        const float *w32 = keep ? wf : (const float *)w;
        const int bf16 = dt == KK_DTYPE_BF16;
#pragma omp parallel num_threads(threads)
        {
            int mine_bad = 0;
#pragma omp for schedule(static) nowait
            for (int64_t r = 0; r < rows; r++)
                fp8_row512(x, w32, q, scales, bf16, n, group, eps, stream_out, r, &mine_bad);
            if (stream_out) kk__row_stream_fence();
            if (mine_bad) {
#pragma omp atomic write
                bad = 1;
            }
        }
        free(keep);
        return fp8_status(bad);
    }
#endif
#pragma omp parallel num_threads(threads)
    {
        float *mine = keep ? keep + (int64_t)kk__omp_thread() * n : NULL;
        int mine_bad = 0;
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++)
            row(x, w, wf, q, scales, dt, n, group, eps, stream_out, mine, r, &mine_bad);
        if (stream_out) kk__row_stream_fence();
        if (mine_bad) {
#pragma omp atomic write
            bad = 1;
        }
    }
    free(keep);
    return fp8_status(bad);
}

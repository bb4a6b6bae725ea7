/* Internal: AVX-512 pieces of the row kernels (rmsnorm, layernorm, softmax,
 * rope and the fused rows): 16 f32 or bf16 elements in a zmm register, loaded
 * and stored in place (no chunk copies on the stack), bf16 rounded in
 * registers and streamed 32 or 64 bytes at a time. The compiler-vectorized
 * chunk loops of cpu_rows.h spent 1.6 instructions an element on the copies
 * and the rounding alone. Only f32 and bf16: f16 rows keep the cpu_rows.h
 * clones. docs/backends/cpu.md, "Norms, softmax, rotary embeddings". */
#ifndef KK_CPU_ROWS_AVX512_H
#define KK_CPU_ROWS_AVX512_H

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KK__ROWS512 1

/* avx512bf16 is in the target only so that vcvtneps2bf16 compiles: it runs
 * only when hw (the level is avx512_bf16) says the CPU has it. avx512dq
 * (vreduceps, vfpclassps) is checked at run time by kk__rows512: every CPU
 * with BW and VL has it (Skylake-SP on, Zen 4), so none loses the path. */
#define KK__ROWS512_TARGET                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))
#define KK__R512 static inline __attribute__((always_inline)) KK__ROWS512_TARGET

/* Whether the code of this file may run: the level, and DQ. */
static inline int kk__rows512_isa(void) {
    return kk__cpu_isa() >= KK__ISA_AVX512 && __builtin_cpu_supports("avx512dq");
}

/* Whether the row kernels take their AVX-512 path: kk__rows512_isa, and a
 * dtype it handles (f32, bf16). */
static inline int kk__rows512(kk_dtype dt) {
    return (dt == KK_DTYPE_F32 || dt == KK_DTYPE_BF16) && kk__rows512_isa();
}

/* Whether bf16 is rounded by vcvtneps2bf16 (the CPU has AVX512_BF16). */
static inline int kk__rows512_hw(void) { return kk__cpu_isa() >= KK__ISA_AVX512_BF16; }

/* Lanes [0, m) of 16, m in 0..16. */
KK__R512 __mmask16 kk__m16(int m) { return (__mmask16)(m >= 16 ? 0xFFFFu : (1u << m) - 1u); }

/* 16 elements at p (f32, or bf16 when bf16) as f32; lanes past mask read 0. */
KK__R512 __m512 kk__ld16(const void *p, int bf16, __mmask16 mask) {
    if (!bf16) return _mm512_maskz_loadu_ps(mask, p);
    const __m256i h = _mm256_maskz_loadu_epi16(mask, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* kk__f32_bf16 of 16 floats: (u + 0x7FFF + lsb) >> 16, NaN quieted. */
KK__R512 __m256i kk__bf16_sw(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000)); /* (u >> 16) | 0x40 */
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

/* The same bits with vcvtneps2bf16 (hw), which rounds as kk__f32_bf16 and
 * quiets NaN the same way but reads subnormal inputs as zero: lanes that
 * vfpclassps finds subnormal (rare) take the integer rounding. Checked
 * against kk_f32_to_bf16 over all 2^32 floats. */
KK__R512 __m256i kk__bf16_16(__m512 v, int hw) {
    if (!hw) return kk__bf16_sw(v);
    const __m256i r = (__m256i)_mm512_cvtneps_pbh(v);
    const __mmask16 sub = _mm512_fpclass_ps_mask(v, 0x20); /* denormal */
    return sub ? _mm256_mask_blend_epi16(sub, r, kk__bf16_sw(v)) : r;
}

/* 16 floats to elements at p (f32, or bf16 rounded when bf16), lanes past
 * mask untouched; nt: a streaming store (p aligned to the store's size, a
 * full mask). */
KK__R512 void kk__st16(void *p, __m512 v, int bf16, int hw, __mmask16 mask, int nt) {
    if (!bf16) {
        if (nt && mask == 0xFFFF)
            _mm512_stream_ps((float *)p, v);
        else
            _mm512_mask_storeu_ps(p, mask, v);
        return;
    }
    const __m256i h = kk__bf16_16(v, hw);
    if (nt && mask == 0xFFFF)
        _mm256_stream_si256((__m256i *)p, h);
    else
        _mm256_mask_storeu_epi16(p, mask, h);
}

/* 32 floats (lo, then hi) rounded to bf16 by vcvtne2ps2bf16 (the level is
 * avx512_bf16), subnormal lanes as in kk__bf16_16, stored at p: streamed
 * when nt and p is 64-byte aligned. One 64-byte store instead of two of
 * 32: a streaming store of half a line cost Zen 4 more than the rounding. */
KK__R512 void kk__st32_bf16(void *p, __m512 lo, __m512 hi, int nt) {
    __m512i r = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    const __mmask16 sl = _mm512_fpclass_ps_mask(lo, 0x20), sh = _mm512_fpclass_ps_mask(hi, 0x20);
    if (sl | sh) /* rare: the integer rounding of both halves */
        r = _mm512_inserti64x4(_mm512_castsi256_si512(kk__bf16_sw(lo)), kk__bf16_sw(hi), 1);
    if (nt && !((uintptr_t)p & 63))
        _mm512_stream_si512((__m512i *)p, r);
    else
        _mm512_storeu_si512(p, r);
}

/* 32 bf16 elements at p (64 bytes) as f32, even elements (0, 2, ..., 30)
 * in *even and odd ones in *odd: a shift and an and, where kk__ld16 takes a
 * vpmovzxwd and a shift per 16. For passes whose order does not matter
 * (sums, maxima), or whose outputs kk__st32_bf16_eo puts back in order. */
KK__R512 void kk__ld32_bf16_eo(const void *p, __m512 *even, __m512 *odd) {
    const __m512i w = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* The vpermw index of kk__st32_bf16_eo: word i of the result is element i,
 * which the rounded halves (16 even elements, then 16 odd) hold at word
 * i / 2 + 16 (i & 1). */
KK__R512 __m512i kk__eo_index(void) {
    static const uint16_t idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                     8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    return _mm512_loadu_si512(idx);
}

/* 32 outputs from their even and odd elements, rounded to bf16 as
 * kk__st32_bf16 rounds (vcvtne2ps2bf16 where hw, subnormal lanes and the
 * avx512 level by the integer path), put back in order by one vpermw (idx:
 * kk__eo_index) and stored at p, streamed when nt and p is 64-byte
 * aligned: the same bytes as kk__st32_bf16 of the elements in order. */
KK__R512 void kk__st32_bf16_eo(void *p, __m512 even, __m512 odd, __m512i idx, int hw, int nt) {
    __m512i r;
    if (hw && !(_mm512_fpclass_ps_mask(even, 0x20) | _mm512_fpclass_ps_mask(odd, 0x20)))
        r = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
    else
        r = _mm512_inserti64x4(_mm512_castsi256_si512(kk__bf16_sw(even)), kk__bf16_sw(odd), 1);
    r = _mm512_permutexvar_epi16(idx, r);
    if (nt && !((uintptr_t)p & 63))
        _mm512_stream_si512((__m512i *)p, r);
    else
        _mm512_storeu_si512(p, r);
}

/* kk__st32_bf16_eo where a value under 2^-126 (an f32 subnormal) may be
 * written as 0: at hw, vcvtne2ps2bf16 alone (it reads subnormal inputs as
 * zero), without the per-store vfpclassps test and fallback, about a fifth
 * of a softmax output's cost. For outputs whose tolerance has an absolute
 * floor far above 2^-126 (softmax: atol 1e-6); every other value gets the
 * same bits. Below hw the integer rounding, as kk__st32_bf16_eo. */
KK__R512 void kk__st32_bf16_eo_ftz(void *p, __m512 even, __m512 odd, __m512i idx, int hw, int nt) {
    if (!hw) {
        kk__st32_bf16_eo(p, even, odd, idx, hw, nt);
        return;
    }
    const __m512i r = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(odd, even));
    if (nt && !((uintptr_t)p & 63))
        _mm512_stream_si512((__m512i *)p, r);
    else
        _mm512_storeu_si512(p, r);
}

/* Whether a row starting at p can be streamed 16 elements at a time. */
static inline int kk__st16_aligned(const void *p, int bf16) {
    return ((uintptr_t)p & (bf16 ? 31u : 63u)) == 0;
}

/* In a loop over a row's elements 16 at a time, at element i: a prefetch
 * of the next row's line at i (next: that row's start). Put in the pass
 * that writes a row, it overlaps the next row's reads with this row's
 * writes; without it one thread alternated between reading and writing
 * memory, 10% slower in rmsnorm. */
KK__R512 void kk__prefetch16(const void *next, int64_t i, const int bf16) {
    if (!((i * (bf16 ? 2 : 4)) & 63))
        _mm_prefetch((const char *)next + i * (bf16 ? 2 : 4), _MM_HINT_T1);
}

/* The horizontal sum of 16 lanes halved 8, 4, 2, 1 (lane[l] += lane[l + w]):
 * kk__chunk_sum_squares's final order. */
KK__R512 float kk__hsum16(__m512 a) {
    const __m256 a8 =
        _mm256_add_ps(_mm512_castps512_ps256(a),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m128 a4 = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));
    const __m128 a2 = _mm_add_ps(a4, _mm_movehl_ps(a4, a4));
    return _mm_cvtss_f32(_mm_add_ss(a2, _mm_shuffle_ps(a2, a2, 1)));
}

/* The row's element pointer at element `at`. */
static inline const void *kk__at(const void *p, int bf16, int64_t at) {
    return (const char *)p + at * (bf16 ? 2 : 4);
}
static inline void *kk__at_mut(void *p, int bf16, int64_t at) {
    return (char *)p + at * (bf16 ? 2 : 4);
}

/* kk__chunk_sum_squares of n elements at x, chunk by chunk (256, the last
 * shorter), totals in f64: the same bits. In row order: interleaving four
 * chunks to hide the adds' latency (tried) was slower, the prefetcher
 * follows one stream better, and memory, not the adds, bounds the pass. */
KK__R512 double kk__sum_squares512(const void *x, int bf16, int64_t n) {
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(n, at);
        __m512 a = _mm512_setzero_ps();
        int i = 0;
        for (; i + 16 <= m; i += 16) {
            const __m512 v = kk__ld16(kk__at(x, bf16, at + i), bf16, 0xFFFF);
            a = _mm512_add_ps(a, _mm512_mul_ps(v, v));
        }
        if (i < m) { /* the other lanes add +0: the same bits as the scalar tail */
            const __m512 v = kk__ld16(kk__at(x, bf16, at + i), bf16, kk__m16(m - i));
            a = _mm512_add_ps(a, _mm512_mul_ps(v, v));
        }
        total += kk__hsum16(a);
    }
    return total;
}

/* e^t for 16 lanes (softmax, silu_mul): softmax_cpu.c's exp_nonpositive's
 * Cody-Waite reduction and
 * Cephes' polynomial in Horner's form on FMAs, then 2^k by vscalefps,
 * which also rounds results under 2^-126 to subnormals or 0 (0 below -110)
 * and keeps NaN: 14 operations where exp_nonpositive compiles to about 25. */
KK__R512 __m512 kk__exp512(__m512 t) {
    t = _mm512_max_ps(_mm512_set1_ps(-110.0f), t); /* a NaN t is the second operand: kept */
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), t);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 q = _mm512_set1_ps(1.9875691500e-4f);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.3981999507e-3f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.3334519073e-3f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.1665795894e-2f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.6666665459e-1f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(5.0000001201e-1f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f)); /* 1 + r + r^2 P(r) */
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(q, k);
}

/* 2^u for 16 lanes, u = t log2(e) rounded once (softmax's f32 rows): 2^(u -
 * k), k = round(u), by a degree-6 minimax fit on [-1/2, 1/2] (relative
 * error 1.9e-9, so the FMAs' rounding dominates), 2^k by vscalefps. u's
 * rounding adds u|t| to the error, which stays relative to t: y(1 + e),
 * |e| <= u(3|t| + 6), 3e-6 for every y above 1e-6. f = u - k by vreduceps
 * (exact, as the subtraction was), which gives 0 for an infinite u, so u =
 * -inf needs no clamp: 2^-inf scales to 0 (and +inf to +inf); a NaN stays
 * NaN. 9 operations; the same bits as the clamped form for every u but +inf
 * (which was NaN). */
KK__R512 __m512 kk__exp2_f32(__m512 u) {
    const __m512 k = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 q = _mm512_set1_ps(1.5345812007e-4f);
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.3399931219e-3f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.6184889571e-3f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.5503287770e-2f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.4022646891e-1f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.9314720574e-1f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0000000006e+0f));
    return _mm512_scalef_ps(q, k);
}

/* 2^u for 16 lanes of rows rounded to bf16 after, u = t log2(e) rounded once: 2^(u - k),
 * k = round(u), by a degree-4 fit on [-1/2, 1/2] (relative error 3.5e-6),
 * plus u's own rounding (at most 8e-6 relative for the y above 2^-126):
 * 1/250 of the bf16 rounding's 2^-9 that follows. f by vreduceps as in
 * kk__exp2_f32 (no clamp). 7 operations. */
KK__R512 __m512 kk__exp2_bf16(__m512 u) {
    const __m512 k = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 q = _mm512_set1_ps(9.6663685154e-3f);
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.5921975842e-2f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.4022349038e-1f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.9312104520e-1f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(q, k);
}

#endif
#endif

/* The attention micro-kernels with AVX2 + FMA, chosen at run time: the
 * library is built for baseline x86-64 and -std=c11 turns off FMA contraction,
 * so the hot loops use intrinsics in functions compiled for avx2,fma. The
 * product kernel holds a 6 x 16 tile of C in 12 registers: 12 FMAs for 8
 * loads, so the FMA units set the pace. docs/backends/cpu.md, "Attention". */
#include "cpu/attention_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <math.h>

#define TARGET __attribute__((target("avx2,fma")))
#define MR 6 /* rows of tile6 */

/* C[6,16] (= diag(alpha) C) + A[6,k] B[k,16]. Named variables, not arrays:
 * GCC keeps an array of __m256 on the stack and stores it every step. */
#define ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
TARGET static inline void tile6(float *c, int64_t ldc, const float *a, int64_t ars, int64_t aks,
                                const float *b, int64_t ldb, int k, const float *alpha) {
#define DECL(r) __m256 lo##r = _mm256_setzero_ps(), hi##r = _mm256_setzero_ps();
#define SCALE(r)                                                                                   \
    lo##r = _mm256_mul_ps(_mm256_loadu_ps(c + r * ldc), _mm256_broadcast_ss(alpha + r));           \
    hi##r = _mm256_mul_ps(_mm256_loadu_ps(c + r * ldc + 8), _mm256_broadcast_ss(alpha + r));
#define STEP(r)                                                                                    \
    {                                                                                              \
        const __m256 ar = _mm256_broadcast_ss(ak + r * ars);                                       \
        lo##r = _mm256_fmadd_ps(ar, b0, lo##r);                                                    \
        hi##r = _mm256_fmadd_ps(ar, b1, hi##r);                                                    \
    }
#define STORE(r)                                                                                   \
    _mm256_storeu_ps(c + r * ldc, lo##r);                                                          \
    _mm256_storeu_ps(c + r * ldc + 8, hi##r);
    ROWS6(DECL)
    if (alpha) {
        ROWS6(SCALE)
    }
    for (int kk = 0; kk < k; kk++) {
        const float *ak = a + kk * aks;
        const __m256 b0 = _mm256_loadu_ps(b + kk * ldb), b1 = _mm256_loadu_ps(b + kk * ldb + 8);
        ROWS6(STEP)
    }
    ROWS6(STORE)
#undef DECL
#undef SCALE
#undef STEP
#undef STORE
}

/* One row: the rows left over after the 6-row tiles. */
TARGET static inline void tile1(float *c, const float *a, int64_t aks, const float *b, int64_t ldb,
                                int k, const float *alpha) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    if (alpha) {
        const __m256 s = _mm256_broadcast_ss(alpha);
        lo = _mm256_mul_ps(_mm256_loadu_ps(c), s);
        hi = _mm256_mul_ps(_mm256_loadu_ps(c + 8), s);
    }
    for (int kk = 0; kk < k; kk++) {
        const __m256 ar = _mm256_broadcast_ss(a + kk * aks);
        lo = _mm256_fmadd_ps(ar, _mm256_loadu_ps(b + kk * ldb), lo);
        hi = _mm256_fmadd_ps(ar, _mm256_loadu_ps(b + kk * ldb + 8), hi);
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
}

/* Column strips outside, row tiles inside: the k x 16 strip of B stays in L1
 * while every row of A passes over it. */
TARGET static void gemm_avx2(float *c, int64_t ldc, const float *a, int64_t ars, int64_t aks,
                             const float *b, int64_t ldb, int m, int n, int k, const float *alpha) {
    for (int j0 = 0; j0 < n; j0 += KK__ATT_NT) {
        int i = 0;
        for (; i + MR <= m; i += MR)
            tile6(c + i * ldc + j0, ldc, a + i * ars, ars, aks, b + j0, ldb, k,
                  alpha ? alpha + i : NULL);
        for (; i < m; i++)
            tile1(c + i * ldc + j0, a + i * ars, aks, b + j0, ldb, k, alpha ? alpha + i : NULL);
    }
}

TARGET static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lanes j < n of a tail load: all ones where j < n. */
TARGET static inline __m256i tail_mask(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 lanes = _mm256_cvtepi32_ps(idx);
    return _mm256_castps_si256(_mm256_cmp_ps(lanes, _mm256_set1_ps((float)n), _CMP_LT_OQ));
}

/* The vector twin of attention_cpu_generic.c's exp2_poly: same clamp, same
 * rounding trick, same polynomial, so both paths give the same weights. */
TARGET static inline __m256 exp2_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-127.0f)); /* -inf and NaN become -127 */
    x = _mm256_min_ps(x, _mm256_set1_ps(127.0f));
    const __m256 magic = _mm256_set1_ps(KK__ATT_EXP2_MAGIC);
    const __m256 t = _mm256_add_ps(x, magic); /* round(x) + 127 in the low bits */
    const __m256 r = _mm256_sub_ps(x, _mm256_sub_ps(t, magic));
    __m256 p = _mm256_set1_ps(KK__ATT_EXP2_C5);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KK__ATT_EXP2_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KK__ATT_EXP2_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KK__ATT_EXP2_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KK__ATT_EXP2_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^round(x): round(x) + 127 shifted into the exponent field (0 for -127) */
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(t), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

TARGET static float exp2_sum_avx2(float *x, int n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (j < n) {
        const __m256i mask = tail_mask(n - j);
        const __m256 e = _mm256_and_ps(exp2_ps(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vm)),
                                       _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(x + j, mask, e);
        sum = _mm256_add_ps(sum, e);
    }
    return hsum(sum);
}

/* 8 queries at a time: a column of s per lane, a key per step. */
TARGET static void softmax_avx2(float *s, int64_t lds, int nk, int n, float *m, float *sum_out,
                                float *alpha) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int c = 0; c < n; c += 8) {
        const __m256 m_old = _mm256_loadu_ps(m + c);
        __m256 mx = m_old;
        for (int j = 0; j < nk; j++) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j * lds + c));
        /* a query that has seen nothing keeps -inf; subtracting 0 keeps its weights 0 */
        const __m256 base =
            _mm256_blendv_ps(mx, _mm256_setzero_ps(), _mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ));
        const __m256 al = exp2_ps(_mm256_sub_ps(m_old, base));
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < nk; j++) {
            const __m256 p = exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j * lds + c), base));
            _mm256_storeu_ps(s + j * lds + c, p);
            sum = _mm256_add_ps(sum, p);
        }
        _mm256_storeu_ps(sum_out + c, sum);
        _mm256_storeu_ps(m + c, mx);
        _mm256_storeu_ps(alpha + c, al);
    }
}

static const kk__att_kernels avx2_fma = {
    .name = "avx2+fma", .gemm = gemm_avx2, .softmax = softmax_avx2, .exp2_sum = exp2_sum_avx2};

const kk__att_kernels *kk__att_kernels_avx2_fma(void) {
    return kk__cpu_isa_supported() >= KK__ISA_AVX2 ? &avx2_fma : NULL;
}

#else

const kk__att_kernels *kk__att_kernels_avx2_fma(void) { return NULL; }

#endif

/* The attention micro-kernels with AVX-512 (F, BW, VL), chosen at run time
 * like the AVX2 ones (attention_cpu_avx2.c). 32 vector registers hold a
 * 12 x 32 tile of C in 24 of them: per step 2 loads of B and 12 broadcasts of
 * A feed 24 FMAs of 16 lanes, against 8 loads for 12 FMAs of 8 lanes in the
 * AVX2 tile. The softmax takes 16 queries per vector. Same exp2 polynomial and
 * rounding trick as the other paths, so all give the same weights up to FMA
 * contraction. docs/backends/cpu.md, "Attention" and "Instruction sets". */
#include "cpu/attention_cpu.h"
#include "cpu/cpu_isa.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

/* The tile's rows, as named variables (GCC keeps an array of vectors on the
 * stack and stores it every step). */
#define ROWS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ROWS4(X) X(0) X(1) X(2) X(3)

/* C[R, 16 * W] (= diag(alpha) C) + A[R, k] B[k, 16 * W] for W = 2 (lo, hi
 * vectors) or 1 (lo only), R rows listed by ROWS. */
#define TILE_FN(name, ROWS, W)                                                                     \
    TARGET static inline void name(float *c, int64_t ldc, const float *a, int64_t ars,             \
                                   int64_t aks, const float *b, int64_t ldb, int k,                \
                                   const float *alpha) {                                           \
        ROWS(DECL##W)                                                                              \
        if (alpha) {                                                                               \
            ROWS(SCALE##W)                                                                         \
        }                                                                                          \
        for (int kk = 0; kk < k; kk++) {                                                           \
            const float *ak = a + kk * aks;                                                        \
            LOADB##W ROWS(STEP##W)                                                                 \
        }                                                                                          \
        ROWS(STORE##W)                                                                             \
    }
#define DECL1(r) __m512 lo##r = _mm512_setzero_ps();
#define DECL2(r) DECL1(r) __m512 hi##r = _mm512_setzero_ps();
#define LOADB1 const __m512 b0 = _mm512_loadu_ps(b + kk * ldb);
#define LOADB2 LOADB1 const __m512 b1 = _mm512_loadu_ps(b + kk * ldb + 16);
#define SCALE1(r) lo##r = _mm512_mul_ps(_mm512_loadu_ps(c + r * ldc), _mm512_set1_ps(alpha[r]));
#define SCALE2(r)                                                                                  \
    SCALE1(r) hi##r = _mm512_mul_ps(_mm512_loadu_ps(c + r * ldc + 16), _mm512_set1_ps(alpha[r]));
#define STEP1(r) lo##r = _mm512_fmadd_ps(_mm512_set1_ps(ak[r * ars]), b0, lo##r);
#define STEP2(r)                                                                                   \
    {                                                                                              \
        const __m512 ar = _mm512_set1_ps(ak[r * ars]);                                             \
        lo##r = _mm512_fmadd_ps(ar, b0, lo##r);                                                    \
        hi##r = _mm512_fmadd_ps(ar, b1, hi##r);                                                    \
    }
#define STORE1(r) _mm512_storeu_ps(c + r * ldc, lo##r);
#define STORE2(r) STORE1(r) _mm512_storeu_ps(c + r * ldc + 16, hi##r);
#define ROWS1(X) X(0)

TILE_FN(tile12x32, ROWS12, 2)
TILE_FN(tile12x16, ROWS12, 1)
TILE_FN(tile4x32, ROWS4, 2)
TILE_FN(tile4x16, ROWS4, 1)
TILE_FN(tile1x32, ROWS1, 2)
TILE_FN(tile1x16, ROWS1, 1)

/* Column strips of 32 (one of 16 at the end) outside, row tiles inside: the
 * k x 32 strip of B stays in L1 while every row of A passes over it. */
TARGET static void gemm_avx512(float *c, int64_t ldc, const float *a, int64_t ars, int64_t aks,
                               const float *b, int64_t ldb, int m, int n, int k,
                               const float *alpha) {
    for (int j0 = 0; j0 < n; j0 += 32) {
        const int wide = n - j0 >= 32;
        float *cj = c + j0;
        const float *bj = b + j0;
        int i = 0;
        for (; i + 12 <= m; i += 12)
            (wide ? tile12x32 : tile12x16)(cj + i * ldc, ldc, a + i * ars, ars, aks, bj, ldb, k,
                                           alpha ? alpha + i : NULL);
        for (; i + 4 <= m; i += 4)
            (wide ? tile4x32 : tile4x16)(cj + i * ldc, ldc, a + i * ars, ars, aks, bj, ldb, k,
                                         alpha ? alpha + i : NULL);
        for (; i < m; i++)
            (wide ? tile1x32 : tile1x16)(cj + i * ldc, ldc, a + i * ars, ars, aks, bj, ldb, k,
                                         alpha ? alpha + i : NULL);
    }
}

/* The vector twin of attention_cpu_generic.c's exp2_poly. */
TARGET static inline __m512 exp2_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f)); /* -inf and NaN become -127 */
    x = _mm512_min_ps(x, _mm512_set1_ps(127.0f));
    const __m512 magic = _mm512_set1_ps(KK__ATT_EXP2_MAGIC);
    const __m512 t = _mm512_add_ps(x, magic); /* round(x) + 127 in the low bits */
    const __m512 r = _mm512_sub_ps(x, _mm512_sub_ps(t, magic));
    __m512 p = _mm512_set1_ps(KK__ATT_EXP2_C5);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KK__ATT_EXP2_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KK__ATT_EXP2_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KK__ATT_EXP2_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KK__ATT_EXP2_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(t), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

TARGET static float exp2_sum_avx512(float *x, int n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        const __mmask16 mask = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        const __m512 e = exp2_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + j), vm));
        _mm512_mask_storeu_ps(x + j, mask, e);
        sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, e));
    }
    return _mm512_reduce_add_ps(sum);
}

/* 16 queries at a time (n is a multiple of 8: a last group of 8 is masked). */
TARGET static void softmax_avx512(float *s, int64_t lds, int nk, int n, float *m, float *sum_out,
                                  float *alpha) {
    for (int c = 0; c < n; c += 16) {
        const __mmask16 lanes = n - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)0x00FF;
        const __m512 m_old = _mm512_maskz_loadu_ps(lanes, m + c);
        __m512 mx = m_old;
        for (int j = 0; j < nk; j++)
            mx = _mm512_max_ps(mx, _mm512_maskz_loadu_ps(lanes, s + j * lds + c));
        /* a query that has seen nothing keeps -inf; subtracting 0 keeps its weights 0 */
        const __mmask16 none = _mm512_cmp_ps_mask(mx, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
        const __m512 base = _mm512_mask_mov_ps(mx, none, _mm512_setzero_ps());
        const __m512 al = exp2_ps(_mm512_sub_ps(m_old, base));
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < nk; j++) {
            const __m512 p =
                exp2_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, s + j * lds + c), base));
            _mm512_mask_storeu_ps(s + j * lds + c, lanes, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_mask_storeu_ps(sum_out + c, lanes, sum);
        _mm512_mask_storeu_ps(m + c, lanes, mx);
        _mm512_mask_storeu_ps(alpha + c, lanes, al);
    }
}

/* ---- AVX512_BF16: the same tiles on pairs of bf16 values (vdpbf16ps) ---- */

#define TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define PAIRS_FN(name, ROWS, W)                                                                    \
    TARGET_BF16 static inline void name(float *c, int64_t ldc, const uint32_t *a, int64_t ars,     \
                                        int64_t aps, const uint32_t *b, int64_t ldb, int kp,       \
                                        const float *alpha) {                                      \
        ROWS(DECL##W)                                                                              \
        if (alpha) {                                                                               \
            ROWS(SCALE##W)                                                                         \
        }                                                                                          \
        for (int p = 0; p < kp; p++) {                                                             \
            const uint32_t *ap = a + p * aps;                                                      \
            PLOADB##W ROWS(PSTEP##W)                                                               \
        }                                                                                          \
        ROWS(STORE##W)                                                                             \
    }
#define PLOADB1 const __m512i b0 = _mm512_loadu_si512(b + p * ldb);
#define PLOADB2 PLOADB1 const __m512i b1 = _mm512_loadu_si512(b + p * ldb + 16);
#define PSTEP1(r)                                                                                  \
    lo##r = _mm512_dpbf16_ps(lo##r, (__m512bh)_mm512_set1_epi32((int)ap[r * ars]), (__m512bh)b0);
#define PSTEP2(r)                                                                                  \
    {                                                                                              \
        const __m512i ar = _mm512_set1_epi32((int)ap[r * ars]);                                    \
        lo##r = _mm512_dpbf16_ps(lo##r, (__m512bh)ar, (__m512bh)b0);                               \
        hi##r = _mm512_dpbf16_ps(hi##r, (__m512bh)ar, (__m512bh)b1);                               \
    }

PAIRS_FN(pairs12x32, ROWS12, 2)
PAIRS_FN(pairs12x16, ROWS12, 1)
PAIRS_FN(pairs4x32, ROWS4, 2)
PAIRS_FN(pairs4x16, ROWS4, 1)
PAIRS_FN(pairs1x32, ROWS1, 2)
PAIRS_FN(pairs1x16, ROWS1, 1)

TARGET_BF16 static void gemm_pairs_avx512(float *c, int64_t ldc, const uint32_t *a, int64_t ars,
                                          int64_t aps, const uint32_t *b, int64_t ldb, int m, int n,
                                          int kp, const float *alpha) {
    for (int j0 = 0; j0 < n; j0 += 32) {
        const int wide = n - j0 >= 32;
        float *cj = c + j0;
        const uint32_t *bj = b + j0;
        int i = 0;
        for (; i + 12 <= m; i += 12)
            (wide ? pairs12x32 : pairs12x16)(cj + i * ldc, ldc, a + i * ars, ars, aps, bj, ldb, kp,
                                             alpha ? alpha + i : NULL);
        for (; i + 4 <= m; i += 4)
            (wide ? pairs4x32 : pairs4x16)(cj + i * ldc, ldc, a + i * ars, ars, aps, bj, ldb, kp,
                                           alpha ? alpha + i : NULL);
        for (; i < m; i++)
            (wide ? pairs1x32 : pairs1x16)(cj + i * ldc, ldc, a + i * ars, ars, aps, bj, ldb, kp,
                                           alpha ? alpha + i : NULL);
    }
}

static const kk__att_kernels avx512 = {
    .name = "avx512", .gemm = gemm_avx512, .softmax = softmax_avx512, .exp2_sum = exp2_sum_avx512};
static const kk__att_kernels avx512_bf16 = {.name = "avx512_bf16",
                                            .gemm = gemm_avx512,
                                            .softmax = softmax_avx512,
                                            .exp2_sum = exp2_sum_avx512,
                                            .gemm_pairs = gemm_pairs_avx512};

const kk__att_kernels *kk__att_kernels_avx512(void) {
    return kk__cpu_isa_supported() >= KK__ISA_AVX512 ? &avx512 : NULL;
}

const kk__att_kernels *kk__att_kernels_avx512_bf16(void) {
    return kk__cpu_isa_supported() >= KK__ISA_AVX512_BF16 ? &avx512_bf16 : NULL;
}

#if KK__AMX_CODE
/* The pair path's products on AMX tiles (attention_cpu_amx.c), the rest as avx512_bf16. */
static const kk__att_kernels amx = {.name = "amx",
                                    .gemm = gemm_avx512,
                                    .softmax = softmax_avx512,
                                    .exp2_sum = exp2_sum_avx512,
                                    .tile_scores = kk__att_tile_scores_amx,
                                    .tile_values = kk__att_tile_values_amx,
                                    .tiles = kk__att_tiles_amx};

const kk__att_kernels *kk__att_kernels_amx(void) {
    return kk__cpu_isa_supported() >= KK__ISA_AMX ? &amx : NULL;
}
#else
const kk__att_kernels *kk__att_kernels_amx(void) { return NULL; }
#endif

#else

const kk__att_kernels *kk__att_kernels_avx512(void) { return NULL; }
const kk__att_kernels *kk__att_kernels_avx512_bf16(void) { return NULL; }
const kk__att_kernels *kk__att_kernels_amx(void) { return NULL; }

#endif

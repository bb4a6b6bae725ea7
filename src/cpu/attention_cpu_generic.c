/* The attention micro-kernels in plain C: used where AVX2 + FMA is missing (and
 * by the tests, to prove this path too). Loops run over contiguous columns
 * with no calls inside, so the compiler vectorizes them for the baseline ISA. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/attention_cpu.h"

/* C = diag(alpha) C + A B, one row of C at a time: the row (n <= 256 floats)
 * stays in L1 while k rows of B stream through it. */
static void gemm_generic(float *c, int64_t ldc, const float *a, int64_t ars, int64_t aks,
                         const float *b, int64_t ldb, int m, int n, int k, const float *alpha) {
    for (int i = 0; i < m; i++) {
        float *restrict ci = c + i * ldc;
        const float keep = alpha ? alpha[i] : 0.0f;
        for (int j = 0; j < n; j++) ci[j] = alpha ? ci[j] * keep : 0.0f;
        for (int kk = 0; kk < k; kk++) {
            const float aik = a[i * ars + kk * aks];
            const float *restrict bk = b + kk * ldb;
            for (int j = 0; j < n; j++) ci[j] += aik * bk[j];
        }
    }
}

/* 2^x = 2^n 2^r, n = round(x), |r| <= 1/2: 2^r by a degree-5 polynomial,
 * 2^n put into the exponent bits. Adding KK__ATT_EXP2_MAGIC rounds x to an
 * integer (to nearest even) and leaves n + 127 in the low mantissa bits, so
 * there is no libm call and the loop vectorizes. x <= -126.5 gives 0 (n + 127
 * = 0 is exponent field 0), which is what a softmax weight that small is. */
static inline float exp2_poly(float x) {
    x = x > -127.0f ? x : -127.0f; /* -inf and NaN too */
    x = x < 127.0f ? x : 127.0f;
    const float t = x + KK__ATT_EXP2_MAGIC;
    const float r = x - (t - KK__ATT_EXP2_MAGIC);
    float p = KK__ATT_EXP2_C5;
    p = p * r + KK__ATT_EXP2_C4;
    p = p * r + KK__ATT_EXP2_C3;
    p = p * r + KK__ATT_EXP2_C2;
    p = p * r + KK__ATT_EXP2_C1;
    p = p * r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits <<= 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static float exp2_sum_generic(float *x, int n, float m) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        x[j] = exp2_poly(x[j] - m);
        sum += x[j];
    }
    return sum;
}

/* Queries run along the inner loops (n <= KK__ATT_BQ), keys along the outer. */
static void softmax_generic(float *s, int64_t lds, int nk, int n, float *m, float *sum,
                            float *alpha) {
    float mx[KK__ATT_BQ], base[KK__ATT_BQ];
    for (int c = 0; c < n; c++) {
        mx[c] = m[c];
        sum[c] = 0.0f;
    }
    for (int j = 0; j < nk; j++)
        for (int c = 0; c < n; c++) mx[c] = s[j * lds + c] > mx[c] ? s[j * lds + c] : mx[c];
    for (int c = 0; c < n; c++) /* nothing seen yet: subtracting 0 keeps the weights 0 */
        base[c] = mx[c] == -INFINITY ? 0.0f : mx[c];
    for (int j = 0; j < nk; j++)
        for (int c = 0; c < n; c++) {
            s[j * lds + c] = exp2_poly(s[j * lds + c] - base[c]);
            sum[c] += s[j * lds + c];
        }
    for (int c = 0; c < n; c++) {
        alpha[c] = exp2_poly(m[c] - base[c]);
        m[c] = mx[c];
    }
}

static const kk__att_kernels generic = {.name = "generic",
                                        .gemm = gemm_generic,
                                        .softmax = softmax_generic,
                                        .exp2_sum = exp2_sum_generic};

const kk__att_kernels *kk__att_kernels_generic(void) { return &generic; }

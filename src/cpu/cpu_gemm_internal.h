/* Internal: the CPU backend's matrix-product driver, shared by gemm, linear
 * and fp8_gemm: c = a . b^T (both K-major) by OpenBLAS's cblas_sgemm in f32,
 * a block of rows at a time, non-f32 inputs decoded to f32 panels first, and
 * an epilogue (bias, activation, scale, rounding) on each block while it is
 * still in cache. docs/backends/cpu.md, "GEMM and Linear". */
#ifndef KK_CPU_GEMM_INTERNAL_H
#define KK_CPU_GEMM_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_rows.h"
#include "opdef/opdef.h"

/* A block of rows is as many rows as give an f32 product of at most this many
 * bytes (and at least 16 rows). Measured on the 2-core development machine
 * (docs/backends/cpu.md, "GEMM and Linear"): the block must stay in the
 * last-level cache (32 MiB there) until the epilogue reads it, and every
 * extra block makes OpenBLAS pack the weights again, which costs more than
 * a read of the block from L3. */
#define KK__GEMM_BLOCK_BYTES (INT64_C(8) << 20)

/* The epilogue and decode loops are compiled per instruction-set level
 * (KK__ISA_CLONES, cpu_isa.h), the one for kk__cpu_isa() picked per call: the
 * library is built without -march, and GELU's erf is 4 times faster in 16
 * lanes than in SSE2's 4. Levels may differ in the last bit where a compiler
 * contracts a*b+c into an FMA (clang does by default); the tolerances are far
 * above that. */

/* The epilogue of one row: c[w] holds the f32 products of row m, columns
 * n0 .. n0 + cols - 1, of each weight w (two for SwiGLU); c[0] may be
 * overwritten. It writes the output row. */
typedef struct kk__gemm_job kk__gemm_job;
typedef void (*kk__gemm_row_fn)(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                                int64_t cols);

/* Rows [m0, m0 + rows) and columns [n0, n0 + cols) of c (row stride ldc)
 * and of group g's product p (ldp; NULL for g = 0, which is in c already). */
typedef void (*kk__gemm_group_fn)(const kk__gemm_job *job, int64_t g, float *c, int64_t ldc,
                                  const float *p, int64_t ldp, int64_t m0, int64_t rows, int64_t n0,
                                  int64_t cols);

struct kk__gemm_job {
    int64_t M, N, K;
    const void *a;    /* [M,K] */
    kk_dtype a_dtype; /* f32, f16, bf16, fp8_e4m3, fp8_e5m2 */
    const void *b[2]; /* [N,K] each; b[1] only for two products (SwiGLU) */
    kk_dtype b_dtype;
    const float *tables[2]; /* fp8 a, b: the f32 value of each of the 256 codes */
    int nweights;           /* 1 or 2 */
    /* f32 output written by sgemm itself (c[0] is then the output row): the
     * epilogue only transforms it in place. NULL: products go to scratch. */
    float *c_direct;
    kk__gemm_row_fn row; /* NULL: no epilogue (plain f32 gemm into c_direct) */
    const void *ctx;     /* the kernel's own epilogue data */
    /* Products by groups of K (fp8_gemm's block scales; one weight, not the
     * bf16 product): each block of c is sum_g scale_g * P_g, P_g the sgemm
     * over k in [g * k_group, (g + 1) * k_group). The driver writes P_0 into
     * c and calls group(.., g = 0, p = NULL) to scale it in place, then each
     * later P_g into scratch p and group(.., g, p, ldp) to add it scaled;
     * each thread does so for a tile of its own (one-threaded sgemm calls),
     * so group runs on the calling thread. NULL: one product over all of K. */
    int64_t k_group;
    kk__gemm_group_fn group;
};

/* Run the job: blocks of rows, each a product (multi-threaded OpenBLAS, its
 * thread count kk__cpu_threads()) and an epilogue over its rows (OpenMP).
 * KK_ERR_OUT_OF_MEMORY when the scratch cannot be allocated. */
kk_status kk__cpu_gemm_run(const kk__gemm_job *job, const char *op);

/* Rows of a per block and rows of b per panel (0 = the built-in sizes), for
 * measuring block sizes and for tests that cross every block edge. */
void kk__cpu_gemm_set_blocking(int64_t rows, int64_t panel_rows);

/* The bf16 product with AVX512_BF16 (gemm_bf16_cpu.c): c[m, n] (f32, ldc)
 * = a[m, K] . b[n, K]^T for bf16 a (lda) and b (ldb), on kk__cpu_threads()
 * threads. Available when kk__cpu_isa() reaches avx512_bf16; otherwise the
 * driver decodes bf16 to f32 panels for sgemm. */
int kk__cpu_gemm_bf16_available(void);
/* Called by the thread that finished a tile of c (rows [i0, i0 + rows),
 * columns [j0, j0 + cols), at c_tile, row stride ldc), while it is in cache. */
typedef void (*kk__cpu_tile_fn)(void *ctx, float *c_tile, int64_t ldc, int64_t i0, int64_t rows,
                                int64_t j0, int64_t cols);
kk_status kk__cpu_gemm_bf16(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                            kk__cpu_tile_fn done, void *ctx);
/* Two products of one a at once (SwiGLU's gate and up): c0 = a . b0^T and
 * c1 = a . b1^T (b1 NULL: c0 only), both with row stride ldc; `done` gets
 * both tiles (c1's NULL with one weight) when they are finished, by the
 * thread that computed them. c0 NULL (then `done` is required): the products
 * exist only in per-thread tile buffers, row stride given to `done`, so an
 * f32 product that only feeds the epilogue never goes to memory. */
typedef void (*kk__cpu_tile2_fn)(void *ctx, float *c0_tile, float *c1_tile, int64_t ldc, int64_t i0,
                                 int64_t rows, int64_t j0, int64_t cols);
kk_status kk__cpu_gemm_bf16_pair(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                                 const uint16_t *b0, const uint16_t *b1, int64_t ldb, float *c0,
                                 float *c1, int64_t ldc, kk__cpu_tile2_fn done, void *ctx);

/* Tests only: set (NULL: off), kk__cpu_gemm_bf16_pair takes its amx branch on
 * `kernel` (emulated tiles) below the amx level too, so CPUs without AMX run it. */
typedef kk_status (*kk__cpu_bf16_product_fn)(int64_t m, int64_t n, int64_t K, const uint16_t *a,
                                             int64_t lda, const uint16_t *b, int64_t ldb, float *c,
                                             int64_t ldc, kk__cpu_tile_fn done, void *ctx);
void kk__cpu_gemm_bf16_amx_test(kk__cpu_bf16_product_fn kernel);
/* The same product on AMX tiles (gemm_bf16_amx.c), which kk__cpu_gemm_bf16
 * and kk__cpu_gemm_bf16_pair call at the amx level (once per weight and block
 * of rows); kk__cpu_gemm_bf16_amx_runs counts those calls (tests check that the
 * tiles ran). x86-64 only, like the next three. */
kk_status kk__cpu_gemm_bf16_amx(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                                const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                                kk__cpu_tile_fn done, void *ctx);
long kk__cpu_gemm_bf16_amx_runs(void);

/* Rows [r0, r0 + w) of a [*, ld] bf16 matrix, k values [k0, k0 + kc), as
 * 32-bit pairs dst[p * w + i] = (k0 + 2p, k0 + 2p + 1) of row r0 + i, rows at
 * or past `rows` and the k past an odd kc zero (AVX-512 gathers: call only at
 * avx512 or above). */
void kk__cpu_bf16_pack_pairs(const uint16_t *src, int64_t ld, int64_t rows, int64_t r0, int w,
                             int64_t k0, int64_t kc, uint32_t *dst);
/* The packed operands' scratch, 64-byte aligned, kept between calls for one
 * call at a time (*cached = 1; a concurrent call gets a fresh allocation);
 * give it back with the same `cached`. NULL when out of memory. */
void *kk__cpu_bf16_scratch_take(size_t bytes, int *cached);
void kk__cpu_bf16_scratch_give(void *p, int cached);

/* Round `n` f32 values to `dt` (f32: copy) into dst + i0 elements. */
void kk__cpu_store_row(const float *src, void *dst, kk_dtype dt, int64_t i0, int64_t n);

/* fp8_linear's quantization of x [M,K] (f32, f16 or bf16) on the CPU, by
 * kk_quantize's CPU code a row at a time: block (1) KK_SCALE_1X128, scales
 * [M, ceil(K/128)]; rowwise (0) its per-tensor rule on each row, scales [M].
 * KK_ERR_QUANTIZATION for inf/NaN in x (q is then unspecified). */
kk_status kk__fp8_linear_quantize_x_cpu(const void *x, kk_dtype dt, int64_t M, int64_t K, int block,
                                        uint8_t *q, float *scales);

/* ---- vectorizable math (no calls, no branches in the element path) ---- */

/* c ? a : b on bits. gcc (with its default -ftrapping-math) turns a float
 * ?: into control flow that stops the vectorizer; this never does. */
static inline float kk__select(int c, float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint32_t m = 0u - (uint32_t)c, r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* e^x in f32 for x in [-87.3, 88], not NaN (kk__expf clamps any x into that
 * range first): Cody-Waite reduction x = n ln2 + r, Cephes' minimax
 * polynomial for e^r on |r| <= ln2/2, and 2^n built in the exponent bits. n
 * is rounded with the 1.5 * 2^23 trick rather than floorf, which SSE2 has no
 * vector instruction for. Relative error about 2e-7 (tests/test_cpu_gemm.c
 * measures it). */
static inline float kk__expf_in_range(float x) {
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f; /* ln2 = 0.693359375 - 2.12194440e-4 */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float kk__expf(float x) {
    x = kk__select(x >= -87.3f, x, -87.3f); /* NaN too: (int32_t)NaN would be UB */
    x = kk__select(x > 88.0f, 88.0f, x);
    return kk__expf_in_range(x);
}

/* erfc(z) for z >= 0 (Numerical Recipes' erfcc, Chebyshev-fitted): fractional
 * error < 1.2e-7 in exact arithmetic, about 1e-6 in f32 near z = 3 (the f32
 * rounding of z^2). Beyond z = 9 (erfc < 4.2e-37) it returns 0: subnormal
 * results there would make every later multiply slow (Linear outputs of
 * magnitude 10..30 are common), for a difference no tolerance can see. */
static inline float kk__erfc_pos(float z) {
    const float t = 1.0f / (1.0f + 0.5f * z);
    /* the degree-9 polynomial in Estrin's form: 4 dependent steps instead of
     * Horner's 9, so the vector units overlap more of one element's work */
    const float t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
    const float q0 = -1.26551223f + 1.00002368f * t, q1 = 0.37409196f + 0.09678418f * t;
    const float q2 = -0.18628806f + 0.27886807f * t, q3 = -1.13520398f + 1.48851587f * t;
    const float q4 = -0.82215223f + 0.17087277f * t;
    const float p = (q0 + q1 * t2) + (q2 + q3 * t2) * t4 + q4 * t8;
    /* arg <= 0 (erfc(z) (1 + z/2) <= 1) up to the fit's 1e-7: one clamp, which
     * also maps NaN into range, instead of kk__expf's two */
    const float arg = p - z * z;
    return kk__select(z >= 9.0f, 0.0f,
                      t * kk__expf_in_range(kk__select(arg >= -80.0f, arg, -80.0f)));
}

/* erf(x) = 1 - erfc(|x|) with the sign of x. */
static inline float kk__erff(float x) {
    const float e = 1.0f - kk__erfc_pos(fabsf(x));
    return kk__select(x < 0.0f, -e, e);
}

/* GELU (erf) = 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2): for x < 0 the
 * erfc form keeps its relative accuracy where 1 + erf cancels. */
static inline float kk__gelu_erf(float x) {
    const float z = x * 0.70710678118654752f;
    const float e = kk__erfc_pos(fabsf(z));
    return 0.5f * x * kk__select(x < 0.0f, e, 2.0f - e);
}

/* x sigmoid(x) = x / (1 + e^-x). */
static inline float kk__silu(float x) { return x / (1.0f + kk__expf(-x)); }

/* GELU (tanh) = 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3). */
static inline float kk__gelu_tanh(float x) {
    const float u2 = 1.5957691216057308f * (x + 0.044715f * x * x * x);
    return x / (1.0f + kk__expf(-u2));
}

#endif

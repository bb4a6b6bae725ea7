/* labels: unit cpu */
/* The AMX bf16 product (src/cpu/gemm_bf16_amx.c) compiled with its tile
 * instructions emulated in C (KK_AMX_EMULATE), so its packing, tile layout,
 * k padding, edges and epilogue callback are checked on any CPU with AVX-512
 * (b is packed by the library's AVX-512 code); the real instructions are
 * tested by test_cpu_gemm.c on a CPU with AMX. Exact on small integers
 * (every product and partial sum exact in f32), on strided operands and an
 * output row stride past N. */
#include "testutil.h"

#define KK_AMX_EMULATE 1
#include "cpu/gemm_bf16_amx.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu_isa.h"
#include "kernelkit/dtype.h"

#if KK__AMX_CODE

/* The epilogue callback: every tile of c once, inside c, in whole work items. */
typedef struct seen {
    int64_t m, n, ldc;
    const float *c;
    unsigned char *hit; /* [m][n] */
    int bad;
} seen;

static void on_tile(void *ctx, float *c_tile, int64_t ldc, int64_t i0, int64_t rows, int64_t j0,
                    int64_t cols) {
    seen *s = ctx;
    if (ldc != s->ldc || c_tile != s->c + i0 * ldc + j0 || i0 % 128 || j0 % 256 || rows < 1 ||
        cols < 1 || i0 + rows > s->m || j0 + cols > s->n)
        s->bad = 1;
    for (int64_t i = i0; i < i0 + rows && !s->bad; i++)
        for (int64_t j = j0; j < j0 + cols; j++) s->hit[i * s->n + j]++;
}

static void exact(int64_t M, int64_t N, int64_t K, int pad) {
    const int64_t lda = K + pad, ldb = K + 2 * pad, ldc = N + 3 * pad;
    uint16_t *a = malloc(sizeof(uint16_t) * (size_t)(M * lda));
    uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(N * ldb));
    float *c = malloc(sizeof(float) * (size_t)(M * ldc));
    unsigned char *hit = calloc((size_t)(M * N), 1);
    assert_true(a && b && c && hit);
    for (int64_t i = 0; i < M * lda; i++) a[i] = kk_f32_to_bf16((float)((i * 7) % 9 - 4));
    for (int64_t i = 0; i < N * ldb; i++) b[i] = kk_f32_to_bf16((float)((i * 5) % 7 - 3));
    for (int64_t i = 0; i < M * ldc; i++) c[i] = -12345.0f; /* columns past N must stay */
    seen s = {M, N, ldc, c, hit, 0};
    kk_assert_ok(kk__cpu_gemm_bf16_amx_emu(M, N, K, a, lda, b, ldb, c, ldc, on_tile, &s));
    assert_false(s.bad);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double want = -12345.0;
            if (j < N) {
                want = 0.0;
                for (int64_t k = 0; k < K; k++)
                    want += (double)kk_bf16_to_f32(a[i * lda + k]) * kk_bf16_to_f32(b[j * ldb + k]);
                if (hit[i * N + j] != 1)
                    fail_msg("%lldx%lldx%lld: c[%lld][%lld] given to the epilogue %d times",
                             (long long)M, (long long)N, (long long)K, (long long)i, (long long)j,
                             hit[i * N + j]);
            }
            if (c[i * ldc + j] != want)
                fail_msg("%lldx%lldx%lld: c[%lld][%lld] = %g, want %g", (long long)M, (long long)N,
                         (long long)K, (long long)i, (long long)j, c[i * ldc + j], want);
        }
    free(a), free(b), free(c), free(hit);
}

/* A product of NaNs leaves NaN in the packing scratch (kept between calls),
 * so padding that a later call fails to zero shows as NaN in its c. */
static void poison_scratch(void) {
    enum { M = 300, N = 600, K = 1500 };
    uint16_t *a = malloc(sizeof(uint16_t) * M * K), *b = malloc(sizeof(uint16_t) * N * K);
    float *c = malloc(sizeof(float) * M * N);
    assert_true(a && b && c);
    for (int i = 0; i < M * K; i++) a[i] = 0x7fc0;
    for (int i = 0; i < N * K; i++) b[i] = 0x7fc0;
    kk_assert_ok(kk__cpu_gemm_bf16_amx_emu(M, N, K, a, K, b, K, c, N, NULL, NULL));
    assert_true(isnan(c[0]));
    free(a), free(b), free(c);
}

static void emulated_tiles_are_exact(void **state) {
    (void)state;
    if (kk__cpu_isa_supported() < KK__ISA_AVX512) {
        print_message("skipped: b's packing needs AVX-512\n");
        skip();
    }
    poison_scratch();
    /* M, N, K cutting the 16 and 32 tiles, the 128 x 256 work item and the
     * 512-value k block (odd K too), with and without strides */
    static const int64_t shapes[][3] = {{1, 1, 1},        {17, 33, 31},    {33, 17, 33},
                                        {100, 257, 1},    {129, 300, 513}, {32, 32, 32},
                                        {257, 100, 1100}, {16, 520, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int pad = 0; pad <= 3; pad += 3) exact(shapes[i][0], shapes[i][1], shapes[i][2], pad);
}

/* Random bf16 values: within the f32 rounding of the sums of a float64 product. */
static void emulated_tiles_random(void **state) {
    (void)state;
    if (kk__cpu_isa_supported() < KK__ISA_AVX512) skip();
    enum { M = 70, N = 90, K = 700 };
    uint16_t *a = malloc(sizeof(uint16_t) * M * K), *b = malloc(sizeof(uint16_t) * N * K);
    float *c = malloc(sizeof(float) * M * N);
    assert_true(a && b && c);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < M * K + N * K; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const uint16_t v = kk_f32_to_bf16((float)((double)(x >> 11) / 9007199254740992.0 - 0.5));
        if (i < M * K)
            a[i] = v;
        else
            b[i - M * K] = v;
    }
    kk_assert_ok(kk__cpu_gemm_bf16_amx_emu(M, N, K, a, K, b, K, c, N, NULL, NULL));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p =
                    (double)kk_bf16_to_f32(a[i * K + k]) * kk_bf16_to_f32(b[j * K + k]);
                want += p;
                mag += fabs(p);
            }
            if (fabs(c[i * N + j] - want) > 1e-5 * mag + 1e-30)
                fail_msg("c[%d][%d] = %.9g, want %.9g", i, j, c[i * N + j], want);
        }
    free(a), free(b), free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(emulated_tiles_are_exact),
        cmocka_unit_test(emulated_tiles_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
    printf("skipped: no AMX code in this build (x86-64, gcc 11 or clang 12)\n");
    return 77;
}

#endif

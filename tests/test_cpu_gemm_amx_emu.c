/* labels: unit cpu */
/* The AMX bf16 product (src/cpu/gemm_bf16_amx.c) compiled with its tile
 * instructions emulated in C (KK_AMX_EMULATE), so its packing, tile layout,
 * k padding, edges and epilogue callback are checked on any CPU with AVX-512
 * (b is packed by the library's AVX-512 code); the real instructions are
 * tested by test_cpu_gemm.c on a CPU with AMX. Exact on small integers
 * (every product and partial sum exact in f32), on strided operands and an
 * output row stride past N. kk__cpu_gemm_bf16_pair's amx branch (one or two
 * weights, its 8 MiB blocks of rows) runs here on the emulated tiles too,
 * through kk__cpu_gemm_bf16_amx_test. */
#include "testutil.h"

#define KK_AMX_EMULATE 1
#include "cpu/gemm_bf16_amx.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- kk__cpu_gemm_bf16_pair's amx branch on the emulated tiles ---- */

/* A small integer in [-r, r] hashed from i: no short period, so a block that
 * reads another block's rows of a or columns of b shows. */
static uint16_t small(uint64_t i, int r) {
    return kk_f32_to_bf16((float)((int)((i * 0x9E3779B97F4A7C15ull) >> 40) % (2 * r + 1) - r));
}

/* The epilogue: both products of each element once, from tiles inside the
 * caller's c0 and c1 when it gives them. */
typedef struct pair_seen {
    int64_t m, n, ldc;
    float *c[2];   /* the caller's, or NULL */
    float *out[2]; /* [m][n]; out[1] NULL with one weight */
    unsigned char *hit;
    int bad;
} pair_seen;

static void pair_tile(void *ctx, float *c0, float *c1, int64_t ldc, int64_t i0, int64_t rows,
                      int64_t j0, int64_t cols) {
    pair_seen *s = ctx;
    if (!c0 || !c1 != !s->out[1] || i0 < 0 || rows < 1 || i0 + rows > s->m || j0 < 0 || cols < 1 ||
        j0 + cols > s->n)
        s->bad = 1;
    if (s->c[0] && (ldc != s->ldc || c0 != s->c[0] + i0 * ldc + j0 ||
                    (s->c[1] && c1 != s->c[1] + i0 * ldc + j0)))
        s->bad = 1;
    for (int64_t i = 0; i < rows && !s->bad; i++)
        for (int64_t j = 0; j < cols; j++) {
            const int64_t at = (i0 + i) * s->n + j0 + j;
            s->hit[at]++;
            s->out[0][at] = c0[i * ldc + j];
            if (c1) s->out[1][at] = c1[i * ldc + j];
        }
}

/* One shape, one and two weights, with the caller's c (row stride past N)
 * and without (c0 NULL: our scratch in blocks of rows); `blocks` are the
 * blocks of rows expected without c, for one and two weights. */
static void pair_exact(int64_t M, int64_t N, int64_t K, int pad, const int blocks[2]) {
    const int64_t lda = K + pad, ldb = K + 2 * pad, ldc = N + 3 * pad;
    uint16_t *a = malloc(sizeof(uint16_t) * (size_t)(M * lda)), *b[2];
    float *c[2], *out[2], *ref[2];
    unsigned char *hit = malloc((size_t)(M * N));
    assert_true(a && hit);
    for (int64_t i = 0; i < M * lda; i++) a[i] = small((uint64_t)i, 4);
    for (int w = 0; w < 2; w++) {
        b[w] = malloc(sizeof(uint16_t) * (size_t)(N * ldb));
        c[w] = malloc(sizeof(float) * (size_t)(M * ldc));
        out[w] = malloc(sizeof(float) * (size_t)(M * N));
        ref[w] = malloc(sizeof(float) * (size_t)(M * N)); /* exact: small integers */
        assert_true(b[w] && c[w] && out[w] && ref[w]);
        for (int64_t i = 0; i < N * ldb; i++) b[w][i] = small((uint64_t)(i + w * N * ldb), 3 - w);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double sum = 0.0;
                for (int64_t k = 0; k < K; k++)
                    sum +=
                        (double)kk_bf16_to_f32(a[i * lda + k]) * kk_bf16_to_f32(b[w][j * ldb + k]);
                ref[w][i * N + j] = (float)sum;
            }
    }
    for (int own = 0; own < 2; own++)
        for (int nw = 1; nw <= 2; nw++) {
            for (int64_t i = 0; i < M * ldc; i++) c[0][i] = c[1][i] = -12345.0f;
            for (int64_t i = 0; i < M * N; i++) out[0][i] = out[1][i] = NAN;
            memset(hit, 0, (size_t)(M * N));
            float *c0 = own ? NULL : c[0], *c1 = own || nw < 2 ? NULL : c[1];
            pair_seen s = {M, N, ldc, {c0, c1}, {out[0], nw == 2 ? out[1] : NULL}, hit, 0};
            const long before = kk__cpu_gemm_bf16_amx_runs();
            kk_assert_ok(kk__cpu_gemm_bf16_pair(M, N, K, a, lda, b[0], nw == 2 ? b[1] : NULL, ldb,
                                                c0, c1, ldc, pair_tile, &s));
            /* one product per weight and block of rows */
            assert_int_equal(kk__cpu_gemm_bf16_amx_runs() - before,
                             nw * (own ? blocks[nw - 1] : 1));
            assert_false(s.bad);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    if (hit[i * N + j] != 1)
                        fail_msg("%lldx%lldx%lld own %d weights %d: [%lld][%lld] given to the "
                                 "epilogue %d times",
                                 (long long)M, (long long)N, (long long)K, own, nw, (long long)i,
                                 (long long)j, hit[i * N + j]);
                    for (int w = 0; w < nw; w++) {
                        const float want = ref[w][i * N + j], got = out[w][i * N + j];
                        /* the caller's c holds the products too */
                        const float in_c = own ? want : c[w][i * ldc + j];
                        if (got != want || in_c != want)
                            fail_msg("%lldx%lldx%lld own %d weights %d: c%d[%lld][%lld] = %g (in "
                                     "c: %g), want %g",
                                     (long long)M, (long long)N, (long long)K, own, nw, w,
                                     (long long)i, (long long)j, got, in_c, want);
                    }
                }
            for (int64_t i = 0; i < M; i++) /* columns past N untouched */
                for (int64_t j = N; j < ldc; j++)
                    assert_true(c[0][i * ldc + j] == -12345.0f && c[1][i * ldc + j] == -12345.0f);
            if (own || nw < 2) /* c1 untouched where not given */
                for (int64_t i = 0; i < M * ldc; i++) assert_true(c[1][i] == -12345.0f);
        }
    free(a), free(hit);
    for (int w = 0; w < 2; w++) free(b[w]), free(c[w]), free(out[w]), free(ref[w]);
}

static void pair_on_emulated_tiles(void **state) {
    (void)state;
    if (kk__cpu_isa_supported() < KK__ISA_AVX512_BF16) {
        print_message("skipped: the pair product needs AVX512_BF16\n");
        skip();
    }
    kk__cpu_gemm_bf16_amx_test(kk__cpu_gemm_bf16_amx_emu);
    /* M, N, K cutting the tiles and the k block; then the 8 MiB blocks (2^21
     * f32 of nw * N columns): 2097 rows of one weight's 1000 columns, 1048 of
     * two (3 and 5 blocks, the last short), and the 16-row minimum where
     * nw * N passes 131072 (70001 columns: 29 rows of one, 14 -> 16 of two) */
    static const struct {
        int64_t m, n, k;
        int pad, blocks[2];
    } shapes[] = {{1, 1, 1, 0, {1, 1}},
                  {37, 45, 545, 3, {1, 1}},
                  {129, 300, 1100, 0, {1, 1}},
                  {4500, 1000, 33, 3, {3, 5}},
                  {47, 70001, 3, 1, {2, 3}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        pair_exact(shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].pad, shapes[i].blocks);
    kk__cpu_gemm_bf16_amx_test(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(emulated_tiles_are_exact),
        cmocka_unit_test(emulated_tiles_random),
        cmocka_unit_test(pair_on_emulated_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
    printf("skipped: no AMX code in this build (x86-64, gcc 11 or clang 12)\n");
    return 77;
}

#endif

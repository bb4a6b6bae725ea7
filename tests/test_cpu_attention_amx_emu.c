/* labels: unit cpu */
/* The bf16 attention's AMX products (src/cpu/attention_cpu_amx.c) compiled
 * with the tile instructions emulated in C (KK_AMX_EMULATE), so the amx branch
 * of the pair path (blocks of 64 keys, O kept transposed, V^T's pairs, the
 * edge tiles) runs on any CPU with AVX512_BF16, through the test-only hook
 * kk__att_amx_test; the real instructions are tested by test_cpu_attention.c
 * on a CPU with AMX. The tile product alone is exact on small integers at
 * edges of m, n and kp, with NaN around its operands that must not leak in
 * (and three broken products are seen); the attention op on the emulated
 * tiles passes the float64 reference's check (D = 16, 40, 64, 72, 80, 128,
 * 256; causal, GQA, windows, dropout, decode, Sk past a fold; 100 fuzz
 * cases made bf16), stays close to
 * the vdpbf16ps path and gives the same bits on 1 and 3 threads; and five
 * deliberately broken products (pairs swapped in either product, a key block
 * dropped, an edge tile dropped in either) fail that check. attention_varlen
 * runs on the same tiles (V^T's pairs per sequence): it passes the check
 * (shapes and 40 fuzz cases made bf16), each sequence has the bits of a
 * B = 1 attention alone, and the five broken products fail it too. */
#include "testutil.h"

#define KK_AMX_EMULATE 1
#include "cpu/attention_cpu_amx.c"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/cases.h"
#include "kernelkit/dtype.h"
#include "opdef/attention.h"
#include "opdef/attention_varlen.h"

#if KK__AMX_CODE

static int have_bf16(void) {
    if (kk__att_kernels_avx512_bf16()) return 1;
    print_message("skipped: the rest of the pair path needs AVX512_BF16\n");
    return 0;
}

/* ---- the product alone ---- */

/* A bf16 pair of two different small integers in [-r, r], hashed from i
 * (different: a pair read swapped always shows). */
static uint32_t small_pair(uint64_t i, int r) {
    const uint64_t h = i * 0x9E3779B97F4A7C15ull;
    const int lo = (int)((h >> 40) % (uint64_t)(2 * r + 1)) - r;
    int hi = (int)((h >> 20) % (uint64_t)(2 * r + 1)) - r;
    if (hi == lo) hi = lo == r ? -r : lo + 1;
    return kk_f32_to_bf16((float)lo) | (uint32_t)kk_f32_to_bf16((float)hi) << 16;
}

static double pair_dot(uint32_t x, uint32_t y) {
    return (double)kk_bf16_to_f32((uint16_t)x) * kk_bf16_to_f32((uint16_t)y) +
           (double)kk_bf16_to_f32((uint16_t)(x >> 16)) * kk_bf16_to_f32((uint16_t)(y >> 16));
}

typedef void (*pairs_fn)(float *c, int64_t ldc, const uint32_t *a, int64_t ars, const uint32_t *b,
                         int64_t ldb, int m, int n, int kp, const float *alpha);

/* C[m, n] (= C diag(alpha)) + A B by `fn` with A's rows ars >= kp words apart
 * and B's ldb >= n: the words past kp in A's rows, A's rows past m, B's rows
 * past kp and B's columns past n are NaN, and so are C's rows past m and
 * columns past n, which must stay NaN; everything else must be exact. Returns
 * the number of elements that are not. */
static long product_errors(pairs_fn fn, int m, int n, int kp, int with_alpha) {
    const int64_t ars = kp + 3, ldb = n + 16, ldc = n + 5;
    const uint32_t nan2 = 0x7fc07fc0u; /* a pair of bf16 NaNs */
    uint32_t *a = malloc(sizeof(uint32_t) * (size_t)((m + 20) * ars));
    uint32_t *b = malloc(sizeof(uint32_t) * (size_t)((kp + 20) * ldb));
    float *c = malloc(sizeof(float) * (size_t)((m + 20) * ldc));
    float *alpha = malloc(sizeof(float) * (size_t)n);
    double *want = malloc(sizeof(double) * (size_t)(m * n));
    assert_true(a && b && c && alpha && want);
    for (int64_t i = 0; i < (m + 20) * ars; i++)
        a[i] = i / ars < m && i % ars < kp ? small_pair((uint64_t)i, 4) : nan2;
    for (int64_t i = 0; i < (kp + 20) * ldb; i++)
        b[i] = i / ldb < kp && i % ldb < n ? small_pair((uint64_t)i + 77777, 3) : nan2;
    for (int64_t i = 0; i < (m + 20) * ldc; i++)
        c[i] = i / ldc < m && i % ldc < n ? (float)(i % 7 - 3) : NAN;
    for (int j = 0; j < n; j++) alpha[j] = j % 3 == 0 ? 0.5f : j % 3 == 1 ? 2.0f : 0.0f;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = with_alpha ? (double)alpha[j] * c[i * ldc + j] : 0.0;
            for (int p = 0; p < kp; p++) s += pair_dot(a[i * ars + p], b[p * ldb + j]);
            want[i * n + j] = s;
        }
    kk__att_tiles_amx_emu(1);
    fn(c, ldc, a, ars, b, ldb, m, n, kp, with_alpha ? alpha : NULL);
    kk__att_tiles_amx_emu(0);
    long bad = 0;
    for (int i = 0; i < m + 20; i++)
        for (int j = 0; j < ldc; j++) {
            const float got = c[i * ldc + j];
            bad += i < m && j < n ? got != want[i * n + j] : !isnan(got);
        }
    free(a), free(b), free(c), free(alpha), free(want);
    return bad;
}

/* m, n, kp across the 16-row, 16-column and 16-pair tiles and the 2 x 2
 * blocks: the score product's (64 keys, 48 queries, D/2 pairs) and the value
 * product's (Dp, 48 queries, 32 pairs of keys) among them. Returns the
 * number of shapes with a wrong element. */
static int shapes_wrong(pairs_fn fn, int verbose) {
    static const int m_[] = {1, 15, 16, 17, 33, 48, 60, 64};
    static const int n_[] = {16, 32, 48, 80};
    static const int kp_[] = {1, 8, 15, 16, 17, 32, 36, 40};
    int wrong = 0;
    for (size_t i = 0; i < sizeof m_ / sizeof m_[0]; i++)
        for (size_t j = 0; j < sizeof n_ / sizeof n_[0]; j++)
            for (size_t k = 0; k < sizeof kp_ / sizeof kp_[0]; k++)
                for (int al = 0; al < 2; al++) {
                    const long bad = product_errors(fn, m_[i], n_[j], kp_[k], al);
                    if (bad && verbose)
                        print_message("m %d n %d kp %d alpha %d: %ld elements wrong\n", m_[i],
                                      n_[j], kp_[k], al, bad);
                    wrong += bad > 0;
                }
    return wrong;
}

/* Broken products: B's pairs swapped, the last tile of pairs dropped where
 * kp is past 16 and not a whole number of tiles, ... */
static void swapped_pairs(float *c, int64_t ldc, const uint32_t *a, int64_t ars, const uint32_t *b,
                          int64_t ldb, int m, int n, int kp, const float *alpha) {
    uint32_t *sw = malloc(sizeof(uint32_t) * (size_t)(kp * ldb));
    assert_non_null(sw);
    for (int64_t i = 0; i < kp * ldb; i++) sw[i] = b[i] >> 16 | b[i] << 16;
    tile_pairs(c, ldc, a, ars, sw, ldb, m, n, kp, alpha);
    free(sw);
}

static void dropped_edge(float *c, int64_t ldc, const uint32_t *a, int64_t ars, const uint32_t *b,
                         int64_t ldb, int m, int n, int kp, const float *alpha) {
    tile_pairs(c, ldc, a, ars, b, ldb, m, n, kp > 16 ? kp / 16 * 16 : kp, alpha);
}

/* ... and the pairs past kp read as if they were zeros (kp rounded up to
 * whole tiles): the NaN past the operands leaks in. */
static void unzeroed_edge(float *c, int64_t ldc, const uint32_t *a, int64_t ars, const uint32_t *b,
                          int64_t ldb, int m, int n, int kp, const float *alpha) {
    tile_pairs(c, ldc, a, ars, b, ldb, m, n, (kp + 15) / 16 * 16, alpha);
}

static void product_is_exact(void **state) {
    (void)state;
    assert_int_equal(shapes_wrong(tile_pairs, 1), 0);
    /* and the check sees broken products: swapped pairs in all 512 shapes,
     * the edge breaks where they change something (kp > 16 or kp % 16 != 0) */
    const int swapped = shapes_wrong(swapped_pairs, 0), dropped = shapes_wrong(dropped_edge, 0),
              unzeroed = shapes_wrong(unzeroed_edge, 0);
    print_message("    wrong shapes: pairs swapped %d, edge tile dropped %d, edge not zeroed %d\n",
                  swapped, dropped, unzeroed);
    assert_int_equal(swapped, 512);
    assert_int_equal(dropped, 8 * 4 * 3 * 2);
    assert_int_equal(unzeroed, 8 * 4 * 6 * 2);
}

/* ---- the attention op on the emulated tiles ---- */

/* the amx kernels with the emulated products, P.V's counted */
static atomic_long products;

static void counted(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv, const float *s,
                    int64_t lds, uint32_t *pp, int nk, int ncols, int dp, const float *alpha) {
    atomic_fetch_add(&products, 1);
    kk__att_tile_values_amx_emu(ot, ldo, vt, ldv, s, lds, pp, nk, ncols, dp, alpha);
}

static kk__att_kernels emulated(void) {
    kk__att_kernels k = *kk__att_kernels_avx512_bf16();
    k.name = "amx (emulated)";
    k.gemm_pairs = NULL; /* as the amx kernels: the pair path on tiles only */
    k.tile_scores = kk__att_tile_scores_amx_emu;
    k.tile_values = counted;
    k.tiles = kk__att_tiles_amx_emu;
    return k;
}

static const char *const shapes[] = {
    "B=1 Hq=2 Hkv=2 Sq=100 Sk=100 D=64 lse=1",                        /* S % 16 != 0 */
    "B=1 Hq=4 Hkv=2 Sq=77 Sk=150 D=128 causal=1 lse=1",               /* GQA, Sq < Sk */
    "B=1 Hq=4 Hkv=2 Sq=50 Sk=200 D=72 causal=1 lse=1",                /* D % 32 == 8 */
    "B=2 Hq=2 Hkv=1 Sq=33 Sk=70 D=80 window_left=20 window_right=5",  /* D % 32 == 16 */
    "B=1 Hq=2 Hkv=1 Sq=100 Sk=37 D=40 causal=1 lse=1",                /* rows that see nothing */
    "B=2 Hq=8 Hkv=2 Sq=1 Sk=300 D=128 causal=1 lse=1",                /* decode */
    "B=1 Hq=1 Hkv=1 Sq=1 Sk=1 D=16",                                  /* kp < 16 */
    "B=1 Hq=2 Hkv=1 Sq=97 Sk=200 D=64 causal=1 window_left=70 lse=1", /* odd first key */
    "B=2 Hq=4 Hkv=2 Sq=65 Sk=63 D=64 scale=0.3 lse=1",                /* Sk < 64 */
    "B=1 Hq=4 Hkv=2 Sq=70 Sk=133 D=64 causal=1 lse=1 dropout=0.3 seed=123456789012 offset=77",
    "B=1 Hq=2 Hkv=1 Sq=129 Sk=65 D=16 window_left=5 window_right=3 dropout=0.1 lse=1",
    "B=1 Hq=1 Hkv=1 Sq=5 Sk=1500 D=40 lse=1", /* past one fold (16 blocks of 64) */
    "B=1 Hq=2 Hkv=2 Sq=49 Sk=129 D=256 lse=1",
};

static void attention_on_emulated_tiles(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const kk__att_kernels emu = emulated();
    kk__att_amx_test(&emu);
    assert_ptr_equal(kk__att_kernels_best(), &emu);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        char text[256];
        snprintf(text, sizeof text, "%s dtype=bf16", shapes[s]);
        const long before = atomic_load(&products);
        const kk_case_result r = kk_test_run_cpu_case("attention", text, NULL, 2000 + s);
        assert_int_equal(r.status, KK_CASE_PASS);
        assert_true(atomic_load(&products) > before); /* the tiles ran */
    }
    /* f32, and bf16 with odd D (no pairs): the f32 products, no tiles */
    const long before = atomic_load(&products);
    assert_int_equal(
        kk_test_run_cpu_case("attention", "B=1 Hq=2 Hkv=1 Sq=50 Sk=77 D=64 dtype=f32", NULL, 5)
            .status,
        KK_CASE_PASS);
    assert_int_equal(
        kk_test_run_cpu_case("attention", "B=1 Hq=2 Hkv=1 Sq=50 Sk=77 D=17 dtype=bf16", NULL, 5)
            .status,
        KK_CASE_PASS);
    assert_int_equal(atomic_load(&products), before);
    /* below avx512_bf16 the hook is not taken */
    kk__cpu_isa_cap(KK__ISA_AVX512);
    assert_string_equal(kk__att_kernels_best()->name, "avx512");
    kk__cpu_isa_cap(-1);
    kk__att_amx_test(NULL);
}

/* attention_varlen on the same tiles: V^T's pairs repacked per sequence
 * (each sequence's pairs of keys from its own first key, whatever the parity
 * of its packed offset), empty sequences, GQA, causal per sequence, windows,
 * dropout, scale, lse, D with edge tiles, a fold. */
static const char *const varlen_shapes[] = {
    "Hq=2 Hkv=1 D=64 causal=1 lse=1 seqlens_q=5:0:17:100 seqlens_k=9:4:17:129",
    "Hq=4 Hkv=2 D=72 causal=1 lse=1 seqlens_q=0:130:1:64:0 seqlens_k=3:201:1:0:0",
    "Hq=2 Hkv=1 D=80 lse=1 window_left=20 window_right=5 seqlens_q=33:49:1 seqlens_k=71:97:300",
    "Hq=2 Hkv=2 D=256 lse=1 scale=0.3 seqlens_q=49:3 seqlens_k=129:2",
    ("Hq=4 Hkv=2 D=40 causal=1 lse=1 dropout=0.3 seed=123456789012 offset=77 "
     "seqlens_q=70:0:33 seqlens_k=133:5:33"),
    "Hq=4 Hkv=1 D=16 causal=1 lse=1 seqlens_q=1:50:3 seqlens_k=1101:77:40", /* past a fold */
};

/* n cases of the op's fuzz stream from `seed`, made bf16 with even D (the
 * params at dtype_i and d_i) so that they take the tiles; each must pass. */
static void fuzz_bf16_even_d(const char *name, uint64_t seed, int n, int dtype_i, int d_i) {
    const kk_op *op;
    kk_assert_ok(kk_op_find(name, &op));
    print_message("    %s fuzz seed %llu\n", name, (unsigned long long)seed);
    for (int i = 0; i < n; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(op, seed, i, KK_DIST_FULL, NULL, &c));
        c.params.i[dtype_i] = KK_DTYPE_BF16;
        c.params.i[d_i] &= ~(int64_t)1;
        const kk_run_options o = {.device = "cpu"};
        kk_case_result r;
        kk_assert_ok(kk_case_run(&c, &o, &r));
        if (r.status != KK_CASE_PASS) {
            char text[1024];
            kk_op_params_format(&c.params, text, sizeof text);
            fail_msg("%s fuzz case %d (%s): %s", name, i, text, r.message);
        }
    }
}

static void varlen_on_emulated_tiles(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const kk__att_kernels emu = emulated();
    kk__att_amx_test(&emu);
    for (size_t s = 0; s < sizeof varlen_shapes / sizeof varlen_shapes[0]; s++) {
        char text[256];
        snprintf(text, sizeof text, "%s dtype=bf16", varlen_shapes[s]);
        const long before = atomic_load(&products);
        const kk_case_result r = kk_test_run_cpu_case("attention_varlen", text, NULL, 3000 + s);
        assert_int_equal(r.status, KK_CASE_PASS);
        assert_true(atomic_load(&products) > before); /* the tiles ran */
    }
    /* odd D: the f32 products, no tiles */
    const long before = atomic_load(&products);
    assert_int_equal(kk_test_run_cpu_case("attention_varlen",
                                          "Hq=2 Hkv=1 D=17 dtype=bf16 seqlens_q=5:40 "
                                          "seqlens_k=9:77",
                                          NULL, 5)
                         .status,
                     KK_CASE_PASS);
    assert_int_equal(atomic_load(&products), before);
    /* random cases of the op's fuzz stream, made bf16 with even D */
    fuzz_bf16_even_d("attention_varlen", 20261129, 40, KK__AVL_DTYPE, KK__AVL_D);
    kk__att_amx_test(NULL);
}

/* On the tiles too, each sequence of the packed batch has the bits of a
 * B = 1 attention of that sequence alone (both on the emulated tiles); the
 * sequences run start at odd keys (51, 59, 159). */
static void varlen_sequences_alone_on_emulated_tiles(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    enum { HQ = 4, HKV = 2, DIM = 72, NSEQ = 4, TQ = 138, TK = 223 };
    static const int lq[NSEQ] = {37, 0, 100, 1}, lk[NSEQ] = {51, 8, 100, 64};
    const kk_op *vop, *aop;
    kk_op_params p, a;
    kk_assert_ok(kk_op_find("attention_varlen", &vop));
    kk_assert_ok(kk_op_find("attention", &aop));
    kk_assert_ok(kk_op_params_parse(vop,
                                    "Hq=4 Hkv=2 D=72 causal=1 lse=1 dtype=bf16 window_left=40 "
                                    "seqlens_q=37:0:100:1 seqlens_k=51:8:100:64",
                                    &p));
    static uint16_t q[HQ * TQ * DIM], k[HKV * TK * DIM], v[HKV * TK * DIM], o[HQ * TQ * DIM];
    static uint16_t sq[HQ * 100 * DIM], sk[HKV * 100 * DIM], sv[HKV * 100 * DIM],
        so[HQ * 100 * DIM];
    static float lse[HQ * TQ], slse[HQ * 100];
    static int32_t cq[NSEQ + 1], ck[NSEQ + 1];
    kk_assert_ok(kk_case_fill_inputs(&p, 17, KK_DIST_FULL, (void *[]){q, k, v, cq, ck}));
    const kk__att_kernels emu = emulated();
    kk__att_amx_test(&emu);
    kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, cq, ck, o, lse}));
    const size_t row = DIM * sizeof(uint16_t);
    long unlike = 0;
    for (int s = 0; s < NSEQ; s++) {
        if (!lq[s] || !lk[s]) continue;
        char text[256];
        snprintf(text, sizeof text,
                 "B=1 Hq=4 Hkv=2 Sq=%d Sk=%d D=72 causal=1 lse=1 dtype=bf16 window_left=40", lq[s],
                 lk[s]);
        kk_assert_ok(kk_op_params_parse(aop, text, &a));
        /* [1,H,total,D] rows of the sequence into [1,H,S,D] */
        for (int h = 0; h < HQ; h++)
            memcpy(sq + h * lq[s] * DIM, q + (h * TQ + cq[s]) * DIM, lq[s] * row);
        for (int h = 0; h < HKV; h++) {
            memcpy(sk + h * lk[s] * DIM, k + (h * TK + ck[s]) * DIM, lk[s] * row);
            memcpy(sv + h * lk[s] * DIM, v + (h * TK + ck[s]) * DIM, lk[s] * row);
        }
        kk_assert_ok(kk_run_kernel_host(&a, "cpu", (void *[]){sq, sk, sv, so, slse}));
        for (int h = 0; h < HQ; h++)
            unlike += memcmp(so + h * lq[s] * DIM, o + (h * TQ + cq[s]) * DIM, lq[s] * row) != 0 ||
                      memcmp(slse + h * lq[s], lse + h * TQ + cq[s], lq[s] * sizeof(float)) != 0;
    }
    kk__att_amx_test(NULL);
    assert_int_equal(unlike, 0);
}

/* Random cases of the op's fuzz stream (seed printed), made bf16 with even
 * D so that they take the tiles. */
static void fuzz_on_emulated_tiles(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const kk__att_kernels emu = emulated();
    kk__att_amx_test(&emu);
    const long before = atomic_load(&products);
    fuzz_bf16_even_d("attention", 20261128, 100, KK__ATT_DTYPE, KK__ATT_D);
    assert_true(atomic_load(&products) > before + 100);
    kk__att_amx_test(NULL);
}

/* Against the vdpbf16ps pair path: close, not bit for bit the same (the
 * blocks of 64 keys instead of 60 move the running max each block's weights
 * are rounded to bf16 against; with blocks of 60 the emulated tiles give the
 * same bits, measured); each row is one thread's, so 1 and 3 threads agree. */
static void close_to_the_vdpbf16ps_path(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find("attention", &op));
    kk_assert_ok(kk_op_params_parse(
        op, "B=1 Hq=4 Hkv=2 Sq=100 Sk=300 D=72 causal=1 dtype=bf16 dropout=0.2 seed=3", &p));
    enum { NO = 4 * 100 * 72, NKV = 2 * 300 * 72 };
    static uint16_t q[NO], k[NKV], v[NKV], o[3][NO];
    kk_assert_ok(kk_case_fill_inputs(&p, 11, KK_DIST_FULL, (void *[]){q, k, v}));
    const kk__att_kernels emu = emulated();
    kk__cpu_isa_cap(KK__ISA_AVX512_BF16); /* vdpbf16ps, also on a CPU with AMX */
    kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o[0]}));
    kk__cpu_isa_cap(-1);
    kk__att_amx_test(&emu);
    for (int t = 1; t < 3; t++) {
        kk_assert_ok(kk_cpu_set_num_threads(t == 1 ? 1 : 3));
        kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o[t]}));
    }
    kk_assert_ok(kk_cpu_set_num_threads(0));
    kk__att_amx_test(NULL);
    assert_memory_not_equal(o[0], o[1], sizeof o[0]);
    assert_memory_equal(o[1], o[2], sizeof o[0]);
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < NO; i++) {
        const double x = kk_bf16_to_f32(o[0][i]), y = kk_bf16_to_f32(o[1][i]);
        diff += (x - y) * (x - y);
        norm += x * x;
    }
    print_message("    amx (emulated) against vdpbf16ps: relative L2 %.3g\n", sqrt(diff / norm));
    assert_true(sqrt(diff / norm) < 1e-2);
}

/* ---- broken products must fail the check ---- */

typedef void (*scores_fn)(float *s, int64_t lds, const uint32_t *k, int64_t ldk, const uint32_t *qp,
                          int64_t ldq, int nk, int ncols, int kp, float scale);
typedef void (*values_fn)(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv, const float *s,
                          int64_t lds, uint32_t *pp, int nk, int ncols, int dp, const float *alpha);

/* The two bf16 values of every pair swapped: q's pairs along D in the
 * scores, two keys' rows of V in P.V. */
static uint32_t *swapped_copy(const uint32_t *x, int64_t ld, int rows, int cols) {
    uint32_t *sw = malloc(sizeof(uint32_t) * (size_t)(rows * ld));
    assert_non_null(sw);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) sw[r * ld + c] = x[r * ld + c] >> 16 | x[r * ld + c] << 16;
    return sw;
}

static void swapped_scores(float *s, int64_t lds, const uint32_t *k, int64_t ldk,
                           const uint32_t *qp, int64_t ldq, int nk, int ncols, int kp,
                           float scale) {
    uint32_t *sw = swapped_copy(qp, ldq, kp, ncols);
    kk__att_tile_scores_amx_emu(s, lds, k, ldk, sw, ldq, nk, ncols, kp, scale);
    free(sw);
}

static void swapped_values(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv, const float *s,
                           int64_t lds, uint32_t *pp, int nk, int ncols, int dp,
                           const float *alpha) {
    uint32_t *sw = swapped_copy(vt, ldv, dp, (nk + 1) / 2);
    kk__att_tile_values_amx_emu(ot, ldo, sw, ldv, s, lds, pp, nk, ncols, dp, alpha);
    free(sw);
}

/* Every other P.V product left out, only its rescale done: a key block
 * dropped. */
static void dropped_block(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv, const float *s,
                          int64_t lds, uint32_t *pp, int nk, int ncols, int dp,
                          const float *alpha) {
    static _Thread_local long calls;
    if (calls++ % 2) {
        for (int d = 0; d < dp; d++)
            for (int c = 0; c < ncols; c++) ot[d * ldo + c] *= alpha[c];
        return;
    }
    kk__att_tile_values_amx_emu(ot, ldo, vt, ldv, s, lds, pp, nk, ncols, dp, alpha);
}

/* The last tile of pairs left out where it is not whole: D's last values in
 * the scores (D / 2 past 16), the keys of the last short block in P.V. */
static void dropped_edge_scores(float *s, int64_t lds, const uint32_t *k, int64_t ldk,
                                const uint32_t *qp, int64_t ldq, int nk, int ncols, int kp,
                                float scale) {
    kk__att_tile_scores_amx_emu(s, lds, k, ldk, qp, ldq, nk, ncols, kp > 16 ? kp / 16 * 16 : kp,
                                scale);
}

static void dropped_edge_values(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv,
                                const float *s, int64_t lds, uint32_t *pp, int nk, int ncols,
                                int dp, const float *alpha) {
    kk__att_tile_values_amx_emu(ot, ldo, vt, ldv, s, lds, pp, nk - nk % 32, ncols, dp, alpha);
}

static void broken_products_fail(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const kk__att_kernels good = emulated();
    static const struct {
        const char *name;
        scores_fn scores; /* the broken product, the other NULL */
        values_fn values;
    } broken[] = {{"q's pairs swapped", swapped_scores, NULL},
                  {"V's pairs of keys swapped", NULL, swapped_values},
                  {"a key block dropped", NULL, dropped_block},
                  {"D's edge tile dropped", dropped_edge_scores, NULL},
                  {"a short block's last keys dropped", NULL, dropped_edge_values}};
    static const char *const cases[][2] = {
        {"attention", "B=1 Hq=4 Hkv=2 Sq=50 Sk=200 D=72 causal=1 lse=1 dtype=bf16"},
        {"attention", "B=1 Hq=2 Hkv=1 Sq=77 Sk=150 D=80 dtype=bf16"},
        {"attention_varlen", "Hq=4 Hkv=2 D=72 causal=1 lse=1 dtype=bf16 seqlens_q=50:3:77 "
                             "seqlens_k=200:9:150"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kk__att_kernels k = good;
        kk__att_amx_test(&k);
        assert_int_equal(kk_test_run_cpu_case(cases[c][0], cases[c][1], NULL, 31).status,
                         KK_CASE_PASS);
        for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
            k = good;
            if (broken[i].scores) k.tile_scores = broken[i].scores;
            if (broken[i].values) k.tile_values = broken[i].values;
            const kk_case_result r = kk_test_run_cpu_case(cases[c][0], cases[c][1], NULL, 31);
            print_message("    %s: relative L2 %.3g\n", broken[i].name, r.rel_l2_err);
            assert_int_equal(r.status, KK_CASE_FAIL);
        }
        kk__att_amx_test(NULL);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(product_is_exact),
        cmocka_unit_test(attention_on_emulated_tiles),
        cmocka_unit_test(fuzz_on_emulated_tiles),
        cmocka_unit_test(close_to_the_vdpbf16ps_path),
        cmocka_unit_test(broken_products_fail),
        cmocka_unit_test(varlen_on_emulated_tiles),
        cmocka_unit_test(varlen_sequences_alone_on_emulated_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
    printf("skipped: no AMX code in this build (x86-64, gcc 11 or clang 12)\n");
    return 77;
}

#endif

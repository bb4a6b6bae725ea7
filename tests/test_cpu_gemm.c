/* labels: unit cpu */
/* The CPU gemm and linear kernels (src/cpu/gemm_cpu.c, linear_cpu.c): run
 * through kk_op_run by the harness's runner on odd shapes, every dtype and
 * activation, against the float64 reference with the op's tolerance; with
 * blocks and panels small enough that every block edge is crossed; and the
 * same checker failing deliberately wrong kernels. Then the accuracy of the
 * vectorizable exp/erf/GELU/SiLU of cpu_gemm_internal.h against libm. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_isa.h"
#include "opdef/all_ops.h"
#include "cpu/cpu_kernels.h"
#include "kernelkit/cases.h"

/* Run `params` of `row` (a registry row or a copy with another kernel) as a
 * harness case: seeded inputs, poisoned outputs, the kernel through kk_op_run,
 * the check against the reference with the row's tolerance. */
static kk_case_result run_case(const kk_op *row, const char *params, uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test/%s", row->name);
    kk_assert_ok(kk_op_params_parse(row, params, &c.params));
    c.seed = seed;
    c.dist = KK_DIST_FULL;
    kk_run_options o = {.device = "cpu"};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    return r;
}

static const kk_op *find(const char *name) {
    const kk_op *op = NULL;
    kk_assert_ok(kk_op_find(name, &op));
    return op;
}

static void expect_pass(const kk_op *row, const char *params, uint64_t seed) {
    const kk_case_result r = run_case(row, params, seed);
    if (r.status != KK_CASE_PASS)
        fail_msg("%s %s: %s %s", row->name, params, kk_case_status_name(r.status), r.message);
}

static void expect_fail(const kk_op *row, const char *params, uint64_t seed) {
    const kk_case_result r = run_case(row, params, seed);
    if (r.status != KK_CASE_FAIL)
        fail_msg("wrong %s kernel passed %s: %s (rel_l2 %g)", row->name, params,
                 kk_case_status_name(r.status), r.rel_l2_err);
}

static const char *const dtypes[] = {"f32", "f16", "bf16"};
static const char *const acts[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu", "swiglu"};

static void gemm_odd_shapes(void **state) {
    (void)state;
    static const char *const shapes[] = {"M=1 N=1 K=1", "M=37 N=3 K=129", "M=1 N=2500 K=7",
                                         "M=129 N=65 K=300", "M=300 N=17 K=1"};
    for (size_t d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            char text[128];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            expect_pass(find("gemm"), text, 100 + s);
        }
}

static void linear_every_activation(void **state) {
    (void)state;
    for (size_t d = 0; d < 3; d++)
        for (size_t a = 0; a < 6; a++)
            for (int bias = 0; bias < 2; bias++) {
                char text[160];
                snprintf(text, sizeof text, "M=%d N=%d K=%d bias=%d activation=%s dtype=%s",
                         17 + (int)a, 2100 + (int)d, 33, bias, acts[a], dtypes[d]);
                expect_pass(find("linear"), text, 7 * a + d + 1000u * (unsigned)bias);
            }
}

/* The residual is added after the activation, for every dtype, with and
 * without bias, and for SwiGLU too. */
static void linear_residual(void **state) {
    (void)state;
    for (size_t d = 0; d < 3; d++)
        for (size_t a = 0; a < 6; a += 2) {
            char text[192];
            snprintf(text, sizeof text, "M=%d N=%d K=%d bias=%d activation=%s dtype=%s residual=1",
                     19 + (int)a, 130 + (int)d, 45, (int)(a / 2 % 2), acts[a], dtypes[d]);
            expect_pass(find("linear"), text, 3000u + 7 * (unsigned)a + (unsigned)d);
        }
}

/* Blocks of 5 rows and panels of 7 weight rows: every product is cut into
 * pieces whose edges fall anywhere, for every dtype and for both weights of
 * SwiGLU; with M = 1 the one row is split into epilogue chunks instead. */
static void every_block_edge(void **state) {
    (void)state;
    kk__cpu_gemm_set_blocking(5, 7);
    for (size_t d = 0; d < 3; d++) {
        char text[160];
        snprintf(text, sizeof text, "M=23 N=31 K=19 dtype=%s", dtypes[d]);
        expect_pass(find("gemm"), text, 1 + d);
        snprintf(text, sizeof text, "M=23 N=31 K=19 bias=1 activation=swiglu dtype=%s", dtypes[d]);
        expect_pass(find("linear"), text, 11 + d);
        snprintf(text, sizeof text, "M=11 N=9 K=40 bias=1 activation=gelu_erf dtype=%s", dtypes[d]);
        expect_pass(find("linear"), text, 21 + d);
    }
    kk__cpu_gemm_set_blocking(0, 0);
    expect_pass(find("linear"), "M=1 N=4500 K=9 bias=1 activation=silu dtype=bf16", 31);
}

/* Thread counts do not change the answer beyond the tolerance: 1 and 3. */
static void any_thread_count(void **state) {
    (void)state;
    const int before = kk_cpu_num_threads();
    for (int n = 1; n <= 3; n += 2) {
        kk_assert_ok(kk_cpu_set_num_threads(n));
        expect_pass(find("linear"), "M=70 N=45 K=64 bias=1 activation=gelu_tanh dtype=f32", 5);
        expect_pass(find("gemm"), "M=70 N=45 K=64 dtype=bf16", 6);
    }
    kk_assert_ok(kk_cpu_set_num_threads(before));
}

/* ---- the bf16 product with AVX512_BF16 (gemm_bf16_cpu.c) ---- */

/* Every instruction-set level the CPU has, each forced by the cap: bf16 gemm
 * and linear on shapes that cut the 6 x 64 micro-tile, the 128-column work
 * item (64 columns of each of SwiGLU's two weights) and the 1024-value k block
 * anywhere (odd K too). */
static void bf16_at_every_level(void **state) {
    (void)state;
    static const char *const shapes[] = {"M=13 N=33 K=1", "M=25 N=31 K=3", "M=97 N=257 K=513",
                                         "M=193 N=65 K=1025", "M=1 N=300 K=64"};
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++) {
        kk__cpu_isa_cap(isa);
        assert_int_equal(kk__cpu_gemm_bf16_available(), isa >= KK__ISA_AVX512_BF16);
        const long amx_before = kk__cpu_gemm_bf16_amx_runs();
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            char text[160];
            snprintf(text, sizeof text, "%s dtype=bf16", shapes[s]);
            expect_pass(find("gemm"), text, 40 + s);
            snprintf(text, sizeof text, "%s bias=1 activation=swiglu dtype=bf16", shapes[s]);
            expect_pass(find("linear"), text, 50 + s);
        }
        /* the tiles ran exactly at the amx level */
        assert_int_equal(kk__cpu_gemm_bf16_amx_runs() > amx_before, isa >= KK__ISA_AMX);
    }
    kk__cpu_isa_cap(-1);
}

/* ---- the bf16 product on AMX tiles (gemm_bf16_amx.c) ---- */

static int no_amx(void) {
    if (kk__cpu_isa_supported() >= KK__ISA_AMX) return 0;
    print_message("skipped: no AMX-BF16 here, or the kernel refused the tiles (level %s)\n",
                  kk__cpu_isa_name(kk__cpu_isa_supported()));
    return 1;
}

/* At the amx level: shapes whose M, N and K cut the 16-row, 32-column and
 * 32-k tiles, the 128 x 256 work item and the 512-value k block anywhere, gemm
 * and Linear with every epilogue (bias, each activation, SwiGLU, residual),
 * against the float64 reference with the op's tolerance; the tiles counted. */
static void amx_against_reference(void **state) {
    (void)state;
    if (no_amx()) skip();
    kk__cpu_isa_cap(KK__ISA_AMX);
    const long before = kk__cpu_gemm_bf16_amx_runs();
    static const int sizes[] = {1, 17, 33, 100, 257};
    unsigned seed = 70;
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 5; j++)
            for (size_t k = 0; k < 5; k++) {
                char text[160];
                snprintf(text, sizeof text, "M=%d N=%d K=%d dtype=bf16", sizes[i], sizes[j],
                         sizes[k]);
                expect_pass(find("gemm"), text, seed++);
            }
    static const char *const big[] = {"M=129 N=300 K=1100", "M=300 N=513 K=545", "M=16 N=32 K=32",
                                      "M=257 N=257 K=1025"};
    for (size_t s = 0; s < 4; s++) {
        char text[192];
        snprintf(text, sizeof text, "%s dtype=bf16", big[s]);
        expect_pass(find("gemm"), text, seed++);
        for (size_t a = 0; a < 6; a++)
            for (int bias = 0; bias < 2; bias++) {
                snprintf(text, sizeof text, "%s bias=%d activation=%s dtype=bf16 residual=%d",
                         big[s], bias, acts[a], (int)((a + s) % 2));
                expect_pass(find("linear"), text, seed++);
            }
    }
    expect_pass(find("linear"), "M=1 N=4500 K=9 bias=1 activation=silu dtype=bf16", seed++);
    kk__cpu_gemm_set_blocking(5, 7);
    expect_pass(find("linear"), "M=23 N=31 K=19 bias=1 activation=swiglu dtype=bf16", seed++);
    kk__cpu_gemm_set_blocking(0, 0);
    for (int n = 1; n <= 3; n += 2) {
        const int threads = kk_cpu_num_threads();
        kk_assert_ok(kk_cpu_set_num_threads(n));
        expect_pass(find("linear"), "M=70 N=45 K=64 bias=1 activation=gelu_tanh dtype=bf16", 9);
        kk_assert_ok(kk_cpu_set_num_threads(threads));
    }
    assert_true(kk__cpu_gemm_bf16_amx_runs() > before + 125);
    kk__cpu_isa_cap(-1);
}

/* A KK_CPU_ISA that names no level caps nothing and says so in a warning. */
static int isa_warnings;
static void count_isa_warning(const kk_log_record *r, void *user) {
    (void)user;
    isa_warnings += r->level == KK_LOG_WARN && strstr(r->message, "KK_CPU_ISA") != NULL;
}

static void unknown_isa_is_logged(void **state) {
    (void)state;
    kk_log_set_sink(count_isa_warning, NULL);
    setenv("KK_CPU_ISA", "avx2x", 1);
    assert_int_equal(kk__cpu_isa(), kk__cpu_isa_supported());
    unsetenv("KK_CPU_ISA");
    kk_log_set_sink(NULL, NULL);
    assert_int_equal(isa_warnings, 1);
}

/* Small integers in bf16 make every product and every partial sum exact in
 * f32, so the packed kernel (vdpbf16ps, or the AMX tiles) must give exactly
 * the integer result, on strided operands and an output with a leading
 * dimension past n. */
static void product_is_exact(void) {
    enum { M = 200, N = 290, K = 1101, LDA = K + 3, LDB = K + 1, LDC = N + 5 };
    uint16_t *a = malloc(sizeof(uint16_t) * M * LDA), *b = malloc(sizeof(uint16_t) * N * LDB);
    float *c = malloc(sizeof(float) * M * LDC);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    for (int i = 0; i < M * LDA; i++) a[i] = kk_f32_to_bf16((float)((i * 7) % 9 - 4));
    for (int i = 0; i < N * LDB; i++) b[i] = kk_f32_to_bf16((float)((i * 5) % 7 - 3));
    for (int i = 0; i < M * LDC; i++) c[i] = -12345.0f; /* the columns past N must stay */
    kk_assert_ok(kk__cpu_gemm_bf16(M, N, K, a, LDA, b, LDB, c, LDC, NULL, NULL));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < LDC; j++) {
            double want = -12345.0;
            if (j < N) {
                want = 0.0;
                for (int k = 0; k < K; k++)
                    want += (double)kk_bf16_to_f32(a[i * LDA + k]) * kk_bf16_to_f32(b[j * LDB + k]);
            }
            if (c[i * LDC + j] != want)
                fail_msg("c[%d][%d] = %g, want %g (%s)", i, j, c[i * LDC + j], want,
                         kk__cpu_isa_name(kk__cpu_isa()));
        }
    free(a), free(b), free(c);
}

static void bf16_product_is_exact(void **state) {
    (void)state;
    if (kk__cpu_isa_supported() < KK__ISA_AVX512_BF16) skip();
    kk__cpu_isa_cap(KK__ISA_AVX512_BF16); /* the vdpbf16ps kernel */
    product_is_exact();
    kk__cpu_isa_cap(-1);
}

static void amx_product_is_exact(void **state) {
    (void)state;
    if (no_amx()) skip();
    kk__cpu_isa_cap(KK__ISA_AMX);
    const long before = kk__cpu_gemm_bf16_amx_runs();
    product_is_exact();
    assert_int_equal(kk__cpu_gemm_bf16_amx_runs(), before + 1);
    kk__cpu_isa_cap(-1);
}

/* Two weights over one a (SwiGLU's products), exact on small integers: with
 * the products in the caller's c0 and c1 (row stride past n), and with c0
 * NULL, where they exist only in the kernel's per-thread tiles handed to the
 * callback; every element reaches the callback exactly once, both tiles
 * together. K = 1101: odd, and two k blocks; 200 rows cut the 6-row
 * micro-tile and the 24-row epilogue group, 290 columns the work items. */
typedef struct pair_seen {
    int64_t n;
    float *out0, *out1;
    unsigned char *hit;
    int bad;
} pair_seen;

static void pair_tile(void *ctx, float *c0, float *c1, int64_t ldc, int64_t i0, int64_t rows,
                      int64_t j0, int64_t cols) {
    pair_seen *s = ctx;
    if (!c0 || (s->out1 && !c1) || rows < 1 || cols < 1) s->bad = 1;
    for (int64_t i = 0; i < rows && !s->bad; i++)
        for (int64_t j = 0; j < cols; j++) {
            const int64_t at = (i0 + i) * s->n + j0 + j;
            s->hit[at]++;
            s->out0[at] = c0[i * ldc + j];
            if (s->out1) s->out1[at] = c1[i * ldc + j];
        }
}

static void pair_is_exact(void) {
    enum { M = 200, N = 290, K = 1101, LDA = K + 3, LDB = K + 1, LDC = N + 5 };
    uint16_t *a = malloc(sizeof(uint16_t) * M * LDA);
    uint16_t *b[2] = {malloc(sizeof(uint16_t) * N * LDB), malloc(sizeof(uint16_t) * N * LDB)};
    float *c[2] = {malloc(sizeof(float) * M * LDC), malloc(sizeof(float) * M * LDC)};
    float *out[2] = {malloc(sizeof(float) * M * N), malloc(sizeof(float) * M * N)};
    unsigned char *hit = malloc((size_t)M * N);
    assert_true(a && b[0] && b[1] && c[0] && c[1] && out[0] && out[1] && hit);
    for (int i = 0; i < M * LDA; i++) a[i] = kk_f32_to_bf16((float)((i * 7) % 9 - 4));
    for (int i = 0; i < N * LDB; i++) {
        b[0][i] = kk_f32_to_bf16((float)((i * 5) % 7 - 3));
        b[1][i] = kk_f32_to_bf16((float)((i * 3) % 5 - 2));
    }
    for (int own = 0; own < 2; own++)
        for (int two = 0; two < 2; two++) {
            pair_seen s = {N, out[0], two ? out[1] : NULL, hit, 0};
            memset(hit, 0, (size_t)M * N);
            for (int i = 0; i < M * N; i++) out[0][i] = out[1][i] = NAN;
            kk_assert_ok(kk__cpu_gemm_bf16_pair(M, N, K, a, LDA, b[0], two ? b[1] : NULL, LDB,
                                                own ? NULL : c[0], own || !two ? NULL : c[1], LDC,
                                                pair_tile, &s));
            assert_false(s.bad);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    assert_int_equal(hit[i * N + j], 1);
                    for (int w = 0; w < 1 + two; w++) {
                        double want = 0.0;
                        for (int k = 0; k < K; k++)
                            want += (double)kk_bf16_to_f32(a[i * LDA + k]) *
                                    kk_bf16_to_f32(b[w][j * LDB + k]);
                        if (out[w][i * N + j] != want)
                            fail_msg("own %d two %d: c%d[%d][%d] = %g, want %g (%s)", own, two, w,
                                     i, j, out[w][i * N + j], want,
                                     kk__cpu_isa_name(kk__cpu_isa()));
                    }
                }
        }
    free(a), free(b[0]), free(b[1]), free(c[0]), free(c[1]), free(out[0]), free(out[1]);
    free(hit);
}

static void bf16_pair_is_exact(void **state) {
    (void)state;
    if (kk__cpu_isa_supported() < KK__ISA_AVX512_BF16) skip();
    kk__cpu_isa_cap(KK__ISA_AVX512_BF16);
    pair_is_exact();
    kk__cpu_isa_cap(-1);
}

static void amx_pair_is_exact(void **state) {
    (void)state;
    if (no_amx()) skip();
    kk__cpu_isa_cap(KK__ISA_AMX);
    const long before = kk__cpu_gemm_bf16_amx_runs();
    pair_is_exact();
    assert_true(kk__cpu_gemm_bf16_amx_runs() > before);
    kk__cpu_isa_cap(-1);
}

/* ---- wrong kernels: the same checker must fail them ---- */

/* gelu_tanh where gelu_erf is asked: they differ by at most 4.7e-4. */
static void tanh_row(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                     int64_t cols) {
    const float *bias = job->ctx;
    for (int64_t j = 0; j < cols; j++) c[0][j] = kk__gelu_tanh(c[0][j] + bias[n0 + j]);
    (void)m;
}

static kk_status wrong_gelu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const kk__gemm_job job = {.M = p->i[KK__LIN_M],
                              .N = p->i[KK__LIN_N],
                              .K = p->i[KK__LIN_K],
                              .a = t[0]->data,
                              .a_dtype = KK_DTYPE_F32,
                              .b = {t[1]->data},
                              .b_dtype = KK_DTYPE_F32,
                              .nweights = 1,
                              .c_direct = t[3]->data,
                              .row = tanh_row,
                              .ctx = t[2]->data};
    return kk__cpu_gemm_run(&job, "wrong_gelu");
}

/* The last column of every epilogue piece is never written (poison stays). */
static void short_row(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                      int64_t cols) {
    kk__cpu_store_row(c[0], ((kk_tensor *)job->ctx)->data, KK_DTYPE_BF16, m * job->N + n0,
                      cols - 1);
}

static kk_status wrong_short(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const kk__gemm_job job = {.M = p->i[KK__GEMM_M],
                              .N = p->i[KK__GEMM_N],
                              .K = p->i[KK__GEMM_K],
                              .a = t[0]->data,
                              .a_dtype = KK_DTYPE_BF16,
                              .b = {t[1]->data},
                              .b_dtype = KK_DTYPE_BF16,
                              .nweights = 1,
                              .row = short_row,
                              .ctx = t[2]};
    return kk__cpu_gemm_run(&job, "wrong_short");
}

/* The real kernel with the SwiGLU weights swapped (gate <-> up). */
static kk_status wrong_swiglu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_tensor *swapped[KK_OP_MAX_TENSORS];
    memcpy(swapped, t, sizeof swapped);
    swapped[1] = t[2];
    swapped[2] = t[1];
    return kk__linear_cpu(p, swapped, s);
}

/* The real kernel told there is no residual: y misses r. */
static kk_status wrong_residual(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__LIN_RESIDUAL] = 0;
    const kk__linear_layout l = kk__linear_layout_of(p);
    kk_tensor *v[KK_OP_MAX_TENSORS];
    int n = 0;
    for (int k = 0; k < l.count; k++)
        if (k != l.residual) v[n++] = t[k];
    return kk__linear_cpu(&q, v, s);
}

/* The real kernel told K - 1: each sum misses a term, and a and b are read
 * with the wrong row stride. */
static kk_status wrong_k(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__GEMM_K] -= 1;
    kk_tensor *v[3];
    kk_assert_ok(kk_tensor_wrap("cpu", t[0]->dtype, 2,
                                (int64_t[]){q.i[KK__GEMM_M], q.i[KK__GEMM_K]}, NULL, t[0]->data,
                                &v[0]));
    kk_assert_ok(kk_tensor_wrap("cpu", t[1]->dtype, 2,
                                (int64_t[]){q.i[KK__GEMM_N], q.i[KK__GEMM_K]}, NULL, t[1]->data,
                                &v[1]));
    v[2] = t[2];
    kk_status st = kk__gemm_cpu(&q, v, s);
    kk_tensor_destroy(v[0]);
    kk_tensor_destroy(v[1]);
    return st;
}

static kk_op with_kernel(const char *name, kk_op_kernel_fn fn) {
    kk_op row = *find(name);
    kk__op_swap_none(&row);
    kk__op_swap(&row, KK_BACKEND_CPU, fn);
    return row;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    kk_op row = with_kernel("linear", wrong_gelu);
    expect_fail(&row, "M=40 N=50 K=64 bias=1 activation=gelu_erf dtype=f32", 3);
    expect_pass(&row, "M=40 N=50 K=64 bias=1 activation=gelu_tanh dtype=f32", 3); /* it is tanh */
    row = with_kernel("gemm", wrong_short);
    const kk_case_result r = run_case(&row, "M=9 N=30 K=8 dtype=bf16", 4);
    assert_int_equal(r.status, KK_CASE_FAIL);
    assert_int_equal(r.outputs[0].check.nonfinite_count, 9); /* one per row */
    row = with_kernel("linear", wrong_swiglu);
    for (size_t d = 0; d < 3; d++) {
        char text[128];
        snprintf(text, sizeof text, "M=8 N=16 K=32 bias=0 activation=swiglu dtype=%s", dtypes[d]);
        expect_fail(&row, text, 5 + d);
    }
    row = with_kernel("linear", wrong_residual);
    expect_fail(&row, "M=10 N=20 K=30 bias=1 activation=silu dtype=bf16 residual=1", 8);
    expect_pass(&row, "M=10 N=20 K=30 bias=1 activation=silu dtype=bf16 residual=0", 8);
    row = with_kernel("gemm", wrong_k);
    expect_fail(&row, "M=20 N=21 K=300 dtype=f32", 6);
    expect_fail(&row, "M=20 N=21 K=300 dtype=bf16", 6); /* the bf16 product where the CPU has it */
    if (kk__cpu_isa_supported() >= KK__ISA_AMX) {       /* and on the tiles */
        kk__cpu_isa_cap(KK__ISA_AMX);
        const long before = kk__cpu_gemm_bf16_amx_runs();
        expect_fail(&row, "M=20 N=21 K=300 dtype=bf16", 6);
        expect_fail(&row, "M=40 N=70 K=64 dtype=bf16", 7);
        assert_true(kk__cpu_gemm_bf16_amx_runs() >= before + 2);
        row = with_kernel("gemm", wrong_short);
        const kk_case_result t = run_case(&row, "M=9 N=30 K=8 dtype=bf16", 4);
        assert_int_equal(t.status, KK_CASE_FAIL);
        kk__cpu_isa_cap(-1);
    }
}

/* ---- the vectorizable math against libm ---- */

static void math_matches_libm(void **state) {
    (void)state;
    double erf_abs = 0, exp_rel = 0, gelu_rel = 0, tanh_rel = 0, silu_rel = 0;
    for (double x = -20.0; x <= 20.0; x += 1.0 / 4096) {
        const float f = (float)x;
        const double xd = f, s2pi = 0.7978845608028654;
        erf_abs = fmax(erf_abs, fabs(kk__erff(f) - erf(xd)));
        /* erfc and exp forms: 1 + erf and 1 + tanh cancel in double too */
        const double gelu = 0.5 * xd * erfc(-xd / sqrt(2.0));
        const double gtanh = xd / (1.0 + exp(-2.0 * s2pi * (xd + 0.044715 * xd * xd * xd)));
        const double silu = xd / (1.0 + exp(-xd));
        if (fabs(xd) <= 12.0 && fabs(gelu) > 0.0)
            gelu_rel = fmax(gelu_rel, fabs(kk__gelu_erf(f) - gelu) / fabs(gelu));
        assert_true(fabs(kk__gelu_erf(f) - gelu) <= 1e-30 + 2e-5 * fabs(gelu));
        if (fabs(gtanh) > 1e-30)
            tanh_rel = fmax(tanh_rel, fabs(kk__gelu_tanh(f) - gtanh) / fabs(gtanh));
        if (fabs(silu) > 1e-30) silu_rel = fmax(silu_rel, fabs(kk__silu(f) - silu) / fabs(silu));
    }
    for (double x = -87.0; x <= 88.0; x += 1.0 / 1024)
        exp_rel =
            fmax(exp_rel, fabs(kk__expf((float)x) - exp((double)(float)x)) / exp((double)(float)x));
    print_message("erf max abs %.3g, exp max rel %.3g, gelu_erf %.3g, gelu_tanh %.3g, silu %.3g\n",
                  erf_abs, exp_rel, gelu_rel, tanh_rel, silu_rel);
    assert_true(erf_abs < 5e-7);  /* measured 3.4e-7, near 0 where 1 - erfc cancels */
    assert_true(exp_rel < 2e-7);  /* measured 7.8e-8 */
    assert_true(gelu_rel < 2e-5); /* 1.7e-5 at x = -11.6: the f32 rounding of z^2 */
    assert_true(tanh_rel < 2e-5);
    assert_true(silu_rel < 1e-6);
    /* NaN stays NaN (and never reaches an int conversion); right limits */
    assert_true(isnan(kk__gelu_erf(NAN)) && isnan(kk__gelu_tanh(NAN)) && isnan(kk__silu(NAN)));
    assert_true(kk__gelu_erf(100.0f) == 100.0f && kk__gelu_erf(-100.0f) == 0.0f);
    assert_true(kk__silu(-1000.0f) <= 0.0f && kk__silu(1000.0f) == 1000.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_odd_shapes),       cmocka_unit_test(linear_every_activation),
        cmocka_unit_test(linear_residual),       cmocka_unit_test(every_block_edge),
        cmocka_unit_test(any_thread_count),      cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(math_matches_libm),     cmocka_unit_test(bf16_at_every_level),
        cmocka_unit_test(bf16_product_is_exact), cmocka_unit_test(unknown_isa_is_logged),
        cmocka_unit_test(amx_against_reference), cmocka_unit_test(amx_product_is_exact),
        cmocka_unit_test(bf16_pair_is_exact),    cmocka_unit_test(amx_pair_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

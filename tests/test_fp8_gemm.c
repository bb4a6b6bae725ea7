/* labels: unit cpu */
/* The fp8_gemm op (src/opdef/fp8_gemm.c) and its CPU kernel
 * (src/cpu/fp8_gemm_cpu.c), in each scaling mode (tensor, rowwise, block):
 * the registry row, a hand-computed case per mode, kk_quantize's 1x128 and
 * 128x128 output taken as is, odd shapes in every operand/output combination
 * against the float64 reference with the op's tolerance, fuzz cases, e5m2 x
 * e5m2 refused, and the same checker failing deliberately wrong kernels. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_kernels.h"
#include "opdef/fp8_gemm.h"
#include "kernelkit/cases.h"
#include "kernelkit/ops.h"
#include "kernelkit/quant.h"

static const kk_op *fp8_op(void) {
    const kk_op *op = NULL;
    kk_assert_ok(kk_op_find("fp8_gemm", &op));
    return op;
}

static kk_case_result run_case(const kk_op *row, const char *params, uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test/fp8_gemm");
    kk_assert_ok(kk_op_params_parse(row, params, &c.params));
    c.seed = seed;
    kk_run_options o = {.device = "cpu"};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    return r;
}

static void expect(const kk_op *row, const char *params, uint64_t seed, kk_case_status want) {
    const kk_case_result r = run_case(row, params, seed);
    if (r.status != want)
        fail_msg("%s: %s, expected %s (%s, rel_l2 %g)", params, kk_case_status_name(r.status),
                 kk_case_status_name(want), r.message, r.rel_l2_err);
}

static void row_is_registered(void **state) {
    (void)state;
    const kk_op *op = fp8_op();
    assert_non_null(kk__op_slot(op, KK_BACKEND_CPU).run);
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(op, "M=3 N=5 K=7 a_dtype=fp8_e5m2 c_dtype=f32", &p));
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    assert_int_equal(n, 5);
    assert_int_equal(t[0].dtype, KK_DTYPE_FP8_E5M2);
    assert_int_equal(t[1].dtype, KK_DTYPE_FP8_E4M3);
    assert_int_equal(t[2].numel, 1);
    assert_int_equal(t[3].dtype, KK_DTYPE_F32);
    assert_int_equal(t[4].dtype, KK_DTYPE_F32);
    assert_true(t[4].is_output && t[4].numel == 15);
    assert_true(kk_op_flops(&p) == 2.0 * 3 * 5 * 7);
    assert_true(kk_op_bytes(&p) == 21 + 35 + 4 + 4 + 60);
    kk_tolerance tol;
    kk_assert_ok(kk_op_tolerance(op, KK_DTYPE_BF16, &tol));
    assert_true(tol.rtol < 1e-2);
    assert_int_equal(p.i[KK__FP8_SCALING], KK__FP8_TENSOR); /* the default */

    kk_assert_ok(kk_op_params_parse(op, "M=3 N=5 K=7 scaling=rowwise", &p));
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    assert_int_equal(n, 5);
    assert_true(t[2].ndim == 1 && t[2].shape[0] == 3 && t[3].ndim == 1 && t[3].shape[0] == 5);
    assert_true(kk_op_bytes(&p) == 21 + 35 + 12 + 20 + 30);
    /* block: a [3,300] has 3 groups along K, b [130,300] 2x3 blocks */
    kk_assert_ok(kk_op_params_parse(op, "M=3 N=130 K=300 scaling=block c_dtype=f32", &p));
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    assert_true(t[2].ndim == 2 && t[2].shape[0] == 3 && t[2].shape[1] == 3);
    assert_true(t[3].ndim == 2 && t[3].shape[0] == 2 && t[3].shape[1] == 3);
    assert_true(kk_op_flops(&p) == 2.0 * 3 * 130 * 300);
    assert_true(kk_op_bytes(&p) == 900 + 39000 + 36 + 24 + 4 * 390);
    kk_assert_status(kk_op_params_parse(op, "scaling=channel", &p), KK_ERR_INVALID_ARGUMENT);
}

static void e5m2_pair_refused(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_status(kk_op_params_parse(fp8_op(), "a_dtype=fp8_e5m2 b_dtype=fp8_e5m2", &p),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "b_dtype");
    kk_assert_contains(kk_last_error_message(), "e5m2 x e5m2");
    kk_assert_status(kk_op_params_parse(fp8_op(), "c_dtype=f16", &p), KK_ERR_INVALID_ARGUMENT);
}

/* c = 2 * 0.25 * (1.5 * 0.5 + -2 * 4) = -3.625, exact in bf16. */
static void hand_computed(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(fp8_op(), "M=1 N=1 K=2 c_dtype=bf16", &p));
    uint8_t a[2] = {kk_f32_to_e4m3(1.5f), kk_f32_to_e4m3(-2.0f)};
    uint8_t b[2] = {kk_f32_to_e4m3(0.5f), kk_f32_to_e4m3(4.0f)};
    float sa = 2.0f, sb = 0.25f;
    uint16_t c = 0;
    kk_tensor *t[5];
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 2, (int64_t[]){1, 2}, NULL, a, &t[0]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 2, (int64_t[]){1, 2}, NULL, b, &t[1]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){1}, NULL, &sa, &t[2]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){1}, NULL, &sb, &t[3]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 2, (int64_t[]){1, 1}, NULL, &c, &t[4]));
    kk_assert_ok(kk_op_run(&p, t, NULL));
    assert_true(kk_bf16_to_f32(c) == -3.625f);
    const double in[4][2] = {{1.5, -2.0}, {0.5, 4.0}, {2.0}, {0.25}};
    double ref = 0.0;
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){in[0], in[1], in[2], in[3]},
                                 (double *const[]){&ref}));
    assert_true(ref == -3.625);
    for (int i = 0; i < 5; i++) kk_tensor_destroy(t[i]);
}

/* Wraps host buffers as the op's five tensors. */
static void wrap5(kk_tensor **t, const int64_t *ab_shape_a, const int64_t *ab_shape_b, void *a,
                  void *b, int sa_ndim, const int64_t *sa_shape, float *sa, int sb_ndim,
                  const int64_t *sb_shape, float *sb, const int64_t *c_shape, float *c) {
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 2, ab_shape_a, NULL, a, &t[0]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 2, ab_shape_b, NULL, b, &t[1]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, sa_ndim, sa_shape, NULL, sa, &t[2]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, sb_ndim, sb_shape, NULL, sb, &t[3]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, c_shape, NULL, c, &t[4]));
}

/* Row-wise, 2x2x2: c[m,n] = sa[m] sb[n] (a[m,:] . b[n,:]), every value exact:
 * sa = (2, 0.5), sb = (0.25, 4), a . b^T = ((-7.25, 1), (2.5, 2.5)). */
static void hand_computed_rowwise(void **state) {
    (void)state;
    uint8_t a[4] = {kk_f32_to_e4m3(1.5f), kk_f32_to_e4m3(-2.0f), kk_f32_to_e4m3(1.0f),
                    kk_f32_to_e4m3(0.5f)};
    uint8_t b[4] = {kk_f32_to_e4m3(0.5f), kk_f32_to_e4m3(4.0f), kk_f32_to_e4m3(2.0f),
                    kk_f32_to_e4m3(1.0f)};
    float sa[2] = {2.0f, 0.5f}, sb[2] = {0.25f, 4.0f}, c[4] = {0};
    const float want[4] = {-3.625f, 8.0f, 0.3125f, 5.0f};
    kk_tensor *t[5];
    const int64_t two[2] = {2, 2};
    wrap5(t, two, two, a, b, 1, (int64_t[]){2}, sa, 1, (int64_t[]){2}, sb, two, c);
    kk_assert_ok(kk_fp8_gemm_scaled(t[0], t[1], t[2], t[3], t[4], KK_FP8_SCALING_ROWWISE, NULL));
    for (int i = 0; i < 4; i++)
        if (c[i] != want[i]) fail_msg("rowwise c[%d] = %g, expected %g", i, c[i], want[i]);
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(fp8_op(), "M=2 N=2 K=2 c_dtype=f32 scaling=rowwise", &p));
    const double da[4] = {1.5, -2, 1, 0.5}, db[4] = {0.5, 4, 2, 1}, dsa[2] = {2, 0.5},
                 dsb[2] = {0.25, 4};
    double ref[4];
    kk_assert_ok(
        kk_op_reference(&p, (const double *const[]){da, db, dsa, dsb}, (double *const[]){ref}));
    for (int i = 0; i < 4; i++) assert_true(ref[i] == want[i]);
    for (int i = 0; i < 5; i++) kk_tensor_destroy(t[i]);
}

/* Block, M = 1, N = K = 130: two groups along K (128 and a partial 2) and two
 * blocks of b's rows (128 and 2). a and b all ones, sa = (2, 3), sb = ((1, 10),
 * (100, 1000)): c[0,n] = 2*1*128 + 3*10*2 = 316 for n < 128 and
 * 2*100*128 + 3*1000*2 = 31600 for n = 128, 129. */
static void hand_computed_block(void **state) {
    (void)state;
    enum { K = 130, N = 130 };
    uint8_t a[K], *b = malloc(N * K);
    assert_non_null(b);
    memset(a, kk_f32_to_e4m3(1.0f), K);
    memset(b, kk_f32_to_e4m3(1.0f), N * K);
    float sa[2] = {2.0f, 3.0f}, sb[4] = {1.0f, 10.0f, 100.0f, 1000.0f}, c[N];
    kk_tensor *t[5];
    wrap5(t, (int64_t[]){1, K}, (int64_t[]){N, K}, a, b, 2, (int64_t[]){1, 2}, sa, 2,
          (int64_t[]){2, 2}, sb, (int64_t[]){1, N}, c);
    kk_assert_ok(kk_fp8_gemm_scaled(t[0], t[1], t[2], t[3], t[4], KK_FP8_SCALING_BLOCK, NULL));
    for (int n = 0; n < N; n++) {
        const float want = n < 128 ? 316.0f : 31600.0f;
        if (c[n] != want) fail_msg("block c[0,%d] = %g, expected %g", n, c[n], want);
    }
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(fp8_op(), "M=1 N=130 K=130 c_dtype=f32 scaling=block", &p));
    double *da = malloc(sizeof(double) * N * K), ref[N];
    assert_non_null(da);
    for (int i = 0; i < N * K; i++) da[i] = 1.0;
    const double dsa[2] = {2, 3}, dsb[4] = {1, 10, 100, 1000};
    kk_assert_ok(
        kk_op_reference(&p, (const double *const[]){da, da, dsa, dsb}, (double *const[]){ref}));
    for (int n = 0; n < N; n++) assert_true(ref[n] == (n < 128 ? 316.0 : 31600.0));
    /* the tensor entry point refuses these scales: they are not [1] */
    kk_assert_status(kk_fp8_gemm(t[0], t[1], t[2], t[3], t[4], NULL), KK_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 5; i++) kk_tensor_destroy(t[i]);
    free(b);
    free(da);
}

/* kk_quantize's 1x128 scales of x [M,K] and 128x128 scales of w [N,K] go into
 * the block mode as they are; the result matches the float64 product of the
 * dequantized operands (kk_dequantize) within the op's f32 tolerance. */
static void takes_kk_quantize_output(void **state) {
    (void)state;
    enum { M = 7, N = 150, K = 300 };
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    float *xd = malloc(sizeof(float) * M * K), *wd = malloc(sizeof(float) * N * K);
    float c[M * N];
    assert_true(x && w && xd && wd);
    unsigned r = 12345;
    for (int i = 0; i < M * K; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (i % K < 128 ? 40.0f : 0.01f);
    }
    for (int i = 0; i < N * K; i++) {
        r = r * 1103515245u + 12345u;
        w[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (i / K < 128 ? 1.0f : 300.0f);
    }
    kk_tensor *tx, *tw, *txd, *twd, *tc;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){M, K}, NULL, x, &tx));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){N, K}, NULL, w, &tw));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){M, K}, NULL, xd, &txd));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){N, K}, NULL, wd, &twd));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){M, N}, NULL, c, &tc));
    kk_qtensor qx, qw;
    kk_assert_ok(
        kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 2, (int64_t[]){M, K}, &qx));
    kk_assert_ok(
        kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_128X128, 2, (int64_t[]){N, K}, &qw));
    kk_assert_ok(kk_quantize(tx, &qx, NULL));
    kk_assert_ok(kk_quantize(tw, &qw, NULL));
    kk_assert_ok(kk_dequantize(&qx, txd));
    kk_assert_ok(kk_dequantize(&qw, twd));
    kk_assert_ok(
        kk_fp8_gemm_scaled(qx.data, qw.data, qx.scales, qw.scales, tc, KK_FP8_SCALING_BLOCK, NULL));
    kk_tolerance tol;
    kk_assert_ok(kk_op_tolerance(fp8_op(), KK_DTYPE_F32, &tol));
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                ref += (double)xd[m * K + k] * wd[n * K + k];
                mag += fabs((double)xd[m * K + k] * wd[n * K + k]);
            }
            /* the dequantized values are rounded products element * scale:
             * allow their f32 rounding too (2^-24 of each term) */
            const double err = fabs(c[m * N + n] - ref);
            if (!(err <= tol.atol * mag / K + tol.rtol * fabs(ref) + 0x1p-22 * mag))
                fail_msg("c[%d,%d] = %.9g, reference %.9g", m, n, c[m * N + n], ref);
        }
    kk_qtensor_destroy(&qx);
    kk_qtensor_destroy(&qw);
    kk_tensor *all[] = {tx, tw, txd, twd, tc};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(all[i]);
    free(x);
    free(w);
    free(xd);
    free(wd);
}

static void odd_shapes_every_combination(void **state) {
    (void)state;
    static const char *const pairs[] = {"a_dtype=fp8_e4m3 b_dtype=fp8_e4m3",
                                        "a_dtype=fp8_e4m3 b_dtype=fp8_e5m2",
                                        "a_dtype=fp8_e5m2 b_dtype=fp8_e4m3"};
    static const char *const shapes[] = {"M=1 N=1 K=1",    "M=37 N=3 K=127", "M=5 N=131 K=128",
                                         "M=37 N=3 K=129", "M=1 N=2500 K=7", "M=65 N=129 K=300",
                                         "M=3 N=259 K=129"};
    static const char *const modes[] = {"tensor", "rowwise", "block"};
    for (int blocked = 0; blocked < 2; blocked++) {
        kk__cpu_gemm_set_blocking(blocked ? 6 : 0, blocked ? 11 : 0); /* cross every edge */
        for (size_t mode = 0; mode < 3; mode++)
            for (size_t i = 0; i < 3; i++)
                for (size_t s = 0; s < 7; s++)
                    for (int f32 = 0; f32 < 2; f32++) {
                        char text[160];
                        snprintf(text, sizeof text, "%s %s c_dtype=%s scaling=%s", shapes[s],
                                 pairs[i], f32 ? "f32" : "bf16", modes[mode]);
                        expect(fp8_op(), text, 100 * mode + 10 * i + s, KK_CASE_PASS);
                    }
    }
    kk__cpu_gemm_set_blocking(0, 0);
}

/* The harness's fuzz stream: valid parameters only (no e5m2 pair), all pass. */
static void fuzz_cases_pass(void **state) {
    (void)state;
    int e5m2_a = 0, modes[3] = {0, 0, 0};
    for (int i = 0; i < 90; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(fp8_op(), 3, i, KK_DIST_FULL, NULL, &c));
        e5m2_a += c.params.i[KK__FP8_A_DTYPE] == KK_DTYPE_FP8_E5M2;
        modes[c.params.i[KK__FP8_SCALING]]++;
        kk_run_options o = {.device = "cpu"};
        kk_case_result r;
        kk_assert_ok(kk_case_run(&c, &o, &r));
        if (r.status != KK_CASE_PASS) fail_msg("%s: %s", c.name, r.message);
    }
    assert_true(e5m2_a > 0);
    for (int m = 0; m < 3; m++)
        if (modes[m] < 10) fail_msg("scaling %d drawn %d times in 90", m, modes[m]);
}

/* ---- wrong kernels ---- */

static kk_tensor *retyped(const kk_tensor *t, kk_dtype dt) {
    kk_tensor *v = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", dt, t->ndim, t->shape, NULL, t->data, &v));
    return v;
}

/* Scales ignored: the real kernel on scales of 1. */
static kk_status no_scales(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    float one[2] = {1.0f, 1.0f};
    kk_tensor *u[5] = {t[0], t[1], NULL, NULL, t[4]};
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){1}, NULL, &one[0], &u[2]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){1}, NULL, &one[1], &u[3]));
    kk_status st = kk__fp8_gemm_cpu(p, u, s);
    kk_tensor_destroy(u[2]);
    kk_tensor_destroy(u[3]);
    return st;
}

/* Row-wise scales ignored: the real kernel on scales of 1 of the right shapes. */
static kk_status no_scales_rowwise(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N];
    float *one = malloc(sizeof(float) * (size_t)(M + N));
    if (!one) return KK_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < M + N; i++) one[i] = 1.0f;
    kk_tensor *u[5] = {t[0], t[1], NULL, NULL, t[4]};
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, &M, NULL, one, &u[2]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, &N, NULL, one + M, &u[3]));
    kk_status st = kk__fp8_gemm_cpu(p, u, s);
    kk_tensor_destroy(u[2]);
    kk_tensor_destroy(u[3]);
    free(one);
    return st;
}

/* Every operand decoded as e4m3, whatever its dtype. */
static kk_status all_e4m3(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__FP8_A_DTYPE] = q.i[KK__FP8_B_DTYPE] = KK_DTYPE_FP8_E4M3;
    kk_tensor *u[5] = {retyped(t[0], KK_DTYPE_FP8_E4M3), retyped(t[1], KK_DTYPE_FP8_E4M3), t[2],
                       t[3], t[4]};
    kk_status st = kk__fp8_gemm_cpu(&q, u, s);
    kk_tensor_destroy(u[0]);
    kk_tensor_destroy(u[1]);
    return st;
}

/* Row-wise with sa and sb swapped (sa[n] sb[m]): the real kernel on the
 * scale tensors exchanged, which have the same shape when M == N. */
static kk_status rowwise_swapped(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_tensor *u[5] = {t[0], t[1], t[3], t[2], t[4]};
    return kk__fp8_gemm_cpu(p, u, s);
}

/* Block scaling in plain loops, with one deliberate mistake (none: 0): the
 * b-scale block n/64 instead of n/128 (clamped into range), or the k-group of
 * both scales one too far (clamped). */
enum { BLOCK_RIGHT, BLOCK_N64, BLOCK_NEXT_GROUP };
static int block_mistake;

static kk_status block_loops(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N], K = p->i[KK__FP8_K];
    const int64_t G = kk__fp8_groups(K), NB = kk__fp8_groups(N);
    const uint8_t *a = t[0]->data, *b = t[1]->data;
    const float *sa = t[2]->data, *sb = t[3]->data;
    float *row = malloc(sizeof(float) * (size_t)N);
    if (!row) return KK_ERR_OUT_OF_MEMORY;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t g = 0; g < G; g++) {
                float sum = 0.0f;
                for (int64_t k = g * 128; k < K && k < (g + 1) * 128; k++)
                    sum +=
                        (p->i[KK__FP8_A_DTYPE] == KK_DTYPE_FP8_E4M3
                             ? kk_e4m3_to_f32(a[m * K + k])
                             : kk_e5m2_to_f32(a[m * K + k])) *
                        (p->i[KK__FP8_B_DTYPE] == KK_DTYPE_FP8_E4M3 ? kk_e4m3_to_f32(b[n * K + k])
                                                                    : kk_e5m2_to_f32(b[n * K + k]));
                int64_t nb = n / 128, gs = g;
                if (block_mistake == BLOCK_N64) nb = n / 64 < NB ? n / 64 : NB - 1;
                if (block_mistake == BLOCK_NEXT_GROUP) gs = g + 1 < G ? g + 1 : G - 1;
                acc += sa[m * G + gs] * sb[nb * G + gs] * sum;
            }
            row[n] = acc;
        }
        kk__cpu_store_row(row, t[4]->data, t[4]->dtype, m * N, N);
    }
    free(row);
    return KK_OK;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    kk_op row = *fp8_op();
    kk__op_swap_none(&row);
    kk__op_swap(&row, KK_BACKEND_CPU, no_scales);
    expect(&row, "M=20 N=30 K=40 c_dtype=f32", 1, KK_CASE_FAIL);
    expect(&row, "M=20 N=30 K=40 c_dtype=bf16", 2, KK_CASE_FAIL);
    kk__op_swap(&row, KK_BACKEND_CPU, all_e4m3);
    expect(&row, "M=20 N=30 K=40 a_dtype=fp8_e4m3 b_dtype=fp8_e4m3", 3,
           KK_CASE_PASS); /* right here */
    expect(&row, "M=20 N=30 K=40 a_dtype=fp8_e4m3 b_dtype=fp8_e5m2", 3, KK_CASE_FAIL);
    expect(&row, "M=20 N=30 K=40 a_dtype=fp8_e5m2 b_dtype=fp8_e4m3 c_dtype=f32", 4, KK_CASE_FAIL);
    expect(&row, "M=20 N=30 K=40 scaling=rowwise", 4, KK_CASE_PASS); /* e4m3 only: right */

    kk__op_swap(&row, KK_BACKEND_CPU, no_scales_rowwise);
    expect(&row, "M=20 N=30 K=40 c_dtype=bf16 scaling=rowwise", 5, KK_CASE_FAIL);
    kk__op_swap(&row, KK_BACKEND_CPU, rowwise_swapped);
    expect(&row, "M=33 N=33 K=129 c_dtype=f32 scaling=rowwise", 6, KK_CASE_FAIL);
    expect(&row, "M=33 N=33 K=129 c_dtype=bf16 scaling=rowwise", 7, KK_CASE_FAIL);

    kk__op_swap(&row, KK_BACKEND_CPU, block_loops);
    static const char *const block_cases[] = {
        "M=9 N=200 K=300 c_dtype=f32 scaling=block",
        "M=9 N=200 K=300 c_dtype=bf16 scaling=block a_dtype=fp8_e5m2",
        "M=5 N=131 K=129 c_dtype=bf16 scaling=block b_dtype=fp8_e5m2"};
    for (int mistake = BLOCK_RIGHT; mistake <= BLOCK_NEXT_GROUP; mistake++)
        for (int i = 0; i < 3; i++) {
            block_mistake = mistake;
            expect(&row, block_cases[i], 8 + (uint64_t)i,
                   mistake == BLOCK_RIGHT ? KK_CASE_PASS : KK_CASE_FAIL);
        }
    block_mistake = BLOCK_RIGHT;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(row_is_registered),
        cmocka_unit_test(e5m2_pair_refused),
        cmocka_unit_test(hand_computed),
        cmocka_unit_test(hand_computed_rowwise),
        cmocka_unit_test(hand_computed_block),
        cmocka_unit_test(takes_kk_quantize_output),
        cmocka_unit_test(odd_shapes_every_combination),
        cmocka_unit_test(fuzz_cases_pass),
        cmocka_unit_test(wrong_kernels_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

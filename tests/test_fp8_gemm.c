/* labels: unit cpu */
/* The fp8_gemm op (src/opdef/fp8_gemm.c) and its CPU kernel
 * (src/cpu/fp8_gemm_cpu.c): the registry row, a hand-computed case, odd
 * shapes in every operand/output combination against the float64 reference
 * with the op's tolerance, fuzz cases, e5m2 x e5m2 refused, and the same
 * checker failing deliberately wrong kernels. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_kernels.h"
#include "opdef/fp8_gemm.h"
#include "kernelkit/cases.h"

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

static void odd_shapes_every_combination(void **state) {
    (void)state;
    static const char *const pairs[] = {"a_dtype=fp8_e4m3 b_dtype=fp8_e4m3",
                                        "a_dtype=fp8_e4m3 b_dtype=fp8_e5m2",
                                        "a_dtype=fp8_e5m2 b_dtype=fp8_e4m3"};
    static const char *const shapes[] = {"M=1 N=1 K=1", "M=37 N=3 K=129", "M=1 N=2500 K=7",
                                         "M=65 N=129 K=300"};
    for (int blocked = 0; blocked < 2; blocked++) {
        kk__cpu_gemm_set_blocking(blocked ? 6 : 0, blocked ? 11 : 0); /* cross every edge */
        for (size_t i = 0; i < 3; i++)
            for (size_t s = 0; s < 4; s++)
                for (int f32 = 0; f32 < 2; f32++) {
                    char text[160];
                    snprintf(text, sizeof text, "%s %s c_dtype=%s", shapes[s], pairs[i],
                             f32 ? "f32" : "bf16");
                    expect(fp8_op(), text, 10 * i + s, KK_CASE_PASS);
                }
    }
    kk__cpu_gemm_set_blocking(0, 0);
}

/* The harness's fuzz stream: valid parameters only (no e5m2 pair), all pass. */
static void fuzz_cases_pass(void **state) {
    (void)state;
    int e5m2_a = 0;
    for (int i = 0; i < 60; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(fp8_op(), 3, i, KK_DIST_FULL, NULL, &c));
        e5m2_a += c.params.i[KK__FP8_A_DTYPE] == KK_DTYPE_FP8_E5M2;
        kk_run_options o = {.device = "cpu"};
        kk_case_result r;
        kk_assert_ok(kk_case_run(&c, &o, &r));
        if (r.status != KK_CASE_PASS) fail_msg("%s: %s", c.name, r.message);
    }
    assert_true(e5m2_a > 0);
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
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(row_is_registered), cmocka_unit_test(e5m2_pair_refused),
        cmocka_unit_test(hand_computed),     cmocka_unit_test(odd_shapes_every_combination),
        cmocka_unit_test(fuzz_cases_pass),   cmocka_unit_test(wrong_kernels_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

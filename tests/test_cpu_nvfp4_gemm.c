/* labels: unit cpu */
/* The CPU kernel of nvfp4_gemm (NVFP4 weights x bf16 activations, M <= 64),
 * run through kk_op_run on fresh seeded random inputs (kk_case_fill_inputs:
 * every e2m1 code, e4m3 scales 2^-6..2^2, a global scale in [0.25, 0.75)) and
 * checked against the float64 reference with the row's tolerance, on odd
 * shapes: M = 1 and 64, N = 1 and odd, K from 64 to beyond a 256 chunk.
 *
 * Then the checker must see the typical bugs: a naive kernel written here,
 * put into a copy of the row's CPU slot, passes as written and fails with
 * one deliberate mistake: the scale of the next block, the scale of k/32
 * instead of k/16, the global scale ignored, the nibbles swapped. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/harness.h"
#include "kernelkit/cases.h"

static kk_op_params params_of(const char *text) {
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find("nvfp4_gemm", &op));
    kk_assert_ok(kk_op_params_parse(op, text, &p));
    return p;
}

/* Random inputs from `seed`, the reference, a poisoned y, kk_op_run on the
 * CPU, then y checked with the row's tolerance; returns pass, and the
 * relative L2 error in *l2. */
static int run_case(const kk_op_params *p, uint64_t seed, double *l2) {
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    kk_tensor *t[KK_OP_MAX_TENSORS] = {0};
    double *f64[KK_OP_MAX_TENSORS] = {0};
    void *raw[KK_OP_MAX_TENSORS] = {0};
    int n = 0;
    kk_assert_ok(kk_op_tensors(p, d, &n));
    for (int k = 0; k < n; k++) {
        kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
        raw[k] = t[k]->data;
        f64[k] = calloc((size_t)d[k].numel, sizeof(double));
        assert_non_null(f64[k]);
    }
    kk_assert_ok(kk_case_fill_inputs(p, seed, KK_DIST_FULL, raw));
    for (int k = 0; k < n - 1; k++)
        kk_assert_ok(kk_convert_host(raw[k], d[k].dtype, f64[k], KK_DTYPE_F64, (size_t)d[k].numel));
    assert_true(d[n - 1].is_output);
    kk_assert_ok(kk_poison(raw[n - 1], d[n - 1].dtype, (size_t)d[n - 1].numel, 0));
    kk_assert_ok(kk_op_reference(p, (const double *const *)f64, f64 + n - 1));
    kk_assert_ok(kk_op_run(p, t, NULL));
    kk_tolerance tol;
    kk_check_result r;
    kk_assert_ok(kk_op_tolerance(p->op, KK_DTYPE_BF16, &tol));
    kk_assert_ok(
        kk_check_output(raw[n - 1], KK_DTYPE_BF16, f64[n - 1], (size_t)d[n - 1].numel, &tol, &r));
    for (int k = 0; k < n; k++) {
        kk_tensor_destroy(t[k]);
        free(f64[k]);
    }
    *l2 = r.rel_l2_err;
    return r.pass;
}

/* The reference on a case computed by hand: M = N = 1, K = 64, x = 1, the
 * four scale blocks (2, 0.25, 1, 1) over weights 0.5 (block 0), 6 (block 1)
 * and -1 (blocks 2, 3), gw = 0.5: (16*0.5*2 + 16*6*0.25 - 32) * 0.5 = 4. */
static void reference_by_hand(void **state) {
    (void)state;
    double x[64], w[64], y = 0.0;
    for (int k = 0; k < 64; k++) {
        x[k] = 1.0;
        w[k] = k < 16 ? 0.5 : k < 32 ? 6.0 : -1.0;
    }
    const kk_op_params p = params_of("M=1 N=1 K=64 global=1");
    kk_assert_ok(kk_op_reference(
        &p, (const double *const[]){x, w, (double[]){2, 0.25, 1, 1}, (double[]){0.5}},
        (double *const[]){&y}));
    assert_float_equal(y, 4.0, 1e-12);
}

static void kernel_passes(void **state) {
    (void)state;
    static const char *const shapes[] = {
        "M=1 N=1 K=64",     "M=1 N=7 K=64 global=1", "M=3 N=33 K=320", "M=64 N=17 K=576 global=1",
        "M=5 N=129 K=1024", "M=63 N=2 K=128",
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            const kk_op_params p = params_of(shapes[i]);
            double l2;
            if (!run_case(&p, seed, &l2))
                fail_msg("nvfp4_gemm %s seed %llu: FAIL, rel L2 %g", shapes[i],
                         (unsigned long long)seed, l2);
        }
}

/* ---- a naive kernel with one switchable mistake ---- */

enum { BUG_NONE, BUG_NEXT_BLOCK, BUG_BLOCK_OF_32, BUG_NO_GLOBAL, BUG_NIBBLES_SWAPPED };
static int bug;

static kk_status naive(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t M = kk_op_params_int(p, "M"), N = kk_op_params_int(p, "N");
    const int64_t K = kk_op_params_int(p, "K"), blocks = K / 16;
    const int global = (int)kk_op_params_int(p, "global");
    const uint16_t *x = t[0]->data;
    const uint8_t *w = t[1]->data, *sw = t[2]->data;
    const float gw = global && bug != BUG_NO_GLOBAL ? *(const float *)t[3]->data : 1.0f;
    uint16_t *y = t[global ? 4 : 3]->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t e = n * K + k;
                const int shift = ((int)(e % 2) * 4) ^ (bug == BUG_NIBBLES_SWAPPED ? 4 : 0);
                int64_t b = k / 16;
                if (bug == BUG_NEXT_BLOCK) b = (b + 1) % blocks;
                if (bug == BUG_BLOCK_OF_32) b = k / 32;
                const double wv = kk_e2m1_to_f32((uint8_t)(w[e / 2] >> shift)) *
                                  (double)kk_e4m3_to_f32(sw[n * blocks + b]) * gw;
                acc += kk_bf16_to_f32(x[m * K + k]) * wv;
            }
            y[m * N + n] = kk_f32_to_bf16((float)acc);
        }
    return KK_OK;
}

static void check_bug(int which, const char *text) {
    kk_op_params p = params_of(text);
    kk_op row = *p.op;
    kk__op_swap(&row, KK_BACKEND_CPU, naive);
    p.op = &row;
    double l2_ok, l2_bad;
    bug = BUG_NONE;
    const int ok = run_case(&p, 7, &l2_ok);
    bug = which;
    const int bad = run_case(&p, 7, &l2_bad);
    bug = BUG_NONE;
    print_message("bug %d, %s: rel L2 %.3g without, %.3g with\n", which, text, l2_ok, l2_bad);
    if (!ok) fail_msg("the naive kernel fails without the bug (%s): rel L2 %g", text, l2_ok);
    if (bad) fail_msg("bug %d passed the check (%s): rel L2 %g", which, text, l2_bad);
}

static void wrong_block_scale_fails(void **state) {
    (void)state;
    check_bug(BUG_NEXT_BLOCK, "M=3 N=9 K=128");
    check_bug(BUG_BLOCK_OF_32, "M=1 N=33 K=64");
}

static void ignored_global_fails(void **state) {
    (void)state;
    check_bug(BUG_NO_GLOBAL, "M=2 N=17 K=64 global=1");
}

static void swapped_nibbles_fail(void **state) {
    (void)state;
    check_bug(BUG_NIBBLES_SWAPPED, "M=4 N=5 K=192");
}

/* The kernel's own defense against a harness bug: a missing or wrong-sized
 * output is refused before anything is written. */
static void kernel_refuses_wrong_tensors(void **state) {
    (void)state;
    const kk_op_params p = params_of("M=2 N=3 K=64 global=1");
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    kk_tensor *t[KK_OP_MAX_TENSORS] = {0}, *wide;
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, d, &n));
    for (int k = 0; k < n; k++)
        kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){2, 4}, &wide));
    kk_tensor *y = t[n - 1];
    t[n - 1] = wide;
    kk_assert_status(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, t, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "y");
    t[n - 1] = NULL;
    kk_assert_status(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, t, NULL), KK_ERR_INVALID_ARGUMENT);
    t[n - 1] = y;
    kk_assert_ok(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, t, NULL));
    kk_tensor_destroy(wide);
    for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_by_hand),       cmocka_unit_test(kernel_passes),
        cmocka_unit_test(wrong_block_scale_fails), cmocka_unit_test(ignored_global_fails),
        cmocka_unit_test(swapped_nibbles_fail),    cmocka_unit_test(kernel_refuses_wrong_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

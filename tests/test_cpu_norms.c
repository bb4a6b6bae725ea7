/* labels: unit cpu */
/* The CPU kernels of rmsnorm, softmax, layernorm and rope, run through
 * kk_op_run on fresh seeded random inputs (kk_case_fill_inputs) and checked
 * against the float64 reference with the row's own tolerance, in f32, f16 and
 * bf16, on odd shapes (size 1, odd n, rows longer than a 256-element chunk).
 *
 * Then the checker must see each op's typical bug: a naive kernel written
 * here, put into a copy of the row's CPU slot, passes as written and fails
 * with one deliberate mistake (eps ignored, mean not subtracted, scale
 * ignored, max taken over a row one short, rope pairs of the wrong style, the
 * wrong frequency). So each failure is that mistake, not the naive kernel. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/harness.h"
#include "kernelkit/cases.h"

/* ---- running a case through kk_op_run ---- */

typedef struct outcome {
    int pass;      /* every output within tolerance */
    double rel_l2; /* worst output's relative L2 error */
} outcome;

static kk_op_params params_of(const char *op_name, const char *text) {
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find(op_name, &op));
    kk_assert_ok(kk_op_params_parse(op, text, &p));
    return p;
}

/* Random inputs from `seed`, the reference, poisoned outputs, kk_op_run on the
 * CPU, then every output checked with the row's tolerance. */
static outcome run_case(const kk_op_params *p, uint64_t seed) {
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
    for (int k = 0; k < n; k++)
        if (!d[k].is_output) {
            kk_assert_ok(
                kk_convert_host(raw[k], d[k].dtype, f64[k], KK_DTYPE_F64, (size_t)d[k].numel));
        } else {
            kk_assert_ok(kk_poison(raw[k], d[k].dtype, (size_t)d[k].numel, 0));
        }
    int first_out = 0;
    while (!d[first_out].is_output) first_out++;
    kk_assert_ok(kk_op_reference(p, (const double *const *)f64, f64 + first_out));
    kk_assert_ok(kk_op_run(p, t, NULL));
    outcome o = {.pass = 1, .rel_l2 = 0.0};
    for (int k = first_out; k < n; k++) {
        kk_tolerance tol;
        kk_check_result r;
        kk_assert_ok(kk_op_tolerance(p->op, d[k].dtype, &tol));
        kk_assert_ok(kk_check_output(raw[k], d[k].dtype, f64[k], (size_t)d[k].numel, &tol, &r));
        o.pass &= r.pass;
        o.rel_l2 = r.rel_l2_err > o.rel_l2 ? r.rel_l2_err : o.rel_l2;
    }
    for (int k = 0; k < n; k++) {
        kk_tensor_destroy(t[k]);
        free(f64[k]);
    }
    return o;
}

/* The op's own CPU kernel passes `text` in every float dtype, three seeds each. */
static void kernel_passes(const char *op_name, const char *text) {
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    for (int i = 0; i < 3; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            char full[256];
            snprintf(full, sizeof full, "%s dtype=%s", text, dtypes[i]);
            const kk_op_params p = params_of(op_name, full);
            const outcome o = run_case(&p, seed);
            if (!o.pass)
                fail_msg("%s %s seed %llu: FAIL, rel L2 %g", op_name, full,
                         (unsigned long long)seed, o.rel_l2);
        }
}

/* A test kernel in a copy of the row: it passes when `bug` is 0 and fails
 * when it is 1 (bug_flag is read by the kernel). */
static int bug_flag;

static void bug_is_caught(const char *op_name, const char *text, kk_op_kernel_fn kernel) {
    kk_op_params p = params_of(op_name, text);
    kk_op row = *p.op;
    kk__op_swap(&row, KK_BACKEND_CPU, kernel);
    p.op = &row;
    for (bug_flag = 0; bug_flag <= 1; bug_flag++) {
        const outcome o = run_case(&p, 42);
        print_message("%s %s, bug %d: %s, rel L2 %.3g\n", op_name, text, bug_flag,
                      o.pass ? "PASS" : "FAIL", o.rel_l2);
        if (o.pass != !bug_flag)
            fail_msg("%s %s: the test kernel with bug=%d should %s", op_name, text, bug_flag,
                     bug_flag ? "fail" : "pass");
    }
    bug_flag = 0;
}

static const float *in_f32(kk_tensor *const *t, int k) { return (const float *)t[k]->data; }

/* ---- rmsnorm ---- */

static void rmsnorm_kernel_passes(void **state) {
    (void)state;
    kernel_passes("rmsnorm", "rows=1 n=1");
    kernel_passes("rmsnorm", "rows=5 n=37");
    kernel_passes("rmsnorm", "rows=3 n=1000 eps=0.3");
    kernel_passes("rmsnorm", "rows=2 n=513");
}

/* f32 only; bug: eps left out of the square root. */
static kk_status rmsnorm_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t rows = kk_op_params_int(p, "rows"), n = kk_op_params_int(p, "n");
    const double eps = bug_flag ? 0.0 : kk_op_params_float(p, "eps");
    const float *x = in_f32(t, 0), *w = in_f32(t, 1);
    float *y = t[2]->data;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
        const double inv = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t i = 0; i < n; i++) y[r * n + i] = (float)(x[r * n + i] * inv * w[i]);
    }
    return KK_OK;
}

static void rmsnorm_without_eps_fails(void **state) {
    (void)state;
    bug_is_caught("rmsnorm", "rows=7 n=129 eps=0.1 dtype=f32", rmsnorm_naive);
}

/* ---- softmax ---- */

static void softmax_kernel_passes(void **state) {
    (void)state;
    kernel_passes("softmax", "rows=1 n=1");
    kernel_passes("softmax", "rows=5 n=37");
    kernel_passes("softmax", "rows=3 n=1000 scale=0.125");
    kernel_passes("softmax", "rows=2 n=513 scale=40");
    kernel_passes("softmax", "rows=4 n=31 scale=0");
}

/* f32 only; bug: scale ignored (as if it were 1). */
static kk_status softmax_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t rows = kk_op_params_int(p, "rows"), n = kk_op_params_int(p, "n");
    const double scale = bug_flag ? 1.0 : kk_op_params_float(p, "scale");
    const float *x = in_f32(t, 0);
    float *y = t[1]->data;
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < n; i++) m = fmax(m, x[r * n + i] * scale);
        for (int64_t i = 0; i < n; i++) sum += exp(x[r * n + i] * scale - m);
        for (int64_t i = 0; i < n; i++) y[r * n + i] = (float)(exp(x[r * n + i] * scale - m) / sum);
    }
    return KK_OK;
}

static void softmax_without_scale_fails(void **state) {
    (void)state;
    bug_is_caught("softmax", "rows=6 n=129 scale=0.5 dtype=f32", softmax_naive);
}

/* ---- layernorm ---- */

static void layernorm_kernel_passes(void **state) {
    (void)state;
    kernel_passes("layernorm", "rows=1 n=1");
    kernel_passes("layernorm", "rows=5 n=37");
    kernel_passes("layernorm", "rows=5 n=37 affine=0");
    kernel_passes("layernorm", "rows=3 n=1000 eps=0.3");
    kernel_passes("layernorm", "rows=2 n=513");
    kernel_passes("layernorm", "rows=9 n=2 affine=0");
}

/* f32 only; bug: the mean is not subtracted (y = x / sqrt(var + eps) ...). */
static kk_status layernorm_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t rows = kk_op_params_int(p, "rows"), n = kk_op_params_int(p, "n");
    const double eps = kk_op_params_float(p, "eps");
    const int affine = (int)kk_op_params_int(p, "affine");
    const float *x = in_f32(t, 0);
    float *y = t[affine ? 3 : 1]->data;
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < n; i++) mean += x[r * n + i];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
        const double inv = 1.0 / sqrt(var / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            double v = (x[r * n + i] - (bug_flag ? 0.0 : mean)) * inv;
            if (affine) v = v * in_f32(t, 1)[i] + in_f32(t, 2)[i];
            y[r * n + i] = (float)v;
        }
    }
    return KK_OK;
}

static void layernorm_without_mean_fails(void **state) {
    (void)state;
    bug_is_caught("layernorm", "rows=6 n=129 dtype=f32", layernorm_naive);
    bug_is_caught("layernorm", "rows=6 n=129 affine=0 dtype=f32", layernorm_naive);
}

/* ---- rope ---- */

static void rope_kernel_passes(void **state) {
    (void)state;
    kernel_passes("rope", "B=1 H=1 S=1 D=2");
    kernel_passes("rope", "B=2 H=3 S=7 D=64 style=neox");
    kernel_passes("rope", "B=2 H=3 S=7 D=64 style=gptj");
    kernel_passes("rope", "B=1 H=2 S=9 D=37 rotary_dim=20 style=neox offset=5");
    kernel_passes("rope", "B=1 H=2 S=9 D=37 rotary_dim=20 style=gptj theta=500000");
    kernel_passes("rope", "B=3 H=1 S=1 D=128 offset=1000000");
}

/* f32 only; bug: the pairs of the other style (neox asked, gptj's pairs
 * rotated, and the other way round). */
static kk_status rope_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t S = kk_op_params_int(p, "S"), D = kk_op_params_int(p, "D");
    const int64_t R = kk_op_params_int(p, "rotary_dim") ? kk_op_params_int(p, "rotary_dim") : D;
    const int64_t rows = kk_op_params_int(p, "B") * kk_op_params_int(p, "H") * S;
    const int gptj = (kk_op_params_int(p, "style") == 1) != (bug_flag != 0);
    const double theta = kk_op_params_float(p, "theta");
    for (int64_t row = 0; row < rows; row++) {
        const float *x = in_f32(t, 0) + row * D;
        float *y = (float *)t[1]->data + row * D;
        const double pos = (double)(kk_op_params_int(p, "offset") + row % S);
        for (int64_t i = 0; i < R / 2; i++) {
            const double ang = pos * pow(theta, -2.0 * (double)i / (double)R);
            const int64_t ia = gptj ? 2 * i : i, ib = gptj ? 2 * i + 1 : i + R / 2;
            y[ia] = (float)(x[ia] * cos(ang) - x[ib] * sin(ang));
            y[ib] = (float)(x[ib] * cos(ang) + x[ia] * sin(ang));
        }
        for (int64_t d = R; d < D; d++) y[d] = x[d];
    }
    return KK_OK;
}

static void rope_wrong_pairs_fail(void **state) {
    (void)state;
    bug_is_caught("rope", "B=2 H=3 S=5 D=16 style=neox dtype=f32", rope_naive);
    bug_is_caught("rope", "B=2 H=3 S=5 D=19 rotary_dim=8 style=gptj offset=3 dtype=f32",
                  rope_naive);
}

/* ---- the references on cases computed by hand ---- */

static void reference_of(const char *op, const char *text, const double *const *in, double *out) {
    const kk_op_params p = params_of(op, text);
    kk_assert_ok(kk_op_reference(&p, in, (double *const[]){out}));
}

static void references_by_hand(void **state) {
    (void)state;
    double y[8];
    /* rmsnorm: mean(x^2) = 12.5 */
    reference_of("rmsnorm", "rows=1 n=2 eps=1e-12",
                 (const double *const[]){(double[]){3, 4}, (double[]){1, 2}}, y);
    assert_float_equal(y[0], 3 / sqrt(12.5), 1e-9);
    assert_float_equal(y[1], 8 / sqrt(12.5), 1e-9);
    /* layernorm: mean 3, var (4 + 1 + 0 + 9) / 4 = 3.5, + eps 0.5 = 4 */
    reference_of("layernorm", "rows=1 n=4 eps=0.5",
                 (const double *const[]){(double[]){1, 2, 3, 6}, (double[]){1, 1, 1, 2},
                                         (double[]){0, 0, 0, 1}},
                 y);
    const double want_ln[4] = {-1, -0.5, 0, 4};
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], want_ln[i], 1e-12);
    /* softmax: scale 0.5 turns x = (0, 2 ln 2) into (0, ln 2): y = (1/3, 2/3) */
    reference_of("softmax", "rows=1 n=2 scale=0.5",
                 (const double *const[]){(double[]){0, 2 * log(2.0)}}, y);
    assert_float_equal(y[0], 1.0 / 3, 1e-12);
    assert_float_equal(y[1], 2.0 / 3, 1e-12);
    /* rope at position 1 (offset 1, s = 0), D = 4: pair 0 turns by 1 rad, pair 1
     * by 10000^(-1/2) = 0.01 rad. neox pairs (0, 2) and (1, 3); gptj (0, 1) and
     * (2, 3); x = (1, 0, 0, 2) at s = 0 and zeros at s = 1. */
    const double *x = (double[]){1, 0, 0, 2, 0, 0, 0, 0};
    reference_of("rope", "B=1 H=1 S=2 D=4 offset=1 style=neox", (const double *const[]){x}, y);
    const double neox[4] = {cos(1.0), -2 * sin(0.01), sin(1.0), 2 * cos(0.01)};
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], neox[i], 1e-12);
    reference_of("rope", "B=1 H=1 S=2 D=4 offset=1 style=gptj", (const double *const[]){x}, y);
    const double gptj[4] = {cos(1.0), sin(1.0), -2 * sin(0.01), 2 * cos(0.01)};
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], gptj[i], 1e-12);
    /* rotary_dim 2: only pair (0, 1) turns, and by theta^0 = 1 rad; 2, 3 copied */
    reference_of("rope", "B=1 H=1 S=2 D=4 rotary_dim=2 offset=1 style=neox",
                 (const double *const[]){x}, y);
    const double partial[4] = {cos(1.0), sin(1.0), 0, 2};
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], partial[i], 1e-12);
}

/* ---- the kernels' own defense against a harness bug ---- */

static void kernels_refuse_wrong_tensors(void **state) {
    (void)state;
    static const char *const ops[][2] = {
        {"rmsnorm", "rows=2 n=3 dtype=f32"},
        {"softmax", "rows=2 n=3 dtype=bf16"},
        {"layernorm", "rows=2 n=3 dtype=f16"},
        {"layernorm", "rows=2 n=3 affine=0 dtype=f32"},
        {"rope", "B=1 H=2 S=3 D=8 style=gptj dtype=bf16"},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const kk_op_params p = params_of(ops[i][0], ops[i][1]);
        kk_op_tensor d[KK_OP_MAX_TENSORS];
        kk_tensor *t[KK_OP_MAX_TENSORS] = {0};
        int n = 0;
        kk_assert_ok(kk_op_tensors(&p, d, &n));
        for (int k = 0; k < n; k++)
            kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
        kk_tensor *last = t[n - 1];
        t[n - 1] = NULL; /* a missing output */
        kk_assert_status(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, t, NULL),
                         KK_ERR_INVALID_ARGUMENT);
        kk_tensor *longer; /* an output one element too long */
        kk_assert_ok(
            kk_tensor_create("cpu", d[n - 1].dtype, 1, (int64_t[]){d[n - 1].numel + 1}, &longer));
        t[n - 1] = longer;
        kk_assert_status(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, t, NULL),
                         KK_ERR_INVALID_ARGUMENT);
        kk_assert_contains(kk_last_error_message(), d[n - 1].name);
        kk_tensor_destroy(longer);
        t[n - 1] = last;
        kk_assert_ok(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, t, NULL));
        for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(references_by_hand),
        cmocka_unit_test(rmsnorm_kernel_passes),
        cmocka_unit_test(rmsnorm_without_eps_fails),
        cmocka_unit_test(softmax_kernel_passes),
        cmocka_unit_test(softmax_without_scale_fails),
        cmocka_unit_test(layernorm_kernel_passes),
        cmocka_unit_test(layernorm_without_mean_fails),
        cmocka_unit_test(rope_kernel_passes),
        cmocka_unit_test(rope_wrong_pairs_fail),
        cmocka_unit_test(kernels_refuse_wrong_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

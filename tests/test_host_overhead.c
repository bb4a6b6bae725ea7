/* labels: unit cpu */
/* kk_op_host_overhead: the host cost of kk_op_run, and of the op's typed entry
 * point, measured with a kernel slot that does nothing. The numbers are not
 * asserted (timings are for benchmarks); what is tested is that it measures
 * what it says: every sample a per-call time, the batch recorded, no launch
 * part on the CPU, the entry point measured beside dispatch and the real
 * kernel back in place afterwards, and bad arguments refused with their
 * names. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernelkit/bench.h"
#include "kernelkit/cases.h"
#include "kernelkit/ops.h"

static kk_case convert_case(void) {
    const kk_op *op;
    kk_case c;
    memset(&c, 0, sizeof c);
    kk_assert_ok(kk_op_find("convert", &op));
    kk_assert_ok(kk_op_params_parse(op, "n=1000 src=f32 dst=bf16", &c.params));
    snprintf(c.name, sizeof c.name, "host/convert");
    c.seed = 7;
    return c;
}

static void measures_dispatch_per_call(void **state) {
    (void)state;
    kk_case c = convert_case();
    kk_bench_measurement d, l;
    kk_host_overhead h = {.dispatch = &d, .launch = &l};
    kk_assert_ok(kk_op_host_overhead(&c, "cpu", 20, 16, &h));
    assert_int_equal(h.has_launch, 0); /* the CPU has no launch to time */
    assert_int_equal(d.n, 20);
    assert_int_equal(d.batch, 16);
    assert_string_equal(d.device, "cpu");
    double sum = 0;
    for (size_t i = 0; i < d.n; i++) {
        assert_true(d.samples[i] > 0 && isfinite(d.samples[i]));
        sum += d.samples[i] * (double)d.batch;
    }
    /* the samples are per call: batch times them back to the timed total */
    assert_true(fabs(sum - d.sampled_time_s) <= 1e-9 + 1e-9 * sum);
    assert_true(d.wall_time_s >= d.sampled_time_s);
    kk_bench_measurement_free(&d);
}

/* The entry point is timed on the same batches as dispatch; after the
 * measurement the thread's do-nothing kernel is gone, so kk_convert converts
 * again. */
static void measures_the_entry_point(void **state) {
    (void)state;
    kk_case c = convert_case();
    kk_bench_measurement d, l, e;
    kk_host_overhead h = {.dispatch = &d, .launch = &l, .entry = &e};
    kk_assert_ok(kk_op_host_overhead(&c, "cpu", 20, 16, &h));
    assert_int_equal(h.has_entry, 1);
    assert_int_equal(e.n, 20);
    assert_int_equal(e.batch, 16);
    assert_string_equal(e.device, "cpu");
    double sum = 0;
    for (size_t i = 0; i < e.n; i++) {
        assert_true(e.samples[i] > 0 && isfinite(e.samples[i]));
        sum += e.samples[i] * (double)e.batch;
    }
    assert_true(fabs(sum - e.sampled_time_s) <= 1e-9 + 1e-9 * sum);
    kk_assert_contains(e.throttle_note, "entry point");
    kk_bench_measurement_free(&d);
    kk_bench_measurement_free(&e);

    float x[4] = {1.0f, -2.5f, 3.0f, 0.25f};
    uint16_t y[4] = {0, 0, 0, 0};
    kk_tensor *tx = NULL, *ty = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){4}, NULL, x, &tx));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 1, (int64_t[]){4}, NULL, y, &ty));
    kk_assert_ok(kk_convert(tx, ty, NULL));
    assert_int_equal(y[0], 0x3F80); /* 1.0 in bf16 */
    assert_int_equal(y[1], 0xC020); /* -2.5 */
    kk_tensor_destroy(tx);
    kk_tensor_destroy(ty);

    /* without the optional measurement, none is made */
    kk_host_overhead only = {.dispatch = &d, .launch = &l};
    kk_assert_ok(kk_op_host_overhead(&c, "cpu", 5, 4, &only));
    assert_int_equal(only.has_entry, 0);
    kk_bench_measurement_free(&d);
}

/* A case whose parameters are invalid is refused with the parameter's name
 * before anything is allocated or timed. */
static void refuses_an_invalid_case(void **state) {
    (void)state;
    kk_case c = convert_case();
    c.params.i[0] = 0; /* n = 0: outside the parameter's range */
    kk_bench_measurement d, l;
    kk_host_overhead h = {.dispatch = &d, .launch = &l};
    kk_assert_status(kk_op_host_overhead(&c, "cpu", 5, 4, &h), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "n");
}

static void refuses_bad_arguments(void **state) {
    (void)state;
    kk_case c = convert_case();
    kk_bench_measurement d, l;
    kk_host_overhead h = {.dispatch = &d, .launch = &l};
    kk_assert_status(kk_op_host_overhead(NULL, "cpu", 0, 0, &h), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_op_host_overhead(&c, "cpu", 0, 0, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_host_overhead half = {.dispatch = &d};
    kk_assert_status(kk_op_host_overhead(&c, "cpu", 0, 0, &half), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "out->launch");
    kk_assert_status(kk_op_host_overhead(&c, "cpu", 10, 4096, &h), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "calls_per_sample");
    kk_assert_status(kk_op_host_overhead(&c, "tpu:0", 0, 0, &h), KK_ERR_INVALID_ARGUMENT);
}

static void unsupported_without_a_kernel(void **state) {
    (void)state;
    kk_case c = convert_case();
    kk_op row = *c.params.op;
    kk__op_swap_none(&row);
    c.params.op = &row;
    kk_bench_measurement d, l;
    kk_host_overhead h = {.dispatch = &d, .launch = &l};
    kk_assert_status(kk_op_host_overhead(&c, "cpu", 0, 0, &h), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "convert");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(measures_dispatch_per_call),   cmocka_unit_test(measures_the_entry_point),
        cmocka_unit_test(refuses_an_invalid_case),      cmocka_unit_test(refuses_bad_arguments),
        cmocka_unit_test(unsupported_without_a_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

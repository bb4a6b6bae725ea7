/* labels: gpu */
/* kernelkit calibrate on cuda:0, quick: copy and read bandwidth above 100 GB/s
 * (and under 100 TB/s), the fp32 FMA rate positive, bf16 above 50 TFLOP/s when
 * cuBLASLt loads (else unavailable with the reason), fp8 measured or
 * unavailable with a reason; the file round-trips. Skips (77) without a GPU. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cublaslt_dl.h"
#include "kernelkit/calibrate.h"

static void test_quick(void **state) {
    (void)state;
    kk_calibrate_options o;
    kk_calibrate_options_default(&o);
    o.quick = 1;
    o.time_budget_s = 1.0;
    kk_calibration cal;
    kk_assert_ok(kk_calibrate("cuda:0", &o, &cal));
    for (int i = 0; i < KK_CEILING_COUNT; i++) {
        const kk_ceiling *c = &cal.ceilings[i];
        if (c->available)
            print_message("%-12s %10.4g %-8s [%.4g, %.4g] %s (%zu samples)\n",
                          kk_ceiling_name((kk_ceiling_kind)i), c->value,
                          kk_ceiling_unit((kk_ceiling_kind)i), c->value_ci_low, c->value_ci_high,
                          c->method, c->samples);
        else
            print_message("%-12s unavailable: %s\n", kk_ceiling_name((kk_ceiling_kind)i),
                          c->reason);
    }
    const kk_ceiling *copy = &cal.ceilings[KK_CEILING_COPY], *rd = &cal.ceilings[KK_CEILING_READ];
    assert_int_equal(copy->available, 1);
    assert_int_equal(rd->available, 1);
    assert_true(copy->value > 100 && copy->value < 1e5);
    assert_true(rd->value > 100 && rd->value < 1e5);
    assert_int_equal(cal.ceilings[KK_CEILING_FP32].available, 1);
    assert_true(cal.ceilings[KK_CEILING_FP32].value > 1 &&
                cal.ceilings[KK_CEILING_FP32].value < 1000);
    char why[256];
    const kk_ceiling *bf16 = &cal.ceilings[KK_CEILING_BF16];
    if (kk__cublaslt_load(why, sizeof why)) {
        if (!bf16->available) fail_msg("bf16 unavailable with cuBLASLt loaded: %s", bf16->reason);
        assert_true(bf16->value > 50 && bf16->value < 1e4);
    } else {
        assert_int_equal(bf16->available, 0);
        assert_true(bf16->reason[0] != '\0');
    }
    const kk_ceiling *fp8 = &cal.ceilings[KK_CEILING_FP8];
    assert_true(fp8->available ? fp8->value > 0 : fp8->reason[0] != '\0');

    char *json;
    kk_assert_ok(kk_calibration_to_json(&cal, &json));
    kk_calibration back;
    kk_assert_ok(kk_calibration_from_json(json, strlen(json), &back));
    assert_memory_equal(&back, &cal, sizeof back);
    free(json);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_quick)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

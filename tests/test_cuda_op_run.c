/* labels: gpu */
/* kk_op_run on CUDA tensors: the CUDA slot runs asynchronously on the given
 * stream, and an op whose CUDA slot is empty runs on the CPU with exactly one
 * warning naming the op (DESIGN.md: never silently). */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#define N 1000

static int warnings;
static char last_line[512];

static void count_sink(const kk_log_record *r, void *user) {
    (void)user;
    if (r->level == KK_LOG_WARN && strcmp(r->logger, "kernelkit.ops") == 0) {
        warnings++;
        snprintf(last_line, sizeof last_line, "%s", r->line);
    }
}

/* Run convert f32 -> bf16 of `x` through `row` on cuda:0 and check every value.
 */
static void convert_on_gpu(const kk_op *row, kk_stream stream) {
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(row, "n=1000 src=f32 dst=bf16", &p));
    static float x[N];
    static uint16_t y[N], want[N];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.37f - 100.0f;
    kk_assert_ok(kk_convert_host(x, KK_DTYPE_F32, want, KK_DTYPE_BF16, N));
    kk_tensor *hx, *hy, *t[2];
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){N}, NULL, x, &hx));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 1, (int64_t[]){N}, NULL, y, &hy));
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 1, (int64_t[]){N}, &t[0]));
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 1, (int64_t[]){N}, &t[1]));
    kk_assert_ok(kk_tensor_copy(t[0], hx));
    kk_assert_ok(kk_op_run(&p, t, stream));
    kk_assert_ok(kk_op_synchronize("cuda:0", stream));
    memset(y, 0, sizeof y);
    kk_assert_ok(kk_tensor_copy(hy, t[1]));
    assert_memory_equal(y, want, sizeof want);
    kk_tensor_destroy(hx);
    kk_tensor_destroy(hy);
    kk_tensor_destroy(t[0]);
    kk_tensor_destroy(t[1]);
}

static void cuda_slot_runs(void **state) {
    (void)state;
    const kk_op *op;
    kk_assert_ok(kk_op_find("convert", &op));
    warnings = 0;
    kk_log_set_sink(count_sink, NULL);
    convert_on_gpu(op, NULL);
    assert_int_equal(warnings, 0);
    kk_log_set_sink(NULL, NULL);
}

static void missing_cuda_slot_falls_back_once(void **state) {
    (void)state;
    const kk_op *op;
    kk_assert_ok(kk_op_find("convert", &op));
    kk_op row = *op;
    kk__op_swap(&row, KK_BACKEND_CUDA, NULL);
    warnings = 0;
    kk_log_set_sink(count_sink, NULL);
    convert_on_gpu(&row, NULL);
    convert_on_gpu(&row, NULL);
    kk_log_set_sink(NULL, NULL);
    assert_int_equal(warnings, 1);
    kk_assert_contains(last_line, "convert");
    kk_assert_contains(last_line, "cuda:0");
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cuda_slot_runs),
        cmocka_unit_test(missing_cuda_slot_falls_back_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

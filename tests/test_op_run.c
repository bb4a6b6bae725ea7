/* labels: unit cpu */
/* kk_op_run, the one door to every kernel: it runs the right backend's slot
 * and refuses, naming the tensor, anything that does not match what the
 * parameters describe (so no kernel ever sees a wrong buffer). The CUDA
 * fallback path is tested on the GPU in test_cuda_op_run.c. */
#include "testutil.h"

#include <string.h>

#include "opdef/convert.h"

static kk_op_params convert_params(const char *text) {
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find("convert", &op));
    kk_assert_ok(kk_op_params_parse(op, text, &p));
    return p;
}

static void runs_the_cpu_kernel(void **state) {
    (void)state;
    kk_op_params p = convert_params("n=5 src=f32 dst=f16");
    float x[5] = {1.0f, -2.5f, 65504.0f, 1e-8f, 3.0f};
    uint16_t y[5] = {0};
    kk_tensor *t[2];
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){5}, NULL, x, &t[0]));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F16, 1, (int64_t[]){5}, NULL, y, &t[1]));
    kk_assert_ok(kk_op_run(&p, t, NULL));
    kk_assert_ok(kk_op_synchronize("cpu", NULL));
    uint16_t want[5];
    kk_assert_ok(kk_convert_host(x, KK_DTYPE_F32, want, KK_DTYPE_F16, 5));
    assert_memory_equal(y, want, sizeof want);
    kk_tensor_destroy(t[0]);
    kk_tensor_destroy(t[1]);
}

/* Every way a tensor can be wrong is refused before the kernel runs, and the
 * error names the tensor and what was expected. */
static void refuses_wrong_tensors(void **state) {
    (void)state;
    kk_op_params p = convert_params("n=6 src=f32 dst=bf16");
    kk_tensor *x, *y, *y_f16, *y_short, *wide, *strided;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){6}, &x));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 1, (int64_t[]){6}, &y));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F16, 1, (int64_t[]){6}, &y_f16));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 1, (int64_t[]){5}, &y_short));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){6, 2}, &wide));
    kk_assert_ok(kk_tensor_slice(wide, 1, 0, 1, 1, &strided)); /* [6,1], stride 2 */

    kk_assert_status(kk_op_run(&p, (kk_tensor *const[]){x, NULL}, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "y");
    kk_assert_status(kk_op_run(&p, (kk_tensor *const[]){x, y_f16}, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "dtype bf16");
    kk_assert_status(kk_op_run(&p, (kk_tensor *const[]){x, y_short}, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "shape [5]");
    kk_assert_status(kk_op_run(&p, (kk_tensor *const[]){x, strided}, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "contiguous");
    kk_assert_status(kk_op_run(&p, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_op_run(NULL, (kk_tensor *const[]){x, y}, NULL), KK_ERR_INVALID_ARGUMENT);
    /* a flat op accepts any shape of the right count */
    kk_tensor *y2;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){2, 3}, &y2));
    kk_assert_ok(kk_op_run(&p, (kk_tensor *const[]){x, y2}, NULL));
    kk_tensor *all[] = {x, y, y_f16, y_short, strided, wide, y2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

/* An op with no kernel anywhere: UNSUPPORTED, naming the op and the device. */
static void no_kernel_is_unsupported(void **state) {
    (void)state;
    const kk_op *gemm;
    kk_assert_ok(kk_op_find("gemm", &gemm));
    kk_op row = *gemm;
    kk__op_swap_none(&row);
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(&row, "M=2 N=3 K=4 dtype=f32", &p));
    kk_tensor *t[3];
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, (int64_t[]){2, 4}, &t[0]));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, (int64_t[]){3, 4}, &t[1]));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, (int64_t[]){2, 3}, &t[2]));
    kk_assert_status(kk_op_run(&p, t, NULL), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "gemm");
    kk_assert_contains(kk_last_error_message(), "cpu");
    for (int i = 0; i < 3; i++) kk_tensor_destroy(t[i]);
}

/* A slot's `strided` lets strided tensors through for that backend, as long as
 * the innermost dimension is contiguous; other rows still refuse them. */
static void strided_tensors_follow_the_row(void **state) {
    (void)state;
    kk_op_params p = convert_params("n=5 src=f32 dst=f32");
    float x[10] = {0}, y[5] = {0};
    kk_tensor *whole, *every_other, *t[2];
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){10}, NULL, x, &whole));
    kk_assert_ok(kk_tensor_slice(whole, 0, 0, 10, 2, &every_other));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, (int64_t[]){5}, NULL, y, &t[1]));
    t[0] = every_other;
    kk_assert_status(kk_op_run(&p, t, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "a contiguous tensor");
    kk_op row = *p.op;
    kk__op_swap_strided(&row, KK_BACKEND_CPU, 1);
    p.op = &row;
    kk_assert_status(kk_op_run(&p, t, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "innermost dimension contiguous");
    const kk_op *att;
    kk_assert_ok(kk_op_find("attention", &att));
    if (kk_op_has_kernel(att, KK_BACKEND_CUDA)) /* a build with CUDA */
        assert_true(kk__op_slot(att, KK_BACKEND_CUDA).strided);
    assert_true(kk__op_slot(att, KK_BACKEND_CPU).strided); /* both read strides */
    const kk_op *gemv;
    kk_assert_ok(kk_op_find("nvfp4_gemv", &gemv));
    assert_false(kk__op_slot(gemv, KK_BACKEND_CPU).strided);
    kk_tensor_destroy(every_other);
    kk_tensor_destroy(whole);
    kk_tensor_destroy(t[1]);
}

static void synchronize_checks_device(void **state) {
    (void)state;
    kk_assert_status(kk_op_synchronize("tpu:0", NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_ok(kk_op_synchronize("cpu", NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(runs_the_cpu_kernel),
        cmocka_unit_test(refuses_wrong_tensors),
        cmocka_unit_test(no_kernel_is_unsupported),
        cmocka_unit_test(synchronize_checks_device),
        cmocka_unit_test(strided_tensors_follow_the_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

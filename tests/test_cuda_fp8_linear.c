/* labels: gpu */
/* fp8_linear on CUDA through the checker (fresh seeded inputs, outputs
 * poisoned, the float64 reference with the FP8 tensor cores' row): the
 * composed slot (1x128 quantize kernel, the fp8_gemm kernel with the epilogue
 * fused for bf16 and f32 y, into f32 scratch and an epilogue kernel for f16)
 * for every activation, with and without bias and residual, bf16, f16 and
 * f32, odd M and N, K = 129 and 1000 (rows padded to 16 bytes) and 2048; the
 * fused epilogue stored with the TMA and from registers (KK_GEMM_EPILOGUE=regs)
 * passing and giving the same bits, residual = y too; rowwise scaling declined (SKIP in the checker) and run
 * by the CPU kernel through kk_fp8_linear, equal to it byte for byte; a wrong
 * CUDA kernel (the activation dropped) FAILs. Exits 77 without a GPU, and
 * without compute capability 9.0 (the slot declines there). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "kernelkit/ops.h"

static const kk_op *op(void) {
    const kk_op *o;
    kk_assert_ok(kk_op_find("fp8_linear", &o));
    return o;
}

/* A copy of t on `device`. */
static kk_tensor *on(const kk_tensor *t, const char *device) {
    kk_tensor *c = NULL;
    kk_assert_ok(kk_tensor_create(device, t->dtype, t->ndim, t->shape, &c));
    kk_assert_ok(kk_tensor_copy(c, t));
    return c;
}

static void expect(const kk_op *row, const char *text, uint64_t seed, kk_case_status want) {
    const kk_case_result r = kk_test_run_case_on("cuda:0", row, text, seed);
    if (r.status != want)
        fail_msg("%s: %s, expected %s (%s)", text, kk_case_status_name(r.status),
                 kk_case_status_name(want), r.message);
}

static void block_cases_pass(void **state) {
    (void)state;
    static const char *const shapes[] = {"M=1 N=1 K=1", "M=7 N=131 K=129", "M=65 N=200 K=1000",
                                         "M=256 N=512 K=2048"};
    static const char *const acts[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu"};
    static const char *const dts[] = {"bf16", "f16", "f32"};
    uint64_t seed = 500;
    for (int s = 0; s < 4; s++)
        for (int a = 0; a < 5; a++)
            for (int br = 0; br < 4; br++) {
                char text[200];
                snprintf(text, sizeof text,
                         "%s scaling=block activation=%s bias=%d residual=%d dtype=%s", shapes[s],
                         acts[a], br & 1, br >> 1, dts[(s + a + br) % 3]);
                expect(op(), text, seed++, KK_CASE_PASS);
            }
}

/* The fused epilogue both ways (TMA boxes, the default where y's rows are
 * 16-byte aligned; registers with KK_GEMM_EPILOGUE=regs): every activation
 * with bias and residual passes at M = 200 (a tile past M), N = 264 (a box
 * past N), in bf16 and f32; and y comes out with the same bits both ways,
 * with the residual a tensor of its own and the residual y itself. */
static kk_tensor *fused_run(const kk_tensor *x, const kk_tensor *w, const kk_tensor *ws,
                            const kk_tensor *b, const kk_tensor *r, int res_is_y, int regs) {
    kk_tensor *y;
    kk_assert_ok(kk_tensor_create("cuda:0", r->dtype, 2, r->shape, &y));
    if (res_is_y) kk_assert_ok(kk_tensor_copy(y, r));
    if (regs) setenv("KK_GEMM_EPILOGUE", "regs", 1);
    kk_assert_ok(kk_fp8_linear(x, w, ws, b, res_is_y ? y : r, y, KK_ACT_GELU_TANH,
                               KK_FP8_SCALING_BLOCK, NULL));
    unsetenv("KK_GEMM_EPILOGUE");
    kk_tensor *back = on(y, "cpu");
    kk_tensor_destroy(y);
    return back;
}

static void fused_epilogues_agree(void **state) {
    (void)state;
    static const char *const acts[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu"};
    static const char *const dts[] = {"bf16", "f32"};
    for (int d = 0; d < 2; d++)
        for (int a = 0; a < 5; a++)
            for (int regs = 0; regs < 2; regs++) {
                char text[200];
                snprintf(text, sizeof text,
                         "M=200 N=264 K=256 scaling=block activation=%s bias=1 residual=1 dtype=%s",
                         acts[a], dts[d]);
                if (regs) setenv("KK_GEMM_EPILOGUE", "regs", 1);
                expect(op(), text, 700 + 10 * (uint64_t)d + (uint64_t)a, KK_CASE_PASS);
                unsetenv("KK_GEMM_EPILOGUE");
            }
    const int64_t M = 200, N = 264, K = 256, G = 2;
    kk_tensor *x, *w, *ws, *b, *r;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){M, K}, &x));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 2, (int64_t[]){N, K}, &w));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, (int64_t[]){(N + 127) / 128, G}, &ws));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 1, &N, &b));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){M, N}, &r));
    for (int64_t i = 0; i < M * K; i++) ((uint16_t *)x->data)[i] = (uint16_t)(0x3F00 + i % 200);
    for (int64_t i = 0; i < N * K; i++) ((uint8_t *)w->data)[i] = (uint8_t)(i * 37 % 0x7E);
    for (int64_t i = 0; i < ws->shape[0] * G; i++) ((float *)ws->data)[i] = 0.002f * (float)(i + 1);
    for (int64_t i = 0; i < N; i++) ((uint16_t *)b->data)[i] = (uint16_t)(0x3E00 + i * 7 % 256);
    for (int64_t i = 0; i < M * N; i++)
        ((uint16_t *)r->data)[i] = (uint16_t)(0x3F00 + i * 13 % 256);
    kk_tensor *dx = on(x, "cuda:0"), *dw = on(w, "cuda:0"), *dws = on(ws, "cuda:0");
    kk_tensor *db = on(b, "cuda:0"), *dr = on(r, "cuda:0");
    kk_tensor *want = fused_run(dx, dw, dws, db, dr, 0, 0);
    for (int regs = 0; regs < 2; regs++)
        for (int alias = 0; alias < 2; alias++) {
            if (!regs && !alias) continue;
            kk_tensor *got = fused_run(dx, dw, dws, db, dr, alias, regs);
            assert_memory_equal(got->data, want->data, (size_t)(M * N) * 2);
            kk_tensor_destroy(got);
        }
    kk_tensor *all[] = {x, w, ws, b, r, dx, dw, dws, db, dr, want};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

/* Rowwise: the CUDA slot declines (the checker's SKIP), kk_fp8_linear on
 * device tensors runs the CPU kernel and gives its bytes. */
static void rowwise_runs_on_the_cpu(void **state) {
    (void)state;
    expect(op(), "M=9 N=40 K=77 scaling=rowwise dtype=bf16", 1, KK_CASE_SKIP);
    const int64_t M = 9, N = 40, K = 77;
    kk_tensor *x, *w, *ws, *y;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){M, K}, &x));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 2, (int64_t[]){N, K}, &w));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, &N, &ws));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_BF16, 2, (int64_t[]){M, N}, &y));
    for (int64_t i = 0; i < M * K; i++) ((uint16_t *)x->data)[i] = (uint16_t)(0x3F00 + i % 200);
    for (int64_t i = 0; i < N * K; i++) ((uint8_t *)w->data)[i] = (uint8_t)(i * 37 % 0x7E);
    for (int64_t i = 0; i < N; i++) ((float *)ws->data)[i] = 0.01f * (float)(i + 1);
    kk_assert_ok(kk_fp8_linear(x, w, ws, NULL, NULL, y, KK_ACT_SILU, KK_FP8_SCALING_ROWWISE, NULL));
    kk_tensor *dx = on(x, "cuda:0"), *dw = on(w, "cuda:0"), *dws = on(ws, "cuda:0");
    kk_tensor *dy = on(y, "cuda:0");
    kk_assert_ok(
        kk_fp8_linear(dx, dw, dws, NULL, NULL, dy, KK_ACT_SILU, KK_FP8_SCALING_ROWWISE, NULL));
    kk_tensor *back = on(dy, "cpu");
    assert_memory_equal(back->data, y->data, (size_t)(M * N) * 2);
    kk_tensor *all[] = {x, w, ws, y, dx, dw, dws, dy, back};
    for (int i = 0; i < 9; i++) kk_tensor_destroy(all[i]);
}

/* The real slot (the registry's CUDA kernel) with the activation dropped. */
static kk_status no_activation(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__FL_ACT] = KK__ACT_NONE;
    return kk__op_slot(op(), KK_BACKEND_CUDA).run(&q, t, s);
}

static void wrong_kernel_fails(void **state) {
    (void)state;
    assert_non_null(kk__op_slot(op(), KK_BACKEND_CUDA).run);
    kk_op row = *op();
    kk__op_swap(&row, KK_BACKEND_CUDA, no_activation);
    expect(&row, "M=33 N=130 K=300 scaling=block activation=none dtype=bf16", 3, KK_CASE_PASS);
    expect(&row, "M=33 N=130 K=300 scaling=block activation=silu dtype=bf16", 4, KK_CASE_FAIL);
    expect(&row, "M=33 N=130 K=300 scaling=block activation=gelu_tanh dtype=f32", 5, KK_CASE_FAIL);
}

int main(void) {
    if (kk_test_no_gpu() || kk_test_no_hopper("fp8_gemm kernel")) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(block_cases_pass),
        cmocka_unit_test(fused_epilogues_agree),
        cmocka_unit_test(rowwise_runs_on_the_cpu),
        cmocka_unit_test(wrong_kernel_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

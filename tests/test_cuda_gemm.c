/* labels: gpu */
/* gemm and linear on CUDA through the checker (fresh seeded inputs, outputs
 * poisoned, the float64 reference): odd sizes, K not a multiple of 8 (the
 * element-load path), every activation, bias, residual and SwiGLU, bf16 and
 * f16; the Hopper kernel's 2-CTA cluster form forced (KK_GEMM_SM90=cluster),
 * its TMA-stored and register-stored epilogues giving the same bits;
 * strided views give the bits of contiguous tensors; a wrong CUDA kernel
 * FAILs. f32 both ways (KK_TF32=0: the exact FMA kernel under the strict f32
 * row; KK_TF32=1: the TF32 kernel under TF32's row), the TF32 result failing
 * the strict row, wrong f32 kernels failing both. Exits 77 without a GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "opdef/gemm.h"

static const char *const dtypes[] = {"bf16", "f16"};
static const char *const acts[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu", "swiglu"};

static void expect(const kk_op *row, const char *text, uint64_t seed, kk_case_status want) {
    const kk_case_result r = kk_test_run_case_on("cuda:0", row, text, seed);
    assert_int_equal(r.status, want);
    if (want == KK_CASE_PASS) assert_int_equal(r.outputs[0].unwritten, 0);
}

static void gemm_sizes_pass(void **state) {
    (void)state;
    static const char *const shapes[] = {
        "M=1 N=1 K=8",      "M=7 N=9 K=16",       "M=33 N=65 K=40",   "M=129 N=130 K=264",
        "M=300 N=17 K=512", "M=256 N=256 K=256",  "M=5 N=300 K=3",    "M=77 N=45 K=129",
        "M=200 N=1 K=1",    "M=128 N=128 K=1000", "M=257 N=513 K=72", "M=512 N=768 K=320"};
    for (size_t d = 0; d < 2; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            char text[128];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            expect(kk_test_op("gemm"), text, 100 + 10 * d + s, KK_CASE_PASS);
        }
}

static void linear_every_form_passes(void **state) {
    (void)state;
    for (size_t d = 0; d < 2; d++)
        for (size_t a = 0; a < 6; a++)
            for (int form = 0; form < 4; form++) { /* bias x residual */
                char text[192];
                const int K = form == 3 ? 97 : 96; /* one odd K per activation */
                snprintf(text, sizeof text,
                         "M=%d N=%d K=%d bias=%d activation=%s dtype=%s residual=%d", 37 + (int)a,
                         70 + 3 * form, K, form & 1, acts[a], dtypes[d], form >> 1);
                expect(kk_test_op("linear"), text, 1000 + 100 * d + 10 * a + (uint64_t)form,
                       KK_CASE_PASS);
            }
}

/* Outputs that underflow in 1 + tanh or 1 + erf (h far below zero) keep
 * their tails: a fuzz case (M=1 N=2, |y| ~ 1e-10) once came out 0. */
static void activation_tails_pass(void **state) {
    (void)state;
    static const char *const texts[] = {
        "M=1 N=2 K=256 bias=0 activation=gelu_tanh dtype=bf16 residual=0",
        "M=1 N=2 K=256 bias=0 activation=gelu_erf dtype=bf16 residual=0"};
    for (int k = 0; k < 2; k++) {
        kk_case c;
        memset(&c, 0, sizeof c);
        snprintf(c.name, sizeof c.name, "fuzz/linear/448");
        kk_assert_ok(kk_op_params_parse(kk_test_op("linear"), texts[k], &c.params));
        c.seed = UINT64_C(10250217251375385770);
        c.dist = KK_DIST_FULL;
        kk_run_options o = {.device = "cuda:0"};
        kk_case_result r;
        kk_assert_ok(kk_case_run(&c, &o, &r));
        print_message("    %-4s %s rel_l2 %.3g %s\n", kk_case_status_name(r.status), texts[k],
                      r.rel_l2_err, r.message);
        assert_int_equal(r.status, KK_CASE_PASS);
    }
}

/* The decode kernel (M <= 8 with 16-byte rows): every activation, bias,
 * residual, SwiGLU, M of each of its four widths, N not a multiple of its 16
 * rows, K past one chunk of x (2048 columns at M = 8); and the Hopper kernel
 * forced on such an M. */
static void decode_kernel_passes(void **state) {
    (void)state;
    static const int ms[] = {1, 2, 3, 8};
    for (size_t d = 0; d < 2; d++)
        for (size_t a = 0; a < 6; a++) {
            char text[192];
            snprintf(text, sizeof text, "M=%d N=%d K=%d bias=%d activation=%s dtype=%s residual=%d",
                     ms[a % 4], 37 + 16 * (int)a, a == 5 ? 5000 : 264, (int)(a & 1), acts[a],
                     dtypes[d], (int)(a / 2 % 2));
            expect(kk_test_op("linear"), text, 2000 + 10 * d + a, KK_CASE_PASS);
        }
    expect(kk_test_op("gemm"), "M=8 N=4099 K=4104 dtype=bf16", 2100, KK_CASE_PASS);
    setenv("KK_GEMM_KERNEL", "sm90", 1); /* the Hopper kernel (elsewhere: the sm_80 one) */
    expect(kk_test_op("linear"), "M=3 N=300 K=256 bias=1 activation=silu dtype=bf16 residual=1",
           2101, KK_CASE_PASS);
    unsetenv("KK_GEMM_KERNEL");
}

/* The skinny kernel (8 < M <= 64 with 16-byte rows): each of its three m16
 * widths at both ends (9, 16, 17, 32, 33, 64), every activation, bias,
 * residual, SwiGLU, N not a multiple of its 32 (SwiGLU 16) rows, K not a
 * multiple of its 32-column chunks and past many chunks per warp. */
static void skinny_kernel_passes(void **state) {
    (void)state;
    static const int ms[] = {9, 16, 17, 32, 33, 64};
    for (size_t d = 0; d < 2; d++)
        for (size_t a = 0; a < 6; a++) {
            char text[192];
            snprintf(text, sizeof text, "M=%d N=%d K=%d bias=%d activation=%s dtype=%s residual=%d",
                     ms[(a + d) % 6], 37 + 16 * (int)a, a == 5 ? 5000 : 264 + 8 * (int)a,
                     (int)(a & 1), acts[a], dtypes[d], (int)(a / 2 % 2));
            expect(kk_test_op("linear"), text, 2200 + 10 * d + a, KK_CASE_PASS);
        }
    for (int pipe = 0; pipe < 2; pipe++) { /* both forms at every M (KK_GEMM_SKINNY) */
        setenv("KK_GEMM_SKINNY", pipe ? "pipe" : "plain", 1);
        expect(kk_test_op("gemm"), "M=64 N=4099 K=4104 dtype=bf16", 2300, KK_CASE_PASS);
        expect(kk_test_op("gemm"), "M=20 N=1000 K=16384 dtype=f16", 2301, KK_CASE_PASS);
        expect(kk_test_op("linear"),
               "M=12 N=77 K=328 bias=1 activation=swiglu dtype=bf16 residual=1", 2302,
               KK_CASE_PASS);
        expect(kk_test_op("linear"), "M=40 N=45 K=4104 bias=1 activation=gelu_erf dtype=f16", 2303,
               KK_CASE_PASS);
    }
    unsetenv("KK_GEMM_SKINNY");
}

/* ---- f32: the exact FMA kernel (KK_TF32=0) and the TF32 one (KK_TF32=1) ---- */

/* The case passes and the checker applied the row of the setting: acc
 * KK__ACC_F32 for the FMA kernel, KK__ACC_TF32 for TF32. */
static void expect_f32(const kk_op *row, const char *text, uint64_t seed, int tf32) {
    const kk_case_result r = kk_test_run_case_on("cuda:0", row, text, seed);
    assert_int_equal(r.status, KK_CASE_PASS);
    assert_int_equal(r.outputs[0].unwritten, 0);
    assert_true(r.outputs[0].check.tol.acc == (tf32 ? KK__ACC_TF32 : KK__ACC_F32));
}

static void f32_cases(int tf32) {
    setenv("KK_TF32", tf32 ? "1" : "0", 1);
    static const char *const shapes[] = {
        "M=1 N=1 K=1",      "M=7 N=9 K=16",    "M=33 N=65 K=40",    "M=129 N=130 K=264",
        "M=300 N=17 K=513", "M=5 N=300 K=3",   "M=77 N=45 K=129",   "M=200 N=1 K=1",
        "M=128 N=128 K=8",  "M=257 N=129 K=7", "M=512 N=384 K=1000"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        char text[128];
        snprintf(text, sizeof text, "%s dtype=f32", shapes[s]);
        expect_f32(kk_test_op("gemm"), text, 5000 + 100 * (uint64_t)tf32 + s, tf32);
    }
    for (size_t a = 0; a < 6; a++)
        for (int form = 0; form < 4; form++) { /* bias x residual */
            char text[192];
            const int K = form == 3 ? 97 : 96; /* K odd: element loads */
            snprintf(text, sizeof text,
                     "M=%d N=%d K=%d bias=%d activation=%s dtype=f32 residual=%d", 37 + 60 * (int)a,
                     70 + 3 * form + (a == 5 ? 64 : 0), K, form & 1, acts[a], form >> 1);
            expect_f32(kk_test_op("linear"), text,
                       6000 + 100 * (uint64_t)tf32 + 10 * a + (uint64_t)form, tf32);
        }
    expect_f32(kk_test_op("linear"),
               "M=130 N=200 K=300 bias=1 activation=swiglu dtype=f32 residual=1",
               6900 + (uint64_t)tf32, tf32);
    unsetenv("KK_TF32");
}

static void f32_fma_passes(void **state) {
    (void)state;
    f32_cases(0);
}

static void f32_tf32_passes(void **state) {
    (void)state;
    f32_cases(1);
}

/* [rows, cols] f32 on the GPU from a host array. */
static kk_tensor *upload_f32(const float *h, int64_t rows, int64_t cols) {
    kk_tensor *t, *ht;
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 2, (int64_t[]){rows, cols}, &t));
    kk_assert_ok(
        kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){rows, cols}, NULL, (void *)h, &ht));
    kk_assert_ok(kk_tensor_copy(t, ht));
    kk_tensor_destroy(ht);
    return t;
}

/* c = a . b^T with the setting `tf32`, into host memory. */
static void gemm_f32_on_gpu(const float *a, const float *b, float *c, int M, int N, int K,
                            int tf32) {
    setenv("KK_TF32", tf32 ? "1" : "0", 1);
    kk_tensor *da = upload_f32(a, M, K), *db = upload_f32(b, N, K), *dc, *hc;
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 2, (int64_t[]){M, N}, &dc));
    kk_assert_ok(kk_gemm(da, db, dc, NULL));
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){M, N}, NULL, c, &hc));
    kk_assert_ok(kk_tensor_copy(hc, dc));
    kk_tensor_destroy(hc);
    kk_tensor_destroy(da);
    kk_tensor_destroy(db);
    kk_tensor_destroy(dc);
    unsetenv("KK_TF32");
}

/* The TF32 row is honest and the check can fail: one TF32 result passes
 * TF32's row and FAILS the strict f32 row (its error, ~2^-11 of the terms, is
 * far above 4 f32 units); the FMA kernel's result passes the strict row; a
 * result that lost one k (a wrong kernel) fails both. */
static void tf32_fails_the_strict_row(void **state) {
    (void)state;
    enum { M = 64, N = 96, K = 512 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N * K);
    float *c_tf32 = malloc(sizeof(float) * M * N), *c_fma = malloc(sizeof(float) * M * N);
    float *c_bad = malloc(sizeof(float) * M * N);
    double *da = malloc(sizeof(double) * M * K), *db = malloc(sizeof(double) * N * K);
    double *ref = malloc(sizeof(double) * M * N), *mag = malloc(sizeof(double) * M * N);
    assert_true(a && b && c_tf32 && c_fma && c_bad && da && db && ref && mag);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < M * K + N * K; i++) { /* uniform in (-1, 1), full 24-bit mantissas */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const float v = (float)((double)(x >> 11) * 0x1p-52 - 1.0);
        if (i < M * K)
            a[i] = v, da[i] = v;
        else
            b[i - M * K] = v, db[i - M * K] = v;
    }
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(kk_test_op("gemm"), "M=64 N=96 K=512 dtype=f32", &p));
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){da, db}, (double *const[]){ref}));
    kk_assert_ok(kk_op_magnitude(&p, (const double *const[]){da, db}, (double *const[]){mag}));
    gemm_f32_on_gpu(a, b, c_tf32, M, N, K, 1);
    gemm_f32_on_gpu(a, b, c_fma, M, N, K, 0);
    for (int m = 0; m < M; m++) /* the last k lost */
        for (int n = 0; n < N; n++)
            c_bad[m * N + n] =
                (float)((double)c_fma[m * N + n] - (double)a[m * K + K - 1] * b[n * K + K - 1]);

    kk_tolerance strict, loose;
    kk_assert_ok(kk_op_tolerance(kk_test_op("gemm"), KK_DTYPE_F32, &strict));
    loose = strict;
    kk__gemm_tf32_row(&loose);
    assert_true(loose.acc == KK__ACC_TF32 && strict.acc == KK__ACC_F32);
    kk_check_result r;
    kk_assert_ok(kk_check_output_scaled(c_tf32, KK_DTYPE_F32, ref, mag, M * N, &loose, &r));
    print_message("    TF32 under TF32's row: max abs %.3g rel_l2 %.3g %s\n", r.max_abs_err,
                  r.rel_l2_err, r.pass ? "pass" : "FAIL");
    assert_true(r.pass);
    kk_assert_ok(kk_check_output_scaled(c_tf32, KK_DTYPE_F32, ref, mag, M * N, &strict, &r));
    print_message("    TF32 under the f32 row: %zu bad, rel_l2 %.3g %s\n", r.bad_count,
                  r.rel_l2_err, r.pass ? "pass" : "FAIL");
    assert_false(r.pass);
    assert_true(r.bad_count > (size_t)(M * N / 10)); /* not one unlucky element */
    kk_assert_ok(kk_check_output_scaled(c_fma, KK_DTYPE_F32, ref, mag, M * N, &strict, &r));
    print_message("    FMA under the f32 row: max abs %.3g %s\n", r.max_abs_err,
                  r.pass ? "pass" : "FAIL");
    assert_true(r.pass);
    for (int t = 0; t < 2; t++) {
        kk_assert_ok(
            kk_check_output_scaled(c_bad, KK_DTYPE_F32, ref, mag, M * N, t ? &loose : &strict, &r));
        print_message("    K-1 under the %s row: %zu bad %s\n", t ? "TF32" : "f32", r.bad_count,
                      r.pass ? "pass" : "FAIL");
        assert_false(r.pass);
    }
    /* The hook: TF32's row only for CUDA with TF32 allowed. */
    setenv("KK_TF32", "1", 1);
    kk_tolerance t;
    kk_assert_ok(kk__op_tolerance_on(kk_test_op("linear"), KK_DTYPE_F32, KK_BACKEND_CUDA, &t));
    assert_true(t.acc == KK__ACC_TF32);
    kk_assert_ok(kk__op_tolerance_on(kk_test_op("linear"), KK_DTYPE_F32, KK_BACKEND_CPU, &t));
    assert_true(t.acc == KK__ACC_F32);
    kk_assert_ok(kk__op_tolerance_on(kk_test_op("gemm"), KK_DTYPE_BF16, KK_BACKEND_CUDA, &t));
    assert_true(t.acc == KK__ACC_F32);
    setenv("KK_TF32", "0", 1);
    kk_assert_ok(kk__op_tolerance_on(kk_test_op("gemm"), KK_DTYPE_F32, KK_BACKEND_CUDA, &t));
    assert_true(t.acc == KK__ACC_F32);
    unsetenv("KK_TF32");
    free(a), free(b), free(c_tf32), free(c_fma), free(c_bad);
    free(da), free(db), free(ref), free(mag);
}

/* The real kernels (taken before the swap), one with relu where gelu was
 * asked, one told K - 8. */
static kk_op_kernel_fn real_linear, real_gemm;

static kk_status wrong_activation(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__LIN_ACT] = KK__ACT_RELU;
    return real_linear(&q, t, s);
}

static kk_status wrong_k(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__GEMM_K] -= 8;
    return real_gemm(&q, t, s);
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    real_linear = kk__op_slot(kk_test_op("linear"), KK_BACKEND_CUDA).run;
    real_gemm = kk__op_slot(kk_test_op("gemm"), KK_BACKEND_CUDA).run;
    assert_non_null(real_linear);
    assert_non_null(real_gemm);
    kk_op row = *kk_test_op("linear");
    kk__op_swap(&row, KK_BACKEND_CUDA, wrong_activation);
    expect(&row, "M=64 N=64 K=64 bias=1 activation=gelu_erf dtype=bf16", 11, KK_CASE_FAIL);
    expect(&row, "M=64 N=64 K=64 bias=1 activation=relu dtype=bf16", 11, KK_CASE_PASS);
    kk_op g = *kk_test_op("gemm");
    kk__op_swap(&g, KK_BACKEND_CUDA, wrong_k);
    expect(&g, "M=40 N=40 K=64 dtype=f16", 12, KK_CASE_FAIL);
    /* f32, both kernels: each fails under its own row */
    for (int tf32 = 0; tf32 < 2; tf32++) {
        setenv("KK_TF32", tf32 ? "1" : "0", 1);
        expect(&g, "M=40 N=40 K=64 dtype=f32", 13, KK_CASE_FAIL);
        expect(&row, "M=64 N=64 K=64 bias=1 activation=gelu_erf dtype=f32", 14, KK_CASE_FAIL);
        expect(&row, "M=64 N=64 K=64 bias=1 activation=relu dtype=f32", 14, KK_CASE_PASS);
    }
    unsetenv("KK_TF32");
}

/* y of x [M, K] viewed in a [M, K + pad] buffer (and y in [M, N + pad]) has
 * the bits of the contiguous run of the same kernel: pad 8 keeps 16-byte rows
 * (the Hopper kernel's tensor maps take them), pad 3 takes the sm_80 kernel's
 * element loads, so with it the sm_80 kernel is forced throughout. */
static void strided_views(int npads) {
    enum { M = 50, N = 72, K = 64 };
    const kk_dtype dt = KK_DTYPE_BF16;
    kk_tensor *x, *w, *y, *hy;
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, K}, &x));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){N, K}, &w));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, N}, &y));
    kk_assert_ok(kk_tensor_create("cpu", dt, 2, (int64_t[]){M, N}, &hy));
    uint16_t *hx = malloc(sizeof(uint16_t) * M * (K + 8)), *hw = malloc(sizeof(uint16_t) * N * K);
    assert_non_null(hx);
    assert_non_null(hw);
    for (int i = 0; i < M * (K + 8); i++) hx[i] = (uint16_t)(0x3c00 + (i * 37 % 512) - 256);
    for (int i = 0; i < N * K; i++) hw[i] = (uint16_t)(0x3c00 + (i * 53 % 512) - 256);
    kk_tensor *hxt, *hwt;
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 2, (int64_t[]){M, K}, NULL, hx, &hxt));
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 2, (int64_t[]){N, K}, NULL, hw, &hwt));
    kk_assert_ok(kk_tensor_copy(x, hxt));
    kk_assert_ok(kk_tensor_copy(w, hwt));
    kk_assert_ok(kk_linear(x, w, NULL, y, KK_ACT_SILU, NULL));
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    kk_assert_ok(kk_tensor_copy(hy, y));
    uint16_t *want = malloc(sizeof(uint16_t) * M * N);
    assert_non_null(want);
    memcpy(want, hy->data, sizeof(uint16_t) * M * N);
    static const int pads[] = {8, 3};
    for (int pi = 0; pi < npads; pi++) {
        const int pad = pads[pi];
        kk_tensor *xb, *yb, *xv, *yv, *hyv;
        kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, K + pad}, &xb));
        kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, N + pad}, &yb));
        kk_assert_ok(kk_tensor_slice(xb, 1, 0, K, 1, &xv));
        kk_assert_ok(kk_tensor_slice(yb, 1, 0, N, 1, &yv));
        kk_assert_ok(kk_tensor_copy(xv, x));
        kk_assert_ok(kk_linear(xv, w, NULL, yv, KK_ACT_SILU, NULL));
        kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
        kk_assert_ok(kk_tensor_create("cpu", dt, 2, (int64_t[]){M, N}, &hyv));
        kk_assert_ok(kk_tensor_copy(hyv, yv));
        assert_memory_equal(hyv->data, want, sizeof(uint16_t) * M * N);
        kk_tensor_destroy(hyv);
        kk_tensor_destroy(xv);
        kk_tensor_destroy(yv);
        kk_tensor_destroy(xb);
        kk_tensor_destroy(yb);
    }
    free(want);
    free(hx);
    free(hw);
    kk_tensor_destroy(hxt);
    kk_tensor_destroy(hwt);
    kk_tensor_destroy(x);
    kk_tensor_destroy(w);
    kk_tensor_destroy(y);
    kk_tensor_destroy(hy);
}

static void strided_views_give_the_same_bits(void **state) {
    (void)state;
    strided_views(1); /* the default kernel: Hopper's on an H100/H200 */
    setenv("KK_GEMM_KERNEL", "sm80", 1);
    strided_views(2);
    unsetenv("KK_GEMM_KERNEL");
}

/* The Hopper kernel's two epilogues (stored with the TMA through shared
 * memory, the default where y's rows are 16-byte aligned; straight from
 * registers with KK_GEMM_EPILOGUE=regs or where they are not) pass the
 * checker with every activation, bias and residual at M > 64 (N = 300: a
 * box past N clipped, M = 200: a tile past M), and give the same bits: y
 * contiguous, y a view with 16-byte rows (pad 8: the TMA) and with odd rows
 * (pad 3: registers), residual separate and residual = y. */
static uint16_t *epilogue_bits(const uint16_t *hx, const uint16_t *hw, const uint16_t *hb,
                               const uint16_t *hr, int M, int N, int K, kk_activation act,
                               int swiglu, int pad, int res_is_y) {
    const kk_dtype dt = KK_DTYPE_BF16;
    kk_tensor *x, *w, *wu, *b, *r, *yb, *y, *h[5];
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, K}, &x));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){N, K}, &w));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){N, K}, &wu));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 1, (int64_t[]){N}, &b));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, N}, &r));
    kk_assert_ok(kk_tensor_create("cuda:0", dt, 2, (int64_t[]){M, N + pad}, &yb));
    kk_assert_ok(kk_tensor_slice(yb, 1, 0, N, 1, &y));
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 2, (int64_t[]){M, K}, NULL, (void *)hx, &h[0]));
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 2, (int64_t[]){N, K}, NULL, (void *)hw, &h[1]));
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 2, (int64_t[]){N, K}, NULL, (void *)(hw + K), &h[2]));
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 1, (int64_t[]){N}, NULL, (void *)hb, &h[3]));
    kk_assert_ok(kk_tensor_wrap("cpu", dt, 2, (int64_t[]){M, N}, NULL, (void *)hr, &h[4]));
    kk_assert_ok(kk_tensor_copy(x, h[0]));
    kk_assert_ok(kk_tensor_copy(w, h[1]));
    kk_assert_ok(kk_tensor_copy(wu, h[2]));
    kk_assert_ok(kk_tensor_copy(b, h[3]));
    kk_assert_ok(kk_tensor_copy(r, h[4]));
    if (res_is_y) kk_assert_ok(kk_tensor_copy(y, r));
    if (swiglu)
        kk_assert_ok(kk_swiglu(x, w, wu, b, b, y, NULL));
    else
        kk_assert_ok(kk_linear_residual(x, w, b, res_is_y ? y : r, y, act, NULL));
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    kk_tensor *hy;
    kk_assert_ok(kk_tensor_create("cpu", dt, 2, (int64_t[]){M, N}, &hy));
    kk_assert_ok(kk_tensor_copy(hy, y));
    uint16_t *bits = malloc(sizeof(uint16_t) * M * N);
    assert_non_null(bits);
    memcpy(bits, hy->data, sizeof(uint16_t) * M * N);
    kk_tensor *all[] = {x, w, wu, b, r, y, yb, hy, h[0], h[1], h[2], h[3], h[4]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
    return bits;
}

static void epilogues_agree(void **state) {
    (void)state;
    for (size_t d = 0; d < 2; d++)
        for (size_t a = 0; a < 6; a++)
            for (int regs = 0; regs < 2; regs++) {
                char text[192];
                if (regs) setenv("KK_GEMM_EPILOGUE", "regs", 1);
                snprintf(text, sizeof text,
                         "M=200 N=300 K=136 bias=1 activation=%s dtype=%s residual=1", acts[a],
                         dtypes[d]);
                expect(kk_test_op("linear"), text, 4000 + 10 * d + a, KK_CASE_PASS);
                unsetenv("KK_GEMM_EPILOGUE");
            }
    enum { M = 200, N = 300, K = 136 };
    uint16_t *hx = malloc(sizeof(uint16_t) * M * K), *hw = malloc(sizeof(uint16_t) * (N + 1) * K),
             *hb = malloc(sizeof(uint16_t) * N), *hr = malloc(sizeof(uint16_t) * M * N);
    assert_true(hx && hw && hb && hr);
    for (int i = 0; i < M * K; i++) hx[i] = (uint16_t)(0x3f80 + (i * 37 % 256) - 128);
    for (int i = 0; i < (N + 1) * K; i++) hw[i] = (uint16_t)(0x3c00 + (i * 53 % 512) - 256);
    for (int i = 0; i < N; i++) hb[i] = (uint16_t)(0x3e00 + (i * 29 % 256) - 128);
    for (int i = 0; i < M * N; i++) hr[i] = (uint16_t)(0x3f00 + (i * 41 % 256) - 128);
    static const kk_activation forms[] = {KK_ACT_NONE, KK_ACT_GELU_ERF, KK_ACT_SILU, KK_ACT_NONE};
    for (int f = 0; f < 4; f++) {
        const int swiglu = f == 3;
        uint16_t *want = epilogue_bits(hx, hw, hb, hr, M, N, K, forms[f], swiglu, 0, 0);
        static const int pads[] = {0, 8, 3};
        for (int regs = 0; regs < 2; regs++)
            for (int pi = 0; pi < 3; pi++)
                for (int alias = 0; alias < (swiglu ? 1 : 2); alias++) {
                    if (regs) setenv("KK_GEMM_EPILOGUE", "regs", 1);
                    uint16_t *got =
                        epilogue_bits(hx, hw, hb, hr, M, N, K, forms[f], swiglu, pads[pi], alias);
                    unsetenv("KK_GEMM_EPILOGUE");
                    assert_memory_equal(got, want, sizeof(uint16_t) * M * N);
                    free(got);
                }
        free(want);
    }
    free(hx);
    free(hw);
    free(hb);
    free(hr);
}

/* f32, both settings: x viewed in [M, K + pad] and y in [M, N + pad] give the
 * bits of the contiguous run (pad 4 keeps 16-byte rows: float4 / cp.async
 * loads; pad 1 takes the element loads). SwiGLU with bias and residual. */
static kk_status swiglu_residual(kk_tensor *x, kk_tensor *wg, kk_tensor *wu, kk_tensor *bg,
                                 kk_tensor *bu, kk_tensor *r, kk_tensor *y) {
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(
        kk_test_op("linear"), "M=70 N=90 K=132 bias=1 activation=swiglu dtype=f32 residual=1", &p));
    kk_tensor *t[] = {x, wg, wu, bg, bu, r, y};
    return kk_op_run(&p, t, NULL);
}

static void f32_strided_views_give_the_same_bits(void **state) {
    (void)state;
    enum { M = 70, N = 90, K = 132 }; /* swiglu_residual's parameters */
    float *hx = malloc(sizeof(float) * M * K), *hw = malloc(sizeof(float) * 2 * N * K);
    float *hb = malloc(sizeof(float) * 2 * N), *hr = malloc(sizeof(float) * M * N);
    float *want = malloc(sizeof(float) * M * N), *got = malloc(sizeof(float) * M * N);
    assert_true(hx && hw && hb && hr && want && got);
    for (int i = 0; i < M * K; i++) hx[i] = (float)((i * 37 % 101) - 50) / 32.0f;
    for (int i = 0; i < 2 * N * K; i++) hw[i] = (float)((i * 53 % 97) - 48) / 64.0f + 1e-3f;
    for (int i = 0; i < 2 * N; i++) hb[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < M * N; i++) hr[i] = (float)(i % 11) / 8.0f;
    kk_tensor *x = upload_f32(hx, M, K), *wg = upload_f32(hw, N, K),
              *wu = upload_f32(hw + N * K, N, K);
    kk_tensor *bg = upload_f32(hb, 1, N), *bu = upload_f32(hb + N, 1, N), *r = upload_f32(hr, M, N);
    kk_tensor *bg1, *bu1, *y, *hy;
    kk_assert_ok(kk_tensor_reshape(bg, 1, (int64_t[]){N}, &bg1));
    kk_assert_ok(kk_tensor_reshape(bu, 1, (int64_t[]){N}, &bu1));
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 2, (int64_t[]){M, N}, &y));
    for (int tf32 = 0; tf32 < 2; tf32++) {
        setenv("KK_TF32", tf32 ? "1" : "0", 1);
        kk_assert_ok(swiglu_residual(x, wg, wu, bg1, bu1, r, y));
        kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
        kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){M, N}, NULL, want, &hy));
        kk_assert_ok(kk_tensor_copy(hy, y));
        kk_tensor_destroy(hy);
        static const int pads[] = {4, 1};
        for (int pi = 0; pi < 2; pi++) {
            const int pad = pads[pi];
            kk_tensor *xb, *yb, *xv, *yv;
            kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 2, (int64_t[]){M, K + pad}, &xb));
            kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 2, (int64_t[]){M, N + pad}, &yb));
            kk_assert_ok(kk_tensor_slice(xb, 1, 0, K, 1, &xv));
            kk_assert_ok(kk_tensor_slice(yb, 1, 0, N, 1, &yv));
            kk_assert_ok(kk_tensor_copy(xv, x));
            kk_assert_ok(swiglu_residual(xv, wg, wu, bg1, bu1, r, yv));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){M, N}, NULL, got, &hy));
            kk_assert_ok(kk_tensor_copy(hy, yv));
            kk_tensor_destroy(hy);
            print_message("    f32 %s, pad %d: %s\n", tf32 ? "TF32" : "FMA", pad,
                          memcmp(got, want, sizeof(float) * M * N) ? "DIFFERENT" : "same bits");
            assert_memory_equal(got, want, sizeof(float) * M * N);
            kk_tensor_destroy(xv);
            kk_tensor_destroy(yv);
            kk_tensor_destroy(xb);
            kk_tensor_destroy(yb);
        }
    }
    unsetenv("KK_TF32");
    kk_tensor *all[] = {x, wg, wu, bg, bu, bg1, bu1, r, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
    free(hx), free(hw), free(hb), free(hr), free(want), free(got);
}

/* The sm_80-class kernel forced (on a Hopper GPU the default is the other):
 * the same checks pass. */
static void sm80_kernel_passes(void **state) {
    (void)state;
    setenv("KK_GEMM_KERNEL", "sm80", 1);
    expect(kk_test_op("gemm"), "M=300 N=260 K=264 dtype=bf16", 21, KK_CASE_PASS);
    expect(kk_test_op("gemm"), "M=64 N=64 K=64 dtype=f16", 22, KK_CASE_PASS);
    expect(kk_test_op("linear"), "M=100 N=130 K=72 bias=1 activation=swiglu dtype=bf16 residual=1",
           23, KK_CASE_PASS);
    expect(kk_test_op("linear"),
           "M=129 N=257 K=128 bias=1 activation=gelu_tanh dtype=f16 residual=0", 24, KK_CASE_PASS);
    unsetenv("KK_GEMM_KERNEL");
}

/* The Hopper kernel in 2-CTA clusters (KK_GEMM_SM90=cluster; elsewhere the
 * Hopper kernel's default form runs, or what the device has): an odd number
 * of m tiles (the last cluster's second block idle: it loads, stores
 * nothing), N odd and N <= 128 (the second half of b past N), K not a
 * multiple of 64 with fewer and more k steps than stages, more clusters'
 * units than fit at once (each cluster several, its stages' phases running
 * on), every activation with bias and residual, SwiGLU, f16, and M <= 8
 * forced onto it. */
static void cluster_kernel_passes(void **state) {
    (void)state;
    setenv("KK_GEMM_SM90", "cluster", 1);
    expect(kk_test_op("gemm"), "M=300 N=261 K=264 dtype=bf16", 31, KK_CASE_PASS);
    expect(kk_test_op("gemm"), "M=100 N=100 K=200 dtype=bf16", 32, KK_CASE_PASS);
    expect(kk_test_op("gemm"), "M=129 N=385 K=520 dtype=f16", 33, KK_CASE_PASS);
    expect(kk_test_op("gemm"), "M=2175 N=2049 K=136 dtype=bf16", 34, KK_CASE_PASS);
    for (size_t a = 0; a < 6; a++) {
        char text[192];
        snprintf(text, sizeof text, "M=%d N=%d K=%d bias=1 activation=%s dtype=%s residual=1",
                 257 + 128 * (int)(a % 2), a == 5 ? 131 : 301, a == 5 ? 200 : 136, acts[a],
                 dtypes[a % 2]);
        expect(kk_test_op("linear"), text, 3000 + a, KK_CASE_PASS);
    }
    expect(kk_test_op("linear"),
           "M=1590 N=1400 K=136 bias=1 activation=swiglu dtype=bf16 residual=1", 3010,
           KK_CASE_PASS);
    setenv("KK_GEMM_KERNEL", "sm90", 1);
    expect(kk_test_op("linear"), "M=3 N=300 K=256 bias=1 activation=silu dtype=bf16 residual=1",
           3011, KK_CASE_PASS);
    unsetenv("KK_GEMM_KERNEL");
    unsetenv("KK_GEMM_SM90");
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_sizes_pass),
        cmocka_unit_test(linear_every_form_passes),
        cmocka_unit_test(activation_tails_pass),
        cmocka_unit_test(decode_kernel_passes),
        cmocka_unit_test(skinny_kernel_passes),
        cmocka_unit_test(f32_fma_passes),
        cmocka_unit_test(f32_tf32_passes),
        cmocka_unit_test(tf32_fails_the_strict_row),
        cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(strided_views_give_the_same_bits),
        cmocka_unit_test(epilogues_agree),
        cmocka_unit_test(f32_strided_views_give_the_same_bits),
        cmocka_unit_test(sm80_kernel_passes),
        cmocka_unit_test(cluster_kernel_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

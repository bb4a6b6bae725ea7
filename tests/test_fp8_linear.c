/* labels: unit cpu */
/* The fp8_linear op (src/opdef/fp8_linear.c), its CPU kernel
 * (src/cpu/fp8_linear_cpu.c) and kk_fp8_linear: the registry row; x's
 * on-the-fly quantization equal to kk_quantize's byte for byte; the kernel
 * against the float64 reference for each scaling, activation, bias and
 * residual on odd sizes; deliberately wrong kernels failing the same checker;
 * the error each user mistake gets; residual = y; hardware.nvidia.fp8_enabled
 * not gating an explicit call (docs/configuration.md); weights from
 * kk_quantize taken as is and the end-to-end error against the bf16 linear
 * (docs/kernels/fp8_gemm.md, "FP8 Linear"). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_kernels.h"
#include "opdef/fp8_linear.h"
#include "opdef/linear.h"
#include "kernelkit/cases.h"
#include "kernelkit/config.h"
#include "kernelkit/ops.h"
#include "kernelkit/quant.h"

/* ---- small helpers ---- */

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void) { /* (0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) {
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static kk_tensor *make(kk_dtype dt, int ndim, const int64_t *shape) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", dt, ndim, shape, &t));
    return t;
}

/* values (f64) written into t in its dtype */
static void fill(kk_tensor *t, const double *v) {
    kk_assert_ok(kk_convert_host(v, KK_DTYPE_F64, t->data, t->dtype, (size_t)kk_tensor_numel(t)));
}

static double *values(const kk_tensor *t) {
    const size_t n = (size_t)kk_tensor_numel(t);
    double *v = malloc(n * sizeof *v);
    assert_non_null(v);
    kk_assert_ok(kk_convert_host(t->data, t->dtype, v, KK_DTYPE_F64, n));
    return v;
}

/* x [M,K] normal (outliers 0); 1: every 64th channel 50x and one element in
 * 1000 100x, the pattern of LLM activations (a few channels carry most of the
 * magnitude); 2: one element in 2000 10^4x (rare spikes, which crush the rest
 * of their row's, or 1x128 group's, values towards e4m3's subnormals). */
static void draw_x(double *x, int64_t M, int64_t K, int outliers) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            double v = normal();
            if (outliers == 1 && k % 64 == 7) v *= 50.0;
            if (outliers == 1 && uniform() < 1e-3) v *= 100.0;
            if (outliers == 2 && uniform() < 5e-4) v *= 1e4;
            x[m * K + k] = v;
        }
}

/* ---- the registry row ---- */

static void row_is_registered(void **state) {
    (void)state;
    const kk_op *op = kk_test_op("fp8_linear");
    assert_non_null(kk__op_slot(op, KK_BACKEND_CPU).run);
    kk_op_params p;
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_params_parse(op, "M=3 N=300 K=257 scaling=block residual=1", &p));
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    assert_int_equal(n, 6); /* x, w, w_scales, bias, residual, y */
    assert_string_equal(t[1].name, "w");
    assert_int_equal(t[1].dtype, KK_DTYPE_FP8_E4M3);
    assert_int_equal(t[2].ndim, 2);
    assert_int_equal(t[2].shape[0], 3); /* ceil(300/128) */
    assert_int_equal(t[2].shape[1], 3); /* ceil(257/128) */
    assert_int_equal(t[0].dtype, KK_DTYPE_BF16);
    kk_assert_ok(kk_op_params_parse(op, "M=3 N=300 K=257 scaling=rowwise bias=0", &p));
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    assert_int_equal(n, 4);
    assert_int_equal(t[2].ndim, 1);
    assert_int_equal(t[2].shape[0], 300);
    kk_op_params bad;
    assert_int_not_equal(kk_op_params_parse(op, "activation=swiglu", &bad), KK_OK);
    assert_int_not_equal(kk_op_params_parse(op, "scaling=tensor", &bad), KK_OK);
}

/* ---- x's quantization is kk_quantize's, byte for byte ---- */

static void quantization_is_kk_quantize(void **state) {
    (void)state;
    static const kk_dtype dts[] = {KK_DTYPE_BF16, KK_DTYPE_F16, KK_DTYPE_F32};
    const int64_t M = 37, K = 300, G = 3;
    for (int d = 0; d < 3; d++)
        for (int outliers = 0; outliers < 2; outliers++) {
            double *xv = malloc(sizeof(double) * (size_t)(M * K));
            assert_non_null(xv);
            draw_x(xv, M, K, outliers);
            for (int64_t k = 0; k < K; k++) xv[5 * K + k] = 0.0; /* an all-zero row: scale 1 */
            kk_tensor *x = make(dts[d], 2, (int64_t[]){M, K});
            fill(x, xv);
            uint8_t *q = malloc((size_t)(M * K));
            float *s = malloc(sizeof(float) * (size_t)(M * G));
            assert_non_null(q);
            assert_non_null(s);
            /* block: KK_SCALE_1X128 of the whole x */
            kk_qtensor ref;
            kk_assert_ok(
                kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 2, x->shape, &ref));
            kk_assert_ok(kk_quantize(x, &ref, NULL));
            kk_assert_ok(kk__fp8_linear_quantize_x_cpu(x->data, dts[d], M, K, 1, q, s));
            assert_memory_equal(q, ref.data->data, (size_t)(M * K));
            assert_memory_equal(s, ref.scales->data, sizeof(float) * (size_t)(M * G));
            kk_qtensor_destroy(&ref);
            /* rowwise: kk_quantize's per-tensor rule on each row */
            kk_assert_ok(kk__fp8_linear_quantize_x_cpu(x->data, dts[d], M, K, 0, q, s));
            const size_t es = dts[d] == KK_DTYPE_F32 ? 4 : 2;
            for (int64_t m = 0; m < M; m++) {
                kk_tensor *xr = NULL;
                kk_assert_ok(kk_tensor_wrap("cpu", dts[d], 1, &K, NULL,
                                            (char *)x->data + (size_t)(m * K) * es, &xr));
                kk_assert_ok(
                    kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, 1, &K, &ref));
                kk_assert_ok(kk_quantize(xr, &ref, NULL));
                assert_memory_equal(q + m * K, ref.data->data, (size_t)K);
                assert_memory_equal(s + m, ref.scales->data, sizeof(float));
                kk_qtensor_destroy(&ref);
                kk_tensor_destroy(xr);
            }
            assert_true(s[5] == 1.0f);
            free(q);
            free(s);
            free(xv);
            kk_tensor_destroy(x);
        }
}

/* ---- the CPU kernel against the reference ---- */

static void cpu_matches_reference(void **state) {
    (void)state;
    static const char *const shapes[] = {"M=7 N=131 K=300", "M=33 N=5 K=77", "M=1 N=129 K=129",
                                         "M=65 N=64 K=128"};
    static const char *const acts[] = {"none", "relu", "gelu_tanh", "silu", "gelu_erf"};
    static const char *const dts[] = {"bf16", "f32", "f16"};
    uint64_t seed = 100;
    for (int sc = 0; sc < 2; sc++)
        for (int s = 0; s < 4; s++)
            for (int a = 0; a < 5; a++)
                for (int br = 0; br < 4; br++) {
                    char text[200];
                    snprintf(text, sizeof text,
                             "%s scaling=%s activation=%s bias=%d residual=%d dtype=%s", shapes[s],
                             sc ? "block" : "rowwise", acts[a], br & 1, br >> 1,
                             dts[(s + a + br) % 3]);
                    const kk_case_result r = kk_test_run_cpu_case("fp8_linear", text, NULL, seed++);
                    if (r.status != KK_CASE_PASS) fail_msg("%s: %s", text, r.message);
                }
}

/* ---- wrong kernels fail ---- */

/* The op in plain loops (x quantized by the kernel's own function), with one
 * deliberate mistake (RIGHT: none). */
enum { RIGHT, X_SCALE_NEXT_GROUP, W_BLOCK_N64, X_NOT_QUANTIZED, BIAS_DROPPED };
static int mistake;

static kk_status loops(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t M = p->i[KK__FL_M], N = p->i[KK__FL_N], K = p->i[KK__FL_K];
    const int block = kk__fp8_linear_block(p), act = (int)p->i[KK__FL_ACT];
    const int64_t G = kk__fp8_groups(K), GX = block ? G : 1, NB = kk__fp8_groups(N);
    const kk__fp8_linear_layout l = kk__fp8_linear_layout_of(p);
    const kk_dtype dt = (kk_dtype)p->i[KK__FL_DTYPE];
    uint8_t *xq = malloc((size_t)(M * K));
    float *sx = malloc(sizeof(float) * (size_t)(M * GX)), *row = malloc(sizeof(float) * (size_t)N);
    double *x = values(t[l.x]), *bias = l.bias >= 0 ? values(t[l.bias]) : NULL;
    double *r = l.residual >= 0 ? values(t[l.residual]) : NULL;
    const uint8_t *w = t[l.w]->data;
    const float *sw = t[l.w_scales]->data;
    kk_assert_ok(kk__fp8_linear_quantize_x_cpu(t[l.x]->data, dt, M, K, block, xq, sx));
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            double h = 0.0;
            for (int64_t g = 0; g < G; g++) {
                double sum = 0.0;
                for (int64_t k = g * 128; k < K && k < (g + 1) * 128; k++) {
                    const double xv =
                        mistake == X_NOT_QUANTIZED
                            ? x[m * K + k]
                            : kk_e4m3_to_f32(xq[m * K + k]) * (double)sx[m * GX + (block ? g : 0)];
                    sum += xv * kk_e4m3_to_f32(w[n * K + k]);
                }
                if (!block) {
                    h += sum;
                    continue;
                }
                int64_t gx = g, nb = n / 128;
                if (mistake == X_SCALE_NEXT_GROUP) gx = g + 1 < G ? g + 1 : G - 1;
                if (mistake == W_BLOCK_N64) nb = n / 64 < NB ? n / 64 : NB - 1;
                const double ratio = mistake == X_NOT_QUANTIZED
                                         ? 1.0
                                         : (double)sx[m * GX + gx] / (double)sx[m * GX + g];
                h += ratio * (double)sw[nb * G + g] * sum;
            }
            if (!block) {
                int64_t nn = n;
                if (mistake == X_SCALE_NEXT_GROUP) /* rowwise: the next row's x scale */
                    h *= (double)sx[m + 1 < M ? m + 1 : 0] / (double)sx[m];
                if (mistake == W_BLOCK_N64) nn = n / 2; /* the wrong channel's scale */
                h *= (double)sw[nn];
            }
            if (bias && mistake != BIAS_DROPPED) h += bias[n];
            row[n] = (float)(kk__activation_f64(act, h) + (r ? r[m * N + n] : 0.0));
        }
        kk__cpu_store_row(row, t[l.y]->data, dt, m * N, N);
    }
    free(xq);
    free(sx);
    free(row);
    free(x);
    free(bias);
    free(r);
    return KK_OK;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    static const char *const cases[] = {
        "M=9 N=200 K=300 scaling=block activation=none bias=1 dtype=bf16",
        "M=9 N=200 K=300 scaling=block activation=silu bias=1 residual=1 dtype=f32",
        "M=5 N=131 K=129 scaling=block activation=gelu_tanh bias=1 dtype=bf16",
        "M=9 N=40 K=77 scaling=rowwise activation=relu bias=1 dtype=bf16",
        "M=9 N=40 K=300 scaling=rowwise activation=none bias=1 residual=1 dtype=f32"};
    for (int mk = RIGHT; mk <= BIAS_DROPPED; mk++)
        for (int i = 0; i < 5; i++) {
            mistake = mk;
            const kk_case_result r = kk_test_run_cpu_case("fp8_linear", cases[i], loops, 7 + i);
            const kk_case_status want = mk == RIGHT ? KK_CASE_PASS : KK_CASE_FAIL;
            if (r.status != want)
                fail_msg("mistake %d, %s: %s, expected %s", mk, cases[i],
                         kk_case_status_name(r.status), kk_case_status_name(want));
        }
    mistake = RIGHT;
}

/* ---- the user's mistakes ---- */

static void user_mistakes(void **state) {
    (void)state;
    const int64_t M = 4, N = 130, K = 200;
    kk_tensor *x = make(KK_DTYPE_BF16, 2, (int64_t[]){M, K});
    kk_tensor *w = make(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){N, K});
    kk_tensor *w_bf16 = make(KK_DTYPE_BF16, 2, (int64_t[]){N, K});
    kk_tensor *ws_block = make(KK_DTYPE_F32, 2, (int64_t[]){2, 2});
    kk_tensor *ws_row = make(KK_DTYPE_F32, 1, &N);
    kk_tensor *y = make(KK_DTYPE_BF16, 2, (int64_t[]){M, N});
    kk_tensor *x_fp8 = make(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){M, K});
    kk_tensor *y_f32 = make(KK_DTYPE_F32, 2, (int64_t[]){M, N});
    memset(x->data, 0, (size_t)(M * K) * 2);
    memset(w->data, 0, (size_t)(N * K));
    memset(w_bf16->data, 0, (size_t)(N * K) * 2);
    memset(ws_block->data, 0, 16);
    memset(ws_row->data, 0, (size_t)N * 4);
    memset(x_fp8->data, 0, (size_t)(M * K));
    /* right: both modes */
    kk_assert_ok(
        kk_fp8_linear(x, w, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL));
    kk_assert_ok(
        kk_fp8_linear(x, w, ws_row, NULL, NULL, y, KK_ACT_RELU, KK_FP8_SCALING_ROWWISE, NULL));
    /* weights not fp8 */
    kk_assert_status(
        kk_fp8_linear(x, w_bf16, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL),
        KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "w");
    kk_assert_contains(kk_last_error_message(), "fp8_e4m3");
    /* scales of the other mode's shape, both ways */
    kk_assert_status(
        kk_fp8_linear(x, w, ws_row, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL),
        KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "w_scales");
    kk_assert_status(
        kk_fp8_linear(x, w, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_ROWWISE, NULL),
        KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "w_scales");
    /* x not a float dtype (already fp8), and y not x's dtype */
    kk_assert_status(
        kk_fp8_linear(x_fp8, w, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL),
        KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "x");
    kk_assert_status(
        kk_fp8_linear(x, w, ws_block, NULL, NULL, y_f32, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL),
        KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "y");
    /* per-tensor scaling and SwiGLU are not this op's */
    kk_assert_status(
        kk_fp8_linear(x, w, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_TENSOR, NULL),
        KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "scaling");
    kk_assert_status(kk_fp8_linear(x, w, ws_block, NULL, NULL, y, (kk_activation)KK_ACT_COUNT,
                                   KK_FP8_SCALING_BLOCK, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "act");
    kk_assert_status(
        kk_fp8_linear(x, NULL, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL),
        KK_ERR_INVALID_ARGUMENT);
    /* an infinity in x: refused, as kk_quantize refuses it */
    ((uint16_t *)x->data)[3] = 0x7F80u;
    kk_assert_status(
        kk_fp8_linear(x, w, ws_block, NULL, NULL, y, KK_ACT_NONE, KK_FP8_SCALING_BLOCK, NULL),
        KK_ERR_QUANTIZATION);
    kk_tensor *all[] = {x, w, w_bf16, ws_block, ws_row, y, x_fp8, y_f32};
    for (int i = 0; i < 8; i++) kk_tensor_destroy(all[i]);
}

/* residual may be y itself (y += ...), as kk_linear_residual allows. */
static void residual_may_be_y(void **state) {
    (void)state;
    const int64_t M = 6, N = 300, K = 140;
    kk_tensor *x = make(KK_DTYPE_BF16, 2, (int64_t[]){M, K});
    kk_tensor *w = make(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){N, K});
    kk_tensor *ws = make(KK_DTYPE_F32, 1, &N), *bias = make(KK_DTYPE_BF16, 1, &N);
    kk_tensor *r = make(KK_DTYPE_BF16, 2, (int64_t[]){M, N}),
              *y = make(KK_DTYPE_BF16, 2, (int64_t[]){M, N});
    double *v = malloc(sizeof(double) * (size_t)(M * K + M * N + N));
    assert_non_null(v);
    for (int64_t i = 0; i < M * K + M * N + N; i++) v[i] = normal();
    fill(x, v);
    fill(r, v + M * K);
    fill(bias, v + M * K + M * N);
    for (int64_t i = 0; i < N * K; i++) ((uint8_t *)w->data)[i] = (uint8_t)(i * 37 % 0x7E);
    for (int64_t i = 0; i < N; i++) ((float *)ws->data)[i] = 0.001f * (float)(i + 1);
    kk_assert_ok(kk_fp8_linear(x, w, ws, bias, r, y, KK_ACT_SILU, KK_FP8_SCALING_ROWWISE, NULL));
    kk_assert_ok(kk_fp8_linear(x, w, ws, bias, r, r, KK_ACT_SILU, KK_FP8_SCALING_ROWWISE, NULL));
    assert_memory_equal(r->data, y->data, (size_t)(M * N) * 2);
    free(v);
    kk_tensor *all[] = {x, w, ws, bias, r, y};
    for (int i = 0; i < 6; i++) kk_tensor_destroy(all[i]);
}

/* ---- hardware.nvidia.fp8_enabled ----
 * It decides automatic choices only (none exists yet: the decoder's aggressive
 * level plans no FP8 GEMM, docs/configuration.md). An explicit fp8_linear is
 * the caller's choice: it runs, with the same bytes, whether the knob is on
 * or off. */
static void fp8_enabled_does_not_gate_an_explicit_call(void **state) {
    (void)state;
    const int64_t M = 5, N = 131, K = 129;
    kk_tensor *x = make(KK_DTYPE_BF16, 2, (int64_t[]){M, K});
    kk_tensor *w = make(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){N, K});
    kk_tensor *ws = make(KK_DTYPE_F32, 2, (int64_t[]){2, 2});
    kk_tensor *y[2] = {make(KK_DTYPE_BF16, 2, (int64_t[]){M, N}),
                       make(KK_DTYPE_BF16, 2, (int64_t[]){M, N})};
    double *xv = malloc(sizeof(double) * (size_t)(M * K));
    assert_non_null(xv);
    draw_x(xv, M, K, 0);
    fill(x, xv);
    for (int64_t i = 0; i < N * K; i++) ((uint8_t *)w->data)[i] = (uint8_t)(i * 37 % 0x7E);
    for (int i = 0; i < 4; i++) ((float *)ws->data)[i] = 0.01f * (float)(i + 1);
    for (int on = 0; on < 2; on++) {
        assert_int_equal(setenv("KK_FP8", on ? "1" : "0", 1), 0);
        kk_config cfg;
        kk_assert_ok(kk_config_from_environment(&cfg));
        assert_int_equal(cfg.hardware.nvidia.fp8_enabled, on);
        kk_assert_ok(kk_fp8_linear(x, w, ws, NULL, NULL, y[on], KK_ACT_GELU_TANH,
                                   KK_FP8_SCALING_BLOCK, NULL));
    }
    unsetenv("KK_FP8");
    assert_memory_equal(y[0]->data, y[1]->data, (size_t)(M * N) * 2);
    free(xv);
    kk_tensor *all[] = {x, w, ws, y[0], y[1]};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(all[i]);
}

/* ---- weights from kk_quantize, and the error against the bf16 linear ---- */

/* w quantized as the op takes it: block by kk_quantize's KK_SCALE_128X128,
 * rowwise by its per-tensor rule on each row (one scale per channel). */
static void quantize_w(const kk_tensor *w, int block, kk_tensor *wq, kk_tensor *ws) {
    const int64_t N = w->shape[0], K = w->shape[1];
    if (block) {
        kk_qtensor q = {KK_SCALE_128X128, wq, ws, NULL};
        kk_assert_ok(kk_quantize(w, &q, NULL));
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        kk_tensor *wr = NULL, *qr = NULL, *sr = NULL;
        const int64_t one = 1;
        kk_assert_ok(
            kk_tensor_wrap("cpu", w->dtype, 1, &K, NULL, (uint16_t *)w->data + n * K, &wr));
        kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 1, &K, NULL,
                                    (uint8_t *)wq->data + n * K, &qr));
        kk_assert_ok(
            kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, &one, NULL, (float *)ws->data + n, &sr));
        kk_qtensor q = {KK_SCALE_PER_TENSOR, qr, sr, NULL};
        kk_assert_ok(kk_quantize(wr, &q, NULL));
        kk_tensor_destroy(wr);
        kk_tensor_destroy(qr);
        kk_tensor_destroy(sr);
    }
}

static double rel_l2(const double *a, const double *b, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

/* y of kk_fp8_linear (bf16) against kk_linear's in bf16 on the same bf16 x
 * and w, both also against the float64 product: printed for
 * docs/kernels/fp8_gemm.md ("FP8 Linear"), bounded loosely here. */
static void error_against_bf16_linear(void **state) {
    (void)state;
    const int64_t M = 256, N = 512, K = 2048;
    double *xv = malloc(sizeof(double) * (size_t)(M * K));
    double *wv = malloc(sizeof(double) * (size_t)(N * K));
    double *exact = malloc(sizeof(double) * (size_t)(M * N));
    assert_non_null(xv);
    assert_non_null(wv);
    assert_non_null(exact);
    for (int64_t i = 0; i < N * K; i++) wv[i] = normal() / sqrt((double)K);
    kk_tensor *x = make(KK_DTYPE_BF16, 2, (int64_t[]){M, K}),
              *w = make(KK_DTYPE_BF16, 2, (int64_t[]){N, K});
    kk_tensor *y16 = make(KK_DTYPE_BF16, 2, (int64_t[]){M, N}),
              *y8 = make(KK_DTYPE_BF16, 2, (int64_t[]){M, N});
    kk_tensor *wq = make(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){N, K});
    fill(w, wv);
    double *wb = values(w);
    print_message("    %-8s %-8s %14s %14s %14s\n", "x", "scaling", "fp8 vs bf16", "fp8 vs f64",
                  "bf16 vs f64");
    static const char *const kinds[] = {"normal", "channels", "spikes"};
    for (int outliers = 0; outliers < 3; outliers++) {
        draw_x(xv, M, K, outliers);
        fill(x, xv);
        double *xb = values(x);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++) acc += xb[m * K + k] * wb[n * K + k];
                exact[m * N + n] = acc;
            }
        kk_assert_ok(kk_linear(x, w, NULL, y16, KK_ACT_NONE, NULL));
        double *a16 = values(y16);
        for (int block = 0; block < 2; block++) {
            kk_tensor *ws =
                block ? make(KK_DTYPE_F32, 2, (int64_t[]){4, 16}) : make(KK_DTYPE_F32, 1, &N);
            quantize_w(w, block, wq, ws);
            kk_assert_ok(kk_fp8_linear(x, wq, ws, NULL, NULL, y8, KK_ACT_NONE,
                                       block ? KK_FP8_SCALING_BLOCK : KK_FP8_SCALING_ROWWISE,
                                       NULL));
            double *a8 = values(y8);
            const double e816 = rel_l2(a8, a16, M * N), e8 = rel_l2(a8, exact, M * N);
            const double e16 = rel_l2(a16, exact, M * N);
            print_message("    %-8s %-8s %14.3e %14.3e %14.3e\n", kinds[outliers],
                          block ? "block" : "rowwise", e816, e8, e16);
            assert_true(e816 < 0.2); /* e4m3 keeps 3 bits: a few percent, more with spikes */
            assert_true(e16 < 1e-2);
            free(a8);
            kk_tensor_destroy(ws);
        }
        free(a16);
        free(xb);
    }
    free(wb);
    free(xv);
    free(wv);
    free(exact);
    kk_tensor *all[] = {x, w, y16, y8, wq};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(all[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(row_is_registered),
        cmocka_unit_test(quantization_is_kk_quantize),
        cmocka_unit_test(cpu_matches_reference),
        cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(user_mistakes),
        cmocka_unit_test(residual_may_be_y),
        cmocka_unit_test(fp8_enabled_does_not_gate_an_explicit_call),
        cmocka_unit_test(error_against_bf16_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

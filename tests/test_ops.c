/* labels: unit cpu */
/* The public entry points of kernelkit/ops.h: they read the sizes off the
 * shapes, run the op through kk_op_run (so the same kernel `kernelkit check`
 * proves), and refuse bad tensors naming them. Results are compared with
 * plain loops written here in double precision, and every entry point's
 * output with kk_op_run's on the same parameters and inputs, bit for bit. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/harness.h"
#include "kernelkit/cases.h"
#include "kernelkit/ops.h"

static kk_tensor *f32(int ndim, const int64_t *shape, float *data) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, ndim, shape, NULL, data, &t));
    return t;
}

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 500.0f;
    }
}

static void gemm_matches_loops(void **state) {
    (void)state;
    enum { M = 5, N = 7, K = 33 };
    float a[M * K], b[N * K], c[M * N];
    fill(a, M * K, 1);
    fill(b, N * K, 2);
    kk_tensor *ta = f32(2, (int64_t[]){M, K}, a), *tb = f32(2, (int64_t[]){N, K}, b),
              *tc = f32(2, (int64_t[]){M, N}, c);
    kk_assert_ok(kk_gemm(ta, tb, tc, NULL));
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = 0;
            for (int k = 0; k < K; k++) ref += (double)a[m * K + k] * b[n * K + k];
            assert_true(fabs(c[m * N + n] - ref) <= 1e-4 + 1e-4 * fabs(ref));
        }
    kk_tensor_destroy(ta);
    kk_tensor_destroy(tb);
    kk_tensor_destroy(tc);
}

static void linear_applies_bias_and_activation(void **state) {
    (void)state;
    enum { M = 3, N = 4, K = 9 };
    float x[M * K], w[N * K], bias[N], y[M * N];
    fill(x, M * K, 3);
    fill(w, N * K, 4);
    fill(bias, N, 5);
    kk_tensor *tx = f32(2, (int64_t[]){M, K}, x), *tw = f32(2, (int64_t[]){N, K}, w),
              *tb = f32(1, (int64_t[]){N}, bias), *ty = f32(2, (int64_t[]){M, N}, y);
    kk_assert_ok(kk_linear(tx, tw, tb, ty, KK_ACT_RELU, NULL));
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = bias[n];
            for (int k = 0; k < K; k++) ref += (double)x[m * K + k] * w[n * K + k];
            ref = ref > 0 ? ref : 0;
            assert_true(fabs(y[m * N + n] - ref) <= 1e-4 + 1e-4 * fabs(ref));
        }
    kk_assert_status(kk_linear(tx, tw, tb, ty, (kk_activation)99, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "act");
    kk_tensor_destroy(tx);
    kk_tensor_destroy(tw);
    kk_tensor_destroy(tb);
    kk_tensor_destroy(ty);
}

/* y = relu(x.w^T + b) + r, in place (r is y) as the o_proj of a layer does;
 * a NULL residual and a wrong shape are named. */
static void linear_residual_adds_after_the_activation(void **state) {
    (void)state;
    enum { M = 3, N = 4, K = 9 };
    float x[M * K], w[N * K], bias[N], y[M * N], r[M * N];
    fill(x, M * K, 13);
    fill(w, N * K, 14);
    fill(bias, N, 15);
    fill(y, M * N, 16);
    memcpy(r, y, sizeof r);
    kk_tensor *tx = f32(2, (int64_t[]){M, K}, x), *tw = f32(2, (int64_t[]){N, K}, w),
              *tb = f32(1, (int64_t[]){N}, bias), *ty = f32(2, (int64_t[]){M, N}, y),
              *tbad = f32(2, (int64_t[]){N, M}, r);
    kk_assert_ok(kk_linear_residual(tx, tw, tb, ty, ty, KK_ACT_RELU, NULL));
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = bias[n];
            for (int k = 0; k < K; k++) ref += (double)x[m * K + k] * w[n * K + k];
            ref = (ref > 0 ? ref : 0) + r[m * N + n];
            assert_true(fabs(y[m * N + n] - ref) <= 1e-4 + 1e-4 * fabs(ref));
        }
    kk_assert_status(kk_linear_residual(tx, tw, tb, NULL, ty, KK_ACT_RELU, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "residual");
    kk_assert_status(kk_linear_residual(tx, tw, tb, tbad, ty, KK_ACT_RELU, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "residual");
    kk_tensor_destroy(tx);
    kk_tensor_destroy(tw);
    kk_tensor_destroy(tb);
    kk_tensor_destroy(ty);
    kk_tensor_destroy(tbad);
}

/* One query row over Sk keys, no mask: o = softmax(q.k^T/sqrt(D)) v. */
static void attention_matches_loops(void **state) {
    (void)state;
    enum { Sq = 2, Sk = 5, D = 16 };
    float q[Sq * D], k[Sk * D], v[Sk * D], o[Sq * D], lse[Sq];
    fill(q, Sq * D, 6);
    fill(k, Sk * D, 7);
    fill(v, Sk * D, 8);
    kk_tensor *tq = f32(4, (int64_t[]){1, 1, Sq, D}, q), *tk = f32(4, (int64_t[]){1, 1, Sk, D}, k),
              *tv = f32(4, (int64_t[]){1, 1, Sk, D}, v), *to = f32(4, (int64_t[]){1, 1, Sq, D}, o),
              *tl = f32(3, (int64_t[]){1, 1, Sq}, lse);
    kk_attention_options opt;
    kk_attention_options_init(&opt);
    kk_assert_ok(kk_attention(tq, tk, tv, to, tl, &opt, NULL));
    for (int i = 0; i < Sq; i++) {
        double s[Sk], mx = -INFINITY, sum = 0;
        for (int j = 0; j < Sk; j++) {
            s[j] = 0;
            for (int d = 0; d < D; d++) s[j] += (double)q[i * D + d] * k[j * D + d];
            s[j] /= sqrt((double)D);
            mx = fmax(mx, s[j]);
        }
        for (int j = 0; j < Sk; j++) sum += exp(s[j] - mx);
        assert_true(fabs(lse[i] - (mx + log(sum))) <= 1e-5);
        for (int d = 0; d < D; d++) {
            double ref = 0;
            for (int j = 0; j < Sk; j++) ref += exp(s[j] - mx) / sum * v[j * D + d];
            assert_true(fabs(o[i * D + d] - ref) <= 1e-5 + 1e-4 * fabs(ref));
        }
    }
    /* GQA needs Hq a multiple of Hkv: q has 1 head, k 1: fine; a k of 2 heads is not */
    kk_tensor *k2 = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 4, (int64_t[]){1, 2, Sk, D}, &k2));
    kk_assert_status(kk_attention(tq, k2, tv, to, NULL, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "Hkv");
    kk_tensor_destroy(k2);
    kk_tensor *tensors[] = {tq, tk, tv, to, tl};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(tensors[i]);
}

/* Missing or misshapen tensors are named; the sizes come from the shapes, so
 * a tensor that disagrees with the others is caught by kk_op_run's checks. */
static void refuses_bad_tensors(void **state) {
    (void)state;
    float buf[64] = {0};
    kk_tensor *a = f32(2, (int64_t[]){2, 4}, buf), *b = f32(2, (int64_t[]){3, 4}, buf),
              *c = f32(2, (int64_t[]){2, 3}, buf), *v = f32(1, (int64_t[]){8}, buf),
              *c_wrong = f32(2, (int64_t[]){2, 5}, buf);
    kk_assert_status(kk_gemm(NULL, b, c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "a");
    kk_assert_status(kk_gemm(a, v, c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "2 dimensions");
    kk_assert_status(kk_gemm(a, b, c_wrong, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "[2,3]");
    kk_assert_status(kk_swiglu(a, b, b, v, NULL, c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "both or neither");
    kk_assert_status(kk_attention(a, a, a, a, NULL, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "4 dimensions");
    kk_assert_status(kk_nvfp4_gemv(a, NULL, a, NULL, NULL, NULL, c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_nvfp4_gemv(a, a, a, a, v, NULL, c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "ga, gb");
    kk_tensor *all[] = {a, b, c, v, c_wrong};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(all[i]);
}

/* ---- every entry point against kk_op_run, bit for bit ---- */

/* Calls one entry point with the tensors of kk_op_tensors(p) and p's options. */
typedef kk_status (*entry_call)(const kk_op_params *p, kk_tensor *const *t);

static kk_status call_gemm(const kk_op_params *p, kk_tensor *const *t) {
    (void)p;
    return kk_gemm(t[0], t[1], t[2], NULL);
}
static kk_status call_linear(const kk_op_params *p, kk_tensor *const *t) {
    const kk_activation act = (kk_activation)kk_op_params_int(p, "activation");
    return kk_op_params_int(p, "bias") ? kk_linear(t[0], t[1], t[2], t[3], act, NULL)
                                       : kk_linear(t[0], t[1], NULL, t[2], act, NULL);
}
static kk_status call_linear_residual(const kk_op_params *p, kk_tensor *const *t) {
    const kk_activation act = (kk_activation)kk_op_params_int(p, "activation");
    return kk_op_params_int(p, "bias")
               ? kk_linear_residual(t[0], t[1], t[2], t[3], t[4], act, NULL)
               : kk_linear_residual(t[0], t[1], NULL, t[2], t[3], act, NULL);
}
static kk_status call_swiglu(const kk_op_params *p, kk_tensor *const *t) {
    return kk_op_params_int(p, "bias") ? kk_swiglu(t[0], t[1], t[2], t[3], t[4], t[5], NULL)
                                       : kk_swiglu(t[0], t[1], t[2], NULL, NULL, t[3], NULL);
}
static kk_attention_options attention_options(const kk_op_params *p) {
    kk_attention_options o = KK_ATTENTION_OPTIONS_INIT;
    o.causal = (int)kk_op_params_int(p, "causal");
    o.window_left = kk_op_params_int(p, "window_left");
    o.window_right = kk_op_params_int(p, "window_right");
    o.scale = kk_op_params_float(p, "scale");
    o.dropout = kk_op_params_float(p, "dropout");
    o.seed = (uint64_t)kk_op_params_int(p, "seed");
    o.offset = (uint64_t)kk_op_params_int(p, "offset");
    return o;
}
static kk_status call_attention(const kk_op_params *p, kk_tensor *const *t) {
    const kk_attention_options o = attention_options(p);
    return kk_attention(t[0], t[1], t[2], t[3], kk_op_params_int(p, "lse") ? t[4] : NULL, &o, NULL);
}
static kk_status call_attention_varlen(const kk_op_params *p, kk_tensor *const *t) {
    const kk_attention_options o = attention_options(p);
    return kk_attention_varlen(t[0], t[1], t[2], t[3], t[4], kk_op_params_int(p, "max_seqlen_q"),
                               kk_op_params_int(p, "max_seqlen_k"), t[5],
                               kk_op_params_int(p, "lse") ? t[6] : NULL, &o, NULL);
}
static kk_status call_nvfp4_gemv(const kk_op_params *p, kk_tensor *const *t) {
    return kk_op_params_int(p, "global")
               ? kk_nvfp4_gemv(t[0], t[2], t[1], t[3], t[4], t[5], t[6], NULL)
               : kk_nvfp4_gemv(t[0], t[2], t[1], t[3], NULL, NULL, t[4], NULL);
}
static kk_status call_rmsnorm(const kk_op_params *p, kk_tensor *const *t) {
    return kk_rmsnorm(t[0], t[1], t[2], kk_op_params_float(p, "eps"), NULL);
}
static kk_status call_layernorm(const kk_op_params *p, kk_tensor *const *t) {
    const double eps = kk_op_params_float(p, "eps");
    return kk_op_params_int(p, "affine") ? kk_layernorm(t[0], t[1], t[2], t[3], eps, NULL)
                                         : kk_layernorm(t[0], NULL, NULL, t[1], eps, NULL);
}
static kk_status call_softmax(const kk_op_params *p, kk_tensor *const *t) {
    return kk_softmax(t[0], t[1], kk_op_params_float(p, "scale"), NULL);
}
static kk_status call_rope(const kk_op_params *p, kk_tensor *const *t) {
    kk_rope_options o;
    kk_rope_options_init(&o);
    o.rotary_dim = kk_op_params_int(p, "rotary_dim");
    o.offset = kk_op_params_int(p, "offset");
    o.theta = kk_op_params_float(p, "theta");
    o.style = (kk_rope_style)kk_op_params_int(p, "style");
    return kk_rope(t[0], t[1], &o, NULL);
}
static kk_status call_fp8_gemm(const kk_op_params *p, kk_tensor *const *t) {
    const kk_fp8_scaling scaling = (kk_fp8_scaling)kk_op_params_int(p, "scaling");
    return scaling == KK_FP8_SCALING_TENSOR
               ? kk_fp8_gemm(t[0], t[1], t[2], t[3], t[4], NULL)
               : kk_fp8_gemm_scaled(t[0], t[1], t[2], t[3], t[4], scaling, NULL);
}
static kk_status call_nvfp4_gemm(const kk_op_params *p, kk_tensor *const *t) {
    return kk_op_params_int(p, "global") ? kk_nvfp4_gemm(t[0], t[1], t[2], t[3], t[4], NULL)
                                         : kk_nvfp4_gemm(t[0], t[1], t[2], NULL, t[3], NULL);
}
static kk_status call_convert(const kk_op_params *p, kk_tensor *const *t) {
    (void)p;
    return kk_convert(t[0], t[1], NULL);
}

/* The op's tensors on the CPU, inputs from `seed`, outputs poisoned with
 * `variant`: an element one run leaves unwritten differs between the runs. */
static int make_tensors(const kk_op_params *p, uint64_t seed, int variant, kk_tensor **t) {
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0, nin = 0;
    kk_assert_ok(kk_op_tensors(p, d, &n));
    void *in[KK_OP_MAX_TENSORS];
    for (int k = 0; k < n; k++) {
        kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
        if (d[k].is_output)
            kk_assert_ok(kk_poison(t[k]->data, d[k].dtype, (size_t)d[k].numel, variant));
        else
            in[nin++] = t[k]->data;
    }
    kk_assert_ok(kk_case_fill_inputs(p, seed, KK_DIST_FULL, in));
    return n;
}

static void entry_equals_op_run(const char *op_name, const char *params, entry_call call) {
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find(op_name, &op));
    kk_assert_ok(kk_op_params_parse(op, params, &p));
    kk_tensor *by_run[KK_OP_MAX_TENSORS], *by_entry[KK_OP_MAX_TENSORS];
    const int n = make_tensors(&p, 11, 0, by_run);
    make_tensors(&p, 11, 1, by_entry);
    kk_assert_ok(kk_op_run(&p, by_run, NULL));
    kk_assert_ok(call(&p, by_entry));
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int count = 0, outputs = 0;
    kk_assert_ok(kk_op_tensors(&p, d, &count));
    for (int k = 0; k < n; k++) {
        if (!d[k].is_output) continue;
        outputs++;
        const size_t bytes = kk_dtype_bytes(d[k].dtype, (size_t)d[k].numel);
        if (memcmp(by_run[k]->data, by_entry[k]->data, bytes) != 0)
            fail_msg("%s %s: output %s differs from kk_op_run's", op_name, params, d[k].name);
    }
    assert_true(outputs >= 1);
    for (int k = 0; k < n; k++) {
        kk_tensor_destroy(by_run[k]);
        kk_tensor_destroy(by_entry[k]);
    }
}

static void every_entry_point_equals_op_run(void **state) {
    (void)state;
    static const struct {
        const char *op, *params;
        entry_call call;
    } cases[] = {
        {"gemm", "M=5 N=7 K=33 dtype=bf16", call_gemm},
        {"linear", "M=3 N=9 K=17 bias=1 activation=gelu_tanh dtype=f16", call_linear},
        {"linear", "M=3 N=9 K=17 bias=0 activation=relu dtype=f32", call_linear},
        {"linear", "M=5 N=11 K=19 bias=1 activation=silu dtype=bf16 residual=1",
         call_linear_residual},
        {"linear", "M=5 N=11 K=19 bias=0 activation=none dtype=f32 residual=1",
         call_linear_residual},
        {"linear", "M=4 N=6 K=16 bias=1 activation=swiglu dtype=bf16", call_swiglu},
        {"linear", "M=4 N=6 K=16 bias=0 activation=swiglu dtype=f32", call_swiglu},
        {"attention",
         "B=2 Hq=4 Hkv=2 Sq=5 Sk=9 D=16 causal=1 window_left=3 scale=0.3 lse=1 dtype=f32 "
         "dropout=0.2 seed=5 offset=3",
         call_attention},
        {"attention", "B=1 Hq=2 Hkv=1 Sq=3 Sk=4 D=32 dtype=bf16", call_attention},
        {"attention_varlen",
         "Hq=4 Hkv=2 D=16 causal=1 lse=1 dtype=f32 seqlens_q=3:0:5 seqlens_k=4:2:6 "
         "max_seqlen_q=5 max_seqlen_k=6 dropout=0.1 seed=9",
         call_attention_varlen},
        {"nvfp4_gemv", "M=9 K=128 L=2 scale_layout=plain global=1", call_nvfp4_gemv},
        {"nvfp4_gemv", "M=9 K=128 L=1 scale_layout=blocked global=0", call_nvfp4_gemv},
        {"rmsnorm", "rows=3 n=37 eps=1e-3 dtype=bf16", call_rmsnorm},
        {"layernorm", "rows=3 n=37 eps=1e-4 affine=1 dtype=f16", call_layernorm},
        {"layernorm", "rows=2 n=20 affine=0 dtype=f32", call_layernorm},
        {"softmax", "rows=4 n=33 scale=0.7 dtype=f32", call_softmax},
        {"rope", "B=2 H=3 S=5 D=16 rotary_dim=8 offset=7 theta=500 style=gptj dtype=f32",
         call_rope},
        {"rope", "B=1 H=2 S=4 D=8 dtype=bf16", call_rope},
        {"fp8_gemm", "M=5 N=7 K=32 a_dtype=fp8_e5m2 b_dtype=fp8_e4m3 c_dtype=f32", call_fp8_gemm},
        {"fp8_gemm", "M=3 N=4 K=16 c_dtype=bf16", call_fp8_gemm},
        {"fp8_gemm", "M=5 N=7 K=32 c_dtype=f32 scaling=rowwise", call_fp8_gemm},
        {"fp8_gemm", "M=3 N=130 K=200 c_dtype=bf16 scaling=block", call_fp8_gemm},
        {"nvfp4_gemm", "M=3 N=5 K=64 global=1", call_nvfp4_gemm},
        {"nvfp4_gemm", "M=2 N=3 K=128 global=0", call_nvfp4_gemm},
        {"convert", "n=1001 src=f32 dst=fp8_e4m3", call_convert},
        {"convert", "n=77 src=bf16 dst=e2m1", call_convert},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        entry_equals_op_run(cases[i].op, cases[i].params, cases[i].call);
}

/* ---- bad arguments of the new entry points, each named ---- */

static void expect_bad(kk_status st, const char *argument) {
    assert_int_equal(st, KK_ERR_INVALID_ARGUMENT);
    assert_non_null(kk_last_error()->argument);
    if (strcmp(kk_last_error()->argument, argument) != 0)
        fail_msg("expected the error to name %s: %s", argument, kk_last_error_message());
}

static kk_tensor *cpu_tensor(kk_dtype dtype, int ndim, const int64_t *shape) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", dtype, ndim, shape, &t));
    return t;
}

static void norms_refuse_bad_arguments(void **state) {
    (void)state;
    kk_tensor *x = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){3, 8}),
              *y = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){3, 8}),
              *w = cpu_tensor(KK_DTYPE_F32, 1, (int64_t[]){8}),
              *x8 = cpu_tensor(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){3, 8});
    kk_assert_ok(kk_rmsnorm(x, w, y, 1e-6, NULL));
    expect_bad(kk_rmsnorm(NULL, w, y, 1e-6, NULL), "x");
    expect_bad(kk_rmsnorm(x, NULL, y, 1e-6, NULL), "w");
    expect_bad(kk_rmsnorm(x, w, NULL, 1e-6, NULL), "y");
    expect_bad(kk_rmsnorm(w, w, y, 1e-6, NULL), "x"); /* 1 dimension */
    kk_assert_contains(kk_last_error_message(), "2 dimensions");
    expect_bad(kk_rmsnorm(x, x, y, 1e-6, NULL), "w"); /* 2 dimensions */
    expect_bad(kk_rmsnorm(x, w, y, 0.0, NULL), "eps");
    expect_bad(kk_rmsnorm(x, w, y, NAN, NULL), "eps");
    expect_bad(kk_rmsnorm(x8, w, y, 1e-6, NULL), "x"); /* no fp8 rmsnorm */
    kk_assert_contains(kk_last_error_message(), "dtype fp8_e4m3");

    kk_assert_ok(kk_layernorm(x, w, w, y, 1e-5, NULL));
    kk_assert_ok(kk_layernorm(x, NULL, NULL, y, 1e-5, NULL));
    expect_bad(kk_layernorm(x, w, NULL, y, 1e-5, NULL), "w, b");
    expect_bad(kk_layernorm(NULL, w, w, y, 1e-5, NULL), "x");
    expect_bad(kk_layernorm(x, w, x, y, 1e-5, NULL), "b");
    expect_bad(kk_layernorm(x, NULL, NULL, w, 1e-5, NULL), "y");
    expect_bad(kk_layernorm(x, w, w, y, 2.0, NULL), "eps");

    kk_assert_ok(kk_softmax(x, y, 1.0, NULL));
    expect_bad(kk_softmax(NULL, y, 1.0, NULL), "x");
    expect_bad(kk_softmax(x, NULL, 1.0, NULL), "y");
    expect_bad(kk_softmax(x, w, 1.0, NULL), "y");
    expect_bad(kk_softmax(x, y, -1.0, NULL), "scale");
    expect_bad(kk_softmax(x, y, INFINITY, NULL), "scale");
    expect_bad(kk_softmax(x8, y, 1.0, NULL), "x");
    kk_tensor *all[] = {x, y, w, x8};
    for (int i = 0; i < 4; i++) kk_tensor_destroy(all[i]);
}

static void rope_refuses_bad_arguments(void **state) {
    (void)state;
    kk_tensor *x = cpu_tensor(KK_DTYPE_F32, 4, (int64_t[]){1, 2, 3, 8}),
              *y = cpu_tensor(KK_DTYPE_F32, 4, (int64_t[]){1, 2, 3, 8}),
              *x3 = cpu_tensor(KK_DTYPE_F32, 3, (int64_t[]){2, 3, 8});
    kk_assert_ok(kk_rope(x, y, NULL, NULL));
    expect_bad(kk_rope(NULL, y, NULL, NULL), "x");
    expect_bad(kk_rope(x, NULL, NULL, NULL), "y");
    expect_bad(kk_rope(x3, y, NULL, NULL), "x");
    expect_bad(kk_rope(x, x3, NULL, NULL), "y");
    kk_rope_options o = KK_ROPE_OPTIONS_INIT;
    o.theta = 0.5;
    expect_bad(kk_rope(x, y, &o, NULL), "opt->theta");
    o = (kk_rope_options)KK_ROPE_OPTIONS_INIT;
    o.rotary_dim = 3;
    expect_bad(kk_rope(x, y, &o, NULL), "opt->rotary_dim");
    o.rotary_dim = 10; /* above D = 8 */
    expect_bad(kk_rope(x, y, &o, NULL), "opt->rotary_dim");
    o = (kk_rope_options)KK_ROPE_OPTIONS_INIT;
    o.offset = -1;
    expect_bad(kk_rope(x, y, &o, NULL), "opt->offset");
    o = (kk_rope_options)KK_ROPE_OPTIONS_INIT;
    o.style = (kk_rope_style)7;
    expect_bad(kk_rope(x, y, &o, NULL), "opt->style");
    kk_tensor *all[] = {x, y, x3};
    for (int i = 0; i < 3; i++) kk_tensor_destroy(all[i]);
}

static void gemms_refuse_bad_arguments(void **state) {
    (void)state;
    kk_tensor *a = cpu_tensor(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){4, 64}),
              *a5 = cpu_tensor(KK_DTYPE_FP8_E5M2, 2, (int64_t[]){4, 64}),
              *b = cpu_tensor(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){5, 64}),
              *b5 = cpu_tensor(KK_DTYPE_FP8_E5M2, 2, (int64_t[]){5, 64}),
              *one = cpu_tensor(KK_DTYPE_F32, 1, (int64_t[]){1}),
              *c = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){4, 5}),
              *c16 = cpu_tensor(KK_DTYPE_F16, 2, (int64_t[]){4, 5}),
              *af = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){4, 64});
    const float s = 1.0f;
    memcpy(one->data, &s, sizeof s);
    memset(a->data, 0, 4 * 64);
    memset(b->data, 0, 5 * 64);
    kk_assert_ok(kk_fp8_gemm(a, b, one, one, c, NULL));
    expect_bad(kk_fp8_gemm(NULL, b, one, one, c, NULL), "a");
    expect_bad(kk_fp8_gemm(a, b, NULL, one, c, NULL), "scale_a");
    expect_bad(kk_fp8_gemm(a, b, one, NULL, c, NULL), "scale_b");
    expect_bad(kk_fp8_gemm(a, one, one, one, c, NULL), "b");
    expect_bad(kk_fp8_gemm(af, b, one, one, c, NULL), "a");
    kk_assert_contains(kk_last_error_message(), "fp8_e4m3");
    expect_bad(kk_fp8_gemm(a5, b5, one, one, c, NULL), "b");
    expect_bad(kk_fp8_gemm(a, b, one, one, c16, NULL), "c");
    expect_bad(kk_fp8_gemm(a, b, c, one, c, NULL), "scale_a"); /* [4,5], not [1] */
    {
        kk_tensor *s4 = cpu_tensor(KK_DTYPE_F32, 1, (int64_t[]){4}),
                  *s5 = cpu_tensor(KK_DTYPE_F32, 1, (int64_t[]){5}),
                  *s41 = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){4, 1}),
                  *s11 = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){1, 1});
        ((float *)s11->data)[0] = 1.0f;
        for (int i = 0; i < 4; i++) ((float *)s4->data)[i] = ((float *)s41->data)[i] = 1.0f;
        for (int i = 0; i < 5; i++) ((float *)s5->data)[i] = 1.0f;
        kk_assert_ok(kk_fp8_gemm_scaled(a, b, s4, s5, c, KK_FP8_SCALING_ROWWISE, NULL));
        kk_assert_ok(kk_fp8_gemm_scaled(a, b, s41, s11, c, KK_FP8_SCALING_BLOCK, NULL));
        expect_bad(kk_fp8_gemm_scaled(a, b, one, s5, c, KK_FP8_SCALING_ROWWISE, NULL), "scale_a");
        expect_bad(kk_fp8_gemm_scaled(a, b, s4, s4, c, KK_FP8_SCALING_ROWWISE, NULL), "scale_b");
        expect_bad(kk_fp8_gemm_scaled(a, b, s4, one, c, KK_FP8_SCALING_BLOCK, NULL), "scale_a");
        expect_bad(kk_fp8_gemm_scaled(a, b, s41, s5, c, KK_FP8_SCALING_BLOCK, NULL), "scale_b");
        expect_bad(kk_fp8_gemm_scaled(a, b, one, one, c, (kk_fp8_scaling)3, NULL), "scaling");
        kk_tensor_destroy(s4);
        kk_tensor_destroy(s5);
        kk_tensor_destroy(s41);
        kk_tensor_destroy(s11);
    }

    kk_tensor *x = cpu_tensor(KK_DTYPE_BF16, 2, (int64_t[]){2, 64}),
              *w = cpu_tensor(KK_DTYPE_E2M1, 2, (int64_t[]){5, 64}),
              *sw = cpu_tensor(KK_DTYPE_FP8_E4M3, 2, (int64_t[]){5, 4}),
              *y = cpu_tensor(KK_DTYPE_BF16, 2, (int64_t[]){2, 5}),
              *x_big = cpu_tensor(KK_DTYPE_BF16, 2, (int64_t[]){65, 64});
    memset(x->data, 0, 2 * 64 * 2);
    memset(w->data, 0, 5 * 32);
    memset(sw->data, 0, 5 * 4);
    kk_assert_ok(kk_nvfp4_gemm(x, w, sw, NULL, y, NULL));
    kk_assert_ok(kk_nvfp4_gemm(x, w, sw, one, y, NULL));
    expect_bad(kk_nvfp4_gemm(NULL, w, sw, NULL, y, NULL), "x");
    expect_bad(kk_nvfp4_gemm(x, NULL, sw, NULL, y, NULL), "w");
    expect_bad(kk_nvfp4_gemm(x, w, NULL, NULL, y, NULL), "sw");
    expect_bad(kk_nvfp4_gemm(x, w, sw, NULL, NULL, NULL), "y");
    expect_bad(kk_nvfp4_gemm(x, one, sw, NULL, y, NULL), "w");
    expect_bad(kk_nvfp4_gemm(x, w, sw, c, y, NULL), "gw");
    expect_bad(kk_nvfp4_gemm(x_big, w, sw, NULL, y, NULL), "M"); /* M <= 64 */
    kk_tensor *all[] = {a, a5, b, b5, one, c, c16, af, x, w, sw, y, x_big};
    for (int i = 0; i < 13; i++) kk_tensor_destroy(all[i]);
}

static void convert_refuses_bad_arguments(void **state) {
    (void)state;
    kk_tensor *x = cpu_tensor(KK_DTYPE_F32, 2, (int64_t[]){3, 4}),
              *y = cpu_tensor(KK_DTYPE_BF16, 1, (int64_t[]){12}),
              *y_short = cpu_tensor(KK_DTYPE_BF16, 1, (int64_t[]){11}),
              *y_int = cpu_tensor(KK_DTYPE_INT32, 1, (int64_t[]){12}),
              *empty = cpu_tensor(KK_DTYPE_F32, 1, (int64_t[]){0});
    memset(x->data, 0, 12 * 4);
    kk_assert_ok(kk_convert(x, y, NULL)); /* any shapes of one count */
    expect_bad(kk_convert(NULL, y, NULL), "x");
    expect_bad(kk_convert(x, NULL, NULL), "y");
    expect_bad(kk_convert(x, y_short, NULL), "y");
    expect_bad(kk_convert(x, y_int, NULL), "y");
    kk_assert_contains(kk_last_error_message(), "int32");
    expect_bad(kk_convert(empty, y, NULL), "x");
    kk_tensor *all[] = {x, y, y_short, y_int, empty};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(all[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_matches_loops),
        cmocka_unit_test(linear_applies_bias_and_activation),
        cmocka_unit_test(linear_residual_adds_after_the_activation),
        cmocka_unit_test(attention_matches_loops),
        cmocka_unit_test(refuses_bad_tensors),
        cmocka_unit_test(every_entry_point_equals_op_run),
        cmocka_unit_test(norms_refuse_bad_arguments),
        cmocka_unit_test(rope_refuses_bad_arguments),
        cmocka_unit_test(gemms_refuse_bad_arguments),
        cmocka_unit_test(convert_refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

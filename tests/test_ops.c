/* labels: unit cpu */
/* The public entry points of kernelkit/ops.h: they read the sizes off the
 * shapes, run the op through kk_op_run (so the same kernel `kernelkit check`
 * proves), and refuse bad tensors naming them. Results are compared with
 * plain loops written here in double precision. */
#include "testutil.h"

#include <math.h>
#include <string.h>

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
    kk_assert_status(kk_nvfp4_gemv(a, NULL, a, NULL, NULL, NULL, c, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_nvfp4_gemv(a, a, a, a, v, NULL, c, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "ga, gb");
    kk_tensor *all[] = {a, b, c, v, c_wrong};
    for (int i = 0; i < 5; i++) kk_tensor_destroy(all[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_matches_loops),
        cmocka_unit_test(linear_applies_bias_and_activation),
        cmocka_unit_test(attention_matches_loops),
        cmocka_unit_test(refuses_bad_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

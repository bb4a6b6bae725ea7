/* labels: unit cpu */
/* The float64 references against hand-computed cases and properties, and the
 * op registry's consistency: parameters, errors, tensors, FLOP and byte counts
 * (ANCHORS' shapes). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "kernelkit/harness.h"
#include "kernelkit/cases.h"

static uint64_t rng_state;

static double uniform(void) { /* splitmix64 -> [-1, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1.0;
}

static kk_op_params params(const char *op_name, const char *text) {
    const kk_op *op = NULL;
    kk_op_params p;
    kk_assert_ok(kk_op_find(op_name, &op));
    kk_assert_ok(kk_op_params_parse(op, text, &p));
    return p;
}

#define assert_close(a, b, tol)                                                                    \
    do {                                                                                           \
        double kk__a = (a), kk__b = (b);                                                           \
        if (!(fabs(kk__a - kk__b) <= (tol)))                                                       \
            fail_msg("%s = %.17g, expected %.17g (+- %g)", #a, kk__a, kk__b, (double)(tol));       \
    } while (0)

/* ---- GEMM and Linear ---- */

static void gemm_2x2(void **state) {
    (void)state;
    kk_op_params p = params("gemm", "M=2 N=2 K=2 dtype=f32");
    const double a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    double c[4];
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){a, b}, (double *const[]){c}));
    /* c = a . b^T: rows of a against rows of b. */
    assert_true(c[0] == 17 && c[1] == 23 && c[2] == 39 && c[3] == 53);
    p = params("gemm", "M=1 N=2 K=3");
    const double x[] = {1, 2, 3}, w[] = {1, 0, 0, 0, 1, 1};
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){x, w}, (double *const[]){c}));
    assert_true(c[0] == 1 && c[1] == 5);
}

/* act(x) through a 1x1x1 linear with W = 1 and bias = 0. */
static double act(const char *name, double x) {
    char text[128];
    snprintf(text, sizeof text, "M=1 N=1 K=1 bias=1 activation=%s", name);
    kk_op_params p = params("linear", text);
    const double one = 1.0, zero = 0.0;
    double y = NAN;
    kk_assert_ok(
        kk_op_reference(&p, (const double *const[]){&x, &one, &zero}, (double *const[]){&y}));
    return y;
}

static void activations_at_known_points(void **state) {
    (void)state;
    assert_close(act("gelu_erf", 1.0), 0.8413447460685429, 1e-15);
    assert_close(act("gelu_erf", -1.0), -0.15865525393145707, 1e-15);
    assert_close(act("gelu_erf", 3.0), 2.99595030590511, 1e-15);
    assert_true(act("gelu_erf", 0.0) == 0.0);
    assert_close(act("gelu_tanh", 1.0), 0.8411919906082768, 1e-15);
    assert_close(act("gelu_tanh", -2.0), -0.04540230591222494, 1e-15);
    assert_close(act("silu", 1.0), 0.7310585786300049, 1e-15);
    assert_close(act("silu", -1.0), -0.2689414213699951, 1e-15);
    assert_true(act("relu", -2.0) == 0.0 && act("relu", 2.5) == 2.5);
    assert_true(act("none", -2.5) == -2.5);
    /* SwiGLU: silu(x.Wg^T + bg) * (x.Wu^T + bu) with x = 1, Wg = 1, Wu = 3, biases 0, 0.5. */
    kk_op_params p = params("linear", "M=1 N=1 K=1 bias=1 activation=swiglu");
    const double x = 1, wg = 1, wu = 3, bg = 0, bu = 0.5;
    double y;
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){&x, &wg, &wu, &bg, &bu},
                                 (double *const[]){&y}));
    assert_close(y, 0.7310585786300049 * 3.5, 1e-15);
}

/* Zero weights: y = act(bias) for every activation, every row. */
static void linear_zero_weights_give_act_bias(void **state) {
    (void)state;
    static const char *const acts[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu", "swiglu"};
    rng_state = 11;
    double x[15], w[20] = {0}, bg[4], bu[4], y[12];
    for (int i = 0; i < 15; i++) x[i] = uniform();
    for (int i = 0; i < 4; i++) bg[i] = 3 * uniform(), bu[i] = uniform();
    for (int a = 0; a < 6; a++) {
        char text[96];
        snprintf(text, sizeof text, "M=3 N=4 K=5 bias=1 activation=%s", acts[a]);
        kk_op_params p = params("linear", text);
        const int swiglu = a == KK__ACT_SWIGLU;
        const double *const in_plain[] = {x, w, bg}, *const in_swiglu[] = {x, w, w, bg, bu};
        kk_assert_ok(kk_op_reference(&p, swiglu ? in_swiglu : in_plain, (double *const[]){y}));
        for (int m = 0; m < 3; m++)
            for (int n = 0; n < 4; n++) {
                const double want = swiglu ? kk__activation_f64(KK__ACT_SILU, bg[n]) * bu[n]
                                           : kk__activation_f64(a, bg[n]);
                assert_true(y[m * 4 + n] == want);
            }
    }
}

/* ---- attention ---- */

/* Scores 0, ln 2, ln 3 against one-hot values: o = softmax = (1, 2, 3) / 6. */
static void softmax_of_a_known_row(void **state) {
    (void)state;
    kk_op_params p = params("attention", "Sq=1 Sk=3 Hq=1 Hkv=1 D=16 scale=1 lse=1 dtype=f32");
    double q[16] = {1}, k[48] = {0}, v[48] = {0}, o[16], lse;
    for (int j = 0; j < 3; j++) {
        k[j * 16] = log(j + 1.0);
        v[j * 16 + j] = 1.0;
    }
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){q, k, v}, (double *const[]){o, &lse}));
    for (int d = 0; d < 16; d++) assert_close(o[d], d < 3 ? (d + 1) / 6.0 : 0.0, 1e-15);
    assert_close(lse, log(6.0), 1e-15);
}

/* All scores equal (q = 0): o of row i = mean of v over the keys row i sees. */
static void mean_rows(const char *text, int sq, int sk, double *o, double *lse) {
    kk_op_params p = params("attention", text);
    double q[16 * 8] = {0}, k[16 * 8] = {0}, v[16 * 8] = {0};
    assert_true(sq <= 8 && sk <= 8);
    for (int j = 0; j < sk; j++)
        for (int d = 0; d < 16; d++) v[j * 16 + d] = j + 1; /* key j has value j + 1 */
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){q, k, v}, (double *const[]){o, lse}));
}

static void causal_mask_is_bottom_right(void **state) {
    (void)state;
    double o[16 * 8], lse[8];
    /* Sq=2, Sk=5: query 0 sees keys 0..3, query 1 keys 0..4 (top-left would be 0 and 0..1). */
    mean_rows("Sq=2 Sk=5 Hq=1 Hkv=1 D=16 causal=1 lse=1 dtype=f32", 2, 5, o, lse);
    assert_close(o[0], 2.5, 1e-15);
    assert_close(o[16], 3.0, 1e-15);
    assert_close(lse[0], log(4.0), 1e-15);
    assert_close(lse[1], log(5.0), 1e-15);
    /* Windows keep the same alignment: query i stands at key c = i + 3. */
    mean_rows("Sq=2 Sk=5 Hq=1 Hkv=1 D=16 causal=1 window_left=1 lse=1", 2, 5, o, lse);
    assert_close(o[0], 3.5, 1e-15);  /* keys 2, 3 */
    assert_close(o[16], 4.5, 1e-15); /* keys 3, 4 */
    mean_rows("Sq=2 Sk=5 Hq=1 Hkv=1 D=16 window_left=0 window_right=1 lse=1", 2, 5, o, lse);
    assert_close(o[0], 4.5, 1e-15);  /* keys 3, 4 */
    assert_close(o[16], 5.0, 1e-15); /* key 4: the window is clipped at Sk */
    /* Sq=5 > Sk=3: rows 0 and 1 see no key: o = 0, lse = -inf. */
    mean_rows("Sq=5 Sk=3 Hq=1 Hkv=1 D=16 causal=1 lse=1", 5, 3, o, lse);
    for (int d = 0; d < 16; d++) assert_true(o[d] == 0.0 && o[16 + d] == 0.0);
    assert_true(isinf(lse[0]) && lse[0] < 0 && isinf(lse[1]) && lse[1] < 0);
    assert_close(o[2 * 16], 1.0, 1e-15);
    assert_close(o[3 * 16], 1.5, 1e-15);
    assert_close(o[4 * 16], 2.0, 1e-15);
    assert_close(lse[2], 0.0, 1e-15);
}

/* Sk = 1: every query sees one key with weight 1, so o = v of its kv head
 * (GQA: head h reads kv head h / 2 here) and lse = the one score. */
static void attention_single_key_returns_v(void **state) {
    (void)state;
    kk_op_params p = params("attention", "B=2 Hq=4 Hkv=2 Sq=3 Sk=1 D=16 lse=1 dtype=f32");
    enum { NQ = 2 * 4 * 3 * 16, NK = 2 * 2 * 1 * 16 };
    double q[NQ], k[NK], v[NK], o[NQ], lse[2 * 4 * 3];
    rng_state = 5;
    for (int i = 0; i < NQ; i++) q[i] = uniform();
    for (int i = 0; i < NK; i++) k[i] = uniform(), v[i] = uniform();
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){q, k, v}, (double *const[]){o, lse}));
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 4; h++)
            for (int i = 0; i < 3; i++) {
                const int row = (b * 4 + h) * 3 + i, kv = (b * 2 + h / 2) * 16;
                double dot = 0;
                for (int d = 0; d < 16; d++) {
                    assert_true(o[row * 16 + d] == v[kv + d]);
                    dot += q[row * 16 + d] * k[kv + d];
                }
                assert_close(lse[row], dot / 4.0, 1e-15); /* scale 1/sqrt(16) */
            }
}

/* ---- NVFP4 GEMV ---- */

/* M=1, K=64, L=1: a = 1.0 everywhere, b = 0.5, a's four block scales 1, 2,
 * 0.5, 4, b's all 1, ga = 2, gb = 0.25: c = 16 * 0.5 * (1 + 2 + 0.5 + 4) * 0.5. */
static void nvfp4_gemv_by_hand(void **state) {
    (void)state;
    double a[64], b[64], sa[4], sb[4], c;
    static const uint8_t sa_codes[4] = {0x38, 0x40, 0x30, 0x48};
    for (int k = 0; k < 64; k++) a[k] = kk_e2m1_to_f32(0x2), b[k] = kk_e2m1_to_f32(0x1);
    for (int j = 0; j < 4; j++) sa[j] = kk_e4m3_to_f32(sa_codes[j]), sb[j] = kk_e4m3_to_f32(0x38);
    assert_true(a[0] == 1.0 && b[0] == 0.5 && sa[1] == 2.0 && sa[2] == 0.5 && sa[3] == 4.0);
    const double ga = 2.0, gb = 0.25;
    kk_op_params p = params("nvfp4_gemv", "M=1 K=64 L=1 global=1");
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){a, b, sa, sb, &ga, &gb},
                                 (double *const[]){&c}));
    assert_true(c == 30.0);
    p = params("nvfp4_gemv", "M=1 K=64 L=1");
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){a, b, sa, sb}, (double *const[]){&c}));
    assert_true(c == 60.0);
}

/* Random scale codes in plain layout, converted to blocked by the library's
 * kk_nvfp4_scales_to_blocked: the reference gives the same bits either way. */
static void to_blocked(const uint8_t *plain, int64_t L, int64_t rows, int64_t cols,
                       uint8_t *blocked, double *decoded, int64_t blocked_n) {
    kk_tensor *tp = NULL, *tb = NULL;
    const int64_t rb = (rows + 127) / 128, cb = (cols + 3) / 4;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 3, (int64_t[]){L, rows, cols}, NULL,
                                (void *)plain, &tp));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_FP8_E4M3, 4, (int64_t[]){L, rb, cb, 512}, NULL,
                                blocked, &tb));
    kk_assert_ok(kk_nvfp4_scales_to_blocked(tp, tb));
    kk_assert_ok(
        kk_convert_host(blocked, KK_DTYPE_FP8_E4M3, decoded, KK_DTYPE_F64, (size_t)blocked_n));
    kk_tensor_destroy(tp);
    kk_tensor_destroy(tb);
}

static void nvfp4_blocked_equals_plain(void **state) {
    (void)state;
    enum { M = 130, K = 128, L = 2, SC = K / 16 };
    kk_op_params pp = params("nvfp4_gemv", "M=130 K=128 L=2 scale_layout=plain global=1");
    kk_op_params pb = params("nvfp4_gemv", "M=130 K=128 L=2 scale_layout=blocked global=1");
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&pb, t, &n));
    const int64_t nsa = t[2].numel, nsb = t[3].numel; /* blocked: [2, 2, 2, 512], [2, 1, 2, 512] */
    assert_true(nsa == L * 2 * 2 * 512 && nsb == L * 1 * 2 * 512);
    double *a = malloc(sizeof(double) * L * M * K), b[L * K], sa[L * M * SC], sb[L * SC];
    uint8_t sa_code[L * M * SC], sb_code[L * SC], *sa_blk = malloc((size_t)nsa),
                                                  sb_blk[L * 2 * 512];
    double *sa_b = malloc(sizeof(double) * (size_t)nsa), sb_b[L * 2 * 512], c0[L * M], c1[L * M];
    rng_state = 99;
    for (int i = 0; i < L * M * K; i++) a[i] = kk_e2m1_to_f32((uint8_t)(16 * (uniform() + 1) / 2));
    for (int i = 0; i < L * K; i++) b[i] = kk_e2m1_to_f32((uint8_t)(16 * (uniform() + 1) / 2));
    for (int i = 0; i < L * M * SC; i++) sa_code[i] = (uint8_t)(0x30 + 16 * (uniform() + 1) / 2);
    for (int i = 0; i < L * SC; i++) sb_code[i] = (uint8_t)(0x30 + 16 * (uniform() + 1) / 2);
    kk_assert_ok(kk_convert_host(sa_code, KK_DTYPE_FP8_E4M3, sa, KK_DTYPE_F64, L * M * SC));
    kk_assert_ok(kk_convert_host(sb_code, KK_DTYPE_FP8_E4M3, sb, KK_DTYPE_F64, L * SC));
    to_blocked(sa_code, L, M, SC, sa_blk, sa_b, nsa);
    to_blocked(sb_code, L, 1, SC, sb_blk, sb_b, nsb);
    const double ga = 0.75, gb = 1.25;
    kk_assert_ok(kk_op_reference(&pp, (const double *const[]){a, b, sa, sb, &ga, &gb},
                                 (double *const[]){c0}));
    kk_assert_ok(kk_op_reference(&pb, (const double *const[]){a, b, sa_b, sb_b, &ga, &gb},
                                 (double *const[]){c1}));
    assert_memory_equal(c0, c1, sizeof c0);
    /* And one row by hand, to be sure both are not equally wrong. */
    double want = 0;
    for (int k = 0; k < K; k++)
        want += a[(M + 129) * K + k] * sa[(M + 129) * SC + k / 16] * b[K + k] * sb[SC + k / 16];
    assert_close(c0[M + 129], want * ga * gb, 1e-12 * fabs(want));
    free(a);
    free(sa_blk);
    free(sa_b);
}

/* ---- the registry ---- */

static void registry_rows_are_complete(void **state) {
    (void)state;
    assert_true(kk_op_count() >= 4);
    assert_null(kk_op_at(-1));
    assert_null(kk_op_at(kk_op_count()));
    for (int i = 0; i < kk_op_count(); i++) {
        const kk_op *op = kk_op_at(i), *found = NULL;
        kk_assert_ok(kk_op_find(op->name, &found));
        assert_ptr_equal(op, found);
        assert_non_null(op->summary);
        assert_true(op->nparams > 0 && op->nparams <= KK_OP_MAX_PARAMS);
        assert_true(op->describe && op->flops && op->bytes && op->reference);
        assert_true(op->ntolerances >= 1 && op->ntolerances <= KK_OP_MAX_TOLERANCES);
        for (int t = 0; t < op->ntolerances; t++) assert_true(op->tolerances[t].criteria != 0);
        for (int k = 0; k < op->nparams; k++) {
            assert_non_null(op->params[k].help);
            assert_int_equal(kk_op_param_index(op, op->params[k].name), k);
        }
        unsigned mask = 0;
        for (int b = 0; b < KK_BACKEND_COUNT; b++)
            mask |= kk__op_slot(op, (kk_backend_kind)b).run ? 1u << b : 0;
        assert_int_equal(kk_op_backends(op), mask);
        /* Defaults are valid; the tensors list inputs first, then outputs, and
         * every output has a tolerance row; the reference runs (ASan watches)
         * on the harness's inputs (attention_varlen's offsets are data the
         * reference checks: zeros would not do). */
        kk_op_params p;
        kk_op_tensor t[KK_OP_MAX_TENSORS];
        int n = 0, outputs = 0;
        kk_assert_ok(kk_op_params_init(op, &p));
        kk_assert_ok(kk_op_tensors(&p, t, &n));
        double *bufs[KK_OP_MAX_TENSORS];
        for (int k = 0; k < n; k++) {
            kk_tolerance tol;
            if (t[k].is_output) kk_assert_ok(kk_op_tolerance(op, t[k].dtype, &tol));
            assert_true(t[k].is_output || outputs == 0);
            outputs += t[k].is_output;
            bufs[k] = calloc((size_t)t[k].numel, sizeof(double));
        }
        assert_true(outputs >= 1 && n > outputs);
        void *raw[KK_OP_MAX_TENSORS];
        for (int k = 0; k < n - outputs; k++)
            raw[k] = calloc(kk_dtype_bytes(t[k].dtype, (size_t)t[k].numel) + 1, 1);
        kk_assert_ok(kk_case_fill_inputs(&p, 1, KK_DIST_FULL, raw));
        for (int k = 0; k < n - outputs; k++) {
            kk_assert_ok(
                kk_convert_host(raw[k], t[k].dtype, bufs[k], KK_DTYPE_F64, (size_t)t[k].numel));
            free(raw[k]);
        }
        kk_assert_ok(kk_op_reference(&p, (const double *const *)bufs, bufs + n - outputs));
        for (int k = 0; k < n; k++) free(bufs[k]);
        assert_true(kk_op_flops(&p) >= 0 && kk_op_bytes(&p) > 0); /* convert: 0 FLOPs */
        char text[512];
        kk_op_params back;
        kk_assert_ok(kk_op_params_format(&p, text, sizeof text));
        kk_assert_ok(kk_op_params_parse(op, text, &back));
        assert_memory_equal(&p, &back, sizeof p);
    }
}

/* The internal index enums match the rows' parameter order. */
static void param_indices_match_rows(void **state) {
    (void)state;
    static const struct {
        const char *op, *name;
        int index;
    } idx[] = {
        {"gemm", "K", KK__GEMM_K},
        {"gemm", "dtype", KK__GEMM_DTYPE},
        {"linear", "bias", KK__LIN_BIAS},
        {"linear", "activation", KK__LIN_ACT},
        {"linear", "dtype", KK__LIN_DTYPE},
        {"attention", "Hkv", KK__ATT_HKV},
        {"attention", "D", KK__ATT_D},
        {"attention", "window_left", KK__ATT_WL},
        {"attention", "window_right", KK__ATT_WR},
        {"attention", "scale", KK__ATT_SCALE},
        {"attention", "lse", KK__ATT_LSE},
        {"attention", "dtype", KK__ATT_DTYPE},
        {"nvfp4_gemv", "L", KK__GEMV_L},
        {"nvfp4_gemv", "global", KK__GEMV_GLOBAL},
        {"nvfp4_gemv", "scale_layout", KK__GEMV_LAYOUT},
    };
    const int counts[] = {KK__GEMM_NPARAMS, KK__LIN_NPARAMS, KK__ATT_NPARAMS, KK__GEMV_NPARAMS};
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        const kk_op *op;
        kk_assert_ok(kk_op_find(idx[i].op, &op));
        assert_int_equal(kk_op_param_index(op, idx[i].name), idx[i].index);
    }
    for (int i = 0; i < 4; i++) assert_int_equal(kk_op_at(i)->nparams, counts[i]);
    const kk_op *lin = kk_op_at(1);
    assert_string_equal(lin->params[KK__LIN_ACT].choices[KK__ACT_GELU_TANH], "gelu_tanh");
    assert_string_equal(lin->params[KK__LIN_ACT].choices[KK__ACT_SWIGLU], "swiglu");
}

static void expect_error(const char *op_name, const char *text, const char *message) {
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find(op_name, &op));
    kk_assert_status(kk_op_params_parse(op, text, &p), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), message);
}

static void params_parse_and_errors(void **state) {
    (void)state;
    expect_error("attention", "D=300", "attention: D = 300: expected 16..256");
    expect_error("attention", "Hq=8 Hkv=3", "attention: Hkv = 3: expected a divisor of Hq = 8");
    expect_error("nvfp4_gemv", "K=100", "nvfp4_gemv: K = 100: expected a multiple of 64 in 64..");
    expect_error("gemm", "dtype=e2m1", "gemm: dtype = e2m1: expected one of f32, f16, bf16");
    expect_error("gemm", "M=12x", "gemm: M = 12x: expected 1..");
    expect_error("gemm", "M=0", "gemm: M = 0: expected 1..");
    expect_error("gemm", "Q=1", "gemm: Q = 1: expected a parameter of M, N, K, dtype");
    expect_error("gemm", "M", "gemm: parameter = M: expected key=value");
    expect_error("linear", "activation=gelu", "expected one of none, relu, gelu_erf, gelu_tanh");
    expect_error("attention", "causal=2", "attention: causal = 2: expected 0 or 1");
    expect_error("attention", "scale=-1", "attention: scale = -1: expected a number in 0..");
    expect_error("attention", "scale=nan", "attention: scale = nan");
    expect_error("attention", "window_left=-2", "attention: window_left = -2: expected -1..");
    assert_string_equal(kk_last_error()->argument, "window_left");
    const kk_op *op = NULL;
    kk_assert_status(kk_op_find("conv", &op), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "one of gemm, linear, attention, nvfp4_gemv");
    kk_op_params p = params("attention", " B=2,Hq=8 , Hkv=2\tcausal=yes scale=0.125 dtype=F16 ");
    assert_int_equal(kk_op_params_int(&p, "Hkv"), 2);
    assert_int_equal(kk_op_params_int(&p, "causal"), 1);
    assert_int_equal(kk_op_params_int(&p, "dtype"), KK_DTYPE_F16);
    assert_true(kk_op_params_float(&p, "scale") == 0.125);
    assert_int_equal(kk_op_params_int(&p, "nope"), 0);
    p = params("linear", "activation=SiLU bias=off");
    assert_int_equal(kk_op_params_int(&p, "activation"), KK__ACT_SILU);
    assert_int_equal(kk_op_params_int(&p, "bias"), 0);
    /* A struct edited by hand is validated too, and flops say NaN for it. */
    p = params("attention", "");
    p.i[KK__ATT_D] = 8;
    kk_assert_status(kk_op_params_validate(&p), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "attention: D = 8: expected 16..256");
    assert_true(isnan(kk_op_flops(&p)));
    char small[8];
    p = params("gemm", "");
    kk_assert_status(kk_op_params_format(&p, small, sizeof small), KK_ERR_INVALID_ARGUMENT);
    kk_tolerance tol;
    kk_assert_status(kk_op_tolerance(kk_op_at(0), KK_DTYPE_E2M1, &tol), KK_ERR_UNSUPPORTED);
}

/* ---- FLOP and byte counts ---- */

static void flops_for_anchor_shapes(void **state) {
    (void)state;
    static const int seqs[] = {512, 2048, 8192, 16384}, dims[] = {64, 128};
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 2; d++) {
            const double S = seqs[s], D = dims[d], B = 16384 / S, H = 2048 / D;
            char text[160];
            snprintf(text, sizeof text, "B=%g Hq=%g Hkv=%g Sq=%g Sk=%g D=%g", B, H, H, S, S, D);
            kk_op_params p = params("attention", text);
            assert_true(kk_op_flops(&p) == 4 * B * H * S * S * D);
            p.i[KK__ATT_CAUSAL] = 1;
            /* Exactly the unmasked pairs: S(S+1)/2 per head, not ANCHORS' S^2/2. */
            assert_true(kk_op_flops(&p) == B * H * D * 4 * S * (S + 1) / 2);
            const double bytes = 2.0 * (4 * B * H * S * D); /* q, k, v, o in bf16 */
            assert_true(kk_op_bytes(&p) == bytes);
        }
    kk_op_params p = params("linear", "M=4096 N=16384 K=4096");
    assert_true(kk_op_flops(&p) == 2.0 * 4096 * 16384 * 4096);
    p = params("linear", "M=16 N=11008 K=4096 activation=swiglu bias=1 dtype=f32");
    assert_true(kk_op_flops(&p) == 4.0 * 16 * 11008 * 4096);
    assert_true(kk_op_bytes(&p) == 4.0 * (16 * 4096 + 2 * 11008 * 4096 + 2 * 11008 + 16 * 11008));
    p = params("gemm", "M=8192 N=8192 K=8192 dtype=f16");
    assert_true(kk_op_flops(&p) == 2.0 * 8192 * 8192 * 8192);
    assert_true(kk_op_bytes(&p) == 3.0 * 2 * 8192 * 8192);
}

static void nvfp4_bytes_for_anchor_shapes(void **state) {
    (void)state;
    static const int shapes[][3] = {{128, 256, 1},   {128, 1536, 1}, {256, 7168, 1},
                                    {2432, 4608, 2}, {384, 7168, 2}, {7168, 16384, 1},
                                    {4096, 7168, 8}, {7168, 2048, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const double M = shapes[i][0], K = shapes[i][1], L = shapes[i][2];
        char text[96];
        snprintf(text, sizeof text, "M=%g K=%g L=%g scale_layout=blocked", M, K, L);
        kk_op_params p = params("nvfp4_gemv", text);
        const double want = M * K * L / 2 + M * K * L / 16 + K * L / 2 + K * L / 16 + 2 * M * L;
        assert_true(kk_op_bytes(&p) == want);
        assert_true(kk_op_flops(&p) == 2 * M * K * L);
    }
}

/* With windows the count is still exactly the visible pairs: brute force. */
static void attention_flops_count_visible_pairs(void **state) {
    (void)state;
    static const char *const cases[] = {"Sq=7 Sk=11 causal=1",
                                        "Sq=11 Sk=7 causal=1",
                                        "Sq=9 Sk=9 window_left=2 window_right=1",
                                        "Sq=5 Sk=12 causal=1 window_left=3",
                                        "Sq=12 Sk=5 window_right=0",
                                        "Sq=6 Sk=6"};
    for (int c = 0; c < 6; c++) {
        char text[128];
        snprintf(text, sizeof text, "B=3 Hq=4 Hkv=2 D=32 %s", cases[c]);
        kk_op_params p = params("attention", text);
        const int64_t sq = p.i[KK__ATT_SQ], sk = p.i[KK__ATT_SK], off = sk - sq;
        const int64_t wl = p.i[KK__ATT_WL], wr = p.i[KK__ATT_WR];
        double pairs = 0;
        for (int64_t i = 0; i < sq; i++)
            for (int64_t j = 0; j < sk; j++) {
                int ok = !(p.i[KK__ATT_CAUSAL] && j > i + off);
                ok = ok && !(wl >= 0 && j < i + off - wl) && !(wr >= 0 && j > i + off + wr);
                pairs += ok;
            }
        assert_true(kk_op_flops(&p) == 4.0 * 3 * 4 * 32 * pairs);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_2x2),
        cmocka_unit_test(activations_at_known_points),
        cmocka_unit_test(linear_zero_weights_give_act_bias),
        cmocka_unit_test(softmax_of_a_known_row),
        cmocka_unit_test(causal_mask_is_bottom_right),
        cmocka_unit_test(attention_single_key_returns_v),
        cmocka_unit_test(nvfp4_gemv_by_hand),
        cmocka_unit_test(nvfp4_blocked_equals_plain),
        cmocka_unit_test(registry_rows_are_complete),
        cmocka_unit_test(param_indices_match_rows),
        cmocka_unit_test(params_parse_and_errors),
        cmocka_unit_test(flops_for_anchor_shapes),
        cmocka_unit_test(nvfp4_bytes_for_anchor_shapes),
        cmocka_unit_test(attention_flops_count_visible_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

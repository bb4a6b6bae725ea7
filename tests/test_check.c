/* labels: unit cpu */
/* The checker is itself tested: small CPU kernels, put into a copy of a
 * registry row's CPU slot, run on seeded random inputs against the float64
 * reference with the row's own tolerances. The correct kernel of each op must
 * PASS; each deliberately wrong one (shifted index, a loop one short, an
 * unwritten element, a transposed operand, a missing or misaligned causal
 * mask, a wrong GQA head map, a NaN for fully masked rows, a wrong lse, NVFP4
 * without its global scale, with a scale from the wrong column or the blocked
 * layout read as plain, a wrong activation, swapped SwiGLU halves, a missing
 * bias) must FAIL. Then the checker's own rules: metrics, NaN, poison. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "kernelkit/harness.h"

/* ---- a tiny harness: random inputs, reference, poison, kernel, check ---- */

static uint64_t rng_state;

static double uniform(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

/* Inputs by dtype: floats uniform in [-1, 1), e2m1 any code, e4m3 scales in
 * [0.25, 2] (codes 0x28..0x40) so that c stays well inside f16's range. A
 * one-element f32 input is a global scale: [1.25, 2.5), far enough from 1 that
 * a kernel ignoring it cannot pass. */
static void fill_random(void *buf, kk_dtype dt, int64_t n) {
    uint8_t *b = buf;
    for (int64_t i = 0; i < n; i++) switch (dt) {
        case KK_DTYPE_E2M1:
            b[i / 2] = (uint8_t)((b[i / 2] & (0xF0 >> 4 * (i % 2))) |
                                 ((unsigned)(uniform() * 16) << 4 * (i % 2)));
            break;
        case KK_DTYPE_FP8_E4M3: b[i] = (uint8_t)(0x28 + uniform() * 25); break;
        default: {
            double v = dt == KK_DTYPE_F32 && n == 1 ? 1.25 + 1.25 * uniform() : 2 * uniform() - 1;
            kk_assert_ok(kk_convert_host(&v, KK_DTYPE_F64, b + i * kk_dtype_bits(dt) / 8, dt, 1));
        }
        }
}

typedef struct outcome {
    int pass[KK_OP_MAX_TENSORS]; /* per output */
    int all;                     /* every output passed */
    kk_check_result r[KK_OP_MAX_TENSORS];
} outcome;

/* Run `kernel` as the CPU kernel of op `name` with `text` params and check
 * every output; `seed` makes the inputs. */
static outcome run_case(const char *name, const char *text, kk_op_kernel_fn kernel, uint64_t seed) {
    const kk_op *found;
    kk_assert_ok(kk_op_find(name, &found));
    kk_op row = *found; /* the test's own row: the registry is read-only */
    kk__op_swap(&row, KK_BACKEND_CPU, kernel);
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(&row, text, &p));
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0, nin = 0;
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    void *raw[KK_OP_MAX_TENSORS];
    double *f64[KK_OP_MAX_TENSORS];
    kk_tensor *tensors[KK_OP_MAX_TENSORS];
    rng_state = seed;
    for (int k = 0; k < n; k++) {
        raw[k] = calloc(1, kk_dtype_bytes(t[k].dtype, (size_t)t[k].numel));
        f64[k] = calloc((size_t)t[k].numel, sizeof(double));
        if (t[k].is_output) {
            kk_assert_ok(kk_poison(raw[k], t[k].dtype, (size_t)t[k].numel, 0));
        } else {
            nin++;
            fill_random(raw[k], t[k].dtype, t[k].numel);
            kk_assert_ok(
                kk_convert_host(raw[k], t[k].dtype, f64[k], KK_DTYPE_F64, (size_t)t[k].numel));
        }
        kk_assert_ok(
            kk_tensor_wrap("cpu", t[k].dtype, t[k].ndim, t[k].shape, NULL, raw[k], &tensors[k]));
    }
    kk_assert_ok(kk_op_reference(&p, (const double *const *)f64, f64 + nin));
    double *mag[KK_OP_MAX_TENSORS] = {0}; /* as the case runner: the op's magnitude, if any */
    if (kk_op_has_magnitude(p.op)) {
        for (int k = nin; k < n; k++) mag[k] = calloc((size_t)t[k].numel, sizeof(double));
        kk_assert_ok(kk_op_magnitude(&p, (const double *const *)f64, mag + nin));
    }
    kk_assert_ok(kk__op_slot(p.op, KK_BACKEND_CPU).run(&p, tensors, NULL));
    outcome o = {.all = 1};
    for (int k = nin; k < n; k++) {
        kk_tolerance tol;
        kk_assert_ok(kk_op_tolerance(p.op, t[k].dtype, &tol));
        kk_assert_ok(kk_check_output_scaled(raw[k], t[k].dtype, f64[k], mag[k], (size_t)t[k].numel,
                                            &tol, &o.r[k - nin]));
        o.pass[k - nin] = o.r[k - nin].pass;
        o.all = o.all && o.r[k - nin].pass;
        char line[512];
        kk_assert_ok(kk_check_result_format(&o.r[k - nin], line, sizeof line));
        print_message("    %s %s [%s]: %s\n", name, text, t[k].name, line);
    }
    for (int k = 0; k < n; k++) {
        kk_tensor_destroy(tensors[k]);
        free(raw[k]);
        free(f64[k]);
        free(mag[k]);
    }
    return o;
}

#define assert_passes(op, text, kernel) assert_true(run_case(op, text, kernel, 1).all)
#define assert_fails(op, text, kernel) assert_false(run_case(op, text, kernel, 1).all)

/* Element access for the test kernels, in any dtype (e2m1: nibbles). */
static double ld(const kk_tensor *t, int64_t i) {
    const uint8_t *b = t->data;
    if (t->dtype == KK_DTYPE_E2M1) return kk_e2m1_to_f32((uint8_t)(b[i / 2] >> 4 * (i % 2)));
    double v;
    kk_assert_ok(
        kk_convert_host(b + i * kk_dtype_bits(t->dtype) / 8, t->dtype, &v, KK_DTYPE_F64, 1));
    return v;
}

static void st(kk_tensor *t, int64_t i, double v) {
    kk_assert_ok(kk_convert_host(
        &v, KK_DTYPE_F64, (uint8_t *)t->data + i * kk_dtype_bits(t->dtype) / 8, t->dtype, 1));
}

/* ---- GEMM ---- */

enum { BUG_NONE = 0, BUG_SHIFT = 1, BUG_K_SHORT = 2, BUG_UNWRITTEN = 4, BUG_TRANSPOSED = 8 };

static kk_status gemm_kernel(const kk_op_params *p, kk_tensor *const *t, unsigned bug) {
    const int64_t M = p->i[KK__GEMM_M], N = p->i[KK__GEMM_N], K = p->i[KK__GEMM_K];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f; /* f32 accumulation, as a real kernel */
            for (int64_t k = 0; k < (bug & BUG_K_SHORT ? K - 1 : K); k++) {
                const int64_t bi = bug & BUG_TRANSPOSED ? k * N + n : n * K + k;
                acc += (float)(ld(t[0], m * K + k) * ld(t[1], bi));
            }
            const int64_t out = bug & BUG_SHIFT ? (m * N + n + 1) % (M * N) : m * N + n;
            if (!(bug & BUG_UNWRITTEN) || out != M * N - 1) st(t[2], out, acc);
        }
    return KK_OK;
}

static kk_status gemm_ok(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return gemm_kernel(p, t, BUG_NONE);
}
static kk_status gemm_shift(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return gemm_kernel(p, t, BUG_SHIFT);
}
static kk_status gemm_k_short(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return gemm_kernel(p, t, BUG_K_SHORT);
}
static kk_status gemm_unwritten(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return gemm_kernel(p, t, BUG_UNWRITTEN);
}
static kk_status gemm_transposed(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return gemm_kernel(p, t, BUG_TRANSPOSED);
}

static void wrong_gemms_fail(void **state) {
    (void)state;
    static const char *const cases[] = {"M=5 N=7 K=64 dtype=f32", "M=5 N=7 K=64 dtype=bf16",
                                        "M=3 N=9 K=33 dtype=f16"};
    for (int c = 0; c < 3; c++) {
        assert_passes("gemm", cases[c], gemm_ok);
        assert_fails("gemm", cases[c], gemm_shift);
        assert_fails("gemm", cases[c], gemm_k_short);
        assert_fails("gemm", cases[c], gemm_transposed); /* N != K: W read as [K,N] */
        outcome o = run_case("gemm", cases[c], gemm_unwritten, 1);
        assert_false(o.all);
        assert_int_equal(o.r[0].nonfinite_count, 1); /* the poison survived, once */
        assert_int_equal(o.r[0].first_bad, (int64_t)o.r[0].count - 1);
    }
}

static const kk_op *op_named(const char *name) {
    const kk_op *op = NULL;
    kk_assert_ok(kk_op_find(name, &op));
    return op;
}

/* The magnitude of gemm by hand: m[i,j] = sum_k |a_ik b_jk|. */
static void gemm_magnitude_by_hand(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(op_named("gemm"), "M=2 N=2 K=2 dtype=f32", &p));
    const double a[] = {1, -2, 3, 4}, b[] = {5, 6, -7, 0.5};
    double c[4], m[4];
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){a, b}, (double *const[]){c}));
    kk_assert_ok(kk_op_magnitude(&p, (const double *const[]){a, b}, (double *const[]){m}));
    const double want_c[] = {-7, -8, 39, -19}, want_m[] = {17, 8, 39, 23};
    for (int i = 0; i < 4; i++) {
        assert_true(c[i] == want_c[i]);
        assert_true(m[i] == want_m[i]);
    }
    /* SwiGLU: y = silu(g) u = 0 with u = 0; m = |silu(g)| m_u + |u silu'(g)| m_g. */
    kk_assert_ok(kk_op_params_parse(op_named("linear"),
                                    "M=1 N=1 K=2 bias=0 activation=swiglu dtype=f32", &p));
    const double x[] = {1, -1}, wg[] = {2, 1}, wu[] = {1, 1};
    double y, my;
    kk_assert_ok(kk_op_magnitude(&p, (const double *const[]){x, wg, wu}, (double *const[]){&my}));
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){x, wg, wu}, (double *const[]){&y}));
    assert_true(y == 0.0);
    assert_true(fabs(my - 2.0 / (1.0 + exp(-1.0))) < 1e-15); /* silu(1) * (|1| + |-1|) */
    /* relu: slope 0 below zero; a bias counts with its size. */
    kk_assert_ok(
        kk_op_params_parse(op_named("linear"), "M=1 N=1 K=2 bias=1 activation=relu dtype=f32", &p));
    const double bias_neg = -4, bias_pos = 4;
    kk_assert_ok(
        kk_op_magnitude(&p, (const double *const[]){x, wg, &bias_neg}, (double *const[]){&my}));
    assert_true(my == 0.0);
    kk_assert_ok(
        kk_op_magnitude(&p, (const double *const[]){x, wg, &bias_pos}, (double *const[]){&my}));
    assert_true(my == 7.0);
    /* an op without the hook */
    assert_false(kk_op_has_magnitude(op_named("softmax")));
    assert_true(kk_op_has_magnitude(op_named("gemm")));
}

/* A cancelling f32 GEMM row: terms in pairs t, -t(1 - d) with |t| ~ 1, so c
 * is small while m = sum |terms| is about K. A correct f32 kernel (its error
 * ~u m) passes under acc*m; losing one term (K - 1, the error ~|t| ~ m/K)
 * still fails by orders of magnitude. */
static void lost_term_fails_when_cancelling(void **state) {
    (void)state;
    enum { K = 1024, N = 4 };
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(op_named("gemm"), "M=1 N=4 K=1024 dtype=f32", &p));
    static float af[K], bf[N * K];
    static double a[K], b[N * K];
    rng_state = 7;
    for (int k = 0; k < K; k++) af[k] = (float)(2 * uniform() - 1);
    af[K - 2] = 0.75f; /* the last pair, whose second term is lost: |t| ~ 0.5 */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k += 2) {
            bf[n * K + k] = k == K - 2 ? (n % 2 ? 0.75f : -0.75f) : (float)(2 * uniform() - 1);
            /* a_{k+1} b_{k+1} = -a_k b_k (1 - 1e-3), rounded to f32 */
            bf[n * K + k + 1] = (float)(-(double)af[k] * bf[n * K + k] * (1 - 1e-3) / af[k + 1]);
        }
    for (int i = 0; i < K; i++) a[i] = af[i];
    for (int i = 0; i < N * K; i++) b[i] = bf[i];
    double ref[N], mag[N];
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){a, b}, (double *const[]){ref}));
    kk_assert_ok(kk_op_magnitude(&p, (const double *const[]){a, b}, (double *const[]){mag}));
    float ok[N], lost[N];
    for (int n = 0; n < N; n++) {
        float acc = 0, acc_short = 0;
        for (int k = 0; k < K; k++) {
            acc += af[k] * bf[n * K + k];
            if (k < K - 1) acc_short += af[k] * bf[n * K + k];
        }
        ok[n] = acc;
        lost[n] = acc_short;
        assert_true(fabs(ref[n]) < 1e-2 * mag[n]); /* it cancels */
    }
    kk_tolerance tol;
    kk_assert_ok(kk_op_tolerance(op_named("gemm"), KK_DTYPE_F32, &tol));
    assert_true(tol.acc > 0);
    /* Every output here cancels, so ||ref|| is small and the relative L2
     * criterion is not what this case is about: the elementwise rule alone. */
    tol.criteria = KK_CHECK_ELEMENTWISE;
    kk_check_result r;
    kk_assert_ok(kk_check_output_scaled(ok, KK_DTYPE_F32, ref, mag, N, &tol, &r));
    print_message("    cancelling gemm, correct: max abs %.3g, acc*m %.3g\n", r.max_abs_err,
                  tol.acc * mag[0]);
    assert_true(r.pass);
    kk_assert_ok(kk_check_output_scaled(lost, KK_DTYPE_F32, ref, mag, N, &tol, &r));
    print_message("    cancelling gemm, K-1: max abs %.3g, acc*m %.3g\n", r.max_abs_err,
                  tol.acc * mag[0]);
    assert_false(r.pass);
    assert_int_equal(r.bad_count, N); /* every output, elementwise */
    for (int n = 0; n < N; n++)       /* the lost term is >= 100 times the allowance */
        assert_true(fabs((double)lost[n] - ref[n]) > 100 * (tol.atol + tol.acc * mag[n]));
}

/* The fuzzer's SwiGLU case that cancels (docs/harness.md, "Tolerances"): u
 * sums to near 0 from sum |x w| = 164 and silu(g) ~ 17 scales its f32 error
 * past atol + rtol |y|; acc * m covers it. Run by the case runner, as
 * `kernelkit check --device cpu --op linear --params ... --seed ...` does. */
static void cancelling_swiglu_passes(void **state) {
    (void)state;
    kk_case c;
    memset(&c, 0, sizeof c);
    kk_assert_ok(kk_op_params_parse(
        op_named("linear"), "M=124 N=140 K=253 bias=1 activation=swiglu dtype=f32", &c.params));
    snprintf(c.name, sizeof c.name, "params/linear");
    c.seed = 1593186448201767901ull;
    c.dist = KK_DIST_FULL;
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &(kk_run_options){.device = "cpu"}, &r));
    print_message("    %s: %s max abs %.3g\n", kk_case_status_name(r.status), r.message,
                  r.max_abs_err);
    assert_int_equal(r.status, KK_CASE_PASS);
    assert_true(r.outputs[0].check.tol.acc > 0);
    assert_true(r.max_abs_err > 1e-4 + 1e-4 * 1.6); /* the old rule alone failed it */
}

/* ---- Linear ---- */

enum { LBUG_GELU = 1, LBUG_SWAP = 2, LBUG_NO_BIAS = 4 };

static float act_f32(int act, float x) {
    switch (act) {
    case KK__ACT_RELU: return x > 0 ? x : 0;
    case KK__ACT_GELU_ERF: return 0.5f * x * (1 + erff(x * 0.70710678f));
    case KK__ACT_GELU_TANH:
        return 0.5f * x * (1 + tanhf(0.79788456f * (x + 0.044715f * x * x * x)));
    case KK__ACT_SILU: return x / (1 + expf(-x));
    default: return x;
    }
}

static float dot_row(const kk_tensor *x, const kk_tensor *w, int64_t m, int64_t n, int64_t K) {
    float acc = 0;
    for (int64_t k = 0; k < K; k++) acc += (float)(ld(x, m * K + k) * ld(w, n * K + k));
    return acc;
}

static kk_status linear_kernel(const kk_op_params *p, kk_tensor *const *t, unsigned bug) {
    const int64_t M = p->i[KK__LIN_M], N = p->i[KK__LIN_N], K = p->i[KK__LIN_K];
    const int act = (int)p->i[KK__LIN_ACT], swiglu = act == KK__ACT_SWIGLU;
    const int bias = p->i[KK__LIN_BIAS] && !(bug & LBUG_NO_BIAS);
    const int nb = (int)p->i[KK__LIN_BIAS] * (1 + swiglu); /* bias tensors present */
    kk_tensor *y = t[2 + swiglu + nb];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float g = dot_row(t[0], t[1], m, n, K) + (bias ? (float)ld(t[2 + swiglu], n) : 0);
            if (!swiglu) {
                const int a = bug & LBUG_GELU && act == KK__ACT_GELU_ERF ? KK__ACT_GELU_TANH : act;
                st(y, m * N + n, act_f32(a, g));
                continue;
            }
            float u = dot_row(t[0], t[2], m, n, K) + (bias ? (float)ld(t[4], n) : 0);
            if (bug & LBUG_SWAP) {
                const float tmp = g;
                g = u, u = tmp;
            }
            st(y, m * N + n, act_f32(KK__ACT_SILU, g) * u);
        }
    return KK_OK;
}

static kk_status linear_ok(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return linear_kernel(p, t, 0);
}
static kk_status linear_tanh_for_erf(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return linear_kernel(p, t, LBUG_GELU);
}
static kk_status linear_swapped(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return linear_kernel(p, t, LBUG_SWAP);
}
static kk_status linear_no_bias(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    return linear_kernel(p, t, LBUG_NO_BIAS);
}

static void wrong_linears_fail(void **state) {
    (void)state;
    static const char *const acts[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu", "swiglu"};
    static const char *const dts[] = {"f32", "f16", "bf16"};
    char text[128];
    for (int a = 0; a < 6; a++)
        for (int d = 0; d < 3; d++) {
            snprintf(text, sizeof text, "M=4 N=8 K=32 bias=1 activation=%s dtype=%s", acts[a],
                     dts[d]);
            assert_passes("linear", text, linear_ok);
            assert_fails("linear", text, linear_no_bias);
        }
    /* The two GELUs differ by up to 4.7e-4: f32's tolerance tells them apart. */
    assert_fails("linear", "M=4 N=8 K=32 activation=gelu_erf dtype=f32", linear_tanh_for_erf);
    assert_fails("linear", "M=4 N=8 K=32 activation=swiglu dtype=bf16", linear_swapped);
}

/* ---- attention ---- */

enum { ABUG_NO_CAUSAL = 1, ABUG_TOP_LEFT = 2, ABUG_GQA = 4, ABUG_NAN_ROWS = 8, ABUG_LOG2 = 16 };

static int visible(const kk_op_params *p, int64_t i, int64_t j, unsigned bug) {
    const int64_t c = bug & ABUG_TOP_LEFT ? i : i + p->i[KK__ATT_SK] - p->i[KK__ATT_SQ];
    const int64_t wl = p->i[KK__ATT_WL], wr = p->i[KK__ATT_WR];
    if (p->i[KK__ATT_CAUSAL] && !(bug & ABUG_NO_CAUSAL) && j > c) return 0;
    return !(wl >= 0 && j < c - wl) && !(wr >= 0 && j > c + wr);
}

static kk_status attention_kernel(const kk_op_params *p, kk_tensor *const *t, unsigned bug) {
    const int64_t B = p->i[KK__ATT_B], Hq = p->i[KK__ATT_HQ], Hkv = p->i[KK__ATT_HKV];
    const int64_t Sq = p->i[KK__ATT_SQ], Sk = p->i[KK__ATT_SK], D = p->i[KK__ATT_D];
    const double scale = p->f[KK__ATT_SCALE] > 0 ? p->f[KK__ATT_SCALE] : 1 / sqrt((double)D);
    double *s = malloc(sizeof(double) * (size_t)Sk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t kv = b * Hkv + (bug & ABUG_GQA ? h % Hkv : h / (Hq / Hkv));
                const int64_t row = (b * Hq + h) * Sq + i;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    s[j] = -INFINITY;
                    if (!visible(p, i, j, bug)) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++)
                        dot += ld(t[0], row * D + d) * ld(t[1], (kv * Sk + j) * D + d);
                    s[j] = dot * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int64_t j = 0; j < Sk; j++)
                    sum += s[j] > -INFINITY ? (s[j] = exp(s[j] - mx)) : 0;
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Sk; j++)
                        if (s[j] > -INFINITY) acc += s[j] * ld(t[2], (kv * Sk + j) * D + d);
                    /* A row that sees nothing: 0 (sum 0) unless the NaN bug divides. */
                    st(t[3], row * D + d, sum > 0 || bug & ABUG_NAN_ROWS ? acc / sum : 0.0);
                }
                if (p->i[KK__ATT_LSE])
                    st(t[4], row,
                       sum > 0 ? mx + (bug & ABUG_LOG2 ? log2(sum) : log(sum)) : -INFINITY);
            }
    free(s);
    return KK_OK;
}

#define ATTENTION_KERNEL(fn, bug)                                                                  \
    static kk_status fn(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {            \
        (void)stream;                                                                              \
        return attention_kernel(p, t, bug);                                                        \
    }
ATTENTION_KERNEL(attn_ok, 0)
ATTENTION_KERNEL(attn_no_causal, ABUG_NO_CAUSAL)
ATTENTION_KERNEL(attn_top_left, ABUG_TOP_LEFT)
ATTENTION_KERNEL(attn_gqa_mod, ABUG_GQA)
ATTENTION_KERNEL(attn_nan_rows, ABUG_NAN_ROWS)
ATTENTION_KERNEL(attn_log2, ABUG_LOG2)

static void wrong_attentions_fail(void **state) {
    (void)state;
    const char *base = "B=2 Hq=4 Hkv=2 Sq=5 Sk=9 D=16 causal=1 lse=1 dtype=f32";
    assert_passes("attention", base, attn_ok);
    assert_passes("attention", "B=2 Hq=4 Hkv=2 Sq=5 Sk=9 D=16 causal=1 lse=1 dtype=bf16", attn_ok);
    assert_passes("attention", "B=2 Hq=4 Hkv=2 Sq=5 Sk=9 D=16 causal=1 lse=1 dtype=f16", attn_ok);
    assert_fails("attention", base, attn_no_causal);
    assert_fails("attention", base, attn_top_left);
    assert_fails("attention", base, attn_gqa_mod);
    /* Top-left and bottom-right agree when Sq == Sk: the failure above is the
   * alignment. */
    assert_passes("attention", "Hq=2 Hkv=2 Sq=6 Sk=6 D=16 causal=1 dtype=f32", attn_top_left);
    /* A wrong lse fails on lse alone. */
    outcome o = run_case("attention", base, attn_log2, 1);
    assert_true(o.pass[0] && !o.pass[1]);
    /* Sq > Sk: rows 0 and 1 see no key. o = 0 and lse = -inf pass (the row
   * allows a matching -inf); NaN rows fail. */
    const char *masked = "B=1 Hq=2 Hkv=1 Sq=6 Sk=4 D=16 causal=1 lse=1 dtype=f32";
    assert_passes("attention", masked, attn_ok);
    o = run_case("attention", masked, attn_nan_rows, 1);
    assert_false(o.pass[0]);
    assert_int_equal(o.r[0].nonfinite_count, 2 * 2 * 16); /* 2 heads x 2 rows x D */
    assert_passes("attention", "Hq=2 Hkv=1 Sq=7 Sk=9 D=32 window_left=2 window_right=1 lse=1",
                  attn_ok);
    assert_fails("attention", "Hq=2 Hkv=1 Sq=7 Sk=9 D=32 window_left=2 window_right=1 causal=1",
                 attn_top_left);
}

/* ---- NVFP4 GEMV ---- */

enum { GBUG_NO_GLOBAL = 1, GBUG_SCALE_COL = 2, GBUG_AS_PLAIN = 4, GBUG_UNWRITTEN = 8 };

static double scale(const kk_tensor *s, int blocked, int64_t rows, int64_t cols, int64_t l,
                    int64_t i, int64_t j) {
    if (blocked) return ld(s, kk_nvfp4_blocked_offset(rows, cols, l, i, j));
    return ld(s, (l * rows + i) * cols + j);
}

static kk_status gemv_kernel(const kk_op_params *p, kk_tensor *const *t, unsigned bug) {
    const int64_t M = p->i[KK__GEMV_M], K = p->i[KK__GEMV_K], L = p->i[KK__GEMV_L], C = K / 16;
    const int glob = (int)p->i[KK__GEMV_GLOBAL];
    const int blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED && !(bug & GBUG_AS_PLAIN);
    const double g = glob && !(bug & GBUG_NO_GLOBAL) ? ld(t[4], 0) * ld(t[5], 0) : 1.0;
    for (int64_t l = 0; l < L; l++)
        for (int64_t m = 0; m < M; m++) {
            float acc = 0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t j = bug & GBUG_SCALE_COL ? (k / 16 + 1) % C : k / 16;
                acc += (float)(ld(t[0], (l * M + m) * K + k) * scale(t[2], blocked, M, C, l, m, j) *
                               ld(t[1], l * K + k) * scale(t[3], blocked, 1, C, l, 0, j));
            }
            if (!(bug & GBUG_UNWRITTEN) || m != M / 2) st(t[glob ? 6 : 4], l * M + m, acc * g);
        }
    return KK_OK;
}

#define GEMV_KERNEL(fn, bug)                                                                       \
    static kk_status fn(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {            \
        (void)stream;                                                                              \
        return gemv_kernel(p, t, bug);                                                             \
    }
GEMV_KERNEL(gemv_ok, 0)
GEMV_KERNEL(gemv_no_global, GBUG_NO_GLOBAL)
GEMV_KERNEL(gemv_scale_col, GBUG_SCALE_COL)
GEMV_KERNEL(gemv_as_plain, GBUG_AS_PLAIN)
GEMV_KERNEL(gemv_unwritten, GBUG_UNWRITTEN)

static void wrong_gemvs_fail(void **state) {
    (void)state;
    static const char *const cases[] = {"M=130 K=128 L=2 global=1", "M=130 K=128 L=2 global=0",
                                        "M=130 K=128 L=2 global=1 scale_layout=blocked",
                                        "M=64 K=256 L=1 scale_layout=blocked"};
    for (int c = 0; c < 4; c++) {
        assert_passes("nvfp4_gemv", cases[c], gemv_ok);
        assert_fails("nvfp4_gemv", cases[c], gemv_scale_col);
        outcome o = run_case("nvfp4_gemv", cases[c], gemv_unwritten, 1);
        assert_int_equal(o.r[0].nonfinite_count, c < 3 ? 2 : 1); /* one per batch */
    }
    assert_fails("nvfp4_gemv", cases[0], gemv_no_global);
    assert_fails("nvfp4_gemv", cases[2], gemv_no_global);
    assert_fails("nvfp4_gemv", cases[2], gemv_as_plain);
    assert_fails("nvfp4_gemv", cases[3], gemv_as_plain);
}

/* ---- the checker's own rules ---- */

static kk_tolerance tolerance(double atol, double rtol, double l2, unsigned criteria,
                              unsigned flags) {
    return (kk_tolerance){KK_DTYPE_F64, atol, rtol, l2, criteria, flags, 0.0};
}

static kk_check_result check(const double *out, const double *ref, size_t n, kk_tolerance tol) {
    kk_check_result r;
    kk_assert_ok(kk_check_output(out, KK_DTYPE_F64, ref, n, &tol, &r));
    return r;
}

static void metrics_by_hand(void **state) {
    (void)state;
    const double out[] = {1, 2.5, 3}, ref[] = {1, 2, 4};
    kk_check_result r = check(out, ref, 3, tolerance(0.1, 0.1, 1.0, KK_CHECK_ELEMENTWISE, 0));
    assert_true(r.max_abs_err == 1.0 && r.max_abs_index == 2 && r.max_rel_err == 0.25);
    assert_true(fabs(r.rel_l2_err - sqrt(1.25 / 21)) < 1e-16);
    assert_true(r.bad_count == 2 && r.first_bad == 1 && r.first_bad_out == 2.5 &&
                r.first_bad_ref == 2 && r.nonfinite_count == 0 && !r.pass);
    /* |out - ref| <= atol + rtol |ref| is inclusive: 0.5 <= 0.25 + 0.125 * 2. */
    r = check(out, ref, 2, tolerance(0.25, 0.125, 0, KK_CHECK_ELEMENTWISE, 0));
    assert_true(r.pass && r.bad_count == 0 && r.first_bad == -1);
    /* Each criterion decides only when chosen. */
    r = check(out, ref, 3, tolerance(0, 0, 0.25, KK_CHECK_L2, 0));
    assert_true(r.pass && r.bad_count == 2);
    r = check(out, ref, 3, tolerance(0, 0, 0.25, KK_CHECK_L2 | KK_CHECK_ELEMENTWISE, 0));
    assert_false(r.pass);
    const double tiny_out[] = {2e-6, -1e-6}, tiny_ref[] = {1e-6, 1e-6};
    r = check(tiny_out, tiny_ref, 2, tolerance(1e-5, 0, 0.1, KK_CHECK_ELEMENTWISE, 0));
    assert_true(r.pass && r.rel_l2_err > 1);
    r = check(tiny_out, tiny_ref, 2,
              tolerance(1e-5, 0, 0.1, KK_CHECK_ELEMENTWISE | KK_CHECK_L2, 0));
    assert_false(r.pass);
    char line[256];
    kk_assert_ok(kk_check_result_format(&r, line, sizeof line));
    kk_assert_contains(line, "FAIL");
    kk_assert_contains(line, "rel L2");
}

static void nan_never_passes(void **state) {
    (void)state;
    const double ref[] = {1, 2, 3}, huge = 1e300;
    const double bad[][3] = {{1, NAN, 3}, {1, 2, INFINITY}, {-INFINITY, 2, 3}};
    const unsigned crits[] = {KK_CHECK_ELEMENTWISE, KK_CHECK_L2};
    for (int b = 0; b < 3; b++)
        for (int c = 0; c < 2; c++) {
            kk_check_result r = check(
                bad[b], ref, 3, tolerance(huge, huge, huge, crits[c], KK_CHECK_ALLOW_NONFINITE));
            assert_false(r.pass);
            assert_true(r.nonfinite_count == 1 && r.bad_count == 1);
            assert_true(isinf(r.max_abs_err) && isinf(r.rel_l2_err) && isinf(r.max_rel_err));
        }
    /* A non-finite reference: only with the flag, and only the same value. */
    const double ref_nf[] = {-INFINITY, NAN, INFINITY};
    const double same[] = {-INFINITY, NAN, INFINITY}, other[][3] = {{INFINITY, NAN, INFINITY},
                                                                    {-INFINITY, 0, INFINITY},
                                                                    {-INFINITY, NAN, 1e308}};
    kk_tolerance allow = tolerance(1, 1, 1, KK_CHECK_ELEMENTWISE, KK_CHECK_ALLOW_NONFINITE);
    kk_tolerance strict = tolerance(1, 1, 1, KK_CHECK_ELEMENTWISE, 0);
    assert_true(check(same, ref_nf, 3, allow).pass);
    assert_int_equal(check(same, ref_nf, 3, strict).nonfinite_count, 3);
    for (int o = 0; o < 3; o++) assert_int_equal(check(other[o], ref_nf, 3, allow).bad_count, 1);
}

static void zero_reference(void **state) {
    (void)state;
    const double zero[] = {0, 0}, small[] = {0, 1e-300};
    kk_check_result r = check(zero, zero, 2, tolerance(0, 0, 0, KK_CHECK_L2, 0));
    assert_true(r.pass && r.rel_l2_err == 0);
    r = check(small, zero, 2, tolerance(1, 1, 1e9, KK_CHECK_L2, 0));
    assert_true(!r.pass && isinf(r.rel_l2_err));
    assert_true(r.max_rel_err == 1e-300 / KK_CHECK_REL_TINY);
}

/* An f16 output among the subnormals (a lone 2.7e-6, spacing 2^-24) is held
 * to half that spacing, not to a relative L2 error f16 cannot reach there;
 * two spacings off still fails. */
static void subnormal_outputs_have_an_l2_floor(void **state) {
    (void)state;
    const double ref[] = {2.7e-6};
    uint16_t h;
    kk_assert_ok(kk_convert_host(ref, KK_DTYPE_F64, &h, KK_DTYPE_F16, 1));
    const kk_tolerance tol = tolerance(1e-3, 2e-3, 5e-3, KK_CHECK_ELEMENTWISE | KK_CHECK_L2, 0);
    kk_check_result r;
    kk_assert_ok(kk_check_output(&h, KK_DTYPE_F16, ref, 1, &tol, &r));
    assert_true(r.rel_l2_err > 5e-3); /* the relative error alone would fail */
    assert_true(r.pass);
    const uint16_t off = (uint16_t)(h + 2);
    kk_assert_ok(kk_check_output(&off, KK_DTYPE_F16, ref, 1, &tol, &r));
    assert_false(r.pass);
}

/* f32 below its smallest normal: the floor is 16 * 2^-126 (1.9e-37). The CPU's
 * clamped e^x gives a tanh-GELU of x = -10.4 as 6.3e-38 where the truth is
 * 1.5e-43 (fuzz linear/11 of seed 1): passes; 1e-36 off does not. */
static void f32_below_the_normals_has_an_l2_floor(void **state) {
    (void)state;
    const double ref[] = {-1.5e-43};
    const float near = -6.3e-38f, far = -1e-36f;
    const kk_tolerance tol = tolerance(1e-4, 1e-4, 1e-5, KK_CHECK_L2, 0);
    kk_check_result r;
    kk_assert_ok(kk_check_output(&near, KK_DTYPE_F32, ref, 1, &tol, &r));
    assert_true(r.rel_l2_err > 1e5 && r.pass);
    kk_assert_ok(kk_check_output(&far, KK_DTYPE_F32, ref, 1, &tol, &r));
    assert_false(r.pass);
}

/* Every dtype decodes exactly: an encoded copy of ref passes with zero
 * tolerance, and one changed element is found. */
static void every_dtype_decodes(void **state) {
    (void)state;
    static const kk_dtype dts[] = {
        KK_DTYPE_F64,      KK_DTYPE_F32,  KK_DTYPE_F16,  KK_DTYPE_BF16,  KK_DTYPE_FP8_E4M3,
        KK_DTYPE_FP8_E5M2, KK_DTYPE_E2M1, KK_DTYPE_INT8, KK_DTYPE_UINT8, KK_DTYPE_INT32};
    const double vals[5] = {0.5, -1.5, 3, 0, 6}, ints[5] = {1, 2, 3, 0, 6};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        const double *ref = dts[d] >= KK_DTYPE_INT8 ? ints : vals;
        uint8_t buf[40] = {0};
        kk_assert_ok(kk_convert_host(ref, KK_DTYPE_F64, buf, dts[d], 5));
        kk_tolerance tol = tolerance(0, 0, 0, KK_CHECK_ELEMENTWISE | KK_CHECK_L2, 0);
        kk_check_result r;
        kk_assert_ok(kk_check_output(buf, dts[d], ref, 5, &tol, &r));
        assert_true(r.pass);
        double changed[5];
        memcpy(changed, ref, sizeof changed);
        changed[3] = 2;
        kk_assert_ok(kk_check_output(buf, dts[d], changed, 5, &tol, &r));
        assert_true(!r.pass && r.bad_count == 1 && r.first_bad == 3 && r.first_bad_out == 0);
    }
}

static void poison_is_caught(void **state) {
    (void)state;
    static const kk_dtype nan_dts[] = {KK_DTYPE_F64,  KK_DTYPE_F32,      KK_DTYPE_F16,
                                       KK_DTYPE_BF16, KK_DTYPE_FP8_E4M3, KK_DTYPE_FP8_E5M2};
    static const kk_dtype no_nan[] = {KK_DTYPE_E2M1, KK_DTYPE_INT8, KK_DTYPE_UINT8, KK_DTYPE_INT32};
    const double zeros[7] = {0};
    kk_tolerance tol = tolerance(1e9, 1e9, 1e9, KK_CHECK_ELEMENTWISE, KK_CHECK_ALLOW_NONFINITE);
    for (size_t d = 0; d < 6; d++)
        for (int v = 0; v < 2; v++) {
            uint8_t buf[56];
            kk_check_result r;
            kk_assert_ok(kk_poison(buf, nan_dts[d], 7, v));
            kk_assert_ok(kk_check_output(buf, nan_dts[d], zeros, 7, &tol, &r));
            assert_true(!r.pass && r.nonfinite_count == 7);
        }
    for (size_t d = 0; d < 4; d++) {
        uint8_t run0[28], run1[28];
        size_t differ = 0;
        int64_t first = 0;
        kk_assert_ok(kk_poison(run0, no_nan[d], 7, 0));
        kk_assert_ok(kk_poison(run1, no_nan[d], 7, 1));
        kk_assert_ok(kk_poison_compare(run0, run1, no_nan[d], 7, &differ, &first));
        assert_true(differ == 7 && first == 0);
    }
}

/* e2m1 has no NaN: a kernel that skips element 5 is found by two runs with
 * the two poisons. Poisoning keeps the other nibble of a shared byte. */
static void e2m1_unwritten_found_by_two_runs(void **state) {
    (void)state;
    uint8_t runs[2][6];
    for (int v = 0; v < 2; v++) {
        memset(runs[v], 0x33, sizeof runs[v]);
        kk_assert_ok(kk_poison(runs[v], KK_DTYPE_E2M1, 11, v));
        assert_int_equal(runs[v][5] >> 4, 3); /* element 11 is not ours */
        for (int i = 0; i < 11; i++)          /* the kernel: writes 1.0 except at 5 */
            if (i != 5)
                runs[v][i / 2] =
                    (uint8_t)((runs[v][i / 2] & (0xF0 >> 4 * (i % 2))) | 2 << 4 * (i % 2));
    }
    size_t differ = 0;
    int64_t first = -1;
    kk_assert_ok(kk_poison_compare(runs[0], runs[1], KK_DTYPE_E2M1, 11, &differ, &first));
    assert_true(differ == 1 && first == 5);
}

static void argument_errors(void **state) {
    (void)state;
    const double x[1] = {0};
    kk_check_result r;
    kk_tolerance tol = tolerance(0, 0, 0, KK_CHECK_ELEMENTWISE, 0);
    kk_assert_status(kk_check_output(NULL, KK_DTYPE_F64, x, 1, &tol, &r), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_check_output(x, KK_DTYPE_COUNT, x, 1, &tol, &r), KK_ERR_INVALID_ARGUMENT);
    kk_assert_ok(kk_check_output(NULL, KK_DTYPE_F64, NULL, 0, &tol, &r));
    assert_true(r.pass && r.count == 0);
    tol.rtol = -1;
    kk_assert_status(kk_check_output(x, KK_DTYPE_F64, x, 1, &tol, &r), KK_ERR_INVALID_ARGUMENT);
    tol = tolerance(0, 0, NAN, KK_CHECK_ELEMENTWISE, 0);
    kk_assert_status(kk_check_output(x, KK_DTYPE_F64, x, 1, &tol, &r), KK_ERR_INVALID_ARGUMENT);
    tol = tolerance(0, 0, 0, 0, 0);
    kk_assert_status(kk_check_output(x, KK_DTYPE_F64, x, 1, &tol, &r), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "tol->criteria");
    uint8_t b[8];
    kk_assert_status(kk_poison(b, KK_DTYPE_F32, 2, 2), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_poison(NULL, KK_DTYPE_F32, 2, 0), KK_ERR_INVALID_ARGUMENT);
    size_t differ;
    kk_assert_status(kk_poison_compare(b, NULL, KK_DTYPE_F32, 2, &differ, NULL),
                     KK_ERR_INVALID_ARGUMENT);
}

/* The accumulation term: atol + rtol |ref| + acc * mag, only with a magnitude. */
static void acc_times_magnitude(void **state) {
    (void)state;
    const double ref[] = {0.0, 1.0}, out[] = {1e-3, 1.0 + 1e-3};
    const double enough[] = {1.0, 1.0}, short_[] = {0.5, 1.0};
    kk_tolerance tol = tolerance(0, 0, 1e9, KK_CHECK_ELEMENTWISE, 0);
    tol.acc = 1e-3;
    kk_check_result r;
    kk_assert_ok(kk_check_output_scaled(out, KK_DTYPE_F64, ref, enough, 2, &tol, &r));
    assert_true(r.pass);
    assert_true(r.tol.acc == 1e-3);
    char line[256];
    kk_assert_ok(kk_check_result_format(&r, line, sizeof line));
    assert_non_null(strstr(line, "acc 0.001*mag"));
    kk_assert_ok(kk_check_output_scaled(out, KK_DTYPE_F64, ref, short_, 2, &tol, &r));
    assert_false(r.pass);
    assert_int_equal(r.bad_count, 1);
    assert_int_equal(r.first_bad, 0);
    /* no magnitude: the plain rule, and the result says acc 0 was applied */
    kk_assert_ok(kk_check_output(out, KK_DTYPE_F64, ref, 2, &tol, &r));
    assert_false(r.pass);
    assert_int_equal(r.bad_count, 2);
    assert_true(r.tol.acc == 0.0);
    kk_assert_ok(kk_check_result_format(&r, line, sizeof line));
    assert_null(strstr(line, "acc"));
    tol.acc = -1;
    assert_int_equal(kk_check_output_scaled(out, KK_DTYPE_F64, ref, enough, 2, &tol, &r),
                     KK_ERR_INVALID_ARGUMENT);
}

/* The relative L2 limit with a magnitude: an output that cancels (ref 4e-3
 * from terms of magnitude 35, the fuzzer's fp8_gemm M=N=1 K=55 case) with an
 * error of the accumulation's size passes through acc * ||m||; without the
 * magnitude it fails the L2 limit alone; ten times the bound fails. */
static void l2_allows_the_accumulation_bound(void **state) {
    (void)state;
    const double ref[] = {3.8e-3}, mag[] = {35.0};
    const double out[] = {3.8e-3 + 9.3e-6}, far[] = {3.8e-3 + 10 * 35.0 * 0x1p-11};
    kk_tolerance tol = tolerance(1e-4, 1e-4, 1e-3, KK_CHECK_L2, 0);
    tol.acc = 0x1p-11;
    kk_check_result r;
    kk_assert_ok(kk_check_output_scaled(out, KK_DTYPE_F64, ref, mag, 1, &tol, &r));
    assert_true(r.rel_l2_err > tol.l2); /* the relative measure alone would fail it */
    assert_true(r.pass);
    kk_assert_ok(kk_check_output(out, KK_DTYPE_F64, ref, 1, &tol, &r));
    assert_false(r.pass);
    kk_assert_ok(kk_check_output_scaled(far, KK_DTYPE_F64, ref, mag, 1, &tol, &r));
    assert_false(r.pass);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wrong_gemms_fail),
        cmocka_unit_test(gemm_magnitude_by_hand),
        cmocka_unit_test(lost_term_fails_when_cancelling),
        cmocka_unit_test(cancelling_swiglu_passes),
        cmocka_unit_test(wrong_linears_fail),
        cmocka_unit_test(acc_times_magnitude),
        cmocka_unit_test(l2_allows_the_accumulation_bound),
        cmocka_unit_test(wrong_attentions_fail),
        cmocka_unit_test(wrong_gemvs_fail),
        cmocka_unit_test(metrics_by_hand),
        cmocka_unit_test(nan_never_passes),
        cmocka_unit_test(zero_reference),
        cmocka_unit_test(every_dtype_decodes),
        cmocka_unit_test(subnormal_outputs_have_an_l2_floor),
        cmocka_unit_test(f32_below_the_normals_has_an_l2_floor),
        cmocka_unit_test(poison_is_caught),
        cmocka_unit_test(e2m1_unwritten_found_by_two_runs),
        cmocka_unit_test(argument_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

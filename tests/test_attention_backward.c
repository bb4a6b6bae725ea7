/* labels: unit cpu */
/* attention_backward: the float64 reference against central finite
 * differences of the forward's float64 reference (L = sum dO * O, with causal
 * masks, windows, GQA, a custom scale, dropout and rows that see no key); the
 * CPU kernel through the harness's runner in every dtype; and wrong kernels the
 * checker must fail: dK without the scale, GQA heads not summed, the dropout
 * mask ignored, D_i from the output before dropout, another dropout offset. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "core/rng.h"
#include "cpu/cpu_kernels.h"
#include "kernelkit/cases.h"
#include "opdef/all_ops.h"

static kk_op_params parse(const char *text) {
    const kk_op *op;
    kk_op_params p;
    kk_assert_ok(kk_op_find("attention_backward", &op));
    kk_assert_ok(kk_op_params_parse(op, text, &p));
    return p;
}

/* ---- the reference against finite differences ---- */

typedef struct problem {
    kk_op_params p, fwd;
    int64_t nq, nk, nrows;
    double *q, *k, *v, *dO, *o, *lse, *dq, *dk, *dv, *o2, *lse2;
} problem;

/* L = sum dO * O(q, k, v) by the forward reference. */
static double loss(void *ctx) {
    problem *pb = ctx;
    kk_assert_ok(kk__attention_reference(&pb->fwd, (const double *const[]){pb->q, pb->k, pb->v},
                                         (double *const[]){pb->o2, pb->lse2}));
    double l = 0.0;
    for (int64_t x = 0; x < pb->nq; x++) l += pb->dO[x] * pb->o2[x];
    return l;
}

/* The reference's gradient g of x against finite differences of loss. */
static double fd_error(problem *pb, double *x, const double *g, int64_t n) {
    return kk_test_fd_error(loss, pb, x, g, n);
}

static void reference_matches_finite_differences_of(const char *text) {
    problem pb = {.p = parse(text)};
    kk__attention_backward_forward_params(&pb.p, &pb.fwd);
    const kk_op_params *p = &pb.p;
    pb.nq = p->i[KK__ATB_B] * p->i[KK__ATB_HQ] * p->i[KK__ATB_SQ] * p->i[KK__ATB_D];
    pb.nk = p->i[KK__ATB_B] * p->i[KK__ATB_HKV] * p->i[KK__ATB_SK] * p->i[KK__ATB_D];
    pb.nrows = p->i[KK__ATB_B] * p->i[KK__ATB_HQ] * p->i[KK__ATB_SQ];
    double *m = calloc((size_t)(6 * pb.nq + 4 * pb.nk + 2 * pb.nrows), sizeof *m);
    assert_non_null(m);
    pb.q = m, pb.dO = pb.q + pb.nq, pb.o = pb.dO + pb.nq, pb.dq = pb.o + pb.nq;
    pb.o2 = pb.dq + pb.nq, pb.k = pb.o2 + pb.nq, pb.v = pb.k + pb.nk, pb.dk = pb.v + pb.nk;
    pb.dv = pb.dk + pb.nk, pb.lse = pb.dv + pb.nk, pb.lse2 = pb.lse + pb.nrows;
    kk__rng r;
    kk__rng_seed(&r, 42);
    for (int64_t e = 0; e < pb.nq; e++) pb.q[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    for (int64_t e = 0; e < pb.nq; e++) pb.dO[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    for (int64_t e = 0; e < pb.nk; e++) pb.k[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    for (int64_t e = 0; e < pb.nk; e++) pb.v[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    kk_assert_ok(kk__attention_reference(&pb.fwd, (const double *const[]){pb.q, pb.k, pb.v},
                                         (double *const[]){pb.o, pb.lse}));
    kk_assert_ok(kk__op_attention_backward.reference(
        p, (const double *const[]){pb.q, pb.k, pb.v, pb.o, pb.dO, pb.lse},
        (double *const[]){pb.dq, pb.dk, pb.dv}));
    const double eq = fd_error(&pb, pb.q, pb.dq, pb.nq);
    const double ek = fd_error(&pb, pb.k, pb.dk, pb.nk);
    const double ev = fd_error(&pb, pb.v, pb.dv, pb.nk);
    print_message("    %s: finite differences off by %.2g (dq) %.2g (dk) %.2g (dv)\n", text, eq, ek,
                  ev);
    assert_true(eq < 1e-6 && ek < 1e-6 && ev < 1e-6);
    free(m);
}

static void reference_matches_finite_differences(void **state) {
    (void)state;
    reference_matches_finite_differences_of("B=1 Hq=2 Hkv=2 Sq=5 Sk=6 D=16 dtype=f32");
    reference_matches_finite_differences_of("B=2 Hq=4 Hkv=2 Sq=6 Sk=4 D=16 causal=1 dtype=f32");
    reference_matches_finite_differences_of(
        "B=1 Hq=3 Hkv=1 Sq=7 Sk=9 D=16 window_left=2 window_right=1 scale=0.7 dtype=f32");
    reference_matches_finite_differences_of(
        "B=1 Hq=4 Hkv=2 Sq=5 Sk=8 D=16 causal=1 dropout=0.3 seed=12345678901 offset=77 dtype=f32");
    reference_matches_finite_differences_of(
        "B=1 Hq=2 Hkv=1 Sq=6 Sk=6 D=17 window_left=1 dropout=0.5 seed=3 scale=1.3 dtype=f32");
}

/* ---- the CPU kernel through the harness ---- */

static const char *const shapes[] = {
    "B=1 Hq=1 Hkv=1 Sq=1 Sk=1 D=16",
    "B=2 Hq=8 Hkv=2 Sq=1 Sk=300 D=128 causal=1", /* decode, GQA */
    "B=1 Hq=6 Hkv=1 Sq=37 Sk=100 D=64 causal=1", /* MQA, Sq < Sk */
    "B=1 Hq=2 Hkv=1 Sq=100 Sk=37 D=40 causal=1", /* rows that see nothing */
    "B=1 Hq=2 Hkv=2 Sq=130 Sk=130 D=16 window_left=20 window_right=5",
    "B=1 Hq=2 Hkv=1 Sq=97 Sk=200 D=40 causal=1 window_left=70",
    "B=1 Hq=2 Hkv=2 Sq=49 Sk=129 D=256",
    "B=2 Hq=4 Hkv=2 Sq=65 Sk=63 D=17 scale=0.3",
    "B=1 Hq=4 Hkv=2 Sq=70 Sk=133 D=40 causal=1 dropout=0.3 seed=123456789012 offset=77",
    "B=2 Hq=2 Hkv=1 Sq=5 Sk=300 D=256 dropout=0.5 seed=5 offset=8589934593",
    "B=1 Hq=2 Hkv=1 Sq=129 Sk=65 D=16 window_left=5 window_right=3 dropout=0.1",
};

static void kernel_passes_in_every_dtype(void **state) {
    (void)state;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int d = 0; d < 3; d++) {
            char text[256];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            const kk_case_result r = kk_test_run_cpu_case("attention_backward", text, NULL, 11 + s);
            assert_int_equal(r.status, KK_CASE_PASS);
        }
}

/* ---- wrong kernels ---- */

/* A plain f32-tensor kernel in double with one mistake switched on: with none
 * it must pass (so each failure below is its mistake's). */
static struct { int dk_no_scale, gqa_not_summed, no_dropout_mask, d_before_dropout; } bend;

static kk_status plain(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t B = p->i[KK__ATB_B], Hq = p->i[KK__ATB_HQ], Hkv = p->i[KK__ATB_HKV];
    const int64_t Sq = p->i[KK__ATB_SQ], Sk = p->i[KK__ATB_SK], D = p->i[KK__ATB_D];
    const int64_t G = Hq / Hkv;
    const double scale = p->f[KK__ATB_SCALE] > 0.0 ? p->f[KK__ATB_SCALE] : 1.0 / sqrt((double)D);
    const double drop = bend.no_dropout_mask ? 0.0 : p->f[KK__ATB_DROPOUT];
    const float *q = t[0]->data, *k = t[1]->data, *v = t[2]->data, *o = t[3]->data;
    const float *dO = t[4]->data, *lse = t[5]->data;
    float *dq = t[6]->data, *dk = t[7]->data, *dv = t[8]->data;
    memset(dk, 0, (size_t)(B * Hkv * Sk * D) * sizeof *dk);
    memset(dv, 0, (size_t)(B * Hkv * Sk * D) * sizeof *dv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t bh = b * Hq + h, kv = (b * Hkv + h / G) * Sk * D;
            if (bend.gqa_not_summed) /* each head overwrites its group's dk, dv */
                for (int64_t x = 0; x < Sk * D; x++) dk[kv + x] = dv[kv + x] = 0.0f;
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t r = (bh * Sq + i) * D;
                int64_t lo, hi;
                kk__attention_key_range(p, i, &lo, &hi);
                double di = 0.0;
                for (int64_t d = 0; d < D; d++) di += (double)dO[r + d] * o[r + d];
                if (bend.d_before_dropout) { /* sum_j P_ij (dO . v_j): O without the mask */
                    di = 0.0;
                    for (int64_t j = lo; j <= hi; j++) {
                        double qk = 0.0, dp = 0.0;
                        for (int64_t d = 0; d < D; d++) {
                            qk += (double)q[r + d] * k[kv + j * D + d];
                            dp += (double)dO[r + d] * v[kv + j * D + d];
                        }
                        di += exp(scale * qk - lse[bh * Sq + i]) * dp;
                    }
                }
                for (int64_t d = 0; d < D; d++) dq[r + d] = 0.0f;
                for (int64_t j = lo; j <= hi; j++) {
                    double qk = 0.0, dp = 0.0;
                    for (int64_t d = 0; d < D; d++) {
                        qk += (double)q[r + d] * k[kv + j * D + d];
                        dp += (double)dO[r + d] * v[kv + j * D + d];
                    }
                    const double P = exp(scale * qk - lse[bh * Sq + i]);
                    double f = 1.0;
                    if (drop > 0.0)
                        f = kk__dropout_keep((uint64_t)p->i[KK__ATB_SEED],
                                             (uint64_t)p->i[KK__ATB_OFFSET], (uint32_t)bh,
                                             (uint32_t)i, (uint32_t)j, kk__dropout_threshold(drop))
                                ? 1.0 / (1.0 - drop)
                                : 0.0;
                    const double ds = P * (dp * f - di);
                    const double ks = bend.dk_no_scale ? 1.0 : scale;
                    for (int64_t d = 0; d < D; d++) {
                        dv[kv + j * D + d] += (float)(P * f * dO[r + d]);
                        dq[r + d] += (float)(scale * ds * k[kv + j * D + d]);
                        dk[kv + j * D + d] += (float)(ks * ds * q[r + d]);
                    }
                }
            }
        }
    return KK_OK;
}

static kk_status next_offset(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__ATB_OFFSET] += 1;
    return kk__attention_backward_cpu(&q, t, s);
}

static kk_case_status run_bent(const char *text) {
    const kk_case_status st = kk_test_run_cpu_case("attention_backward", text, plain, 5).status;
    memset(&bend, 0, sizeof bend);
    return st;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    const char *gqa = "B=1 Hq=4 Hkv=2 Sq=40 Sk=70 D=32 causal=1 dtype=f32";
    const char *drop = "B=1 Hq=4 Hkv=2 Sq=40 Sk=70 D=32 dropout=0.2 seed=99 offset=1000 dtype=f32";
    assert_int_equal(run_bent(gqa), KK_CASE_PASS);
    assert_int_equal(run_bent(drop), KK_CASE_PASS);
    bend.dk_no_scale = 1;
    assert_int_equal(run_bent(gqa), KK_CASE_FAIL);
    bend.gqa_not_summed = 1;
    assert_int_equal(run_bent(gqa), KK_CASE_FAIL);
    bend.no_dropout_mask = 1;
    assert_int_equal(run_bent(drop), KK_CASE_FAIL);
    bend.d_before_dropout = 1;
    assert_int_equal(run_bent(drop), KK_CASE_FAIL);
    /* a scale near 1 still shows */
    bend.dk_no_scale = 1;
    assert_int_equal(run_bent("B=1 Hq=4 Hkv=2 Sq=40 Sk=70 D=32 causal=1 dtype=f32 scale=0.8"),
                     KK_CASE_FAIL);
    /* the real kernel with another dropout offset, also in bf16 (loose rows) */
    assert_int_equal(kk_test_run_cpu_case("attention_backward", drop, next_offset, 5).status,
                     KK_CASE_FAIL);
    assert_int_equal(kk_test_run_cpu_case("attention_backward",
                                          "B=1 Hq=4 Hkv=2 Sq=40 Sk=70 D=32 dropout=0.2 seed=99 "
                                          "offset=1000 dtype=bf16",
                                          next_offset, 5)
                         .status,
                     KK_CASE_FAIL);
    assert_int_equal(kk_test_run_cpu_case("attention_backward", drop, NULL, 5).status,
                     KK_CASE_PASS);
}

/* The typed entry point on the harness's own inputs: the same bits as the slot. */
static void entry_point_matches_slot(void **state) {
    (void)state;
    const kk_op_params p =
        parse("B=1 Hq=4 Hkv=2 Sq=33 Sk=47 D=32 causal=1 window_left=9 dropout=0.25 seed=7 "
              "offset=3 scale=0.2 dtype=bf16");
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, d, &n));
    assert_int_equal(n, 9);
    kk_tensor *t[9], *u[3];
    void *bufs[9];
    for (int x = 0; x < n; x++) {
        kk_assert_ok(kk_tensor_create("cpu", d[x].dtype, d[x].ndim, d[x].shape, &t[x]));
        bufs[x] = t[x]->data;
    }
    for (int x = 0; x < 3; x++)
        kk_assert_ok(kk_tensor_create("cpu", d[6 + x].dtype, d[6 + x].ndim, d[6 + x].shape, &u[x]));
    kk_assert_ok(kk_case_fill_inputs(&p, 9, KK_DIST_FULL, bufs));
    kk_assert_ok(kk__attention_backward_cpu(&p, t, NULL));
    const kk_attention_options opt = {.causal = 1,
                                      .window_left = 9,
                                      .window_right = -1,
                                      .scale = 0.2,
                                      .dropout = 0.25,
                                      .seed = 7,
                                      .offset = 3};
    kk_assert_ok(
        kk_attention_backward(t[0], t[1], t[2], t[3], t[4], t[5], u[0], u[1], u[2], &opt, NULL));
    for (int x = 0; x < 3; x++)
        assert_memory_equal(t[6 + x]->data, u[x]->data, (size_t)d[6 + x].numel * 2);
    /* wrong shapes are named */
    assert_int_equal(
        kk_attention_backward(t[0], t[1], t[2], t[3], t[4], t[5], u[1], u[1], u[2], &opt, NULL),
        KK_ERR_INVALID_ARGUMENT);
    for (int x = 0; x < n; x++) kk_tensor_destroy(t[x]);
    for (int x = 0; x < 3; x++) kk_tensor_destroy(u[x]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_matches_finite_differences),
        cmocka_unit_test(kernel_passes_in_every_dtype),
        cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(entry_point_matches_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

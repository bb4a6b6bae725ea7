/* labels: unit cpu */
/* attention_varlen_backward (the backward of packed variable-length
 * attention): the float64 reference against central finite differences of
 * the varlen forward's float64 reference (empty sequences, causal with
 * Sq != Sk per sequence, windows, GQA, dropout); the CPU kernel through the
 * harness's runner in every dtype, on the harness's [1,H,total,D] tensors and
 * through kk_attention_varlen_backward on FlashAttention's [total,H,D] layout;
 * random cases; equal lengths give the bits of kk_attention_backward with
 * B = nseq; exact zeros where no key or no row is seen; wrong kernels the
 * checker must fail (cu_seqlens_k's offsets ignored, causal aligned top-left,
 * the global row or one mask for every sequence in the dropout mask, another
 * dropout offset); bad arguments named in the error. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "core/rng.h"
#include "cpu/cpu_kernels.h"
#include "kernelkit/cases.h"
#include "opdef/attention_varlen_backward.h"

static const char op_name[] = "attention_varlen_backward";

static kk_op_params parse(const char *text) {
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(kk_test_op(op_name), text, &p));
    return p;
}

/* ---- the reference against finite differences ---- */

typedef struct problem {
    kk_op_params p, fwd;
    int64_t nq, nk, nlse, ncu;
    double *q, *k, *v, *dO, *o, *lse, *cu, *dq, *dk, *dv, *o2, *lse2;
} problem;

/* L = sum dO * O(q, k, v) by the varlen forward's reference. */
static double loss(void *ctx) {
    problem *pb = ctx;
    kk_assert_ok(kk__attention_varlen_reference(
        &pb->fwd, (const double *const[]){pb->q, pb->k, pb->v, pb->cu, pb->cu + pb->ncu},
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
    kk__attention_varlen_backward_forward_params(&pb.p, &pb.fwd);
    kk__varlen_dims d;
    kk__attention_varlen_dims(&pb.p, &d);
    const int64_t Hq = pb.p.i[KK__AVB_HQ], Hkv = pb.p.i[KK__AVB_HKV], D = pb.p.i[KK__AVB_D];
    pb.nq = Hq * d.total_q * D, pb.nk = Hkv * d.total_k * D, pb.nlse = Hq * d.total_q;
    pb.ncu = d.nseq + 1;
    double *m = calloc((size_t)(6 * pb.nq + 4 * pb.nk + 2 * pb.nlse + 2 * pb.ncu), sizeof *m);
    assert_non_null(m);
    pb.q = m, pb.dO = pb.q + pb.nq, pb.o = pb.dO + pb.nq, pb.dq = pb.o + pb.nq;
    pb.o2 = pb.dq + pb.nq, pb.k = pb.o2 + pb.nq, pb.v = pb.k + pb.nk, pb.dk = pb.v + pb.nk;
    pb.dv = pb.dk + pb.nk, pb.lse = pb.dv + pb.nk, pb.lse2 = pb.lse + pb.nlse;
    pb.cu = pb.lse2 + pb.nlse;
    int32_t cu[2][KK_OP_LIST_MAX + 1];
    kk__attention_varlen_write_cu(&pb.p, 0, cu[0], pb.ncu);
    kk__attention_varlen_write_cu(&pb.p, 1, cu[1], pb.ncu);
    for (int64_t s = 0; s < pb.ncu; s++) pb.cu[s] = cu[0][s], pb.cu[pb.ncu + s] = cu[1][s];
    kk__rng r;
    kk__rng_seed(&r, 42);
    for (int64_t e = 0; e < pb.nq; e++) pb.q[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    for (int64_t e = 0; e < pb.nq; e++) pb.dO[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    for (int64_t e = 0; e < pb.nk; e++) pb.k[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    for (int64_t e = 0; e < pb.nk; e++) pb.v[e] = 2.0 * kk__rng_uniform(&r) - 1.0;
    loss(&pb);
    memcpy(pb.o, pb.o2, (size_t)pb.nq * sizeof *pb.o);
    memcpy(pb.lse, pb.lse2, (size_t)pb.nlse * sizeof *pb.lse);
    kk_assert_ok(kk__op_attention_varlen_backward.reference(
        &pb.p,
        (const double *const[]){pb.q, pb.k, pb.v, pb.o, pb.dO, pb.lse, pb.cu, pb.cu + pb.ncu},
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
    reference_matches_finite_differences_of(
        "Hq=2 Hkv=1 D=16 causal=1 seqlens_q=3:0:4:2 seqlens_k=5:2:0:2 dtype=f32");
    reference_matches_finite_differences_of(
        "Hq=4 Hkv=2 D=16 causal=1 seqlens_q=5:2 seqlens_k=3:6 dtype=f32");
    reference_matches_finite_differences_of("Hq=3 Hkv=1 D=16 window_left=2 window_right=1 "
                                            "scale=0.7 seqlens_q=6:1 seqlens_k=8:4 dtype=f32");
    reference_matches_finite_differences_of("Hq=2 Hkv=2 D=17 causal=1 dropout=0.3 "
                                            "seed=12345678901 offset=77 seqlens_q=4:5:3 "
                                            "seqlens_k=6:5:7 dtype=f32");
}

/* ---- the CPU kernel through the harness ---- */

static const char *const shapes[] = {
    "Hq=1 Hkv=1 D=16 seqlens_q=1 seqlens_k=1",
    "Hq=2 Hkv=1 D=64 causal=1 seqlens_q=5:0:17 seqlens_k=9:4:17",
    /* empty sequences both ways; queries without keys, keys without queries */
    "Hq=4 Hkv=2 D=64 causal=1 seqlens_q=0:130:1:64:0 seqlens_k=3:200:1:0:0",
    /* Sq > Sk: rows that see nothing under the bottom-right mask */
    "Hq=2 Hkv=1 D=40 causal=1 seqlens_q=100:7:49 seqlens_k=30:7:48",
    "Hq=6 Hkv=1 D=32 window_left=20 window_right=5 seqlens_q=130:49:1 seqlens_k=130:97:300",
    "Hq=2 Hkv=2 D=256 max_seqlen_q=200 max_seqlen_k=300 seqlens_q=49:3 seqlens_k=129:2",
    "Hq=4 Hkv=2 D=17 scale=0.3 seqlens_q=65:1:48 seqlens_k=63:1:49",
    ("Hq=4 Hkv=2 D=40 causal=1 dropout=0.3 seed=123456789012 offset=77 "
     "seqlens_q=70:0:33 seqlens_k=133:5:33"),
    "nseq=5 total_q=97 total_k=203 Hq=2 Hkv=1 D=64 causal=1 seqlens_q=none seqlens_k=none",
    "Hq=4 Hkv=1 D=72 causal=1 seqlens_q=1:50:3 seqlens_k=301:77:40",
    ("Hq=2 Hkv=1 D=80 window_left=30 window_right=0 dropout=0.2 seed=5 offset=8589934593 "
     "seqlens_q=33:64:7 seqlens_k=71:65:9"),
};

static void kernel_passes_in_every_dtype(void **state) {
    (void)state;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int d = 0; d < 3; d++) {
            char text[512];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            assert_int_equal(kk_test_run_cpu_case(op_name, text, NULL, 11 + s).status,
                             KK_CASE_PASS);
        }
}

/* The kernel through kk_attention_varlen_backward on FlashAttention's layout:
 * every [1,H,total,D] tensor of the case copied to [total,H,D] (so the CPU
 * kernel reads strided views), lse [1,Hq,total_q] passed as [Hq,total_q],
 * the gradients copied back. */
static kk_tensor *flash_layout(const kk_tensor *t) {
    kk_tensor *f = NULL;
    const int64_t H = t->shape[1], T = t->shape[2], D = t->shape[3];
    kk_assert_ok(kk_tensor_create("cpu", t->dtype, 3, (int64_t[]){T, H, D}, &f));
    const size_t row = kk_dtype_bytes(t->dtype, (size_t)D);
    for (int64_t h = 0; h < H; h++)
        for (int64_t r = 0; r < T; r++)
            memcpy((char *)f->data + (size_t)(r * H + h) * row,
                   (const char *)t->data + (size_t)(h * T + r) * row, row);
    return f;
}

static void from_flash_layout(const kk_tensor *f, kk_tensor *t) {
    const int64_t H = t->shape[1], T = t->shape[2], D = t->shape[3];
    const size_t row = kk_dtype_bytes(t->dtype, (size_t)D);
    for (int64_t h = 0; h < H; h++)
        for (int64_t r = 0; r < T; r++)
            memcpy((char *)t->data + (size_t)(h * T + r) * row,
                   (const char *)f->data + (size_t)(r * H + h) * row, row);
}

static kk_status via_flash_layout(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    kk_tensor *f[KK__AVB_T_COUNT] = {0}, *lse = NULL;
    for (int k = 0; k < KK__AVB_T_COUNT; k++)
        if (t[k]->ndim == 4) f[k] = flash_layout(t[k]);
    const kk_tensor *l = t[KK__AVB_T_LSE];
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, (int64_t[]){l->shape[1], l->shape[2]}, NULL,
                                l->data, &lse));
    const kk_attention_options opt = {
        .causal = (int)p->i[KK__AVB_CAUSAL],
        .window_left = p->i[KK__AVB_WL],
        .window_right = p->i[KK__AVB_WR],
        .scale = p->f[KK__AVB_SCALE],
        .dropout = p->f[KK__AVB_DROPOUT],
        .seed = (uint64_t)p->i[KK__AVB_SEED],
        .offset = (uint64_t)p->i[KK__AVB_OFFSET],
    };
    const kk_status st = kk_attention_varlen_backward(
        f[KK__AVB_T_Q], f[KK__AVB_T_K], f[KK__AVB_T_V], f[KK__AVB_T_O], f[KK__AVB_T_DO], lse,
        t[KK__AVB_T_CUQ], t[KK__AVB_T_CUK], d.max_q, d.max_k, f[KK__AVB_T_DQ], f[KK__AVB_T_DK],
        f[KK__AVB_T_DV], &opt, s);
    for (int k = KK__AVB_T_DQ; k <= KK__AVB_T_DV; k++) from_flash_layout(f[k], t[k]);
    for (int k = 0; k < KK__AVB_T_COUNT; k++) kk_tensor_destroy(f[k]);
    kk_tensor_destroy(lse);
    return st;
}

static void kernel_passes_on_flash_layout(void **state) {
    (void)state;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    for (size_t s = 1; s < sizeof shapes / sizeof *shapes; s += 3)
        for (int d = 0; d < 3; d++) {
            char text[512];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            assert_int_equal(kk_test_run_cpu_case(op_name, text, via_flash_layout, 11 + s).status,
                             KK_CASE_PASS);
        }
}

/* Random cases (kk_case_fuzz draws the lengths, zeros included). */
static void fuzz_cases_pass(void **state) {
    (void)state;
    kk_test_varlen_fuzz_passes(op_name, 40);
}

/* ---- the packed batch is its sequences ---- */

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static kk_tensor *make(kk_dtype dt, int ndim, const int64_t *shape) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", dt, ndim, shape, &t));
    return t;
}

/* Rows of [B,H,S,D] (b, h, i) to and from [B*S,H,D] (b*S + i, h). */
static void to_packed(const kk_tensor *t, kk_tensor *p) {
    const int64_t B = t->shape[0], H = t->shape[1], S = t->shape[2];
    const size_t row = kk_dtype_bytes(t->dtype, (size_t)t->shape[3]);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++)
                memcpy((char *)p->data + (size_t)((b * S + i) * H + h) * row,
                       (const char *)t->data + (size_t)((b * H + h) * S + i) * row, row);
}

/* Equal lengths: the packed batch (FlashAttention's layout, lse [Hq,total_q])
 * gives kk_attention_backward's bits with B = nseq, causal with Sq != Sk, GQA
 * and dropout included (the sequence is the mask's batch). */
static void equal_lengths_are_a_batch_in(kk_dtype dt) {
    enum { N = 3, HQ = 4, HKV = 2, S = 29, SK = 41, D = 40 };
    const int64_t qs[4] = {N, HQ, S, D}, ks[4] = {N, HKV, SK, D};
    kk_tensor *q = make(dt, 4, qs), *k = make(dt, 4, ks), *v = make(dt, 4, ks),
              *o = make(dt, 4, qs);
    kk_tensor *dO = make(dt, 4, qs), *lse = make(KK_DTYPE_F32, 3, (int64_t[]){N, HQ, S});
    kk_tensor *g[3] = {make(dt, 4, qs), make(dt, 4, ks), make(dt, 4, ks)};
    uint64_t seed = 3;
    kk_tensor *inputs[] = {q, k, v, dO};
    for (int t = 0; t < 4; t++) {
        const size_t n = (size_t)kk_tensor_numel(inputs[t]);
        float *f = malloc(n * sizeof *f);
        for (size_t x = 0; x < n; x++) f[x] = frand(&seed);
        kk_assert_ok(kk_convert_host(f, KK_DTYPE_F32, inputs[t]->data, dt, n));
        free(f);
    }
    kk_attention_options opt = KK_ATTENTION_OPTIONS_INIT;
    opt.causal = 1;
    opt.dropout = 0.4;
    opt.seed = 11;
    opt.offset = (1ull << 32) + 5;
    kk_assert_ok(kk_attention(q, k, v, o, lse, &opt, NULL));
    kk_assert_ok(kk_attention_backward(q, k, v, o, dO, lse, g[0], g[1], g[2], &opt, NULL));
    /* the same batch packed */
    const int64_t pq[3] = {N * S, HQ, D}, pk[3] = {N * SK, HKV, D};
    kk_tensor *P[6] = {make(dt, 3, pq), make(dt, 3, pk),
                       make(dt, 3, pk), make(dt, 3, pq),
                       make(dt, 3, pq), make(KK_DTYPE_F32, 2, (int64_t[]){HQ, N * S})};
    kk_tensor *G[3] = {make(dt, 3, pq), make(dt, 3, pk), make(dt, 3, pk)};
    const kk_tensor *from[5] = {q, k, v, o, dO};
    for (int t = 0; t < 5; t++) to_packed(from[t], P[t]);
    for (int b = 0; b < N; b++)
        for (int h = 0; h < HQ; h++)
            memcpy((float *)P[5]->data + (size_t)h * N * S + b * S,
                   (const float *)lse->data + (size_t)(b * HQ + h) * S, sizeof(float) * S);
    int32_t cq[N + 1], ck[N + 1];
    for (int i = 0; i <= N; i++) cq[i] = i * S, ck[i] = i * SK;
    kk_tensor *tcq, *tck;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_INT32, 1, (int64_t[]){N + 1}, NULL, cq, &tcq));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_INT32, 1, (int64_t[]){N + 1}, NULL, ck, &tck));
    kk_assert_ok(kk_attention_varlen_backward(P[0], P[1], P[2], P[3], P[4], P[5], tcq, tck, S, SK,
                                              G[0], G[1], G[2], &opt, NULL));
    for (int t = 0; t < 3; t++) {
        kk_tensor *want = make(dt, 3, t ? pk : pq);
        to_packed(g[t], want);
        assert_memory_equal(want->data, G[t]->data,
                            kk_dtype_bytes(dt, (size_t)kk_tensor_numel(want)));
        kk_tensor_destroy(want);
    }
    kk_tensor *all[] = {q,    k,    v,    o,    dO,   lse,  g[0], g[1], g[2], P[0],
                        P[1], P[2], P[3], P[4], P[5], G[0], G[1], G[2], tcq,  tck};
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++) kk_tensor_destroy(all[t]);
}

static void equal_lengths_are_a_batch(void **state) {
    (void)state;
    equal_lengths_are_a_batch_in(KK_DTYPE_F32);
    equal_lengths_are_a_batch_in(KK_DTYPE_BF16);
}

/* Rows that see no key get dq = 0 and keys no row sees dk = dv = 0, exactly:
 * sequence 1 has queries and no keys, sequence 2 keys and no queries, and in
 * sequence 0 (window_left = 2, 4 rows against 12 keys) keys 0..5 are seen by
 * no row. */
static void unseen_rows_and_keys_are_zero(void **state) {
    (void)state;
    const kk_op_params p = parse("Hq=2 Hkv=1 D=16 causal=1 window_left=2 seqlens_q=4:3:0 "
                                 "seqlens_k=12:0:5 dtype=f32");
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, d, &n));
    assert_int_equal(n, KK__AVB_T_COUNT);
    kk_tensor *t[KK__AVB_T_COUNT];
    void *bufs[KK__AVB_T_COUNT];
    for (int x = 0; x < n; x++) {
        t[x] = make(d[x].dtype, d[x].ndim, d[x].shape);
        bufs[x] = t[x]->data;
    }
    kk_assert_ok(kk_case_fill_inputs(&p, 9, KK_DIST_FULL, bufs));
    for (int x = KK__AVB_T_DQ; x < n; x++) /* poison */
        memset(t[x]->data, 0xFF, (size_t)d[x].numel * sizeof(float));
    kk_assert_ok(kk_op_run(&p, t, NULL));
    const float *dq = t[KK__AVB_T_DQ]->data, *dk = t[KK__AVB_T_DK]->data,
                *dv = t[KK__AVB_T_DV]->data;
    enum { TQ = 7, TK = 17, D = 16 };
    for (int h = 0; h < 2; h++)
        for (int i = 4; i < 7; i++) /* sequence 1: no keys */
            for (int e = 0; e < D; e++) assert_true(dq[(h * TQ + i) * D + e] == 0.0f);
    double seen = 0.0;
    for (int j = 0; j < TK; j++)
        for (int e = 0; e < D; e++) {
            const int unseen = j < 6 || j >= 12; /* before the window, or sequence 2 */
            if (unseen) assert_true(dk[j * D + e] == 0.0f && dv[j * D + e] == 0.0f);
            if (!unseen) seen += fabs(dk[j * D + e]) + fabs(dv[j * D + e]);
        }
    assert_true(seen > 0.0); /* the others are gradients */
    for (int x = 0; x < n; x++) kk_tensor_destroy(t[x]);
}

/* ---- wrong kernels ---- */

/* A plain f32-tensor kernel in double with one mistake switched on: with none
 * it must pass (so each failure below is its mistake's). */
static struct {
    int keys_from_zero; /* every sequence's keys read from packed row 0 */
    int top_left;       /* causal j <= i in each sequence, not j <= i + Sk - Sq */
    int global_row;     /* dropout's row counted in the packed batch */
    int one_mask;       /* dropout's batch 0 for every sequence (bh = h) */
} bend;

static kk_status plain(const kk_op_params *p, kk_tensor *const *t, kk_stream st) {
    (void)st;
    kk__varlen_dims dims;
    kk__attention_varlen_dims(p, &dims);
    const int64_t Hq = p->i[KK__AVB_HQ], Hkv = p->i[KK__AVB_HKV], D = p->i[KK__AVB_D];
    const int64_t G = Hq / Hkv, TQ = dims.total_q, TK = dims.total_k;
    const double scale = p->f[KK__AVB_SCALE] > 0.0 ? p->f[KK__AVB_SCALE] : 1.0 / sqrt((double)D);
    const double drop = p->f[KK__AVB_DROPOUT];
    const float *q = t[KK__AVB_T_Q]->data, *k = t[KK__AVB_T_K]->data, *v = t[KK__AVB_T_V]->data;
    const float *o = t[KK__AVB_T_O]->data, *dO = t[KK__AVB_T_DO]->data;
    const float *lse = t[KK__AVB_T_LSE]->data;
    const int32_t *cq = t[KK__AVB_T_CUQ]->data, *ck = t[KK__AVB_T_CUK]->data;
    float *dq = t[KK__AVB_T_DQ]->data, *dk = t[KK__AVB_T_DK]->data, *dv = t[KK__AVB_T_DV]->data;
    memset(dq, 0, (size_t)(Hq * TQ * D) * sizeof *dq);
    memset(dk, 0, (size_t)(Hkv * TK * D) * sizeof *dk);
    memset(dv, 0, (size_t)(Hkv * TK * D) * sizeof *dv);
    for (int64_t s = 0; s < dims.nseq; s++) {
        const int64_t q0 = cq[s], lq = cq[s + 1] - q0, k0 = ck[s], lk = ck[s + 1] - k0;
        const int64_t kr0 = bend.keys_from_zero ? 0 : k0;
        kk_op_params a;
        kk__attention_varlen_backward_seq_params(p, lq, lk, &a);
        if (bend.top_left && a.i[KK__ATB_CAUSAL]) {
            a.i[KK__ATB_CAUSAL] = 0;
            a.i[KK__ATB_WR] = lq - lk; /* j <= i + Sk - Sq + (Sq - Sk) */
        }
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t bh = (bend.one_mask ? 0 : s) * Hq + h, kvh = h / G;
            for (int64_t i = 0; i < lq; i++) {
                const int64_t r = (h * TQ + q0 + i) * D;
                int64_t lo, hi;
                kk__attention_key_range(&a, i, &lo, &hi);
                double di = 0.0;
                for (int64_t e = 0; e < D; e++) di += (double)dO[r + e] * o[r + e];
                for (int64_t j = lo; j <= hi; j++) {
                    const int64_t kr = (kvh * TK + kr0 + j) * D, kw = (kvh * TK + k0 + j) * D;
                    double qk = 0.0, dp = 0.0;
                    for (int64_t e = 0; e < D; e++) {
                        qk += (double)q[r + e] * k[kr + e];
                        dp += (double)dO[r + e] * v[kr + e];
                    }
                    const double P = exp(scale * qk - lse[h * TQ + q0 + i]);
                    double f = 1.0;
                    if (drop > 0.0)
                        f = kk__dropout_keep((uint64_t)p->i[KK__AVB_SEED],
                                             (uint64_t)p->i[KK__AVB_OFFSET], (uint32_t)bh,
                                             (uint32_t)(bend.global_row ? q0 + i : i), (uint32_t)j,
                                             kk__dropout_threshold(drop))
                                ? 1.0 / (1.0 - drop)
                                : 0.0;
                    const double ds = P * (dp * f - di);
                    for (int64_t e = 0; e < D; e++) {
                        dv[kw + e] += (float)(P * f * dO[r + e]);
                        dq[r + e] += (float)(scale * ds * k[kr + e]);
                        dk[kw + e] += (float)(scale * ds * q[r + e]);
                    }
                }
            }
        }
    }
    return KK_OK;
}

static kk_status next_offset(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    q.i[KK__AVB_OFFSET] += 1;
    return kk__attention_varlen_backward_cpu(&q, t, s);
}

static kk_case_status run_bent(const char *text) {
    const kk_case_status st = kk_test_run_cpu_case(op_name, text, plain, 5).status;
    memset(&bend, 0, sizeof bend);
    return st;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    /* Sq < Sk in every sequence with rows (top-left and bottom-right differ),
     * a sequence without rows first (so the others' keys start past row 0) */
    const char *causal = "Hq=4 Hkv=2 D=32 causal=1 seqlens_q=0:20:9:30 seqlens_k=7:35:21:50 "
                         "dtype=f32";
    const char *drop = "Hq=2 Hkv=1 D=32 dropout=0.2 seed=99 offset=1000 seqlens_q=20:9:30 "
                       "seqlens_k=35:21:50 dtype=f32";
    assert_int_equal(run_bent(causal), KK_CASE_PASS);
    assert_int_equal(run_bent(drop), KK_CASE_PASS);
    bend.keys_from_zero = 1;
    assert_int_equal(run_bent(causal), KK_CASE_FAIL);
    bend.top_left = 1;
    assert_int_equal(run_bent(causal), KK_CASE_FAIL);
    bend.global_row = 1;
    assert_int_equal(run_bent(drop), KK_CASE_FAIL);
    bend.one_mask = 1;
    assert_int_equal(run_bent(drop), KK_CASE_FAIL);
    /* the real kernel with another dropout offset, also in bf16 (loose rows) */
    assert_int_equal(kk_test_run_cpu_case(op_name, drop, next_offset, 5).status, KK_CASE_FAIL);
    char bf16[256];
    snprintf(bf16, sizeof bf16, "%.*s dtype=bf16", (int)(strlen(drop) - strlen(" dtype=f32")),
             drop);
    assert_int_equal(kk_test_run_cpu_case(op_name, bf16, next_offset, 5).status, KK_CASE_FAIL);
    assert_int_equal(kk_test_run_cpu_case(op_name, bf16, NULL, 5).status, KK_CASE_PASS);
}

/* ---- bad arguments ---- */

static void expect_error(kk_status st, const char *a, const char *b) {
    assert_int_equal(st, KK_ERR_INVALID_ARGUMENT);
    print_message("    %s\n", kk_last_error_message());
    kk_assert_contains(kk_last_error_message(), "attention_varlen_backward");
    kk_assert_contains(kk_last_error_message(), a);
    if (b) kk_assert_contains(kk_last_error_message(), b);
}

static kk_tensor *wrap(kk_dtype dt, int ndim, const int64_t *shape, void *data) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", dt, ndim, shape, NULL, data, &t));
    return t;
}

static void bad_arguments_are_named(void **state) {
    (void)state;
    enum { TQ = 10, TK = 12, HQ = 4, HKV = 2, D = 16 };
    static float q[TQ * HQ * D], k[TK * HKV * D], v[TK * HKV * D], o[TQ * HQ * D];
    static float dO[TQ * HQ * D], dq[TQ * HQ * D], dk[TK * HKV * D], dv[TK * HKV * D];
    static float lse[HQ * TQ], f[4];
    kk_tensor *tq = wrap(KK_DTYPE_F32, 3, (int64_t[]){TQ, HQ, D}, q);
    kk_tensor *tk = wrap(KK_DTYPE_F32, 3, (int64_t[]){TK, HKV, D}, k);
    kk_tensor *tv = wrap(KK_DTYPE_F32, 3, (int64_t[]){TK, HKV, D}, v);
    kk_tensor *to = wrap(KK_DTYPE_F32, 3, (int64_t[]){TQ, HQ, D}, o);
    kk_tensor *tdo = wrap(KK_DTYPE_F32, 3, (int64_t[]){TQ, HQ, D}, dO);
    kk_tensor *tdq = wrap(KK_DTYPE_F32, 3, (int64_t[]){TQ, HQ, D}, dq);
    kk_tensor *tdk = wrap(KK_DTYPE_F32, 3, (int64_t[]){TK, HKV, D}, dk);
    kk_tensor *tdv = wrap(KK_DTYPE_F32, 3, (int64_t[]){TK, HKV, D}, dv);
    kk_tensor *tl = wrap(KK_DTYPE_F32, 2, (int64_t[]){HQ, TQ}, lse);
    int cq[4] = {0, 3, 3, TQ}, ck[4] = {0, 5, 6, TK}, c3[3] = {0, 5, TK};
    kk_tensor *tcq = wrap(KK_DTYPE_INT32, 1, (int64_t[]){4}, cq);
    kk_tensor *tck = wrap(KK_DTYPE_INT32, 1, (int64_t[]){4}, ck);
    kk_tensor *tc3 = wrap(KK_DTYPE_INT32, 1, (int64_t[]){3}, c3);
    kk_tensor *tf = wrap(KK_DTYPE_F32, 1, (int64_t[]){4}, f);
    kk_tensor *t2 = wrap(KK_DTYPE_F32, 2, (int64_t[]){TQ, HQ * D}, q);
    kk_tensor *l1 = wrap(KK_DTYPE_F32, 1, (int64_t[]){HQ * TQ}, lse);
    kk_tensor *dk_hq = wrap(KK_DTYPE_F32, 3, (int64_t[]){TK / 2, HQ, D}, dk);
    kk_tensor *dq16 = wrap(KK_DTYPE_F16, 3, (int64_t[]){TQ, HQ, D}, dq);
    kk_tensor *k3 = wrap(KK_DTYPE_F32, 3, (int64_t[]){8, 3, D}, k);
    for (int x = 0; x < HQ * TQ; x++) lse[x] = 1.0f;
    kk_attention_options opt = KK_ATTENTION_OPTIONS_INIT;
#define RUN(Q, K, V, L, CQ, CK, MQ, MK, DQ, DK)                                                    \
    kk_attention_varlen_backward(Q, K, V, to, tdo, L, CQ, CK, MQ, MK, DQ, DK, tdv, &opt, NULL)
    kk_assert_ok(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk));
    /* the tensors */
    expect_error(RUN(tq, tk, tv, NULL, tcq, tck, 7, 6, tdq, tdk), "lse", "a tensor");
    expect_error(RUN(tq, tk, tv, l1, tcq, tck, 7, 6, tdq, tdk), "lse", "2 dimensions");
    expect_error(RUN(t2, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk), "q", "3 dimensions");
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, NULL, tdk), "dq", "a tensor");
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, dk_hq), "dk", "shape");
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, dq16, tdk), "dq", "dtype f32");
    expect_error(RUN(tq, k3, tv, tl, tcq, tck, 7, 6, tdq, tdk), "Hkv", "divisor");
    /* the offsets */
    expect_error(RUN(tq, tk, tv, tl, tf, tck, 7, 6, tdq, tdk), "cu_seqlens_q", "int32");
    expect_error(RUN(tq, tk, tv, tl, tcq, tc3, 7, 6, tdq, tdk), "cu_seqlens_k", "shape [4]");
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 0, 6, tdq, tdk), "max_seqlen_q", "1..1048576");
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 5, tdq, tdk), "cu_seqlens_k[3] = 12",
                 "raise max_seqlen_k");
    cq[2] = 2;
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 8, 6, tdq, tdk), "cu_seqlens_q[2] = 2",
                 "at least cu_seqlens_q[1] = 3");
    cq[2] = 3;
    ck[3] = TK - 1;
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk), "cu_seqlens_k[3] = 11",
                 "the total 12");
    ck[3] = TK;
    cq[0] = 1;
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk), "cu_seqlens_q[0] = 1",
                 "expected 0");
    cq[0] = 0;
    /* the options */
    opt.dropout = 1.5;
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk), "opt->dropout", NULL);
    opt.dropout = 0.0;
    opt.seed = UINT64_MAX;
    expect_error(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk), "opt->seed", "2^63-1");
    opt.seed = 0;
    kk_assert_ok(RUN(tq, tk, tv, tl, tcq, tck, 7, 6, tdq, tdk));
#undef RUN
    kk_tensor *all[] = {tq,  tk,  tv,  to, tdo, tdq, tdk,   tdv,  tl,
                        tcq, tck, tc3, tf, t2,  l1,  dk_hq, dq16, k3};
    for (size_t x = 0; x < sizeof all / sizeof all[0]; x++) kk_tensor_destroy(all[x]);
}

/* The parameters' own rules, named (the forward's checks, this op's name). */
static void bad_params_are_named(void **state) {
    (void)state;
    const kk_op *op = kk_test_op(op_name);
    kk_op_params p;
    expect_error(kk_op_params_parse(op, "seqlens_q=5:3 seqlens_k=5", &p), "seqlens_k",
                 "as many lengths as seqlens_q (2)");
    expect_error(kk_op_params_parse(op, "seqlens_q=5:3 seqlens_k=5:1 total_q=9", &p), "total_q",
                 "0 or 8");
    expect_error(kk_op_params_parse(op, "Hq=4 Hkv=3", &p), "Hkv", "divisor");
    /* no lse flag: the backward always takes lse */
    assert_int_equal(kk_op_params_parse(op, "lse=1", &p), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "lse");
    /* FLOPs: 2.5 times the forward's of the same lengths */
    p = parse("Hq=2 Hkv=1 D=16 causal=1 seqlens_q=3:0:4 seqlens_k=5:2:0");
    kk_op_params fwd;
    kk__attention_varlen_backward_forward_params(&p, &fwd);
    assert_true(kk_op_flops(&p) == 2.5 * kk_op_flops(&fwd));
    assert_true(kk_op_flops(&fwd) == 4.0 * 2 * 16 * (3 + 4 + 5)); /* rows see 3, 4, 5 keys */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_matches_finite_differences),
        cmocka_unit_test(kernel_passes_in_every_dtype),
        cmocka_unit_test(kernel_passes_on_flash_layout),
        cmocka_unit_test(fuzz_cases_pass),
        cmocka_unit_test(equal_lengths_are_a_batch),
        cmocka_unit_test(unseen_rows_and_keys_are_zero),
        cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(bad_arguments_are_named),
        cmocka_unit_test(bad_params_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

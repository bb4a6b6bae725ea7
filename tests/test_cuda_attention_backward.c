/* labels: gpu */
/* attention_backward on CUDA against the float64 reference, on fresh random
 * inputs (the seed is printed; KK_TEST_SEED replays it): head dims 64 and 128
 * (and 16, 40, 96 on the padded kernels), odd lengths (1, 17, 100, 257),
 * causal, windows, GQA/MQA, a custom scale, dropout, bf16 and f16; the smoke
 * and correctness suites and fuzz cases (f32 and head dims the kernel does not
 * take must SKIP, and through kk_attention_backward they run on the CPU); the
 * dropout mask equal bit for bit to the forward CUDA kernel's and to the CPU
 * backward's; wrong kernels (dK without the scale, another dropout offset, the
 * causal mask dropped) FAIL. Exits 77 without a GPU. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/cases.h"
#include "kernelkit/ops.h"
#include "opdef/all_ops.h"

static uint64_t run_seed;
static const kk_op *backward, *forward;

static void expect(const kk_op *row, const char *text, uint64_t seed, kk_case_status want) {
    const kk_case_result r = kk_test_run_case_on("cuda:0", row, text, seed);
    if (r.status != want)
        fail_msg("%s (seed %llu): %s, expected %s (%s)", text, (unsigned long long)seed,
                 kk_case_status_name(r.status), kk_case_status_name(want), r.message);
}

static const char *const shapes[] = {
    "B=1 Hq=1 Hkv=1 Sq=1 Sk=1 D=64",
    "B=1 Hq=2 Hkv=2 Sq=17 Sk=17 D=64 causal=1",
    "B=2 Hq=4 Hkv=2 Sq=100 Sk=100 D=64",
    "B=1 Hq=4 Hkv=1 Sq=257 Sk=257 D=128 causal=1", /* MQA */
    "B=1 Hq=2 Hkv=1 Sq=257 Sk=100 D=128",
    "B=1 Hq=2 Hkv=2 Sq=100 Sk=257 D=64 causal=1",
    "B=1 Hq=2 Hkv=1 Sq=300 Sk=100 D=64 causal=1", /* 200 rows see no key */
    "B=1 Hq=2 Hkv=2 Sq=200 Sk=200 D=128 window_left=64 window_right=0",
    "B=1 Hq=2 Hkv=2 Sq=130 Sk=130 D=64 window_left=20 window_right=5",
    "B=1 Hq=4 Hkv=2 Sq=70 Sk=133 D=64 causal=1 dropout=0.3 seed=123456789012 offset=77",
    "B=1 Hq=2 Hkv=1 Sq=97 Sk=200 D=128 causal=1 window_left=70 dropout=0.1 scale=0.3",
    "B=2 Hq=8 Hkv=2 Sq=1 Sk=300 D=128 causal=1", /* decode */
    "B=1 Hq=2 Hkv=1 Sq=17 Sk=1 D=64",
    "B=1 Hq=2 Hkv=2 Sq=65 Sk=63 D=40 scale=0.3",
    "B=1 Hq=2 Hkv=1 Sq=129 Sk=65 D=16 window_left=5 window_right=3 dropout=0.1",
    "B=1 Hq=2 Hkv=2 Sq=257 Sk=257 D=96 causal=1 dropout=0.5 seed=5 offset=8589934593",
    "B=1 Hq=8 Hkv=8 Sq=512 Sk=512 D=128 causal=1",
};

static void shapes_pass(void **state) {
    (void)state;
    static const char *const dtypes[] = {"bf16", "f16"};
    uint64_t seed = run_seed;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int d = 0; d < 2; d++) {
            char text[256];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            expect(backward, text, seed++, KK_CASE_PASS);
        }
}

static int in_kernel(const kk_op_params *p) {
    const kk_dtype dt = (kk_dtype)kk_op_params_int(p, "dtype");
    const int64_t D = kk_op_params_int(p, "D");
    return (dt == KK_DTYPE_BF16 || dt == KK_DTYPE_F16) && D % 8 == 0 && D <= 128;
}

/* PASS when the kernel covers the case, SKIP saying why when it does not. */
static void expect_verdict(const kk_case *c, int *passed) {
    const kk_run_options on_gpu = {.device = "cuda:0", .check_memory = 1};
    kk_test_expect_verdict(c, &on_gpu, in_kernel(&c->params), passed);
}

static void suites_and_fuzz_pass(void **state) {
    (void)state;
    static const char *const names[] = {"smoke", "correctness"};
    int passed = 0, total = 0;
    for (int s = 0; s < 2; s++) {
        kk_suite suite;
        kk_assert_ok(kk_suite_load(names[s], run_seed, KK_DIST_FULL, &suite));
        for (int i = 0; i < suite.count; i++)
            if (suite.cases[i].params.op == backward) {
                expect_verdict(&suite.cases[i], &passed);
                total++;
            }
        kk_suite_free(&suite);
    }
    const int count = getenv("KK_TEST_QUICK") ? 30 : 200;
    for (int i = 0; i < count; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(backward, run_seed, i, KK_DIST_FULL, NULL, &c));
        expect_verdict(&c, &passed);
    }
    printf("suites and fuzz: %d of %d cases in the kernel passed (seed %llu)\n", passed,
           total + count, (unsigned long long)run_seed);
    assert_true(passed > count / 4);
}

/* The forward with V = the identity (Sk = D keys) gives o[i][j] = 0 exactly
 * where (i, j) is dropped; the backward with dO = the identity (Sq = D rows)
 * gives dv[j][i] = (P f)[i][j], 0 exactly there too. The CUDA forward, the
 * CUDA backward and the CPU backward must agree on every element. */
static void dropout_mask_matches_forward(void **state) {
    (void)state;
    enum { B = 2, H = 3, S = 64, D = 64, N = B * H * S * D };
    static const char drop[] = "B=2 Hq=3 Hkv=3 Sq=64 Sk=64 D=64 dtype=bf16 dropout=0.3 "
                               "seed=123456789012 offset=8589934669";
    char text[200];
    snprintf(text, sizeof text, "%s lse=1", drop);
    kk_op_params pf, pb;
    kk_assert_ok(kk_op_params_parse(forward, text, &pf));
    kk_assert_ok(kk_op_params_parse(backward, drop, &pb));
    static uint16_t q[N], k[N], v[N], o[N], dO[N], dq[N], dk[N], dv_gpu[N], dv_cpu[N];
    static float lse[B * H * S];
    kk_assert_ok(kk_case_fill_inputs(&pf, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
    float one = 1.0f, zero = 0.0f;
    uint16_t b1, b0;
    kk_assert_ok(kk_convert_host(&one, KK_DTYPE_F32, &b1, KK_DTYPE_BF16, 1));
    kk_assert_ok(kk_convert_host(&zero, KK_DTYPE_F32, &b0, KK_DTYPE_BF16, 1));
    for (int i = 0; i < N; i++) v[i] = dO[i] = (i / D) % S == i % D ? b1 : b0;
    kk_assert_ok(kk_run_kernel_host(&pf, "cuda:0", (void *[]){q, k, v, o, lse}));
    kk_assert_ok(
        kk_run_kernel_host(&pb, "cuda:0", (void *[]){q, k, v, o, dO, lse, dq, dk, dv_gpu}));
    kk_assert_ok(kk_run_kernel_host(&pb, "cpu", (void *[]){q, k, v, o, dO, lse, dq, dk, dv_cpu}));
    int dropped = 0;
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                const int fwd = (o[(bh * S + i) * D + j] & 0x7FFF) == 0;
                const int gpu = (dv_gpu[(bh * S + j) * D + i] & 0x7FFF) == 0;
                const int cpu = (dv_cpu[(bh * S + j) * D + i] & 0x7FFF) == 0;
                if (fwd != gpu || gpu != cpu)
                    fail_msg("head %d row %d key %d: forward %s, cuda backward %s, cpu backward %s",
                             bh, i, j, fwd ? "dropped" : "kept", gpu ? "dropped" : "kept",
                             cpu ? "dropped" : "kept");
                dropped += fwd;
            }
    /* about 30% dropped: the mask is neither empty nor full */
    assert_true(dropped > B * H * S * S / 5 && dropped < B * H * S * S * 2 / 5);
}

/* The real CUDA slot with one mistake. */
static struct { int dk_no_scale, offset_plus_one, no_causal; } bend;

static kk_status bent(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    if (bend.offset_plus_one) q.i[KK__ATB_OFFSET] += 1;
    if (bend.no_causal) q.i[KK__ATB_CAUSAL] = 0;
    const kk_status st = kk__op_slot(backward, KK_BACKEND_CUDA).run(&q, t, s);
    if (st != KK_OK || !bend.dk_no_scale) return st;
    /* dk / scale: the kernel's dK without its scale */
    kk_tensor *dk = t[KK__ATB_T_DK], *h = NULL;
    const double scale =
        p->f[KK__ATB_SCALE] > 0 ? p->f[KK__ATB_SCALE] : 1.0 / sqrt((double)p->i[KK__ATB_D]);
    kk_assert_ok(kk_op_synchronize("cuda:0", s));
    kk_assert_ok(kk_tensor_create("cpu", dk->dtype, dk->ndim, dk->shape, &h));
    kk_assert_ok(kk_tensor_copy(h, dk));
    const int64_t n = kk_tensor_numel(h);
    float *f = malloc((size_t)n * sizeof *f);
    assert_non_null(f);
    kk_assert_ok(kk_convert_host(h->data, h->dtype, f, KK_DTYPE_F32, n));
    for (int64_t x = 0; x < n; x++) f[x] /= (float)scale;
    kk_assert_ok(kk_convert_host(f, KK_DTYPE_F32, h->data, h->dtype, n));
    kk_assert_ok(kk_tensor_copy(dk, h));
    free(f);
    kk_tensor_destroy(h);
    return KK_OK;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    assert_non_null(kk__op_slot(backward, KK_BACKEND_CUDA).run);
    kk_op row = *backward;
    kk__op_swap(&row, KK_BACKEND_CUDA, bent);
    const char *causal = "B=1 Hq=4 Hkv=2 Sq=100 Sk=100 D=64 causal=1 dtype=bf16";
    const char *drop =
        "B=1 Hq=4 Hkv=2 Sq=70 Sk=133 D=64 dropout=0.2 seed=99 offset=1000 dtype=bf16";
    memset(&bend, 0, sizeof bend);
    expect(&row, causal, 3, KK_CASE_PASS); /* the swap itself changes nothing */
    expect(&row, drop, 4, KK_CASE_PASS);
    bend.dk_no_scale = 1;
    expect(&row, causal, 3, KK_CASE_FAIL);
    memset(&bend, 0, sizeof bend);
    bend.offset_plus_one = 1;
    expect(&row, drop, 4, KK_CASE_FAIL);
    memset(&bend, 0, sizeof bend);
    bend.no_causal = 1;
    expect(&row, causal, 3, KK_CASE_FAIL);
    memset(&bend, 0, sizeof bend);
}

/* Cases the kernel declines (f32, D = 256, D not a multiple of 8) are the
 * checker's SKIP; kk_attention_backward on CUDA tensors runs the CPU kernel
 * for them and gives its bits. */
static void declined_cases_run_on_the_cpu(void **state) {
    (void)state;
    expect(backward, "B=1 Hq=2 Hkv=1 Sq=33 Sk=40 D=64 causal=1 dtype=f32", 1, KK_CASE_SKIP);
    expect(backward, "B=1 Hq=2 Hkv=1 Sq=33 Sk=40 D=256 dtype=bf16", 2, KK_CASE_SKIP);
    expect(backward, "B=1 Hq=2 Hkv=1 Sq=33 Sk=40 D=60 dtype=bf16", 3, KK_CASE_SKIP);
    kk_test_pair s;
    kk_test_pair_open(&s, "cuda:0", "attention_backward",
                      "B=1 Hq=2 Hkv=1 Sq=33 Sk=40 D=256 causal=1 dtype=bf16", run_seed);
    kk_attention_options opt;
    kk_attention_options_init(&opt);
    opt.causal = 1;
    kk_tensor **h = s.host, **d = s.dev;
    kk_assert_ok(
        kk_attention_backward(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], &opt, NULL));
    kk_assert_ok(
        kk_attention_backward(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], &opt, NULL));
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    for (int x = 6; x < 9; x++) {
        kk_tensor *back = NULL;
        kk_assert_ok(kk_tensor_create("cpu", d[x]->dtype, d[x]->ndim, d[x]->shape, &back));
        kk_assert_ok(kk_tensor_copy(back, d[x]));
        assert_memory_equal(back->data, h[x]->data, (size_t)kk_tensor_numel(back) * 2);
        kk_tensor_destroy(back);
    }
    kk_test_pair_close(&s);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const char *env = getenv("KK_TEST_SEED");
    run_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_cuda_attention_backward: seed %llu (KK_TEST_SEED=%llu replays it)\n",
           (unsigned long long)run_seed, (unsigned long long)run_seed);
    if (kk_op_find("attention_backward", &backward) != KK_OK) return 1;
    if (kk_op_find("attention", &forward) != KK_OK) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes_pass),          cmocka_unit_test(dropout_mask_matches_forward),
        cmocka_unit_test(wrong_kernels_fail),   cmocka_unit_test(declined_cases_run_on_the_cpu),
        cmocka_unit_test(suites_and_fuzz_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

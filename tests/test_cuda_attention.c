/* labels: gpu */
/* The CUDA attention kernel against the float64 reference, on fresh random
 * inputs (the seed is printed; KK_TEST_SEED replays it): the smoke and
 * correctness suites and 500 fuzz cases (40 under KK_TEST_QUICK, as the
 * sanitizer runs use). bf16 and f16 cases must pass; f32 and head dims that
 * are not multiples of 8 are outside the kernel and must say so (SKIP), and
 * through kk_op_run they run on the CPU with one warning. Dropout: the CUDA
 * kernel drops exactly the elements the CPU kernel drops. attention_varlen
 * (the kernel's kVarlen variant): its suites and fuzz cases, and a packed
 * batch equal to its sequences run alone (bit for bit) and to the CPU. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/cases.h"
#include "kernelkit/ops.h"

static uint64_t run_seed;
static const kk_op *attention;
static const kk_run_options on_gpu = {.device = "cuda:0", .check_memory = 1};

static int in_kernel(const kk_op_params *p) {
    const kk_dtype dt = (kk_dtype)kk_op_params_int(p, "dtype");
    return (dt == KK_DTYPE_BF16 || dt == KK_DTYPE_F16) && kk_op_params_int(p, "D") % 8 == 0;
}

/* PASS when the kernel covers the case, SKIP saying why when it does not. */
static void expect_verdict(const kk_case *c, int *passed) {
    kk_test_expect_verdict(c, &on_gpu, in_kernel(&c->params), passed);
}

/* The smoke and correctness suites' cases of `op` (malloc'd, *n of them). */
static kk_case *suite_cases_of(const kk_op *op, int *n) {
    static const char *const names[] = {"smoke", "correctness"};
    kk_case *cases = NULL;
    *n = 0;
    for (int s = 0; s < 2; s++) {
        kk_suite suite;
        kk_assert_ok(kk_suite_load(names[s], run_seed, KK_DIST_FULL, &suite));
        cases = realloc(cases, (size_t)(*n + suite.count) * sizeof *cases);
        assert_non_null(cases);
        for (int i = 0; i < suite.count; i++)
            if (suite.cases[i].params.op == op) cases[(*n)++] = suite.cases[i];
        kk_suite_free(&suite);
    }
    assert_true(*n > 0);
    return cases;
}

static void suites_pass(void **state) {
    (void)state;
    int n = 0;
    kk_case *cases = suite_cases_of(attention, &n);
    int passed = 0;
    for (int i = 0; i < n; i++) expect_verdict(&cases[i], &passed);
    printf("suites: %d of %d cases in the kernel passed\n", passed, n);
    assert_true(passed > 0);
    free(cases);
}

static void fuzz_passes(void **state) {
    (void)state;
    const int count = getenv("KK_TEST_QUICK") ? 40 : 500;
    int passed = 0;
    for (int i = 0; i < count; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(attention, run_seed, i, KK_DIST_FULL, NULL, &c));
        expect_verdict(&c, &passed);
    }
    printf("fuzz: %d of %d cases in the kernel passed (seed %llu)\n", passed, count,
           (unsigned long long)run_seed);
    assert_true(passed > count / 4);
}

/* With V = the identity (Sk = D keys), o[i][j] is row i's weight of key j:
 * exactly 0 where dropped, positive where kept. The two kernels must agree on
 * which, element for element. */
static void dropout_mask_matches_cpu(void **state) {
    (void)state;
    enum { B = 2, H = 3, S = 64, D = 64 };
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(attention,
                                    "B=2 Hq=3 Hkv=3 Sq=64 Sk=64 D=64 dtype=bf16 dropout=0.3 "
                                    "seed=123456789012 offset=77",
                                    &p));
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, t, &n));
    static uint16_t q[B * H * S * D], k[B * H * S * D], v[B * H * S * D];
    static uint16_t o_cpu[B * H * S * D], o_gpu[B * H * S * D];
    kk_assert_ok(kk_case_fill_inputs(&p, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
    float one = 1.0f, zero = 0.0f;
    uint16_t b1, b0;
    kk_assert_ok(kk_convert_host(&one, KK_DTYPE_F32, &b1, KK_DTYPE_BF16, 1));
    kk_assert_ok(kk_convert_host(&zero, KK_DTYPE_F32, &b0, KK_DTYPE_BF16, 1));
    for (int i = 0; i < B * H * S * D; i++) v[i] = (i / D) % S == i % D ? b1 : b0;
    kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o_cpu}));
    kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_gpu}));
    int dropped = 0;
    for (int i = 0; i < B * H * S * D; i++) {
        const int cpu_zero = (o_cpu[i] & 0x7FFF) == 0, gpu_zero = (o_gpu[i] & 0x7FFF) == 0;
        if (cpu_zero != gpu_zero)
            fail_msg("element %d: cpu %s, cuda %s", i, cpu_zero ? "dropped" : "kept",
                     gpu_zero ? "dropped" : "kept");
        dropped += cpu_zero;
    }
    /* about 30% of the weights dropped: the mask is not empty or full */
    assert_true(dropped > B * H * S * D / 5 && dropped < B * H * S * D * 2 / 5);
}

static int warnings;
static void count_sink(const kk_log_record *r, void *user) {
    (void)user;
    if (r->level == KK_LOG_WARN && strcmp(r->logger, "kernelkit.ops") == 0) warnings++;
}

/* An f32 attention on CUDA tensors: the kernel declines, kk_op_run runs the
 * CPU kernel instead, warning once; the result is the CPU kernel's. */
static void f32_falls_back_to_cpu(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(
        kk_op_params_parse(attention, "B=1 Hq=2 Hkv=1 Sq=5 Sk=9 D=16 dtype=f32 causal=1", &p));
    static float q[2 * 5 * 16], k[9 * 16], v[9 * 16], o_cpu[2 * 5 * 16], o_gpu[2 * 5 * 16];
    kk_assert_ok(kk_case_fill_inputs(&p, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
    kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o_cpu}));
    warnings = 0;
    kk_log_set_sink(count_sink, NULL);
    kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_gpu}));
    kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_gpu}));
    kk_log_set_sink(NULL, NULL);
    assert_int_equal(warnings, 1);
    assert_memory_equal(o_cpu, o_gpu, sizeof o_cpu);
}

/* q, k, v, o as [B,S,H,D] buffers seen as [B,H,S,D] views (no copy): the
 * kernel reads the strides and gives the very bits it gives on contiguous
 * tensors. With 8-byte aligned rows (a view starting 4 elements in) the CUDA
 * kernel declines and kk_op_run runs the CPU kernel on contiguous copies. */
static kk_tensor *bshd_view(kk_tensor *bshd) {
    kk_tensor *v = NULL;
    kk_assert_ok(kk_tensor_transpose(bshd, 1, 2, &v));
    return v;
}

static void strided_layout_matches_contiguous(void **state) {
    (void)state;
    enum { B = 2, S = 70, Hq = 4, Hkv = 2, D = 64 };
    kk_op_params p;
    kk_assert_ok(
        kk_op_params_parse(attention, "B=2 Hq=4 Hkv=2 Sq=70 Sk=70 D=64 causal=1 dtype=bf16", &p));
    static uint16_t q[B * Hq * S * D], k[B * Hkv * S * D], v[B * Hkv * S * D];
    static uint16_t o_contig[B * Hq * S * D], o_strided[B * Hq * S * D];
    kk_assert_ok(kk_case_fill_inputs(&p, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
    kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_contig}));
    /* the same data in [B,S,H,D] buffers on the GPU, through [B,H,S,D] views */
    const int64_t hq_shape[4] = {B, Hq, S, D}, hkv_shape[4] = {B, Hkv, S, D};
    kk_tensor *hq_host, *hk_host, *hv_host, *ho_host;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hq_shape, NULL, q, &hq_host));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hkv_shape, NULL, k, &hk_host));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hkv_shape, NULL, v, &hv_host));
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hq_shape, NULL, o_strided, &ho_host));
    kk_tensor *bq, *bk, *bv, *bo;
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hq, D}, &bq));
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hkv, D}, &bk));
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hkv, D}, &bv));
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hq, D}, &bo));
    kk_tensor *vq = bshd_view(bq), *vk = bshd_view(bk), *vv = bshd_view(bv), *vo = bshd_view(bo);
    assert_false(kk_tensor_is_contiguous(vq));
    kk_assert_ok(kk_tensor_copy(vq, hq_host));
    kk_assert_ok(kk_tensor_copy(vk, hk_host));
    kk_assert_ok(kk_tensor_copy(vv, hv_host));
    kk_attention_options opt;
    kk_attention_options_init(&opt);
    opt.causal = 1;
    kk_assert_ok(kk_attention(vq, vk, vv, vo, NULL, &opt, NULL));
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    kk_assert_ok(kk_tensor_copy(ho_host, vo));
    assert_memory_equal(o_contig, o_strided, sizeof o_contig); /* the GPU's own bits */

    /* rows 8 bytes off alignment: the CPU kernel on contiguous copies, warned */
    kk_tensor *wide_q, *wq, *vwq;
    kk_assert_ok(
        kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hq, D + 8}, &wide_q));
    kk_assert_ok(kk_tensor_slice(wide_q, 3, 4, 4 + D, 1, &wq));
    vwq = bshd_view(wq);
    kk_assert_ok(kk_tensor_copy(vwq, hq_host));
    static uint16_t o_cpu[B * Hq * S * D];
    kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o_cpu}));
    /* the two kernels round differently somewhere, so the bits tell who ran */
    assert_true(memcmp(o_cpu, o_contig, sizeof o_cpu) != 0);
    kk_assert_ok(kk_attention(vwq, vk, vv, vo, NULL, &opt, NULL));
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    kk_assert_ok(kk_tensor_copy(ho_host, vo));
    assert_memory_equal(o_cpu, o_strided, sizeof o_cpu); /* the CPU kernel's bits */
    kk_tensor *all[] = {hq_host, hk_host, hv_host, ho_host, bq,     bk, bv, bo,
                        vq,      vk,      vv,      vo,      wide_q, wq, vwq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

/* ---- attention_varlen: the same kernel on packed batches (kVarlen) ---- */

static const kk_op *varlen;

static void varlen_suites_and_fuzz_pass(void **state) {
    (void)state;
    int n = 0, passed = 0;
    kk_case *cases = suite_cases_of(varlen, &n);
    for (int i = 0; i < n; i++) expect_verdict(&cases[i], &passed);
    free(cases);
    const int count = getenv("KK_TEST_QUICK") ? 40 : 300;
    for (int i = 0; i < count; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(varlen, run_seed, i, KK_DIST_FULL, NULL, &c));
        expect_verdict(&c, &passed);
    }
    printf("attention_varlen: %d of %d suite and fuzz cases in the kernel passed\n", passed,
           n + count);
    assert_true(passed > count / 4);
}

/* Host buffer -> a new tensor on `device` (a copy). */
static kk_tensor *upload(const char *device, kk_dtype dt, int ndim, const int64_t *shape,
                         void *host) {
    kk_tensor *h = NULL, *d = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", dt, ndim, shape, NULL, host, &h));
    kk_assert_ok(kk_tensor_create(device, dt, ndim, shape, &d));
    kk_assert_ok(kk_tensor_copy(d, h));
    kk_tensor_destroy(h);
    return d;
}

static void download(const kk_tensor *d, void *host) {
    kk_tensor *h = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", d->dtype, d->ndim, d->shape, NULL, host, &h));
    kk_assert_ok(kk_tensor_copy(h, d));
    kk_tensor_destroy(h);
}

/* A packed bf16 batch in FlashAttention's [total,H,D] layout (strided views
 * of the kernel's [1,H,total,D]) with empty sequences, Sq != Sk, causal,
 * dropout and lse, through kk_attention_varlen on the GPU: every sequence must
 * be the same bits as the fixed-length CUDA kernel's batch s of a B = s + 1
 * run (the dropout mask's batch is the sequence), and close to the CPU's
 * attention_varlen. Head dim 96: both runs take the sm_80-class kernel (on
 * Hopper, fixed-length head dims 64 and 128 take the wgmma kernel, whose sums
 * run in another order). */
static void varlen_matches_sequences_alone(void **state) {
    (void)state;
    enum { NSEQ = 5, HQ = 4, HKV = 2, D = 96 };
    /* every Sk < 512: the fixed-length runs take the forward kernel, not decode */
    static const int lq[NSEQ] = {37, 0, 200, 1, 130}, lk[NSEQ] = {50, 7, 200, 300, 0};
    int cq[NSEQ + 1] = {0}, ck[NSEQ + 1] = {0};
    for (int s = 0; s < NSEQ; s++) cq[s + 1] = cq[s] + lq[s], ck[s + 1] = ck[s] + lk[s];
    const int TQ = cq[NSEQ], TK = ck[NSEQ];
    uint16_t *q = malloc(2u * TQ * HQ * D), *k = malloc(2u * TK * HKV * D),
             *v = malloc(2u * TK * HKV * D);
    uint16_t *o_gpu = malloc(2u * TQ * HQ * D), *o_cpu = malloc(2u * TQ * HQ * D);
    float *l_gpu = malloc(4u * HQ * TQ), *l_cpu = malloc(4u * HQ * TQ);
    {
        kk_op_params fill; /* random bf16 values from the harness's generator */
        char text[128];
        snprintf(text, sizeof text, "B=1 Hq=%d Hkv=%d Sq=%d Sk=%d D=%d dtype=bf16", HQ, HKV, TQ, TK,
                 D);
        kk_assert_ok(kk_op_params_parse(attention, text, &fill));
        kk_assert_ok(kk_case_fill_inputs(&fill, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
    }
    kk_attention_options opt;
    kk_attention_options_init(&opt);
    opt.causal = 1;
    opt.dropout = 0.2;
    opt.seed = 123456789012ull;
    opt.offset = 77;
    const char *devices[2] = {"cuda:0", "cpu"};
    for (int dev = 0; dev < 2; dev++) {
        kk_tensor *t[7] = {upload(devices[dev], KK_DTYPE_BF16, 3, (int64_t[]){TQ, HQ, D}, q),
                           upload(devices[dev], KK_DTYPE_BF16, 3, (int64_t[]){TK, HKV, D}, k),
                           upload(devices[dev], KK_DTYPE_BF16, 3, (int64_t[]){TK, HKV, D}, v),
                           upload(devices[dev], KK_DTYPE_INT32, 1, (int64_t[]){NSEQ + 1}, cq),
                           upload(devices[dev], KK_DTYPE_INT32, 1, (int64_t[]){NSEQ + 1}, ck),
                           NULL,
                           NULL};
        kk_assert_ok(
            kk_tensor_create(devices[dev], KK_DTYPE_BF16, 3, (int64_t[]){TQ, HQ, D}, &t[5]));
        kk_assert_ok(kk_tensor_create(devices[dev], KK_DTYPE_F32, 2, (int64_t[]){HQ, TQ}, &t[6]));
        kk_assert_ok(
            kk_attention_varlen(t[0], t[1], t[2], t[3], t[4], 200, 300, t[5], t[6], &opt, NULL));
        kk_assert_ok(kk_op_synchronize(devices[dev], NULL));
        download(t[5], dev ? o_cpu : o_gpu);
        download(t[6], dev ? l_cpu : l_gpu);
        for (int i = 0; i < 7; i++) kk_tensor_destroy(t[i]);
    }
    int compared = 0;
    for (int s = 0; s < NSEQ; s++) {
        if (lq[s] == 0) continue;
        const int B = s + 1, Sq = lq[s], Sk = lk[s];
        if (Sk == 0) { /* no key: o = 0 and lse = -inf */
            for (int h = 0; h < HQ; h++)
                for (int i = 0; i < Sq; i++) {
                    for (int d = 0; d < D; d++)
                        assert_int_equal(o_gpu[((size_t)(cq[s] + i) * HQ + h) * D + d] & 0x7FFF, 0);
                    assert_true(isinf(l_gpu[(size_t)h * TQ + cq[s] + i]) &&
                                l_gpu[(size_t)h * TQ + cq[s] + i] < 0);
                }
            continue;
        }
        uint16_t *fq = calloc((size_t)B * HQ * Sq * D, 2), *fo = calloc((size_t)B * HQ * Sq * D, 2);
        uint16_t *fk = calloc((size_t)B * HKV * Sk * D, 2),
                 *fv = calloc((size_t)B * HKV * Sk * D, 2);
        float *fl = calloc((size_t)B * HQ * Sq, 4);
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < Sq; i++)
                memcpy(fq + (((size_t)s * HQ + h) * Sq + i) * D,
                       q + ((size_t)(cq[s] + i) * HQ + h) * D, 2 * D);
        for (int h = 0; h < HKV; h++)
            for (int j = 0; j < Sk; j++) {
                memcpy(fk + (((size_t)s * HKV + h) * Sk + j) * D,
                       k + ((size_t)(ck[s] + j) * HKV + h) * D, 2 * D);
                memcpy(fv + (((size_t)s * HKV + h) * Sk + j) * D,
                       v + ((size_t)(ck[s] + j) * HKV + h) * D, 2 * D);
            }
        kk_tensor *a[5] = {upload("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, HQ, Sq, D}, fq),
                           upload("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, HKV, Sk, D}, fk),
                           upload("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, HKV, Sk, D}, fv), NULL,
                           NULL};
        kk_assert_ok(
            kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, HQ, Sq, D}, &a[3]));
        kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_F32, 3, (int64_t[]){B, HQ, Sq}, &a[4]));
        kk_assert_ok(kk_attention(a[0], a[1], a[2], a[3], a[4], &opt, NULL));
        kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
        download(a[3], fo);
        download(a[4], fl);
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < Sq; i++) {
                const size_t packed = ((size_t)(cq[s] + i) * HQ + h) * D,
                             alone = (((size_t)s * HQ + h) * Sq + i) * D;
                if (memcmp(o_gpu + packed, fo + alone, 2 * D) != 0 ||
                    memcmp(&l_gpu[(size_t)h * TQ + cq[s] + i], &fl[((size_t)s * HQ + h) * Sq + i],
                           4) != 0)
                    fail_msg("sequence %d head %d row %d: the packed run differs from the sequence "
                             "alone",
                             s, h, i);
                for (int d = 0; d < D; d++) { /* the CPU kernel: bf16's tolerance */
                    float g, c;
                    kk_assert_ok(
                        kk_convert_host(o_gpu + packed + d, KK_DTYPE_BF16, &g, KK_DTYPE_F32, 1));
                    kk_assert_ok(
                        kk_convert_host(o_cpu + packed + d, KK_DTYPE_BF16, &c, KK_DTYPE_F32, 1));
                    if (fabsf(g - c) > 2e-2f + 4e-2f * fabsf(c))
                        fail_msg("sequence %d head %d row %d col %d: cuda %g, cpu %g", s, h, i, d,
                                 g, c);
                }
                compared++;
            }
        for (int i = 0; i < 5; i++) kk_tensor_destroy(a[i]);
        free(fq), free(fo), free(fk), free(fv), free(fl);
    }
    assert_true(compared == HQ * (37 + 200 + 1));
    free(q), free(k), free(v), free(o_gpu), free(o_cpu), free(l_gpu), free(l_cpu);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const char *env = getenv("KK_TEST_SEED");
    run_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_cuda_attention: seed %llu (KK_TEST_SEED=%llu replays it)\n",
           (unsigned long long)run_seed, (unsigned long long)run_seed);
    if (kk_op_find("attention", &attention) != KK_OK) return 1;
    if (kk_op_find("attention_varlen", &varlen) != KK_OK) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(suites_pass),
        cmocka_unit_test(fuzz_passes),
        cmocka_unit_test(dropout_mask_matches_cpu),
        cmocka_unit_test(f32_falls_back_to_cpu),
        cmocka_unit_test(strided_layout_matches_contiguous),
        cmocka_unit_test(varlen_suites_and_fuzz_pass),
        cmocka_unit_test(varlen_matches_sequences_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

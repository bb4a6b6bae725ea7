/* labels: gpu */
/* nvfp4_gemv's CUDA kernel (src/cuda/kernels/nvfp4_gemv.cu) on cuda:0, through
 * kk_op_run (kk_case_run: fresh seeded inputs, output poisoned twice, float64
 * reference, the row's GPU MODE tolerance): GPU MODE's nine test shapes and
 * three benchmark shapes, odd M (1, 3, 127, 129, 1000), both scale layouts,
 * global scales on and off, both input distributions, both decoders, 4 and 8
 * rows per warp.
 * Then on the same inputs: the CPU twin and the GPU agree within the op's
 * tolerance, and the GPU gives exactly the bits of the kernel's CPU emulation
 * (kk__nvfp4_gemv_emulate: same sums in the same order). Wrong variants of
 * the CUDA slot must FAIL, and misaligned data is refused. Exits 77 (skipped)
 * without a usable GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "kernelkit/cases.h"

/* src/cuda/kernels/nvfp4_gemv.cu; weak so that a build without CUDA links. */
kk_status kk__nvfp4_gemv_emulate(const kk_op_params *p, kk_tensor *const *t, int sms, int variant,
                                 int rows) __attribute__((weak));

static const kk_op *gemv_row(void) {
    const kk_op *op;
    kk_assert_ok(kk_op_find("nvfp4_gemv", &op));
    return op;
}

static kk_case_result run_on_gpu(const kk_op *row, const char *text, kk_input_dist dist,
                                 uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test/cuda/nvfp4_gemv");
    kk_assert_ok(kk_op_params_parse(row, text, &c.params));
    c.seed = seed;
    c.dist = dist;
    kk_run_options o = {.device = "cuda:0"};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    print_message("    %-4s %-7s v%s r%s %-58s max_abs %.3g max_rel %.3g kernel %.3f ms %s\n",
                  kk_case_status_name(r.status), kk_input_dist_name(dist),
                  getenv("KK_NVFP4_GEMV_VARIANT") ? getenv("KK_NVFP4_GEMV_VARIANT") : "2",
                  getenv("KK_NVFP4_GEMV_ROWS") ? getenv("KK_NVFP4_GEMV_ROWS") : "8", text,
                  r.max_abs_err, r.max_rel_err, r.kernel_ms, r.message);
    return r;
}

static void expect_pass(const char *shape, int layout, int global, int dist, uint64_t seed) {
    char text[160];
    snprintf(text, sizeof text, "%s scale_layout=%s global=%d", shape, layout ? "blocked" : "plain",
             global);
    kk_case_result r = run_on_gpu(gemv_row(), text, (kk_input_dist)dist, seed);
    assert_int_equal(r.status, KK_CASE_PASS);
    assert_int_equal(r.outputs[0].unwritten, 0);
}

/* ANCHORS: GPU MODE's test shapes (M, K, L), each in both layouts. */
static const char *const gpumode_tests[] = {
    "M=128 K=256 L=1",  "M=128 K=1536 L=1",  "M=128 K=3072 L=1",
    "M=256 K=7168 L=1", "M=2432 K=4608 L=2", "M=384 K=7168 L=2",
    "M=512 K=512 L=2",  "M=512 K=4096 L=2",  "M=512 K=1536 L=2",
};
static const char *const gpumode_bench[] = {"M=7168 K=16384 L=1", "M=4096 K=7168 L=8",
                                            "M=7168 K=2048 L=4"};

static void gpumode_shapes_pass(void **state) {
    (void)state;
    for (int s = 0; s < 9; s++)
        for (int layout = 0; layout < 2; layout++)
            expect_pass(gpumode_tests[s], layout, (s + layout) % 2, (s + layout) % 2, 10 + s);
    for (int s = 0; s < 3; s++) expect_pass(gpumode_bench[s], s % 2, s == 1, s % 2, 30 + s);
}

/* Odd M, K that splits over 1, 2, 4 and 8 warps, every layout x global. */
static void odd_shapes_pass(void **state) {
    (void)state;
    static const int64_t Ms[] = {1, 3, 127, 129, 1000};
    static const char *const KLs[] = {"K=64 L=1", "K=1088 L=3", "K=4160 L=2", "K=8256 L=1"};
    for (int m = 0; m < 5; m++)
        for (int k = 0; k < 4; k++)
            for (int combo = 0; combo < 4; combo++) {
                char shape[64];
                snprintf(shape, sizeof shape, "M=%lld %s", (long long)Ms[m], KLs[k]);
                expect_pass(shape, combo & 1, combo >> 1, (m + k + combo) % 2,
                            100 + 16 * m + 4 * k + combo);
            }
}

/* The other instantiations (decoders KK_NVFP4_GEMV_VARIANT=1, 2 and 4, 4
 * rows per warp KK_NVFP4_GEMV_ROWS=4) on a spread of shapes. */
static void other_variants_pass(void **state) {
    (void)state;
    static const char *const v[][2] = {{"1", "8"}, {"0", "4"}, {"1", "4"}, {"2", "8"},
                                       {"2", "4"}, {"4", "8"}, {"4", "4"}};
    for (int k = 0; k < (int)(sizeof v / sizeof v[0]); k++) {
        setenv("KK_NVFP4_GEMV_VARIANT", v[k][0], 1);
        setenv("KK_NVFP4_GEMV_ROWS", v[k][1], 1);
        expect_pass("M=1 K=64 L=1", 0, 1, 0, 1);
        expect_pass("M=129 K=1088 L=3", 1, 0, 1, 2);
        expect_pass("M=1000 K=8256 L=1", 0, 1, 0, 3);
        expect_pass("M=2432 K=4608 L=2", 1, 1, 0, 4);
        expect_pass("M=7168 K=2048 L=4", 0, 0, 1, 5);
    }
    unsetenv("KK_NVFP4_GEMV_VARIANT");
    unsetenv("KK_NVFP4_GEMV_ROWS");
}

/* ---- the same inputs on the CPU twin, the emulation and the GPU ---- */

typedef struct gemv_set {
    kk_op_params p;
    int n;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    kk_tensor *host[KK_OP_MAX_TENSORS], *dev[KK_OP_MAX_TENSORS];
} gemv_set;

static void set_open(gemv_set *s, const char *text, uint64_t seed) {
    kk_assert_ok(kk_op_params_parse(gemv_row(), text, &s->p));
    kk_assert_ok(kk_op_tensors(&s->p, s->d, &s->n));
    void *raw[KK_OP_MAX_TENSORS];
    for (int k = 0; k < s->n; k++) {
        kk_assert_ok(
            kk_tensor_create("cpu", s->d[k].dtype, s->d[k].ndim, s->d[k].shape, &s->host[k]));
        kk_assert_ok(
            kk_tensor_create("cuda:0", s->d[k].dtype, s->d[k].ndim, s->d[k].shape, &s->dev[k]));
        raw[k] = s->host[k]->data;
    }
    kk_assert_ok(kk_case_fill_inputs(&s->p, seed, KK_DIST_FULL, raw));
    for (int k = 0; k < s->n - 1; k++) kk_assert_ok(kk_tensor_copy(s->dev[k], s->host[k]));
}

static void set_close(gemv_set *s) {
    for (int k = 0; k < s->n; k++) {
        kk_tensor_destroy(s->host[k]);
        kk_tensor_destroy(s->dev[k]);
    }
}

/* c of the host tensors after `fn` ran on them, into out. */
static void c_of(gemv_set *s, uint16_t *out) {
    memcpy(out, s->host[s->n - 1]->data, (size_t)s->d[s->n - 1].numel * 2);
}

static void twin_emulation_and_gpu_agree(void **state) {
    (void)state;
    static const char *const cases[] = {
        "M=1000 K=2048 L=1 scale_layout=plain global=1", "M=129 K=8256 L=2 scale_layout=blocked",
        "M=2432 K=4608 L=2 scale_layout=blocked", "M=512 K=16384 L=1 global=1",
        "M=200 K=32768 L=1 scale_layout=blocked"}; /* variants 2, 4: 72 KiB of shared memory */
    kk_device_info info;
    kk_assert_ok(kk_device_get_info("cuda:0", &info));
    kk_tolerance tol;
    kk_assert_ok(kk_op_tolerance(gemv_row(), KK_DTYPE_F16, &tol));
    for (int vi = 0; vi < 4; vi++)
        for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
            static const int variants[4] = {0, 1, 2, 4};
            const int variant = variants[vi];
            char vtext[2] = {(char)('0' + variant), 0};
            setenv("KK_NVFP4_GEMV_VARIANT", vtext, 1); /* the GPU's and the emulation's */
            gemv_set s;
            set_open(&s, cases[c], 50 + c);
            const size_t n = (size_t)s.d[s.n - 1].numel;
            uint16_t *cpu = malloc(n * 2), *gpu = malloc(n * 2), *emu = malloc(n * 2);
            double *cpu64 = malloc(n * sizeof(double));
            kk_assert_ok(kk_op_run(&s.p, s.host, NULL)); /* the CPU twin */
            c_of(&s, cpu);
            kk_assert_ok(kk_op_run(&s.p, s.dev, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            kk_assert_ok(kk_tensor_copy(s.host[s.n - 1], s.dev[s.n - 1]));
            c_of(&s, gpu);
            /* the GPU within the op's tolerance of the CPU twin */
            kk_assert_ok(kk_convert_host(cpu, KK_DTYPE_F16, cpu64, KK_DTYPE_F64, n));
            kk_check_result r;
            kk_assert_ok(kk_check_output(gpu, KK_DTYPE_F16, cpu64, n, &tol, &r));
            size_t same = 0, emu_diff = 0;
            for (size_t i = 0; i < n; i++) same += cpu[i] == gpu[i];
            if (kk__nvfp4_gemv_emulate) { /* and exactly the emulation's bits (8 rows) */
                kk_assert_ok(kk__nvfp4_gemv_emulate(&s.p, s.host, info.sm_count, variant, 8));
                c_of(&s, emu);
                for (size_t i = 0; i < n; i++) emu_diff += emu[i] != gpu[i];
            }
            print_message("    v%d %-45s gpu vs cpu twin: %s, %zu of %zu bit-identical; gpu vs "
                          "emulation (%d SMs): %zu differ\n",
                          variant, cases[c], r.pass ? "PASS" : "FAIL", same, n, info.sm_count,
                          emu_diff);
            assert_true(r.pass);
            assert_int_equal(emu_diff, 0);
            free(cpu);
            free(gpu);
            free(emu);
            free(cpu64);
            set_close(&s);
        }
    unsetenv("KK_NVFP4_GEMV_VARIANT");
}

/* Variant 4 (persistent CTAs: several work items per CTA, b re-decoded when
 * the batch changes, the next item's loads before the reduction) gives
 * variant 2's bits and the emulation's, on shapes with many items per CTA
 * and batch changes inside a CTA (split of K: default, forced 2 and 8;
 * forced splits give up to ~18 items a CTA and exercise the slice sums).
 * Where there are no more items than resident CTAs, variant 4 launches
 * variant 2's kernel (e.g. the first case's default split, 8 rows). */
static void persistent_equals_variant2(void **state) {
    (void)state;
    static const char *const cases[] = {"M=1000 K=2048 L=9 scale_layout=blocked global=1",
                                        "M=33 K=1024 L=300",
                                        "M=129 K=64 L=40 scale_layout=blocked"};
    static const char *const splits[] = {NULL, "2", "8"};
    kk_device_info info;
    kk_assert_ok(kk_device_get_info("cuda:0", &info));
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (int sp = 0; sp < 3; sp++)
            for (int rows = 8; rows >= 4; rows -= 4) {
                if (splits[sp])
                    setenv("KK_NVFP4_GEMV_SPLIT", splits[sp], 1);
                else
                    unsetenv("KK_NVFP4_GEMV_SPLIT");
                setenv("KK_NVFP4_GEMV_ROWS", rows == 8 ? "8" : "4", 1);
                gemv_set s;
                set_open(&s, cases[c], 70 + c);
                const size_t n = (size_t)s.d[s.n - 1].numel;
                uint16_t *out[3];
                for (int k = 0; k < 3; k++) out[k] = malloc(n * 2);
                for (int k = 0; k < 2; k++) { /* variant 2, then 4, on the GPU */
                    setenv("KK_NVFP4_GEMV_VARIANT", k ? "4" : "2", 1);
                    /* c poisoned differently for each: an unwritten element differs */
                    kk_assert_ok(kk_poison(s.host[s.n - 1]->data, KK_DTYPE_F16, n, k));
                    kk_assert_ok(kk_tensor_copy(s.dev[s.n - 1], s.host[s.n - 1]));
                    kk_assert_ok(kk_op_run(&s.p, s.dev, NULL));
                    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
                    kk_assert_ok(kk_tensor_copy(s.host[s.n - 1], s.dev[s.n - 1]));
                    c_of(&s, out[k]);
                }
                size_t diff2 = 0, diff_emu = 0;
                for (size_t i = 0; i < n; i++) diff2 += out[0][i] != out[1][i];
                if (kk__nvfp4_gemv_emulate) {
                    kk_assert_ok(kk__nvfp4_gemv_emulate(&s.p, s.host, info.sm_count, 4, rows));
                    c_of(&s, out[2]);
                    for (size_t i = 0; i < n; i++) diff_emu += out[2][i] != out[1][i];
                }
                print_message("    v4 %-45s split %s rows %d: %zu of %zu differ from v2, %zu "
                              "from the emulation\n",
                              cases[c], splits[sp] ? splits[sp] : "default", rows, diff2, n,
                              diff_emu);
                assert_int_equal(diff2, 0);
                assert_int_equal(diff_emu, 0);
                for (int k = 0; k < 3; k++) free(out[k]);
                set_close(&s);
            }
    unsetenv("KK_NVFP4_GEMV_SPLIT");
    unsetenv("KK_NVFP4_GEMV_ROWS");
    unsetenv("KK_NVFP4_GEMV_VARIANT");
}

/* ---- wrong variants of the CUDA slot fail ---- */

static kk_status real_cuda(const kk_op_params *p, kk_tensor *const *t) {
    return kk__op_slot(gemv_row(), KK_BACKEND_CUDA).run(p, t, NULL);
}

/* ga and gb left out */
static kk_status cuda_no_global(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__GEMV_GLOBAL] = 0;
    kk_tensor *v[5] = {t[0], t[1], t[2], t[3], t[6]};
    return real_cuda(&q, v);
}

/* blocked scales read as plain (same bytes when M % 128 == 0) */
static kk_status cuda_as_plain(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__GEMV_LAYOUT] = KK__GEMV_PLAIN;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&q, d, &n));
    kk_tensor *v[KK_OP_MAX_TENSORS];
    for (int k = 0; k < n; k++) v[k] = t[k];
    for (int k = 2; k < 4; k++)
        kk_assert_ok(kk_tensor_wrap(t[k]->device, d[k].dtype, d[k].ndim, d[k].shape, NULL,
                                    t[k]->data, &v[k]));
    kk_status st = real_cuda(&q, v);
    kk_tensor_destroy(v[2]);
    kk_tensor_destroy(v[3]);
    return st;
}

static void wrong_cuda_variants_fail(void **state) {
    (void)state;
    const char *text = "M=256 K=2048 L=2 scale_layout=blocked global=1";
    assert_int_equal(run_on_gpu(gemv_row(), text, KK_DIST_FULL, 5).status, KK_CASE_PASS);
    const kk_op_kernel_fn wrong[] = {cuda_no_global, cuda_as_plain};
    for (int w = 0; w < 2; w++) {
        kk_op row = *gemv_row();
        kk__op_swap(&row, KK_BACKEND_CUDA, wrong[w]);
        assert_int_equal(run_on_gpu(&row, text, KK_DIST_FULL, 5).status, KK_CASE_FAIL);
    }
}

/* a's data 8 bytes off its 16-byte alignment: refused, naming a. */
static void misaligned_refused(void **state) {
    (void)state;
    gemv_set s;
    set_open(&s, "M=4 K=64 L=1", 1);
    kk_tensor *a_off;
    kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_UINT8, 1, (int64_t[]){4 * 32 + 16}, &a_off));
    kk_tensor *a_view;
    kk_assert_ok(kk_tensor_wrap("cuda:0", KK_DTYPE_E2M1, 3, (int64_t[]){1, 4, 64}, NULL,
                                (uint8_t *)a_off->data + 8, &a_view));
    kk_tensor *v[KK_OP_MAX_TENSORS] = {a_view, s.dev[1], s.dev[2], s.dev[3], s.dev[4]};
    kk_assert_status(kk_op_run(&s.p, v, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "a");
    kk_assert_contains(kk_last_error_message(), "aligned");
    kk_tensor_destroy(a_view);
    kk_tensor_destroy(a_off);
    set_close(&s);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpumode_shapes_pass),
        cmocka_unit_test(odd_shapes_pass),
        cmocka_unit_test(other_variants_pass),
        cmocka_unit_test(twin_emulation_and_gpu_agree),
        cmocka_unit_test(persistent_equals_variant2),
        cmocka_unit_test(wrong_cuda_variants_fail),
        cmocka_unit_test(misaligned_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

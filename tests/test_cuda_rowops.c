/* labels: gpu */
/* The row kernels on CUDA (src/cuda/kernels/{rmsnorm,layernorm,softmax,rope}.cu)
 * on cuda:0, through kk_op_run (kk_case_run: seeded inputs, output poisoned
 * twice, float64 reference, the op's tolerance): every dtype, row lengths odd
 * and aligned, from one element to the two-pass kernels, a row per warp and
 * per block; rope in both styles, partial rotary dims, far positions.
 * Then on the same inputs the CPU twin and the GPU agree within the op's
 * tolerance; strided rows (scalar loads) give the contiguous rows' bits
 * (vector loads) and leave the gaps alone; wrong kernels FAIL. Exits 77
 * (skipped) without a usable GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "kernelkit/cases.h"

static void expect_pass(const char *op, const char *text, uint64_t seed) {
    kk_case_result r = kk_test_run_case_on("cuda:0", kk_test_op(op), text, seed);
    assert_int_equal(r.status, KK_CASE_PASS);
    assert_int_equal(r.outputs[0].unwritten, 0);
}

static const char *const dtypes[] = {"f32", "f16", "bf16"};

/* Row lengths over every shape of threads (a warp per row up to 1024
 * elements, a block per row up to 16384, two passes beyond), odd and aligned. */
static const int64_t lengths[] = {1,    7,    8,    37,   256,  257,   1000,  1024,  1032,
                                  2048, 2051, 4096, 4100, 8192, 12288, 16384, 16391, 40000};

static void norms_and_softmax_pass(void **state) {
    (void)state;
    static const char *const ops[] = {"rmsnorm", "layernorm", "softmax"};
    const int quick = getenv("KK_TEST_QUICK") != NULL;
    uint64_t seed = 1;
    for (int o = 0; o < 3; o++)
        for (int d = 0; d < 3; d++)
            for (int l = 0; l < (int)(sizeof lengths / sizeof lengths[0]); l++) {
                if (quick && l % 3) continue;
                const int64_t n = lengths[l];
                const int64_t rows = n >= 8192 ? 5 : n >= 1000 ? 37 : 133;
                char text[128];
                snprintf(text, sizeof text, "rows=%lld n=%lld dtype=%s", (long long)rows,
                         (long long)n, dtypes[d]);
                expect_pass(ops[o], text, seed++);
            }
    /* the op's own edges: large eps, no affine, large and zero scales */
    for (int d = 0; d < 3; d++) {
        char text[128];
        snprintf(text, sizeof text, "rows=9 n=1000 eps=0.25 dtype=%s", dtypes[d]);
        expect_pass("rmsnorm", text, seed++);
        expect_pass("layernorm", text, seed++);
        snprintf(text, sizeof text, "rows=9 n=4096 affine=0 dtype=%s", dtypes[d]);
        expect_pass("layernorm", text, seed++);
        snprintf(text, sizeof text, "rows=9 n=300 scale=50 dtype=%s", dtypes[d]);
        expect_pass("softmax", text, seed++);
        snprintf(text, sizeof text, "rows=9 n=2048 scale=0 dtype=%s", dtypes[d]);
        expect_pass("softmax", text, seed++);
    }
    /* many rows: the grid-stride loops go round */
    expect_pass("rmsnorm", "rows=70000 n=64 dtype=bf16", seed++);
    expect_pass("softmax", "rows=20000 n=2048 dtype=bf16", seed++);
}

static void rope_passes(void **state) {
    (void)state;
    static const char *const shapes[] = {
        "B=1 H=2 S=5 D=64",
        "B=1 H=1 S=3 D=10 rotary_dim=6 style=gptj",
        "B=2 H=3 S=17 D=128 offset=1000",
        "B=2 H=3 S=17 D=128 style=gptj theta=500000",
        "B=1 H=32 S=1 D=128 offset=4095",
        "B=3 H=2 S=33 D=96 rotary_dim=32",
        "B=3 H=2 S=33 D=96 rotary_dim=32 style=gptj",
        "B=1 H=4 S=9 D=80 rotary_dim=48",
        "B=1 H=1 S=300 D=2",
        "B=1 H=1 S=40 D=7 rotary_dim=4",
        "B=1 H=1 S=40 D=7 rotary_dim=6 style=gptj",
        "B=2 H=5 S=7 D=1024 offset=1048576",
        "B=1 H=8 S=257 D=256 rotary_dim=128 style=gptj offset=16777216",
        "B=4 H=16 S=128 D=128",
    };
    uint64_t seed = 100;
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        for (int d = 0; d < 3; d++) {
            char text[160];
            snprintf(text, sizeof text, "%s dtype=%s", shapes[s], dtypes[d]);
            expect_pass("rope", text, seed++);
        }
}

/* ---- the same inputs on the CPU twin and the GPU; strided rows ---- */

static size_t out_bytes(const kk_test_pair *s) {
    return (size_t)kk_dtype_bytes(s->d[s->n - 1].dtype, s->d[s->n - 1].numel);
}

static void twin_and_gpu_agree(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"rmsnorm", "rows=64 n=4096"},
        {"rmsnorm", "rows=33 n=1001"},
        {"rmsnorm", "rows=3 n=40000"},
        {"layernorm", "rows=64 n=4096"},
        {"layernorm", "rows=33 n=1001"},
        {"layernorm", "rows=3 n=40001 affine=0"},
        {"softmax", "rows=64 n=8192"},
        {"softmax", "rows=33 n=999 scale=0.125"},
        {"softmax", "rows=3 n=40000"},
        {"rope", "B=2 H=8 S=64 D=128"},
        {"rope", "B=1 H=3 S=50 D=64 rotary_dim=32 style=gptj offset=70000"},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (int d = 0; d < 3; d++) {
            char text[160];
            snprintf(text, sizeof text, "%s dtype=%s", cases[c][1], dtypes[d]);
            kk_test_pair s;
            kk_test_pair_open(&s, "cuda:0", cases[c][0], text, 50 + c);
            const kk_dtype dt = s.d[s.n - 1].dtype;
            const size_t n = (size_t)s.d[s.n - 1].numel, bytes = out_bytes(&s);
            unsigned char *cpu = malloc(bytes), *gpu = malloc(bytes);
            double *cpu64 = malloc(n * sizeof(double));
            kk_assert_ok(kk_op_run(&s.p, s.host, NULL)); /* the CPU twin */
            memcpy(cpu, s.host[s.n - 1]->data, bytes);
            kk_assert_ok(kk_op_run(&s.p, s.dev, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            kk_assert_ok(kk_tensor_copy(s.host[s.n - 1], s.dev[s.n - 1]));
            memcpy(gpu, s.host[s.n - 1]->data, bytes);
            kk_assert_ok(kk_convert_host(cpu, dt, cpu64, KK_DTYPE_F64, n));
            kk_tolerance tol;
            kk_assert_ok(kk_op_tolerance(kk_test_op(cases[c][0]), dt, &tol));
            kk_check_result r;
            kk_assert_ok(kk_check_output(gpu, dt, cpu64, n, &tol, &r));
            const size_t eb = bytes / n;
            size_t same = 0;
            for (size_t i = 0; i < n; i++) same += !memcmp(cpu + i * eb, gpu + i * eb, eb);
            print_message("    %-10s %-62s gpu vs cpu twin: %s, %zu of %zu bit-identical\n",
                          cases[c][0], text, r.pass ? "PASS" : "FAIL", same, n);
            assert_true(r.pass);
            free(cpu);
            free(gpu);
            free(cpu64);
            kk_test_pair_close(&s);
        }
}

/* x and y as views with gaps between rows (a row stride of n + 3 elements:
 * scalar loads) give the contiguous run's bits (vector loads where n allows),
 * and the gaps keep their poison. */
static void strided_rows_match(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"rmsnorm", "rows=20 n=4096"},
        {"rmsnorm", "rows=20 n=40000"},
        {"layernorm", "rows=20 n=2048"},
        {"softmax", "rows=20 n=1024"},
        {"softmax", "rows=20 n=264"},
        {"rope", "B=2 H=3 S=5 D=64"},
        {"rope", "B=2 H=3 S=5 D=64 style=gptj"},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (int d = 0; d < 3; d++) {
            char text[160];
            snprintf(text, sizeof text, "%s dtype=%s", cases[c][1], dtypes[d]);
            kk_test_pair s;
            kk_test_pair_open(&s, "cuda:0", cases[c][0], text, 80 + c);
            const int last = s.n - 1;
            const kk_op_tensor *yd = &s.d[last];
            const kk_dtype dt = yd->dtype;
            const size_t bytes = out_bytes(&s), eb = bytes / (size_t)yd->numel;
            unsigned char *want = malloc(bytes);
            kk_assert_ok(kk_op_run(&s.p, s.dev, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            kk_assert_ok(kk_tensor_copy(s.host[last], s.dev[last]));
            memcpy(want, s.host[last]->data, bytes);
            /* padded buffers: the innermost dimension n -> n + 3, x and y alike */
            const int nd = yd->ndim;
            const int64_t inner = yd->shape[nd - 1], outer = yd->numel / inner;
            int64_t padded[KK_TENSOR_MAX_DIMS], strides[KK_TENSOR_MAX_DIMS];
            memcpy(padded, yd->shape, sizeof padded);
            padded[nd - 1] = inner + 3;
            strides[nd - 1] = 1;
            for (int k = nd - 2; k >= 0; k--) strides[k] = strides[k + 1] * padded[k + 1];
            const size_t pbytes = (size_t)(outer * (inner + 3)) * eb;
            kk_tensor *xbuf, *ybuf, *xv, *yv;
            kk_assert_ok(kk_tensor_create("cuda:0", dt, nd, padded, &xbuf));
            kk_assert_ok(kk_tensor_create("cuda:0", dt, nd, padded, &ybuf));
            unsigned char *host = malloc(pbytes), *back = malloc(pbytes);
            for (int64_t r = 0; r < outer; r++) /* x into the padded rows */
                memcpy(host + (size_t)(r * (inner + 3)) * eb,
                       (unsigned char *)s.host[0]->data + (size_t)(r * inner) * eb,
                       (size_t)inner * eb);
            kk_tensor *hx;
            kk_assert_ok(kk_tensor_wrap("cpu", dt, nd, padded, NULL, host, &hx));
            kk_assert_ok(kk_tensor_copy(xbuf, hx));
            memset(host, 0x7d, pbytes); /* y's poison */
            kk_assert_ok(kk_tensor_copy(ybuf, hx));
            kk_assert_ok(kk_tensor_wrap("cuda:0", dt, nd, yd->shape, strides, xbuf->data, &xv));
            kk_assert_ok(kk_tensor_wrap("cuda:0", dt, nd, yd->shape, strides, ybuf->data, &yv));
            kk_tensor *v[KK_OP_MAX_TENSORS];
            for (int k = 0; k < s.n; k++) v[k] = s.dev[k];
            v[0] = xv;
            v[last] = yv;
            kk_assert_ok(kk_op_run(&s.p, v, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            kk_tensor *hy;
            kk_assert_ok(kk_tensor_wrap("cpu", dt, nd, padded, NULL, back, &hy));
            kk_assert_ok(kk_tensor_copy(hy, ybuf));
            size_t diff = 0, gap = 0;
            for (int64_t r = 0; r < outer; r++) {
                const unsigned char *row = back + (size_t)(r * (inner + 3)) * eb;
                diff += memcmp(row, want + (size_t)(r * inner) * eb, (size_t)inner * eb) != 0;
                for (size_t b = (size_t)inner * eb; b < (size_t)(inner + 3) * eb; b++)
                    gap += row[b] != 0x7d;
            }
            print_message("    %-10s %-40s strided: %zu rows differ, %zu gap bytes written\n",
                          cases[c][0], text, diff, gap);
            assert_int_equal(diff, 0);
            assert_int_equal(gap, 0);
            kk_tensor_destroy(hx);
            kk_tensor_destroy(hy);
            kk_tensor_destroy(xv);
            kk_tensor_destroy(yv);
            kk_tensor_destroy(xbuf);
            kk_tensor_destroy(ybuf);
            free(host);
            free(back);
            free(want);
            kk_test_pair_close(&s);
        }
}

/* ---- wrong kernels fail ---- */

static kk_status real_cuda(const char *op, const kk_op_params *p, kk_tensor *const *t) {
    return kk__op_slot(kk_test_op(op), KK_BACKEND_CUDA).run(p, t, NULL);
}

static kk_status rms_no_eps(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.f[KK__RMS_EPS] = 1e-12;
    return real_cuda("rmsnorm", &q, t);
}

static kk_status ln_no_affine(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__LN_AFFINE] = 0;
    kk_tensor *v[2] = {t[0], t[3]};
    return real_cuda("layernorm", &q, v);
}

static kk_status smx_no_scale(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.f[KK__SMX_SCALE] = 1.0;
    return real_cuda("softmax", &q, t);
}

static kk_status rope_other_style(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__ROPE_STYLE] = q.i[KK__ROPE_STYLE] == KK__ROPE_NEOX ? KK__ROPE_GPTJ : KK__ROPE_NEOX;
    return real_cuda("rope", &q, t);
}

static kk_status rope_no_offset(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__ROPE_OFFSET] = 0;
    return real_cuda("rope", &q, t);
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    static const struct {
        const char *op, *text;
        kk_op_kernel_fn wrong;
    } cases[] = {
        {"rmsnorm", "rows=16 n=4096 eps=0.25 dtype=bf16", rms_no_eps},
        {"layernorm", "rows=16 n=1000 dtype=f32", ln_no_affine},
        {"softmax", "rows=16 n=2048 scale=0.25 dtype=f16", smx_no_scale},
        {"rope", "B=1 H=4 S=16 D=128 dtype=bf16", rope_other_style},
        {"rope", "B=1 H=4 S=16 D=64 offset=100 dtype=f32", rope_no_offset},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        kk_test_wrong_kernel_fails("cuda:0", cases[c].op, cases[c].text, cases[c].wrong, 7);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(norms_and_softmax_pass), cmocka_unit_test(rope_passes),
        cmocka_unit_test(twin_and_gpu_agree),     cmocka_unit_test(strided_rows_match),
        cmocka_unit_test(wrong_kernels_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

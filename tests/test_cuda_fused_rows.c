/* labels: gpu */
/* The fused row kernels on CUDA (src/cuda/kernels/{add_rmsnorm,rmsnorm_fp8,
 * silu_mul}.cu) and the parameters softmax.cu and rope.cu took last
 * (causal mask; per-token positions, Llama-3 scaling) on cuda:0, through kk_op_run (kk_case_run: seeded inputs,
 * outputs poisoned, float64 reference, the op's tolerances): every dtype, row
 * lengths odd and aligned, a row per warp, per block and the looping kernels.
 * Then on the same inputs the CPU twin and the GPU: rmsnorm_fp8's codes and
 * scales and add_rmsnorm's h byte for byte, the rest within tolerance;
 * strided rows (every [rows, n] tensor a view with gaps: scalar loads) give
 * the contiguous rows' bits and leave the gaps alone; wrong kernels FAIL.
 * Exits 77 (skipped) without a usable GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/dtype_cuda.h"
#include "opdef/all_ops.h"
#include "kernelkit/cases.h"

static void expect_pass(const char *op, const char *text, uint64_t seed) {
    kk_case_result r = kk_test_run_case_on("cuda:0", kk_test_op(op), text, seed);
    assert_int_equal(r.status, KK_CASE_PASS);
    for (int k = 0; k < r.noutputs; k++) assert_int_equal(r.outputs[k].unwritten, 0);
}

static const char *const dtypes[] = {"f32", "f16", "bf16"};

/* Row lengths over every kernel shape: rmsnorm_fp8 stages rows in shared
 * memory, 8 to 1 rows a block of 256 threads (32 to 256 threads a row), rows
 * past 16384 bf16 / 8192 f32 elements in tiles re-read per pass (16391,
 * 40000); add_rmsnorm has rmsnorm's shapes. */
static const int64_t lengths[] = {1,    7,    8,    37,   128,   257,   1000,  1024, 2051,
                                  4096, 4100, 8192, 8320, 12288, 16384, 16391, 40000};

static void kernels_pass(void **state) {
    (void)state;
    const int quick = getenv("KK_TEST_QUICK") != NULL;
    uint64_t seed = 1;
    for (int d = 0; d < 3; d++)
        for (int l = 0; l < (int)(sizeof lengths / sizeof lengths[0]); l++) {
            if (quick && l % 3) continue;
            const int64_t n = lengths[l];
            const int64_t rows = n >= 8192 ? 5 : n >= 1000 ? 37 : 133;
            char text[160];
            snprintf(text, sizeof text, "rows=%lld n=%lld dtype=%s", (long long)rows, (long long)n,
                     dtypes[d]);
            expect_pass("add_rmsnorm", text, seed++);
            snprintf(text, sizeof text, "rows=%lld n=%lld group=0 dtype=%s", (long long)rows,
                     (long long)n, dtypes[d]);
            expect_pass("rmsnorm_fp8", text, seed++);
            const int64_t n128 = (n + 127) / 128 * 128;
            snprintf(text, sizeof text, "rows=%lld n=%lld group=128 dtype=%s", (long long)rows,
                     (long long)n128, dtypes[d]);
            expect_pass("rmsnorm_fp8", text, seed++);
            snprintf(text, sizeof text, "M=%lld N=%lld packed=1 dtype=%s", (long long)rows,
                     (long long)n, dtypes[d]);
            expect_pass("silu_mul", text, seed++);
            snprintf(text, sizeof text, "M=%lld N=%lld packed=0 dtype=%s", (long long)rows,
                     (long long)n, dtypes[d]);
            expect_pass("silu_mul", text, seed++);
        }
    /* edges: large eps; many rows (grid-stride loops go round); a long row in
     * the looping rmsnorm_fp8 kernel with 1x128 groups */
    expect_pass("add_rmsnorm", "rows=9 n=1000 eps=0.25 dtype=bf16", seed++);
    expect_pass("rmsnorm_fp8", "rows=9 n=1024 eps=0.25 dtype=f16", seed++);
    expect_pass("rmsnorm_fp8", "rows=3 n=65536 group=128 dtype=bf16", seed++);
    expect_pass("rmsnorm_fp8", "rows=3 n=20096 group=128 dtype=f32", seed++);
    if (quick) return; /* the sanitizers' run */
    expect_pass("add_rmsnorm", "rows=70000 n=64 dtype=bf16", seed++);
    expect_pass("rmsnorm_fp8", "rows=70000 n=128 dtype=bf16", seed++);
    expect_pass("silu_mul", "M=70000 N=33 packed=1 dtype=f16", seed++);
}

/* softmax's causal mask (square, rectangular, rows that see no key, sq of
 * several matrices) and rope's per-token positions and Llama-3 scaling, on
 * every kernel shape they reach. */
static void new_params_pass(void **state) {
    (void)state;
    static const char *const smx[] = {
        "rows=64 n=64 causal=1",
        "rows=37 n=1000 causal=1 scale=0.125",
        "rows=40 n=5 causal=1 sq=10", /* n < sq: the first rows see nothing */
        "rows=96 n=4096 causal=1 sq=32 scale=0.0883883",
        "rows=8 n=40000 causal=1 sq=4", /* the looping kernel */
        "rows=20 n=16391 causal=1 sq=20",
        "rows=1 n=2051 causal=1",
    };
    static const char *const rope[] = {
        "B=3 H=4 S=17 D=128 positions=1",
        "B=2 H=3 S=5 D=64 positions=1 style=gptj rotary_dim=32",
        "B=64 H=32 S=1 D=128 positions=1 theta=500000 scaling=llama3",
        "B=1 H=8 S=300 D=128 theta=500000 scaling=llama3 original_max_position=64",
        "B=2 H=2 S=33 D=96 rotary_dim=64 scaling=llama3 factor=32 low_freq_factor=2 "
        "high_freq_factor=8 original_max_position=128 offset=1000",
        "B=4 H=2 S=9 D=7 rotary_dim=6 positions=1 style=gptj scaling=llama3 "
        "original_max_position=16",
        "B=1 H=1 S=3000 D=10 positions=1",
    };
    static const char *const kv[] = {
        "B=3 Hq=8 Hkv=2 S=1 S_max=64 D=128",
        "B=2 Hq=4 Hkv=4 S=5 S_max=32 D=64 style=gptj rotary_dim=32",
        "B=16 Hq=32 Hkv=8 S=1 S_max=512 D=128 theta=500000 scaling=llama3",
        "B=2 Hq=3 Hkv=1 S=7 S_max=20 D=7 rotary_dim=6",
        "B=1 Hq=2 Hkv=2 S=300 S_max=300 D=96 rotary_dim=64 style=gptj",
    };
    uint64_t seed = 500;
    for (int d = 0; d < 3; d++) {
        char text[256];
        for (int k = 0; k < (int)(sizeof smx / sizeof smx[0]); k++) {
            snprintf(text, sizeof text, "%s dtype=%s", smx[k], dtypes[d]);
            expect_pass("softmax", text, seed++);
        }
        for (int k = 0; k < (int)(sizeof rope / sizeof rope[0]); k++) {
            snprintf(text, sizeof text, "%s dtype=%s", rope[k], dtypes[d]);
            expect_pass("rope", text, seed++);
        }
        for (int k = 0; k < (int)(sizeof kv / sizeof kv[0]); k++) {
            snprintf(text, sizeof text, "%s dtype=%s", kv[k], dtypes[d]);
            expect_pass("rope_kv_append", text, seed++);
        }
    }
}

/* ---- the same inputs on the CPU twin and the GPU; strided rows ---- */

static size_t bytes_of(const kk_op_tensor *d) { return kk_dtype_bytes(d->dtype, (size_t)d->numel); }

/* Output k of the last GPU run into a new host buffer. */
static unsigned char *gpu_output(kk_test_pair *s, int k) {
    unsigned char *b = malloc(bytes_of(&s->d[k]));
    kk_assert_ok(kk_tensor_copy(s->host[k], s->dev[k]));
    memcpy(b, s->host[k]->data, bytes_of(&s->d[k]));
    return b;
}

static void twin_and_gpu_agree(void **state) {
    (void)state;
    /* exact: outputs that must be the CPU's bytes (by name) */
    static const struct {
        const char *op, *text, *exact;
    } cases[] = {
        {"rmsnorm_fp8", "rows=64 n=4096 group=128", "q scales"},
        {"rmsnorm_fp8", "rows=64 n=4096 group=0", "q scales"},
        {"rmsnorm_fp8", "rows=33 n=1001 group=0", "q scales"},
        {"rmsnorm_fp8", "rows=17 n=8320 group=128", "q scales"},
        {"rmsnorm_fp8", "rows=5 n=7168 group=128", "q scales"},
        {"rmsnorm_fp8", "rows=3 n=40064 group=128", "q scales"},
        {"rmsnorm_fp8", "rows=3 n=40001 group=0", "q scales"},
        {"rmsnorm_fp8", "rows=1 n=37 group=0 eps=0.01", "q scales"},
        {"rmsnorm_fp8", "rows=2 n=65536 group=0", "q scales"},
        {"rmsnorm_fp8", "rows=2 n=65536 group=128", "q scales"},
        {"rmsnorm_fp8", "rows=300 n=263 group=0", "q scales"},
        {"rmsnorm_fp8", "rows=300 n=1024 group=128", "q scales"},
        {"rmsnorm_fp8", "rows=7 n=2048 group=128", "q scales"},
        {"add_rmsnorm", "rows=64 n=4096", "h"},
        {"add_rmsnorm", "rows=33 n=1001", "h"},
        {"add_rmsnorm", "rows=3 n=40000", "h"},
        {"silu_mul", "M=64 N=4096 packed=1", ""},
        {"silu_mul", "M=33 N=1001 packed=0", ""},
        {"softmax", "rows=64 n=1024 causal=1 scale=0.125", ""},
        {"softmax", "rows=6 n=20000 causal=1 sq=3", ""},
        {"rope", "B=4 H=8 S=16 D=128 positions=1 theta=500000 scaling=llama3", ""},
        {"rope_kv_append", "B=4 Hq=8 Hkv=2 S=3 S_max=64 D=128 theta=500000 scaling=llama3",
         "v_cache"}, /* v and the copied rows exactly; k, q_out within tolerance */
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (int d = 0; d < 3; d++) {
            char text[160];
            snprintf(text, sizeof text, "%s dtype=%s", cases[c].text, dtypes[d]);
            kk_test_pair s;
            kk_test_pair_open(&s, "cuda:0", cases[c].op, text, 50 + c);
            kk_assert_ok(kk_op_run(&s.p, s.host, NULL)); /* the CPU twin */
            kk_assert_ok(kk_op_run(&s.p, s.dev, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            for (int k = 0; k < s.n; k++) {
                if (!s.d[k].is_output) continue;
                const kk_op_tensor *od = &s.d[k];
                const size_t n = (size_t)od->numel, bytes = bytes_of(od), eb = bytes / n;
                unsigned char *cpu = malloc(bytes);
                memcpy(cpu, s.host[k]->data, bytes);
                unsigned char *gpu = gpu_output(&s, k);
                double *cpu64 = malloc(n * sizeof(double));
                kk_assert_ok(kk_convert_host(cpu, od->dtype, cpu64, KK_DTYPE_F64, n));
                kk_tolerance tol;
                kk_assert_ok(kk_op_tolerance(kk_test_op(cases[c].op), od->dtype, &tol));
                kk_check_result r;
                kk_assert_ok(kk_check_output(gpu, od->dtype, cpu64, n, &tol, &r));
                size_t same = 0;
                for (size_t i = 0; i < n; i++) same += !memcmp(cpu + i * eb, gpu + i * eb, eb);
                const int exact = strstr(cases[c].exact, od->name) != NULL;
                print_message("    %-12s %-44s %-6s gpu vs cpu twin: %s, %zu of %zu "
                              "bit-identical%s\n",
                              cases[c].op, text, od->name, r.pass ? "PASS" : "FAIL", same, n,
                              exact ? " (must be all)" : "");
                assert_true(r.pass);
                if (exact) assert_int_equal(same, n);
                free(cpu);
                free(gpu);
                free(cpu64);
            }
            kk_test_pair_close(&s);
        }
}

/* Every [rows, n] tensor as a view with a row stride of n + 3 elements
 * (scalar loads and stores; w stays contiguous): the outputs are the
 * contiguous run's bytes and the gaps keep their poison. */
static void strided_rows_match(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"add_rmsnorm", "rows=20 n=4096"},   {"add_rmsnorm", "rows=20 n=40000"},
        {"rmsnorm_fp8", "rows=20 n=4096"},   {"rmsnorm_fp8", "rows=20 n=1000 group=0"},
        {"rmsnorm_fp8", "rows=5 n=40064"},   {"silu_mul", "M=20 N=1024 packed=1"},
        {"silu_mul", "M=20 N=264 packed=0"}, {"softmax", "rows=20 n=1024 causal=1 sq=10"},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (int d = 0; d < 3; d++) {
            char text[160];
            snprintf(text, sizeof text, "%s dtype=%s", cases[c][1], dtypes[d]);
            kk_test_pair s;
            kk_test_pair_open(&s, "cuda:0", cases[c][0], text, 80 + c);
            unsigned char *want[KK_OP_MAX_TENSORS] = {0};
            kk_assert_ok(kk_op_run(&s.p, s.dev, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            for (int k = 0; k < s.n; k++)
                if (s.d[k].is_output) want[k] = gpu_output(&s, k);
            kk_tensor *buf[KK_OP_MAX_TENSORS] = {0}, *view[KK_OP_MAX_TENSORS];
            for (int k = 0; k < s.n; k++) {
                const kk_op_tensor *td = &s.d[k];
                view[k] = s.dev[k];
                if (td->ndim != 2) continue;
                const int64_t rows = td->shape[0], inner = td->shape[1];
                const size_t eb = bytes_of(td) / (size_t)td->numel;
                const int64_t padded[2] = {rows, inner + 3}, strides[2] = {inner + 3, 1};
                const size_t pbytes = (size_t)(rows * (inner + 3)) * eb;
                unsigned char *host = malloc(pbytes);
                memset(host, 0x7d, pbytes); /* outputs' poison; inputs' gaps */
                if (!td->is_output)
                    for (int64_t r = 0; r < rows; r++)
                        memcpy(host + (size_t)(r * (inner + 3)) * eb,
                               (unsigned char *)s.host[k]->data + (size_t)(r * inner) * eb,
                               (size_t)inner * eb);
                kk_tensor *h;
                kk_assert_ok(kk_tensor_create("cuda:0", td->dtype, 2, padded, &buf[k]));
                kk_assert_ok(kk_tensor_wrap("cpu", td->dtype, 2, padded, NULL, host, &h));
                kk_assert_ok(kk_tensor_copy(buf[k], h));
                kk_tensor_destroy(h);
                free(host);
                kk_assert_ok(kk_tensor_wrap("cuda:0", td->dtype, 2, td->shape, strides,
                                            buf[k]->data, &view[k]));
            }
            kk_assert_ok(kk_op_run(&s.p, view, NULL));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            size_t diff = 0, gap = 0;
            for (int k = 0; k < s.n; k++) {
                const kk_op_tensor *td = &s.d[k];
                if (!td->is_output) continue;
                const int64_t rows = td->shape[0], inner = td->shape[1];
                const size_t eb = bytes_of(td) / (size_t)td->numel;
                const int64_t padded[2] = {rows, inner + 3};
                const size_t pbytes = (size_t)(rows * (inner + 3)) * eb;
                unsigned char *back = malloc(pbytes);
                kk_tensor *h;
                kk_assert_ok(kk_tensor_wrap("cpu", td->dtype, 2, padded, NULL, back, &h));
                kk_assert_ok(kk_tensor_copy(h, buf[k]));
                for (int64_t r = 0; r < rows; r++) {
                    const unsigned char *row = back + (size_t)(r * (inner + 3)) * eb;
                    diff +=
                        memcmp(row, want[k] + (size_t)(r * inner) * eb, (size_t)inner * eb) != 0;
                    for (size_t b = (size_t)inner * eb; b < (size_t)(inner + 3) * eb; b++)
                        gap += row[b] != 0x7d;
                }
                kk_tensor_destroy(h);
                free(back);
            }
            print_message("    %-12s %-40s strided: %zu rows differ, %zu gap bytes written\n",
                          cases[c][0], text, diff, gap);
            assert_int_equal(diff, 0);
            assert_int_equal(gap, 0);
            for (int k = 0; k < s.n; k++) {
                if (buf[k]) {
                    kk_tensor_destroy(view[k]);
                    kk_tensor_destroy(buf[k]);
                }
                free(want[k]);
            }
            kk_test_pair_close(&s);
        }
}

/* ---- wrong kernels fail ---- */

static kk_status real_cuda(const char *op, const kk_op_params *p, kk_tensor *const *t) {
    return kk__op_slot(kk_test_op(op), KK_BACKEND_CUDA).run(p, t, NULL);
}

static kk_status arn_no_eps(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.f[KK__ARN_EPS] = 1e-12;
    return real_cuda("add_rmsnorm", &q, t);
}

/* x in place of the residual: h = 2x (y, scale-invariant, is unchanged) */
static kk_status arn_x_twice(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_tensor *v[5] = {t[0], t[0], t[2], t[3], t[4]};
    return real_cuda("add_rmsnorm", p, v);
}

static kk_status fp8_no_eps(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.f[KK__RFP8_EPS] = 1e-12;
    return real_cuda("rmsnorm_fp8", &q, t);
}

/* the weight read from x's first row instead of w */
static kk_status fp8_w_is_x(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_tensor *w;
    kk_status st = kk_tensor_wrap("cuda:0", t[1]->dtype, 1, t[1]->shape, NULL, t[0]->data, &w);
    if (st != KK_OK) return st;
    kk_tensor *v[4] = {t[0], w, t[2], t[3]};
    st = real_cuda("rmsnorm_fp8", p, v);
    kk_tensor_destroy(w);
    return st;
}

static kk_status silu_swapped(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_tensor *v[3] = {t[1], t[0], t[2]};
    return real_cuda("silu_mul", p, v);
}

static kk_status smx_no_mask(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__SMX_CAUSAL] = 0;
    return real_cuda("softmax", &q, t);
}

/* positions offset + s instead of pos */
static kk_status rope_no_pos(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__ROPE_POSITIONS] = 0;
    kk_tensor *v[2] = {t[0], t[2]};
    return real_cuda("rope", &q, v);
}

static kk_status rope_no_llama3(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__ROPE_SCALING] = KK__ROPE_SCALING_NONE;
    return real_cuda("rope", &q, t);
}

static kk_status kv_other_theta(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.f[KK__RKV_THETA] *= 2.0;
    return real_cuda("rope_kv_append", &q, t);
}

/* k and v land in each other's cache */
static kk_status kv_swapped(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_tensor *v[KK__RKV_NTENSORS];
    for (int k = 0; k < KK__RKV_NTENSORS; k++) v[k] = t[k];
    v[KK__RKV_T_KC] = t[KK__RKV_T_VC];
    v[KK__RKV_T_VC] = t[KK__RKV_T_KC];
    return real_cuda("rope_kv_append", p, v);
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    static const struct {
        const char *op, *text;
        kk_op_kernel_fn wrong;
    } cases[] = {
        {"add_rmsnorm", "rows=16 n=4096 eps=0.25 dtype=bf16", arn_no_eps},
        {"add_rmsnorm", "rows=16 n=1001 dtype=f32", arn_x_twice},
        {"rmsnorm_fp8", "rows=16 n=4096 eps=0.1 dtype=bf16", fp8_no_eps},
        {"rmsnorm_fp8", "rows=16 n=1000 group=0 eps=0.1 dtype=f32", fp8_no_eps},
        {"rmsnorm_fp8", "rows=16 n=2048 dtype=f16", fp8_w_is_x},
        {"silu_mul", "M=16 N=999 packed=0 dtype=bf16", silu_swapped},
        {"softmax", "rows=64 n=1024 causal=1 dtype=f32", smx_no_mask},
        {"rope", "B=2 H=4 S=16 D=128 positions=1 dtype=bf16", rope_no_pos},
        {"rope", "B=1 H=4 S=64 D=128 theta=500000 scaling=llama3 offset=5000 dtype=f16",
         rope_no_llama3},
        {"rope_kv_append", "B=2 Hq=4 Hkv=2 S=1 S_max=32 D=64 dtype=f32", kv_other_theta},
        {"rope_kv_append", "B=2 Hq=4 Hkv=2 S=2 S_max=32 D=64 dtype=bf16", kv_swapped},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        kk_test_wrong_kernel_fails("cuda:0", cases[c].op, cases[c].text, cases[c].wrong, 7);
}

/* rmsnorm_fp8's e4m3(y / scale) without the division (fp8_quotient.cuh)
 * equals the division's code on quotients within 12 ulps of every kind of
 * rounding boundary; without its guard (multiply, round) it does not, so the
 * check can fail. Below sm_89 the kernels divide: nothing to compare. */
static void quotient_without_division(void **state) {
    (void)state;
    kk_device_info d;
    kk_assert_ok(kk_device_get_info("cuda:0", &d));
    if (d.cc_major * 10 + d.cc_minor < 89) skip();
    kk__quotient_check r;
    kk_assert_ok(kk__cuda_e4m3_quotient_check(0, 8, 1ull << 27, 11, &r));
    print_message("e4m3 quotient, guard 8: %llu pairs, %llu differ\n",
                  (unsigned long long)r.checked, (unsigned long long)r.mismatches);
    assert_int_equal(r.checked, 1ull << 27);
    if (r.mismatches)
        fail_msg("y 0x%08x / scale 0x%08x: the guarded product's code differs from the division's",
                 r.first_y, r.first_scale);
    kk_assert_ok(kk__cuda_e4m3_quotient_check(0, 0, 1ull << 22, 12, &r));
    print_message("e4m3 quotient, no guard: %llu pairs, %llu differ\n",
                  (unsigned long long)r.checked, (unsigned long long)r.mismatches);
    assert_true(r.mismatches > 0);
    kk_assert_status(kk__cuda_e4m3_quotient_check(0, 3, 1, 1, &r), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "guard");
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernels_pass),       cmocka_unit_test(new_params_pass),
        cmocka_unit_test(twin_and_gpu_agree), cmocka_unit_test(strided_rows_match),
        cmocka_unit_test(wrong_kernels_fail), cmocka_unit_test(quotient_without_division),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

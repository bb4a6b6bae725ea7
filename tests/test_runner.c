/* labels: unit cpu */
/* The case runner, case generation and the suites.
 *
 * The real `convert` op passes on the CPU for every dtype pair; copies of its
 * row with deliberately wrong kernels (an output shifted by one element, one
 * element never written, rounding toward zero, a write into the input) fail,
 * an erring kernel is an ERROR and an unsupported case a SKIP. A naive GEMM
 * put into a copy of the gemm row passes through the tolerance path. Case
 * generation is deterministic per seed; fuzzed parameters are always valid,
 * include size 1 and sizes that are no multiple of 16, and stay small; the
 * 27-config attention suite is exactly the seeds' matrix; suite files load
 * (dtype expansion, seeds, clear errors, the search path); the exit-status
 * logic gives 2 when nothing could run. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/convert.h"
#include "kernelkit/cases.h"

static const kk_dtype floats[7] = {KK_DTYPE_F64,  KK_DTYPE_F32,      KK_DTYPE_F16,
                                   KK_DTYPE_BF16, KK_DTYPE_FP8_E4M3, KK_DTYPE_FP8_E5M2,
                                   KK_DTYPE_E2M1};

static const kk_run_options cpu = {.device = "cpu"};

/* A case of `op` (a registry row or a test's copy of one) from a params text.
 */
static kk_case make_case(const kk_op *op, const char *text, uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    kk_assert_ok(kk_op_params_parse(op, text, &c.params));
    snprintf(c.name, sizeof c.name, "test/%s", op->name);
    c.seed = seed;
    return c;
}

static kk_case_status run(const kk_case *c, kk_case_result *r) {
    kk_assert_ok(kk_case_run(c, &cpu, r));
    if (r->status != KK_CASE_PASS)
        print_message("    %s: %s\n", kk_case_status_name(r->status), r->message);
    return r->status;
}

static const kk_op *find(const char *name) {
    const kk_op *op;
    kk_assert_ok(kk_op_find(name, &op));
    return op;
}

/* ---- the real convert op ---- */

static void convert_passes_for_every_pair(void **state) {
    (void)state;
    for (int s = 0; s < 7; s++)
        for (int d = 0; d < 7; d++)
            for (int n = 1; n <= 1001; n += 500) {
                char text[128];
                snprintf(text, sizeof text, "n=%d src=%s dst=%s", n, kk_dtype_name(floats[s]),
                         kk_dtype_name(floats[d]));
                kk_case c = make_case(find("convert"), text, (uint64_t)(s * 7 + d));
                kk_case_result r;
                if (run(&c, &r) != KK_CASE_PASS) fail_msg("%s failed", text);
                assert_int_equal(r.noutputs, 1);
                assert_true(r.max_abs_err == 0.0);
                /* no NaN in e2m1: the unwritten-element check needs two runs */
                if (floats[d] == KK_DTYPE_E2M1) assert_int_equal(r.kernel_runs, 2);
            }
}

/* ---- wrong convert kernels ---- */

enum { BUG_SHIFT, BUG_UNWRITTEN, BUG_TOWARD_ZERO, BUG_INPUT, BUG_ERROR, BUG_UNSUPPORTED };
static int g_bug;

static double get(const kk_tensor *t, int64_t i) {
    const uint8_t *b = t->data;
    double v;
    if (t->dtype == KK_DTYPE_E2M1) return kk_e2m1_to_f32((uint8_t)(b[i / 2] >> 4 * (i % 2)));
    kk_assert_ok(
        kk_convert_host(b + i * kk_dtype_bits(t->dtype) / 8, t->dtype, &v, KK_DTYPE_F64, 1));
    return v;
}

/* Element i of t as its code (bits), and back. */
static uint64_t code(const kk_tensor *t, int64_t i) {
    const uint8_t *b = t->data;
    if (t->dtype == KK_DTYPE_E2M1) return (b[i / 2] >> 4 * (i % 2)) & 0xF;
    uint64_t v = 0;
    memcpy(&v, b + i * kk_dtype_bits(t->dtype) / 8, (size_t)kk_dtype_bits(t->dtype) / 8);
    return v;
}

static void set_code(kk_tensor *t, int64_t i, uint64_t v) {
    uint8_t *b = t->data;
    if (t->dtype == KK_DTYPE_E2M1) {
        b[i / 2] = (uint8_t)((b[i / 2] & (0xF0 >> 4 * (i % 2))) | (v & 0xF) << 4 * (i % 2));
        return;
    }
    memcpy(b + i * kk_dtype_bits(t->dtype) / 8, &v, (size_t)kk_dtype_bits(t->dtype) / 8);
}

static kk_status convert_one(const kk_tensor *x, int64_t i, kk_tensor *y, int64_t j) {
    const double v = get(x, i);
    uint8_t tmp[8] = {0};
    kk_status st = kk_convert_host(&v, KK_DTYPE_F64, tmp, y->dtype, 1);
    kk_tensor *one;
    kk_assert_ok(kk_tensor_wrap("cpu", y->dtype, 1, (int64_t[]){1}, NULL, tmp, &one));
    set_code(y, j, code(one, 0));
    kk_tensor_destroy(one);
    return st;
}

static kk_status wrong_convert(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const int64_t n = kk_tensor_numel(t[0]);
    if (g_bug == BUG_ERROR) return KK_ERR_KERNEL_LAUNCH;
    if (g_bug == BUG_UNSUPPORTED) return KK_ERR_UNSUPPORTED;
    for (int64_t i = 0; i < n; i++) {
        if (g_bug == BUG_UNWRITTEN && i == n - 1) continue;
        convert_one(t[0], i, t[1], g_bug == BUG_SHIFT ? (i + 1) % n : i);
        const double x = get(t[0], i), y = get(t[1], i);
        /* toward zero: one code down in magnitude (sign-magnitude formats) */
        if (g_bug == BUG_TOWARD_ZERO && y == y && x == x && y - y == 0 && (y > 0 ? y > x : y < x))
            set_code(t[1], i, code(t[1], i) - 1);
    }
    if (g_bug == BUG_INPUT) set_code(t[0], n / 2, code(t[0], n / 2) ^ 1);
    (void)p;
    return KK_OK;
}

static kk_case_result run_wrong(int bug, const char *text) {
    kk_op row = *find("convert"); /* the test's own row: the registry is read-only */
    kk__op_swap(&row, KK_BACKEND_CPU, wrong_convert);
    g_bug = bug;
    kk_case c = make_case(&row, text, 11);
    kk_case_result r;
    run(&c, &r);
    return r;
}

static void wrong_converts_fail(void **state) {
    (void)state;
    static const char *const texts[] = {"n=100 src=f32 dst=bf16", "n=100 src=f32 dst=f16",
                                        "n=99 src=f32 dst=fp8_e4m3", "n=99 src=bf16 dst=e2m1",
                                        "n=64 src=f16 dst=fp8_e5m2"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        assert_int_equal(run_wrong(BUG_SHIFT, texts[k]).status, KK_CASE_FAIL);
        assert_int_equal(run_wrong(BUG_TOWARD_ZERO, texts[k]).status, KK_CASE_FAIL);
        assert_int_equal(run_wrong(BUG_INPUT, texts[k]).status, KK_CASE_FAIL);
        kk_case_result r = run_wrong(BUG_UNWRITTEN, texts[k]);
        assert_int_equal(r.status, KK_CASE_FAIL);
        assert_string_equal(r.first_bad_tensor, "y");
        assert_int_equal(r.first_bad, r.outputs[0].check.count - 1);
        kk_assert_contains(r.message, "y: ");
    }
    /* e2m1 has no NaN: the last element is found by the two poison runs */
    kk_case_result r = run_wrong(BUG_UNWRITTEN, "n=99 src=bf16 dst=e2m1");
    assert_int_equal(r.outputs[0].unwritten, 1);
    assert_int_equal(r.outputs[0].first_unwritten, 98);
    kk_assert_contains(run_wrong(BUG_INPUT, "n=8 src=f32 dst=f16").message, "changed input x");
    r = run_wrong(BUG_ERROR, "n=8 src=f32 dst=f16");
    assert_int_equal(r.status, KK_CASE_ERROR);
    assert_int_equal(run_wrong(BUG_UNSUPPORTED, "n=8 src=f32 dst=f16").status, KK_CASE_SKIP);
}

/* ---- a float op through the tolerance path: a naive GEMM ---- */

static kk_status naive_gemm(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const int64_t M = t[0]->shape[0], K = t[0]->shape[1], N = t[1]->shape[0];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += (float)(get(t[0], m * K + k) * get(t[1], n * K + k));
            const double v = acc;
            uint8_t tmp[8];
            kk_assert_ok(kk_convert_host(&v, KK_DTYPE_F64, tmp, t[2]->dtype, 1));
            memcpy((uint8_t *)t[2]->data + (m * N + n) * kk_dtype_bits(t[2]->dtype) / 8, tmp,
                   (size_t)kk_dtype_bits(t[2]->dtype) / 8);
        }
    (void)p;
    return KK_OK;
}

static void gemm_copy_passes_and_flop_limit_skips(void **state) {
    (void)state;
    kk_op row = *find("gemm");
    kk__op_swap(&row, KK_BACKEND_CPU, naive_gemm);
    static const char *const texts[] = {"M=5 N=7 K=33 dtype=f32", "M=17 N=3 K=64 dtype=bf16",
                                        "M=1 N=1 K=1 dtype=f16"};
    for (int k = 0; k < 3; k++) {
        kk_case c = make_case(&row, texts[k], 5);
        kk_case_result r;
        assert_int_equal(run(&c, &r), KK_CASE_PASS);
        assert_true(r.max_abs_err > 0.0 || k == 2);
    }
    kk_case c = make_case(&row, "M=64 N=64 K=64 dtype=f32", 5);
    kk_run_options limited = {.device = "cpu", .max_ref_flops = 1000.0};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &limited, &r));
    assert_int_equal(r.status, KK_CASE_SKIP);
    kk_assert_contains(r.message, "GFLOP");
}

/* ---- no kernel: SKIP, exit status 2 ---- */

/* A copy of a row with no kernel at all (every real op has a CPU kernel). */
static kk_op without_kernels(const char *name) {
    kk_op row = *find(name);
    kk__op_swap_none(&row);
    return row;
}

static void no_kernel_skips_and_exit_codes(void **state) {
    (void)state;
    const kk_op bare = without_kernels("attention");
    kk_case c = make_case(&bare, "B=1 Hq=1 Hkv=1 Sq=4 Sk=4 D=16", 1);
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &cpu, &r));
    assert_int_equal(r.status, KK_CASE_SKIP);
    kk_assert_contains(r.message, "no cpu kernel for attention (kernels: none)");
    kk_check_tally t = {0};
    assert_int_equal(kk_check_tally_exit_code(&t), 2); /* nothing selected */
    kk_check_tally_add(&t, r.status);
    assert_int_equal(kk_check_tally_exit_code(&t), 2); /* nothing could run */
    kk_check_tally_add(&t, KK_CASE_PASS);
    assert_int_equal(kk_check_tally_exit_code(&t), 0);
    kk_check_tally_add(&t, KK_CASE_ERROR);
    assert_int_equal(kk_check_tally_exit_code(&t), 1);
    assert_int_equal(t.passed + t.failed + t.skipped, 3);
    char have[64];
    kk_assert_ok(kk_op_backends_format(find("convert"), have, sizeof have));
    /* a build without CUDA has no CUDA kernels */
    assert_string_equal(have,
                        kk_op_has_kernel(find("convert"), KK_BACKEND_CUDA) ? "cpu, cuda" : "cpu");
    kk_assert_ok(kk_op_backends_format(&bare, have, sizeof have));
    assert_string_equal(have, "none");
}

/* ---- kernelkit run's pieces: the CPU kernel equals the rounded reference ----
 */

static void run_host_kernel_equals_reference(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(find("convert"), "n=1000 src=f32 dst=bf16", &p));
    float x[1000];
    uint16_t y_kernel[1000], y_ref[1000];
    kk_assert_ok(kk_case_fill_inputs(&p, 3, KK_DIST_FULL, (void *[]){x}));
    kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){x, y_kernel}));
    kk_assert_ok(kk_run_reference_host(&p, (void *[]){x, y_ref}));
    for (int i = 0; i < 1000; i++)
        if (y_kernel[i] != y_ref[i] && !(x[i] != x[i])) /* NaN payloads may differ */
            fail_msg("element %d: kernel %04x reference %04x", i, y_kernel[i], y_ref[i]);
    const kk_op bare = without_kernels("gemm");
    kk_assert_ok(kk_op_params_parse(&bare, "M=2 N=2 K=2", &p));
    uint16_t g[3][4];
    kk_assert_status(kk_run_kernel_host(&p, "cpu", (void *[]){g[0], g[1], g[2]}),
                     KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "--device reference");
}

/* ---- case generation ---- */

static void inputs_are_deterministic(void **state) {
    (void)state;
    for (int i = 0; i < kk_op_count(); i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(kk_op_at(i), 9, 3, KK_DIST_FULL, NULL, &c));
        kk_op_tensor t[KK_OP_MAX_TENSORS];
        int n = 0;
        kk_assert_ok(kk_op_tensors(&c.params, t, &n));
        void *a[KK_OP_MAX_TENSORS], *b[KK_OP_MAX_TENSORS], *d[KK_OP_MAX_TENSORS];
        size_t bytes[KK_OP_MAX_TENSORS], total = 0, same_other = 0;
        for (int k = 0; k < n; k++) {
            bytes[k] = kk_dtype_bytes(t[k].dtype, (size_t)t[k].numel);
            a[k] = calloc(1, bytes[k]), b[k] = calloc(1, bytes[k]), d[k] = calloc(1, bytes[k]);
        }
        kk_assert_ok(kk_case_fill_inputs(&c.params, 42, KK_DIST_FULL, a));
        kk_assert_ok(kk_case_fill_inputs(&c.params, 42, KK_DIST_FULL, b));
        kk_assert_ok(kk_case_fill_inputs(&c.params, 43, KK_DIST_FULL, d));
        for (int k = 0; k < n && !t[k].is_output; k++) {
            assert_memory_equal(a[k], b[k], bytes[k]);
            total += bytes[k];
            same_other += memcmp(a[k], d[k], bytes[k]) == 0 ? bytes[k] : 0;
        }
        assert_true(same_other < total); /* another seed, other data */
        for (int k = 0; k < n; k++) free(a[k]), free(b[k]), free(d[k]);
        /* the fuzzer: same (seed, index), same case; another seed, other cases */
        kk_case again, other;
        kk_assert_ok(kk_case_fuzz(kk_op_at(i), 9, 3, KK_DIST_FULL, NULL, &again));
        assert_memory_equal(&c, &again, sizeof c);
        int differ = 0;
        for (int k = 0; k < 8; k++) {
            kk_assert_ok(kk_case_fuzz(kk_op_at(i), 9, k, KK_DIST_FULL, NULL, &c));
            kk_assert_ok(kk_case_fuzz(kk_op_at(i), 10, k, KK_DIST_FULL, NULL, &other));
            differ += memcmp(&c.params, &other.params, sizeof c.params) != 0;
        }
        assert_true(differ > 0);
    }
    assert_int_equal(kk_case_seed(1, "smoke/gemm/x"), kk_case_seed(1, "smoke/gemm/x"));
    assert_true(kk_case_seed(1, "smoke/gemm/x") != kk_case_seed(2, "smoke/gemm/x"));
    assert_true(kk_case_seed(1, "smoke/gemm/x") != kk_case_seed(1, "smoke/gemm/y"));
}

static void fuzz_params_are_valid_and_varied(void **state) {
    (void)state;
    for (int i = 0; i < kk_op_count(); i++) {
        const kk_op *op = kk_op_at(i);
        int ones = 0, odd_tiles = 0;
        for (int k = 0; k < 1000; k++) {
            kk_case c;
            kk_assert_ok(kk_case_fuzz(op, 2024, k, KK_DIST_FULL, NULL, &c));
            kk_assert_ok(kk_op_params_validate(&c.params));
            assert_true(kk_op_flops(&c.params) <= 0x1p25);
            for (int j = 0; j < op->nparams; j++) {
                const kk_op_param *d = &op->params[j];
                if (d->kind != KK_PARAM_INT || d->min < 1) continue;
                ones += c.params.i[j] == 1;
                odd_tiles += d->multiple <= 1 && c.params.i[j] % 16 != 0;
            }
        }
        print_message("    %s: %d sizes of 1, %d sizes not a multiple of 16\n", op->name, ones,
                      odd_tiles);
        assert_true(ones > 0 && odd_tiles > 0);
    }
}

static void big_fuzz_fills_the_budget(void **state) {
    (void)state;
    const kk_case_memory budget = {.device_bytes = UINT64_C(1) << 26,
                                   .host_bytes = UINT64_C(1) << 28};
    for (int i = 0; i < kk_op_count(); i++) {
        kk_case c;
        kk_case_memory need;
        kk_assert_ok(kk_case_fuzz(kk_op_at(i), 5, 0, KK_DIST_FULL, &budget, &c));
        kk_assert_ok(kk_op_params_validate(&c.params));
        kk_assert_ok(kk_case_memory_need(&c.params, &need));
        assert_true(need.device_bytes <= budget.device_bytes &&
                    need.host_bytes <= budget.host_bytes);
        /* it grew: at least an eighth of one budget is used */
        assert_true(need.device_bytes > budget.device_bytes / 8 ||
                    need.host_bytes > budget.host_bytes / 8);
    }
}

/* ---- suites ---- */

static void attention_fuzz27_is_the_seeds_matrix(void **state) {
    (void)state;
    kk_suite suite;
    int seen[3][3][3] = {{{0}}};
    kk_assert_ok(kk_suite_load("attention-fuzz27", 1, KK_DIST_FULL, &suite));
    assert_int_equal(suite.count, 27);
    for (int k = 0; k < suite.count; k++) {
        const kk_op_params *p = &suite.cases[k].params;
        assert_string_equal(p->op->name, "attention");
        const int64_t S = kk_op_params_int(p, "Sq"), B = kk_op_params_int(p, "B"),
                      H = kk_op_params_int(p, "Hq");
        assert_int_equal(kk_op_params_int(p, "Sk"), S);
        assert_int_equal(kk_op_params_int(p, "Hkv"), H);
        assert_int_equal(kk_op_params_int(p, "D"), 64);
        assert_int_equal(kk_op_params_int(p, "causal"), 0);
        assert_int_equal(kk_op_params_int(p, "dtype"), KK_DTYPE_F16);
        const int s = S == 448 ? 0 : S == 512 ? 1 : S == 640 ? 2 : -1;
        const int b = B == 16 ? 0 : B == 32 ? 1 : B == 48 ? 2 : -1;
        const int h = H == 4 ? 0 : H == 8 ? 1 : H == 16 ? 2 : -1;
        assert_true(s >= 0 && b >= 0 && h >= 0);
        seen[s][b][h]++;
    }
    for (int k = 0; k < 27; k++) assert_int_equal(seen[k / 9][k / 3 % 3][k % 3], 1);
    kk_suite_free(&suite);
}

/* Every shipped suite loads; case names are unique across all of them; the
 * dtype expansion and the seeds are what they were when the suites were C
 * data (the seeds below were printed by that version). */
static void shipped_suites_load_and_names_are_unique(void **state) {
    (void)state;
    char **names = NULL;
    int nnames = 0, n = 0, gpumode = 0, convert_n37 = 0, untimed = 0;
    kk_assert_ok(kk_suite_names(&names, &nnames));
    kk_case *all = NULL;
    for (int i = 0; i < nnames; i++) {
        kk_suite s;
        if (kk_suite_load(names[i], 1, KK_DIST_FULL, &s) != KK_OK)
            fail_msg("%s: %s", names[i], kk_last_error_message());
        assert_string_equal(s.name, names[i]);
        assert_true(s.count > 0);
        all = realloc(all, (size_t)(n + s.count) * sizeof *all);
        assert_non_null(all);
        memcpy(all + n, s.cases, (size_t)s.count * sizeof *all);
        n += s.count;
        kk_suite_free(&s);
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(all[i].name, all[j].name) == 0) fail_msg("duplicate case %s", all[i].name);
        kk_assert_ok(kk_op_params_validate(&all[i].params));
        assert_true(all[i].seed == kk_case_seed(1, all[i].name));
        gpumode += strstr(all[i].name, "correctness/nvfp4_gemv/gpumode-test") != NULL;
        convert_n37 += strncmp(all[i].name, "smoke/convert/n37-", 18) == 0;
        untimed += all[i].no_bench;
    }
    assert_int_equal(gpumode, 18);     /* 9 shapes x 2 scale layouts */
    assert_int_equal(convert_n37, 49); /* every (src, dst) pair */
    assert_true(untimed > 100);        /* smoke's tiny cases */
    kk_case found;
    kk_assert_ok(kk_suite_case_find(all[n / 2].name, 1, KK_DIST_FULL, &found));
    assert_memory_equal(&found, &all[n / 2], sizeof found);
    kk_assert_ok(kk_suite_case_find("smoke/convert/n37-f32-bf16", 1, KK_DIST_FULL, &found));
    assert_int_equal(kk_case_dtype(&found.params), KK_DTYPE_BF16);
    assert_true(found.seed == UINT64_C(18225643434663463300));
    assert_true(found.no_bench);
    kk_assert_ok(kk_suite_case_find("correctness/nvfp4_gemv/gpumode-test5-blocked", 1, KK_DIST_FULL,
                                    &found));
    assert_true(found.seed == UINT64_C(10865498270401120896));
    assert_int_equal(kk_op_params_int(&found.params, "M"), 2432);
    /* "gemm/..." is not in gemm.json: found in cpu-linear.json */
    kk_assert_ok(kk_suite_case_find("gemm/512x4096x4096-f32", 7, KK_DIST_GPUMODE, &found));
    assert_int_equal(kk_op_params_int(&found.params, "M"), 512);
    assert_true(found.seed == kk_case_seed(7, "gemm/512x4096x4096-f32"));
    assert_int_equal(found.dist, KK_DIST_GPUMODE);
    kk_assert_status(kk_suite_case_find("smoke/convert/nope", 1, KK_DIST_FULL, &found),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "smoke/convert/nope");
    kk_suite_names_free(names, nnames);
    free(all);
}

/* ---- suite files: the loader on files of the test's own ---- */

static char suite_dir[64];

static const char *write_suite(const char *name, const char *json) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s.json", suite_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    return path;
}

static int make_suite_dir(void **state) {
    (void)state;
    snprintf(suite_dir, sizeof suite_dir, "/tmp/kk_test_suites_XXXXXX");
    return mkdtemp(suite_dir) ? 0 : -1;
}

static int remove_suite_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", suite_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void suite_file_expands_free_dtypes(void **state) {
    (void)state;
    const char *path = write_suite(
        "expand", "{\"name\": \"mine\", \"cases\": ["
                  "{\"name\": \"t/gemm/2x3x4\", \"op\": \"gemm\", \"params\": \"M=2 N=3 K=4\"},"
                  "{\"name\": \"t/gemm/fixed\", \"op\": \"gemm\", \"params\": \"M=2 N=3 K=4 "
                  "dtype=f16\", \"bench\": false, \"note\": \"why\"},"
                  "{\"name\": \"t/fp8\", \"op\": \"fp8_gemm\", \"params\": \"M=2 N=3 K=4 "
                  "a_dtype=fp8_e4m3 b_dtype=fp8_e4m3\"}]}");
    kk_suite s;
    kk_assert_ok(kk_suite_load(path, 5, KK_DIST_FULL, &s));
    assert_string_equal(s.name, "mine");
    assert_string_equal(s.path, path);
    const kk_op_param *dtype = NULL;
    for (int i = 0; i < find("gemm")->nparams; i++)
        if (strcmp(find("gemm")->params[i].name, "dtype") == 0) dtype = &find("gemm")->params[i];
    assert_non_null(dtype);
    int nchoices = 0;
    while (dtype->choices[nchoices]) nchoices++;
    /* gemm's free dtype: one case per choice; the fixed one; fp8's free c_dtype */
    assert_true(s.count > nchoices + 1);
    for (int i = 0; i < nchoices; i++) {
        char want[64];
        snprintf(want, sizeof want, "t/gemm/2x3x4-%s", dtype->choices[i]);
        assert_string_equal(s.cases[i].name, want);
        assert_string_equal(kk_dtype_name(kk_case_dtype(&s.cases[i].params)), dtype->choices[i]);
        assert_true(s.cases[i].seed == kk_case_seed(5, want));
        assert_int_equal(s.cases[i].no_bench, 0);
    }
    assert_string_equal(s.cases[nchoices].name, "t/gemm/fixed");
    assert_int_equal(s.cases[nchoices].no_bench, 1);
    for (int i = nchoices + 1; i < s.count; i++)
        assert_int_equal(strncmp(s.cases[i].name, "t/fp8-", 6), 0);
    kk_suite_free(&s);
}

/* A bad file is refused with a message naming the file, the field and what
 * was expected. */
static void suite_file_errors_name_file_and_field(void **state) {
    (void)state;
    static const struct {
        const char *json, *field, *expected;
    } bad[] = {
        {"{\"cases\": [", "(document)", "valid JSON"},
        {"[1]", "(document)", "a JSON object"},
        {"{\"cases\": 3}", "cases", "an array"},
        {"{\"case\": []}", "case", "only name, description and cases"},
        {"{\"cases\": [{\"op\": \"convert\"}]}", "cases[0].name", "a non-empty string"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"convert\", \"params\": \"n=8\"}, "
         "{\"name\": \"b\", \"op\": \"nosuchop\"}]}",
         "cases[1].op", "a registered op"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"convert\", \"params\": \"n=x\"}]}",
         "cases[0].params", "n"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"convert\", \"params\": 8}]}", "cases[0].params",
         "a string"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"convert\", \"bench\": 0}]}", "cases[0].bench",
         "true or false"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"convert\", \"parms\": \"n=8\"}]}",
         "cases[0].parms", "only name, op, params, bench and note"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"convert\", \"params\": \"n=8 src=f32 "
         "dst=f32\"}, "
         "{\"name\": \"a\", \"op\": \"convert\", \"params\": \"n=9 src=f32 dst=f32\"}]}",
         "cases[1].name", "no other case has"},
        {"{\"cases\": [{\"name\": \"a\", \"op\": \"fp8_gemm\", \"params\": "
         "\"a_dtype=fp8_e5m2 b_dtype=fp8_e5m2 c_dtype=f32\"}]}",
         "cases[0].params", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[16], want[256];
        snprintf(name, sizeof name, "bad%zu", i);
        const char *path = write_suite(name, bad[i].json);
        kk_suite s;
        kk_assert_status(kk_suite_load(path, 1, KK_DIST_FULL, &s), KK_ERR_INVALID_ARGUMENT);
        snprintf(want, sizeof want, "bad suite file %s: %s: ", path, bad[i].field);
        kk_assert_contains(kk_last_error_message(), want);
        kk_assert_contains(kk_last_error_message(), bad[i].expected);
        kk_suite_free(&s);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/none.json", suite_dir);
    kk_suite s;
    kk_assert_status(kk_suite_load(path, 1, KK_DIST_FULL, &s), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), path);
    kk_suite_free(&s);
}

/* By name: $KK_SUITES_DIR (a ':' list) first, then the older $KK_BENCH_SUITES,
 * then the built-in directories; not found lists where it looked. */
static void suites_are_found_by_name(void **state) {
    (void)state;
    write_suite("only-here", "{\"cases\": [{\"name\": \"here/convert/n3\", \"op\": \"convert\", "
                             "\"params\": \"n=3 src=f32 dst=f16\"}]}");
    /* a smoke of the test's own hides the shipped one */
    write_suite("smoke", "{\"cases\": [{\"name\": \"mysmoke/convert/n5\", \"op\": \"convert\", "
                         "\"params\": \"n=5 src=f32 dst=f16\"}]}");
    kk_suite s;
    char path[KK_SUITE_PATH_MAX], list[256];
    unsetenv("KK_SUITES_DIR");
    unsetenv("KK_BENCH_SUITES");
    kk_assert_status(kk_suite_locate("only-here", path, sizeof path), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), "no suite 'only-here'");
    kk_assert_contains(kk_last_error_message(), KK_SOURCE_DIR "/bench/suites");
    kk_assert_ok(kk_suite_load("smoke", 1, KK_DIST_FULL, &s)); /* the shipped one */
    assert_true(s.count > 100);
    kk_suite_free(&s);

    snprintf(list, sizeof list, "/nonexistent:%s", suite_dir);
    for (int v = 0; v < 2; v++) {
        setenv(v ? "KK_BENCH_SUITES" : "KK_SUITES_DIR", list, 1);
        kk_assert_ok(kk_suite_load("only-here", 1, KK_DIST_FULL, &s));
        assert_int_equal(s.count, 1);
        assert_string_equal(s.name, "only-here"); /* the file's base name */
        kk_suite_free(&s);
        kk_assert_ok(kk_suite_load("smoke", 1, KK_DIST_FULL, &s));
        assert_int_equal(s.count, 1);
        kk_suite_free(&s);
        char **names = NULL;
        int n = 0, seen = 0;
        kk_assert_ok(kk_suite_names(&names, &n));
        for (int i = 0; i < n; i++)
            seen += !strcmp(names[i], "only-here") + !strcmp(names[i], "smoke");
        assert_int_equal(seen, 2); /* each once */
        kk_suite_names_free(names, n);
        kk_case c;
        kk_assert_ok(kk_suite_case_find("here/convert/n3", 1, KK_DIST_FULL, &c));
        assert_int_equal(kk_op_params_int(&c.params, "n"), 3);
        unsetenv(v ? "KK_BENCH_SUITES" : "KK_SUITES_DIR");
    }
}

static void force_dtype(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(find("gemm"), "dtype=f32", &p));
    kk_assert_ok(kk_case_force_dtype(&p, KK_DTYPE_BF16));
    assert_int_equal(kk_case_dtype(&p), KK_DTYPE_BF16);
    kk_assert_status(kk_case_force_dtype(&p, KK_DTYPE_E2M1), KK_ERR_UNSUPPORTED);
    kk_assert_ok(kk_op_params_parse(find("convert"), "src=f16 dst=f32", &p));
    kk_assert_ok(kk_case_force_dtype(&p, KK_DTYPE_E2M1));
    assert_int_equal(p.i[KK__CVT_DST], KK_DTYPE_E2M1);
    assert_int_equal(p.i[KK__CVT_SRC], KK_DTYPE_F16);
    kk_assert_ok(kk_op_params_parse(find("nvfp4_gemv"), "", &p));
    kk_assert_ok(kk_case_force_dtype(&p, KK_DTYPE_F16));
    kk_assert_status(kk_case_force_dtype(&p, KK_DTYPE_BF16), KK_ERR_UNSUPPORTED);
}

static void result_json(void **state) {
    (void)state;
    kk_case c = make_case(find("convert"), "n=3 src=f32 dst=f16", 1);
    kk_case_result r;
    char *json = NULL;
    assert_int_equal(run(&c, &r), KK_CASE_PASS);
    kk_assert_ok(kk_case_result_json(&c, &r, &json));
    kk_assert_contains(json, "\"status\":\"PASS\"");
    kk_assert_contains(json, "\"seed\":\"1\"");
    free(json);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(convert_passes_for_every_pair),
        cmocka_unit_test(wrong_converts_fail),
        cmocka_unit_test(gemm_copy_passes_and_flop_limit_skips),
        cmocka_unit_test(no_kernel_skips_and_exit_codes),
        cmocka_unit_test(run_host_kernel_equals_reference),
        cmocka_unit_test(inputs_are_deterministic),
        cmocka_unit_test(fuzz_params_are_valid_and_varied),
        cmocka_unit_test(big_fuzz_fills_the_budget),
        cmocka_unit_test(attention_fuzz27_is_the_seeds_matrix),
        cmocka_unit_test(shipped_suites_load_and_names_are_unique),
        cmocka_unit_test(suite_file_expands_free_dtypes),
        cmocka_unit_test(suite_file_errors_name_file_and_field),
        cmocka_unit_test(suites_are_found_by_name),
        cmocka_unit_test(force_dtype),
        cmocka_unit_test(result_json),
    };
    return cmocka_run_group_tests(tests, make_suite_dir, remove_suite_dir);
}

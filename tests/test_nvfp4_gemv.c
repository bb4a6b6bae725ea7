/* labels: unit cpu */
/* nvfp4_gemv's CPU kernel (src/cpu/nvfp4_gemv_cpu.c), run through kk_op_run by
 * the harness's runner (kk_case_run: seeded inputs, poisoned output, float64
 * reference, the row's GPU MODE tolerance) on odd shapes, both scale layouts,
 * global scales on and off, both input distributions. Then the checker is
 * shown to catch realistic bugs: each wrong kernel below, put in a copy of the
 * registry row, must FAIL the same cases. The CUDA kernel's arithmetic and
 * indexing, emulated lane by lane on the CPU (kk__nvfp4_gemv_emulate), pass
 * the same checks without a GPU. Finally: the decoder against the
 * library's e2m1 table, the AVX2 and SSE2 builds of the loops give the same
 * bits, and the slot refuses tensors that do not match the parameters. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "kernelkit/cases.h"

float kk__nvfp4_e2m1_decode_cpu(uint32_t code); /* src/cpu/nvfp4_gemv_cpu.c */
/* src/cuda/kernels/nvfp4_gemv.cu, only in a build with CUDA (weak: a build
 * without it links, and the emulation tests skip). */
kk_status kk__nvfp4_gemv_emulate(const kk_op_params *p, kk_tensor *const *t, int sms, int variant,
                                 int rows) __attribute__((weak));

static const kk_op *gemv_row(void) {
    const kk_op *op;
    kk_assert_ok(kk_op_find("nvfp4_gemv", &op));
    return op;
}

/* Run one case of `row` (the registry's or a copy with another CPU slot). */
static kk_case_result run(const kk_op *row, const char *text, kk_input_dist dist, uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test/nvfp4_gemv");
    kk_assert_ok(kk_op_params_parse(row, text, &c.params));
    c.seed = seed;
    c.dist = dist;
    kk_run_options o = {.device = "cpu"};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    print_message("    %-4s %-7s %-52s max_abs %.3g max_rel %.3g %s\n",
                  kk_case_status_name(r.status), kk_input_dist_name(dist), text, r.max_abs_err,
                  r.max_rel_err, r.message);
    return r;
}

/* Odd M (1, 3, 127, 129, 1000), K from 64 up, L 1..3, both layouts, global
 * scales on and off: every one passes with both input distributions. */
static const char *const shapes[] = {
    "M=1 K=64 L=1",      "M=3 K=192 L=2",   "M=127 K=320 L=1", "M=129 K=1088 L=3",
    "M=1000 K=2048 L=1", "M=128 K=256 L=1", "M=33 K=4160 L=2",
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static void odd_shapes_pass(void **state) {
    (void)state;
    int cases = 0;
    for (int s = 0; s < NSHAPES; s++)
        for (int layout = 0; layout < 2; layout++)
            for (int global = 0; global < 2; global++)
                for (int dist = 0; dist < KK_DIST_COUNT; dist++) {
                    char text[128];
                    snprintf(text, sizeof text, "%s scale_layout=%s global=%d", shapes[s],
                             layout ? "blocked" : "plain", global);
                    kk_case_result r = run(gemv_row(), text, (kk_input_dist)dist, 100 + s);
                    assert_int_equal(r.status, KK_CASE_PASS);
                    assert_int_equal(r.outputs[0].unwritten, 0);
                    cases++;
                }
    assert_int_equal(cases, NSHAPES * 8);
}

/* Many batches of few rows: the decoded b of 1000 batches of K = 16384 does
 * not fit the kernel's 64 MiB slab, so the batches go in two slabs. */
static void many_batches_pass(void **state) {
    (void)state;
    kk_case_result r =
        run(gemv_row(), "M=3 K=16384 L=1000 scale_layout=blocked global=1", KK_DIST_FULL, 3);
    assert_int_equal(r.status, KK_CASE_PASS);
    r = run(gemv_row(), "M=1 K=16384 L=1000", KK_DIST_GPUMODE, 4);
    assert_int_equal(r.status, KK_CASE_PASS);
}

/* The full distribution is not exact in f16: the check compares real errors
 * (a test whose kernel could not be wrong would see 0 everywhere). Direct
 * kk_op_run here, with the checker called by hand. */
static void direct_run_has_rounding_error(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(gemv_row(), "M=129 K=1024 L=2 global=1", &p));
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, d, &n));
    kk_tensor *t[KK_OP_MAX_TENSORS];
    void *raw[KK_OP_MAX_TENSORS];
    double *f64[KK_OP_MAX_TENSORS];
    for (int k = 0; k < n; k++) {
        kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
        raw[k] = t[k]->data;
        f64[k] = calloc((size_t)d[k].numel, sizeof(double));
    }
    kk_assert_ok(kk_case_fill_inputs(&p, 7, KK_DIST_FULL, raw));
    for (int k = 0; k < n - 1; k++)
        kk_assert_ok(kk_convert_host(raw[k], d[k].dtype, f64[k], KK_DTYPE_F64, (size_t)d[k].numel));
    kk_assert_ok(kk_op_reference(&p, (const double *const *)f64, f64 + n - 1));
    kk_assert_ok(kk_poison(raw[n - 1], KK_DTYPE_F16, (size_t)d[n - 1].numel, 0));
    kk_assert_ok(kk_op_run(&p, t, NULL));
    kk_tolerance tol;
    kk_assert_ok(kk_op_tolerance(p.op, KK_DTYPE_F16, &tol));
    kk_check_result r;
    kk_assert_ok(
        kk_check_output(raw[n - 1], KK_DTYPE_F16, f64[n - 1], (size_t)d[n - 1].numel, &tol, &r));
    print_message("    direct: max_abs %.3g max_rel %.3g\n", r.max_abs_err, r.max_rel_err);
    assert_true(r.pass);
    assert_true(r.max_abs_err > 0.0);
    assert_true(r.max_rel_err < 1e-3);
    for (int k = 0; k < n; k++) {
        kk_tensor_destroy(t[k]);
        free(f64[k]);
    }
}

/* ---- wrong kernels: each wraps the real one around a realistic bug ---- */

static kk_status real(const kk_op_params *p, kk_tensor *const *t) {
    return kk__nvfp4_gemv_cpu(p, t, NULL);
}

/* The two elements of each byte of a swapped (high nibble taken first). */
static kk_status wrong_nibble_order(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    uint8_t *a = t[0]->data;
    const size_t bytes = kk_dtype_bytes(KK_DTYPE_E2M1, (size_t)kk_tensor_numel(t[0]));
    for (size_t i = 0; i < bytes; i++) a[i] = (uint8_t)(a[i] << 4 | a[i] >> 4);
    kk_status st = real(p, t);
    for (size_t i = 0; i < bytes; i++) a[i] = (uint8_t)(a[i] << 4 | a[i] >> 4); /* restore */
    return st;
}

/* Blocked scales read as if they were plain (same byte count when M % 128 ==
 * 0 and K % 64 == 0). */
static kk_status wrong_layout(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__GEMV_LAYOUT] = KK__GEMV_PLAIN;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&q, d, &n));
    kk_tensor *v[KK_OP_MAX_TENSORS];
    for (int k = 0; k < n; k++) v[k] = t[k];
    for (int k = 2; k < 4; k++)
        kk_assert_ok(
            kk_tensor_wrap("cpu", d[k].dtype, d[k].ndim, d[k].shape, NULL, t[k]->data, &v[k]));
    kk_status st = real(&q, v);
    kk_tensor_destroy(v[2]);
    kk_tensor_destroy(v[3]);
    return st;
}

/* ga and gb left out. */
static kk_status wrong_no_global(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__GEMV_GLOBAL] = 0;
    kk_tensor *v[5] = {t[0], t[1], t[2], t[3], t[6]};
    return real(&q, v);
}

/* The last row of every batch never written. */
static kk_status wrong_last_row(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int global = (int)p->i[KK__GEMV_GLOBAL];
    kk_tensor *c = t[global ? 6 : 4];
    const int64_t M = p->i[KK__GEMV_M], L = p->i[KK__GEMV_L];
    uint16_t *keep = malloc((size_t)L * sizeof *keep);
    uint16_t *cd = c->data;
    for (int64_t l = 0; l < L; l++) keep[l] = cd[l * M + M - 1];
    kk_status st = real(p, t);
    for (int64_t l = 0; l < L; l++) cd[l * M + M - 1] = keep[l];
    free(keep);
    return st;
}

/* A scalar kernel that accumulates the blocks in f16 instead of f32. */
static kk_status wrong_f16_accumulator(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t M = p->i[KK__GEMV_M], K = p->i[KK__GEMV_K], L = p->i[KK__GEMV_L], C = K / 16;
    const int blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED;
    const int global = (int)p->i[KK__GEMV_GLOBAL];
    const uint8_t *a = t[0]->data, *b = t[1]->data, *sa = t[2]->data, *sb = t[3]->data;
    const float g = global ? *(float *)t[4]->data * *(float *)t[5]->data : 1.0f;
    uint16_t *c = t[global ? 6 : 4]->data;
    for (int64_t l = 0; l < L; l++)
        for (int64_t m = 0; m < M; m++) {
            uint16_t acc = kk_f32_to_f16(0.0f);
            for (int64_t j = 0; j < C; j++) {
                float dot = 0.0f;
                for (int64_t k = 16 * j; k < 16 * j + 16; k++) {
                    const int64_t ia = ((l * M + m) * K + k) / 2, ib = (l * K + k) / 2;
                    dot += kk_e2m1_to_f32((uint8_t)(a[ia] >> 4 * (k % 2))) *
                           kk_e2m1_to_f32((uint8_t)(b[ib] >> 4 * (k % 2)));
                }
                const int64_t oa =
                    blocked ? kk_nvfp4_blocked_offset(M, C, l, m, j) : (l * M + m) * C + j;
                const int64_t ob = blocked ? kk_nvfp4_blocked_offset(1, C, l, 0, j) : l * C + j;
                acc = kk_f32_to_f16(kk_f16_to_f32(acc) +
                                    dot * kk_e4m3_to_f32(sa[oa]) * kk_e4m3_to_f32(sb[ob]));
            }
            c[l * M + m] = kk_f32_to_f16(kk_f16_to_f32(acc) * g);
        }
    return KK_OK;
}

static kk_op with_cpu_kernel(kk_op_kernel_fn fn) {
    kk_op row = *gemv_row();
    kk__op_swap(&row, KK_BACKEND_CPU, fn);
    return row;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    const char *base = "M=256 K=2048 L=2 scale_layout=blocked global=1";
    /* the real kernel passes these very cases */
    assert_int_equal(run(gemv_row(), base, KK_DIST_FULL, 5).status, KK_CASE_PASS);
    assert_int_equal(run(gemv_row(), base, KK_DIST_GPUMODE, 5).status, KK_CASE_PASS);
    const kk_op_kernel_fn wrong[] = {wrong_nibble_order, wrong_layout, wrong_no_global,
                                     wrong_last_row, wrong_f16_accumulator};
    for (size_t w = 0; w < sizeof wrong / sizeof wrong[0]; w++) {
        const kk_op row = with_cpu_kernel(wrong[w]);
        assert_int_equal(run(&row, base, KK_DIST_FULL, 5).status, KK_CASE_FAIL);
    }
    /* GPU MODE's narrow inputs are exact: a wrong nibble order still shows */
    const kk_op row = with_cpu_kernel(wrong_nibble_order);
    assert_int_equal(run(&row, base, KK_DIST_GPUMODE, 5).status, KK_CASE_FAIL);
    /* an unwritten row is named as such */
    const kk_op lost = with_cpu_kernel(wrong_last_row);
    kk_case_result r = run(&lost, "M=129 K=64 L=3", KK_DIST_FULL, 9);
    assert_int_equal(r.status, KK_CASE_FAIL);
    assert_int_equal(r.outputs[0].check.nonfinite_count, 3); /* one per batch */
}

/* ---- the CUDA kernel, emulated on the CPU ---- */

static int emu_sms, emu_variant, emu_rows;

static kk_status emulated(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    return kk__nvfp4_gemv_emulate(p, t, emu_sms, emu_variant, emu_rows);
}

/* Every shape above plus K = 8256 (the kernel splits K over 8 warps), each in
 * the 16 combinations of variant (0, 1, 2, 4), scale layout and global
 * scales, with 4 and 8 rows per warp, on an H200-sized grid (132 SMs) and a
 * 1-SM grid (no split of K). */
static void cuda_kernel_emulated_passes(void **state) {
    (void)state;
    if (!kk__nvfp4_gemv_emulate) {
        print_message("    built without CUDA: nothing to emulate\n");
        skip();
    }
    const kk_op row = with_cpu_kernel(emulated);
    static const char *const more[] = {"M=5 K=8256 L=1", "M=256 K=7168 L=1"};
    for (int s = 0; s < NSHAPES + 2; s++)
        for (int combo = 0; combo < 32; combo++) {
            char text[128];
            snprintf(text, sizeof text, "%s scale_layout=%s global=%d",
                     s < NSHAPES ? shapes[s] : more[s - NSHAPES], combo & 2 ? "blocked" : "plain",
                     (combo >> 2) & 1);
            emu_variant = combo & 16 ? (combo & 1 ? 4 : 2) : combo & 1;
            emu_rows = combo & 8 ? 4 : 8;
            emu_sms = combo % 3 == 0 ? 1 : 132;
            kk_case_result r = run(&row, text, (kk_input_dist)((s + combo) % 2), 200 + s);
            assert_int_equal(r.status, KK_CASE_PASS);
            assert_int_equal(r.outputs[0].unwritten, 0);
        }
}

/* Host tensors of the case `text` (p, d, n, t, and raw: t's data), the
 * inputs drawn from `seed`, the output left as allocated. */
static void host_case(const char *text, uint64_t seed, kk_op_params *p, kk_op_tensor *d, int *n,
                      kk_tensor **t, void **raw) {
    kk_assert_ok(kk_op_params_parse(gemv_row(), text, p));
    kk_assert_ok(kk_op_tensors(p, d, n));
    for (int k = 0; k < *n; k++) {
        kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
        raw[k] = t[k]->data;
    }
    kk_assert_ok(kk_case_fill_inputs(p, seed, KK_DIST_FULL, raw));
}

/* All decoders are exact, and with the same split of K (as here: K limits it
 * to 4 warps for both) the rows per warp change no sum, so variants 0 to 4
 * (3 is an alias of 2, 4 is 2 with persistent CTAs: the same sums) with 4 or
 * 8 rows all give the same bits. */
static void cuda_variants_agree(void **state) {
    (void)state;
    if (!kk__nvfp4_gemv_emulate) skip();
    kk_op_params p;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_tensor *t[KK_OP_MAX_TENSORS];
    void *raw[KK_OP_MAX_TENSORS];
    host_case("M=257 K=4096 L=2 scale_layout=blocked global=1", 11, &p, d, &n, t, raw);
    const size_t cbytes = (size_t)d[n - 1].numel * 2;
    uint16_t *first = malloc(cbytes);
    kk_assert_ok(kk__nvfp4_gemv_emulate(&p, t, 132, 0, 8));
    memcpy(first, raw[n - 1], cbytes);
    for (int v = 0; v < 10; v++) {
        kk_assert_ok(kk_poison(raw[n - 1], KK_DTYPE_F16, (size_t)d[n - 1].numel, v & 1));
        kk_assert_ok(kk__nvfp4_gemv_emulate(&p, t, 132, v % 5, v < 5 ? 8 : 4));
        assert_memory_equal(first, raw[n - 1], cbytes);
    }
    kk_assert_status(kk__nvfp4_gemv_emulate(&p, t, 132, 0, 5), KK_ERR_INVALID_ARGUMENT);
    free(first);
    for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
}

/* ---- pieces ---- */

static void decoder_matches_table(void **state) {
    (void)state;
    for (uint32_t c = 0; c < 16; c++) {
        const float want = kk_e2m1_to_f32((uint8_t)c), got = kk__nvfp4_e2m1_decode_cpu(c);
        assert_memory_equal(&want, &got, sizeof want); /* -0 for code 8 included */
    }
}

/* Every sum the kernel makes is exact, so the SSE2, AVX2 and AVX-512 builds
 * of its loops agree bit for bit (KK_CPU_ISA caps the level, as a user would). */
static void vector_builds_agree(void **state) {
    (void)state;
    kk_op_params p;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_tensor *t[KK_OP_MAX_TENSORS];
    void *raw[KK_OP_MAX_TENSORS];
    host_case("M=300 K=4160 L=2 scale_layout=blocked", 3, &p, d, &n, t, raw);
    const size_t cbytes = (size_t)d[n - 1].numel * 2;
    uint16_t *first = malloc(cbytes);
    kk_assert_ok(kk_op_run(&p, t, NULL));
    memcpy(first, raw[n - 1], cbytes);
    static const char *const lower[] = {"generic", "avx2", "avx512"};
    for (int isa = 0; isa < 3 && isa < (int)kk__cpu_isa_supported(); isa++) {
        setenv("KK_CPU_ISA", lower[isa], 1);
        assert_int_equal(kk__cpu_isa(), isa);
        kk_assert_ok(kk_poison(raw[n - 1], KK_DTYPE_F16, (size_t)d[n - 1].numel, 1));
        kk_assert_ok(kk_op_run(&p, t, NULL));
        assert_memory_equal(first, raw[n - 1], cbytes);
    }
    unsetenv("KK_CPU_ISA");
    free(first);
    for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
}

/* Called directly (no kk_op_run in front), the slot still refuses tensors
 * that do not match the parameters, naming the tensor. */
static void slot_refuses_wrong_tensors(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(gemv_row(), "M=4 K=64 L=1", &p));
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_assert_ok(kk_op_tensors(&p, d, &n));
    kk_tensor *t[KK_OP_MAX_TENSORS];
    for (int k = 0; k < n; k++)
        kk_assert_ok(kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k]));
    kk_tensor *short_c;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F16, 3, (int64_t[]){1, 3, 1}, &short_c));
    kk_tensor *v[KK_OP_MAX_TENSORS] = {t[0], t[1], t[2], t[3], short_c};
    kk_assert_status(kk__nvfp4_gemv_cpu(&p, v, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "c");
    v[4] = t[4];
    v[1] = NULL;
    kk_assert_status(kk__nvfp4_gemv_cpu(&p, v, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "b");
    kk_assert_status(kk__nvfp4_gemv_cpu(&p, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    for (int k = 0; k < n; k++) kk_tensor_destroy(t[k]);
    kk_tensor_destroy(short_c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decoder_matches_table),
        cmocka_unit_test(odd_shapes_pass),
        cmocka_unit_test(many_batches_pass),
        cmocka_unit_test(direct_run_has_rounding_error),
        cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(cuda_kernel_emulated_passes),
        cmocka_unit_test(cuda_variants_agree),
        cmocka_unit_test(vector_builds_agree),
        cmocka_unit_test(slot_refuses_wrong_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

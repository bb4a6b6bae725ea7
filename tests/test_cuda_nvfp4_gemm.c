/* labels: gpu */
/* nvfp4_gemm's CUDA kernel (src/cuda/kernels/nvfp4_gemm.cu) on cuda:0 through
 * the checker (kk_case_run: fresh seeded inputs, y poisoned twice, float64
 * reference, the row's bf16 tolerance; strict: a declined case would not
 * pass): M = 1, 2, 5, 8 (one m16 tile, the decode sizes), 9, 16, 17, 33, 64
 * (one, two and four tiles), N not a multiple of the 32 rows of a block
 * (1, 33, 100, 257), K from one 64-unit to units that do not divide among the
 * 8 warps, global scale on and off, two Llama-3-8B decode shapes. The op takes
 * bf16 activations only (no f16 to test). Then on the same inputs: the GPU
 * within the tolerance of the CPU kernel, and the same bits on a second run
 * (the warps' partial sums meet in a fixed order). Wrong variants of the slot
 * (global scale dropped, each row's block scales shifted by one block, the two
 * nibbles of each weight byte swapped) must FAIL. Declined: x at an offset
 * that is not 16-byte aligned (KK_ERR_UNSUPPORTED from the slot, and kk_op_run
 * runs the CPU kernel: the CPU's bits), M beyond 64 (the slot alone; the op's
 * parameters stop it earlier). Exits 77 (skipped) without a usable GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdef/all_ops.h"

static const kk_op *row(void) { return kk_test_op("nvfp4_gemm"); }

static void expect_pass(const char *text, uint64_t seed) {
    const kk_case_result r = kk_test_run_case_on("cuda:0", row(), text, seed);
    assert_int_equal(r.status, KK_CASE_PASS);
    assert_int_equal(r.outputs[0].unwritten, 0);
}

/* Every M of the three tile counts, odd N, K of 1 to 65 units. */
static void shapes_pass(void **state) {
    (void)state;
    static const int Ms[] = {1, 2, 5, 8, 9, 16, 17, 33, 64};
    static const char *const NKs[] = {"N=1 K=64",     "N=33 K=192",  "N=100 K=512",
                                      "N=257 K=1088", "N=33 K=4160", "N=100 K=576"};
    int seed = 1;
    for (int m = 0; m < 9; m++)
        for (int v = 0; v < 3; v++) {
            char text[96];
            snprintf(text, sizeof text, "M=%d %s global=%d", Ms[m], NKs[(m + 2 * v) % 6],
                     (m + v) % 2);
            expect_pass(text, (uint64_t)seed++);
        }
}

/* Llama-3-8B decode shapes: k/v projection and down_proj (reference cost
 * kept to a few seconds). */
static void llama_shapes_pass(void **state) {
    (void)state;
    expect_pass("M=16 N=1024 K=4096 global=1", 41);
    expect_pass("M=1 N=4096 K=14336 global=1", 42);
    expect_pass("M=64 N=512 K=4096", 43);
}

/* y of the pair's tensor on `side` (host, or the device copied back). */
static void y_of(kk_test_pair *s, int device, uint16_t *out) {
    const int y = s->n - 1;
    if (device) kk_assert_ok(kk_tensor_copy(s->host[y], s->dev[y]));
    memcpy(out, s->host[y]->data, (size_t)s->d[y].numel * 2);
}

static void gpu_near_cpu_and_repeatable(void **state) {
    (void)state;
    static const char *const cases[] = {"M=1 N=300 K=2048 global=1", "M=8 N=257 K=1088",
                                        "M=24 N=129 K=4096 global=1", "M=64 N=96 K=8192"};
    kk_tolerance tol;
    kk_assert_ok(kk_op_tolerance(row(), KK_DTYPE_BF16, &tol));
    for (int c = 0; c < 4; c++) {
        kk_test_pair s;
        kk_test_pair_open(&s, "cuda:0", "nvfp4_gemm", cases[c], 60 + c);
        const size_t n = (size_t)s.d[s.n - 1].numel;
        uint16_t *cpu = malloc(n * 2), *gpu = malloc(n * 2), *again = malloc(n * 2);
        double *cpu64 = malloc(n * sizeof(double));
        kk_assert_ok(kk_op_run(&s.p, s.host, NULL));
        y_of(&s, 0, cpu);
        for (int k = 0; k < 2; k++) {
            kk_assert_ok(kk__op_run_with(&s.p, s.dev, NULL, NULL, KK__RUN_STRICT));
            kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
            y_of(&s, 1, k ? again : gpu);
        }
        kk_assert_ok(kk_convert_host(cpu, KK_DTYPE_BF16, cpu64, KK_DTYPE_F64, n));
        kk_check_result r;
        kk_assert_ok(kk_check_output(gpu, KK_DTYPE_BF16, cpu64, n, &tol, &r));
        size_t same = 0;
        for (size_t i = 0; i < n; i++) same += cpu[i] == gpu[i];
        print_message("    %-30s gpu vs cpu: %s (rel L2 %.3g), %zu of %zu bit-identical\n",
                      cases[c], r.pass ? "PASS" : "FAIL", r.rel_l2_err, same, n);
        assert_true(r.pass);
        assert_memory_equal(gpu, again, n * 2);
        free(cpu);
        free(gpu);
        free(again);
        free(cpu64);
        kk_test_pair_close(&s);
    }
}

/* ---- wrong variants of the CUDA slot fail ---- */

static kk_status real_cuda(const kk_op_params *p, kk_tensor *const *t) {
    return kk__op_slot(row(), KK_BACKEND_CUDA).run(p, t, NULL);
}

static kk_status cuda_no_global(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_op_params q = *p;
    q.i[KK__NVG_GLOBAL] = 0;
    kk_tensor *v[4] = {t[0], t[1], t[2], t[4]};
    return real_cuda(&q, v);
}

/* The real slot on a host-mutated copy of input k (rows of `row_bytes`). */
static kk_status with_mutated(const kk_op_params *p, kk_tensor *const *t, int k,
                              void (*mutate)(uint8_t *row, int64_t bytes)) {
    kk_tensor *h, *d;
    kk_assert_ok(kk_tensor_create("cpu", t[k]->dtype, t[k]->ndim, t[k]->shape, &h));
    kk_assert_ok(kk_tensor_create(t[k]->device, t[k]->dtype, t[k]->ndim, t[k]->shape, &d));
    kk_assert_ok(kk_tensor_copy(h, t[k]));
    const int64_t rows = t[k]->shape[0], bytes = (int64_t)kk_tensor_nbytes(h) / rows;
    for (int64_t r = 0; r < rows; r++) mutate((uint8_t *)h->data + r * bytes, bytes);
    kk_assert_ok(kk_tensor_copy(d, h));
    kk_tensor *v[KK_OP_MAX_TENSORS];
    for (int j = 0; j < KK_OP_MAX_TENSORS; j++) v[j] = t[j];
    v[k] = d;
    const kk_status st = real_cuda(p, v);
    kk_assert_ok(kk_op_synchronize(t[k]->device, NULL));
    kk_tensor_destroy(h);
    kk_tensor_destroy(d);
    return st;
}

static void rotate_one(uint8_t *r, int64_t bytes) { /* block j gets block j+1's scale */
    const uint8_t first = r[0];
    memmove(r, r + 1, (size_t)bytes - 1);
    r[bytes - 1] = first;
}

static void swap_nibbles(uint8_t *r, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i++) r[i] = (uint8_t)(r[i] << 4 | r[i] >> 4);
}

static kk_status cuda_next_block_scale(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    return with_mutated(p, t, 2, rotate_one);
}

static kk_status cuda_nibbles_swapped(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    return with_mutated(p, t, 1, swap_nibbles);
}

static void wrong_cuda_variants_fail(void **state) {
    (void)state;
    static const char *const texts[] = {"M=3 N=70 K=256 global=1", "M=20 N=45 K=1024 global=1",
                                        "M=64 N=33 K=192 global=1"};
    const kk_op_kernel_fn wrong[] = {cuda_no_global, cuda_next_block_scale, cuda_nibbles_swapped};
    for (int c = 0; c < 3; c++) {
        expect_pass(texts[c], 5);
        for (int w = 0; w < 3; w++) {
            kk_op bad = *row();
            kk__op_swap(&bad, KK_BACKEND_CUDA, wrong[w]);
            assert_int_equal(kk_test_run_case_on("cuda:0", &bad, texts[c], 5).status, KK_CASE_FAIL);
        }
    }
}

/* ---- declined cases ---- */

/* x 8 bytes off its 16-byte alignment: the slot declines, kk_op_run runs the
 * CPU kernel (the CPU's bits). */
static void misaligned_x_runs_on_cpu(void **state) {
    (void)state;
    kk_test_pair s;
    kk_test_pair_open(&s, "cuda:0", "nvfp4_gemm", "M=9 N=40 K=128 global=1", 7);
    const size_t n = (size_t)s.d[s.n - 1].numel;
    uint16_t *cpu = malloc(n * 2), *gpu = malloc(n * 2);
    kk_assert_ok(kk_op_run(&s.p, s.host, NULL));
    y_of(&s, 0, cpu);
    kk_tensor *raw, *x_off;
    kk_assert_ok(
        kk_tensor_create("cuda:0", KK_DTYPE_UINT8, 1, (int64_t[]){9 * 128 * 2 + 16}, &raw));
    kk_assert_ok(kk_tensor_wrap("cuda:0", KK_DTYPE_BF16, 2, (int64_t[]){9, 128}, NULL,
                                (uint8_t *)raw->data + 8, &x_off));
    kk_assert_ok(kk_tensor_copy(x_off, s.host[0]));
    kk_tensor *v[KK_OP_MAX_TENSORS] = {x_off, s.dev[1], s.dev[2], s.dev[3], s.dev[4]};
    kk_assert_status(real_cuda(&s.p, v), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "aligned");
    kk_assert_ok(kk_op_run(&s.p, v, NULL)); /* falls back to the CPU kernel */
    kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
    y_of(&s, 1, gpu);
    assert_memory_equal(cpu, gpu, n * 2);
    kk_tensor_destroy(x_off);
    kk_tensor_destroy(raw);
    free(cpu);
    free(gpu);
    kk_test_pair_close(&s);
}

/* M = 65 (past the op's own limit, set by hand): declined before any tensor
 * is read. */
static void large_m_declined(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(row(), "M=64 N=8 K=64", &p));
    p.i[KK__NVG_M] = 65;
    kk_tensor *none[KK_OP_MAX_TENSORS] = {0};
    kk_assert_status(real_cuda(&p, none), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "M <= 64");
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes_pass),
        cmocka_unit_test(llama_shapes_pass),
        cmocka_unit_test(gpu_near_cpu_and_repeatable),
        cmocka_unit_test(wrong_cuda_variants_fail),
        cmocka_unit_test(misaligned_x_runs_on_cpu),
        cmocka_unit_test(large_m_declined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

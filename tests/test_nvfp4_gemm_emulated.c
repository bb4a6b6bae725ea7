/* labels: unit cpu */
/* nvfp4_gemm's CUDA kernel emulated on the CPU (kk__nvfp4_gemm_emulate in
 * src/cuda/kernels/nvfp4_gemm.cu: every lane's mma fragments built by the
 * kernel's own w_frag / x_frag, placed by the m16n8k16 layout, multiplied in
 * float64), put into the CPU slot and run through the checker against the
 * float64 reference at the shapes the GPU test uses: the kernel's
 * dequantization, k permutation and bounds (N past a block's 32 rows, rows of
 * x past M, units of K that do not divide among the warps), checked without a
 * GPU. Not the GPU's bits (the tensor core's f32 sums are not modelled).
 * Skips in a build without CUDA. */
#include "testutil.h"

#include <stdio.h>

/* src/cuda/kernels/nvfp4_gemm.cu; weak so that a build without CUDA links. */
kk_status kk__nvfp4_gemm_emulate(const kk_op_params *p, kk_tensor *const *t) __attribute__((weak));

static kk_status emulated(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    return kk__nvfp4_gemm_emulate(p, t);
}

static void emulated_kernel_passes(void **state) {
    (void)state;
    if (!kk__nvfp4_gemm_emulate) skip();
    static const int Ms[] = {1, 2, 5, 8, 9, 16, 17, 33, 64};
    static const char *const NKs[] = {"N=1 K=64", "N=33 K=192", "N=45 K=576", "N=70 K=1088"};
    for (int m = 0; m < 9; m++)
        for (int v = 0; v < 2; v++) {
            char text[96];
            snprintf(text, sizeof text, "M=%d %s global=%d", Ms[m], NKs[(m + v) % 4], (m + v) % 2);
            const kk_case_result r =
                kk_test_run_cpu_case("nvfp4_gemm", text, emulated, (uint64_t)(10 + 2 * m + v));
            assert_int_equal(r.status, KK_CASE_PASS);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(emulated_kernel_passes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* labels: gpu */
/* Quantization on a GPU gives the CPU's bits: every format and scaling mode on
 * random inputs (data, scales, global scale, amax and the dequantized f32 /
 * bf16 / f16 outputs compared byte for byte), the NVFP4 layout conversions,
 * delayed scaling, inf/NaN detection, and tensor copies between host and
 * device through strided views. Skips (77) with no GPU. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/quant.h"
#include "quant_testutil.h"

static const char *const GPU = "cuda:0";

static const qt_case k_cases[] = {
    {1, 1, 1, QT_UNIFORM},        {1, 3, 17, QT_WIDE},           {1, 5, 33, QT_ZERO_BLOCKS},
    {2, 130, 300, QT_WIDE},       {1, 257, 129, QT_UNIFORM},     {3, 7, 16, QT_NEGATIVE},
    {1, 1, 1000, QT_ZERO_BLOCKS}, {1, 128, 256, QT_WIDE},        {4, 300, 7168, QT_WIDE},
    {1, 2432, 4608, QT_UNIFORM},  {2, 129, 257, QT_ZERO_BLOCKS},
};

static void compare(const qt_result *a, const qt_result *b, const char *what) {
    if (a->data_bytes != b->data_bytes || memcmp(a->data, b->data, a->data_bytes) != 0)
        fail_msg("%s: quantized elements differ", what);
    if (a->scale_bytes != b->scale_bytes || memcmp(a->scales, b->scales, a->scale_bytes) != 0)
        fail_msg("%s: scales differ", what);
    if (memcmp(&a->global, &b->global, sizeof a->global) != 0 ||
        memcmp(&a->amax, &b->amax, sizeof a->amax) != 0)
        fail_msg("%s: global scale or amax differ", what);
    if (memcmp(a->y32, b->y32, (size_t)a->n * 4) != 0 ||
        memcmp(a->ybf16, b->ybf16, (size_t)a->n * 2) != 0 ||
        memcmp(a->yf16, b->yf16, (size_t)a->n * 2) != 0)
        fail_msg("%s: dequantized values differ", what);
}

static void gpu_matches_cpu(void **state) {
    (void)state;
    const kk_scale_layout layouts[] = {KK_SCALE_PER_TENSOR, KK_SCALE_1X128, KK_SCALE_128X128,
                                       KK_SCALE_NVFP4, KK_SCALE_NVFP4_BLOCKED};
    const kk_dtype xtypes[] = {KK_DTYPE_F32, KK_DTYPE_BF16, KK_DTYPE_F16};
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++) {
        const qt_case *k = &k_cases[c];
        const int64_t n = k->batch * k->rows * k->k;
        float *x0 = malloc((size_t)n * sizeof *x0), *x = malloc((size_t)n * sizeof *x);
        qt_seed(500 + c);
        qt_fill(x0, k);
        for (size_t l = 0; l < 5; l++)
            for (int t = 0; t < (l < 3 ? 2 : 1); t++)
                for (size_t xt = 0; xt < 3; xt++) {
                    qt_fit(x0, n, xtypes[xt], x);
                    kk_dtype q = l >= 3 ? KK_DTYPE_E2M1 : t ? KK_DTYPE_FP8_E5M2 : KK_DTYPE_FP8_E4M3;
                    char what[160];
                    snprintf(what, sizeof what, "case %zu [%lld, %lld, %lld] %s %s from %s", c,
                             (long long)k->batch, (long long)k->rows, (long long)k->k,
                             kk_dtype_name(q), kk_scale_layout_name(layouts[l]),
                             kk_dtype_name(xtypes[xt]));
                    qt_result cpu, gpu;
                    qt_run("cpu", x, k, q, layouts[l], xtypes[xt], NULL, &cpu);
                    qt_run(GPU, x, k, q, layouts[l], xtypes[xt], NULL, &gpu);
                    compare(&cpu, &gpu, what);
                    if (xtypes[xt] == KK_DTYPE_F32) qt_check_result(x, k, q, layouts[l], &gpu);
                    qt_free(&cpu);
                    qt_free(&gpu);
                }
        free(x0);
        free(x);
    }
}

static void delayed_scaling_matches(void **state) {
    (void)state;
    kk_fp8_amax_history *hc, *hg;
    kk_assert_ok(kk_fp8_amax_history_create(4, 2, &hc));
    kk_assert_ok(kk_fp8_amax_history_create(4, 2, &hg));
    const qt_case k = {2, 64, 200, QT_WIDE};
    float *x = malloc(2 * 64 * 200 * sizeof *x);
    for (int step = 0; step < 6; step++) {
        qt_seed(900 + step);
        qt_fill(x, &k);
        qt_result cpu, gpu;
        qt_run("cpu", x, &k, KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, KK_DTYPE_BF16, hc, &cpu);
        qt_run(GPU, x, &k, KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, KK_DTYPE_BF16, hg, &gpu);
        compare(&cpu, &gpu, "delayed scaling");
        assert_true(kk_fp8_amax_history_max(hc) == kk_fp8_amax_history_max(hg));
        assert_int_equal(kk_fp8_amax_history_count(hg), step + 1 < 4 ? step + 1 : 4);
        qt_free(&cpu);
        qt_free(&gpu);
    }
    free(x);
    kk_fp8_amax_history_destroy(hc);
    kk_fp8_amax_history_destroy(hg);
}

static void layout_conversion_matches(void **state) {
    (void)state;
    const int64_t cases[][3] = {{1, 1, 1}, {2, 130, 5}, {3, 129, 9}, {1, 512, 16}, {2, 300, 7}};
    qt_seed(77);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int64_t L = cases[t][0], M = cases[t][1], C = cases[t][2];
        const int64_t ps[3] = {L, M, C}, bs[4] = {L, (M + 127) / 128, (C + 3) / 4, 512};
        kk_tensor *hp, *hb, *dp, *db, *dback;
        kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 3, ps, &hp));
        kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 4, bs, &hb));
        for (int64_t i = 0; i < L * M * C; i++) ((uint8_t *)hp->data)[i] = (uint8_t)qt_next();
        kk_assert_ok(kk_tensor_create(GPU, KK_DTYPE_FP8_E4M3, 3, ps, &dp));
        kk_assert_ok(kk_tensor_create(GPU, KK_DTYPE_FP8_E4M3, 4, bs, &db));
        kk_assert_ok(kk_tensor_create(GPU, KK_DTYPE_FP8_E4M3, 3, ps, &dback));
        kk_assert_ok(kk_tensor_copy(dp, hp));
        qt_poison(db);
        kk_assert_ok(kk_nvfp4_scales_to_blocked(hp, hb));
        kk_assert_ok(kk_nvfp4_scales_to_blocked(dp, db));
        kk_assert_ok(kk_nvfp4_scales_to_plain(db, dback));
        size_t b1, b2;
        uint8_t *gb = qt_fetch(db, &b1), *gp = qt_fetch(dback, &b2);
        assert_memory_equal(gb, hb->data, b1);
        assert_memory_equal(gp, hp->data, b2);
        free(gb);
        free(gp);
        kk_tensor *objs[] = {hp, hb, dp, db, dback};
        for (size_t i = 0; i < 5; i++) kk_tensor_destroy(objs[i]);
    }
}

static void non_finite_on_gpu(void **state) {
    (void)state;
    const kk_scale_layout layouts[] = {KK_SCALE_PER_TENSOR, KK_SCALE_1X128, KK_SCALE_128X128,
                                       KK_SCALE_NVFP4, KK_SCALE_NVFP4_BLOCKED};
    const int64_t shape[2] = {3, 300};
    float *h = malloc(900 * sizeof *h);
    kk_tensor *hx, *x;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, NULL, h, &hx));
    kk_assert_ok(kk_tensor_create(GPU, KK_DTYPE_F32, 2, shape, &x));
    for (size_t l = 0; l < 5; l++) {
        for (int i = 0; i < 900; i++) h[i] = (float)i;
        h[650] = l % 2 ? NAN : INFINITY;
        kk_assert_ok(kk_tensor_copy(x, hx));
        kk_qtensor q;
        kk_assert_ok(kk_qtensor_create(GPU, l >= 3 ? KK_DTYPE_E2M1 : KK_DTYPE_FP8_E5M2, layouts[l],
                                       2, shape, &q));
        kk_assert_status(kk_quantize(x, &q, NULL), KK_ERR_QUANTIZATION);
        kk_qtensor_destroy(&q);
    }
    kk_tensor_destroy(x);
    kk_tensor_destroy(hx);
    free(h);
}

/* Strided views on the GPU copied to and from the host (the staged path). */
static void strided_device_copies(void **state) {
    (void)state;
    const int64_t shape[3] = {4, 6, 10};
    kk_tensor *h, *d, *dv, *hv, *back;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 3, shape, &h));
    for (int i = 0; i < 240; i++) ((float *)h->data)[i] = (float)i;
    kk_assert_ok(kk_tensor_create(GPU, KK_DTYPE_F32, 3, shape, &d));
    kk_assert_ok(kk_tensor_copy(d, h));
    kk_tensor *s1;
    kk_assert_ok(kk_tensor_slice(d, 2, 1, 10, 3, &s1)); /* k = 1, 4, 7 */
    kk_assert_ok(kk_tensor_transpose(s1, 0, 1, &dv));   /* [6, 4, 3] */
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 3, dv->shape, &hv));
    kk_assert_ok(kk_tensor_copy(hv, dv));
    const float *p = hv->data;
    for (int j = 0; j < 6; j++)
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 3; k++) assert_true(*p++ == (float)(i * 60 + j * 10 + 1 + 3 * k));
    /* Write zeros through the strided device view: everything else stays. */
    memset(hv->data, 0, kk_tensor_nbytes(hv));
    kk_assert_ok(kk_tensor_copy(dv, hv));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 3, shape, &back));
    kk_assert_ok(kk_tensor_copy(back, d));
    for (int i = 0; i < 240; i++) {
        int k = i % 10;
        float want = (k == 1 || k == 4 || k == 7) ? 0.0f : (float)i;
        assert_true(((float *)back->data)[i] == want);
    }
    kk_tensor *objs[] = {h, d, s1, dv, hv, back};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) kk_tensor_destroy(objs[i]);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpu_matches_cpu),           cmocka_unit_test(delayed_scaling_matches),
        cmocka_unit_test(layout_conversion_matches), cmocka_unit_test(non_finite_on_gpu),
        cmocka_unit_test(strided_device_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

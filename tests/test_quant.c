/* labels: unit cpu */
/* Quantization on the CPU against float64 references: every scale is checked
 * against its definition, every element against the error bound derived in
 * docs/formats.md, on random data with zero blocks, a huge dynamic range,
 * negative values and short (single-element) last blocks. The 128x4 blocked
 * layout is checked against a construction from tensor views, exhaustively. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/quant.h"
#include "quant_testutil.h"

#define assert_arg_error(call, name)                                                               \
    do {                                                                                           \
        kk_assert_status((call), KK_ERR_INVALID_ARGUMENT);                                         \
        assert_string_equal(kk_last_error()->argument, (name));                                    \
    } while (0)

/* ---- layouts ---- */

static void scale_shapes_and_sizes(void **state) {
    (void)state;
    const int64_t s[3] = {2, 130, 300};
    int n = 0;
    int64_t ss[KK_TENSOR_MAX_DIMS];
    kk_assert_ok(kk_qtensor_scale_shape(KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, 3, s, &n, ss));
    assert_int_equal(n, 1);
    assert_int_equal(ss[0], 1);
    kk_assert_ok(kk_qtensor_scale_shape(KK_DTYPE_FP8_E5M2, KK_SCALE_1X128, 3, s, &n, ss));
    assert_int_equal(n, 3);
    assert_true(ss[0] == 2 && ss[1] == 130 && ss[2] == 3);
    kk_assert_ok(kk_qtensor_scale_shape(KK_DTYPE_FP8_E4M3, KK_SCALE_128X128, 3, s, &n, ss));
    assert_true(n == 3 && ss[0] == 2 && ss[1] == 2 && ss[2] == 3);
    kk_assert_ok(kk_qtensor_scale_shape(KK_DTYPE_E2M1, KK_SCALE_NVFP4, 3, s, &n, ss));
    assert_true(n == 3 && ss[0] == 2 && ss[1] == 130 && ss[2] == 19);
    kk_assert_ok(kk_qtensor_scale_shape(KK_DTYPE_E2M1, KK_SCALE_NVFP4_BLOCKED, 3, s, &n, ss));
    assert_true(n == 4 && ss[0] == 2 && ss[1] == 2 && ss[2] == 5 && ss[3] == 512);
    const int64_t v[1] = {17};
    kk_assert_ok(kk_qtensor_scale_shape(KK_DTYPE_FP8_E4M3, KK_SCALE_128X128, 1, v, &n, ss));
    assert_true(n == 1 && ss[0] == 1);
    kk_qtensor_sizes z;
    kk_assert_ok(kk_qtensor_bytes_for(KK_DTYPE_E2M1, KK_SCALE_NVFP4_BLOCKED, 3, s, &z));
    assert_int_equal(z.data_bytes, 2 * 130 * 150);
    assert_int_equal(z.scale_bytes, 2 * 2 * 5 * 512);
    assert_int_equal(z.global_bytes, 4);
    assert_int_equal(z.total_bytes, z.data_bytes + z.scale_bytes + 4);
    kk_assert_ok(kk_qtensor_bytes_for(KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 3, s, &z));
    assert_int_equal(z.data_bytes, 2 * 130 * 300);
    assert_int_equal(z.scale_bytes, 2 * 130 * 3 * 4);
    assert_int_equal(z.global_bytes, 0);
    assert_arg_error(kk_qtensor_scale_shape(KK_DTYPE_E2M1, KK_SCALE_1X128, 3, s, &n, ss), "dtype");
    assert_arg_error(kk_qtensor_scale_shape(KK_DTYPE_FP8_E4M3, KK_SCALE_NVFP4, 3, s, &n, ss),
                     "dtype");
    assert_arg_error(kk_qtensor_scale_shape(KK_DTYPE_FP8_E4M3, (kk_scale_layout)9, 3, s, &n, ss),
                     "layout");
    assert_arg_error(kk_qtensor_scale_shape(KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 0, s, &n, ss),
                     "ndim");
    const int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    assert_arg_error(kk_qtensor_bytes_for(KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 2, huge, &z), "shape");
}

/* The blocked layout built a second way: pad the plain scales into
 * [L, RB*128, CB*4], then view it as [L, RB, 128, CB, 4] -> swap (128, CB) ->
 * split 128 into (4, 32) -> swap (4, 32) = [L, RB, CB, 32, 4, 4] and copy that
 * into a contiguous tensor (torchao's to_blocked, written with our views). */
static kk_tensor *blocked_by_views(const kk_tensor *plain, int64_t L, int64_t M, int64_t C) {
    const int64_t RB = (M + 127) / 128, CB = (C + 3) / 4;
    const int64_t pshape[3] = {L, RB * 128, CB * 4}, plain3[3] = {L, M, C};
    kk_tensor *pad, *p3, *a, *b, *v1, *v2, *v3, *v4, *out;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 3, pshape, &pad));
    memset(pad->data, 0, kk_tensor_nbytes(pad));
    kk_assert_ok(kk_tensor_slice(pad, 1, 0, M, 1, &a));
    kk_assert_ok(kk_tensor_slice(a, 2, 0, C, 1, &b));
    kk_assert_ok(kk_tensor_reshape(plain, 3, plain3, &p3));
    kk_assert_ok(kk_tensor_copy(b, p3));
    const int64_t s5[5] = {L, RB, 128, CB, 4}, s6[6] = {L, RB, CB, 4, 32, 4};
    kk_assert_ok(kk_tensor_reshape(pad, 5, s5, &v1));
    kk_assert_ok(kk_tensor_transpose(v1, 2, 3, &v2));
    kk_assert_ok(kk_tensor_reshape(v2, 6, s6, &v3));
    kk_assert_ok(kk_tensor_transpose(v3, 3, 4, &v4));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 6, v4->shape, &out));
    kk_assert_ok(kk_tensor_copy(out, v4));
    kk_tensor *objs[] = {pad, p3, a, b, v1, v2, v3, v4};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) kk_tensor_destroy(objs[i]);
    return out;
}

static void blocked_layout_exhaustive(void **state) {
    (void)state;
    const int64_t cases[][3] = {{1, 1, 1},   {1, 128, 4},  {1, 127, 3}, {2, 130, 5},
                                {3, 129, 9}, {1, 256, 16}, {2, 300, 7}, {1, 512, 2}};
    qt_seed(11);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int64_t L = cases[t][0], M = cases[t][1], C = cases[t][2];
        const int64_t RB = (M + 127) / 128, CB = (C + 3) / 4;
        const int64_t ps[3] = {L, M, C}, bs[4] = {L, RB, CB, 512};
        kk_tensor *plain, *blocked, *back;
        kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 3, ps, &plain));
        kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 4, bs, &blocked));
        kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 3, ps, &back));
        uint8_t *p = plain->data, *b = blocked->data;
        for (int64_t i = 0; i < L * M * C; i++) p[i] = (uint8_t)(1 + qt_next() % 255);
        memset(b, 0xA5, kk_tensor_nbytes(blocked)); /* poison: padding must become 0 */
        kk_assert_ok(kk_nvfp4_scales_to_blocked(plain, blocked));
        kk_tensor *ref = blocked_by_views(plain, L, M, C);
        assert_memory_equal(ref->data, b, kk_tensor_nbytes(blocked));
        int64_t covered = 0;
        for (int64_t l = 0; l < L; l++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < C; j++, covered++) {
                    int64_t o = kk_nvfp4_blocked_offset(M, C, l, i, j);
                    assert_true(o >= 0 && o < L * RB * CB * 512);
                    assert_int_equal(b[o], p[(l * M + i) * C + j]);
                }
        int64_t nonzero = 0; /* every byte not covered above is padding = 0 */
        for (int64_t i = 0; i < L * RB * CB * 512; i++) nonzero += b[i] != 0;
        assert_int_equal(nonzero, covered);
        kk_assert_ok(kk_nvfp4_scales_to_plain(blocked, back));
        assert_memory_equal(back->data, p, (size_t)(L * M * C));
        kk_tensor_destroy(ref);
        kk_tensor_destroy(plain);
        kk_tensor_destroy(blocked);
        kk_tensor_destroy(back);
    }
    assert_int_equal(kk_nvfp4_blocked_offset(130, 5, 0, 130, 0), -1);
    assert_int_equal(kk_nvfp4_blocked_offset(130, 5, 0, 0, 5), -1);
    assert_int_equal(kk_nvfp4_blocked_offset(130, 5, -1, 0, 0), -1);
    assert_int_equal(kk_nvfp4_blocked_offset(130, 5, 1, 129, 4), 512 * 7 + 16);
}

/* ---- quantization against the float64 references ---- */

static const qt_case k_cases[] = {
    {1, 1, 1, QT_UNIFORM},        {1, 3, 17, QT_WIDE},       {1, 5, 33, QT_ZERO_BLOCKS},
    {2, 130, 300, QT_WIDE},       {1, 257, 129, QT_UNIFORM}, {3, 7, 16, QT_NEGATIVE},
    {1, 1, 1000, QT_ZERO_BLOCKS}, {1, 128, 256, QT_WIDE},    {2, 1, 1, QT_WIDE},
};

static void fp8_all_layouts(void **state) {
    (void)state;
    const kk_scale_layout layouts[] = {KK_SCALE_PER_TENSOR, KK_SCALE_1X128, KK_SCALE_128X128};
    const kk_dtype types[] = {KK_DTYPE_FP8_E4M3, KK_DTYPE_FP8_E5M2};
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
        for (size_t l = 0; l < 3; l++)
            for (size_t t = 0; t < 2; t++)
                qt_check_case("cpu", &k_cases[c], types[t], layouts[l], (unsigned)c);
}

static void nvfp4_both_layouts(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++) {
        qt_check_case("cpu", &k_cases[c], KK_DTYPE_E2M1, KK_SCALE_NVFP4, (unsigned)c);
        qt_check_case("cpu", &k_cases[c], KK_DTYPE_E2M1, KK_SCALE_NVFP4_BLOCKED, (unsigned)c);
    }
}

static void zeros_and_empty(void **state) {
    (void)state;
    const int64_t shape[2] = {4, 40};
    kk_tensor *x;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &x));
    memset(x->data, 0, kk_tensor_nbytes(x));
    kk_qtensor q;
    kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, 2, shape, &q));
    float amax = -1.0f;
    kk_quant_options opt = {NULL, &amax};
    kk_assert_ok(kk_quantize(x, &q, &opt));
    assert_true(amax == 0.0f);
    assert_true(((float *)q.scales->data)[0] == 1.0f);
    for (int i = 0; i < 160; i++) assert_int_equal(((uint8_t *)q.data->data)[i], 0);
    kk_qtensor_destroy(&q);
    kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_E2M1, KK_SCALE_NVFP4, 2, shape, &q));
    kk_assert_ok(kk_quantize(x, &q, NULL));
    assert_true(((float *)q.global_scale->data)[0] == 1.0f);
    for (int i = 0; i < 12; i++) assert_int_equal(((uint8_t *)q.scales->data)[i], 0);
    kk_qtensor_destroy(&q);
    kk_tensor_destroy(x);
    const int64_t empty[2] = {0, 16};
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, empty, &x));
    kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_FP8_E5M2, KK_SCALE_PER_TENSOR, 2, empty, &q));
    kk_assert_ok(kk_quantize(x, &q, NULL));
    assert_true(((float *)q.scales->data)[0] == 1.0f);
    kk_assert_ok(kk_dequantize(&q, x));
    kk_qtensor_destroy(&q);
    kk_qtensor_destroy(&q); /* a zeroed struct: no-op */
    kk_tensor_destroy(x);
}

static void delayed_scaling(void **state) {
    (void)state;
    kk_fp8_amax_history *h = NULL;
    float s = 0;
    kk_assert_ok(kk_fp8_amax_history_create(3, 1, &h));
    kk_assert_ok(kk_fp8_amax_history_scale(h, KK_DTYPE_FP8_E4M3, &s));
    assert_true(s == 1.0f); /* empty */
    kk_assert_ok(kk_fp8_amax_history_push(h, 10.0f));
    kk_assert_ok(kk_fp8_amax_history_push(h, 448.0f));
    kk_assert_ok(kk_fp8_amax_history_push(h, 3.0f));
    kk_assert_ok(kk_fp8_amax_history_scale(h, KK_DTYPE_FP8_E4M3, &s));
    assert_true(s == 2.0f);                          /* 448 * 2^1 / 448 */
    kk_assert_ok(kk_fp8_amax_history_push(h, 5.0f)); /* 10 drops out */
    kk_assert_ok(kk_fp8_amax_history_push(h, 7.0f)); /* 448 drops out */
    assert_int_equal(kk_fp8_amax_history_count(h), 3);
    assert_true(kk_fp8_amax_history_max(h) == 7.0f);
    kk_assert_ok(kk_fp8_amax_history_scale(h, KK_DTYPE_FP8_E5M2, &s));
    assert_true(s == 14.0f / 57344.0f);
    /* Quantizing with it: the history's scale is used, x's amax is pushed. */
    const int64_t shape[1] = {4};
    float xv[4] = {1.0f, -2.0f, 100000.0f, 0.5f};
    kk_tensor *x;
    kk_qtensor q;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, shape, NULL, xv, &x));
    kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, 1, shape, &q));
    kk_quant_options opt = {h, NULL};
    kk_assert_ok(kk_fp8_amax_history_scale(h, KK_DTYPE_FP8_E4M3, &s));
    kk_assert_ok(kk_quantize(x, &q, &opt));
    assert_true(((float *)q.scales->data)[0] == s);
    const uint8_t *d = q.data->data;
    assert_int_equal(d[2], 0x7E); /* 100000 / s saturates to 448 */
    assert_true(kk_e4m3_to_f32(d[1]) * s == -2.0f);
    assert_true(kk_fp8_amax_history_max(h) == 100000.0f);
    kk_qtensor_destroy(&q);
    /* Only the per-tensor layout takes a history. */
    kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 1, shape, &q));
    assert_arg_error(kk_quantize(x, &q, &opt), "options->history");
    kk_qtensor_destroy(&q);
    assert_arg_error(kk_fp8_amax_history_push(h, -1.0f), "amax");
    assert_arg_error(kk_fp8_amax_history_push(h, INFINITY), "amax");
    assert_arg_error(kk_fp8_amax_history_scale(h, KK_DTYPE_E2M1, &s), "dtype");
    kk_fp8_amax_history_destroy(h);
    assert_arg_error(kk_fp8_amax_history_create(0, 0, &h), "length");
    assert_arg_error(kk_fp8_amax_history_create(4, -1, &h), "margin");
    kk_tensor_destroy(x);
}

static void non_finite_is_a_quantization_error(void **state) {
    (void)state;
    const kk_scale_layout layouts[] = {KK_SCALE_PER_TENSOR, KK_SCALE_1X128, KK_SCALE_128X128,
                                       KK_SCALE_NVFP4, KK_SCALE_NVFP4_BLOCKED};
    const int64_t shape[2] = {3, 40};
    kk_tensor *x;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &x));
    for (int bad = 0; bad < 2; bad++)
        for (size_t l = 0; l < 5; l++) {
            float *p = x->data;
            for (int i = 0; i < 120; i++) p[i] = (float)i;
            p[77] = bad ? NAN : -INFINITY;
            kk_qtensor q;
            kk_dtype dt = l >= 3 ? KK_DTYPE_E2M1 : KK_DTYPE_FP8_E4M3;
            kk_assert_ok(kk_qtensor_create("cpu", dt, layouts[l], 2, shape, &q));
            kk_assert_status(kk_quantize(x, &q, NULL), KK_ERR_QUANTIZATION);
            assert_string_equal(kk_last_error()->argument, "x");
            kk_qtensor_destroy(&q);
        }
    kk_tensor_destroy(x);
}

static void bad_arguments(void **state) {
    (void)state;
    const int64_t shape[2] = {4, 32}, other[2] = {4, 16};
    kk_tensor *x, *xi, *xo, *xt;
    kk_qtensor q, bad;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &x));
    memset(x->data, 0, kk_tensor_nbytes(x));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_INT8, 2, shape, &xi));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, other, &xo));
    kk_assert_ok(kk_tensor_transpose(x, 0, 1, &xt));
    kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_E2M1, KK_SCALE_NVFP4, 2, shape, &q));
    assert_arg_error(kk_quantize(xi, &q, NULL), "x");
    assert_arg_error(kk_quantize(xo, &q, NULL), "x");
    assert_arg_error(kk_quantize(xt, &q, NULL), "x");
    assert_arg_error(kk_quantize(NULL, &q, NULL), "x");
    assert_arg_error(kk_quantize(x, NULL, NULL), "q");
    assert_arg_error(kk_dequantize(&q, xi), "y");
    bad = q; /* a hand-filled description with the wrong scales */
    bad.scales = xo;
    assert_arg_error(kk_qtensor_validate(&bad), "q->scales");
    assert_arg_error(kk_quantize(x, &bad, NULL), "q->scales");
    bad = q;
    bad.global_scale = NULL;
    assert_arg_error(kk_dequantize(&bad, x), "q->global_scale");
    bad = q;
    bad.layout = KK_SCALE_1X128;
    assert_arg_error(kk_qtensor_validate(&bad), "dtype");
    kk_assert_ok(kk_qtensor_validate(&q));
    kk_qtensor_destroy(&q);
    assert_arg_error(kk_qtensor_create("cpu", KK_DTYPE_F16, KK_SCALE_NVFP4, 2, shape, &q), "dtype");
    assert_null(q.data);
    assert_arg_error(kk_qtensor_create("nowhere", KK_DTYPE_E2M1, KK_SCALE_NVFP4, 2, shape, &q),
                     "device");
    const int64_t ps[2] = {4, 2}, wrong[4] = {1, 1, 1, 256};
    kk_tensor *plain, *blocked;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 2, ps, &plain));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 4, wrong, &blocked));
    assert_arg_error(kk_nvfp4_scales_to_blocked(plain, blocked), "blocked");
    assert_arg_error(kk_nvfp4_scales_to_blocked(x, blocked), "plain");
    kk_tensor *objs[] = {x, xi, xo, xt, plain, blocked};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) kk_tensor_destroy(objs[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scale_shapes_and_sizes),
        cmocka_unit_test(blocked_layout_exhaustive),
        cmocka_unit_test(fp8_all_layouts),
        cmocka_unit_test(nvfp4_both_layouts),
        cmocka_unit_test(zeros_and_empty),
        cmocka_unit_test(delayed_scaling),
        cmocka_unit_test(non_finite_is_a_quantization_error),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

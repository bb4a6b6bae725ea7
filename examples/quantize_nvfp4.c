/* Quantize a matrix to NVFP4 on the best device, dequantize it, report the
 * error, and save the packed elements and scales as .npy files.
 *
 *   cc quantize_nvfp4.c $(pkg-config --cflags --libs kernelkit) -lm -o quantize_nvfp4
 *   ./quantize_nvfp4 [out_dir]
 *
 * The data moves host -> device -> host through kk_tensor_copy; every call's
 * status is checked and the last error printed on failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kernelkit/kernelkit.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != KK_OK) {                                                                     \
            fprintf(stderr, "quantize_nvfp4: %s\n", kk_last_error_message());                      \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    const char *device = kk_device_best();
    const int64_t shape[2] = {256, 1024}; /* rows x K; K is a multiple of 16 */
    const size_t n = (size_t)(shape[0] * shape[1]);
    kk_tensor *host_x = NULL, *x = NULL, *y = NULL, *host_y = NULL, *host_scales = NULL;
    kk_tensor *host_data = NULL;
    kk_qtensor q = {0};
    int rc = 1;

    float *values = malloc(n * sizeof *values), *back = malloc(n * sizeof *back);
    if (!values || !back) goto done;
    srand(1);
    for (size_t i = 0; i < n; i++) /* a few outliers, as real activations have */
        values[i] = (float)((double)rand() / RAND_MAX - 0.5) * (i % 97 == 0 ? 40.0f : 2.0f);

    CHECK(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, NULL, values, &host_x));
    CHECK(kk_tensor_create(device, KK_DTYPE_F32, 2, shape, &x));
    CHECK(kk_tensor_copy(x, host_x));

    CHECK(kk_qtensor_create(device, KK_DTYPE_E2M1, KK_SCALE_NVFP4, 2, shape, &q));
    float amax = 0;
    kk_quant_options opts = {.amax = &amax};
    CHECK(kk_quantize(x, &q, &opts));

    CHECK(kk_tensor_create(device, KK_DTYPE_F32, 2, shape, &y));
    CHECK(kk_dequantize(&q, y));
    CHECK(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, NULL, back, &host_y));
    CHECK(kk_tensor_copy(host_y, y));

    double err2 = 0, ref2 = 0, max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)back[i] - values[i];
        err2 += d * d;
        ref2 += (double)values[i] * values[i];
        if (fabs(d) > max_abs) max_abs = fabs(d);
    }
    printf("device %s: %lld x %lld f32 -> NVFP4 (amax %.3f)\n", device, (long long)shape[0],
           (long long)shape[1], amax);
    printf("  relative L2 error %.4f, max abs error %.4f\n", sqrt(err2 / ref2), max_abs);

    /* Save the packed elements (uint8, K/2 bytes per row) and the e4m3 scales. */
    CHECK(kk_tensor_create("cpu", KK_DTYPE_E2M1, 2, shape, &host_data));
    CHECK(kk_tensor_copy(host_data, q.data));
    CHECK(kk_tensor_create("cpu", q.scales->dtype, q.scales->ndim, q.scales->shape, &host_scales));
    CHECK(kk_tensor_copy(host_scales, q.scales));
    kk_npy_array a = {0};
    char path[4096];
    CHECK(kk_npy_array_init(&a, KK_DTYPE_E2M1, 2, shape));
    memcpy(a.data, host_data->data, a.nbytes);
    snprintf(path, sizeof path, "%s/nvfp4_data.npy", dir);
    kk_status st = kk_npy_write_file(path, &a);
    kk_npy_free(&a);
    CHECK(st);
    CHECK(kk_npy_array_init(&a, host_scales->dtype, host_scales->ndim, host_scales->shape));
    memcpy(a.data, host_scales->data, a.nbytes);
    snprintf(path, sizeof path, "%s/nvfp4_scales.npy", dir);
    st = kk_npy_write_file(path, &a);
    kk_npy_free(&a);
    CHECK(st);
    printf("  wrote %s/nvfp4_data.npy and %s/nvfp4_scales.npy\n", dir, dir);
    rc = 0;
done:
    kk_qtensor_destroy(&q);
    kk_tensor_destroy(host_x);
    kk_tensor_destroy(x);
    kk_tensor_destroy(y);
    kk_tensor_destroy(host_y);
    kk_tensor_destroy(host_data);
    kk_tensor_destroy(host_scales);
    free(values);
    free(back);
    return rc;
}

/* The GPU side of the benchmark sampler in a build without CUDA (see
 * src/cuda/bench_cuda.c): every entry point says "built without CUDA". The
 * sampler never gets here for a GPU, since "cuda:N" does not resolve in such a
 * build, but the tests and environment capture link in every build. */
#include "core/error.h"
#include "cuda/bench_cuda.h"

#define UNAVAILABLE(func)                                                                          \
    kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "built without CUDA (configure with -DKK_CUDA=ON)")

kk_status kk__bench_cuda_timer(int device, kk_bench_fn fn, void *ctx, const kk_bench_options *o,
                               kk__bench_timer *t) {
    (void)device;
    (void)fn;
    (void)ctx;
    (void)o;
    (void)t;
    return UNAVAILABLE(KK__BENCH_FUNC);
}

void kk__bench_cuda_versions(int *runtime, int *driver) {
    *runtime = 0;
    *driver = 0;
}

kk_status kk__bench_test_spin(kk_stream stream, double seconds) {
    (void)stream;
    (void)seconds;
    return UNAVAILABLE(__func__);
}

kk_status kk__bench_test_tiny(kk_stream stream) {
    (void)stream;
    return UNAVAILABLE(__func__);
}

kk_status kk__bench_test_bad_launch(kk_stream stream) {
    (void)stream;
    return UNAVAILABLE(__func__);
}

kk_status kk__bench_test_alloc(size_t bytes, void **out) {
    (void)bytes;
    *out = NULL;
    return UNAVAILABLE(__func__);
}

void kk__bench_test_free(void *buf) { (void)buf; }

kk_status kk__bench_test_read(kk_stream stream, const void *buf, size_t bytes) {
    (void)stream;
    (void)buf;
    (void)bytes;
    return UNAVAILABLE(__func__);
}

kk_status kk__bench_stream_create(int device, int *prev, kk_stream *out) {
    (void)device;
    *prev = 0;
    *out = NULL;
    return UNAVAILABLE(__func__);
}

void kk__bench_stream_destroy(kk_stream stream, int prev) {
    (void)stream;
    (void)prev;
}

/* The CUDA memory test helpers of a build without CUDA (see
 * src/cuda/memory_test.c): the tests link in every build and skip on this. */
#include "backend/memory_internal.h"
#include "core/error.h"

#define UNAVAILABLE(func)                                                                          \
    kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "built without CUDA (configure with -DKK_CUDA=ON)")

kk_status kk__mem_test_stream_create(int index, kk_stream *out) {
    (void)index;
    *out = NULL;
    return UNAVAILABLE(__func__);
}

kk_status kk__mem_test_stream_destroy(kk_stream stream) {
    (void)stream;
    return UNAVAILABLE(__func__);
}

kk_status kk__mem_test_spin(kk_stream stream, double ms) {
    (void)stream;
    (void)ms;
    return UNAVAILABLE(__func__);
}

kk_status kk__mem_test_stream_sync(kk_stream stream) {
    (void)stream;
    return UNAVAILABLE(__func__);
}

kk_status kk__mem_test_current_device(int *out) {
    *out = -1;
    return UNAVAILABLE(__func__);
}

int kk__mem_test_context_exists(int index) {
    (void)index;
    return 0;
}

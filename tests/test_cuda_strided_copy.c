/* labels: gpu */
/* kk_tensor_copy between strided tensors of one GPU runs the strided-copy
 * kernel (src/cuda/kernels/strided_copy.cu), not a host round trip: the
 * decoder's layouts ([B,S,H,D] seen as [B,H,S,D] into a contiguous buffer),
 * cache-row writes into a slice of [B,H,S_max,D] (rows around it untouched)
 * and both at once, for 1-, 2-, 4- and 8-byte dtypes, odd sizes (no
 * widening) and a copy past one grid, each against the permutation computed
 * on the host, with no host memory allocated during the copy. A job with the
 * permute left out, run by the same kernel, is caught. Exits 77 without a
 * usable GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/strided_copy.h"
#include "kernelkit/memory.h"

#define DEV "cuda:0"

typedef struct shape4 {
    kk_dtype dt;
    int64_t B, S, H, D;
} shape4;

static const shape4 cases[] = {
    {KK_DTYPE_F16, 2, 5, 3, 8},         {KK_DTYPE_BF16, 1, 7, 3, 7},
    {KK_DTYPE_F32, 3, 4, 2, 5},         {KK_DTYPE_F64, 2, 3, 2, 3},
    {KK_DTYPE_UINT8, 2, 9, 5, 13},      {KK_DTYPE_INT32, 1, 1, 4, 16},
    {KK_DTYPE_BF16, 4, 129, 8, 128},    {KK_DTYPE_INT8, 1, 3, 1, 1},
    {KK_DTYPE_UINT8, 2, 1040, 64, 127}, /* 16.9M one-byte elements: past 65536 blocks */
};

static uint64_t g_rng = 0x2545f4914f6cdd1dULL;
static unsigned char byte(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (unsigned char)(g_rng >> 24);
}

static kk_tensor *on(const char *dev, kk_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create(dev, dt, 4, (int64_t[]){a, b, c, d}, &t));
    return t;
}

static void *host_of(const kk_tensor *dev) {
    void *h = malloc(kk_tensor_nbytes(dev));
    assert_non_null(h);
    kk_assert_ok(kk_mem_copy(h, "cpu", dev->data, dev->device, kk_tensor_nbytes(dev)));
    return h;
}

static kk_tensor *random_on_gpu(kk_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d,
                                unsigned char **host) {
    kk_tensor *t = on(DEV, dt, a, b, c, d);
    const size_t n = kk_tensor_nbytes(t);
    *host = malloc(n);
    assert_non_null(*host);
    for (size_t i = 0; i < n; i++) (*host)[i] = byte();
    kk_assert_ok(kk_mem_copy(t->data, DEV, *host, "cpu", n));
    return t;
}

static uint64_t host_allocs(void) {
    kk_mem_stats s;
    kk_assert_ok(kk_mem_stats_get("cpu", -1, &s));
    return s.alloc_count;
}

/* dst[b,h,s,d] = src[b,s,h,d]: the host's permutation, element by element. */
static void permute_bshd(const shape4 *c, const unsigned char *src, unsigned char *dst) {
    const size_t e = (size_t)kk_dtype_bits(c->dt) / 8;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t s = 0; s < c->S; s++)
                for (int64_t d = 0; d < c->D; d++)
                    memcpy(dst + (size_t)(((b * c->H + h) * c->S + s) * c->D + d) * e,
                           src + (size_t)(((b * c->S + s) * c->H + h) * c->D + d) * e, e);
}

static void layouts_match_the_host_permutation(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const shape4 *c = &cases[k];
        unsigned char *hs = NULL;
        kk_tensor *src = random_on_gpu(c->dt, c->B, c->S, c->H, c->D, &hs), *view = NULL;
        kk_tensor *dst = on(DEV, c->dt, c->B, c->H, c->S, c->D);
        kk_assert_ok(kk_tensor_transpose(src, 1, 2, &view));
        const uint64_t before = host_allocs();
        kk_assert_ok(kk_tensor_copy(dst, view));
        assert_int_equal(host_allocs(), before); /* no staging buffer on the host */
        unsigned char *want = malloc(kk_tensor_nbytes(dst)), *got = host_of(dst);
        permute_bshd(c, hs, want);
        assert_memory_equal(got, want, kk_tensor_nbytes(dst));
        printf("layout %s [%lld,%lld,%lld,%lld]: exact\n", kk_dtype_name(c->dt), (long long)c->B,
               (long long)c->S, (long long)c->H, (long long)c->D);
        free(hs), free(want), free(got);
        kk_tensor_destroy(view), kk_tensor_destroy(src), kk_tensor_destroy(dst);
    }
}

/* Rows [L, L+S) of a cache [B,H,S_max,D] from a contiguous [B,H,S,D] and from
 * a [B,S,H,D] seen as [B,H,S,D]; every other row keeps its bytes. */
static void cache_rows_are_written_in_place(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0] - 1; k++) {
        const shape4 *c = &cases[k];
        const int64_t L = 3, smax = L + c->S + 2;
        const size_t e = (size_t)kk_dtype_bits(c->dt) / 8;
        for (int permuted = 0; permuted < 2; permuted++) {
            unsigned char *hc = NULL, *hs = NULL;
            kk_tensor *cache = random_on_gpu(c->dt, c->B, c->H, smax, c->D, &hc);
            kk_tensor *src = permuted ? random_on_gpu(c->dt, c->B, c->S, c->H, c->D, &hs)
                                      : random_on_gpu(c->dt, c->B, c->H, c->S, c->D, &hs);
            kk_tensor *rows = NULL, *view = NULL;
            kk_assert_ok(kk_tensor_slice(cache, 2, L, L + c->S, 1, &rows));
            if (permuted) kk_assert_ok(kk_tensor_transpose(src, 1, 2, &view));
            const uint64_t before = host_allocs();
            kk_assert_ok(kk_tensor_copy(rows, permuted ? view : src));
            assert_int_equal(host_allocs(), before);
            unsigned char *bhsd = malloc(kk_tensor_nbytes(src));
            if (permuted)
                permute_bshd(c, hs, bhsd);
            else
                memcpy(bhsd, hs, kk_tensor_nbytes(src));
            for (int64_t bh = 0; bh < c->B * c->H; bh++) /* the rows written */
                memcpy(hc + (size_t)((bh * smax + L) * c->D) * e,
                       bhsd + (size_t)(bh * c->S * c->D) * e, (size_t)(c->S * c->D) * e);
            unsigned char *got = host_of(cache);
            assert_memory_equal(got, hc, kk_tensor_nbytes(cache));
            free(hc), free(hs), free(bhsd), free(got);
            kk_tensor_destroy(view), kk_tensor_destroy(rows);
            kk_tensor_destroy(src), kk_tensor_destroy(cache);
        }
    }
}

/* The kernel given the job of a copy with its permute left out (the source
 * read as if it were [B,H,S,D]): the comparison above must see it. */
static void a_wrong_job_is_caught(void **state) {
    (void)state;
    const kk__backend *b = kk__backend_get(KK_BACKEND_CUDA);
    assert_non_null(b->mem->strided_copy);
    const shape4 c = {KK_DTYPE_F32, 2, 5, 3, 7};
    unsigned char *hs = NULL;
    kk_tensor *src = random_on_gpu(c.dt, c.B, c.S, c.H, c.D, &hs), *view = NULL;
    kk_tensor *dst = on(DEV, c.dt, c.B, c.H, c.S, c.D);
    kk_assert_ok(kk_tensor_transpose(src, 1, 2, &view));
    kk__strided_job j;
    assert_true(kk__strided_job_make(&j, dst->data, view->data, 4, 4, view->shape, dst->strides,
                                     dst->strides)); /* wrong: dst's strides for src */
    kk_assert_ok(b->mem->strided_copy(b->context, 0, &j, NULL, 1, "test"));
    unsigned char *want = malloc(kk_tensor_nbytes(dst)), *got = host_of(dst);
    permute_bshd(&c, hs, want);
    assert_true(memcmp(got, want, kk_tensor_nbytes(dst)) != 0);
    free(hs), free(want), free(got);
    kk_tensor_destroy(view), kk_tensor_destroy(src), kk_tensor_destroy(dst);
}

int main(void) {
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layouts_match_the_host_permutation),
        cmocka_unit_test(cache_rows_are_written_in_place),
        cmocka_unit_test(a_wrong_job_is_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

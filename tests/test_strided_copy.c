/* labels: unit cpu */
/* The job a device strided copy runs (src/backend/strided_copy.c): size-1
 * dimensions dropped, contiguous ones merged, a contiguous last dimension
 * widened to 16-byte elements when sizes, strides and pointers allow. Known
 * shapes reduce as worked out by hand; random views (permutes, slices, odd
 * sizes, every element size, misaligned pointers) run through the job's own
 * offsets (kk__strided_offsets, the kernel's arithmetic) give exactly the
 * host strided copy's bytes; a job with a wrong stride is caught. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/strided_copy.h"
#include "core/tensor_internal.h"

static kk__strided_job job_of(const kk_tensor *dst, const kk_tensor *src) {
    kk__strided_job j;
    assert_true(kk__strided_job_make(&j, dst->data, src->data, kk_dtype_bits(src->dtype) / 8,
                                     src->ndim, src->shape, dst->strides, src->strides));
    return j;
}

/* The job on host memory, element by element as the kernel does it. */
static void run_job(const kk__strided_job *j) {
    for (int64_t i = 0; i < j->n; i++) {
        int64_t d, s;
        kk__strided_offsets(j, i, &d, &s);
        memcpy((char *)j->dst + d * j->elem_bytes, (const char *)j->src + s * j->elem_bytes,
               (size_t)j->elem_bytes);
    }
}

static kk_tensor *make(kk_dtype dt, int ndim, const int64_t *shape) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", dt, ndim, shape, &t));
    return t;
}

static void permute_reduces_to_three_dims_of_16_bytes(void **state) {
    (void)state;
    /* [B,S,H,D] = [2,5,3,8] f16 seen as [B,H,S,D] into a contiguous [2,3,5,8]:
     * no dims merge (the permute breaks each pair), D = 8 halves = 16 bytes is
     * one element: shape [2,3,5], dst strides [15,5,1], src [15,1,3]. */
    kk_tensor *src = make(KK_DTYPE_F16, 4, (int64_t[]){2, 5, 3, 8}), *view = NULL;
    kk_tensor *dst = make(KK_DTYPE_F16, 4, (int64_t[]){2, 3, 5, 8});
    kk_assert_ok(kk_tensor_transpose(src, 1, 2, &view));
    kk__strided_job j = job_of(dst, view);
    assert_int_equal(j.ndim, 3);
    assert_int_equal(j.elem_bytes, 16);
    assert_int_equal(j.n, 30);
    const int64_t shape[] = {2, 3, 5}, ds[] = {15, 5, 1}, ss[] = {15, 1, 3};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(j.shape[k], shape[k]);
        assert_int_equal(j.dst_strides[k], ds[k]);
        assert_int_equal(j.src_strides[k], ss[k]);
    }
    /* D = 7: odd, stays 2-byte elements in 4 dims */
    kk_tensor *s7 = make(KK_DTYPE_F16, 4, (int64_t[]){2, 5, 3, 7}), *v7 = NULL;
    kk_tensor *d7 = make(KK_DTYPE_F16, 4, (int64_t[]){2, 3, 5, 7});
    kk_assert_ok(kk_tensor_transpose(s7, 1, 2, &v7));
    j = job_of(d7, v7);
    assert_int_equal(j.ndim, 4);
    assert_int_equal(j.elem_bytes, 2);
    assert_int_equal(j.n, 210);
    /* contiguous to contiguous: one dimension; size-1 dims go */
    kk_tensor *a = make(KK_DTYPE_F32, 3, (int64_t[]){3, 1, 4}),
              *b = make(KK_DTYPE_F32, 3, (int64_t[]){3, 1, 4});
    j = job_of(a, b);
    assert_int_equal(j.ndim, 1);
    assert_int_equal(j.elem_bytes, 16);
    assert_int_equal(j.n, 3);
    /* a pointer off 16 bytes: narrower elements (4 bytes here, f32 at +4) */
    j = (kk__strided_job){0};
    assert_true(kk__strided_job_make(&j, (char *)a->data + 4, b->data, 4, 1, (int64_t[]){8},
                                     (int64_t[]){1}, (int64_t[]){1}));
    assert_int_equal(j.elem_bytes, 4);
    /* what the job cannot describe */
    assert_false(kk__strided_job_make(&j, a->data, b->data, 3, 1, (int64_t[]){2}, (int64_t[]){1},
                                      (int64_t[]){1}));
    assert_false(kk__strided_job_make(&j, a->data, b->data, 4, 9, (int64_t[9]){0}, (int64_t[9]){0},
                                      (int64_t[9]){0}));
    kk_tensor *ts[] = {src, view, dst, s7, v7, d7, a, b};
    for (int i = 0; i < 8; i++) kk_tensor_destroy(ts[i]);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static int64_t draw(int64_t n) { /* 0 .. n-1 */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (int64_t)(g_rng % (uint64_t)n);
}

/* A random view of a fresh tensor: permuted, sliced (steps too), and with a
 * 1-element offset now and then so pointers are misaligned. */
static kk_tensor *random_view(kk_dtype dt, int ndim, kk_tensor **base) {
    int64_t shape[KK_TENSOR_MAX_DIMS];
    for (int k = 0; k < ndim; k++) shape[k] = 1 + draw(k == ndim - 1 ? 17 : 6);
    *base = make(dt, ndim, shape);
    const size_t bytes = kk_tensor_nbytes(*base);
    for (size_t i = 0; i < bytes; i++)
        ((unsigned char *)(*base)->data)[i] = (unsigned char)draw(256);
    kk_tensor *v = NULL, *w = NULL;
    kk_assert_ok(kk_tensor_slice(*base, 0, 0, shape[0], 1, &v));
    for (int r = 0; r < 3; r++) {
        const int d0 = (int)draw(ndim), d1 = (int)draw(ndim);
        if (draw(2)) {
            kk_assert_ok(kk_tensor_transpose(v, d0, d1, &w));
        } else {
            const int64_t n = v->shape[d0], start = n > 1 ? draw(2) : 0, step = 1 + draw(2);
            kk_assert_ok(kk_tensor_slice(v, d0, start, n, step, &w));
        }
        kk_tensor_destroy(v);
        v = w;
    }
    return v;
}

static void random_views_copy_exactly(void **state) {
    (void)state;
    static const kk_dtype dts[] = {KK_DTYPE_UINT8, KK_DTYPE_BF16, KK_DTYPE_F32, KK_DTYPE_F64};
    int widened = 0, cases = 0;
    for (int c = 0; c < 3000; c++) {
        const kk_dtype dt = dts[c % 4];
        const int ndim = 1 + (int)draw(5);
        kk_tensor *sb = NULL, *db = NULL;
        kk_tensor *src = random_view(dt, ndim, &sb);
        /* dst: contiguous, or another random view of the same shape */
        kk_tensor *dst = make(dt, src->ndim, src->shape), *want = make(dt, src->ndim, src->shape);
        kk_tensor *dview = dst;
        if (c % 2) { /* a transposed destination of that shape */
            kk_tensor_destroy(dst);
            int64_t sh[KK_TENSOR_MAX_DIMS];
            memcpy(sh, src->shape, sizeof sh);
            const int a = 0, b = src->ndim - 1;
            int64_t t = sh[a];
            sh[a] = sh[b], sh[b] = t;
            db = make(dt, src->ndim, sh);
            kk_assert_ok(kk_tensor_transpose(db, a, b, &dview));
            dst = NULL;
        }
        if (kk_tensor_numel(src) > 0) {
            kk__host_strided_copy(want, src);
            kk__strided_job j = job_of(dview, src);
            widened += j.elem_bytes > kk_dtype_bits(dt) / 8;
            run_job(&j);
            kk_tensor *got = make(dt, src->ndim, src->shape);
            kk__host_strided_copy(got, dview);
            assert_memory_equal(got->data, want->data, kk_tensor_nbytes(want));
            kk_tensor_destroy(got);
            cases++;
        }
        kk_tensor_destroy(src), kk_tensor_destroy(sb), kk_tensor_destroy(want);
        kk_tensor_destroy(dst), kk_tensor_destroy(db);
        if (dview != dst) kk_tensor_destroy(dview);
    }
    printf("%d random views copied exactly, %d with widened elements\n", cases, widened);
    assert_true(widened > 100);
}

static void a_wrong_job_is_caught(void **state) {
    (void)state;
    kk_tensor *src = make(KK_DTYPE_F32, 4, (int64_t[]){2, 5, 3, 7}), *view = NULL;
    kk_tensor *dst = make(KK_DTYPE_F32, 4, (int64_t[]){2, 3, 5, 7});
    kk_tensor *want = make(KK_DTYPE_F32, 4, (int64_t[]){2, 3, 5, 7});
    for (int i = 0; i < 210; i++) ((float *)src->data)[i] = (float)i;
    kk_assert_ok(kk_tensor_transpose(src, 1, 2, &view));
    kk__host_strided_copy(want, view);
    kk__strided_job j = job_of(dst, view);
    run_job(&j);
    assert_memory_equal(dst->data, want->data, kk_tensor_nbytes(want));
    /* the permute forgotten: the source's S and H strides swapped */
    const int64_t t = j.src_strides[1];
    j.src_strides[1] = j.src_strides[2], j.src_strides[2] = t;
    memset(dst->data, 0, kk_tensor_nbytes(dst));
    run_job(&j);
    assert_true(memcmp(dst->data, want->data, kk_tensor_nbytes(want)) != 0);
    kk_tensor_destroy(view), kk_tensor_destroy(src), kk_tensor_destroy(dst);
    kk_tensor_destroy(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(permute_reduces_to_three_dims_of_16_bytes),
        cmocka_unit_test(random_views_copy_exactly),
        cmocka_unit_test(a_wrong_job_is_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

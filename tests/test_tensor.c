/* labels: unit cpu */
/* Tensors: create/wrap/destroy, views sharing refcounted storage, strided
 * copies against an index formula, packed e2m1 rules, overflow-checked sizes,
 * argument errors naming the argument, size estimation and padding. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_internal.h"
#include "kernelkit/memory.h"
#include "kernelkit/tensor.h"

#define assert_arg_error(call, name)                                                               \
    do {                                                                                           \
        kk_assert_status((call), KK_ERR_INVALID_ARGUMENT);                                         \
        assert_string_equal(kk_last_error()->argument, (name));                                    \
    } while (0)

static int refs(const kk_tensor *t) { return atomic_load(&t->storage->refs); }

static uint64_t cpu_allocated(void) {
    kk_mem_stats s;
    kk_assert_ok(kk_mem_stats_get("cpu", -1, &s));
    return s.allocated_bytes;
}

/* Element (i0, i1, ...) of a float tensor through its strides. */
static float at(const kk_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    return ((const float *)t->data)[off];
}

/* A [2,3,4] f32 tensor holding value(i,j,k) = 100i + 10j + k. */
static kk_tensor *make_234(void) {
    const int64_t shape[3] = {2, 3, 4};
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 3, shape, &t));
    float *p = t->data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) p[(i * 3 + j) * 4 + k] = (float)(100 * i + 10 * j + k);
    return t;
}

static void create_and_destroy(void **state) {
    (void)state;
    uint64_t before = cpu_allocated();
    kk_tensor *t = make_234();
    assert_int_equal(t->ndim, 3);
    assert_int_equal(t->dtype, KK_DTYPE_F32);
    assert_int_equal(t->strides[0], 12);
    assert_int_equal(t->strides[1], 4);
    assert_int_equal(t->strides[2], 1);
    assert_int_equal(t->shape[3], 0);
    assert_string_equal(t->device, "cpu");
    assert_int_equal(t->device_kind, KK_BACKEND_CPU);
    assert_non_null(t->data);
    assert_non_null(t->storage);
    assert_int_equal(refs(t), 1);
    assert_int_equal(kk_tensor_numel(t), 24);
    assert_int_equal(kk_tensor_nbytes(t), 96);
    assert_true(kk_tensor_is_contiguous(t));
    assert_true(cpu_allocated() >= before + 96);
    kk_tensor_destroy(t);
    assert_int_equal(cpu_allocated(), before);
    kk_tensor_destroy(NULL);

    kk_tensor *s = NULL; /* a scalar and an empty tensor */
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F64, 0, NULL, &s));
    assert_int_equal(kk_tensor_numel(s), 1);
    assert_int_equal(kk_tensor_nbytes(s), 8);
    kk_tensor_destroy(s);
    const int64_t empty[2] = {0, 5};
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, empty, &s));
    assert_null(s->data);
    assert_int_equal(kk_tensor_numel(s), 0);
    assert_true(kk_tensor_is_contiguous(s));
    kk_tensor_destroy(s);
}

static void wrap_borrows(void **state) {
    (void)state;
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    const int64_t shape[2] = {3, 4}, strides[2] = {1, 3}; /* column-major */
    kk_tensor *t = NULL, *c = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, strides, buf, &t));
    assert_null(t->storage);
    assert_ptr_equal(t->data, buf);
    assert_false(kk_tensor_is_contiguous(t));
    int64_t idx[2] = {2, 1};
    assert_true(at(t, idx) == 5.0f); /* 2 + 1*3 */
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, NULL, buf, &c));
    assert_true(kk_tensor_is_contiguous(c));
    kk_tensor *v = NULL; /* a view of borrowed memory borrows too */
    kk_assert_ok(kk_tensor_slice(t, 1, 1, 3, 1, &v));
    assert_null(v->storage);
    kk_tensor_destroy(t); /* must not free buf (ASan would catch a free of the stack) */
    kk_tensor_destroy(v);
    kk_tensor_destroy(c);
    assert_true(buf[11] == 11.0f);
}

static void no_cuda_device(void **state) {
    (void)state;
    if (kk_backend_available(KK_BACKEND_CUDA)) skip();
    const int64_t shape[1] = {4};
    kk_tensor *t = NULL;
    kk_assert_status(kk_tensor_create("cuda:0", KK_DTYPE_F32, 1, shape, &t),
                     KK_ERR_CUDA_UNAVAILABLE);
    assert_string_equal(kk_last_error()->argument, "device");
    assert_string_equal(kk_last_error()->function, "kk_tensor_create");
    assert_null(t);
}

static void bad_arguments(void **state) {
    (void)state;
    const int64_t shape[2] = {2, 3}, neg[2] = {2, -1};
    kk_tensor *t = NULL, *v = NULL;
    float buf[6];
    assert_arg_error(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, NULL), "out");
    assert_arg_error(kk_tensor_create("cpu", (kk_dtype)99, 2, shape, &t), "dtype");
    assert_arg_error(kk_tensor_create("cpu", KK_DTYPE_F32, 9, shape, &t), "ndim");
    assert_arg_error(kk_tensor_create("cpu", KK_DTYPE_F32, -1, shape, &t), "ndim");
    assert_arg_error(kk_tensor_create("cpu", KK_DTYPE_F32, 2, NULL, &t), "shape");
    assert_arg_error(kk_tensor_create("cpu", KK_DTYPE_F32, 2, neg, &t), "shape");
    assert_arg_error(kk_tensor_create("gpu", KK_DTYPE_F32, 2, shape, &t), "device");
    assert_arg_error(kk_tensor_create(NULL, KK_DTYPE_F32, 2, shape, &t), "device");
    assert_null(t);
    assert_arg_error(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, NULL, NULL, &t), "data");
    const int64_t bad_strides[2] = {3, -1};
    assert_arg_error(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, bad_strides, buf, &t),
                     "strides");
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, NULL, buf, &t));
    assert_arg_error(kk_tensor_slice(t, 2, 0, 1, 1, &v), "dim");
    assert_arg_error(kk_tensor_slice(t, -1, 0, 1, 1, &v), "dim");
    assert_arg_error(kk_tensor_slice(t, 1, 4, 4, 1, &v), "start");
    assert_arg_error(kk_tensor_slice(t, 1, 2, 1, 1, &v), "stop");
    assert_arg_error(kk_tensor_slice(t, 1, 0, 4, 1, &v), "stop");
    assert_arg_error(kk_tensor_slice(t, 1, 0, 3, 0, &v), "step");
    assert_arg_error(kk_tensor_slice(NULL, 1, 0, 3, 1, &v), "t");
    assert_arg_error(kk_tensor_slice(t, 1, 0, 3, 1, NULL), "view");
    const int64_t five[1] = {5};
    assert_arg_error(kk_tensor_reshape(t, 1, five, &v), "shape");
    assert_arg_error(kk_tensor_transpose(t, 0, 2, &v), "dim1");
    assert_arg_error(kk_tensor_transpose(t, 5, 0, &v), "dim0");
    assert_null(v);
    kk_tensor *u = NULL, *w = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F16, 2, shape, &u));
    assert_arg_error(kk_tensor_copy(u, t), "dst"); /* dtype */
    assert_arg_error(kk_tensor_copy(t, NULL), "src");
    const int64_t shape32[2] = {3, 2};
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape32, &w));
    assert_arg_error(kk_tensor_copy(w, t), "dst"); /* shape */
    const int64_t bcast[2] = {0, 1};
    kk_tensor *b = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, bcast, buf, &b));
    assert_arg_error(kk_tensor_copy(b, t), "dst"); /* a broadcast destination */
    kk_assert_ok(kk_tensor_copy(t, b));            /* a broadcast source is fine */
    kk_tensor_destroy(b);
    kk_tensor_destroy(u);
    kk_tensor_destroy(w);
    kk_tensor_destroy(t);
}

static void overflow_is_an_error(void **state) {
    (void)state;
    const int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    const int64_t bytes_overflow[1] = {INT64_C(1) << 62}; /* 2^62 f32 = 2^64 bytes */
    kk_tensor *t = NULL;
    size_t bytes = 0;
    assert_arg_error(kk_tensor_create("cpu", KK_DTYPE_F32, 2, huge, &t), "shape");
    assert_arg_error(kk_tensor_bytes_for(KK_DTYPE_F32, 1, bytes_overflow, &bytes), "shape");
    kk_assert_ok(kk_tensor_bytes_for(KK_DTYPE_E2M1, 1, bytes_overflow, &bytes));
    assert_true(bytes == (size_t)1 << 61);
    const int64_t max_dim[1] = {INT64_MAX};
    kk_assert_ok(kk_tensor_bytes_for(KK_DTYPE_UINT8, 1, max_dim, &bytes));
    assert_arg_error(kk_tensor_bytes_for(KK_DTYPE_F16, 1, max_dim, &bytes), "shape");
    float buf[4];
    const int64_t shape[2] = {3, 3}, strides[2] = {INT64_MAX / 2, 1};
    assert_arg_error(kk_tensor_wrap("cpu", KK_DTYPE_F32, 2, shape, strides, buf, &t), "strides");
    kk_pad_info pad;
    const int64_t near_max[1] = {INT64_MAX - 2};
    assert_arg_error(kk_tensor_pad_shape(KK_DTYPE_UINT8, 1, near_max, &pad), "shape");
    assert_null(t);
}

static void slice_shares_storage(void **state) {
    (void)state;
    uint64_t before = cpu_allocated();
    kk_tensor *t = make_234(), *v = NULL, *w = NULL;
    kk_assert_ok(kk_tensor_slice(t, 2, 1, 4, 2, &v)); /* k = 1, 3 */
    assert_int_equal(v->shape[2], 2);
    assert_int_equal(v->strides[2], 2);
    assert_ptr_equal(v->storage, t->storage);
    assert_int_equal(refs(t), 2);
    kk_assert_ok(kk_tensor_slice(v, 1, 1, 3, 1, &w)); /* j = 1, 2 */
    assert_int_equal(refs(t), 3);
    assert_false(kk_tensor_is_contiguous(w));
    kk_tensor_destroy(t); /* the base first: the views keep the memory */
    assert_int_equal(refs(v), 2);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 2; k++) {
                int64_t idx[3] = {i, j, k};
                assert_true(at(w, idx) == (float)(100 * i + 10 * (j + 1) + 2 * k + 1));
            }
    kk_tensor_destroy(v);
    kk_tensor_destroy(w);
    assert_int_equal(cpu_allocated(), before);

    kk_tensor *e = make_234(), *z = NULL; /* an empty slice */
    kk_assert_ok(kk_tensor_slice(e, 0, 2, 2, 1, &z));
    assert_int_equal(kk_tensor_numel(z), 0);
    kk_tensor_destroy(z);
    kk_tensor_destroy(e);
}

static void reshape_legal_and_not(void **state) {
    (void)state;
    kk_tensor *t = make_234(), *v = NULL, *r = NULL;
    const int64_t s64[2] = {6, 4}, s24[1] = {24}, s4_6[2] = {4, 6}, s1[4] = {1, 2, 12, 1};
    kk_assert_ok(kk_tensor_reshape(t, 2, s64, &v));
    assert_int_equal(v->strides[0], 4);
    assert_int_equal(refs(t), 2);
    kk_tensor_destroy(v);
    kk_assert_ok(kk_tensor_reshape(t, 4, s1, &v));
    int64_t idx[4] = {0, 1, 7, 0};
    assert_true(at(v, idx) == 100.0f + 10 * 1 + 3);
    kk_tensor_destroy(v);
    /* Slice dim 0 with a step: rows stay contiguous, so [.., 3, 4] -> [.., 12]. */
    kk_assert_ok(kk_tensor_slice(t, 0, 0, 2, 2, &v)); /* [1, 3, 4] */
    const int64_t s1_12[2] = {1, 12};
    kk_assert_ok(kk_tensor_reshape(v, 2, s1_12, &r));
    kk_tensor_destroy(r);
    kk_tensor_destroy(v);
    /* A transpose cannot be flattened without a copy. */
    kk_assert_ok(kk_tensor_transpose(t, 1, 2, &v)); /* [2, 4, 3] */
    assert_arg_error(kk_tensor_reshape(v, 1, s24, &r), "shape");
    kk_assert_contains(kk_last_error_message(), "not contiguous");
    const int64_t s2_12[2] = {2, 12};
    assert_arg_error(kk_tensor_reshape(v, 2, s2_12, &r), "shape");
    /* ... but splitting a dimension always works. */
    const int64_t split[4] = {2, 2, 2, 3};
    kk_assert_ok(kk_tensor_reshape(v, 4, split, &r));
    int64_t i4[4] = {1, 1, 0, 2}; /* v[1, 2, 2] = t[1, 2, 2] */
    assert_true(at(r, i4) == 122.0f);
    kk_tensor_destroy(r);
    kk_tensor_destroy(v);
    kk_assert_ok(kk_tensor_reshape(t, 2, s4_6, &v));
    assert_true(kk_tensor_is_contiguous(v));
    kk_tensor_destroy(v);
    kk_tensor_destroy(t);
}

/* A random strided view copied into a contiguous tensor and back into a
 * strided destination, checked element by element through the strides. */
static void strided_copies(void **state) {
    (void)state;
    const int64_t shape[4] = {3, 5, 4, 6};
    kk_tensor *base = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 4, shape, &base));
    for (int64_t i = 0; i < kk_tensor_numel(base); i++) ((float *)base->data)[i] = (float)i;
    kk_tensor *a = NULL, *b = NULL, *src = NULL;
    kk_assert_ok(kk_tensor_slice(base, 1, 1, 5, 2, &a)); /* [3, 2, 4, 6] */
    kk_assert_ok(kk_tensor_transpose(a, 0, 3, &b));      /* [6, 2, 4, 3] */
    kk_assert_ok(kk_tensor_slice(b, 2, 1, 4, 1, &src));  /* [6, 2, 3, 3] */
    kk_tensor *dst = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 4, src->shape, &dst));
    kk_assert_ok(kk_tensor_copy(dst, src));
    int64_t n = 0;
    for (int64_t i = 0; i < 6; i++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t k = 0; k < 3; k++)
                for (int64_t l = 0; l < 3; l++) {
                    /* src[i,j,k,l] = base[l, 1 + 2j, 1 + k, i] */
                    float want = (float)(((l * 5 + 1 + 2 * j) * 4 + 1 + k) * 6 + i);
                    assert_true(((float *)dst->data)[n++] == want);
                }
    /* Into a strided destination: the gaps must stay untouched. */
    kk_tensor *big = NULL, *hole = NULL;
    const int64_t bshape[4] = {6, 2, 3, 6};
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 4, bshape, &big));
    for (int64_t i = 0; i < kk_tensor_numel(big); i++) ((float *)big->data)[i] = -1.0f;
    kk_assert_ok(kk_tensor_slice(big, 3, 0, 6, 2, &hole));
    kk_assert_ok(kk_tensor_copy(hole, src));
    for (int64_t i = 0; i < kk_tensor_numel(big); i++) {
        float got = ((float *)big->data)[i];
        if (i % 2)
            assert_true(got == -1.0f);
        else
            assert_true(got == ((float *)dst->data)[i / 2]);
    }
    kk_tensor *objs[] = {base, a, b, src, dst, big, hole};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) kk_tensor_destroy(objs[i]);
}

/* Borrowed host memory <-> tensors owned by the CPU allocator, all dtypes. */
static void host_and_cpu_copies(void **state) {
    (void)state;
    const kk_dtype types[] = {KK_DTYPE_F64, KK_DTYPE_BF16, KK_DTYPE_INT8, KK_DTYPE_E2M1};
    for (size_t d = 0; d < sizeof types / sizeof types[0]; d++) {
        const int64_t shape[2] = {7, 9};
        unsigned char in[512], out[512];
        for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 37 + d);
        memset(out, 0, sizeof out);
        size_t bytes = 0;
        kk_assert_ok(kk_tensor_bytes_for(types[d], 2, shape, &bytes));
        kk_tensor *h = NULL, *c = NULL, *o = NULL;
        kk_assert_ok(kk_tensor_wrap("cpu", types[d], 2, shape, NULL, in, &h));
        kk_assert_ok(kk_tensor_create("cpu", types[d], 2, shape, &c));
        kk_assert_ok(kk_tensor_wrap("cpu", types[d], 2, shape, NULL, out, &o));
        kk_assert_ok(kk_tensor_copy(c, h));
        kk_assert_ok(kk_tensor_copy(o, c));
        if (types[d] == KK_DTYPE_E2M1) { /* 63 elements: the last high nibble is not ours */
            assert_memory_equal(in, out, bytes - 1);
            assert_int_equal(out[bytes - 1], in[bytes - 1] & 0x0F);
        } else {
            assert_memory_equal(in, out, bytes);
        }
        kk_tensor_destroy(h);
        kk_tensor_destroy(c);
        kk_tensor_destroy(o);
    }
}

static void e2m1_rules(void **state) {
    (void)state;
    const int64_t shape[2] = {3, 5};
    kk_tensor *t = NULL, *v = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_E2M1, 2, shape, &t));
    assert_int_equal(kk_tensor_nbytes(t), 8);
    unsigned char *p = t->data;
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(0x10 * ((2 * i + 1) & 15) + (2 * i & 15));
    /* element e holds e & 15 */
    assert_arg_error(kk_tensor_slice(t, 1, 1, 5, 1, &v), "start"); /* odd offset */
    assert_arg_error(kk_tensor_slice(t, 1, 0, 5, 2, &v), "step");
    assert_arg_error(kk_tensor_slice(t, 0, 1, 3, 1, &v), "start"); /* row 1 starts at 5 */
    assert_arg_error(kk_tensor_transpose(t, 0, 1, &v), "dim1");
    kk_assert_ok(kk_tensor_slice(t, 0, 2, 3, 1, &v)); /* row 2 starts at 10: byte 5 */
    assert_ptr_equal(v->data, p + 5);
    kk_tensor_destroy(v);
    kk_assert_ok(kk_tensor_slice(t, 1, 2, 5, 1, &v)); /* [3, 3], strides [5, 1], offset 2 */
    kk_tensor *c = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_E2M1, 2, v->shape, &c));
    kk_assert_ok(kk_tensor_copy(c, v));
    const unsigned char *q = c->data;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int e = i * 3 + j, want = (i * 5 + 2 + j) & 15;
            assert_int_equal((q[e / 2] >> (4 * (e % 2))) & 15, want);
        }
    /* Copy into row 0 (3 elements, a byte and a half): element 3 is row 1's. */
    kk_tensor *row = NULL, *src = NULL;
    const int64_t r0[1] = {5};
    unsigned char zeros[3] = {0, 0, 0};
    kk_assert_ok(kk_tensor_slice(t, 1, 0, 3, 1, &row));
    kk_tensor *row0 = NULL;
    kk_assert_ok(kk_tensor_slice(row, 0, 0, 1, 1, &row0));
    const int64_t s13[2] = {1, 3};
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_E2M1, 2, s13, NULL, zeros, &src));
    kk_assert_ok(kk_tensor_copy(row0, src));
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 0x30);
    (void)r0;
    kk_tensor *objs[] = {t, v, c, row, row0, src};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) kk_tensor_destroy(objs[i]);
}

static void sizes_and_padding(void **state) {
    (void)state;
    size_t bytes = 0;
    const int64_t s35[2] = {3, 5};
    kk_assert_ok(kk_tensor_bytes_for(KK_DTYPE_E2M1, 2, s35, &bytes));
    assert_int_equal(bytes, 8);
    kk_assert_ok(kk_tensor_bytes_for(KK_DTYPE_F32, 0, NULL, &bytes));
    assert_int_equal(bytes, 4);
    assert_int_equal(kk_tensor_pad_multiple(KK_DTYPE_BF16), 8);
    assert_int_equal(kk_tensor_pad_multiple(KK_DTYPE_FP8_E4M3), 16);
    assert_int_equal(kk_tensor_pad_multiple(KK_DTYPE_E2M1), 32);
    assert_int_equal(kk_tensor_pad_multiple((kk_dtype)77), 0);
    kk_pad_info p;
    const int64_t s[3] = {5, 100, 1000};
    kk_assert_ok(kk_tensor_pad_shape(KK_DTYPE_BF16, 3, s, &p));
    assert_int_equal(p.padded_shape[0], 5);
    assert_int_equal(p.padded_shape[1], 104);
    assert_int_equal(p.padded_shape[2], 1000);
    assert_int_equal(p.bytes, 5 * 100 * 1000 * 2);
    assert_int_equal(p.padded_bytes, 5 * 104 * 1000 * 2);
    assert_int_equal(p.waste_bytes, 5 * 4 * 1000 * 2);
    assert_true(p.waste_percent > 3.846 && p.waste_percent < 3.847); /* 4 / 104 */
    kk_assert_ok(kk_tensor_pad_shape(KK_DTYPE_FP8_E5M2, 3, s, &p));
    assert_int_equal(p.padded_shape[1], 112);
    assert_int_equal(p.padded_shape[2], 1008);
    const int64_t f4[2] = {100, 70};
    kk_assert_ok(kk_tensor_pad_shape(KK_DTYPE_E2M1, 2, f4, &p));
    assert_int_equal(p.padded_shape[0], 128);
    assert_int_equal(p.padded_shape[1], 96);
    assert_int_equal(p.bytes, 3500);
    assert_int_equal(p.padded_bytes, 128 * 48);
    const int64_t one[1] = {33};
    kk_assert_ok(kk_tensor_pad_shape(KK_DTYPE_F32, 1, one, &p));
    assert_int_equal(p.padded_shape[0], 36);
    const int64_t aligned[2] = {64, 64};
    kk_assert_ok(kk_tensor_pad_shape(KK_DTYPE_F16, 2, aligned, &p));
    assert_int_equal(p.waste_bytes, 0);
    assert_true(p.waste_percent == 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_and_destroy),    cmocka_unit_test(wrap_borrows),
        cmocka_unit_test(no_cuda_device),        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(overflow_is_an_error),  cmocka_unit_test(slice_shares_storage),
        cmocka_unit_test(reshape_legal_and_not), cmocka_unit_test(strided_copies),
        cmocka_unit_test(host_and_cpu_copies),   cmocka_unit_test(e2m1_rules),
        cmocka_unit_test(sizes_and_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

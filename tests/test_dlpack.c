/* labels: unit cpu */
/* DLPack import and export: every dtype mapping both ways, strided and offset
 * views (data = base + byte_offset), the producer's deleter called exactly
 * once after the last view, take_ownership = 0, export then re-import (same
 * pointer, shape, strides), the versioned read-only flag refused for outputs,
 * and every error path naming its argument (the deleter never called). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dlpack_abi.h"
#include "core/tensor_internal.h"
#include "kernelkit/dlpack.h"
#include "kernelkit/kernelkit.h"

/* ---- producers: managed tensors on the stack whose deleter counts calls ---- */

static void count_legacy(DLManagedTensor *self) { (*(int *)self->manager_ctx)++; }

static void count_versioned(DLManagedTensorVersioned *self) { (*(int *)self->manager_ctx)++; }

static DLManagedTensor legacy(void *data, int ndim, int64_t *shape, int64_t *strides,
                              DLDataType dtype, int *deleted) {
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = kDLCPU;
    m.dl_tensor.ndim = ndim;
    m.dl_tensor.dtype = dtype;
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
    m.manager_ctx = deleted;
    m.deleter = count_legacy;
    return m;
}

static DLManagedTensorVersioned versioned(void *data, int ndim, int64_t *shape, int64_t *strides,
                                          DLDataType dtype, uint64_t flags, int *deleted) {
    DLManagedTensorVersioned m;
    memset(&m, 0, sizeof m);
    m.version.major = 1;
    m.version.minor = 1;
    m.flags = flags;
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = kDLCPU;
    m.dl_tensor.ndim = ndim;
    m.dl_tensor.dtype = dtype;
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
    m.manager_ctx = deleted;
    m.deleter = count_versioned;
    return m;
}

static DLDataType dl_type(unsigned code, unsigned bits, unsigned lanes) {
    DLDataType t = {(uint8_t)code, (uint8_t)bits, (uint16_t)lanes};
    return t;
}

static const DLDataType F32 = {kDLFloat, 32, 1};

static uint64_t cpu_allocated(void) {
    kk_mem_stats s;
    kk_assert_ok(kk_mem_stats_get("cpu", -1, &s));
    return s.allocated_bytes;
}

/* ---- dtypes ---- */

static const struct {
    unsigned code, bits;
    kk_dtype dtype;
} MAPPING[] = {
    {kDLFloat, 64, KK_DTYPE_F64},
    {kDLFloat, 32, KK_DTYPE_F32},
    {kDLFloat, 16, KK_DTYPE_F16},
    {kDLBfloat, 16, KK_DTYPE_BF16},
    {KK__DL_FLOAT8_E4M3FN, 8, KK_DTYPE_FP8_E4M3},
    {KK__DL_FLOAT8_E5M2, 8, KK_DTYPE_FP8_E5M2},
    {KK__DL_FLOAT4_E2M1FN, 4, KK_DTYPE_E2M1},
    {kDLInt, 8, KK_DTYPE_INT8},
    {kDLInt, 32, KK_DTYPE_INT32},
    {kDLUInt, 8, KK_DTYPE_UINT8},
};
#define N_MAPPING (int)(sizeof MAPPING / sizeof MAPPING[0])

static void every_dtype_both_ways(void **state) {
    (void)state;
    _Alignas(16) static unsigned char buf[256];
    int64_t shape[2] = {2, 4};
    assert_int_equal(N_MAPPING, KK_DTYPE_COUNT); /* every kk_dtype has a DLPack code */
    for (int i = 0; i < N_MAPPING; i++) {
        const DLDataType dt = dl_type(MAPPING[i].code, MAPPING[i].bits, 1);
        int deleted = 0;
        DLManagedTensor m = legacy(buf, 2, shape, NULL, dt, &deleted);
        kk_tensor *t = NULL;
        kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
        assert_int_equal(t->dtype, MAPPING[i].dtype);
        assert_ptr_equal(t->data, buf);
        assert_string_equal(t->device, "cpu");
        assert_int_equal(t->strides[0], 4);
        assert_int_equal(t->strides[1], 1);
        assert_false(kk_tensor_is_read_only(t));

        DLManagedTensorVersioned mv = versioned(buf, 2, shape, NULL, dt, 0, &deleted);
        kk_tensor *tv = NULL;
        kk_assert_ok(kk_tensor_from_dlpack_versioned(&mv, 1, &tv));
        assert_int_equal(tv->dtype, MAPPING[i].dtype);

        /* export: the same code, bits and lanes; 1.1 for the codes 1.1 added */
        void *p = NULL, *pv = NULL;
        kk_assert_ok(kk_tensor_to_dlpack(t, &p));
        kk_assert_ok(kk_tensor_to_dlpack_versioned(tv, &pv));
        const DLManagedTensor *e = p;
        const DLManagedTensorVersioned *ev = pv;
        assert_int_equal(e->dl_tensor.dtype.code, MAPPING[i].code);
        assert_int_equal(e->dl_tensor.dtype.bits, MAPPING[i].bits);
        assert_int_equal(e->dl_tensor.dtype.lanes, 1);
        assert_int_equal(ev->dl_tensor.dtype.code, MAPPING[i].code);
        assert_int_equal(ev->version.major, 1);
        assert_int_equal(ev->version.minor, MAPPING[i].code > KK__DL_BOOL ? 1 : 0);
        assert_int_equal(ev->flags, 0);

        kk_tensor_destroy(t);
        kk_tensor_destroy(tv);
        assert_int_equal(deleted, 0); /* the exports still hold both */
        e->deleter((DLManagedTensor *)e);
        assert_int_equal(deleted, 1);
        ev->deleter((DLManagedTensorVersioned *)ev);
        assert_int_equal(deleted, 2);
    }
}

#define assert_refused(call, status, arg)                                                          \
    do {                                                                                           \
        kk_assert_status((call), (status));                                                        \
        assert_string_equal(kk_last_error()->argument, (arg));                                     \
    } while (0)

/* Import dl's tensor (legacy and versioned) and expect the error. */
static void expect_refused(DLManagedTensor *m, uint64_t flags, kk_status status, const char *arg) {
    int deleted = 0;
    void *ctx = m->manager_ctx;
    m->manager_ctx = &deleted;
    kk_tensor *t = (kk_tensor *)(uintptr_t)1;
    assert_refused(kk_tensor_from_dlpack(m, 1, &t), status, arg);
    assert_null(t);
    DLManagedTensorVersioned v =
        versioned(m->dl_tensor.data, m->dl_tensor.ndim, m->dl_tensor.shape, m->dl_tensor.strides,
                  m->dl_tensor.dtype, flags, &deleted);
    v.dl_tensor = m->dl_tensor;
    assert_refused(kk_tensor_from_dlpack_versioned(&v, 1, &t), status, arg);
    assert_int_equal(deleted, 0); /* on an error nothing was taken over */
    m->manager_ctx = ctx;
}

static void unsupported_dtypes(void **state) {
    (void)state;
    float buf[8] = {0};
    int64_t shape[1] = {2};
    int deleted = 0;
    const DLDataType no[] = {
        dl_type(kDLComplex, 64, 1),
        dl_type(kDLComplex, 128, 1),
        dl_type(KK__DL_BOOL, 8, 1),
        dl_type(kDLInt, 64, 1),
        dl_type(kDLInt, 16, 1),
        dl_type(kDLUInt, 16, 1),
        dl_type(kDLUInt, 32, 1),
        dl_type(kDLFloat, 8, 1),
        dl_type(KK__DL_FLOAT8_E4M3, 8, 1),
        dl_type(KK__DL_FLOAT8_E4M3FNUZ, 8, 1),
        dl_type(KK__DL_FLOAT8_E8M0FNU, 8, 1),
        dl_type(KK__DL_FLOAT6_E2M3FN, 6, 1),
        dl_type(kDLOpaqueHandle, 64, 1),
        dl_type(kDLFloat, 32, 4),
        dl_type(kDLFloat, 32, 0),
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        DLManagedTensor m = legacy(buf, 1, shape, NULL, no[i], &deleted);
        expect_refused(&m, 0, KK_ERR_UNSUPPORTED, "dl_tensor.dtype");
    }
    DLManagedTensor m = legacy(buf, 1, shape, NULL, dl_type(kDLComplex, 64, 1), &deleted);
    kk_tensor *t = NULL;
    kk_assert_status(kk_tensor_from_dlpack(&m, 1, &t), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error()->value, "kDLComplex");
    m.dl_tensor.dtype = dl_type(kDLFloat, 32, 4);
    kk_assert_status(kk_tensor_from_dlpack(&m, 1, &t), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error()->value, "lanes 4");
    kk_assert_contains(kk_last_error()->expected, "lanes 1");

    /* malformed: an unknown code, a code with a width it cannot have */
    const DLDataType bad[] = {dl_type(99, 32, 1), dl_type(kDLBfloat, 32, 1),
                              dl_type(KK__DL_FLOAT8_E4M3FN, 16, 1),
                              dl_type(KK__DL_FLOAT4_E2M1FN, 8, 1)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = legacy(buf, 1, shape, NULL, bad[i], &deleted);
        expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.dtype");
    }
    /* e2m1 padded one element a byte: refused through the versioned flag */
    DLManagedTensorVersioned v = versioned(buf, 1, shape, NULL, dl_type(KK__DL_FLOAT4_E2M1FN, 4, 1),
                                           DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, &deleted);
    assert_refused(kk_tensor_from_dlpack_versioned(&v, 1, &t), KK_ERR_UNSUPPORTED, "flags");
    assert_int_equal(deleted, 0);
}

/* ---- layouts ---- */

static void strided_and_offset_views(void **state) {
    (void)state;
    float base[64];
    for (int i = 0; i < 64; i++) base[i] = (float)i;
    int64_t shape[2] = {3, 4}, strides[2] = {8, 2};
    int deleted = 0;
    DLManagedTensor m = legacy(base, 2, shape, strides, F32, &deleted);
    m.dl_tensor.byte_offset = 5 * sizeof(float);
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    assert_ptr_equal(t->data, base + 5);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 3);
    assert_int_equal(t->shape[1], 4);
    assert_int_equal(t->strides[0], 8);
    assert_int_equal(t->strides[1], 2);
    assert_false(kk_tensor_is_contiguous(t));
    /* the elements a copy reads are the producer's: base[5 + 8i + 2j] */
    kk_tensor *c = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &c));
    kk_assert_ok(kk_tensor_copy(c, t));
    const float *cp = c->data;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) assert_true(cp[i * 4 + j] == (float)(5 + 8 * i + 2 * j));
    /* and writes land there too */
    kk_assert_ok(kk_tensor_copy(t, c));
    kk_tensor_destroy(c);
    kk_tensor_destroy(t);
    assert_int_equal(deleted, 1);

    /* a scalar: ndim 0, shape NULL */
    m = legacy(base, 0, NULL, NULL, F32, &deleted);
    m.dl_tensor.byte_offset = 3 * sizeof(float);
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    assert_int_equal(t->ndim, 0);
    assert_ptr_equal(t->data, base + 3);
    assert_int_equal(kk_tensor_numel(t), 1);
    kk_tensor_destroy(t);
    assert_int_equal(deleted, 2);

    /* negative strides where they are never used become compact ones */
    int64_t s1[2] = {1, 4}, neg[2] = {-7, 1};
    m = legacy(base, 2, s1, neg, F32, &deleted);
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    assert_int_equal(t->strides[0], 4);
    assert_int_equal(t->strides[1], 1);
    kk_tensor_destroy(t);

    /* an empty tensor: data NULL, any strides */
    int64_t empty[2] = {0, 3}, neg2[2] = {-1, -1};
    m = legacy(NULL, 2, empty, neg2, F32, &deleted);
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    assert_null(t->data);
    assert_int_equal(kk_tensor_numel(t), 0);
    void *p = NULL;
    kk_assert_ok(kk_tensor_to_dlpack(t, &p));
    assert_null(((DLManagedTensor *)p)->dl_tensor.data);
    ((DLManagedTensor *)p)->deleter(p);
    kk_tensor_destroy(t);
    assert_int_equal(deleted, 4);

    /* pinned host memory is CPU memory */
    m = legacy(base, 2, shape, NULL, F32, &deleted);
    m.dl_tensor.device.device_type = kDLCUDAHost;
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    assert_string_equal(t->device, "cpu");
    assert_int_equal(t->device_kind, KK_BACKEND_CPU);
    kk_tensor_destroy(t);

    /* packed e2m1: stride-1 rows, byte_offset in bytes */
    unsigned char nib[16] = {0x21, 0x43};
    int64_t es[2] = {2, 4};
    m = legacy(nib, 2, es, NULL, dl_type(KK__DL_FLOAT4_E2M1FN, 4, 1), &deleted);
    m.dl_tensor.byte_offset = 2;
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    assert_ptr_equal(t->data, nib + 2);
    kk_tensor_destroy(t);
}

/* ---- ownership ---- */

static void deleter_once_after_last_view(void **state) {
    (void)state;
    float base[24] = {0};
    int64_t shape[3] = {2, 3, 4};
    int deleted = 0;
    DLManagedTensor m = legacy(base, 3, shape, NULL, F32, &deleted);
    kk_tensor *t = NULL, *row = NULL, *tr = NULL, *rs = NULL;
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    kk_assert_ok(kk_tensor_slice(t, 0, 1, 2, 1, &row));
    kk_assert_ok(kk_tensor_transpose(t, 1, 2, &tr));
    kk_assert_ok(kk_tensor_reshape(row, 2, (int64_t[]){3, 4}, &rs));
    kk_tensor_destroy(t);
    assert_int_equal(deleted, 0);
    kk_tensor_destroy(row);
    kk_tensor_destroy(tr);
    assert_int_equal(deleted, 0);
    kk_tensor_destroy(rs);
    assert_int_equal(deleted, 1);

    DLManagedTensorVersioned v = versioned(base, 3, shape, NULL, F32, 0, &deleted);
    kk_assert_ok(kk_tensor_from_dlpack_versioned(&v, 1, &t));
    kk_assert_ok(kk_tensor_slice(t, 2, 0, 4, 2, &row));
    kk_tensor_destroy(row);
    assert_int_equal(deleted, 1);
    kk_tensor_destroy(t);
    assert_int_equal(deleted, 2);

    /* a producer with no deleter: nothing to call */
    m.deleter = NULL;
    kk_assert_ok(kk_tensor_from_dlpack(&m, 1, &t));
    kk_tensor_destroy(t);
    assert_int_equal(deleted, 2);
}

static void take_ownership_zero(void **state) {
    (void)state;
    float base[8] = {0};
    int64_t shape[1] = {8};
    int deleted = 0;
    DLManagedTensor m = legacy(base, 1, shape, NULL, F32, &deleted);
    DLManagedTensorVersioned v = versioned(base, 1, shape, NULL, F32, 0, &deleted);
    kk_tensor *t = NULL, *tv = NULL, *view = NULL;
    kk_assert_ok(kk_tensor_from_dlpack(&m, 0, &t));
    kk_assert_ok(kk_tensor_from_dlpack_versioned(&v, 0, &tv));
    kk_assert_ok(kk_tensor_slice(t, 0, 2, 6, 1, &view));
    assert_ptr_equal(view->data, base + 2);
    kk_tensor_destroy(t);
    kk_tensor_destroy(view);
    kk_tensor_destroy(tv);
    assert_int_equal(deleted, 0); /* the caller kept ownership */
    m.deleter(&m);                /* and releases it itself */
    assert_int_equal(deleted, 1);
}

/* ---- export ---- */

static void export_then_reimport(void **state) {
    (void)state;
    const uint64_t before = cpu_allocated();
    int64_t shape[2] = {4, 6};
    kk_tensor *t = NULL, *v = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &t));
    float *p = t->data;
    for (int i = 0; i < 24; i++) p[i] = (float)i;
    kk_assert_ok(kk_tensor_slice(t, 1, 1, 6, 2, &v)); /* [4,3], strides {6, 2}, offset 1 */

    void *out = NULL;
    kk_assert_ok(kk_tensor_to_dlpack(v, &out));
    DLManagedTensor *m = out;
    assert_ptr_equal(m->dl_tensor.data, v->data);
    assert_int_equal(m->dl_tensor.byte_offset, 0);
    assert_int_equal(m->dl_tensor.device.device_type, kDLCPU);
    assert_int_equal(m->dl_tensor.device.device_id, 0);
    assert_int_equal(m->dl_tensor.ndim, 2);
    assert_int_equal(m->dl_tensor.shape[0], 4);
    assert_int_equal(m->dl_tensor.shape[1], 3);
    assert_int_equal(m->dl_tensor.strides[0], 6);
    assert_int_equal(m->dl_tensor.strides[1], 2);
    void *data = v->data;
    kk_tensor_destroy(t);
    kk_tensor_destroy(v);
    assert_true(cpu_allocated() > before);   /* the export keeps the storage */
    assert_true(((float *)data)[2] == 3.0f); /* and it is still readable */

    kk_tensor *r = NULL;
    kk_assert_ok(kk_tensor_from_dlpack(m, 1, &r));
    assert_ptr_equal(r->data, data);
    assert_int_equal(r->ndim, 2);
    assert_int_equal(r->shape[0], 4);
    assert_int_equal(r->shape[1], 3);
    assert_int_equal(r->strides[0], 6);
    assert_int_equal(r->strides[1], 2);
    assert_int_equal(r->dtype, KK_DTYPE_F32);
    kk_tensor_destroy(r); /* calls our own deleter: everything goes */
    assert_int_equal(cpu_allocated(), before);

    /* versioned, and through two libraries: a producer's tensor imported,
     * exported again and re-imported; its deleter runs once, at the end */
    float base[6] = {0};
    int64_t s6[1] = {6};
    int deleted = 0;
    DLManagedTensorVersioned pv = versioned(base, 1, s6, NULL, F32, 0, &deleted);
    kk_tensor *a = NULL, *b = NULL;
    kk_assert_ok(kk_tensor_from_dlpack_versioned(&pv, 1, &a));
    kk_assert_ok(kk_tensor_to_dlpack_versioned(a, &out));
    kk_tensor_destroy(a);
    assert_int_equal(deleted, 0);
    DLManagedTensorVersioned *mv = out;
    assert_int_equal(mv->version.major, 1);
    assert_non_null(mv->dl_tensor.strides);
    kk_assert_ok(kk_tensor_from_dlpack_versioned(mv, 1, &b));
    assert_ptr_equal(b->data, base);
    kk_tensor_destroy(b);
    assert_int_equal(deleted, 1);

    /* a wrapped (borrowed) tensor exports too; its memory stays the caller's */
    kk_tensor *w = NULL;
    kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_F32, 1, s6, NULL, base, &w));
    kk_assert_ok(kk_tensor_to_dlpack(w, &out));
    kk_tensor_destroy(w);
    assert_ptr_equal(((DLManagedTensor *)out)->dl_tensor.data, base);
    ((DLManagedTensor *)out)->deleter(out);
}

/* ---- read-only ---- */

static void versioned_read_only(void **state) {
    (void)state;
    float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ys[8] = {0};
    int64_t shape[2] = {2, 4};
    int deleted = 0;
    DLManagedTensorVersioned vx =
        versioned(xs, 2, shape, NULL, F32, DLPACK_FLAG_BITMASK_READ_ONLY, &deleted);
    DLManagedTensorVersioned vy =
        versioned(ys, 2, shape, NULL, F32, DLPACK_FLAG_BITMASK_READ_ONLY, &deleted);
    kk_tensor *x = NULL, *y = NULL, *rw = NULL, *row = NULL;
    kk_assert_ok(kk_tensor_from_dlpack_versioned(&vx, 1, &x));
    kk_assert_ok(kk_tensor_from_dlpack_versioned(&vy, 1, &y));
    assert_true(kk_tensor_is_read_only(x));
    kk_assert_ok(kk_tensor_slice(y, 0, 0, 1, 1, &row));
    assert_true(kk_tensor_is_read_only(row)); /* views share it */
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &rw));
    assert_false(kk_tensor_is_read_only(rw));
    assert_false(kk_tensor_is_read_only(NULL));

    /* an input may be read-only; an output may not */
    kk_assert_ok(kk_softmax(x, rw, 1.0, NULL));
    assert_refused(kk_softmax(rw, y, 1.0, NULL), KK_ERR_INVALID_ARGUMENT, "y");
    kk_assert_contains(kk_last_error()->value, "read-only");
    assert_refused(kk_tensor_copy(y, rw), KK_ERR_INVALID_ARGUMENT, "dst");
    assert_refused(kk_tensor_copy(row, x), KK_ERR_INVALID_ARGUMENT, "dst");
    kk_assert_ok(kk_tensor_copy(rw, x));
    for (int i = 0; i < 8; i++) assert_true(ys[i] == 0.0f);

    /* the flag travels with an export */
    void *out = NULL;
    kk_assert_ok(kk_tensor_to_dlpack_versioned(x, &out));
    DLManagedTensorVersioned *e = out;
    assert_true(e->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    e->deleter(e);
    kk_assert_ok(kk_tensor_to_dlpack_versioned(rw, &out));
    assert_int_equal(((DLManagedTensorVersioned *)out)->flags, 0);
    ((DLManagedTensorVersioned *)out)->deleter(out);

    /* the copied flag does not make a tensor read-only */
    DLManagedTensorVersioned vc =
        versioned(ys, 2, shape, NULL, F32, DLPACK_FLAG_BITMASK_IS_COPIED, &deleted);
    kk_tensor *c = NULL;
    kk_assert_ok(kk_tensor_from_dlpack_versioned(&vc, 1, &c));
    assert_false(kk_tensor_is_read_only(c));
    kk_tensor_destroy(c);

    kk_tensor_destroy(x);
    kk_tensor_destroy(y);
    kk_tensor_destroy(row);
    kk_tensor_destroy(rw);
    assert_int_equal(deleted, 3);
}

/* ---- errors ---- */

static void argument_errors(void **state) {
    (void)state;
    _Alignas(16) float base[16] = {0};
    int64_t shape[2] = {2, 4};
    int deleted = 0;
    kk_tensor *t = NULL;
    DLManagedTensor m = legacy(base, 2, shape, NULL, F32, &deleted);
    DLManagedTensorVersioned v = versioned(base, 2, shape, NULL, F32, 0, &deleted);

    assert_refused(kk_tensor_from_dlpack(NULL, 1, &t), KK_ERR_INVALID_ARGUMENT,
                   "dl_managed_tensor");
    assert_refused(kk_tensor_from_dlpack(&m, 1, NULL), KK_ERR_INVALID_ARGUMENT, "out");
    assert_refused(kk_tensor_from_dlpack_versioned(NULL, 1, &t), KK_ERR_INVALID_ARGUMENT,
                   "dl_managed_tensor_versioned");
    assert_refused(kk_tensor_from_dlpack_versioned(&v, 1, NULL), KK_ERR_INVALID_ARGUMENT, "out");

    /* a major version other than 1 */
    const uint32_t majors[2] = {0, 2};
    for (int i = 0; i < 2; i++) {
        v.version.major = majors[i];
        assert_refused(kk_tensor_from_dlpack_versioned(&v, 1, &t), KK_ERR_UNSUPPORTED, "version");
        assert_null(t);
    }
    kk_assert_contains(kk_last_error()->value, "2.1");
    v.version.major = 1;
    assert_int_equal(deleted, 0);

    /* ndim */
    m.dl_tensor.ndim = -1;
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.ndim");
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    m = legacy(base, 9, nine, NULL, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_UNSUPPORTED, "dl_tensor.ndim");

    /* shapes: NULL, negative, an element count that overflows */
    m = legacy(base, 2, NULL, NULL, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.shape");
    int64_t negative[2] = {2, -4};
    m = legacy(base, 2, negative, NULL, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.shape");
    kk_assert_contains(kk_last_error()->value, "shape[1] = -4");
    int64_t huge[2] = {INT64_MAX / 2, 4};
    m = legacy(base, 2, huge, NULL, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.shape");
    int64_t bytes_overflow[1] = {INT64_MAX / 2};
    m = legacy(base, 1, bytes_overflow, NULL, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.shape");

    /* strides: negative where used, a span that overflows */
    int64_t neg[2] = {4, -1};
    m = legacy(base, 2, shape, neg, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_UNSUPPORTED, "dl_tensor.strides");
    kk_assert_contains(kk_last_error()->value, "strides[1] = -1");
    int64_t wide[2] = {INT64_MAX / 2 + 1, 1};
    m = legacy(base, 2, shape, wide, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.strides");
    int64_t e2m1_strided[2] = {8, 2};
    m = legacy(base, 2, shape, e2m1_strided, dl_type(KK__DL_FLOAT4_E2M1FN, 4, 1), &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.strides");

    /* data: NULL for a non-empty tensor, misaligned, an offset past the end
     * of the address space */
    m = legacy(NULL, 2, shape, NULL, F32, &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.data");
    m = legacy(base, 2, shape, NULL, F32, &deleted);
    m.dl_tensor.byte_offset = 2;
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.data");
    kk_assert_contains(kk_last_error()->expected, "aligned to 4 bytes for f32");
    kk_assert_contains(kk_last_error()->value, "byte_offset 2");
    m = legacy((char *)base + 1, 2, shape, NULL, dl_type(kDLFloat, 16, 1), &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.data");
    m = legacy((char *)base + 4, 2, shape, NULL, dl_type(kDLFloat, 64, 1), &deleted);
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.data");
    m = legacy((char *)base + 1, 2, shape, NULL, dl_type(kDLInt, 8, 1), &deleted);
    kk_assert_ok(kk_tensor_from_dlpack(&m, 0, &t)); /* bytes need no alignment */
    kk_tensor_destroy(t);
    m = legacy(base, 2, shape, NULL, F32, &deleted);
    m.dl_tensor.byte_offset = UINT64_MAX - 2;
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.byte_offset");

    /* devices: CUDA without the CUDA backend, devices KernelKit does not
     * have, unknown device types */
    m = legacy(base, 2, shape, NULL, F32, &deleted);
    m.dl_tensor.device.device_type = kDLCUDA;
    m.dl_tensor.device.device_id = -1;
    expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.device");
    if (!kk_built_with_cuda()) {
        m.dl_tensor.device.device_id = 1;
        expect_refused(&m, 0, KK_ERR_UNSUPPORTED, "dl_tensor.device");
        kk_assert_contains(kk_last_error()->value, "cuda:1");
        kk_assert_contains(kk_last_error()->expected, "no CUDA backend");
    }
    const int other[] = {kDLOpenCL,      kDLVulkan,   kDLMetal,       kDLVPI,        kDLROCM,
                         kDLROCMHost,    kDLExtDev,   kDLCUDAManaged, KK__DL_ONEAPI, KK__DL_WEBGPU,
                         KK__DL_HEXAGON, KK__DL_MAIA, KK__DL_TRN};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        m.dl_tensor.device.device_type = (DLDeviceType)other[i];
        m.dl_tensor.device.device_id = 0;
        expect_refused(&m, 0, KK_ERR_UNSUPPORTED, "dl_tensor.device");
    }
    kk_assert_contains(kk_last_error()->value, "kDLTrn");
    const int unknown[] = {0, 5, 6, 19, 1000, -3};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        m.dl_tensor.device.device_type = (DLDeviceType)unknown[i];
        expect_refused(&m, 0, KK_ERR_INVALID_ARGUMENT, "dl_tensor.device");
    }

    /* export */
    void *out = (void *)(uintptr_t)1;
    assert_refused(kk_tensor_to_dlpack(NULL, &out), KK_ERR_INVALID_ARGUMENT, "t");
    assert_null(out);
    assert_refused(kk_tensor_to_dlpack_versioned(NULL, &out), KK_ERR_INVALID_ARGUMENT, "t");
    kk_tensor *ok = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, shape, &ok));
    assert_refused(kk_tensor_to_dlpack(ok, NULL), KK_ERR_INVALID_ARGUMENT, "dl_managed_tensor_out");
    assert_refused(kk_tensor_to_dlpack_versioned(ok, NULL), KK_ERR_INVALID_ARGUMENT,
                   "dl_managed_tensor_versioned_out");
    kk_tensor bad = *ok;
    bad.ndim = 12;
    assert_refused(kk_tensor_to_dlpack(&bad, &out), KK_ERR_INVALID_ARGUMENT, "t");
    kk_tensor_destroy(ok);
    assert_int_equal(deleted, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_dtype_both_ways),    cmocka_unit_test(unsupported_dtypes),
        cmocka_unit_test(strided_and_offset_views), cmocka_unit_test(deleter_once_after_last_view),
        cmocka_unit_test(take_ownership_zero),      cmocka_unit_test(export_then_reimport),
        cmocka_unit_test(versioned_read_only),      cmocka_unit_test(argument_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

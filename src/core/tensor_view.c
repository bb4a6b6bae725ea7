/* Views: slice, reshape, transpose. A view is a new descriptor over the same
 * memory; it retains the storage, so views and their base may be destroyed in
 * any order. Nothing here copies elements. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor_internal.h"

/* `elements` further into the memory; e2m1 offsets are even (checked before). */
static void *offset_data(void *data, kk_dtype dtype, int64_t elements) {
    if (!data || elements == 0) return data;
    int bits = kk_dtype_bits(dtype);
    return (char *)data + (bits >= 8 ? elements * (bits / 8) : elements / 2);
}

static kk_status check_dim(const char *func, const char *argument, const kk_tensor *t, int dim) {
    if (dim < 0 || dim >= t->ndim) {
        char expected[48];
        snprintf(expected, sizeof expected, "0 to %d (the tensor has %d dimensions)", t->ndim - 1,
                 t->ndim);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, argument, expected, "%d", dim);
    }
    return KK_OK;
}

/* Check the e2m1 rules on the finished view, then hand it out or drop it. */
static kk_status finish(const char *func, const char *argument, kk_tensor *v, int64_t offset,
                        kk_tensor **out) {
    kk_status st = kk__check_e2m1_layout(func, argument, v, offset);
    if (st) {
        kk_tensor_destroy(v);
        return st;
    }
    *out = v;
    return KK_OK;
}

kk_status kk_tensor_slice(const kk_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
                          kk_tensor **view) {
    kk_status st = KK__CHECK_NOT_NULL(view);
    if (st) return st;
    *view = NULL;
    if ((st = kk__check_tensor(__func__, "t", t)) || (st = check_dim(__func__, "dim", t, dim)))
        return st;
    const int64_t size = t->shape[dim];
    if (start < 0 || start > size)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "start", "0 <= start <= shape[dim]",
                             "%lld (shape[%d] = %lld)", (long long)start, dim, (long long)size);
    if (stop < start || stop > size)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "stop",
                             "start <= stop <= shape[dim]", "%lld (start %lld, shape[%d] = %lld)",
                             (long long)stop, (long long)start, dim, (long long)size);
    if (step < 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "step", "at least 1", "%lld",
                             (long long)step);
    const int64_t n = kk__ceil_div(stop - start, step);
    /* Within the span, so neither product overflows; an empty slice keeps data. */
    const int64_t offset = n > 0 ? start * t->strides[dim] : 0;
    kk_tensor *v = kk__tensor_clone_desc(__func__, t);
    if (!v) return KK_ERR_OUT_OF_MEMORY;
    v->shape[dim] = n;
    if (n > 1) v->strides[dim] = t->strides[dim] * step;
    if (t->dtype == KK_DTYPE_E2M1 && dim == t->ndim - 1 && n > 1 && step != 1) {
        kk_tensor_destroy(v);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "step",
                             "1 along the last dimension of a packed e2m1 tensor", "%lld",
                             (long long)step);
    }
    if (t->dtype != KK_DTYPE_E2M1 || offset % 2 == 0)
        v->data = offset_data(t->data, t->dtype, offset);
    return finish(__func__, "start", v, offset, view);
}

/* numpy's view reshape (_attempt_nocopy_reshape): group old and new
 * dimensions into runs of equal element count; each run of old dimensions must
 * be contiguous within itself. On failure bad[] are the two old dimensions
 * (original numbering) whose strides break their run. */
static int nocopy_strides(const kk_tensor *t, int nd, const int64_t *nshape, int64_t *nstrides,
                          int bad[2]) {
    int64_t od[KK_TENSOR_MAX_DIMS], os[KK_TENSOR_MAX_DIMS];
    int map[KK_TENSOR_MAX_DIMS], ond = 0;
    for (int d = 0; d < t->ndim; d++) /* size-1 dimensions never constrain */
        if (t->shape[d] != 1) {
            od[ond] = t->shape[d];
            os[ond] = t->strides[d];
            map[ond++] = d;
        }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nd && oi < ond) {
        int64_t np = nshape[ni], op = od[oi];
        while (np != op) { /* equal, non-zero products: both indices stay in range */
            if (np < op)
                np *= nshape[nj++];
            else
                op *= od[oj++];
        }
        for (int k = oi; k < oj - 1; k++)
            if (os[k] != od[k + 1] * os[k + 1]) {
                bad[0] = map[k];
                bad[1] = map[k + 1];
                return 0;
            }
        nstrides[nj - 1] = os[oj - 1];
        for (int k = nj - 1; k > ni; k--) nstrides[k - 1] = nstrides[k] * nshape[k];
        ni = nj++;
        oi = oj++;
    }
    for (int k = ni; k < nd; k++) nstrides[k] = 1; /* trailing size-1 dimensions */
    return 1;
}

kk_status kk_tensor_reshape(const kk_tensor *t, int ndim, const int64_t *shape, kk_tensor **view) {
    kk_status st = KK__CHECK_NOT_NULL(view);
    if (st) return st;
    *view = NULL;
    int64_t numel = 0;
    if ((st = kk__check_tensor(__func__, "t", t)) ||
        (st = kk__check_shape(__func__, t->dtype, ndim, shape, &numel, NULL)))
        return st;
    if (numel != kk_tensor_numel(t))
        return kk__arg_error(
            KK_ERR_INVALID_ARGUMENT, __func__, "shape", "the same element count as the tensor",
            "%lld elements (tensor has %lld)", (long long)numel, (long long)kk_tensor_numel(t));
    int64_t strides[KK_TENSOR_MAX_DIMS] = {0};
    int bad[2] = {0, 0};
    if (numel == 0)
        kk__contiguous_strides(ndim, shape, strides);
    else if (!nocopy_strides(t, ndim, shape, strides, bad))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "shape",
                             "a shape reachable without a copy (copy into a contiguous tensor "
                             "with kk_tensor_copy first)",
                             "dimensions %d and %d are merged but not contiguous (strides %lld, "
                             "%lld)",
                             bad[0], bad[1], (long long)t->strides[bad[0]],
                             (long long)t->strides[bad[1]]);
    kk_tensor *v = kk__tensor_clone_desc(__func__, t);
    if (!v) return KK_ERR_OUT_OF_MEMORY;
    v->ndim = ndim;
    for (int d = 0; d < KK_TENSOR_MAX_DIMS; d++) {
        v->shape[d] = d < ndim ? shape[d] : 0;
        v->strides[d] = d < ndim ? strides[d] : 0;
    }
    return finish(__func__, "shape", v, 0, view);
}

kk_status kk_tensor_transpose(const kk_tensor *t, int dim0, int dim1, kk_tensor **view) {
    kk_status st = KK__CHECK_NOT_NULL(view);
    if (st) return st;
    *view = NULL;
    if ((st = kk__check_tensor(__func__, "t", t)) || (st = check_dim(__func__, "dim0", t, dim0)) ||
        (st = check_dim(__func__, "dim1", t, dim1)))
        return st;
    kk_tensor *v = kk__tensor_clone_desc(__func__, t);
    if (!v) return KK_ERR_OUT_OF_MEMORY;
    v->shape[dim0] = t->shape[dim1];
    v->shape[dim1] = t->shape[dim0];
    v->strides[dim0] = t->strides[dim1];
    v->strides[dim1] = t->strides[dim0];
    return finish(__func__, dim0 > dim1 ? "dim0" : "dim1", v, 0, view);
}

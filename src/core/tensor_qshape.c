/* Quantized-tensor descriptions: scale shapes per layout, sizes, the blocked
 * offset formula, validation of a kk_qtensor, and the shape part of a job. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/quant_internal.h"
#include "core/quant_math.h"
#include "core/tensor_internal.h"

const char *kk_scale_layout_name(kk_scale_layout layout) {
    switch (layout) {
    case KK_SCALE_PER_TENSOR: return "per_tensor";
    case KK_SCALE_1X128: return "1x128";
    case KK_SCALE_128X128: return "128x128";
    case KK_SCALE_NVFP4: return "nvfp4";
    case KK_SCALE_NVFP4_BLOCKED: return "nvfp4_blocked";
    default: return "?";
    }
}

static int is_nvfp4(kk_scale_layout layout) {
    return layout == KK_SCALE_NVFP4 || layout == KK_SCALE_NVFP4_BLOCKED;
}

/* The dtype a layout's elements must have, checked against `dtype`. */
static kk_status check_pair(const char *func, kk_dtype dtype, kk_scale_layout layout) {
    if ((int)layout < 0 || layout >= KK_SCALE_LAYOUT_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "layout", "a kk_scale_layout value",
                             "%d", (int)layout);
    int ok = is_nvfp4(layout) ? dtype == KK_DTYPE_E2M1
                              : dtype == KK_DTYPE_FP8_E4M3 || dtype == KK_DTYPE_FP8_E5M2;
    if (!ok)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dtype",
                             is_nvfp4(layout) ? "e2m1 for the nvfp4 layouts"
                                              : "fp8_e4m3 or fp8_e5m2 for the fp8 layouts",
                             "%s with layout %s", kk_dtype_name(dtype),
                             kk_scale_layout_name(layout));
    return KK_OK;
}

void kk__quant_job_shape(kk__quant_job *job, kk_scale_layout layout, kk_dtype q_dtype, int ndim,
                         const int64_t *shape) {
    job->layout = layout;
    job->q_dtype = q_dtype;
    job->k = shape[ndim - 1];
    job->rows = ndim >= 2 ? shape[ndim - 2] : 1;
    job->batch = 1;
    for (int d = 0; d < ndim - 2; d++) job->batch *= shape[d];
    int64_t block = is_nvfp4(layout) ? KK__NVFP4_BLOCK : KK__FP8_BLOCK;
    job->scale_cols = layout == KK_SCALE_PER_TENSOR ? 1 : kk__ceil_div(job->k, block);
    job->row_blocks = kk__ceil_div(job->rows, 128);
    job->col_blocks = kk__ceil_div(job->scale_cols, 4);
    switch (layout) {
    case KK_SCALE_PER_TENSOR: job->scale_count = 1; break;
    case KK_SCALE_128X128: job->scale_count = job->batch * job->row_blocks * job->scale_cols; break;
    case KK_SCALE_NVFP4_BLOCKED:
        job->scale_count = job->batch * job->row_blocks * job->col_blocks * 512;
        break;
    default: job->scale_count = job->batch * job->rows * job->scale_cols; break;
    }
}

kk_status kk_qtensor_scale_shape(kk_dtype dtype, kk_scale_layout layout, int ndim,
                                 const int64_t *shape, int *scale_ndim, int64_t *scale_shape) {
    kk_status st;
    if ((st = KK__CHECK_NOT_NULL(scale_ndim)) || (st = KK__CHECK_NOT_NULL(scale_shape)) ||
        (st = check_pair(__func__, dtype, layout)))
        return st;
    if (ndim < 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "ndim",
                             "1 to 8 (quantization needs a last dimension)", "%d", ndim);
    if ((st = kk__check_shape(__func__, dtype, ndim, shape, NULL, NULL))) return st;
    kk__quant_job j;
    memset(&j, 0, sizeof j);
    kk__quant_job_shape(&j, layout, dtype, ndim, shape);
    int n = ndim;
    for (int d = 0; d < ndim; d++) scale_shape[d] = shape[d];
    switch (layout) {
    case KK_SCALE_PER_TENSOR: n = 1, scale_shape[0] = 1; break;
    case KK_SCALE_128X128:
        if (ndim >= 2) scale_shape[ndim - 2] = j.row_blocks;
        scale_shape[ndim - 1] = j.scale_cols;
        break;
    case KK_SCALE_NVFP4_BLOCKED:
        n = 4;
        scale_shape[0] = j.batch, scale_shape[1] = j.row_blocks;
        scale_shape[2] = j.col_blocks, scale_shape[3] = 512;
        break;
    default: scale_shape[ndim - 1] = j.scale_cols; break;
    }
    *scale_ndim = n;
    return KK_OK;
}

kk_status kk_qtensor_bytes_for(kk_dtype dtype, kk_scale_layout layout, int ndim,
                               const int64_t *shape, kk_qtensor_sizes *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    kk_qtensor_sizes s = {0, 0, 0, 0};
    int sn = 0;
    int64_t ss[KK_TENSOR_MAX_DIMS];
    /* The scale shape cannot overflow where the data shape did not, except
     * for blocked padding, which kk__check_shape catches. */
    if ((st = kk_qtensor_scale_shape(dtype, layout, ndim, shape, &sn, ss)))
        return kk__tensor_rethrow(__func__, st);
    kk_dtype sd = is_nvfp4(layout) ? KK_DTYPE_FP8_E4M3 : KK_DTYPE_F32;
    if ((st = kk__check_shape(__func__, dtype, ndim, shape, NULL, &s.data_bytes)) ||
        (st = kk__check_shape(__func__, sd, sn, ss, NULL, &s.scale_bytes)))
        return st;
    s.global_bytes = is_nvfp4(layout) ? sizeof(float) : 0;
    if (__builtin_add_overflow(s.data_bytes, s.scale_bytes, &s.total_bytes) ||
        __builtin_add_overflow(s.total_bytes, s.global_bytes, &s.total_bytes))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "shape",
                             "a total size that fits size_t", "data %zu + scales %zu bytes",
                             s.data_bytes, s.scale_bytes);
    *out = s;
    return KK_OK;
}

int64_t kk_nvfp4_blocked_offset(int64_t rows, int64_t scale_cols, int64_t l, int64_t i, int64_t j) {
    if (rows < 1 || scale_cols < 1 || l < 0 || i < 0 || j < 0 || i >= rows || j >= scale_cols)
        return -1;
    int64_t rb = kk__ceil_div(rows, 128), cb = kk__ceil_div(scale_cols, 4), atoms = 0;
    /* The atom index must fit: (l + 1) * rb * cb * 512. */
    if (!kk__mul_i64(l + 1, rb, &atoms) || !kk__mul_i64(atoms, cb, &atoms) ||
        !kk__mul_i64(atoms, 512, &atoms))
        return -1;
    return kk__nvfp4_blocked_index(rb, cb, l, i, j);
}

/* ---- validation ---- */

static kk_status check_part(const char *func, const char *name, const kk_tensor *t, kk_dtype dtype,
                            int ndim, const int64_t *shape, const kk_tensor *data) {
    kk_status st = kk__check_tensor(func, name, t);
    if (st) return st;
    int same = t->dtype == dtype && t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char want[160];
        int n = snprintf(want, sizeof want, "%s [", kk_dtype_name(dtype));
        for (int d = 0; d < ndim && n < 140; d++)
            n += snprintf(want + n, sizeof want - (size_t)n, d ? ", %lld" : "%lld",
                          (long long)shape[d]);
        snprintf(want + n, sizeof want - (size_t)n, "]");
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, want,
                             "%s with %d dimensions (shape[0] = %lld)", kk_dtype_name(t->dtype),
                             t->ndim, (long long)t->shape[0]);
    }
    if (!kk_tensor_is_contiguous(t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "a contiguous tensor",
                             "a strided view");
    if (data && strcmp(t->device, data->device) != 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "the device of q->data",
                             "%s (data is on %s)", t->device, data->device);
    return KK_OK;
}

/* Shared by kk_qtensor_validate and the quantize/dequantize entry points. */
kk_status kk__qtensor_check(const char *func, const kk_qtensor *q) {
    if (!q) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "q", "a non-NULL pointer", "NULL");
    kk_status st;
    const kk_tensor *d = q->data;
    if ((st = kk__check_tensor(func, "q->data", d))) return st;
    if ((st = check_pair(func, d->dtype, q->layout))) return st;
    if (d->ndim < 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "q->data", "at least 1 dimension", "%d",
                             d->ndim);
    if ((st = check_part(func, "q->data", d, d->dtype, d->ndim, d->shape, NULL))) return st;
    int sn = 0;
    int64_t ss[KK_TENSOR_MAX_DIMS];
    (void)kk_qtensor_scale_shape(d->dtype, q->layout, d->ndim, d->shape, &sn, ss); /* valid */
    int nv = is_nvfp4(q->layout);
    if ((st = check_part(func, "q->scales", q->scales, nv ? KK_DTYPE_FP8_E4M3 : KK_DTYPE_F32, sn,
                         ss, d)))
        return st;
    const int64_t one = 1;
    if (nv && (st = check_part(func, "q->global_scale", q->global_scale, KK_DTYPE_F32, 1, &one, d)))
        return st;
    return KK_OK;
}

kk_status kk_qtensor_validate(const kk_qtensor *q) { return kk__qtensor_check(__func__, q); }

/* The quantization entry points: check the tensors, build a job, run it on the
 * tensors' device (CPU or CUDA), then check the amax it found. */
#include <string.h>

#include "core/error.h"
#include "core/quant_internal.h"
#include "core/quant_math.h"
#include "backend/backend.h"
#include "core/tensor_internal.h"
#include "kernelkit/memory.h"

kk_status kk_qtensor_create(const char *device, kk_dtype dtype, kk_scale_layout layout, int ndim,
                            const int64_t *shape, kk_qtensor *q) {
    kk_status st = KK__CHECK_NOT_NULL(q);
    if (st) return st;
    memset(q, 0, sizeof *q);
    int sn = 0;
    int64_t ss[KK_TENSOR_MAX_DIMS];
    const int64_t one = 1;
    int nv = layout == KK_SCALE_NVFP4 || layout == KK_SCALE_NVFP4_BLOCKED;
    if ((st = kk_qtensor_scale_shape(dtype, layout, ndim, shape, &sn, ss)))
        return kk__tensor_rethrow(__func__, st);
    kk_qtensor t = {layout, NULL, NULL, NULL};
    st = kk_tensor_create(device, dtype, ndim, shape, &t.data);
    if (!st)
        st = kk_tensor_create(device, nv ? KK_DTYPE_FP8_E4M3 : KK_DTYPE_F32, sn, ss, &t.scales);
    if (!st && nv) st = kk_tensor_create(device, KK_DTYPE_F32, 1, &one, &t.global_scale);
    if (st) {
        kk_qtensor_destroy(&t);
        return kk__tensor_rethrow(__func__, st);
    }
    *q = t;
    return KK_OK;
}

void kk_qtensor_destroy(kk_qtensor *q) {
    if (!q) return;
    kk_tensor_destroy(q->data);
    kk_tensor_destroy(q->scales);
    kk_tensor_destroy(q->global_scale);
    memset(q, 0, sizeof *q);
}

/* x / y: f32, bf16 or f16, contiguous, q->data's shape and device. */
static kk_status check_plain(const char *func, const char *name, const kk_tensor *t,
                             const kk_qtensor *q) {
    kk_status st = kk__check_tensor(func, name, t);
    if (st) return st;
    if (t->dtype != KK_DTYPE_F32 && t->dtype != KK_DTYPE_BF16 && t->dtype != KK_DTYPE_F16)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "f32, bf16 or f16", "%s",
                             kk_dtype_name(t->dtype));
    if (!kk_tensor_is_contiguous(t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name,
                             "a contiguous tensor (copy a view into one with kk_tensor_copy)",
                             "a strided view");
    int same = t->ndim == q->data->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == q->data->shape[d];
    if (!same)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "the shape of q->data",
                             "a shape with %d dimensions that differs", t->ndim);
    if (strcmp(t->device, q->data->device) != 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "the device of q",
                             "%s (q is on %s)", t->device, q->data->device);
    return KK_OK;
}

static void fill_job(kk__quant_job *job, const kk_tensor *t, const kk_qtensor *q) {
    memset(job, 0, sizeof *job);
    kk__quant_job_shape(job, q->layout, q->data->dtype, q->data->ndim, q->data->shape);
    job->x_dtype = t->dtype;
    job->x = t->data;
    job->q = q->data->data;
    job->scales = q->scales->data;
    job->global = q->global_scale ? q->global_scale->data : NULL;
    job->device = t->device_index;
}

/* An empty tensor still gets a defined per-tensor scale / global scale. */
static kk_status quantize_empty(const char *func, kk__quant_job *job, const kk_qtensor *q) {
    float one = job->given_scale ? job->scale : 1.0f;
    kk_status st = KK_OK;
    if (job->layout == KK_SCALE_PER_TENSOR)
        st = kk_mem_copy(job->scales, q->scales->device, &one, "cpu", sizeof one);
    else if (job->global)
        st = kk_mem_copy(job->global, q->global_scale->device, &one, "cpu", sizeof one);
    return st ? kk__tensor_rethrow(func, st) : KK_OK;
}

/* The quantize kernels of t's backend; NULL (the error recorded) when it has
 * none. */
static const kk__quant_ops *quant_ops(const char *func, const kk_tensor *t) {
    const kk__backend *b = kk__backend_get(t->device_kind);
    if (b && b->quant) return b->quant;
    kk__error(KK_ERR_UNSUPPORTED, func, "no quantize kernels on %s", t->device);
    return NULL;
}

static kk_status run_quantize(const char *func, kk__quant_job *job, const kk_tensor *x,
                              const kk_qtensor *q) {
    if (kk_tensor_numel(x) == 0) return quantize_empty(func, job, q);
    const kk__quant_ops *ops = quant_ops(func, x);
    return ops ? ops->quantize(job, func) : KK_ERR_UNSUPPORTED;
}

kk_status kk_quantize(const kk_tensor *x, const kk_qtensor *q, const kk_quant_options *options) {
    kk_status st = kk__qtensor_check(__func__, q);
    if (st || (st = check_plain(__func__, "x", x, q)) ||
        (st = kk__check_writable(__func__, "q->data", q->data)) ||
        (st = kk__check_writable(__func__, "q->scales", q->scales)) ||
        (q->global_scale &&
         (st = kk__check_writable(__func__, "q->global_scale", q->global_scale))))
        return st;
    kk_fp8_amax_history *h = options ? options->history : NULL;
    if (h && q->layout != KK_SCALE_PER_TENSOR)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "options->history",
                             "NULL unless q->layout is KK_SCALE_PER_TENSOR (delayed scaling)",
                             "a history with layout %s", kk_scale_layout_name(q->layout));
    kk__quant_job job;
    fill_job(&job, x, q);
    if (h) {
        job.given_scale = 1;
        if ((st = kk_fp8_amax_history_scale(h, q->data->dtype, &job.scale)))
            return kk__tensor_rethrow(__func__, st);
    }
    if ((st = run_quantize(__func__, &job, x, q))) return st;
    float amax;
    memcpy(&amax, &job.amax_bits, sizeof amax);
    if (job.amax_bits >= KK__F32_INF_BITS)
        return kk__set_error(KK_ERR_QUANTIZATION, __func__, "x", amax != amax ? "nan" : "inf",
                             "finite values", NULL,
                             "x contains %s: it cannot be scaled into %s (q is unspecified)",
                             amax != amax ? "NaN" : "an infinity", kk_dtype_name(q->data->dtype));
    if (h && (st = kk_fp8_amax_history_push(h, amax))) return kk__tensor_rethrow(__func__, st);
    if (options && options->amax) *options->amax = amax;
    return KK_OK;
}

kk_status kk_dequantize(const kk_qtensor *q, kk_tensor *y) {
    kk_status st = kk__qtensor_check(__func__, q);
    if (st || (st = check_plain(__func__, "y", y, q)) ||
        (st = kk__check_writable(__func__, "y", y)))
        return st;
    kk__quant_job job;
    fill_job(&job, y, q);
    if (kk_tensor_numel(y) == 0) return KK_OK;
    const kk__quant_ops *ops = quant_ops(__func__, y);
    return ops ? ops->dequantize(&job, __func__) : KK_ERR_UNSUPPORTED;
}

/* ---- NVFP4 scale layouts ---- */

static kk_status check_scales(const char *func, const char *name, const kk_tensor *t) {
    kk_status st = kk__check_tensor(func, name, t);
    if (st) return st;
    if (t->dtype != KK_DTYPE_FP8_E4M3 || t->ndim < 1 || !kk_tensor_is_contiguous(t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name,
                             "a contiguous fp8_e4m3 tensor with at least 1 dimension",
                             "%s, %d dimensions%s", kk_dtype_name(t->dtype), t->ndim,
                             kk_tensor_is_contiguous(t) ? "" : ", strided");
    return KK_OK;
}

static kk_status convert_layout(const char *func, const kk_tensor *plain, const kk_tensor *blocked,
                                const kk_tensor *src, kk_tensor *dst, int to_blocked) {
    kk_status st;
    if ((st = check_scales(func, "plain", plain)) || (st = check_scales(func, "blocked", blocked)))
        return st;
    kk__scale_layout_job j = {0};
    j.cols = plain->shape[plain->ndim - 1];
    j.rows = plain->ndim >= 2 ? plain->shape[plain->ndim - 2] : 1;
    j.batch = 1;
    for (int d = 0; d < plain->ndim - 2; d++) j.batch *= plain->shape[d];
    j.row_blocks = kk__ceil_div(j.rows, 128);
    j.col_blocks = kk__ceil_div(j.cols, 4);
    const int64_t want[4] = {j.batch, j.row_blocks, j.col_blocks, 512};
    int same = blocked->ndim == 4;
    for (int d = 0; same && d < 4; d++) same = blocked->shape[d] == want[d];
    if (!same)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "blocked",
                             "shape [batch, ceil(rows/128), ceil(cols/4), 512] for plain's shape",
                             "[%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, 512]",
                             (long long)blocked->shape[0], (long long)blocked->shape[1],
                             (long long)blocked->shape[2], (long long)blocked->shape[3],
                             (long long)want[0], (long long)want[1], (long long)want[2]);
    if (strcmp(plain->device, blocked->device) != 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "blocked", "plain's device",
                             "%s (plain is on %s)", blocked->device, plain->device);
    if ((st = kk__check_writable(func, to_blocked ? "blocked" : "plain", dst))) return st;
    j.src = src->data;
    j.dst = dst->data;
    j.to_blocked = to_blocked;
    j.device = plain->device_index;
    if (kk_tensor_numel(dst) == 0) return KK_OK;
    const kk__quant_ops *ops = quant_ops(func, plain);
    return ops ? ops->scale_layout(&j, func) : KK_ERR_UNSUPPORTED;
}

kk_status kk_nvfp4_scales_to_blocked(const kk_tensor *plain, kk_tensor *blocked) {
    return convert_layout(__func__, plain, blocked, plain, blocked, 1);
}

kk_status kk_nvfp4_scales_to_plain(const kk_tensor *blocked, kk_tensor *plain) {
    return convert_layout(__func__, plain, blocked, blocked, plain, 0);
}

/* Delayed scaling for FP8: a ring buffer of the last `length` amax values.
 * The scale for the next step is max(history) * 2^margin / fp8_max, computed
 * in f32 as (max / fp8_max) then an exact power-of-two multiply. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/quant_math.h"
#include "kernelkit/quant.h"

struct kk_fp8_amax_history {
    int length, margin, count, next;
    float values[]; /* length entries; the first `count` slots in ring order */
};

kk_status kk_fp8_amax_history_create(int length, int margin, kk_fp8_amax_history **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    *out = NULL;
    if (length < 1 || length > KK_FP8_HISTORY_MAX_LENGTH)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "length",
                             "1 to 65536 (KK_FP8_HISTORY_MAX_LENGTH)", "%d", length);
    if (margin < 0 || margin > KK_FP8_HISTORY_MAX_MARGIN)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "margin",
                             "0 to 64 (KK_FP8_HISTORY_MAX_MARGIN)", "%d", margin);
    kk_fp8_amax_history *h = calloc(1, sizeof *h + (size_t)length * sizeof(float));
    if (!h) return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "host allocation failed");
    h->length = length;
    h->margin = margin;
    *out = h;
    return KK_OK;
}

void kk_fp8_amax_history_destroy(kk_fp8_amax_history *h) { free(h); }

kk_status kk_fp8_amax_history_push(kk_fp8_amax_history *h, float amax) {
    kk_status st = KK__CHECK_NOT_NULL(h);
    if (st) return st;
    if (!(amax >= 0.0f) || isinf(amax))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "amax", "a finite value >= 0", "%g",
                             (double)amax);
    h->values[h->next] = amax;
    h->next = (h->next + 1) % h->length;
    if (h->count < h->length) h->count++;
    return KK_OK;
}

int kk_fp8_amax_history_count(const kk_fp8_amax_history *h) { return h ? h->count : 0; }

float kk_fp8_amax_history_max(const kk_fp8_amax_history *h) {
    float m = 0.0f;
    for (int i = 0; h && i < h->count; i++) m = h->values[i] > m ? h->values[i] : m;
    return m;
}

kk_status kk_fp8_amax_history_scale(const kk_fp8_amax_history *h, kk_dtype dtype, float *scale) {
    kk_status st;
    if ((st = KK__CHECK_NOT_NULL(h)) || (st = KK__CHECK_NOT_NULL(scale))) return st;
    if (dtype != KK_DTYPE_FP8_E4M3 && dtype != KK_DTYPE_FP8_E5M2)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dtype", "fp8_e4m3 or fp8_e5m2",
                             "%s", kk_dtype_name(dtype));
    float fmax = dtype == KK_DTYPE_FP8_E4M3 ? KK__E4M3_MAX : KK__E5M2_MAX;
    /* The margin applies to a real amax only: no history (or only zeros) is 1,
     * the same as current scaling of an all-zero tensor. */
    float s = kk_fp8_amax_history_max(h) / fmax;
    s = s > 0.0f ? ldexpf(s, h->margin) : 1.0f;
    *scale = isinf(s) ? FLT_MAX : s;
    return KK_OK;
}

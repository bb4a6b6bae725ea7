/* Quantized tensors (FP8 with f32 scales, NVFP4) and quantize / dequantize on
 * the CPU and the GPU.
 *
 * The meaning of a scale, everywhere: dequantized value = element * scale
 * (NVFP4: element * block_scale * global_scale). The scale is the step a
 * quantized value stands for, not the factor that produced it.
 *
 *   kk_qtensor q;
 *   kk_qtensor_create("cuda:0", KK_DTYPE_FP8_E4M3, KK_SCALE_1X128, 2, shape, &q);
 *   kk_quantize(x, &q, NULL);      // current scaling: scales from x's amax
 *   kk_dequantize(&q, y);          // back to f32 / bf16 / f16
 *   kk_qtensor_destroy(&q);
 *
 * Layouts (x is read as [batch, rows, K]: K = the last dimension, rows = the
 * one before it (1 when ndim is 1), batch = the product of the others):
 *   KK_SCALE_PER_TENSOR  fp8 e4m3/e5m2; scales f32 [1] = amax / fp8_max
 *   KK_SCALE_1X128       fp8; scales f32 [..., rows, ceil(K/128)]: one per 128
 *                        consecutive elements of a row (DeepSeek activations)
 *   KK_SCALE_128X128     fp8; scales f32 [..., ceil(rows/128), ceil(K/128)]: one
 *                        per 128x128 tile of each matrix (DeepSeek weights)
 *   KK_SCALE_NVFP4       e2m1; scales fp8 e4m3 [..., rows, ceil(K/16)] row-major,
 *                        one per 16 consecutive elements of a row; global f32 [1]
 *   KK_SCALE_NVFP4_BLOCKED  the same scales in cuBLAS's 128x4 blocked layout:
 *                        e4m3 [batch, ceil(rows/128), ceil(ceil(K/16)/4), 512],
 *                        see kk_nvfp4_blocked_offset; padding bytes are 0.
 * A last block shorter than 16 / 128 elements (K not a multiple) has its own
 * scale like any other. Data and scales are contiguous, on one device.
 *
 * Scaling math (f32, the same operations in the same order on CPU and GPU, so
 * both produce the same bits; docs/formats.md derives the error bounds):
 *   fp8:   scale = amax / fp8_max (448 e4m3, 57344 e5m2); 1 when that is 0;
 *          q = fp8_rn_satfinite(x / scale)
 *   nvfp4: global = amax / 2688 (448 * 6); 1 when amax is 0, 2^-149 when the
 *          quotient underflows; s = e4m3_rn(block_amax / 6 / global), the
 *          smallest e4m3 (2^-9) when that rounds to 0 but block_amax > 0;
 *          q = e2m1_rn_satfinite(x / (s * global)), 0 when s * global is 0.
 * Inputs with an infinity or NaN give KK_ERR_QUANTIZATION (q is then garbage). */
#ifndef KERNELKIT_QUANT_H
#define KERNELKIT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/dtype.h"
#include "kernelkit/status.h"
#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kk_scale_layout {
    KK_SCALE_PER_TENSOR = 0,
    KK_SCALE_1X128,
    KK_SCALE_128X128,
    KK_SCALE_NVFP4,
    KK_SCALE_NVFP4_BLOCKED,
    KK_SCALE_LAYOUT_COUNT
} kk_scale_layout;

/* "per_tensor", "1x128", "128x128", "nvfp4", "nvfp4_blocked"; "?" otherwise. */
KK_API const char *kk_scale_layout_name(kk_scale_layout layout);

/* A quantized tensor: a plain description of three tensors. kk_qtensor_create
 * fills it with new tensors that kk_qtensor_destroy frees; a caller may also
 * fill it with its own tensors (kk_tensor_wrap of existing buffers). */
typedef struct kk_qtensor {
    kk_scale_layout layout;
    kk_tensor *data;         /* fp8 e4m3/e5m2 or e2m1 elements, x's shape */
    kk_tensor *scales;       /* f32 (fp8 layouts) or fp8 e4m3 (NVFP4), shape above */
    kk_tensor *global_scale; /* NVFP4: f32 [1]; NULL for the fp8 layouts */
} kk_qtensor;

/* Shape of the scales tensor for a tensor of `shape` (out: ndim and up to
 * KK_TENSOR_MAX_DIMS sizes). Errors: a bad dtype/layout pair, ndim < 1. */
KK_API kk_status kk_qtensor_scale_shape(kk_dtype dtype, kk_scale_layout layout, int ndim,
                                        const int64_t *shape, int *scale_ndim,
                                        int64_t *scale_shape);

/* Bytes of each part of a quantized tensor; overflow-checked. */
typedef struct kk_qtensor_sizes {
    size_t data_bytes;   /* packed elements */
    size_t scale_bytes;  /* the scales tensor (blocked layout: padding included) */
    size_t global_bytes; /* 4 for NVFP4, 0 otherwise */
    size_t total_bytes;
} kk_qtensor_sizes;

KK_API kk_status kk_qtensor_bytes_for(kk_dtype dtype, kk_scale_layout layout, int ndim,
                                      const int64_t *shape, kk_qtensor_sizes *out);

/* Allocate data, scales (and the global scale) on `device`. dtype is
 * KK_DTYPE_FP8_E4M3 / KK_DTYPE_FP8_E5M2 for the fp8 layouts, KK_DTYPE_E2M1 for
 * the NVFP4 ones. On failure *q is zeroed and nothing is left allocated. */
KK_API kk_status kk_qtensor_create(const char *device, kk_dtype dtype, kk_scale_layout layout,
                                   int ndim, const int64_t *shape, kk_qtensor *q);

/* Destroy the three tensors and zero *q. NULL or a zeroed struct: no-op. */
KK_API void kk_qtensor_destroy(kk_qtensor *q);

/* KK_OK when q's tensors agree with its layout (dtypes, shapes, one device,
 * contiguous); otherwise KK_ERR_INVALID_ARGUMENT naming the field. */
KK_API kk_status kk_qtensor_validate(const kk_qtensor *q);

/* ---- delayed scaling (FP8 per-tensor) ---- */

/* The last `length` amax values seen; scale = max(history) * 2^margin / fp8_max,
 * as Transformer Engine's delayed scaling with the "max" algorithm. A history
 * that is empty or holds only zeros gives scale 1. Host object; not thread-safe. */
typedef struct kk_fp8_amax_history kk_fp8_amax_history;

#define KK_FP8_HISTORY_MAX_LENGTH 65536
#define KK_FP8_HISTORY_MAX_MARGIN 64

/* 1 <= length <= KK_FP8_HISTORY_MAX_LENGTH, 0 <= margin <= KK_FP8_HISTORY_MAX_MARGIN. */
KK_API kk_status kk_fp8_amax_history_create(int length, int margin, kk_fp8_amax_history **out);
KK_API void kk_fp8_amax_history_destroy(kk_fp8_amax_history *h);

/* Record one amax (finite, >= 0); the oldest is dropped when full. */
KK_API kk_status kk_fp8_amax_history_push(kk_fp8_amax_history *h, float amax);

/* Values currently held (<= length) and their maximum (0 when empty). */
KK_API int kk_fp8_amax_history_count(const kk_fp8_amax_history *h);
KK_API float kk_fp8_amax_history_max(const kk_fp8_amax_history *h);

/* The scale for the next quantization to `dtype` (fp8 e4m3 or e5m2): f32
 * (max / fp8_max) * 2^margin; 1 when that is 0; FLT_MAX when it overflows. */
KK_API kk_status kk_fp8_amax_history_scale(const kk_fp8_amax_history *h, kk_dtype dtype,
                                           float *scale);

/* ---- quantize / dequantize ---- */

typedef struct kk_quant_options {
    /* KK_SCALE_PER_TENSOR only: delayed scaling. The scale comes from the
     * history (values beyond the range saturate), then x's amax is pushed.
     * NULL: current scaling (the scale comes from x's own amax). */
    kk_fp8_amax_history *history;
    /* When not NULL, receives x's amax (max |x|) on the host. */
    float *amax;
} kk_quant_options;

/* Quantize x (f32, bf16 or f16, contiguous) into q (created for x's shape, on
 * x's device). options may be NULL. The work runs on x's device (CPU or CUDA);
 * both give identical bits. Errors: KK_ERR_INVALID_ARGUMENT (mismatch),
 * KK_ERR_QUANTIZATION (inf/NaN in x), device and memory errors. */
KK_API kk_status kk_quantize(const kk_tensor *x, const kk_qtensor *q,
                             const kk_quant_options *options);

/* Dequantize q into y (f32, bf16 or f16, contiguous, q's shape and device):
 * y = element * scale (NVFP4: element * (block_scale * global), the same
 * product the quantization divided by) in f32, then rounded to y's dtype. */
KK_API kk_status kk_dequantize(const kk_qtensor *q, kk_tensor *y);

/* ---- the NVFP4 128x4 blocked scale layout ---- */

/* Byte offset of the scale of (batch l, row i, scale column j) in the blocked
 * layout for `rows` rows and `scale_cols` scale columns per matrix:
 *   atom = (l * ceil(rows/128) + i/128) * ceil(scale_cols/4) + j/4
 *   offset = atom * 512 + (i%32)*16 + ((i%128)/32)*4 + j%4
 * -1 for out-of-range arguments. */
KK_API int64_t kk_nvfp4_blocked_offset(int64_t rows, int64_t scale_cols, int64_t l, int64_t i,
                                       int64_t j);

/* Plain [..., rows, cols] e4m3 scales <-> blocked [batch, ceil(rows/128),
 * ceil(cols/4), 512]; both contiguous, same device (CPU or CUDA). to_blocked
 * writes zeros into the padding; to_plain ignores it. `plain` gives the shape. */
KK_API kk_status kk_nvfp4_scales_to_blocked(const kk_tensor *plain, kk_tensor *blocked);
KK_API kk_status kk_nvfp4_scales_to_plain(const kk_tensor *blocked, kk_tensor *plain);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_QUANT_H */

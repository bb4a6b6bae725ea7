/* Internal: a validated quantization job, and the backend entry points that run
 * it (src/cpu/quant_cpu*.c, src/cuda/quant_cuda.c, src/cuda_off/quant_off.c).
 * Plain C; includable from CUDA. The public API (kernelkit/quant.h) builds the
 * job in src/backend/quant.c and picks the backend by the tensors' device. */
#ifndef KK_CORE_QUANT_INTERNAL_H
#define KK_CORE_QUANT_INTERNAL_H

#include <stdint.h>

#include "kernelkit/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything a backend needs; pointers are on the job's device, contiguous.
 * The tensor is read as `nrows` = batch * rows rows of k elements. */
typedef struct kk__quant_job {
    kk_scale_layout layout;
    kk_dtype x_dtype; /* f32, bf16 or f16: quantize input, dequantize output */
    kk_dtype q_dtype; /* fp8 e4m3 / e5m2, or e2m1 */
    int64_t batch, rows, k;
    int64_t scale_cols;  /* scales per row: ceil(k/128) or ceil(k/16); 1 per-tensor */
    int64_t row_blocks;  /* ceil(rows/128) (128x128 and blocked NVFP4) */
    int64_t col_blocks;  /* blocked NVFP4: ceil(scale_cols/4) */
    int64_t scale_count; /* elements (bytes for e4m3) of the scales tensor */
    void *x;             /* quantize: the input (read only); dequantize: the output */
    void *q;             /* elements */
    void *scales;        /* f32 or e4m3 */
    float *global;       /* NVFP4 global scale, else NULL */
    int given_scale;     /* per-tensor: use `scale`, not one from x's amax */
    float scale;
    uint32_t amax_bits; /* out (quantize): max |x| as f32 bits (>= 0x7F800000: inf/NaN) */
    int device;         /* CUDA device index */
} kk__quant_job;

/* Layout conversion of NVFP4 scales. */
typedef struct kk__scale_layout_job {
    int64_t batch, rows, cols, row_blocks, col_blocks;
    const uint8_t *src;
    uint8_t *dst;
    int to_blocked; /* 1: plain -> blocked (padding zeroed); 0: blocked -> plain */
    int device;
} kk__scale_layout_job;

/* Fill the shape fields of a job for an x of `ndim`/`shape` (already valid). */
void kk__quant_job_shape(kk__quant_job *job, kk_scale_layout layout, kk_dtype q_dtype, int ndim,
                         const int64_t *shape);

/* Check a kk_qtensor for entry point `func` (kk_qtensor_validate's rules). */
kk_status kk__qtensor_check(const char *func, const kk_qtensor *q);

/* CPU: never fail (no allocation). */
void kk__quantize_cpu(kk__quant_job *job);
void kk__dequantize_cpu(const kk__quant_job *job);
void kk__scale_layout_cpu(const kk__scale_layout_job *job);

#ifdef __cplusplus
}
#endif
#endif

/* Internal: launch wrappers of the quantization kernels (src/cuda/kernels/quant.cu),
 * called by src/cuda/quant_cuda.c. Each queues its kernel(s) on `stream` and
 * returns the launch status (cudaGetLastError), not the completion status.
 * Visible only to includers that have the CUDA runtime API. */
#ifndef KK_CUDA_QUANT_CUDA_H
#define KK_CUDA_QUANT_CUDA_H

#include "core/quant_internal.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The CUDA backend's quantize kernels (its table's `quant`, quant_cuda.c):
 * synchronous, they return when done; errors recorded naming `func`. */
kk_status kk__quantize_cuda(kk__quant_job *job, const char *func);
kk_status kk__dequantize_cuda(const kk__quant_job *job, const char *func);
kk_status kk__scale_layout_cuda(const kk__scale_layout_job *job, const char *func);
#ifdef __cplusplus
}
#endif

#ifdef CUDART_VERSION
#ifdef __cplusplus
extern "C" {
#endif

/* atomicMax of max |x[0, n)| (f32 bits) into *amax_bits, which the caller
 * zeroed. One read of x. */
cudaError_t kk__qk_amax(const void *x, kk_dtype x_dtype, int64_t n, uint32_t *amax_bits,
                        cudaStream_t stream);

/* Per-tensor fp8: scale = job.given_scale ? job.scale : from *amax_in; writes
 * the scale and every element. With amax_out, also atomicMax's max |x| into it
 * (delayed scaling: the amax comes from the same pass as the quantization). */
cudaError_t kk__qk_fp8_tensor(const kk__quant_job *job, const uint32_t *amax_in, uint32_t *amax_out,
                              cudaStream_t stream);

/* 1x128 and 128x128 fp8: one pass per block (a warp per 1x128 block, a thread
 * block per 128x128 tile) finds the block amax, writes the scale and the
 * elements; atomicMax's the tensor amax into *amax_all. */
cudaError_t kk__qk_fp8_blocks(const kk__quant_job *job, uint32_t *amax_all, cudaStream_t stream);

/* NVFP4 step 2 (after kk__qk_amax): global scale and every block scale (a
 * thread per 16-element block). A blocked layout's padding must be zeroed
 * before. Step 3: every element byte (a thread per byte, so that two
 * elements of a byte never have two writers, even across rows when K is odd). */
cudaError_t kk__qk_nvfp4_scales(const kk__quant_job *job, const uint32_t *amax_bits,
                                cudaStream_t stream);
cudaError_t kk__qk_nvfp4_pack(const kk__quant_job *job, cudaStream_t stream);

/* Dequantize every element (a thread per output element). */
cudaError_t kk__qk_dequant(const kk__quant_job *job, cudaStream_t stream);

/* NVFP4 scale layout conversion (a thread per destination byte; to_blocked
 * writes the padding zeros itself). */
cudaError_t kk__qk_scale_layout(const kk__scale_layout_job *job, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CUDART_VERSION */
#endif

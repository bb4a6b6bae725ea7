/* Internal: element-type conversion on the GPU (src/cuda/kernels/convert.cu),
 * bit for bit the same as kk_convert_host and the kk_f32_to_* functions.
 *
 * Plain C, like cuda_internal.h: the declarations that need CUDA types appear
 * only when the includer has included the CUDA runtime headers first. A build
 * without CUDA (src/cuda_off/dtype_off.c) stubs the rest with
 * KK_ERR_CUDA_UNAVAILABLE "built without CUDA". */
#ifndef KK_CUDA_DTYPE_CUDA_H
#define KK_CUDA_DTYPE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/dtype.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For tests: convert `count` elements on CUDA device `device`: copy src_host to
 * the device, convert (same rules, same bits as kk_convert_host, packed e2m1
 * included), copy the result to dst_host. Runs on a thread of its own, so the
 * caller's current device is left alone.
 * Errors: KK_ERR_INVALID_ARGUMENT (NULL buffer with count > 0, bad dtype, count
 * too large, bad device index), KK_ERR_CUDA_UNAVAILABLE, KK_ERR_INVALID_COMPUTE_CAPABILITY,
 * KK_ERR_OUT_OF_MEMORY, KK_ERR_KERNEL_LAUNCH, KK_ERR_DEVICE_FAILURE. */
kk_status kk__cuda_convert_host_buffers(int device, const void *src_host, kk_dtype src_dtype,
                                        void *dst_host, kk_dtype dst_dtype, size_t count);

/* Result of kk__cuda_convert_compare_nvidia. */
typedef struct kk__nvidia_compare {
    uint64_t encode_checked;        /* f32 inputs converted both ways (all 2^32) */
    uint64_t encode_mismatches;     /* non-NaN inputs whose codes differ */
    uint64_t encode_nan_mismatches; /* NaN inputs whose codes differ (f16/bf16: expected,
                                       NVIDIA writes a canonical NaN; fp8/e2m1: must be 0) */
    uint32_t first_input;           /* f32 bits of the first non-NaN mismatch */
    uint32_t first_ours, first_theirs;
    uint64_t decode_checked;    /* codes decoded both ways (2^bits) */
    uint64_t decode_mismatches; /* codes whose f32 differ (two NaNs count as equal) */
    uint32_t first_code;
} kk__nvidia_compare;

/* For tests: on CUDA device `device`, compare KernelKit's device conversion
 * f32 -> `dtype` on every one of the 2^32 f32 bit patterns, and `dtype` -> f32
 * on every code, with NVIDIA's own (cuda_fp16.h __float2half_rn, cuda_bf16.h
 * __float2bfloat16_rn, cuda_fp8.h __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...),
 * which is PTX cvt.rn.satfinite on sm_89 and newer, cuda_fp4.h
 * __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)). dtype: f16, bf16,
 * fp8_e4m3, fp8_e5m2 or e2m1. Errors as kk__cuda_convert_host_buffers. */
kk_status kk__cuda_convert_compare_nvidia(int device, kk_dtype dtype, kk__nvidia_compare *out);

/* Result of kk__cuda_e4m3_quotient_check. */
typedef struct kk__quotient_check {
    uint64_t checked;              /* (y, scale) pairs */
    uint64_t mismatches;           /* codes that differ from the division's */
    uint32_t first_y, first_scale; /* f32 bits of the first mismatch found */
} kk__quotient_check;

/* For tests: on CUDA device `device` (sm_89+ for the fast path; below it the
 * function is the division itself), compare e4m3(y / scale) computed without
 * the division (src/cuda/kernels/fp8_quotient.cuh, `guard` 8 as the kernels
 * use it, or 0: no guard, a deliberately wrong variant) with the division on
 * `cases` pairs from `seed`: half of them within 12 ulps of an e4m3 rounding
 * boundary, half anywhere in (-448 scale, 448 scale). Errors as
 * kk__cuda_convert_host_buffers, and KK_ERR_INVALID_ARGUMENT for another guard. */
kk_status kk__cuda_e4m3_quotient_check(int device, uint32_t guard, uint64_t cases, uint64_t seed,
                                       kk__quotient_check *out);

#ifdef CUDART_VERSION /* the includer has the CUDA runtime API */
/* Convert `count` elements between two device buffers on `stream` (queued, not
 * synchronized). The same rules and bits as kk_convert_host; src and dst must
 * not overlap. Errors: KK_ERR_INVALID_ARGUMENT (NULL with count > 0, bad dtype,
 * count too large), KK_ERR_KERNEL_LAUNCH (the CUDA error name is in
 * kk_last_error()->cuda_error). */
kk_status kk__cuda_convert(const void *src_dev, kk_dtype src_dtype, void *dst_dev,
                           kk_dtype dst_dtype, size_t count, cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif

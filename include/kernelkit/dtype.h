/* Element types and conversions to and from f32.
 *
 * Every narrow format is converted with round-to-nearest-even, subnormals
 * included; underflow keeps the sign. f16 and bf16 follow IEEE 754 (overflow
 * gives infinity; a NaN keeps its sign and top payload bits and becomes quiet).
 * The fp8 formats (e4m3fn, e5m2) and e2m1 saturate: finite overflow and
 * infinities clamp to the largest finite value with the sign, as PTX's
 * cvt.rn.satfinite does; a NaN gives 0x7F (e4m3, e5m2) or 0x7 = +6 (e2m1),
 * whatever its sign, as CUDA's __nv_cvt_float_to_fp8 / __nv_cvt_float_to_fp4
 * do. Decoding is exact; a NaN code decodes to a quiet NaN of the same sign.
 * The CPU and the GPU give the same bits. docs/formats.md has the tables. */
#ifndef KERNELKIT_DTYPE_H
#define KERNELKIT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kk_dtype {
    KK_DTYPE_F64 = 0,
    KK_DTYPE_F32,
    KK_DTYPE_F16,
    KK_DTYPE_BF16,
    KK_DTYPE_FP8_E4M3, /* e4m3fn: no infinity, max 448, NaN = S.1111.111 */
    KK_DTYPE_FP8_E5M2, /* IEEE-like: inf and NaN, max 57344 */
    KK_DTYPE_E2M1,     /* NVFP4 element: 4 bits, two per byte, low nibble first, max 6 */
    KK_DTYPE_INT8,
    KK_DTYPE_UINT8,
    KK_DTYPE_INT32,
    KK_DTYPE_COUNT
} kk_dtype;

/* "f32", "bf16", "fp8_e4m3", "e2m1", ...; "?" when out of range. */
KK_API const char *kk_dtype_name(kk_dtype dtype);

/* Parse a name as printed by kk_dtype_name (also "float64", "float32",
 * "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"), in
 * any case. KK_ERR_INVALID_ARGUMENT for an unknown name or a NULL argument. */
KK_API kk_status kk_dtype_parse(const char *name, kk_dtype *out);

/* Bits per element: 64, 32, 16, 8 or 4. 0 for an invalid dtype. */
KK_API int kk_dtype_bits(kk_dtype dtype);

/* Bytes needed for `count` elements (packed formats round up); 0 on overflow
 * or an invalid dtype. */
KK_API size_t kk_dtype_bytes(kk_dtype dtype, size_t count);

/* Non-zero for f64, f32, f16, bf16, fp8 and e2m1. */
KK_API int kk_dtype_is_float(kk_dtype dtype);

/* Largest finite value of a float dtype (448 for e4m3, 6 for e2m1); the largest
 * value of an integer dtype; 0 for an invalid dtype. */
KK_API double kk_dtype_max_finite(kk_dtype dtype);

/* ---- scalar conversions (bit patterns in the low bits of the integer) ---- */
KK_API uint16_t kk_f32_to_f16(float x);
KK_API float kk_f16_to_f32(uint16_t bits);
KK_API uint16_t kk_f32_to_bf16(float x);
KK_API float kk_bf16_to_f32(uint16_t bits);
KK_API uint8_t kk_f32_to_e4m3(float x);
KK_API float kk_e4m3_to_f32(uint8_t bits);
KK_API uint8_t kk_f32_to_e5m2(float x);
KK_API float kk_e5m2_to_f32(uint8_t bits);
KK_API uint8_t kk_f32_to_e2m1(float x);    /* result in the low 4 bits */
KK_API float kk_e2m1_to_f32(uint8_t bits); /* uses the low 4 bits */

/* Convert `count` elements between any two dtypes on the host. The same dtype
 * is copied byte for byte. To f64: exact. To f32: rounded to nearest even. To
 * f16, bf16, fp8 and e2m1: through f32 with the rules above, and correctly
 * rounded from f64 and int32 sources too (they are rounded to odd into f32, so
 * the final rounding is the only one). To an integer: rounded to nearest even
 * and saturated to the type's range; NaN becomes 0; integers saturate when
 * narrowing. Packed e2m1 buffers hold element i in byte i/2, low nibble first;
 * with an odd count the last byte's high nibble is written as 0.
 * src and dst must not overlap. count == 0 does nothing.
 * Errors: KK_ERR_INVALID_ARGUMENT for a bad src_dtype or dst_dtype, a NULL src
 * or dst with count > 0, or a count whose byte size overflows size_t. */
KK_API kk_status kk_convert_host(const void *src, kk_dtype src_dtype, void *dst, kk_dtype dst_dtype,
                                 size_t count);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_DTYPE_H */

// e4m3(y / scale), the quotient correctly rounded to f32 first (the CPU's
// kk__q_ratio, then f32bits_to_e4m3), without the division on most values.
// rcp = 1/scale rounded to nearest. v = y * rcp is within 2.5 f32 ulps of
// the correctly rounded quotient (two roundings of 2^-24 relative each, then
// the quotient's own half ulp). The hardware's e4m3 rounding (sm_89+,
// cvt.rn.satfinite: the same codes as f32bits_to_e4m3 on all 2^32 inputs,
// tests/test_cuda_dtype.c) is monotonic, so when it gives one code to
// v - G and v + G steps of the bits (G = 8: at least 4 ulps of v's binade each
// way), every value between, the quotient included, has that code. Else (a
// rounding boundary that close: about 2G in 2^20 values) and for inf/NaN:
// the division. tests/test_cuda_fused_rows.c checks it against the division
// on crafted near-boundary quotients (kk__cuda_e4m3_quotient_check), and
// that G = 0 (no guard) fails there.
#ifndef KK_CUDA_KERNELS_FP8_QUOTIENT_CUH
#define KK_CUDA_KERNELS_FP8_QUOTIENT_CUH

#include <cuda_fp8.h>
#include <stdint.h>

#include "core/quant_math.h"
#include "cuda/kernels/convert.cuh"

namespace kk_fp8q {

constexpr uint32_t kGuard = 8; // steps of the bits each way (see above)

// The reference: the division, then the library's rounding.
static __device__ __forceinline__ uint32_t e4m3_of_quotient_div(float y, float scale) {
    return kk_convert::f32bits_to_e4m3(__float_as_uint(kk__q_ratio(y, scale)));
}

// The fast path alone: true and the code when the guard decides it, false
// when the division must (always false below sm_89).
template <uint32_t G>
__device__ __forceinline__ bool e4m3_of_quotient_fast(float y, float scale, float rcp,
                                                      uint32_t &code) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const uint32_t v = __float_as_uint(__fmul_rn(y, rcp));
    const uint32_t mag = v & 0x7FFFFFFFu, sign = v & 0x80000000u;
    const float lo = __uint_as_float(sign | (mag > G ? mag - G : 0u));
    const float hi = __uint_as_float(sign | (mag + G));
    const uint32_t two = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
    code = two & 0xFFu;
    return (two >> 8) == code && mag < 0x7F000000u && scale != 0.0f;
#else
    (void)y, (void)scale, (void)rcp;
    code = 0u;
    return false;
#endif
}

template <uint32_t G>
__device__ __forceinline__ uint32_t e4m3_of_quotient(float y, float scale, float rcp) {
    uint32_t code;
    return e4m3_of_quotient_fast<G>(y, scale, rcp, code) ? code : e4m3_of_quotient_div(y, scale);
}

} // namespace kk_fp8q

#endif

// Device-side element-type conversions: the same integer arithmetic as
// src/core/dtype_convert.c, line for line, so the GPU gives the CPU's bits
// (tests/test_cuda_dtype.c checks). NaNs are built by hand, never by the FPU,
// whose handling of payloads differs between CPU and GPU. The rules:
// docs/formats.md.
#ifndef KK_CUDA_KERNELS_CONVERT_CUH
#define KK_CUDA_KERNELS_CONVERT_CUH

#include <stdint.h>

#define KK__DEV static __device__ __forceinline__

namespace kk_convert {

// ---- f32 -> narrow (see kk__encode_mag in src/core/dtype_encode.h) ----

KK__DEV uint32_t encode_mag(uint32_t a, uint32_t mbits, uint32_t bias, uint32_t max_code,
                            uint32_t over_code, uint32_t big) {
    const int32_t eb = (int32_t)(a >> 23);
    const uint32_t m24 = (a & 0x7FFFFFu) | 0x800000u;
    const int32_t nsh = 23 - (int32_t)mbits;
    int32_t sh = 151 - (int32_t)bias - (int32_t)mbits - eb;
    sh = sh < nsh ? nsh : sh;
    sh = sh > 25 ? 25 : sh;
    const uint32_t base =
        eb >= 128 - (int32_t)bias ? (uint32_t)(eb - 128 + (int32_t)bias) << mbits : 0u;
    const uint32_t half = 1u << (sh - 1);
    const uint32_t q = (m24 + half - 1u + ((m24 >> sh) & 1u)) >> sh;
    uint32_t code = base + q;
    code = code > max_code ? over_code : code;
    return a >= big ? over_code : code;
}

KK__DEV uint16_t f32bits_to_f16(uint32_t u) {
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    return (uint16_t)(sign | encode_mag(a, 10, 15, 0x7BFFu, 0x7C00u, 0x47800000u));
}

KK__DEV uint16_t f32bits_to_bf16(uint32_t u) {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

KK__DEV uint8_t f32bits_to_e4m3(uint32_t u) {
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7Fu;
    return (uint8_t)(sign | encode_mag(a, 3, 7, 0x7Eu, 0x7Eu, 0x44000000u));
}

KK__DEV uint8_t f32bits_to_e5m2(uint32_t u) {
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7Fu;
    return (uint8_t)(sign | encode_mag(a, 2, 15, 0x7Bu, 0x7Bu, 0x47800000u));
}

KK__DEV uint8_t f32bits_to_e2m1(uint32_t u) {
    const uint32_t sign = (u >> 28) & 0x8u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7u;
    return (uint8_t)(sign | encode_mag(a, 1, 1, 0x7u, 0x7u, 0x41000000u));
}

// ---- narrow -> f32 (the CPU uses tables for the 8- and 4-bit formats; the
// GPU computes the same entries) ----

KK__DEV uint32_t f16_to_f32bits(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u);
    if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0) return sign;
    return sign | (__float_as_uint((float)m) - (24u << 23));
}

KK__DEV uint32_t bf16_to_f32bits(uint32_t b) {
    const uint32_t u = b << 16;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? u | 0x400000u : u;
}

// Magnitude of a small-format code: exponent field e (bias `bias`), mantissa
// m of `mbits` bits; e == 0 is subnormal: m * 2^(1 - bias - mbits).
KK__DEV uint32_t small_mag(uint32_t e, uint32_t m, uint32_t mbits, uint32_t bias) {
    if (e != 0) return ((e + 127u - bias) << 23) | (m << (23u - mbits));
    if (m == 0) return 0u;
    const uint32_t p = 31u - (uint32_t)__clz(m); // leading bit of m
    return ((128u - bias - mbits + p) << 23) | ((m - (1u << p)) << (23u - p));
}

KK__DEV uint32_t e4m3_to_f32bits(uint32_t c) {
    const uint32_t sign = (c & 0x80u) << 24;
    const uint32_t mag = c & 0x7Fu;
    if (mag == 0x7Fu) return sign | 0x7FC00000u | (7u << 20);
    return sign | small_mag(mag >> 3, mag & 7u, 3u, 7u);
}

KK__DEV uint32_t e5m2_to_f32bits(uint32_t c) {
    const uint32_t sign = (c & 0x80u) << 24;
    const uint32_t e = (c >> 2) & 0x1Fu, m = c & 3u;
    if (e == 31u) return sign | (m ? 0x7FC00000u | (m << 21) : 0x7F800000u);
    return sign | small_mag(e, m, 2u, 15u);
}

KK__DEV uint32_t e2m1_to_f32bits(uint32_t c) {
    const uint32_t sign = (c & 0x8u) << 28;
    return sign | small_mag((c >> 1) & 3u, c & 1u, 1u, 1u);
}

// ---- f64 <-> f32 and float -> integer ----

KK__DEV int f64_is_nan(uint64_t d) { return (d & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull; }

KK__DEV uint32_t f64_nan_to_f32bits(uint64_t d) {
    return (uint32_t)(d >> 32 & 0x80000000u) | 0x7FC00000u | (uint32_t)(d >> 29 & 0x3FFFFFu);
}

KK__DEV uint32_t f64_to_f32bits(double d) {
    const uint64_t b = (uint64_t)__double_as_longlong(d);
    return f64_is_nan(b) ? f64_nan_to_f32bits(b) : __float_as_uint(__double2float_rn(d));
}

// Round to odd (see dtype_convert.c).
KK__DEV uint32_t f64_to_f32bits_odd(double d) {
    const uint64_t b = (uint64_t)__double_as_longlong(d);
    if (f64_is_nan(b)) return f64_nan_to_f32bits(b);
    const float f = __double2float_rn(d);
    uint32_t u = __float_as_uint(f);
    if ((double)f == d) return u;
    if (fabs((double)f) > fabs(d)) u -= 1u;
    return u | 1u;
}

KK__DEV double f32bits_to_f64(uint32_t u) {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return __longlong_as_double((long long)((uint64_t)(u & 0x80000000u) << 32 |
                                                0x7FF8000000000000ull |
                                                (uint64_t)(u & 0x7FFFFFu) << 29));
    return (double)__uint_as_float(u);
}

KK__DEV double round_saturate(double d, double lo, double hi) {
    if (d != d) return 0.0;
    if (d <= lo) return lo;
    if (d >= hi) return hi;
    const double f = floor(d);
    const double diff = d - f;
    const int odd = (int)((int64_t)f & 1);
    return f + ((diff > 0.5 || (diff == 0.5 && odd)) ? 1.0 : 0.0);
}

} // namespace kk_convert

#undef KK__DEV
#endif

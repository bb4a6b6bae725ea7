/* Conversions between the element types: the scalar kk_f32_to_* / kk_*_to_f32
 * functions and kk_convert_host. Everything works on bit patterns with integer
 * arithmetic (NaNs are built by hand), so the result depends on no compiler,
 * rounding mode or flush-to-zero, and src/cuda/kernels/convert.cuh gives the
 * same bits on the GPU. The rules and tables: docs/formats.md. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype_encode.h"
#include "core/error.h"
#include "kernelkit/dtype.h"

/* ---- bit helpers ---- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint64_t f64_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double bits_f64(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- f32 -> narrow (kk__encode_mag and e4m3: core/dtype_encode.h) ---- */

static inline uint16_t f32bits_to_f16(uint32_t u) {
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    /* max 65504 = 0x7BFF; >= 65520 rounds to inf (0x7C00); big = 2^16 */
    return (uint16_t)(sign | kk__encode_mag(a, 10, 15, 0x7BFFu, 0x7C00u, 0x47800000u));
}

static inline uint16_t f32bits_to_bf16(uint32_t u) {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    /* bf16 is the top half of f32: round the low half away; a carry overflows
     * correctly into the exponent, and up to infinity. */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static inline uint8_t f32bits_to_e5m2(uint32_t u) {
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7Fu;
    /* max 57344 = 0x7B (0x7C is inf); big = 2^16 */
    return (uint8_t)(sign | kk__encode_mag(a, 2, 15, 0x7Bu, 0x7Bu, 0x47800000u));
}

static inline uint8_t f32bits_to_e2m1(uint32_t u) {
    const uint32_t sign = (u >> 28) & 0x8u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7u;
    /* max 6 = 0x7; big = 8 */
    return (uint8_t)(sign | kk__encode_mag(a, 1, 1, 0x7u, 0x7u, 0x41000000u));
}

/* ---- narrow -> f32 ---- */

static inline uint32_t f16_to_f32bits(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u);
    if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0) return sign;
    /* subnormal m * 2^-24: the exact float m, with 24 taken off its exponent */
    return sign | (f32_bits((float)m) - (24u << 23));
}

static inline uint32_t bf16_to_f32bits(uint32_t b) {
    const uint32_t u = b << 16;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? u | 0x400000u : u;
}

/* Decode tables for the 8-bit and 4-bit formats, built by the preprocessor from
 * the definition of each format (test_dtype.c checks every entry against an
 * independent float64 formula).
 *
 * Subnormal m (1 <= m < 8) * 2^(1 - bias - mbits): with p the position of m's
 * leading bit, the f32 exponent is 1 - bias - mbits + p and the mantissa is
 * (m - 2^p) << (23 - p). */
#define KK__LEAD(m) ((m) >= 4u ? 2u : (m) >= 2u ? 1u : 0u)
#define KK__SUBNORMAL(m, mbits, bias)                                                              \
    ((m) == 0u ? 0u                                                                                \
               : ((128u - (bias) - (mbits) + KK__LEAD(m)) << 23) |                                 \
                     (((m) - (1u << KK__LEAD(m))) << (23u - KK__LEAD(m))))
#define KK__NORMAL(e, m, mbits, bias) ((((e) + 127u - (bias)) << 23) | ((m) << (23u - (mbits))))
#define KK__QNAN(m, mbits) (0x7FC00000u | ((m) << (23u - (mbits))))

/* magnitude bits of e4m3 code c (0..0x7F): exponent 15 is finite except 0x7F */
#define KK__E4M3_MAG(c)                                                                            \
    ((c) == 0x7Fu       ? KK__QNAN(7u, 3u)                                                         \
     : ((c) >> 3) == 0u ? KK__SUBNORMAL((c)&7u, 3u, 7u)                                            \
                        : KK__NORMAL((c) >> 3, (c)&7u, 3u, 7u))
/* e5m2 code c (0..0x7F): exponent 31 is inf (m = 0) or NaN */
#define KK__E5M2_MAG(c)                                                                            \
    (((c) >> 2) == 31u  ? ((c)&3u ? KK__QNAN((c)&3u, 2u) : 0x7F800000u)                            \
     : ((c) >> 2) == 0u ? KK__SUBNORMAL((c)&3u, 2u, 15u)                                           \
                        : KK__NORMAL((c) >> 2, (c)&3u, 2u, 15u))
/* e2m1 code c (0..7): no inf, no NaN */
#define KK__E2M1_MAG(c)                                                                            \
    (((c) >> 1) == 0u ? KK__SUBNORMAL((c)&1u, 1u, 1u) : KK__NORMAL((c) >> 1, (c)&1u, 1u, 1u))

#define KK__E4M3(c) (((uint32_t)((c) >> 7) << 31) | KK__E4M3_MAG((uint32_t)(c)&0x7Fu))
#define KK__E5M2(c) (((uint32_t)((c) >> 7) << 31) | KK__E5M2_MAG((uint32_t)(c)&0x7Fu))
#define KK__E2M1(c) (((uint32_t)((c) >> 3) << 31) | KK__E2M1_MAG((uint32_t)(c)&0x7u))

#define KK__R4(F, b) F((b) + 0u), F((b) + 1u), F((b) + 2u), F((b) + 3u)
#define KK__R16(F, b)                                                                              \
    KK__R4(F, (b) + 0u), KK__R4(F, (b) + 4u), KK__R4(F, (b) + 8u), KK__R4(F, (b) + 12u)
#define KK__R64(F, b)                                                                              \
    KK__R16(F, (b) + 0u), KK__R16(F, (b) + 16u), KK__R16(F, (b) + 32u), KK__R16(F, (b) + 48u)
#define KK__R256(F) KK__R64(F, 0u), KK__R64(F, 64u), KK__R64(F, 128u), KK__R64(F, 192u)

static const uint32_t k_e4m3_f32[256] = {KK__R256(KK__E4M3)};
static const uint32_t k_e5m2_f32[256] = {KK__R256(KK__E5M2)};
static const uint32_t k_e2m1_f32[16] = {KK__R16(KK__E2M1, 0u)};

/* ---- f64 <-> f32 with hand-made NaNs ---- */

static inline uint32_t f64_nan_to_f32bits(uint64_t d) {
    return (uint32_t)(d >> 32 & 0x80000000u) | 0x7FC00000u | (uint32_t)(d >> 29 & 0x3FFFFFu);
}

static inline int f64_is_nan(uint64_t d) {
    return (d & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
}

/* f64 -> f32, round to nearest even (the C conversion). */
static inline uint32_t f64_to_f32bits(double d) {
    const uint64_t b = f64_bits(d);
    return f64_is_nan(b) ? f64_nan_to_f32bits(b) : f32_bits((float)d);
}

/* f64 -> f32 rounded to odd: truncate, and set the last bit when inexact. An
 * f32 so rounded, rounded again to any format of at most 22 significant bits
 * (all of ours), gives the correctly rounded result of the f64 - one rounding,
 * not two (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
 * proved algorithms using rounding to odd", IEEE TC 2008). Used for f64 and
 * int32 sources, which f32 cannot always hold exactly. */
static inline uint32_t f64_to_f32bits_odd(double d) {
    const uint64_t b = f64_bits(d);
    if (f64_is_nan(b)) return f64_nan_to_f32bits(b);
    const float f = (float)d; /* one of the two neighbours, whatever the rounding mode */
    uint32_t u = f32_bits(f);
    if ((double)f == d) return u;
    if (fabs((double)f) > fabs(d)) u -= 1u; /* it rounded away: step back toward zero */
    return u | 1u;
}

/* f32 -> f64, exact. */
static inline double f32bits_to_f64(uint32_t u) {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return bits_f64((uint64_t)(u & 0x80000000u) << 32 | 0x7FF8000000000000ull |
                        (uint64_t)(u & 0x7FFFFFu) << 29);
    return (double)bits_f32(u);
}

/* Float to integer: round to nearest even, saturate to [lo, hi], NaN -> 0. */
static inline double round_saturate(double d, double lo, double hi) {
    if (d != d) return 0.0;
    if (d <= lo) return lo;
    if (d >= hi) return hi;
    /* |d| < 2^31 here: floor and the difference are exact */
    const double f = floor(d);
    const double diff = d - f;
    const int odd = (int)((int64_t)f & 1);
    return f + ((diff > 0.5 || (diff == 0.5 && odd)) ? 1.0 : 0.0);
}

/* ---- the public scalar functions ---- */

uint16_t kk_f32_to_f16(float x) { return f32bits_to_f16(f32_bits(x)); }
float kk_f16_to_f32(uint16_t bits) { return bits_f32(f16_to_f32bits(bits)); }
uint16_t kk_f32_to_bf16(float x) { return f32bits_to_bf16(f32_bits(x)); }
float kk_bf16_to_f32(uint16_t bits) { return bits_f32(bf16_to_f32bits(bits)); }
uint8_t kk_f32_to_e4m3(float x) { return kk__f32bits_to_e4m3(f32_bits(x)); }
float kk_e4m3_to_f32(uint8_t bits) { return bits_f32(k_e4m3_f32[bits]); }
uint8_t kk_f32_to_e5m2(float x) { return f32bits_to_e5m2(f32_bits(x)); }
float kk_e5m2_to_f32(uint8_t bits) { return bits_f32(k_e5m2_f32[bits]); }
uint8_t kk_f32_to_e2m1(float x) { return f32bits_to_e2m1(f32_bits(x)); }
float kk_e2m1_to_f32(uint8_t bits) { return bits_f32(k_e2m1_f32[bits & 0xFu]); }

/* ---- kk_convert_host ----
 *
 * Work goes in chunks through a small buffer: the source is decoded into f32
 * bit patterns (or f64 values), then encoded into the destination. Each loop
 * below handles one dtype, so it is a plain loop the compiler can vectorize.
 *   - destination f64 or integer: through f64, which holds every source exactly;
 *   - destination f32: through f32 bits, f64 and int32 rounded to nearest even;
 *   - destination f16, bf16, fp8, e2m1: through f32 bits, f64 and int32 rounded
 *     to odd, so that the final rounding is the only one. */

enum { CHUNK = 512 };

static void load_f32bits(const void *src, kk_dtype t, size_t i0, size_t n, uint32_t *out, int odd) {
    switch (t) {
    case KK_DTYPE_F64: {
        const double *s = (const double *)src + i0;
        if (odd)
            for (size_t i = 0; i < n; i++) out[i] = f64_to_f32bits_odd(s[i]);
        else
            for (size_t i = 0; i < n; i++) out[i] = f64_to_f32bits(s[i]);
        break;
    }
    case KK_DTYPE_F32: memcpy(out, (const float *)src + i0, n * sizeof *out); break;
    case KK_DTYPE_F16: {
        const uint16_t *s = (const uint16_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32bits(s[i]);
        break;
    }
    case KK_DTYPE_BF16: {
        const uint16_t *s = (const uint16_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32bits(s[i]);
        break;
    }
    case KK_DTYPE_FP8_E4M3: {
        const uint8_t *s = (const uint8_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = k_e4m3_f32[s[i]];
        break;
    }
    case KK_DTYPE_FP8_E5M2: {
        const uint8_t *s = (const uint8_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = k_e5m2_f32[s[i]];
        break;
    }
    case KK_DTYPE_E2M1: { /* i0 is even: byte i0 / 2 starts the chunk */
        const uint8_t *s = (const uint8_t *)src + i0 / 2;
        for (size_t j = 0; j < n / 2; j++) {
            out[2 * j] = k_e2m1_f32[s[j] & 0xFu];
            out[2 * j + 1] = k_e2m1_f32[s[j] >> 4];
        }
        if (n & 1) out[n - 1] = k_e2m1_f32[s[n / 2] & 0xFu];
        break;
    }
    case KK_DTYPE_INT8: {
        const int8_t *s = (const int8_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = f32_bits((float)s[i]);
        break;
    }
    case KK_DTYPE_UINT8: {
        const uint8_t *s = (const uint8_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = f32_bits((float)s[i]);
        break;
    }
    case KK_DTYPE_INT32: {
        const int32_t *s = (const int32_t *)src + i0;
        if (odd)
            for (size_t i = 0; i < n; i++) out[i] = f64_to_f32bits_odd((double)s[i]);
        else
            for (size_t i = 0; i < n; i++) out[i] = f32_bits((float)s[i]);
        break;
    }
    default: break; /* not reached: checked by kk_convert_host */
    }
}

static void store_f32bits(const uint32_t *in, void *dst, kk_dtype t, size_t i0, size_t n) {
    switch (t) {
    case KK_DTYPE_F32: memcpy((float *)dst + i0, in, n * sizeof *in); break;
    case KK_DTYPE_F16: {
        uint16_t *d = (uint16_t *)dst + i0;
        for (size_t i = 0; i < n; i++) d[i] = f32bits_to_f16(in[i]);
        break;
    }
    case KK_DTYPE_BF16: {
        uint16_t *d = (uint16_t *)dst + i0;
        for (size_t i = 0; i < n; i++) d[i] = f32bits_to_bf16(in[i]);
        break;
    }
    case KK_DTYPE_FP8_E4M3: {
        uint8_t *d = (uint8_t *)dst + i0;
        for (size_t i = 0; i < n; i++) d[i] = kk__f32bits_to_e4m3(in[i]);
        break;
    }
    case KK_DTYPE_FP8_E5M2: {
        uint8_t *d = (uint8_t *)dst + i0;
        for (size_t i = 0; i < n; i++) d[i] = f32bits_to_e5m2(in[i]);
        break;
    }
    case KK_DTYPE_E2M1: { /* two per byte, low nibble first; an odd tail's high nibble is 0 */
        uint8_t *d = (uint8_t *)dst + i0 / 2;
        for (size_t j = 0; j < n / 2; j++)
            d[j] = (uint8_t)(f32bits_to_e2m1(in[2 * j]) | f32bits_to_e2m1(in[2 * j + 1]) << 4);
        if (n & 1) d[n / 2] = f32bits_to_e2m1(in[n - 1]);
        break;
    }
    default: break; /* f64 and integers go through f64 */
    }
}

static void load_f64(const void *src, kk_dtype t, size_t i0, size_t n, double *out) {
    switch (t) {
    case KK_DTYPE_F64: memcpy(out, (const double *)src + i0, n * sizeof *out); break;
    case KK_DTYPE_INT8: {
        const int8_t *s = (const int8_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = (double)s[i];
        break;
    }
    case KK_DTYPE_UINT8: {
        const uint8_t *s = (const uint8_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = (double)s[i];
        break;
    }
    case KK_DTYPE_INT32: {
        const int32_t *s = (const int32_t *)src + i0;
        for (size_t i = 0; i < n; i++) out[i] = (double)s[i];
        break;
    }
    default: { /* f32 and narrower floats: exact through f32 bits */
        uint32_t tmp[CHUNK];
        load_f32bits(src, t, i0, n, tmp, 0);
        for (size_t i = 0; i < n; i++) out[i] = f32bits_to_f64(tmp[i]);
        break;
    }
    }
}

static void store_f64(const double *in, void *dst, kk_dtype t, size_t i0, size_t n) {
    switch (t) {
    case KK_DTYPE_F64: memcpy((double *)dst + i0, in, n * sizeof *in); break;
    case KK_DTYPE_INT8: {
        int8_t *d = (int8_t *)dst + i0;
        for (size_t i = 0; i < n; i++) d[i] = (int8_t)round_saturate(in[i], -128.0, 127.0);
        break;
    }
    case KK_DTYPE_UINT8: {
        uint8_t *d = (uint8_t *)dst + i0;
        for (size_t i = 0; i < n; i++) d[i] = (uint8_t)round_saturate(in[i], 0.0, 255.0);
        break;
    }
    case KK_DTYPE_INT32: {
        int32_t *d = (int32_t *)dst + i0;
        for (size_t i = 0; i < n; i++)
            d[i] = (int32_t)round_saturate(in[i], -2147483648.0, 2147483647.0);
        break;
    }
    default: break; /* floats other than f64 go through f32 bits */
    }
}

static int valid_dtype(kk_dtype t) { return (int)t >= 0 && t < KK_DTYPE_COUNT; }

static int through_f64(kk_dtype dst) {
    return dst == KK_DTYPE_F64 || dst == KK_DTYPE_INT8 || dst == KK_DTYPE_UINT8 ||
           dst == KK_DTYPE_INT32;
}

kk_status kk_convert_host(const void *src, kk_dtype src_dtype, void *dst, kk_dtype dst_dtype,
                          size_t count) {
    static const char *const expected_dtype = "a kk_dtype from KK_DTYPE_F64 to KK_DTYPE_INT32";
    if (!valid_dtype(src_dtype))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "src_dtype", expected_dtype, "%d",
                             (int)src_dtype);
    if (!valid_dtype(dst_dtype))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dst_dtype", expected_dtype, "%d",
                             (int)dst_dtype);
    if (count == 0) return KK_OK;
    kk_status st = KK__CHECK_NOT_NULL(src);
    if (st != KK_OK) return st;
    if ((st = KK__CHECK_NOT_NULL(dst)) != KK_OK) return st;
    const size_t src_bytes = kk_dtype_bytes(src_dtype, count);
    const size_t dst_bytes = kk_dtype_bytes(dst_dtype, count);
    if (src_bytes == 0 || dst_bytes == 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "count",
                             "a count whose buffers fit in size_t", "%zu", count);

    if (src_dtype == dst_dtype) {
        memcpy(dst, src, src_bytes);
        if (dst_dtype == KK_DTYPE_E2M1 && (count & 1))
            ((uint8_t *)dst)[count / 2] &= 0x0Fu; /* padding nibble is 0, as always */
        return KK_OK;
    }

    if (through_f64(dst_dtype)) {
        double tmp[CHUNK];
        for (size_t i0 = 0; i0 < count; i0 += CHUNK) {
            const size_t n = count - i0 < CHUNK ? count - i0 : CHUNK;
            load_f64(src, src_dtype, i0, n, tmp);
            store_f64(tmp, dst, dst_dtype, i0, n);
        }
    } else {
        uint32_t tmp[CHUNK];
        const int odd = dst_dtype != KK_DTYPE_F32;
        for (size_t i0 = 0; i0 < count; i0 += CHUNK) {
            const size_t n = count - i0 < CHUNK ? count - i0 : CHUNK;
            load_f32bits(src, src_dtype, i0, n, tmp, odd);
            store_f32bits(tmp, dst, dst_dtype, i0, n);
        }
    }
    return KK_OK;
}

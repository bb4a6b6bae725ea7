/* Internal: the f32 -> narrow encoding of kk_convert_host (dtype_convert.c)
 * as inline functions on bit patterns, for kernels that round inside their
 * own loops (rmsnorm_fp8_cpu.c's e4m3): one definition, so the bits are the
 * library's, and the caller's loop vectorizes for its instruction set.
 * The rules: docs/formats.md. */
#ifndef KK_CORE_DTYPE_ENCODE_H
#define KK_CORE_DTYPE_ENCODE_H

#include <stdint.h>

/* kk__encode_mag rounds a magnitude `a` (f32 bits without the sign; not NaN; may be
 * +inf) to a binary format with `mbits` mantissa bits and exponent bias `bias`
 * whose biased exponent 0 holds the subnormals. The result is the format's
 * code without its sign bit: (biased exponent << mbits) | mantissa.
 *
 * The 24-bit significand m24 (implicit bit included) is shifted right by `sh`
 * with round-to-nearest-even: sh = 23 - mbits for a normal result, more for a
 * subnormal one (capped at 25, which rounds anything to 0). A carry out of the
 * mantissa correctly bumps the exponent (and a subnormal that rounds up becomes
 * the smallest normal). Codes above max_code, and every a >= big (a power of
 * two beyond the range, so that the shifts cannot overflow), give over_code:
 * the largest finite code for saturating formats, infinity for IEEE ones.
 * Written without branches so that loops over it can be vectorized. */
static inline uint32_t kk__encode_mag(uint32_t a, uint32_t mbits, uint32_t bias, uint32_t max_code,
                                      uint32_t over_code, uint32_t big) {
    const int32_t eb = (int32_t)(a >> 23); /* biased f32 exponent */
    const uint32_t m24 = (a & 0x7FFFFFu) | 0x800000u;
    const int32_t nsh = 23 - (int32_t)mbits;
    int32_t sh = 151 - (int32_t)bias - (int32_t)mbits - eb; /* subnormal shift */
    sh = sh < nsh ? nsh : sh;
    sh = sh > 25 ? 25 : sh;
    /* normal: base + (m24 >> nsh) = (E - 1) << mbits + (1 << mbits | mantissa) */
    const uint32_t base =
        eb >= 128 - (int32_t)bias ? (uint32_t)(eb - 128 + (int32_t)bias) << mbits : 0u;
    const uint32_t half = 1u << (sh - 1);
    const uint32_t q = (m24 + half - 1u + ((m24 >> sh) & 1u)) >> sh;
    uint32_t code = base + q;
    code = code > max_code ? over_code : code;
    return a >= big ? over_code : code;
}

/* f32 bits to fp8 e4m3 (e4m3fn): round to nearest even, saturating to
 * +-448; NaN gives 0x7F. */
static inline uint8_t kk__f32bits_to_e4m3(uint32_t u) {
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7Fu;
    /* max 448 = 0x7E (0x7F is NaN); big = 2^9 */
    return (uint8_t)(sign | kk__encode_mag(a, 3, 7, 0x7Eu, 0x7Eu, 0x44000000u));
}

#endif

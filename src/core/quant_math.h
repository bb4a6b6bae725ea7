/* Internal: the scaling arithmetic of quantization, shared word for word by
 * the CPU (src/cpu/quant_cpu*.c) and the GPU (src/cuda/kernels/quant.cu), so
 * both give the same bits: each function is one or two correctly rounded IEEE
 * operations (no fusable a*b+c, no reciprocal for a division; __fdiv_rn and
 * __fmul_rn on the GPU, whatever the flags). docs/formats.md. */
#ifndef KK_CORE_QUANT_MATH_H
#define KK_CORE_QUANT_MATH_H

#include <stdint.h>

#ifdef __CUDACC__
#define KK__QHD __host__ __device__
#else
#define KK__QHD
#endif

#if defined(__CUDA_ARCH__)
#define KK__QDIV(a, b) __fdiv_rn((a), (b))
#define KK__QMUL(a, b) __fmul_rn((a), (b))
#else
#define KK__QDIV(a, b) ((a) / (b))
#define KK__QMUL(a, b) ((a) * (b))
#endif

#define KK__E4M3_MAX 448.0f
#define KK__E5M2_MAX 57344.0f
#define KK__E2M1_MAX 6.0f
#define KK__NVFP4_GLOBAL_DIV 2688.0f /* 448 * 6: the largest e4m3 scale times the largest e2m1 */
#define KK__FP8_BLOCK 128            /* 1x128 and 128x128 blocks */
#define KK__NVFP4_BLOCK 16           /* elements per NVFP4 scale */
#define KK__F32_MIN_SUBNORMAL 1.40129846e-45f /* 2^-149 */
#define KK__E4M3_MIN_CODE 0x01u               /* 2^-9, the smallest positive e4m3 */

/* |x| as bits: for magnitudes, integer order is float order, and every NaN is
 * above +inf, so a max over these finds inf/NaN too (>= 0x7F800000). */
#define KK__F32_INF_BITS 0x7F800000u

/* fp8 per-tensor / per-block scale: dequantized = element * scale. amax == 0
 * (or so small that the quotient underflows) gives 1: every element is then
 * quantized as x / 1, which rounds tiny values to fp8's own subnormals or 0. */
KK__QHD static inline float kk__fp8_scale(float amax, float fp8_max) {
    float s = KK__QDIV(amax, fp8_max);
    return s > 0.0f ? s : 1.0f;
}

/* NVFP4 per-tensor scale: amax / (448 * 6), so that the largest block scale is
 * about 448 (e4m3's max) and the largest element 6 (e2m1's max). */
KK__QHD static inline float kk__nvfp4_global(float amax) {
    if (!(amax > 0.0f)) return 1.0f;
    float g = KK__QDIV(amax, KK__NVFP4_GLOBAL_DIV);
    return g > 0.0f ? g : KK__F32_MIN_SUBNORMAL;
}

/* The block scale before e4m3 rounding: (block_amax / 6) / global. */
KK__QHD static inline float kk__nvfp4_scale_target(float block_amax, float global) {
    return KK__QDIV(KK__QDIV(block_amax, KK__E2M1_MAX), global);
}

/* A block with a non-zero element keeps a non-zero scale: when the target
 * rounds to e4m3 zero, use the smallest e4m3 (else x / 0 would saturate). */
KK__QHD static inline uint8_t kk__nvfp4_fix_scale(uint8_t code, float block_amax) {
    return (code == 0 && block_amax > 0.0f) ? (uint8_t)KK__E4M3_MIN_CODE : code;
}

/* The step of one e2m1 unit in a block: decoded block scale * global. */
KK__QHD static inline float kk__nvfp4_denom(float block_scale, float global) {
    return KK__QMUL(block_scale, global);
}

/* x in units of the scale, before narrow rounding. A zero denominator (an
 * all-zero block, or an underflowed product) quantizes to 0. */
KK__QHD static inline float kk__q_ratio(float x, float denom) {
    return denom != 0.0f ? KK__QDIV(x, denom) : 0.0f;
}

/* Dequantized value: decoded element * scale (NVFP4: * denom). */
KK__QHD static inline float kk__dq(float element, float scale) { return KK__QMUL(element, scale); }

/* Byte offset of scale (l, i, j) in the 128x4 blocked layout with
 * row_blocks = ceil(rows/128), col_blocks = ceil(scale_cols/4). */
KK__QHD static inline int64_t kk__nvfp4_blocked_index(int64_t row_blocks, int64_t col_blocks,
                                                      int64_t l, int64_t i, int64_t j) {
    int64_t atom = (l * row_blocks + i / 128) * col_blocks + j / 4;
    return atom * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + (j % 4);
}

#endif

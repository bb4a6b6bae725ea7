/* Internal: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11) and the attention dropout mask built on it, shared word for
 * word by the float64 reference, the CPU kernel and the CUDA kernels: the mask
 * is a pure function of (seed, offset, b, h, i, j), so every kernel drops the
 * same elements whatever its tiling. docs/kernels/attention.md. */
#ifndef KK_CORE_PHILOX_H
#define KK_CORE_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define KK__PHD __host__ __device__ __forceinline__
#else
#define KK__PHD static inline
#endif

typedef struct kk__philox4 {
    uint32_t v[4];
} kk__philox4;

KK__PHD void kk__philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
#if defined(__CUDA_ARCH__)
    *hi = __umulhi(a, b);
    *lo = a * b;
#else
    const uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
#endif
}

KK__PHD kk__philox4 kk__philox4x32_10(kk__philox4 c, uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        kk__philox_mulhilo(0xD2511F53u, c.v[0], &hi0, &lo0);
        kk__philox_mulhilo(0xCD9E8D57u, c.v[2], &hi1, &lo1);
        const kk__philox4 n = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
        c = n;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

/* The four random words of keys j = 4*j4 .. 4*j4+3 of query row i:
 *   counter = { j / 4, i, b * Hq + h, offset mod 2^32 }
 *   key     = { seed mod 2^32, (seed / 2^32) xor (offset / 2^32) }
 * b is the batch (the sequence, for varlen), h the query head, i the query row
 * and j the key column inside that sequence. Key j is kept when word j mod 4
 * >= kk__dropout_threshold(p); a kept weight is scaled by 1 / (1 - p). */
KK__PHD kk__philox4 kk__dropout_bits(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i,
                                     uint32_t j4) {
    const kk__philox4 c = {{j4, i, bh, (uint32_t)offset}};
    return kk__philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32));
}

/* floor(p * 2^32), capped at 2^32 - 1; p in [0, 1). */
KK__PHD uint32_t kk__dropout_threshold(double p) {
    const double t = p * 4294967296.0;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

/* 1 when element (bh = b * Hq + h, i, j) is kept. */
KK__PHD int kk__dropout_keep(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t j,
                             uint32_t threshold) {
    return kk__dropout_bits(seed, offset, bh, i, j >> 2).v[j & 3] >= threshold;
}

#endif

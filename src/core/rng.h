/* Internal: a small seeded pseudo-random generator, the same stream on every
 * platform and compiler (integer arithmetic only).
 *
 * xoshiro256** 1.0 (Blackman and Vigna, 2018, public domain) with its state
 * filled from the 64-bit seed by splitmix64, as its authors recommend. Any seed
 * is fine, 0 included. Not for cryptography. */
#ifndef KK_HARNESS_RNG_H
#define KK_HARNESS_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kk__rng {
    uint64_t s[4];
} kk__rng;

/* Start the stream of `seed`. */
void kk__rng_seed(kk__rng *rng, uint64_t seed);

/* Next 64 random bits. */
uint64_t kk__rng_next(kk__rng *rng);

/* Uniform integer in [0, bound), without modulo bias (Lemire's method on the
 * upper 32 bits of a draw). bound must be at least 1. */
uint32_t kk__rng_below(kk__rng *rng, uint32_t bound);

/* Draw `draws` uniform integers in [0, bound) and add one to counts[v] for each
 * (the counts of a bootstrap resample). Two draws per 64-bit output: the upper
 * 32 bits, then the lower 32 bits, each by Lemire's method; a rejected value
 * is replaced from the upper bits of a fresh output. */
void kk__rng_count_below(kk__rng *rng, uint32_t bound, size_t draws, uint32_t *counts);

/* Uniform double in [0, 1) with 53 random bits. */
double kk__rng_uniform(kk__rng *rng);

#ifdef __cplusplus
}
#endif
#endif

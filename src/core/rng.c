/* xoshiro256** seeded by splitmix64: see rng.h. */
#include "core/rng.h"

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void kk__rng_seed(kk__rng *rng, uint64_t seed) {
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&sm);
    /* splitmix64 is a bijection of its counter, so four outputs are never all zero
     * in practice; guard anyway since the all-zero state is a fixed point. */
    if (!(rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3])) rng->s[0] = 1;
}

uint64_t kk__rng_next(kk__rng *rng) {
    uint64_t *s = rng->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Lemire, "Fast random integer generation in an interval", ACM TOMACS 2019:
 * the upper half of bits * bound, rejecting the few low halves that would bias it. */
static inline uint32_t lemire(kk__rng *rng, uint32_t bits, uint32_t bound) {
    uint64_t m = (uint64_t)bits * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t threshold = (uint32_t)(-bound) % bound;
        while (low < threshold) {
            m = (kk__rng_next(rng) >> 32) * (uint64_t)bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void kk__rng_count_below(kk__rng *rng, uint32_t bound, size_t draws, uint32_t *counts) {
    size_t i = 0;
    for (; i + 1 < draws; i += 2) {
        uint64_t r = kk__rng_next(rng);
        counts[lemire(rng, (uint32_t)(r >> 32), bound)]++;
        counts[lemire(rng, (uint32_t)r, bound)]++;
    }
    if (i < draws) counts[lemire(rng, (uint32_t)(kk__rng_next(rng) >> 32), bound)]++;
}

uint32_t kk__rng_below(kk__rng *rng, uint32_t bound) {
    return lemire(rng, (uint32_t)(kk__rng_next(rng) >> 32), bound);
}

double kk__rng_uniform(kk__rng *rng) { return (double)(kk__rng_next(rng) >> 11) * 0x1.0p-53; }

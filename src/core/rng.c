/*
 * rng.c - xoshiro256** seeded with splitmix64.
 *
 * Chosen over rand() (global state, platform-dependent) and over a Mersenne
 * twister (2.5 KB of state): 32 bytes of state passed by pointer, so two
 * searches with the same seed give the same strategy bit for bit.
 */
#include "soapflow/core.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void sf_rng_seed(sf_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t sf_rng_next(sf_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sf_rng_uniform(sf_rng *r) { return (double)(sf_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t sf_rng_below(sf_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    /* Rejection sampling on the top of the range removes modulo bias. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = sf_rng_next(r);
    } while (x >= limit);
    return x % n;
}

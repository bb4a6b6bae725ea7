/* The A/A table of docs/statistics.md: how often kk_stats_compare calls two samples of
 * one distribution SLOWER or FASTER (false), SAME, or AMBIGUOUS. Not part of the build:
 *   cmake --build build --target kernelkit_static
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Ibuild/include tests/data/stats/aa_rates.c \
 *      build/libkernelkit.a -lcjson -lm -ldl -lpthread -o /tmp/aa_rates && /tmp/aa_rates
 * Times are 100 (1 + noise N(0,1)), 1% of them 1.5x slower, drawn by the same generator
 * as tests/test_stats.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "kernelkit/stats.h"

static uint64_t t_state;
static uint64_t t_next(void) {
    uint64_t z = (t_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double t_uniform(void) { return (double)(t_next() >> 11) * 0x1.0p-53; }
static double t_normal(void) {
    double u = 1.0 - t_uniform(), v = t_uniform();
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}
static void t_times(double *x, size_t n, double center, double noise) {
    for (size_t i = 0; i < n; i++) {
        x[i] = center * (1.0 + noise * t_normal());
        if (t_uniform() < 0.01) x[i] *= 1.5;
    }
}

int main(void) {
    static double base[200], cand[200];
    static const double noises[] = {0.002, 0.01, 0.03, 0.05, 0.15};
    static const size_t sizes[] = {10, 30, 200};
    enum { SEEDS = 400 };
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 3; m++) {
            int slower = 0, faster = 0, same = 0;
            for (int s = 0; s < SEEDS; s++) {
                t_state = 5000 + (uint64_t)s;
                t_times(base, sizes[m], 100.0, noises[k]);
                t_times(cand, sizes[m], 100.0, noises[k]);
                kk_compare_options o;
                kk_compare_options_default(&o);
                o.seed = (uint64_t)s;
                o.resamples = 2000;
                kk_compare_result r;
                if (kk_stats_compare(base, sizes[m], cand, sizes[m], &o, &r)) return 1;
                slower += r.verdict == KK_VERDICT_SLOWER;
                faster += r.verdict == KK_VERDICT_FASTER;
                same += r.verdict == KK_VERDICT_SAME;
            }
            printf("noise %.3f n %3zu: SLOWER %d FASTER %d SAME %d of %d\n", noises[k], sizes[m],
                   slower, faster, same, SEEDS);
        }
    return 0;
}

// clang-format off
/* Scratch microbenchmark of the fifth softmax pass (README.md): zmm op throughput on this
 * Zen 4, 8 independent chains, cycles at an assumed 3.6 GHz (thread CPU time).
 *   gcc -O2 -march=native -o mix2 mix2.c && ./mix2 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), noinline))
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
#define N 100000000L
#define MIX(NAME, E1, E2)                                                                          \
    T double NAME(__m512 *io) {                                                                    \
        __m512 a0 = io[0], a1 = io[1], a2 = io[2], a3 = io[3], a4 = io[4], a5 = io[5], a6 = io[6], \
               a7 = io[7];                                                                         \
        const __m512 c = io[8];                                                                    \
        double t0 = now();                                                                         \
        for (long i = 0; i < N / 8; i++) {                                                         \
            a0 = E1(a0);                                                                           \
            a1 = E2(a1);                                                                           \
            a2 = E1(a2);                                                                           \
            a3 = E2(a3);                                                                           \
            a4 = E1(a4);                                                                           \
            a5 = E2(a5);                                                                           \
            a6 = E1(a6);                                                                           \
            a7 = E2(a7);                                                                           \
            __asm__ volatile("" ::"v"(a0), "v"(a1), "v"(a2), "v"(a3), "v"(a4), "v"(a5), "v"(a6),   \
                             "v"(a7));                                                             \
        }                                                                                          \
        double t = now() - t0;                                                                     \
        io[0] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),         \
                              _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));        \
        return t * 3.6e9 / N;                                                                      \
    }
#define FMA(a) _mm512_fmadd_ps(a, c, c)
#define ADD(a) _mm512_add_ps(a, c)
#define SCALEF(a) _mm512_scalef_ps(a, c)
#define REDUCE(a) _mm512_reduce_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define RNDSC(a) _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define SLL(a) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(a), 1))
#define PADDD(a)                                                                                   \
    _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(c)))
#define MAX(a) _mm512_max_ps(a, c)
#define CVTDQ(a) _mm512_castsi512_ps(_mm512_cvtps_epi32(a))
#define FPC(a) _mm512_castsi512_ps(_mm512_movm_epi32(_mm512_fpclass_ps_mask(a, 0x20)))
#define MOVM(a)                                                                                    \
    _mm512_castsi512_ps(_mm512_movm_epi32(                                                         \
        _mm512_cmp_epi32_mask(_mm512_castps_si512(a), _mm512_castps_si512(c), 1)))
#define PERMW(a)                                                                                   \
    _mm512_castsi512_ps(_mm512_permutexvar_epi16(_mm512_castps_si512(c), _mm512_castps_si512(a)))
#define CVT2(a) ((__m512)_mm512_cvtne2ps_pbh(a, c))
#define GETEXP(a) _mm512_getexp_ps(a)
MIX(fma_rndsc, FMA, RNDSC)
MIX(add_rndsc, ADD, RNDSC) MIX(fma_max, FMA, MAX) MIX(add_max, ADD, MAX) MIX(fma_cvtdq, FMA, CVTDQ)
    MIX(add_cvtdq, ADD, CVTDQ) MIX(scalef_add, SCALEF, ADD) MIX(scalef_sll, SCALEF, SLL)
        MIX(scalef_fma, SCALEF, FMA) MIX(fpc_fpc, FPC, FPC) MIX(movm, MOVM, MOVM)
            MIX(fma_fpc, FMA, FPC) MIX(add_fpc, ADD, FPC) MIX(add_permw, ADD, PERMW)
                MIX(add_cvt2, ADD, CVT2) MIX(scalef_permw, SCALEF, PERMW)
                    MIX(scalef_cvt2, SCALEF, CVT2) MIX(fma_getexp, FMA, GETEXP)
                        MIX(add_getexp, ADD, GETEXP) MIX(rndsc_rndsc, RNDSC, RNDSC)
                            MIX(scalef_rndsc, SCALEF, RNDSC) MIX(paddd, PADDD, PADDD)
                                MIX(add_paddd, ADD, PADDD)
                                    MIX(fma_paddd, FMA, PADDD) int main(void) {
    __m512 io[9];
    for (int i = 0; i < 9; i++) io[i] = _mm512_set1_ps(0.5f + i * 0.01f);
    io[8] = _mm512_set1_ps(0.999f);
#define R(f) printf("%-16s %.2f cycles/op\n", #f, f(io));
    R(fma_rndsc)
        R(add_rndsc) R(fma_max) R(add_max) R(fma_cvtdq) R(add_cvtdq) R(scalef_add) R(scalef_sll)
            R(scalef_fma) R(fpc_fpc) R(movm) R(fma_fpc) R(add_fpc) R(add_permw) R(add_cvt2)
                R(scalef_permw) R(scalef_cvt2) R(fma_getexp) R(add_getexp) R(rndsc_rndsc)
                    R(scalef_rndsc) R(paddd) R(add_paddd) R(fma_paddd) return (int)io[0][0] &
        0;
}
// clang-format on

// clang-format off
/* Scratch microbenchmark of the fifth softmax pass (README.md): zmm op throughput on this
 * Zen 4, 8 independent chains, cycles at an assumed 3.6 GHz (thread CPU time).
 *   gcc -O2 -march=native -o opbench opbench.c && ./opbench */
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
#define BODY(NAME, EXPR)                                                                           \
    T double NAME(__m512 *io) {                                                                    \
        __m512 a0 = io[0], a1 = io[1], a2 = io[2], a3 = io[3], a4 = io[4], a5 = io[5], a6 = io[6], \
               a7 = io[7];                                                                         \
        const __m512 c = io[8];                                                                    \
        double t0 = now();                                                                         \
        for (long i = 0; i < N / 8; i++) {                                                         \
            a0 = EXPR(a0);                                                                         \
            a1 = EXPR(a1);                                                                         \
            a2 = EXPR(a2);                                                                         \
            a3 = EXPR(a3);                                                                         \
            a4 = EXPR(a4);                                                                         \
            a5 = EXPR(a5);                                                                         \
            a6 = EXPR(a6);                                                                         \
            a7 = EXPR(a7);                                                                         \
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
#define MUL(a) _mm512_mul_ps(a, c)
#define SCALEF(a) _mm512_scalef_ps(a, c)
#define REDUCE(a) _mm512_reduce_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define RNDSC(a) _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define SLL(a) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(a), 1))
#define AND(a) _mm512_and_ps(a, c)
#define PERMW(a)                                                                                   \
    _mm512_castsi512_ps(_mm512_permutexvar_epi16(_mm512_castps_si512(c), _mm512_castps_si512(a)))
#define PERMPS(a) _mm512_permutexvar_ps(_mm512_castps_si512(c), a)
#define CVT2(a) ((__m512)_mm512_cvtne2ps_pbh(a, c))
#define PADDD(a)                                                                                   \
    _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(c)))
#define MAX(a) _mm512_max_ps(a, c)
#define GETEXP(a) _mm512_getexp_ps(a)
#define CVTDQ(a) _mm512_castsi512_ps(_mm512_cvtps_epi32(a))
#define FPCL(a) _mm512_mask_mov_ps(a, _mm512_fpclass_ps_mask(a, 0x20), c)
#define TERN(a)                                                                                    \
    _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(a), _mm512_castps_si512(c),  \
                                                  _mm512_castps_si512(c), 0x96))
#define DPBF(a)                                                                                    \
    _mm512_dpbf16_ps(a, (__m512bh)_mm512_castps_si512(c), (__m512bh)_mm512_castps_si512(c))
BODY(b_fma, FMA)
BODY(b_add, ADD)
BODY(b_mul, MUL) BODY(b_scalef, SCALEF) BODY(b_reduce, REDUCE) BODY(b_rndsc, RNDSC) BODY(b_sll, SLL)
    BODY(b_and, AND) BODY(b_permw, PERMW) BODY(b_permps, PERMPS) BODY(b_cvt2, CVT2)
        BODY(b_paddd, PADDD) BODY(b_max, MAX) BODY(b_getexp, GETEXP) BODY(b_cvtdq, CVTDQ)
            BODY(b_fpcl, FPCL) BODY(b_tern, TERN) BODY(b_dpbf, DPBF)
/* mixes: op X + op Y interleaved to see whether they share pipes */
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
                MIX(m_fma_scalef, FMA, SCALEF) MIX(m_fma_reduce, FMA, REDUCE)
                    MIX(m_fma_add, FMA, ADD) MIX(m_fma_sll, FMA, SLL) MIX(m_fma_permw, FMA, PERMW)
                        MIX(m_fma_cvt2, FMA, CVT2) MIX(m_add_scalef, ADD, SCALEF)
                            MIX(m_add_reduce, ADD, REDUCE) MIX(m_fma_fpcl, FMA, FPCL)
                                MIX(m_fma_and, FMA, AND) MIX(m_add_sll, ADD, SLL)
                                    MIX(m_scalef_reduce, SCALEF, REDUCE)
                                        MIX(m_fma_permps, FMA, PERMPS)
                                            MIX(m_fma_dpbf, FMA, DPBF) int main(void) {
    __m512 io[9];
    for (int i = 0; i < 9; i++) io[i] = _mm512_set1_ps(0.5f + i * 0.01f);
    io[8] = _mm512_set1_ps(0.999f);
#define R(f) printf("%-16s %.2f cycles/op (at 3.6GHz)\n", #f, f(io));
    R(b_fma)
    R(b_add)
        R(b_mul) R(b_scalef) R(b_reduce) R(b_rndsc) R(b_sll) R(b_and) R(b_permw) R(b_permps)
            R(b_cvt2) R(b_paddd) R(b_max) R(b_getexp) R(b_cvtdq) R(b_fpcl) R(b_tern) R(b_dpbf)
                R(m_fma_scalef) R(m_fma_reduce) R(m_fma_add) R(m_fma_sll) R(m_fma_permw)
                    R(m_fma_cvt2) R(m_add_scalef) R(m_add_reduce) R(m_fma_fpcl) R(m_fma_and)
                        R(m_add_sll) R(m_scalef_reduce) R(m_fma_permps)
                            R(m_fma_dpbf) return (int)io[0][0] &
        0;
}
// clang-format on
